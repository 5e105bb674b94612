"""The multi-commodity-flow routing LP: hand-computed optima, column generation, simulation."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.engine.core import Engine
from flowherd.errors import ConfigError, InfeasibleError
from flowherd.fabric.core import NodeKind
from flowherd.fabric.generators import leaf_spine
from flowherd.planning.mcf import route_min_max_utilization, solve_lp
from flowherd.planning.traffic import TrafficMatrix, link_profile
from flowherd.routing.policies import ExplicitRouter, make_router
from flowherd.units import GBps


def _two_by_two():
    """Leaf-spine, 2 servers per leaf, 2 spines, 2:1 oversubscribed: each leaf-spine link carries
    25 GB/s (leaf downlinks 2 x 50 GB/s, uplinks 50 GB/s over 2 spines)."""
    return leaf_spine(servers=4, leaves=2, spines=2, oversubscription=2.0)


def _uplinks(f):
    """Directed leaf -> spine links of leaf 0, in spine order."""
    tier = f.node_tier
    leaf0 = int(np.flatnonzero((f.node_kind == NodeKind.SWITCH) & (tier == 2))[0])
    up = np.flatnonzero((f.link_src == leaf0) & (tier[f.link_dst] == 3))
    return up[np.argsort(f.link_dst[up])]


def test_two_commodities_two_paths_hand_optimum():
    # GPU 0 -> 2 sends 40 GB, GPU 1 -> 3 sends 20 GB, both from leaf 0 to leaf 1 over two spines
    # of 25 GB/s: the best split loads each spine uplink with 30 GB, max utilization
    # (40 + 20) / (2 * 25) = 1.2 (the NIC links: 40 / 50 = 0.8).
    f = _two_by_two()
    assert f.link_capacity_bytes_per_s[_uplinks(f)] == pytest.approx([25 * GBps, 25 * GBps])
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    sol = route_min_max_utilization(f, t)
    assert sol.status == "optimal"
    assert sol.max_utilization == pytest.approx(1.2, rel=1e-6)
    assert sol.lower_bound == pytest.approx(1.2, rel=1e-6)
    assert sol.link_load_bytes[_uplinks(f)] == pytest.approx([30e9, 30e9], rel=1e-6)
    for w in sol.split:
        assert w.sum() == pytest.approx(1.0)


def test_background_shifts_the_split_to_the_hand_optimum():
    # 10 GB of background on the spine-0 uplink: x + 10 = 60 - x gives x = 25, utilization 35 / 25.
    f = _two_by_two()
    bg = np.zeros(f.num_directed_links)
    bg[_uplinks(f)[0]] = 10e9
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    sol = route_min_max_utilization(f, t, background_bytes=bg)
    assert sol.max_utilization == pytest.approx(1.4, rel=1e-6)
    assert sol.link_load_bytes[_uplinks(f)] == pytest.approx([25e9, 35e9], rel=1e-6)


def test_period_scales_utilization():
    f = _two_by_two()
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    assert route_min_max_utilization(f, t, period_s=2.0).max_utilization == pytest.approx(0.6, rel=1e-6)


def test_column_generation_finds_the_paths_the_initial_set_lacks():
    # one initial path per pair (both over spine 0): 60 / 25 = 2.4 without pricing; pricing adds
    # the spine-1 paths and reaches the optimum 1.2
    f = _two_by_two()
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    fixed = route_min_max_utilization(f, t, paths_per_pair=1, column_generation=False)
    assert fixed.max_utilization == pytest.approx(2.4, rel=1e-6)
    assert fixed.status == "restricted" and fixed.lower_bound < 1.2  # no claim beyond its paths
    cg = route_min_max_utilization(f, t, paths_per_pair=1)
    assert cg.rounds >= 2
    assert cg.max_utilization == pytest.approx(1.2, rel=1e-6)


def test_round_limit_returns_a_feasible_routing_with_a_valid_bound():
    f = _two_by_two()
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    sol = route_min_max_utilization(f, t, paths_per_pair=1, max_rounds=1)
    assert sol.status == "round_limit"
    assert sol.lower_bound <= 1.2 * (1 + 1e-6)
    assert sol.max_utilization >= 1.2 * (1 - 1e-6)
    # GPU 0 sends 40 GB over its own outgoing links (its PCIe link to the NIC)
    egress = float(f.link_capacity_bytes_per_s[f.out_links(0)].sum())
    assert sol.lower_bound >= 40e9 / egress * (1 - 1e-9)
    assert 0 < sol.gap < 1


def test_hard_capacity_names_the_overloaded_link():
    f = _two_by_two()
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    with pytest.raises(InfeasibleError, match=r"leaf0 -> spine.*utilization 1\.200"):
        route_min_max_utilization(f, t, hard_capacity=True)
    ok = route_min_max_utilization(f, t.scaled(0.5), hard_capacity=True)
    assert ok.max_utilization == pytest.approx(0.6, rel=1e-6)


def test_bad_arguments_name_the_field():
    f = _two_by_two()
    t = TrafficMatrix(src=np.array([0]), dst=np.array([2]), size_bytes=np.array([1.0]))
    with pytest.raises(ConfigError, match="period_s"):
        route_min_max_utilization(f, t, period_s=0)
    with pytest.raises(ConfigError, match="background_bytes"):
        route_min_max_utilization(f, t, background_bytes=np.zeros(3))
    with pytest.raises(ConfigError, match="GPU 9"):
        route_min_max_utilization(f, TrafficMatrix(src=np.array([0]), dst=np.array([9]),
                                                   size_bytes=np.array([1.0])))


def _finish(fabric, router, src, dst, size):
    eng = Engine(fabric, router)
    c = eng.add_coflow(src, dst, size)
    eng.run()
    return eng.coflow_finish_s(c), eng.result()


def test_lp_routes_beat_colliding_ecmp_in_simulation():
    # 4 equal flows leaf 0 -> leaf 1 over 4 spines of 50 GB/s: ECMP puts two on one spine for the
    # seed picked below (2 s); the LP gives each its own spine: utilization 1, 1 s (+ latency).
    f = leaf_spine(servers=8, leaves=2, spines=4)
    src, dst, size = np.arange(4), np.arange(4, 8), np.full(4, 50e9)
    sol = route_min_max_utilization(f, TrafficMatrix(src=src, dst=dst, size_bytes=size))
    assert sol.max_utilization == pytest.approx(1.0, rel=1e-6)
    seed = next(s for s in range(20)
                if _finish(f, make_router("ecmp", f, seed=s), src, dst, size)[0] > 1.5)
    t_ecmp, _ = _finish(f, make_router("ecmp", f, seed=seed), src, dst, size)
    t_lp, res = _finish(f, ExplicitRouter(f, sol.splits()), src, dst, size)
    assert t_lp < t_ecmp
    # the simulated completion is the LP's utilization times the period, plus path latency
    assert t_lp == pytest.approx(sol.max_utilization * sol.period_s, abs=1e-4)
    # the simulator's per-link bytes are the LP's link loads
    assert res.link_bytes == pytest.approx(sol.link_load_bytes, rel=1e-9, abs=1.0)


def test_lp_utilization_equals_simulated_steady_link_load():
    # random demands on a 2:1 oversubscribed leaf-spine: under the LP's splits, the simulator's
    # per-link bytes equal the LP's loads, and the busiest link's load over its capacity is the
    # LP's max utilization (= the fluid completion time of one period's bytes)
    f = leaf_spine(servers=8, gpus_per_server=2, leaves=4, spines=2, oversubscription=2.0)
    rng = np.random.default_rng(7)
    src = rng.integers(0, f.num_gpus, 24)
    dst = (src + rng.integers(2, f.num_gpus - 1, 24)) % f.num_gpus
    t = TrafficMatrix(src=src, dst=dst, size_bytes=rng.uniform(1e9, 8e9, 24)).aggregated()
    sol = route_min_max_utilization(f, t)
    prof = link_profile(f, t, sol)
    assert prof == pytest.approx(sol.link_load_bytes, rel=1e-9, abs=1.0)
    assert float(np.max(prof / f.link_capacity_bytes_per_s)) == pytest.approx(sol.max_utilization, rel=1e-9)
    t_sim, res = _finish(f, ExplicitRouter(f, sol.splits()), t.src, t.dst, t.size_bytes)
    assert res.link_bytes == pytest.approx(sol.link_load_bytes, rel=1e-9, abs=1.0)
    assert t_sim >= sol.max_utilization * (1 - 1e-9)  # no routing beats the fluid bound
    spray = link_profile(f, t, "spray")
    assert sol.max_utilization <= float(np.max(spray / f.link_capacity_bytes_per_s)) * (1 + 1e-9)


def test_solve_lp_reports_infeasible_and_optimal():
    import scipy.sparse as sp

    # min x + y  s.t.  x + y >= 2, x <= 1, y <= 1.5  ->  2
    a = sp.csc_matrix(np.array([[1.0, 1.0]]))
    res = solve_lp(np.array([1.0, 1.0]), a, np.array([2.0]), np.array([np.inf]),
                   col_hi=np.array([1.0, 1.5]))
    assert res.status == "optimal" and res.objective == pytest.approx(2.0)
    bad = solve_lp(np.array([1.0, 1.0]), a, np.array([3.0]), np.array([np.inf]),
                   col_hi=np.array([1.0, 1.5]))
    assert bad.status == "infeasible" and bad.x is None


def test_time_out_returns_a_routing_never_nothing():
    # a budget too small for any LP solve: an even split over the initial paths comes back,
    # labelled, with a valid lower bound
    f = _two_by_two()
    t = TrafficMatrix(src=np.array([0, 1]), dst=np.array([2, 3]), size_bytes=np.array([40e9, 20e9]))
    sol = route_min_max_utilization(f, t, time_limit_s=1e-9)
    assert sol.status in ("time_limit", "optimal")
    assert len(sol.splits()) == 2
    assert sol.lower_bound <= 1.2 * (1 + 1e-6)
    assert sol.max_utilization >= 1.2 * (1 - 1e-6)
