"""What the figures draw, read back from the figures, not only that they
render: the plotted values equal the series, one load compares methods side by side, an outlier
tenant turns the axis logarithmic, the fabric's colours are tenants with numbered jobs, the Gantt
title fits, and equal runs are labelled as ties."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="the report extra is not installed")

from flowherd.report.data import (
    LINEAR_SPREAD_MAX,
    ROW_STEP,
    controller_label,
    fabric_layout,
    jct_cdf,
    job_labels,
    load_report_data,
    method_label,
    slowdown_vs_load,
    tenant_axis_scale,
    tenant_slowdowns,
)
from flowherd.report.figures import (
    fig_fabric,
    fig_gantt,
    fig_jct_cdf,
    fig_slowdown_vs_load,
    fig_tenant_fairness,
)


@pytest.fixture(scope="module")
def data(store_dir):
    return load_report_data(store_dir)


def _one_load(data, load=0.0):
    return dataclasses.replace(data, runs=[r for r in data.runs if (r["background_load"] or 0.0) == load])


def test_jct_cdf_lines_are_the_sorted_jcts_of_each_method(data):
    ax = fig_jct_cdf(data).axes[0]
    series = jct_cdf(data)
    lines = [ln for ln in ax.get_lines() if ln.get_label() and not ln.get_label().startswith("_")]
    assert len(lines) == len(series)
    for line, (m, (x, y, _)) in zip(lines, series.items(), strict=True):
        assert line.get_label().startswith(m)
        np.testing.assert_allclose(line.get_xdata()[1:], x)
        np.testing.assert_allclose(line.get_ydata()[1:], y)


def _errorbar_lines(ax):
    # an errorbar is a container (data line, caps, bars) carrying the label
    return {c.get_label(): c.lines[0] for c in ax.containers}


def test_slowdown_over_loads_plots_each_methods_mean_at_each_load(data):
    ax = fig_slowdown_vs_load(data).axes[0]
    series = slowdown_vs_load(data)
    assert "(% of link capacity)" in ax.get_xlabel() and "mean of 1 seed;" in ax.get_title()
    drawn = _errorbar_lines(ax)
    for m, s in series.items():
        np.testing.assert_allclose(drawn[m].get_xdata(), 100 * s["load"])
        np.testing.assert_allclose(drawn[m].get_ydata(), s["mean"])


def test_one_load_compares_the_methods_side_by_side(data):
    # with one load, four dots on one x would hide each other: each method gets its own x position
    one = _one_load(data)
    series = slowdown_vs_load(one)
    assert all(len(s["load"]) == 1 for s in series.values()) and len(series) >= 2
    ax = fig_slowdown_vs_load(one).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(series)
    assert "background load 0%" in ax.get_xlabel() and "mean of 1 seed;" in ax.get_title()
    drawn = _errorbar_lines(ax)
    xs = [float(drawn[m].get_xdata()[0]) for m in series]
    assert xs == list(range(len(series)))  # distinct positions, not one stack
    for m, s in series.items():
        assert float(drawn[m].get_ydata()[0]) == pytest.approx(float(s["mean"][0]))


def _tenant_data(data, factor):
    tenants = [dict(t) for t in data.tenants]
    first = tenants[0]["tenant"]
    for t in tenants:
        if t["tenant"] == first and t["mean_slowdown"] is not None:
            t["mean_slowdown"] = factor
    return dataclasses.replace(data, tenants=tenants)


def test_an_outlier_tenant_turns_the_axis_logarithmic_and_keeps_the_others_readable(data):
    outlier = _tenant_data(data, 34.0)  # one 34x tenant bar would squash the others
    _, series = tenant_slowdowns(outlier)
    assert tenant_axis_scale(series) == "log"
    ax = fig_tenant_fairness(outlier).axes[0]
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    heights = [p.get_height() for p in ax.patches if np.isfinite(p.get_height())]
    finite = np.concatenate([v[np.isfinite(v)] for v in series.values()])
    assert sorted(heights) == pytest.approx(sorted(finite))
    lo, hi = ax.get_ylim()
    assert lo <= finite.min() and hi >= finite.max()
    # the labels carry the values, so the smaller bars can be read
    labels = {t.get_text() for t in ax.texts}
    assert "34.0x" in labels and len(labels) > 1


def test_close_tenant_slowdowns_stay_on_a_linear_axis(data):
    _, series = tenant_slowdowns(data)
    finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in series.values()])
    assert finite.max() / finite.min() <= LINEAR_SPREAD_MAX
    assert fig_tenant_fairness(data).axes[0].get_yscale() == "linear"


def test_the_fabric_colours_tenants_and_numbers_jobs_in_the_legend(data):
    view = data.detail[0]
    lay = fabric_layout(view)
    ran = [j for j in view.jobs if j["gpus"]]
    assert sorted(lay.job_number.values()) == list(range(1, len(ran) + 1))
    assert all(lay.job_tenant[j["name"]] == j["tenant"] for j in ran)
    ax = fig_fabric(view).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for name, k in lay.job_number.items():
        assert any(t.startswith(f"{k}: ") and t.endswith(f"({lay.job_tenant[name]})".replace("$", r"\$"))
                   for t in legend), (k, name)
    drawn = sorted((t.get_text(), *t.get_position()) for t in ax.texts if t.get_text().isdigit())
    assert drawn == sorted((str(lab.number), lab.x, lab.y) for lab in job_labels(lay))
    assert {int(text) for text, _, _ in drawn} == set(lay.job_number.values())  # every job is named
    # the GPUs take as many colours as there are tenants, not one per job
    gpu_colors = set()
    for coll in ax.collections[1:]:
        for c in coll.get_facecolors():
            gpu_colors.add(tuple(np.round(c, 3)))
    assert len(gpu_colors) <= len(set(lay.job_tenant.values())) + 2  # + idle GPUs and switches


def test_the_gantt_title_fits_the_figure(data):
    fig = fig_gantt(data.detail[0])
    fig.canvas.draw()
    title = fig.axes[0].title
    box = title.get_window_extent(renderer=fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height
    assert data.detail[0].run["run_id"] in title.get_text()


def test_equal_runs_are_labelled_as_ties_not_as_a_best():
    run = {"placement": "heuristic", "routing": "ecmp", "controller": "crux",
           "params": {"role": "best baseline", "tied": ["sincronia", "varys"]}}
    assert method_label(run, {"placement", "controller"}, []) == \
        "flowherd planner + best baseline (tie: Crux = Sincronia = Varys)"
    assert controller_label("varys", "best baseline") == "best baseline (Varys)"
    assert "tie" not in controller_label("crux", "best baseline", ())


def test_the_html_charts_draw_the_same_choices(data):
    pytest.importorskip("plotly", reason="the report extra is not installed")
    from flowherd.report.html import plot_slowdown, plot_tenants

    one = _one_load(data)
    fig = plot_slowdown(one)
    series = slowdown_vs_load(one)
    assert [tr.x[0] for tr in fig.data if tr.name in series] == list(series)
    assert [float(tr.y[0]) for tr in fig.data if tr.name in series] == \
        pytest.approx([float(s["mean"][0]) for s in series.values()])
    assert "1 seed" in fig.layout.title.text
    assert plot_tenants(_tenant_data(data, 34.0)).layout.yaxis.type == "log"
    assert plot_tenants(data).layout.yaxis.type == "linear"


def test_job_numbers_sit_on_their_own_gpus_in_every_server_and_do_not_collide(data):
    for view in data.detail:
        lay = fabric_layout(view)
        g = lay.num_gpus
        labels = job_labels(lay)
        for lab in labels:
            # the job's GPUs in the server box the label is in, on the row the job takes there
            box = next((x0, x1) for x0, x1 in lay.server_box if x0 <= lab.x <= x1)
            mine = [i for i in range(g) if lab.job in lay.occupants[i] and box[0] <= lay.node_x[i] <= box[1]]
            assert mine, (lab, box)
            assert min(lay.node_x[mine]) <= lab.x <= max(lay.node_x[mine])
            rows = {-ROW_STEP * lay.occupants[i].index(lab.job) for i in mine}
            assert any(abs(lab.y - r) <= 0.5 * ROW_STEP for r in rows)
        for a in labels:  # no two numbers drawn on one spot
            assert not any(b is not a and abs(a.x - b.x) < 2.5 and abs(a.y - b.y) < 0.3 * ROW_STEP
                           for b in labels), a
        # one label per job, server it ran in and row it took there
        blocks = {(j, d, next(s for s, (x0, x1) in enumerate(lay.server_box) if x0 <= lay.node_x[i] <= x1))
                  for i in range(g) for d, j in enumerate(lay.occupants[i])}
        assert len(labels) == len(blocks)
