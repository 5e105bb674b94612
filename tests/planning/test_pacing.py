"""The plan's pacing lever (flowherd.planning.pacing): caps at the rate the plan assumed keep a
job's collectives under the target on every link, and in simulation remove the congestion its
own bursts cause, under every network model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_routes_executed import TINY

from flowherd.engine.network import load_network
from flowherd.errors import ConfigError
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.fabric.core import LinkKind, NodeKind
from flowherd.planning.estimate import estimate_check, simulate_plan
from flowherd.planning.pacing import pacing_from_plan
from flowherd.planning.plan import Plan, SimCheck, make_plan, routes_to_splits
from flowherd.planning.traffic import TrafficMatrix, job_traffic, link_profile
from flowherd.routing.policies import ExplicitRouter

U = 0.8
# TINY at 4:1: each leaf's two 400G uplinks take the data-parallel rings' four flows a direction
# at 400G each, twice what they drain
SCENARIO = {**TINY, "name": "tiny-paced", "fabric": {**TINY["fabric"], "oversubscription": 4}}


@pytest.fixture(scope="module")
def plans():
    sc = scenario_from_mapping(SCENARIO)
    base = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True, max_utilization=U)
    paced = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True, max_utilization=U, pace=True)
    return sc, base, paced


def test_caps_cover_the_scale_out_pairs_and_round_trip(plans):
    sc, base, paced = plans
    assert "pacing" not in base.info
    caps = pacing_from_plan(paced)
    j = paced.jobs[0]
    jt = job_traffic(sc.jobs[0], j.gpus, sc.fabric).network(sc.fabric)
    assert set(caps) == set(zip(jt.src.tolist(), jt.dst.tolist(), strict=True))  # every one, no other
    assert pacing_from_plan(Plan.from_json(paced.to_json())) == caps


def test_paced_pairs_load_no_link_above_the_target(plans):
    # the job is data-parallel only across servers: its scale-out pairs are one task's pairs, all
    # active together; their caps routed by the plan's routes stay under U on every link, and
    # reach it on the task's bottleneck (MADD: the caps are the bottleneck's shares)
    sc, _, paced = plans
    caps = pacing_from_plan(paced)
    tm = TrafficMatrix(src=np.array([a for a, _ in caps]), dst=np.array([b for _, b in caps]),
                       size_bytes=np.array(list(caps.values())))
    rtr = ExplicitRouter(sc.fabric, routes_to_splits(paced.routes), fallback="spray")
    util = link_profile(sc.fabric, tm, rtr) / sc.fabric.link_capacity_bytes_per_s
    f = sc.fabric
    port = (np.asarray(f.link_kind) == LinkKind.NETWORK) & (np.asarray(f.node_kind)[f.link_src]
                                                             == NodeKind.SWITCH)
    assert util[port].max() <= U * (1 + 1e-9)
    assert util[port].max() >= U * (1 - 1e-9) or util[port].max() > 0.5 * U  # the least duration may decide


def test_a_task_whose_bottleneck_is_its_nic_is_not_slowed():
    # TINY at 1:1: the rings' flows fill no switch port (two 400G flows on a 1.6T uplink), each
    # is bound by its own NIC, where nothing queues: the caps leave the run as fast as unpaced
    sc = scenario_from_mapping({**TINY, "fabric": {**TINY["fabric"], "oversubscription": 1}})
    paced = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True, max_utilization=U, pace=True)
    assert pacing_from_plan(paced)
    raw = dataclasses.replace(paced, info={**paced.info, "pacing": {}})
    check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, fidelity=sc.fidelity, seed=1,
                     network=load_network("ideal"))
    a = simulate_plan(sc.fabric, sc.jobs, paced, check).mean_jct_s
    b = simulate_plan(sc.fabric, sc.jobs, raw, check).mean_jct_s
    assert a == pytest.approx(b, rel=1e-9)


@pytest.fixture(scope="module")
def runs(plans):
    sc, _, paced = plans
    out = {}
    for model in ("ideal", "tcp", "roce"):
        check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, fidelity=sc.fidelity, seed=1,
                         network=load_network(model))
        for name, plan in (("base", dataclasses.replace(paced, info={**paced.info, "pacing": {}})),
                           ("paced", paced)):
            sim = simulate_plan(sc.fabric, sc.jobs, plan, check)
            out[model, name] = (sim, estimate_check(sc.fabric, sc.jobs, plan, sim))
    return sc, out


@pytest.mark.parametrize("model", ["ideal", "tcp", "roce"])
def test_the_pacers_carry_their_pairs_bytes_under_every_model(runs, model):
    sc, out = runs
    sim, _ = out[model, "paced"]
    n = sc.fabric.num_directed_links
    lb = sim.cluster.link_bytes
    assert lb.size > n  # the pacers' links joined the run
    # every scale-out byte left its GPU through its pair's pacer: the pacers carried what the
    # NICs' uplinks did (a pair's bytes cross one NIC uplink once)
    kind = np.asarray(sc.fabric.link_kind)
    tier = np.asarray(sc.fabric.node_tier)
    nic_up = (kind == LinkKind.NETWORK) & (tier[sc.fabric.link_src] == 1)
    assert lb[n:].sum() == pytest.approx(lb[:n][nic_up].sum(), rel=1e-9)


def test_pacing_removes_the_jobs_own_congestion_on_roce(runs):
    _, out = runs
    (_, raw), (_, paced) = out["roce", "base"], out["roce", "paced"]
    assert raw["congested_bytes"] > 0
    assert paced["congested_bytes"] <= 0.2 * raw["congested_bytes"]
    # at a cost bounded by the target: comm at U of the bottleneck instead of all of it
    assert paced["simulated_mean_jct_s"] <= raw["simulated_mean_jct_s"] / U


def test_caps_above_every_rate_leave_the_ideal_run_unchanged(plans):
    sc, _, paced = plans
    check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, fidelity=sc.fidelity, seed=1,
                     network=load_network("ideal"))
    loose = dataclasses.replace(paced, info={**paced.info, "pacing": {
        k: v * 100 for k, v in paced.info["pacing"].items()}})
    raw = dataclasses.replace(paced, info={**paced.info, "pacing": {}})
    a = simulate_plan(sc.fabric, sc.jobs, loose, check).mean_jct_s
    b = simulate_plan(sc.fabric, sc.jobs, raw, check).mean_jct_s
    assert a == pytest.approx(b, rel=1e-12)


def test_the_pacers_hold_under_a_controller(plans):
    # a controller that delays and weights tasks (varys) leaves the routes, pacers included
    from flowherd.control import make_controller

    sc, _, paced = plans
    check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, fidelity=sc.fidelity, seed=1,
                     network=load_network("roce"))
    sim = simulate_plan(sc.fabric, sc.jobs, paced, check, controller=make_controller("varys"))
    res = sim.cluster
    assert res.jobs[0].finish_s is not None and res.router == "explicit"
    n = sc.fabric.num_directed_links
    kind = np.asarray(sc.fabric.link_kind)
    nic_up = (kind == LinkKind.NETWORK) & (np.asarray(sc.fabric.node_tier)[sc.fabric.link_src] == 1)
    assert res.link_bytes[n:].sum() == pytest.approx(res.link_bytes[:n][nic_up].sum(), rel=1e-9)


def test_the_pacers_hold_when_the_controller_chooses_the_paths(plans):
    # adaptive routing under the buffer grant (delays and paths) re-routes every collective it
    # can: its routes keep each pair's pacer (flowherd.cluster.control_api.ControlHook, pacers), so
    # every scale-out byte still crosses its pair's pacer, and caps far below the plan's slow the
    # job as they do without the controller
    from flowherd.control import make_controller

    sc, _, paced = plans
    check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, fidelity=sc.fidelity, seed=1,
                     network=load_network("roce"))
    sim = simulate_plan(sc.fabric, sc.jobs, paced, check, controller=make_controller("adaptive"))
    res = sim.cluster
    assert res.num_decisions > 0 and res.jobs[0].finish_s is not None
    n = sc.fabric.num_directed_links
    kind = np.asarray(sc.fabric.link_kind)
    nic_up = (kind == LinkKind.NETWORK) & (np.asarray(sc.fabric.node_tier)[sc.fabric.link_src] == 1)
    assert res.link_bytes[n:].sum() == pytest.approx(res.link_bytes[:n][nic_up].sum(), rel=1e-9)
    tight = dataclasses.replace(paced, info={**paced.info, "pacing": {
        k: v / 20 for k, v in paced.info["pacing"].items()}})
    slow = simulate_plan(sc.fabric, sc.jobs, tight, check, controller=make_controller("adaptive"))
    assert slow.mean_jct_s > 1.5 * sim.mean_jct_s


def test_planner_pace_in_the_scenario_reaches_the_run(plans):
    """`planner.pace` (YAML) plans with caps and the run applies the plan's caps: caps far below
    the plan's rates slow the jobs, the same plan without caps runs as the unpaced plan does."""
    from flowherd.experiments.runner import run_scenario

    sc, _, paced = plans
    assert not sc.pace
    yaml_sc = scenario_from_mapping({**SCENARIO, "planner": {"max_utilization": U, "pace": True}})
    assert yaml_sc.pace
    with pytest.raises(ConfigError, match=r"planner\.pace"):
        scenario_from_mapping({**SCENARIO, "planner": {"pace": "often"}})
    tight = dataclasses.replace(paced, info={**paced.info, "pacing": {
        k: v / 20 for k, v in paced.info["pacing"].items()}})
    none = dataclasses.replace(paced, info={**paced.info, "pacing": {}})
    jct = {name: run_scenario(sc, plan=p, solo=False).summary["mean_jct_s"]
           for name, p in (("tight", tight), ("none", none), ("paced", paced))}
    assert jct["tight"] > 1.5 * jct["none"]
    assert jct["paced"] <= jct["tight"]
