"""The fluid estimate of what a perfect delay-and-paths controller reaches (benchmarks/control_ceiling.py)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # control_ceiling imports the control benchmark beside it
_SPEC = importlib.util.spec_from_file_location("control_ceiling", _BENCH / "control_ceiling.py")
ceiling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ceiling)


def job(name, submit_s=0.0, gpus=8, iterations=10, alone_bg_s=1.0, group_bytes=(1.0,)):
    return {"name": name, "submit_s": submit_s, "gpus": gpus, "iterations": iterations,
            "alone_bg_s": alone_bg_s, "group_bytes": np.asarray(group_bytes, dtype=float)}


def one(c):
    return np.array([c], dtype=float)


def test_a_job_alone_runs_its_iterations_at_its_own_speed():
    # 10 iterations of 1.5 s, the tier carries 2 bytes per second, the job needs 1 / 1.5
    jct = ceiling.fluid_jct_s([job("a", alone_bg_s=1.5)], 100.0, 8, one(2.0), "fair")
    assert jct == pytest.approx(15.0)


def test_two_jobs_over_a_tier_for_one_share_it_or_take_turns():
    # each needs 1 byte per iteration at 1 iteration per second; the tier carries 1 byte per
    # second: fair sharing halves both (both end at 20 s); least time left first ends one at
    # 10 s and the other at 20 s (Schrage's order: the mean 15 s)
    jobs = [job("a"), job("b")]
    assert ceiling.fluid_jct_s([dict(j) for j in jobs], 100.0, 16, one(1.0), "fair") == pytest.approx(20.0)
    assert ceiling.fluid_jct_s([dict(j) for j in jobs], 100.0, 16, one(1.0), "srpt") == pytest.approx(15.0)


def test_the_queue_is_strict_fifo_for_gpus_and_jcts_are_censored_at_the_horizon():
    # a holds all 8 GPUs for 10 s; b (submitted at 1 s) starts at 10 s and would end at 30 s,
    # censored at the 25 s horizon: JCTs 10 and 24; c (no network bytes) waits behind b
    jobs = [job("a"), job("b", submit_s=1.0, iterations=20), job("c", submit_s=2.0, group_bytes=(0.0,))]
    jct = ceiling.fluid_jct_s(jobs, 25.0, 8, one(100.0), "fair")
    assert jct == pytest.approx((10.0 + 24.0 + 23.0) / 3)


@pytest.mark.parametrize("order", ["fair", "srpt"])
def test_a_job_without_network_bytes_is_never_slowed_by_the_leaves(order):
    jobs = [job("a", group_bytes=(0.0,)), job("b", group_bytes=(5.0,))]
    rates = ceiling._rates(jobs, {id(j): 10.0 for j in jobs}, one(1.0), order)
    assert rates[id(jobs[0])] == pytest.approx(1.0)
    assert rates[id(jobs[1])] == pytest.approx(0.2)  # the group's 1 byte per second over 5 per iteration


def test_fair_shares_fill_progressively_over_the_groups():
    # groups of capacity 1 and 4 bytes per second; a (1 byte/it on group 0) and b (1 on group 0,
    # 1 on group 1) share group 0 at 0.5 iterations per second each; c (2 on group 1) is only on
    # group 1, where b takes 0.5: c gets min(1, 3.5 / 2) = its full speed
    jobs = [job("a", group_bytes=(1.0, 0.0)), job("b", group_bytes=(1.0, 1.0)),
            job("c", group_bytes=(0.0, 2.0))]
    rates = ceiling._rates(jobs, {id(j): 10.0 for j in jobs}, np.array([1.0, 4.0]), "fair")
    assert [rates[id(j)] for j in jobs] == pytest.approx([0.5, 0.5, 1.0])


def test_the_leaf_groups_of_a_leaf_spine_are_each_leafs_uplinks_and_downlinks():
    from flowherd.fabric.generators.leaf_spine import leaf_spine

    fab = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2, oversubscription=2.0)
    links, group, n = ceiling.leaf_groups(fab)
    assert n == 4 and links.size == 8  # 2 leaves x 2 spines, both directions
    assert np.bincount(group).tolist() == [2, 2, 2, 2]  # each leaf's 2 uplinks, its 2 downlinks


def test_without_a_leaf_limit_every_job_runs_at_its_speed_alone_in_the_fifo_queue():
    # the "alone" replay: a and b (8 GPUs each, 16 in all) run at once at their own speeds (10 and
    # 20 s) whatever their bytes; c waits for a's GPUs (starts at 10 s, ends at 15 s)
    jobs = [job("a", group_bytes=(50.0,)), job("b", iterations=20, group_bytes=(50.0,)),
            job("c", submit_s=1.0, iterations=5)]
    jct = ceiling.fluid_jct_s(jobs, 100.0, 16, np.full(1, np.inf), "fair")
    assert jct == pytest.approx((10.0 + 20.0 + 14.0) / 3)
