"""Small test fabrics built by hand with FabricBuilder, plus checkers shared by the routing tests."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us


def clos3(*, pods: int = 2, leaves_per_pod: int = 2, aggs_per_pod: int = 2, cores_per_agg: int = 2,
          servers_per_leaf: int = 2, gpus_per_server: int = 2) -> Fabric:
    """3-tier Clos (fat-tree wiring): agg j of every pod links to cores j*c .. j*c + c - 1."""
    b = FabricBuilder("clos3")
    servers = pods * leaves_per_pod * servers_per_leaf
    blk = add_servers(b, servers=servers, gpus_per_server=gpus_per_server,
                      nvlink_bandwidth_bytes_per_s=900 * GBps)
    leaf = b.add_nodes(NodeKind.SWITCH, pods * leaves_per_pod, tier=2)
    agg = b.add_nodes(NodeKind.SWITCH, pods * aggs_per_pod, tier=3)
    core = b.add_nodes(NodeKind.SWITCH, aggs_per_pod * cores_per_agg, tier=4)
    nics = blk.nics.ravel()
    b.connect(nics, np.repeat(leaf, nics.size // leaf.size), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    for p in range(pods):
        pl = leaf[p * leaves_per_pod:(p + 1) * leaves_per_pod]
        pa = agg[p * aggs_per_pod:(p + 1) * aggs_per_pod]
        b.connect(np.repeat(pl, pa.size), np.tile(pa, pl.size), 800 * Gbps, 1 * us, LinkKind.NETWORK)
        for j, a in enumerate(pa):
            cs = core[j * cores_per_agg:(j + 1) * cores_per_agg]
            b.connect(np.full(cs.size, a), cs, 800 * Gbps, 2 * us, LinkKind.NETWORK)
    return b.build()


def fat_tree(k: int) -> Fabric:
    """k-ary fat-tree (Al-Fares et al. 2008), one GPU per server: (k/2)^2 core paths across pods."""
    h = k // 2
    return clos3(pods=k, leaves_per_pod=h, aggs_per_pod=h, cores_per_agg=h, servers_per_leaf=h,
                 gpus_per_server=1)


def rail_pair(gpus: int = 4, spines: int = 2) -> Fabric:
    """Two servers, NVSwitch each; NIC g of both servers on rail leaf g; every rail leaf to every spine."""
    b = FabricBuilder("rail-pair")
    blk = add_servers(b, servers=2, gpus_per_server=gpus, nvlink_bandwidth_bytes_per_s=900 * GBps)
    rails = b.add_nodes(NodeKind.SWITCH, gpus, tier=2)
    sp_ = b.add_nodes(NodeKind.SWITCH, spines, tier=3)
    b.connect(blk.nics.ravel(), np.tile(rails, 2), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(np.repeat(rails, spines), np.tile(sp_, gpus), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    return b.build()


# DGX-1 (V100) hybrid cube-mesh: two fully connected quads plus links i <-> i+4
DGX1_EDGES = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3),
              (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7),
              (0, 4), (1, 5), (2, 6), (3, 7)]


def dgx1_pair() -> Fabric:
    """Two DGX-1-like servers: direct NVLink mesh, one NIC per two GPUs, 2 leaves, 2 spines."""
    b = FabricBuilder("dgx1-pair")
    gpus = b.add_gpus(np.repeat([0, 1], 8), ["v100", "v100"]).reshape(2, 8)
    nics = b.add_nodes(NodeKind.NIC, 8, tier=1).reshape(2, 4)
    leaves = b.add_nodes(NodeKind.SWITCH, 2, tier=2)
    spines = b.add_nodes(NodeKind.SWITCH, 2, tier=3)
    for s in range(2):
        e = np.asarray(DGX1_EDGES)
        b.connect(gpus[s, e[:, 0]], gpus[s, e[:, 1]], 50 * GBps, 0.0, LinkKind.NVLINK)
        b.connect(gpus[s], np.repeat(nics[s], 2), 32 * GBps, 0.0, LinkKind.PCIE)
        b.connect(nics[s], np.repeat(leaves, 2), 100 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(np.repeat(leaves, 2), np.tile(spines, 2), 200 * Gbps, 1 * us, LinkKind.NETWORK)
    return b.build()


def dual_homed() -> Fabric:
    """Four 1-GPU servers, each NIC on a ToR pair (Alibaba HPN style); ToRs to 2 aggregation switches."""
    b = FabricBuilder("dual-homed")
    blk = add_servers(b, servers=4, gpus_per_server=1)
    tor = b.add_nodes(NodeKind.SWITCH, 4, tier=2)
    agg = b.add_nodes(NodeKind.SWITCH, 2, tier=3)
    nics = blk.nics.ravel()
    b.connect(np.repeat(nics, 2), tor[[0, 1, 0, 1, 2, 3, 2, 3]], 200 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(np.repeat(tor, 2), np.tile(agg, 4), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    return b.build()


def uneven_clos() -> Fabric:
    """Leaf-spine where leaf 0 has two parallel cables to spine 0: path counts differ by spine."""
    b = FabricBuilder("uneven")
    blk = add_servers(b, servers=4, gpus_per_server=1)
    leaf = b.add_nodes(NodeKind.SWITCH, 2, tier=2)
    sp_ = b.add_nodes(NodeKind.SWITCH, 2, tier=3)
    b.connect(blk.nics.ravel(), np.repeat(leaf, 2), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect([leaf[0], leaf[0], leaf[0], leaf[1], leaf[1]], [sp_[0], sp_[0], sp_[1], sp_[0], sp_[1]],
              400 * Gbps, [1 * us, 3 * us, 1 * us, 1 * us, 1 * us], LinkKind.NETWORK)
    return b.build()


def ring() -> Fabric:
    """Irregular: five switches in a ring, all at tier 2, one 1-GPU server on each."""
    b = FabricBuilder("ring")
    blk = add_servers(b, servers=5, gpus_per_server=1)
    sw = b.add_nodes(NodeKind.SWITCH, 5, tier=2)
    b.connect(blk.nics.ravel(), sw, 400 * Gbps, 1 * us, LinkKind.NETWORK)
    b.connect(sw, np.roll(sw, -1), 400 * Gbps, 1 * us, LinkKind.NETWORK)
    return b.build()


FABRICS = {
    "leaf-spine": lambda: leaf_spine(servers=8, gpus_per_server=2, leaves=4, spines=3),
    "leaf-spine-shared-nic": lambda: leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2,
                                                nics_per_server=2),
    "clos3": clos3,
    "rail-pair": rail_pair,
    "dgx1-pair": dgx1_pair,
    "dual-homed": dual_homed,
    "uneven": uneven_clos,
    "ring": ring,
}


@pytest.fixture(params=sorted(FABRICS), scope="module")
def fabric(request) -> Fabric:
    return FABRICS[request.param]()


# ---- reference path sets from networkx --------------------------------------------------
def reference_graph(f: Fabric, src: int, dst: int) -> tuple[nx.MultiDiGraph, bool]:
    """The graph our paths must be shortest in: the server's NVLink domain for same-server pairs
    that it connects, else network links with only switches and the pair's own NICs in between."""
    g = f.to_networkx()
    if f.gpu_server[src] == f.gpu_server[dst]:
        nv = nx.MultiDiGraph()
        nv.add_edges_from((u, v, k, d) for u, v, k, d in g.edges(keys=True, data=True)
                          if d["kind"] == "nvlink")
        if src in nv and dst in nv and nx.has_path(nv, src, dst):
            return nv, True
    net = nx.MultiDiGraph()
    own = set()
    for u, v, d in g.edges(data=True):
        if d["kind"] != "nvlink" and u in (src, dst):
            own.add(v)
    keep = {v for v in g if g.nodes[v]["kind"] == "switch"} | own | {src, dst}
    net.add_edges_from((u, v, k, d) for u, v, k, d in g.edges(keys=True, data=True)
                       if d["kind"] != "nvlink" and u in keep and v in keep)
    return net, False


def reference_paths(f: Fabric, src: int, dst: int) -> tuple[list[tuple[int, ...]], bool]:
    """All shortest paths as tuples of directed link ids (parallel links expanded)."""
    g, scale_up = reference_graph(f, src, dst)
    out = []
    for nodes in nx.all_shortest_paths(g, src, dst):
        hops = [list(g[u][v]) for u, v in itertools.pairwise(nodes)]
        out.extend(itertools.product(*hops))
    return out, scale_up


def gpu_pairs(f: Fabric, limit: int = 400, seed: int = 0) -> list[tuple[int, int]]:
    pairs = [(a, b) for a in range(f.num_gpus) for b in range(f.num_gpus) if a != b]
    if len(pairs) > limit:
        rng = np.random.default_rng(seed)
        pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), limit, replace=False))]
    return pairs
