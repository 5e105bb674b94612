"""What the model cannot see: overrun slack, known background, and the simulator as evaluator."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.simulate import BackgroundSpec
from flowherd.errors import ConfigError
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.plan import SimCheck, known_background, make_plan, simulated_mean_jct_s
from flowherd.workload import TrainingJob


def _job(name, n, tp=1, iters=3, submit_s=0.0):
    return TrainingJob(model="llama3-8b", gpus=n, tp=tp, name=name, seq_len=2048,
                       global_batch=n // tp * 2, iterations=iters, submit_s=submit_s)


def test_heuristic_avoids_gpus_freed_just_now_when_costs_tie():
    # two 4-GPU servers in one leaf; b arrives exactly when a is predicted to end. Both servers
    # cost the same under the model, but a's server is only free if a does not overrun: the
    # heuristic takes the never-used server, first fit (packed) takes a's GPUs again.
    f = leaf_spine(servers=2, gpus_per_server=4, leaves=1, spines=1)
    end_a = make_plan(f, [_job("a", 4)], method="heuristic").jobs[0].predicted_jct_s
    jobs = [_job("a", 4), _job("b", 4, submit_s=end_a)]
    heur = make_plan(f, jobs, method="heuristic")
    packed = make_plan(f, jobs, method="packed")
    assert heur.jobs[1].start_s == pytest.approx(end_a)
    assert not set(heur.jobs[0].gpus) & set(heur.jobs[1].gpus)
    assert set(packed.jobs[0].gpus) == set(packed.jobs[1].gpus)
    assert heur.info["overrun_risk"] == 0.0
    assert heur.objective == pytest.approx(packed.objective)  # a tie under the model


def test_known_background_bytes_count_each_flow_at_both_ends():
    f = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    check = SimCheck(horizon_s=0.5, background=BackgroundSpec(load=0.05, max_flows_per_s=200), seed=3)
    bg = known_background(f, check)
    assert bg is not None and bg.size_bytes.size > 0
    # over the whole horizon every flow counts fully, once at its source and once at its sink
    assert bg.bytes_at(0.0, check.horizon_s, 4).sum() == pytest.approx(2 * bg.size_bytes.sum())
    # half-open windows split the bytes without loss
    mid = check.horizon_s / 3
    assert (bg.bytes_at(0.0, mid, 4) + bg.bytes_at(mid, check.horizon_s, 4)).sum() == pytest.approx(
        2 * bg.size_bytes.sum())
    # the same seed draws the same flows (they do not depend on any plan)
    again = known_background(f, check)
    assert np.array_equal(again.start_s, bg.start_s) and np.array_equal(again.src, bg.src)
    assert known_background(f, SimCheck(horizon_s=0.5)) is None


def test_sim_check_keeps_a_plan_no_worse_in_simulation_than_the_models_first():
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=2)
    jobs = [_job("a", 8, iters=2), _job("b", 4, iters=2), _job("c", 8, iters=2, submit_s=0.05)]
    check = SimCheck(horizon_s=30.0, background=BackgroundSpec(load=0.1, max_flows_per_s=200), seed=1,
                     candidates=3, max_wall_s=20.0)
    plan = make_plan(f, jobs, method="heuristic", check=check)
    info = plan.info["sim_check"]
    assert info["simulated_mean_jct_s"] <= info["candidates_simulated"][0] + 1e-12
    # the reported figure is the simulation of the returned placements
    assert simulated_mean_jct_s(f, jobs, plan.placements(), check) == pytest.approx(
        info["simulated_mean_jct_s"])
    # jobs that overlap in time never share a GPU
    for i, x in enumerate(plan.jobs):
        for y in plan.jobs[i + 1:]:
            if x.start_s < y.start_s + y.predicted_jct_s and y.start_s < x.start_s + x.predicted_jct_s:
                assert not set(x.gpus) & set(y.gpus)
    # the check does not change the model's verdict
    assert plan.objective == pytest.approx(make_plan(f, jobs, method="heuristic").objective)


def test_sim_check_rejects_bad_settings_naming_the_field():
    with pytest.raises(ConfigError, match="horizon_s"):
        SimCheck(horizon_s=0.0)
    with pytest.raises(ConfigError, match="candidates"):
        SimCheck(horizon_s=1.0, candidates=0)
    with pytest.raises(ConfigError, match="check"):
        make_plan(leaf_spine(servers=2, gpus_per_server=4, leaves=1, spines=1), [_job("a", 4)],
                  method="heuristic", check={"horizon_s": 1.0})
