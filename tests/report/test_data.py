"""The series a report draws: method labels, CDFs, Gantt segments, Jain's index, the fabric layout."""

import math

import numpy as np
import pytest

from flowherd.report.data import (
    fabric_layout,
    gantt,
    jain_index,
    jct_cdf,
    load_report_data,
    method_label,
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
