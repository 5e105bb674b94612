"""Path sets: shortest paths and path counts against networkx enumeration and closed forms."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import FABRICS, clos3, dgx1_pair, fat_tree, gpu_pairs, reference_paths

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import LinkKind, NodeKind
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.generators.servers import add_servers
from flowherd.routing import path_count, path_index, shortest_paths
from flowherd.routing.paths import splitmix64
from flowherd.units import Gbps, us


def valley_fabric():
    """Tiers consistent, but spine S1 joins leaves 0 and 1 and spine S2 leaves 1 and 2, while the
    only up-down route from leaf 0 to leaf 2 climbs two more tiers: the valley is shorter."""
    b = FabricBuilder("valley")
    blk = add_servers(b, servers=3, gpus_per_server=1)
    leaf = b.add_nodes(NodeKind.SWITCH, 3, tier=2)
    spine = b.add_nodes(NodeKind.SWITCH, 2, tier=3)
    agg = b.add_nodes(NodeKind.SWITCH, 2, tier=4)
    top = b.add_nodes(NodeKind.SWITCH, 1, tier=5)
    b.connect(blk.nics.ravel(), leaf, 400 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(leaf[[0, 1, 1, 2]], spine[[0, 0, 1, 1]], 400 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(spine, agg, 400 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(agg, np.repeat(top, 2), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    return b.build()


def test_mode_is_clos_for_layered_fabrics_and_graph_otherwise():
    for name, make in FABRICS.items():
        idx = path_index(make())
        assert idx.mode == ("graph" if name == "ring" else "clos"), (name, idx.mode_reason)
    idx = path_index(valley_fabric())
    assert idx.mode == "graph"
    assert "valley" in idx.mode_reason


def test_shortest_paths_equal_networkx_all_shortest_paths(fabric):
    for a, b in gpu_pairs(fabric, limit=250):
        ref, _ = reference_paths(fabric, a, b)
        mine = [tuple(p.tolist()) for p in shortest_paths(fabric, a, b)]
        assert sorted(mine) == sorted(ref), (a, b)
        assert path_count(fabric, a, b) == len(ref)


def test_valley_fabric_uses_the_shorter_valley_path():
    f = valley_fabric()
    ref, _ = reference_paths(f, 0, 2)
    paths = shortest_paths(f, 0, 2)
    # GPU NIC leaf0 spine0 leaf1 spine1 leaf2 NIC GPU: 8 links, where up-down over tier 5 takes 10
    assert [len(p) for p in paths] == [8]
    assert sorted(tuple(p.tolist()) for p in paths) == sorted(ref)


def test_path_counts_match_clos_closed_forms():
    # leaf-spine: one path per spine between servers on different leaves
    f = leaf_spine(servers=4, leaves=2, spines=5)
    assert path_count(f, 0, 3) == 5
    assert path_count(f, 0, 1) == 1  # same leaf: turn at the leaf
    # 3-tier Clos: same pod -> one path per aggregation switch; across pods -> aggs x cores per agg
    f = clos3(pods=2, leaves_per_pod=2, aggs_per_pod=3, cores_per_agg=2, servers_per_leaf=1,
              gpus_per_server=1)
    assert path_count(f, 0, 1) == 3
    assert path_count(f, 0, 2) == 3 * 2
    # k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): (k/2)^2 shortest paths between pods
    f = fat_tree(8)
    assert path_count(f, 0, f.num_gpus - 1) == 16
    assert len(shortest_paths(f, 0, f.num_gpus - 1)) == 16


@pytest.mark.slow
def test_k64_fat_tree_counts_1024_core_paths_without_enumerating():
    f = fat_tree(64)
    t0 = time.process_time()  # CPU: the machine may be shared
    assert path_count(f, 0, f.num_gpus - 1) == 32 * 32
    assert path_count(f, 0, 40) == 32  # same pod, other edge switch: one path per aggregation switch
    assert time.process_time() - t0 < 5.0
    assert len(shortest_paths(f, 0, f.num_gpus - 1, limit=10)) == 10


def test_same_server_paths_stay_on_nvlink():
    for name in ("leaf-spine", "clos3", "rail-pair", "dgx1-pair", "leaf-spine-shared-nic"):
        f = FABRICS[name]()
        for a, b in gpu_pairs(f, limit=400):
            if f.gpu_server[a] != f.gpu_server[b]:
                continue
            for p in shortest_paths(f, a, b):
                assert np.all(f.link_kind[p] == LinkKind.NVLINK), (name, a, b)


def test_dgx1_non_adjacent_pair_gets_two_hop_nvlink_paths():
    f = dgx1_pair()
    # hybrid cube-mesh: GPU 0 links to 1, 2, 3 and 4; GPU 5 is reached through 1 or 4
    paths = shortest_paths(f, 0, 5)
    assert [len(p) for p in paths] == [2, 2]
    middles = sorted(int(f.link_dst[p[0]]) for p in paths)
    assert middles == [1, 4]
    assert all(np.all(f.link_kind[p] == LinkKind.NVLINK) for p in paths)
    assert [len(p) for p in shortest_paths(f, 0, 4)] == [1]  # adjacent: direct NVLink


def test_server_without_nvlink_falls_back_to_the_network():
    f = leaf_spine(servers=2, gpus_per_server=2, leaves=1, spines=1, nvlink_bandwidth_bytes_per_s=None)
    (p,) = shortest_paths(f, 0, 1)
    assert len(p) == 4  # GPU -> NIC -> leaf -> NIC -> GPU
    assert np.all(f.link_kind[p] != LinkKind.NVLINK)
    f = leaf_spine(servers=2, gpus_per_server=2, leaves=1, spines=1, nics_per_server=1,
                   nvlink_bandwidth_bytes_per_s=None)
    (p,) = shortest_paths(f, 0, 1)
    assert len(p) == 2  # the two GPUs share a NIC: GPU -> NIC -> GPU


def test_paths_are_contiguous_link_sequences(fabric):
    for a, b in gpu_pairs(fabric, limit=100):
        for p in shortest_paths(fabric, a, b):
            assert fabric.link_src[p[0]] == a and fabric.link_dst[p[-1]] == b
            assert np.array_equal(fabric.link_dst[p[:-1]], fabric.link_src[p[1:]])


def test_limit_and_self_pair():
    f = leaf_spine(servers=4, leaves=2, spines=4)
    assert len(shortest_paths(f, 0, 3, limit=3)) == 3
    (p,) = shortest_paths(f, 2, 2)
    assert p.size == 0
    assert path_count(f, 2, 2) == 1


@pytest.mark.parametrize("bad", [-1, 4, 2.0, True])
def test_bad_gpu_id_names_value_and_range(bad):
    f = leaf_spine(servers=4, leaves=2, spines=2)
    with pytest.raises(ConfigError, match=r"0\.\.3") as exc:
        shortest_paths(f, bad, 1)
    assert repr(bad) in str(exc.value)
    with pytest.raises(ConfigError, match="limit"):
        shortest_paths(f, 0, 1, limit=0)


def test_splitmix64_matches_reference_output():
    # First output of SplitMix64 seeded with 0 (Steele et al., OOPSLA 2014; the constant is also
    # in Vigna's reference splitmix64.c): 0xE220A8397B1DCDAF.
    assert int(splitmix64(0)) == 0xE220A8397B1DCDAF


def nicless(chassis: int):
    """NDv2-like: 4-GPU chassis with an NVLink ring, one NIC per chassis on GPU 0 only; two chassis
    cabled NIC to NIC (graph mode), more through one switch (Clos mode)."""
    b = FabricBuilder(f"nicless-{chassis}")
    gpus = b.add_gpus(np.repeat(np.arange(chassis), 4), ["v100"] * chassis).reshape(chassis, 4)
    nic = b.add_nodes(NodeKind.NIC, chassis, tier=1)
    b.connect(gpus.ravel(), np.roll(gpus, -1, axis=1).ravel(), 50e9, 0.0, LinkKind.NVLINK)
    b.connect(gpus[:, 0], nic, 16e9, 0.0, LinkKind.PCIE)
    if chassis == 2:
        b.connect(nic[0], nic[1], 12.5e9, 1 * us, LinkKind.NETWORK)
    else:
        sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
        b.connect(nic, np.repeat(sw, chassis), 12.5e9, 1 * us, LinkKind.NETWORK)
    return b.build()


@pytest.mark.parametrize("chassis", [2, 3])
def test_gpu_without_nic_reaches_other_servers_over_nvlink_then_network(chassis):
    import itertools

    import networkx as nx

    f = nicless(chassis)
    assert path_index(f).mode == ("graph" if chassis == 2 else "clos")
    g = f.to_networkx()
    ref = [p for nodes in nx.all_shortest_paths(g, 2, 6)
           for p in itertools.product(*[list(g[u][v]) for u, v in itertools.pairwise(nodes)])]
    paths = shortest_paths(f, 2, 6)
    assert sorted(tuple(p.tolist()) for p in paths) == sorted(ref)
    # GPU 2 -> (1 or 3) -> 0 -> NIC -> [switch ->] NIC -> 4 -> (5 or 7) -> 6
    assert {len(p) for p in paths} == {7 if chassis == 2 else 8}
    assert path_count(f, 2, 6) == 4


def test_k_shortest_paths_start_with_the_shortest_and_grow():
    from flowherd.routing import k_shortest_paths

    f = dgx1_pair()
    paths = k_shortest_paths(f, 0, 5, 6)
    lens = [len(p) for p in paths]
    assert lens == sorted(lens) and len(paths) == 6
    assert sorted(tuple(p.tolist()) for p in paths[:2]) == sorted(
        tuple(p.tolist()) for p in shortest_paths(f, 0, 5))
    assert lens[2] == 3  # next: a 3-hop NVLink detour, never the network
    for p in paths:
        assert np.all(f.link_kind[p] == LinkKind.NVLINK)
        assert f.link_src[p[0]] == 0 and f.link_dst[p[-1]] == 5
        assert np.array_equal(f.link_dst[p[:-1]], f.link_src[p[1:]])
    assert len({tuple(p.tolist()) for p in paths}) == 6
    # across servers of a 3-leaf leaf-spine: the 2 spine paths, then a valley through a third leaf
    f = leaf_spine(servers=3, leaves=3, spines=2)
    assert [len(p) for p in k_shortest_paths(f, 0, 1, 4)] == [6, 6, 8, 8]
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        k_shortest_paths(f, 0, 1, 0)
