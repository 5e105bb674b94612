"""The control benchmark's accounting of where the mean JCT goes (benchmarks/control.py)."""

import importlib.util
import math
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "control_benchmark", Path(__file__).resolve().parents[2] / "benchmarks" / "control.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_wait_solo_and_contention_add_up_to_the_censored_mean_jct():
    # a: waits 2 s, runs 10 s of which 4 s at its solo speed (4 iterations of 1 s); b: waits 5 s,
    # still running at the 30 s horizon (25 s of run, 20 iterations of 1 s solo); c: never started
    # (waits to the horizon); d: submitted after the horizon (not counted)
    detail = [{"name": "a", "submit_s": 0.0, "start_s": 2.0, "finish_s": 12.0, "iterations": 4,
               "solo_iteration_s": 1.0},
              {"name": "b", "submit_s": 0.0, "start_s": 5.0, "finish_s": None, "iterations": 20,
               "solo_iteration_s": 1.0},
              {"name": "c", "submit_s": 10.0, "start_s": None, "finish_s": None, "iterations": 0,
               "solo_iteration_s": None},
              {"name": "d", "submit_s": 31.0, "start_s": None, "finish_s": None, "iterations": 0,
               "solo_iteration_s": None}]
    b = bench.breakdown({"job_detail": detail}, 30.0)
    assert b["wait"] == pytest.approx((2 + 5 + 20) / 3)
    assert b["solo"] == pytest.approx((4 + 20) / 3)
    assert b["contention"] == pytest.approx((6 + 5) / 3)
    censored = [12.0, 30.0, 20.0]  # each job's JCT, censored at the horizon
    assert sum(b.values()) == pytest.approx(sum(censored) / 3)


def test_a_seeds_bound_is_the_least_of_its_runs_and_gap_closed_needs_a_gap_above_the_spread():
    # seed 0: no control 100 s, bounds 20 s (no control's run) and 18 s (x's run: other GPUs):
    # the seed's bound is 18 s, x closes (100 - 59) / (100 - 18) = 50%; seed 1: no control 50 s,
    # bound 10 s, x 30 s: 50%
    def row(ctl, seed, jct, bound):
        return {"controller": ctl, "seed": seed, "mean_jct_s": jct, "bound_jct_s": bound}

    rows = [row("none", 0, 100.0, 20.0), row("x", 0, 59.0, 18.0), row("none", 1, 50.0, 10.0),
            row("x", 1, 30.0, 10.0)]
    assert bench.bounds.seed_bound(rows, 0, "bound_jct_s") == 18.0
    x = [r for r in rows if r["controller"] == "x"]
    assert bench.bounds.gap_shares(x, rows).tolist() == pytest.approx([50.0, 50.0])
    ok, gap, spread = bench.bounds.gap_exceeds_spread(rows)
    # gaps 82 and 40 s (mean 61) against no control's spread over seeds (std of 100 and 50: 35.4)
    assert ok and gap == pytest.approx(61.0) and spread == pytest.approx(35.355, rel=1e-3)
    small = [row("none", 0, 100.0, 99.0), row("none", 1, 50.0, 49.0)]  # 1 s gaps, 35 s spread
    assert not bench.bounds.gap_exceeds_spread(small)[0]
    assert bench.bounds.beaten(rows) == [] and bench.bounds.beaten([row("none", 0, 9.0, 10.0)])


def test_a_no_op_controllers_rows_are_no_controls_of_the_same_scenario_and_seed():
    # under buffer, crux on heavy seeds 0 and 1: seed 0 takes no control's heavy seed-0 row (not
    # medium's, not seed 1's); seed 1 has no no-control row and gets none
    rows = [{"scenario": "heavy", "controller": "none", "seed": 0, "mean_jct_s": 10.0, "refused": 0},
            {"scenario": "medium", "controller": "none", "seed": 0, "mean_jct_s": 20.0, "refused": 0},
            {"scenario": "heavy", "controller": "adaptive", "seed": 1, "mean_jct_s": 30.0, "refused": 0}]
    tasks = [("heavy", "p", "crux", "crux", {}, sd, "buffer", "roce") for sd in (0, 1)]
    got = bench.no_op_rows(tasks, rows)
    assert len(got) == 1
    assert (got[0]["controller"], got[0]["seed"], got[0]["mean_jct_s"]) == ("crux", 0, 10.0)
    assert got[0]["same_run_as"] == "none" and got[0]["refused"] is None
    assert bench.NO_OP["mltcp"] == ("buffer",)  # MLTCP's weights apply under weighted


def test_runs_without_the_background_are_reused_only_by_a_benchmark_without_it():
    rows = [{"scenario": "heavy", "controller": "none", "seed": 0, "grant": "buffer", "network": "roce"},
            {"scenario": "heavy", "controller": "none", "seed": 0, "grant": "buffer", "network": "roce",
             "background": "off", "mean_jct_s": 1.0},
            {"scenario": "heavy", "controller": "none", "seed": 1, "network": "ideal"}]
    on = bench.reusable(rows, "roce", True)
    off = bench.reusable(rows, "roce", False)
    key = ("heavy", "none", 0, "buffer")
    assert list(on) == [key] and "background" not in on[key]
    assert off[key]["mean_jct_s"] == 1.0
    assert bench.reusable(rows, "ideal", True) == {("heavy", "none", 1, "buffer"): rows[2]}


def test_a_run_without_the_background_has_no_background_flows_and_records_the_gpu_ids():
    tiny = Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml"
    task = ("tiny", tiny, "none", "none", {}, 1, "buffer", None)
    with_bg = bench.run_one(task)  # the 8-field task of earlier runs: the scenario's background
    without = bench.run_one((*task, False))
    assert "background" not in with_bg and without["background"] == "off"
    assert with_bg["bg_mean_fct_s"] > 0 and math.isnan(without["bg_mean_fct_s"])
    for r in (with_bg, without):
        assert [len(d["gpu_ids"]) for d in r["job_detail"]] == [d["gpus"] for d in r["job_detail"]]
        assert r["cpu_s"] > 0


def test_a_run_made_with_another_policy_code_is_not_reused():
    # the fingerprint covers a controller's module and the flowherd.control modules it imports:
    # flowherd imports periodic and threshold, none (baselines) none of them
    codes = {lab: bench.policy_code(lab) for lab in ("none", "flowherd", "interleave")}
    assert codes["none"] != codes["flowherd"] != codes["interleave"]
    assert codes["flowherd"] == bench.policy_code("flowherd")  # the same code, the same fingerprint
    row = {"scenario": "heavy", "seed": 0, "grant": "buffer", "network": "roce"}
    rows = [{**row, "controller": "none", "policy_code": codes["none"]},
            {**row, "controller": "flowherd", "policy_code": "0" * 12},  # an older policy
            {**row, "controller": "interleave"}]  # written before the fingerprints: taken
    got = bench.reusable(rows, "roce", True, codes)
    assert sorted(k[1] for k in got) == ["interleave", "none"]
    assert len(bench.reusable(rows, "roce", True)) == 3  # without codes every row is taken


def test_each_tenants_slowdown_is_averaged_over_the_seeds_where_it_has_one():
    # tenant t1 finished jobs on both seeds of "x" (slowdowns 2 and 4 -> 3), t2 on seed 1 only;
    # "y" has no tenant figures and is left out
    rows = [{"controller": "x", "seed": 0, "tenant_slowdown": {"t1": 2.0}},
            {"controller": "x", "seed": 1, "tenant_slowdown": {"t1": 4.0, "t2": 1.5}},
            {"controller": "y", "seed": 0, "tenant_slowdown": {}}]
    assert bench.tenant_slowdowns(rows, ["x", "y"]) == {"x": {"t1": (3.0, 2), "t2": (1.5, 1)}}


def test_mltcps_run_under_priority_is_its_run_under_weighted():
    # SAME_RUN takes MLTCP's weighted run for priority: it sets weights only, never a class, so its
    # jobs stay unmarked, at the background's level, under both grants. The two-job case
    # with the heavy scenario's background, 6 iterations, roce: the same JCTs and background FCTs
    # under both, and not no control's (the weights apply)
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    assert bench.SAME_RUN["mltcp"]["priority"] == ("priority", "weighted")
    base = read_scenario_mapping(Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios"
                                 / "control_two_jobs.yaml")
    for j in base["workload"]["jobs"]:
        j["iterations"] = 6
    base["workload"]["background"] = {"load": 0.1, "distribution": "web_search", "max_flows_per_s": 20}

    def run(name, grant):
        res = run_scenario(scenario_from_mapping({**base, "controller": {"name": name, "levers": grant}}))
        return res.cluster.censored_jct_s().tolist(), res.summary["background"]["p99_fct_s"]

    weighted = run("mltcp", "weighted")
    assert run("mltcp", "priority") == weighted
    assert run("none", "buffer")[0] != weighted[0]


def test_network_is_a_models_name_or_an_inline_mapping():
    assert bench.network_arg("roce") == "roce" and bench.network_arg(None) is None
    got = bench.network_arg("{model: roce, default_queue: 7, lossless: [0, 7]}")
    assert got == {"model": "roce", "default_queue": 7, "lossless": [0, 7]}
    rows = [{"scenario": "heavy", "controller": "none", "seed": 0, "grant": "priority", "network": got},
            {"scenario": "heavy", "controller": "none", "seed": 0, "grant": "priority", "network": "roce"}]
    # the mapping's run, not roce's
    assert bench.reusable(rows, {"heavy": got}, True) == {("heavy", "none", 0, "priority"): rows[0]}


def test_the_home_grant_table_pairs_each_baseline_with_flowherd_under_its_grant():
    import sys

    from flowherd.cluster.control_api import levers_from

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "control_home", Path(__file__).resolve().parents[2] / "benchmarks" / "control_home.py")
    home = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(home)
    tasks = home.tasks_for("heavy", Path("x.yaml"), range(1), "roce")
    # no control, the five baselines, flowherd under each of the four home grants
    assert len(tasks) == 1 + 5 + 4
    # --baselines cassini: no control, CASSINI and flowherd under CASSINI's grant (delays) only
    one = home.tasks_for("heavy", Path("x.yaml"), range(2), "roce", baselines=["cassini"])
    assert [(t[2], t[5]) for t in one] == [(c, s) for s in (0, 1)
                                           for c in ("none", "cassini", "flowherd@delays")]
    assert all(t[6] == home.HOME["delays"] for t in one if t[2] != "none")
    assert {g: levers_from(v).delay for g, v in home.HOME.items()} == {
        "delays": True, "paths+classes": False, "weights": False, "classes+weights": False}
    assert levers_from(home.HOME["paths+classes"]).priority_classes == 8

    def row(ctl, seed, jct):
        return {"scenario": "heavy", "controller": ctl, "seed": seed, "mean_jct_s": jct, "bg_mean_fct_s": 1.0,
                "bg_p99_fct_s": 2.0, "tenant_slowdown": {"t": jct / 10}, "refused": 0}

    rows = [row("none", s, 100.0) for s in (0, 1)] + [row("mltcp", 0, 90.0), row("mltcp", 1, 92.0),
                                                       row("flowherd@weights", 0, 80.0),
                                                       row("flowherd@weights", 1, 81.0)]
    t = home.table(rows, "heavy")
    assert [r[1] for r in t] == ["mltcp", "flowherd@weights"]
    assert t[0][4].startswith("-10.50 +-") and "flowherd ahead" in t[0][4]  # paired: -10, -11


def test_a_stored_runs_job_bounds_are_taken_for_a_job_on_the_same_gpus():
    # job a on GPUs 0-15 carries a stored bound (a sentinel no LP gives: 123 s an iteration); a new
    # run of the same scenario and seed takes it for a on those GPUs and solves b's LP itself
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" / "control_two_jobs.yaml"
    a = {"name": "a", "submit_s": 0.0, "start_s": 0.0, "finish_s": 10.0, "gpus": 16, "iterations": 5,
         "gpu_ids": list(range(16))}
    b = {**a, "name": "b", "gpu_ids": list(range(16, 32))}
    stored = {"scenario": "two", "seed": 7, "job_detail": [{**a, "bound_iteration_s": 123.0}]}
    assert bench.bounds.remember([stored], {"two": path}) == 1
    assert bench.bounds.remember([{**stored, "scenario": "other"}], {"two": path}) == 0
    out = bench.bounds.run_bounds({"scenario": "two", "seed": 7, "job_detail": [a, b]}, path)
    got = {d["name"]: d["bound_iteration_s"] for d in out["job_detail"]}
    assert got["a"] == 123.0
    assert 0 < got["b"] < 1.0  # a Llama-3-8B iteration on 16 H100s, solved
    # another seed, or a on other GPUs: not the stored run's job, solved
    other = bench.bounds.run_bounds({"scenario": "two", "seed": 8, "job_detail": [a]}, path)
    assert other["job_detail"][0]["bound_iteration_s"] == pytest.approx(got["b"])
