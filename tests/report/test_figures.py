"""PNG figures: written, readable, with units on their axes."""

import pytest

pytest.importorskip("matplotlib", reason="the report extra is not installed")

import matplotlib.image as mpimg

from flowherd.report.data import load_report_data
from flowherd.report.figures import (
    fig_gantt,
    fig_jct_cdf,
    fig_slowdown_vs_load,
    fig_tenant_fairness,
    write_figures,
)


def test_write_figures_writes_every_figure_as_a_png(store_dir, tmp_path):
    paths = write_figures(load_report_data(store_dir), tmp_path)
    names = sorted(p.name for p in paths)
    assert names == sorted(["jct_cdf.png", "slowdown_vs_load.png", "tenant_fairness.png",
                            "link_utilization.png", "gantt_0.png", "gantt_1.png", "fabric_0.png",
                            "fabric_1.png"])
    for p in paths:
        img = mpimg.imread(p)
        assert img.shape[0] > 300 and img.shape[1] > 600
        assert img[..., :3].std() > 0.05  # not blank


def test_axes_carry_units_and_legends_name_methods(store_dir):
    d = load_report_data(store_dir)
    ax = fig_jct_cdf(d).axes[0]
    assert ax.get_xlabel() == "job completion time (s)"
    assert [t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()] == d.methods
    assert ax.get_ylabel() == "fraction of jobs finished"
    ax = fig_slowdown_vs_load(d).axes[0]
    assert "(% of link capacity)" in ax.get_xlabel() and "slowdown (x" in ax.get_ylabel()
    assert "Jain" in fig_tenant_fairness(d).axes[0].get_legend().get_texts()[0].get_text()
    assert fig_gantt(d.detail[0]).axes[0].get_xlabel() == "time (s)"
