"""Routing policies: every router on every test fabric, checked against networkx enumeration."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter

import networkx as nx
import numpy as np
import pytest
from conftest import FABRICS, clos3, dual_homed, fat_tree, gpu_pairs, reference_graph, reference_paths

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric.core import LinkKind
from flowherd.fabric.generators import leaf_spine
from flowherd.routing import ROUTERS, ExplicitRouter, Routes, make_router, path_index, shortest_paths
from flowherd.routing.paths import flow_hash

SINGLE_PATH = ("ecmp", "shortest", "explicit")  # explicit with no entries = its ECMP fallback


def flows_of(f, limit=300, seed=0):
    pairs = gpu_pairs(f, limit=limit, seed=seed)
    s = np.asarray([p[0] for p in pairs])
    d = np.asarray([p[1] for p in pairs])
    return s, d, np.arange(len(s)) * 7919


def flow_links(r: Routes, i: int) -> tuple[np.ndarray, np.ndarray]:
    return r.link[r.ptr[i]:r.ptr[i + 1]], r.frac[r.ptr[i]:r.ptr[i + 1]]


def check_conservation(f, r: Routes, s, d):
    """Out of src = 1, into dst = 1, in = out at every other node."""
    for i in range(r.num_flows):
        links, frac = flow_links(r, i)
        assert np.all((frac > 0) & (frac <= 1 + 1e-12))
        assert np.unique(links).size == links.size
        net = np.zeros(f.num_nodes)
        np.add.at(net, f.link_src[links], frac)
        np.subtract.at(net, f.link_dst[links], frac)
        expect = np.zeros(f.num_nodes)
        expect[s[i]] += 1.0
        expect[d[i]] -= 1.0
        np.testing.assert_allclose(net, expect, atol=1e-12, err_msg=f"flow {s[i]}->{d[i]}")


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_every_router_conserves_flow_from_src_to_dst(fabric, name):
    s, d, k = flows_of(fabric)
    r = make_router(name, fabric, seed=1).route(s, d, k)
    assert r.num_flows == len(s)
    assert r.link.dtype == np.int32 and r.ptr.dtype == np.int64
    check_conservation(fabric, r, s, d)


@pytest.mark.parametrize("name", SINGLE_PATH)
def test_single_path_is_a_contiguous_true_shortest_path(fabric, name):
    s, d, k = flows_of(fabric)
    r = make_router(name, fabric, seed=2).route(s, d, k)
    for i in range(len(s)):
        links, frac = flow_links(r, i)
        assert np.all(frac == 1.0)
        assert fabric.link_src[links[0]] == s[i] and fabric.link_dst[links[-1]] == d[i]
        assert np.array_equal(fabric.link_dst[links[:-1]], fabric.link_src[links[1:]])
        g, _ = reference_graph(fabric, s[i], d[i])
        assert len(links) == nx.shortest_path_length(g, s[i], d[i]), (s[i], d[i])
        assert r.latency_s[i] == pytest.approx(fabric.link_latency_s[links].sum(), abs=1e-15)


def test_spray_fractions_equal_exact_enumeration(fabric):
    s, d, k = flows_of(fabric)
    r = make_router("spray", fabric).route(s, d, k)
    for i in range(len(s)):
        ref, _ = reference_paths(fabric, s[i], d[i])
        uses = Counter(lk for p in ref for lk in p)
        links, frac = flow_links(r, i)
        got = dict(zip(links.tolist(), frac.tolist(), strict=True))
        assert set(got) == set(uses), (s[i], d[i])
        for lk, n in uses.items():
            assert got[lk] == pytest.approx(n / len(ref), rel=1e-12)
        # latency of a split: the slowest of the paths used
        slowest = max(fabric.link_latency_s[list(p)].sum() for p in ref)
        assert r.latency_s[i] == pytest.approx(slowest, abs=1e-15)


def test_spray_fractions_of_each_tier_sum_to_one():
    f = clos3(pods=2, leaves_per_pod=2, aggs_per_pod=3, cores_per_agg=2)
    s, d, k = flows_of(f, limit=200)
    r = make_router("spray", f).route(s, d, k)
    tier = f.node_tier.astype(int)
    for i in range(len(s)):
        links, frac = flow_links(r, i)
        if f.gpu_server[s[i]] == f.gpu_server[d[i]]:
            continue
        step = Counter()
        for lk, x in zip(links, frac, strict=True):
            step[(tier[f.link_src[lk]], tier[f.link_dst[lk]])] += x
        assert all(v == pytest.approx(1.0) for v in step.values()), step


def test_fast_clos_tables_agree_with_per_pair_dags():
    """The vectorized Clos path (up-set classes) must pick what a walk over the exact DAG picks."""
    for f in (FABRICS["leaf-spine"](), clos3(), dual_homed(), fat_tree(4)):
        idx = path_index(f)
        s, d, k = flows_of(f, limit=300, seed=3)
        net = f.gpu_server[s] != f.gpu_server[d]
        _, fast = idx.clos_meet_tier(s[net], d[net])
        assert fast.all()  # these fabrics are partitioned: every pair takes the fast path
        h = flow_hash(s, d, k, 5)
        r = make_router("ecmp", f, seed=5).route(s, d, k)
        spray = make_router("spray", f).route(s, d, k)
        for i in np.flatnonzero(net):
            dag = idx.dag(int(s[i]), int(d[i]))
            assert np.array_equal(flow_links(r, i)[0], dag.walk(f, idx.salt, int(h[i])))
            links, frac = flow_links(spray, i)
            o = np.argsort(links)
            p = np.argsort(dag.link)
            assert np.array_equal(links[o], dag.link[p])
            np.testing.assert_allclose(frac[o], dag.frac[p], rtol=1e-12)


def test_ecmp_same_flow_same_path_and_seed_matters():
    f = leaf_spine(servers=4, leaves=2, spines=8)
    s, d = np.zeros(200, dtype=int), np.full(200, 3)
    k = np.arange(200)
    a = make_router("ecmp", f, seed=0).route(s, d, k)
    b = make_router("ecmp", f, seed=0).route(s, d, k)
    c = make_router("ecmp", f, seed=1).route(s, d, k)
    assert np.array_equal(a.link, b.link)
    assert not np.array_equal(a.link, c.link)
    same = make_router("ecmp", f).route(s, d, np.full(200, 42))
    assert len({tuple(flow_links(same, i)[0]) for i in range(200)}) == 1


def test_ecmp_is_identical_in_a_fresh_process():
    code = textwrap.dedent("""
        import numpy as np
        from flowherd.fabric.generators import leaf_spine
        from flowherd.routing import make_router
        f = leaf_spine(servers=8, gpus_per_server=2, leaves=4, spines=5)
        rng = np.random.default_rng(4)
        s, d, k = rng.integers(0, 16, 500), rng.integers(0, 16, 500), rng.integers(0, 9999, 500)
        print(make_router("ecmp", f, seed=11).route(s, d, k).link.tolist())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""})
    f = leaf_spine(servers=8, gpus_per_server=2, leaves=4, spines=5)
    rng = np.random.default_rng(4)
    s, d, k = rng.integers(0, 16, 500), rng.integers(0, 16, 500), rng.integers(0, 9999, 500)
    here = make_router("ecmp", f, seed=11).route(s, d, k).link.tolist()
    assert eval(out.stdout) == here


def chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


def test_ecmp_spreads_flows_uniformly_over_spines():
    # 8 spines, 4000 flows between two servers on different leaves. Under uniform choice the
    # statistic is chi-square with 7 degrees of freedom; its 0.999 quantile is 24.32.
    f = leaf_spine(servers=2, leaves=2, spines=8)
    n = 4000
    r = make_router("ecmp", f, seed=9).route(np.zeros(n, dtype=int), np.ones(n, dtype=int),
                                               np.arange(n))
    spine_of = f.link_dst[r.link.reshape(n, -1)[:, 2]]
    counts = np.bincount(spine_of - spine_of.min(), minlength=8)
    assert counts.size == 8
    assert chi_square(counts) < 24.32
    # k=8 fat-tree across pods: 16 cores, chi-square with 15 dof, 0.999 quantile 37.70
    f = fat_tree(8)
    rng = np.random.default_rng(0)
    s = rng.integers(0, 16, n)  # pod 0
    d = rng.integers(f.num_gpus - 16, f.num_gpus, n)  # pod 7
    r = make_router("ecmp", f, seed=9).route(s, d, rng.integers(0, 2**31, n))
    core = f.link_dst[r.link.reshape(n, -1)[:, 3]]
    counts = np.bincount(core - core.min(), minlength=16)
    assert counts.size == 16
    assert chi_square(counts) < 37.70


def test_shortest_takes_lowest_id_next_hops():
    f = leaf_spine(servers=4, leaves=2, spines=3)
    r = make_router("shortest", f).route(np.array([0]), np.array([3]))
    assert np.array_equal(r.link, shortest_paths(f, 0, 3)[0])


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_self_flow_has_no_links_and_zero_latency(name):
    f = FABRICS["leaf-spine"]()
    r = make_router(name, f).route(np.array([3, 0, 3]), np.array([3, 5, 3]), np.array([0, 0, 0]))
    assert np.diff(r.ptr).tolist()[0] == 0 and np.diff(r.ptr).tolist()[2] == 0
    assert r.latency_s[0] == 0.0 and r.latency_s[1] > 0


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_bad_gpu_ids_name_value_and_range(name):
    f = FABRICS["leaf-spine"]()  # 16 GPUs
    r = make_router(name, f)
    with pytest.raises(ConfigError, match=r"dst\[1\] must be a GPU id in 0\.\.15, got 16"):
        r.route(np.array([0, 1]), np.array([2, 16]), np.array([0, 0]))
    with pytest.raises(ConfigError, match=r"src\[0\].*got -1"):
        r.route(np.array([-1]), np.array([2]), np.array([0]))
    with pytest.raises(ConfigError, match="equal lengths"):
        r.route(np.array([0, 1]), np.array([2]), np.array([0]))


def test_make_router_rejects_unknown_names_and_options():
    f = FABRICS["leaf-spine"]()
    with pytest.raises(UnknownNameError, match="did you mean 'ecmp'"):
        make_router("ecpm", f)
    with pytest.raises(ConfigError, match="takes no option 'splits'"):
        make_router("ecmp", f, splits={})


def test_same_server_flows_stay_on_nvlink_for_every_router():
    for fname in ("leaf-spine", "rail-pair", "dgx1-pair"):
        f = FABRICS[fname]()
        s, d, k = flows_of(f, limit=400)
        same = f.gpu_server[s] == f.gpu_server[d]
        for name in ROUTERS:
            r = make_router(name, f).route(s[same], d[same], k[same])
            assert np.all(f.link_kind[r.link] == LinkKind.NVLINK), (fname, name)


# ---- explicit -----------------------------------------------------------------------------
def test_explicit_routes_are_honored_with_normalized_weights():
    f = leaf_spine(servers=4, leaves=2, spines=3)
    p0, p1, p2 = shortest_paths(f, 0, 3)
    router = ExplicitRouter(f, {(0, 3): [(p0, 3.0), (p1, 1.0)], (0, 3, 9): [(p2, 1.0)]},
                            fallback="shortest")
    r = router.route(np.array([0, 0, 1, 0]), np.array([3, 3, 2, 3]), np.array([0, 9, 0, 1]))
    links, frac = flow_links(r, 0)
    got = dict(zip(links.tolist(), frac.tolist(), strict=True))
    for lk in set(p0) | set(p1):
        expect = 0.75 * (lk in p0) + 0.25 * (lk in p1)
        assert got[int(lk)] == pytest.approx(expect)
    assert np.array_equal(flow_links(r, 1)[0], np.sort(p2))  # the per-key entry wins
    assert np.array_equal(flow_links(r, 2)[0], shortest_paths(f, 1, 2)[0])  # fallback
    assert flow_links(r, 3)[0].size == np.unique(np.concatenate([p0, p1])).size
    check_conservation(f, r, np.array([0, 0, 1, 0]), np.array([3, 3, 2, 3]))
    via = make_router("explicit", f, splits={(0, 3): [(p1, 1.0)]})
    assert np.array_equal(via.route(np.array([0]), np.array([3])).link, np.sort(p1))


def test_explicit_rejects_bad_paths_naming_the_pair():
    f = leaf_spine(servers=4, leaves=2, spines=2)
    p0, p1 = shortest_paths(f, 0, 3)
    cases = [
        ({(0, 3): [(p0[:-1], 1.0)]}, r"expected GPU 0 to GPU 3.*\(0, 3\)"),
        ({(0, 3): [(np.concatenate([p0[:2], p1[3:]]), 1.0)]}, r"not contiguous.*\(0, 3\)"),
        ({(0, 3): [(np.array([0, 10**6]), 1.0)]}, r"link 1000000.*\(0, 3\)"),
        ({(0, 3): [(p0, 0.0)]}, r"weight.*positive.*\(0, 3\)"),
        ({(0, 3): []}, r"non-empty.*\(0, 3\)"),
        ({(0, 9): [(p0, 1.0)]}, r"dst of splits pair \(0, 9\).*0\.\.3"),
        ({(0,): [(p0, 1.0)]}, r"\(src, dst\)"),
    ]
    for splits, pattern in cases:
        with pytest.raises(ConfigError, match=pattern):
            ExplicitRouter(f, splits)


@pytest.mark.parametrize("chassis", [2, 3])
@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_routers_reach_gpus_without_a_nic(name, chassis):
    from test_paths import nicless

    f = nicless(chassis)
    s, d, k = flows_of(f)
    r = make_router(name, f).route(s, d, k)
    check_conservation(f, r, s, d)
    g = f.to_networkx()
    for i in range(len(s)):
        links, _ = flow_links(r, i)
        if name != "spray":
            assert len(links) == nx.shortest_path_length(g, s[i], d[i])
