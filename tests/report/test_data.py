"""The series a report draws: method labels, CDFs, Gantt segments, Jain's index, the fabric layout."""

import math

import numpy as np
import pytest

from flowherd.errors import ConfigError
from flowherd.report.data import (
    controller_label,
    fabric_layout,
    gantt,
    jain_index,
    jct_cdf,
    load_report_data,
    method_label,
    method_rank,
    slowdown_vs_load,
    tenant_slowdowns,
)


def _run(placement="first-fit", routing="ecmp", controller=None, **params):
    return {"placement": placement, "routing": routing, "controller": controller, "params": params}


def test_method_labels_name_what_varies_as_users_know_it():
    assert method_label(_run(), set(), []) == "first-fit + ECMP"
    assert method_label(_run("packed"), {"placement"}, []) == "packed"
    assert method_label(_run("packed", "spray"), {"placement", "routing"}, []) == "packed + packet spraying"
    assert method_label(_run(controller="cassini"), {"controller"}, []) == "CASSINI"
    r = _run("packed", **{"fabric.oversubscription": 2})
    assert method_label(r, {"placement"}, ["fabric.oversubscription"]) == "packed, 2:1 oversubscribed"


def test_labels_tell_placement_and_controller_apart_and_name_the_role():
    # flowherd demo stores each compared run with its role; the label keeps placement and controller
    runs = [_run("packed", role="no control"), _run("heuristic", role="no control"),
            _run("heuristic", controller="crux", role="best baseline"),
            _run("heuristic", controller="threshold", role="flowherd")]
    labels = [method_label(r, {"placement", "controller"}, []) for r in runs]
    assert labels == ["packed + no control", "flowherd planner + no control",
                      "flowherd planner + best baseline (Crux)", "flowherd planner + flowherd threshold"]
    # the role is shown even when only the placement varies, and is never an axis of the label
    assert method_label(runs[2], {"placement"}, []) == "flowherd planner + best baseline (Crux)"
    assert method_label(_run("heuristic", controller="crux"), {"placement", "controller"}, []) == (
        "flowherd planner + Crux")


def test_controller_label_adds_the_role_only_where_the_name_lacks_it():
    assert controller_label("varys", "best baseline") == "best baseline (Varys)"
    assert controller_label("flowherd", "flowherd") == "flowherd policy"
    assert controller_label(None) == controller_label("none", "no control") == "no control"
    assert controller_label("my-policy", "flowherd") == "flowherd (my-policy)"  # unknown names as given


def test_methods_rank_baselines_before_flowherd():
    order = [_run("heuristic", controller="flowherd"), _run("heuristic", controller="cassini"),
             _run("packed", controller="cassini"), _run("heuristic"), _run("packed")]
    ranked = sorted(order, key=method_rank)
    assert [(r["placement"], r["controller"]) for r in ranked] == [
        ("packed", None), ("heuristic", None), ("packed", "cassini"), ("heuristic", "cassini"),
        ("heuristic", "flowherd")]


def test_report_data_can_be_limited_to_sweeps(store_dir):
    assert len(load_report_data(store_dir, sweeps=["report-test"]).runs) == 5
    with pytest.raises(ConfigError, match=r"no runs of sweeps \['demo'\]; expected some of \['report-test"):
        load_report_data(store_dir, sweeps=["demo"])


def test_jain_index_closed_forms():
    # Jain, Chiu, Hawe (1984): 1 for equal shares, 1/n when one of n gets everything
    assert jain_index(np.array([2.0, 2.0, 2.0])) == pytest.approx(1.0)
    assert jain_index(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    assert jain_index(np.array([1.0, 3.0])) == pytest.approx(16 / 20)
    assert math.isnan(jain_index(np.array([np.nan])))


def test_report_data_groups_runs_by_method_and_skips_failed_runs(store_dir):
    d = load_report_data(store_dir)
    assert d.methods == ["first-fit", "packed"]  # the failed run names no method of the figures
    assert len(d.runs) == 5 and len(d.failed) == 1 and "no-such-placer" in d.failed[0]["error"]
    # one detail run per method, at the highest load
    assert [v.run["background_load"] for v in d.detail] == [0.4, 0.4]
    assert {v.method for v in d.detail} == {"first-fit", "packed"}


def test_jct_cdf_holds_every_finished_job_once(store_dir):
    d = load_report_data(store_dir)
    for m, (x, y, n) in jct_cdf(d).items():
        mine = [j for j in d.jobs if j["method"] == m]
        finished = [j for j in mine if j["finished"]]
        assert x.size == len(finished) and n == len(mine)
        assert np.all(np.diff(x) >= 0) and y[-1] == pytest.approx(len(finished) / len(mine))


def test_slowdown_series_has_one_point_per_load(store_dir):
    s = slowdown_vs_load(load_report_data(store_dir))
    for series in s.values():
        assert series["load"].tolist() == [0.0, 0.4]
        assert np.all(series["min"] <= series["mean"]) and np.all(series["mean"] <= series["max"])
    tenants, per = tenant_slowdowns(load_report_data(store_dir))
    assert len(tenants) == 4 and all(v.shape == (4,) for v in per.values())


def test_gantt_iterations_tile_each_finished_training_job(store_dir):
    d = load_report_data(store_dir)
    for v in d.detail:
        for row, job in zip(gantt(v), v.jobs, strict=True):
            if not job["finished"]:
                continue
            busy = sum(w for _, w in row.compute) + sum(w for _, w in row.comm)
            # compute + communication parts cover start..finish exactly, iteration by iteration
            assert busy == pytest.approx(job["finish_s"] - job["start_s"], rel=1e-9)
            assert len(row.compute) == job["iterations"]


def test_fabric_layout_places_every_gpu_and_records_its_jobs(store_dir):
    v = load_report_data(store_dir).detail[0]
    lay = fabric_layout(v)
    assert lay.num_gpus == 64 and np.all(np.isfinite(lay.node_x[:64])) and np.all(lay.node_y[:64] == 0)
    assert len(lay.server_box) == 8
    for job in v.jobs:
        for g in job["gpus"]:
            assert job["name"] in lay.occupants[g]
    # every drawn cable joins two drawn nodes of adjacent levels
    a, b = lay.edges[:, 0], lay.edges[:, 1]
    ok = np.isfinite(lay.node_y[a]) & np.isfinite(lay.node_y[b])
    assert ok.any() and np.all(np.abs(lay.node_y[a][ok] - lay.node_y[b][ok]) == 1)
