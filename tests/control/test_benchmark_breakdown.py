"""The control benchmark's accounting of where the mean JCT goes (benchmarks/control.py)."""

import importlib.util
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
