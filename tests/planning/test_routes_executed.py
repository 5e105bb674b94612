"""Routes executed as planned: the simulator sends a plan's traffic exactly over the plan's
paths, under every network model, with and without a controller that does not choose paths,
and with a controller that does (adaptive routing) when the grant (``controller.levers``)
withholds ``paths``; granted ``paths``, that controller moves traffic off the plan by design."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flowherd.engine.network import MODELS, load_network
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.planning.estimate import simulate_plan
from flowherd.planning.plan import SimCheck, make_plan

TINY = {"name": "tiny-routes", "seed": 1,
        "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 4, "gpu": "h100",
                   "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 2, "spines": 2,
                   "oversubscription": 2, "link_latency": "1us"},
        "workload": {"jobs": [{"name": "a", "model": "llama3-8b", "gpus": 12,
                               "parallelism": {"tp": 4, "dp": 3}, "seq_len": 1024, "global_batch": 6,
                               "iterations": 2}]},
        "simulation": {"fidelity": "collective", "horizon": "1min", "routing": "ecmp"}}


@pytest.fixture(scope="module")
def skewed():
    """A plan whose routes send every cross-leaf pair through spine 0 only."""
    sc = scenario_from_mapping(TINY)
    plan = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True)
    f = sc.fabric
    tier = f.node_tier
    spine_links = np.flatnonzero((tier[f.link_src] == 3) | (tier[f.link_dst] == 3))
    spines = sorted({int(n) for n in np.concatenate([f.link_src[spine_links], f.link_dst[spine_links]])
                     if tier[n] == 3})
    assert plan.routes and len(spines) == 2

    def via(path, s):
        return any(int(f.link_dst[x]) == s for x in path)

    from flowherd.routing.paths import shortest_paths

    routes = {}
    for k, v in plan.routes.items():  # every cross-leaf pair on its equal-cost path through spine 0
        a, b = (int(x) for x in k.split(","))
        paths = shortest_paths(f, a, b)
        routes[k] = v if len(paths) == 1 else [(tuple(int(x) for x in p), 1.0) for p in paths
                                               if via(p, spines[0])][:1]
    assert routes and all(routes.values()) and any(len(shortest_paths(f, *map(int, k.split(",")))) > 1
                                                   for k in routes)
    on = [x for x in spine_links if spines[1] in (int(f.link_src[x]), int(f.link_dst[x]))]
    used = sorted({int(x) for v in routes.values() for p, _ in v for x in p if x in set(spine_links)})
    return sc, dataclasses.replace(plan, routes=routes), np.asarray(on), np.asarray(used)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("controller", [None, "varys"])
def test_every_byte_follows_the_plans_paths(skewed, model, controller):
    from flowherd.control import make_controller

    sc, plan, spine1, used = skewed
    check = SimCheck(horizon_s=sc.horizon_s, routing="ecmp", fidelity=sc.fidelity, seed=5,
                     network=load_network(model))
    sim = simulate_plan(sc.fabric, sc.jobs, plan, check,
                        controller=None if controller is None else make_controller(controller))
    res = sim.cluster
    assert res.jobs[0].finish_s is not None
    assert res.router == "explicit"
    # ECMP would hash about half of the cross-leaf flows onto spine 1; the plan sends none there
    assert res.link_bytes[spine1].sum() == 0.0
    assert np.all(res.link_bytes[used] > 0)
    # the per-bin record adds up to the run's totals
    np.testing.assert_allclose(res.link_bin_bytes.sum(axis=1), res.link_bytes, rtol=1e-9, atol=1e-3)
    if model != "ideal":
        assert res.link_bin_marked_bytes is not None and np.all(res.link_bin_marked_bytes >= -1e-9)
    else:
        assert res.link_bin_marked_bytes is None


def test_the_plans_check_compares_its_estimate_with_the_simulation():
    # one job alone on the ideal network: the model's iteration time is the simulator's (exact
    # when uncontended, flowherd.planning.predict) and the estimate counts the bytes the
    # simulator sends (wire bytes: LL sends twice the payload), so every link's load in every
    # window agrees; the congestion the model saw is reported (none on the ideal network)
    sc = scenario_from_mapping(TINY)
    check = SimCheck(horizon_s=sc.horizon_s, routing="ecmp", fidelity=sc.fidelity, seed=2,
                     network=load_network("ideal"))
    plan = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True, check=check)
    est = plan.info["estimate"]
    assert abs(est["predicted_bytes"] / est["simulated_bytes"] - 1) < 1e-6
    assert 0 <= est["load_error_median"] <= est["load_error_p90"] < 1e-6
    assert est["active_cells"] > 0
    assert est["congested_bytes"] == 0.0
    assert est["simulated_mean_jct_s"] > 0 and abs(est["jct_error"]) < 1e-6


def test_the_check_splits_the_congestion_by_link_tier_and_by_jobs_sharing_a_cell(skewed):
    # the skewed plan (every cross-leaf pair through spine 0) on roce: the one job congests, so
    # every congested byte is in a cell one job alone was predicted on, and the tiers add up
    from flowherd.planning.congestion import PlannedJob, routes_to_splits
    from flowherd.planning.estimate import TIERS, _jobs_per_cell, estimate_check

    sc, plan, _, used = skewed
    check = SimCheck(horizon_s=sc.horizon_s, routing="ecmp", fidelity=sc.fidelity, seed=5,
                     network=load_network("roce"))
    sim = simulate_plan(sc.fabric, sc.jobs, plan, check)
    est = estimate_check(sc.fabric, sc.jobs, plan, sim)
    assert est["congested_bytes"] > 0 and set(est["congested_bytes_by_tier"]) == set(TIERS)
    np.testing.assert_allclose(sum(est["congested_bytes_by_tier"].values()), est["congested_bytes"],
                               rtol=1e-9)
    assert est["congested_bytes_one_job"] == pytest.approx(est["congested_bytes"], rel=1e-9)
    # the same job twice over the same window: two jobs on every link it uses, none elsewhere
    j = plan.jobs[0]
    twice = [PlannedJob(job=sc.jobs[0], gpus=j.gpus, start_s=0.0, iteration_s=j.predicted_iteration_s)] * 2
    edges = np.array([0.0, 0.5, 1.0]) * twice[0].end_s
    links = np.asarray(sorted(set(used.tolist()) | {int(x) for x in np.flatnonzero(
        np.asarray(sc.fabric.link_kind) == np.asarray(sc.fabric.link_kind)[used[0]])}))
    count = _jobs_per_cell(sc.fabric, twice, routes_to_splits(plan.routes), edges, links)
    on = np.isin(links, used)
    assert np.all(count[on] == 2) and count.max() == 2 and np.all(count[~on] % 2 == 0)


@pytest.mark.parametrize("model", ["ideal", "roce"])
def test_a_path_choosing_controller_keeps_the_plans_paths_unless_paths_are_granted(skewed, model):
    from flowherd.cluster.control_types import levers_from
    from flowherd.control import make_controller

    sc, plan, spine1, used = skewed
    check = SimCheck(horizon_s=sc.horizon_s, routing="ecmp", fidelity=sc.fidelity, seed=5,
                     network=load_network(model))
    held = simulate_plan(sc.fabric, sc.jobs, plan, check, controller=make_controller("adaptive"),
                         levers=levers_from({"delay": True, "paths": False})).cluster
    assert held.jobs[0].finish_s is not None
    assert held.link_bytes[spine1].sum() == 0.0  # every byte on the plan's paths
    assert np.all(held.link_bytes[used] > 0)
    assert any(i.refused for i in held.controller_issues)  # its path choices were refused, recorded
    free = simulate_plan(sc.fabric, sc.jobs, plan, check, controller=make_controller("adaptive"),
                         levers="buffer").cluster
    assert not any(i.refused for i in free.controller_issues)
    assert free.link_bytes[spine1].sum() > 0.0  # granted, it balances onto the idle spine
