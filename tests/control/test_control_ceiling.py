"""The fluid estimate of what a perfect delay-and-paths controller reaches (benchmarks/control_ceiling.py)."""

import importlib.util
import sys
from pathlib import Path

import pytest

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # control_ceiling imports the control benchmark beside it
_SPEC = importlib.util.spec_from_file_location("control_ceiling", _BENCH / "control_ceiling.py")
ceiling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ceiling)


def job(name, submit_s=0.0, gpus=8, iterations=10, alone_bg_s=1.0, tier_bytes=1.0):
    return {"name": name, "submit_s": submit_s, "gpus": gpus, "iterations": iterations,
            "alone_bg_s": alone_bg_s, "tier_bytes": tier_bytes}


def test_a_job_alone_runs_its_iterations_at_its_own_speed():
    # 10 iterations of 1.5 s, the tier carries 2 bytes per second, the job needs 1 / 1.5
    jct = ceiling.fluid_jct_s([job("a", alone_bg_s=1.5)], 100.0, 8, 2.0, "fair")
    assert jct == pytest.approx(15.0)


def test_two_jobs_over_a_tier_for_one_share_it_or_take_turns():
    # each needs 1 byte per iteration at 1 iteration per second; the tier carries 1 byte per
    # second: fair sharing halves both (both end at 20 s); least time left first ends one at
    # 10 s and the other at 20 s (Schrage's order: the mean 15 s)
    jobs = [job("a"), job("b")]
    assert ceiling.fluid_jct_s([dict(j) for j in jobs], 100.0, 16, 1.0, "fair") == pytest.approx(20.0)
    assert ceiling.fluid_jct_s([dict(j) for j in jobs], 100.0, 16, 1.0, "srpt") == pytest.approx(15.0)


def test_the_queue_is_strict_fifo_for_gpus_and_jcts_are_censored_at_the_horizon():
    # a holds all 8 GPUs for 10 s; b (submitted at 1 s) starts at 10 s and would end at 30 s,
    # censored at the 25 s horizon: JCTs 10 and 24; c (no network bytes) waits behind b
    jobs = [job("a"), job("b", submit_s=1.0, iterations=20), job("c", submit_s=2.0, tier_bytes=0.0)]
    jct = ceiling.fluid_jct_s(jobs, 25.0, 8, 100.0, "fair")
    assert jct == pytest.approx((10.0 + 24.0 + 23.0) / 3)


def test_a_job_without_network_bytes_is_never_slowed_by_the_tier():
    jobs = [job("a", tier_bytes=0.0), job("b", tier_bytes=5.0)]
    rates = ceiling._rates(jobs, {id(j): 10.0 for j in jobs}, 1.0, "srpt")
    assert rates[id(jobs[0])] == pytest.approx(1.0)
    assert rates[id(jobs[1])] == pytest.approx(0.2)  # the tier's 1 byte per second over 5 per iteration
