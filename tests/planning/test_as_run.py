"""The model's JCTs of a plan as the simulator runs it (`flowherd.planning.estimate.predicted_as_run`)
and the per-job penalties probed under a network model (`run_penalties_s`)."""

from __future__ import annotations

import numpy as np
import pytest
from test_pacing import SCENARIO

from flowherd.engine.network import load_network
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.estimate import predicted_as_run, run_penalties_s
from flowherd.planning.plan import make_plan
from flowherd.workload import TrainingJob


def _job(name, n, iters=3, submit_s=0.0):
    return TrainingJob(model="llama3-8b", gpus=n, name=name, seq_len=2048, global_batch=n * 2,
                       iterations=iters, submit_s=submit_s)


def _fabric():
    return leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=4)


def test_as_run_is_the_plans_prediction_and_a_penalty_moves_the_jobs_behind():
    # a and b each need all 16 GPUs (4 servers): b runs after a. Without penalties the model's
    # JCTs as run are the plan's; a penalty of x per iteration on a lengthens a's run by
    # iterations * x and, b starting when a's GPUs free, b's JCT by as much
    jobs = [_job("a", 16, iters=4), _job("b", 16, submit_s=0.01)]
    plan = make_plan(_fabric(), jobs, method="heuristic")
    same = predicted_as_run(_fabric(), jobs, plan)
    assert same == pytest.approx([j.predicted_jct_s for j in plan.jobs], rel=1e-9)
    x = 0.05
    late = predicted_as_run(_fabric(), jobs, plan, penalties_s={"a": x})
    assert late[0] - same[0] == pytest.approx(4 * x, rel=1e-6)
    assert late[1] - same[1] == pytest.approx(4 * x, rel=1e-6)


@pytest.fixture(scope="module")
def tiny():
    sc = scenario_from_mapping(SCENARIO)  # 4:1: the job's ring flows overfill its leaves' uplinks
    return sc, make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True)


def test_no_penalty_on_the_ideal_network_without_background(tiny):
    sc, plan = tiny
    pen = run_penalties_s(sc.fabric, sc.jobs, plan, routing=sc.routing, network=load_network("ideal"),
                          fidelity=sc.fidelity)
    assert set(pen) == {"a"} and pen["a"] == 0.0  # the same run twice


def test_the_congestion_model_costs_the_job_what_max_min_does_not(tiny):
    # under roce the job's own flows converging on the uplinks queue, mark and pause: slower than
    # the ideal network's max-min, which the loads model (and so the plan) reproduces
    sc, plan = tiny
    pen = run_penalties_s(sc.fabric, sc.jobs, plan, routing=sc.routing, network=load_network("roce"),
                          fidelity=sc.fidelity)
    it = plan.jobs[0].predicted_iteration_s
    assert 0.0 < pen["a"] < it
    ran = predicted_as_run(sc.fabric, sc.jobs, plan, routing=sc.routing, penalties_s=pen)
    assert ran[0] == pytest.approx(plan.jobs[0].predicted_jct_s + sc.jobs[0].iterations * pen["a"], rel=1e-6)
    assert np.all(np.isfinite(ran))


def test_a_congestion_model_enters_the_plans_iteration_times(tiny):
    # make_plan(network=roce) probes each job's background term under roce against the ideal
    # network alone (no background here): what roce costs the job's own bursts lengthens its
    # predicted iteration; the ideal network's model leaves the plan as it was, bit for bit
    sc, plan = tiny
    roce = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True, network=load_network("roce"))
    assert roce.info["network_cost"] == "roce"
    assert roce.jobs[0].predicted_iteration_s > plan.jobs[0].predicted_iteration_s
    ideal = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True, network=load_network("ideal"))
    assert (ideal.jobs, ideal.routes, ideal.objective) == (plan.jobs, plan.routes, plan.objective)
    assert "network_cost" not in ideal.info
