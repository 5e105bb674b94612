"""Figures of a fabric: counts, bisection bandwidth, GPU-to-GPU diameter.

All are computed from the arrays, without networkx, and stay fast at 131,072 GPUs.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow, shortest_path

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, NodeKind

_INT32_BUDGET = 2**30  # scipy's maximum_flow works in int32: keep total source capacity below this


def _halves(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """GPU masks of the two halves: servers ``0 .. S//2 - 1`` and the rest (GPUs, in one server)."""
    if fabric.num_servers >= 2:
        a = fabric.gpu_server < fabric.num_servers // 2
    elif fabric.num_gpus >= 2:
        a = np.arange(fabric.num_gpus) < fabric.num_gpus // 2
    else:
        raise ConfigError(f"bisection needs at least 2 GPUs, fabric {fabric.name!r} has 1 (fabric)")
    return a, ~a


def bisection_bytes_per_s(fabric: Fabric, *, method: Literal["maxflow", "tiers"] = "maxflow") -> float:
    """Capacity from one half of the servers to the other, in bytes per second (one direction).

    The servers are cut in two halves in server order (``0 .. S//2 - 1`` and the rest; generators
    number servers rack by rack and pod by pod, so this is the cut across the top of the tree).
    A single server is cut between GPUs ``0 .. G//2 - 1`` and the rest (DGX-1: 150 GB/s).

    Args:
        method: ``"maxflow"`` (default): the exact maximum flow from the GPUs of the first half to
            those of the second, over every link (scipy's Dinic works in int32: capacities are
            counted in units of ``c / 2**30`` bytes per second, c the smallest tier cut, and rounded
            down, so the result is a feasible flow less than ``num_cut_links * c / 2**30`` below the
            exact value: a relative error below 1e-6 for fewer than 1,000 cut links).
            ``"tiers"``: the smallest of the cuts "the half's GPUs, NICs, NVSwitches and every
            switch of tier <= t whose GPUs all lie in the half", over tiers t; an upper bound on
            the maximum flow, equal to it for the symmetric Clos fabrics of the generators.

    Closed forms: k-ary fat-tree ``k**3 / 8 * B``; leaf-spine of N GPUs with oversubscription o,
    ``N * B / (2 * o)``.
    """
    a, b = _halves(fabric)
    if method == "tiers":
        return _bisection_tiers(fabric, a)
    if method != "maxflow":
        raise ConfigError(f"bisection method must be 'maxflow' or 'tiers', got {method!r} (method)")
    n = fabric.num_nodes
    cap = fabric.link_capacity_bytes_per_s
    gpu = np.arange(fabric.num_gpus)
    # a GPU can send at most the sum of its outgoing capacities
    out_cap = np.bincount(fabric.link_src, weights=cap, minlength=n)[: fabric.num_gpus]
    # the flow is at most the best tier cut: scale so that it fits in int32 with room to spare
    total = min(out_cap[a].sum(), out_cap[b].sum(), _bisection_tiers(fabric, a))
    if total <= 0:
        return 0.0
    unit = total / _INT32_BUDGET
    scaled = np.minimum(np.floor(cap / unit), 2**31 - 1).astype(np.int64)
    source, sink = n, n + 1
    src = np.concatenate([fabric.link_src, np.full(int(a.sum()), source), gpu[b]])
    dst = np.concatenate([fabric.link_dst, gpu[a], np.full(int(b.sum()), sink)])
    big = np.minimum(np.ceil(out_cap / unit), 2**31 - 1).astype(np.int64)
    data = np.concatenate([scaled, big[a], big[b]])
    m = sp.coo_matrix((data, (src, dst)), shape=(n + 2, n + 2)).tocsr()  # parallel links add up
    m.sum_duplicates()
    m.data = np.minimum(m.data, 2**31 - 1).astype(np.int32)
    flow = maximum_flow(m, source, sink, method="dinic").flow_value
    return float(flow) * unit


def _descendant_halves(fabric: Fabric, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every node, whether some GPU of half A / of half B lies below it (downward links only)."""
    n = fabric.num_nodes
    tier = fabric.node_tier.astype(np.int64)
    kind = fabric.node_kind
    # a NIC sits above its GPUs (tier 1 > 0); an NVSwitch holds its server's GPUs
    level = np.where(kind == NodeKind.NVSWITCH, 1, tier)
    has_a = np.zeros(n, dtype=bool)
    has_b = np.zeros(n, dtype=bool)
    has_a[: fabric.num_gpus] = a
    has_b[: fabric.num_gpus] = ~a
    src, dst = fabric.link_src, fabric.link_dst
    down = level[src] > level[dst]  # links from an upper node to a lower one
    us, ud = src[down], dst[down]
    for t in np.unique(level[level > 0]):
        sel = level[us] == t
        np.logical_or.at(has_a, us[sel], has_a[ud[sel]])
        np.logical_or.at(has_b, us[sel], has_b[ud[sel]])
    return has_a, has_b


def _bisection_tiers(fabric: Fabric, a: np.ndarray) -> float:
    has_a, has_b = _descendant_halves(fabric, a)
    level = np.where(fabric.node_kind == NodeKind.NVSWITCH, 0, fabric.node_tier.astype(np.int64))
    pure_a = has_a & ~has_b
    src, dst, cap = fabric.link_src, fabric.link_dst, fabric.link_capacity_bytes_per_s
    best = np.inf
    for t in range(1, int(level.max()) + 1):
        inside = pure_a & (level <= t)
        inside[: fabric.num_gpus] = a
        leaving = inside[src] & ~inside[dst]
        best = min(best, float(cap[leaving].sum()))
    return best


def _server_classes(fabric: Fabric) -> np.ndarray:
    """A class id per GPU such that GPUs of one class have the same eccentricity among GPUs.

    Two servers with the same GPU count, the same number of inner links and the same outside
    neighbours of their i-th inner node, for every i, swap by an automorphism of the fabric
    (generators wire all servers alike inside); a class is (such a server signature, GPU index).
    """
    n, g = fabric.num_nodes, fabric.num_gpus
    src, dst = fabric.link_src, fabric.link_dst
    server = np.full(n, -1, dtype=np.int64)
    server[:g] = fabric.gpu_server
    kind = fabric.node_kind
    inner = (kind == NodeKind.NIC) | (kind == NodeKind.NVSWITCH)
    for _ in range(2):  # NICs and NVSwitches hang off GPUs (DGX-2: NVSwitch-NVSwitch inside a server)
        sel = (server[src] >= 0) & inner[dst] & (server[dst] < 0)
        server[dst[sel]] = server[src[sel]]
    nodes = np.flatnonzero(server >= 0)
    order = nodes[np.lexsort((nodes, server[nodes]))]
    first = np.searchsorted(server[order], np.arange(fabric.num_servers))
    local = np.empty(n, dtype=np.int64)
    local[order] = np.arange(order.size) - first[server[order]]
    ext = (server[src] >= 0) & (server[dst] != server[src])
    inner_links = np.bincount(server[src[~ext & (server[src] >= 0)]], minlength=fabric.num_servers)
    gpus = np.bincount(fabric.gpu_server, minlength=fabric.num_servers)
    rows = np.stack([server[src[ext]], local[src[ext]], dst[ext]], axis=1)
    rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]
    split = np.searchsorted(rows[:, 0], np.arange(fabric.num_servers + 1))
    sig: dict[tuple, int] = {}
    server_class = np.empty(fabric.num_servers, dtype=np.int64)
    for s in range(fabric.num_servers):
        key = (int(gpus[s]), int(inner_links[s]), rows[split[s] : split[s + 1], 1:].tobytes())
        server_class[s] = sig.setdefault(key, len(sig))
    return server_class[fabric.gpu_server] * (int(local[:g].max()) + 1) + local[:g]


def _adjacency(fabric: Fabric) -> sp.csr_matrix:
    n = fabric.num_nodes
    ones = np.ones(len(fabric.link_src), dtype=np.int32)
    m = sp.csr_matrix((ones, (fabric.link_src, fabric.link_dst)), shape=(n, n))
    m.data[:] = 1
    return m


def _gpu_ecc(adj: sp.csr_matrix, sources: np.ndarray, num_gpus: int, batch: int = 16) -> np.ndarray:
    out = np.empty(len(sources))
    for i in range(0, len(sources), batch):
        d = shortest_path(adj, unweighted=True, directed=True, indices=sources[i : i + batch])
        out[i : i + batch] = d[:, :num_gpus].max(axis=1)
    if np.isinf(out).any():
        raise ConfigError("fabric is disconnected: some GPU cannot reach another; expected every GPU "
                          "to reach every other (fabric)")
    return out


def diameter_hops(fabric: Fabric) -> int:
    """Longest shortest path between two GPUs, in links (hops).

    iFUB (Crescenzi et al., 2013) restricted to GPUs: from a central node ``u`` (the best of the
    top-tier switches and GPU 0), GPUs at distance ``<= i`` from ``u`` are at most ``2 i`` apart,
    so eccentricities are computed only for the GPUs farthest from ``u``, one per class of
    interchangeable GPUs (`_server_classes`), until the lower bound reaches ``2 i``. On a Clos this
    takes a handful of breadth-first searches.
    """
    g = fabric.num_gpus
    if g == 1:
        return 0
    adj = _adjacency(fabric)
    classes = _server_classes(fabric)
    _, rep = np.unique(classes, return_index=True)
    top = np.flatnonzero(fabric.node_tier == fabric.node_tier.max())[:8]
    cands = np.unique(np.concatenate([top, [0]]))
    d = shortest_path(adj, unweighted=True, directed=True, indices=cands)[:, :g]
    if np.isinf(d).any():
        raise ConfigError(f"fabric {fabric.name!r} is disconnected: some GPU cannot reach another; "
                          "expected every GPU to reach every other (fabric)")
    ecc_c = d.max(axis=1)
    du = d[int(np.argmin(ecc_c))]
    lower = float(_gpu_ecc(adj, np.array([0]), g)[0])
    # a class may hold GPUs at several distances from u: it counts at the largest
    rep_level = np.zeros(len(rep))
    np.maximum.at(rep_level, np.unique(classes, return_inverse=True)[1], du)
    for level in np.unique(rep_level)[::-1]:
        if lower >= 2 * level:
            break
        lower = max(lower, float(_gpu_ecc(adj, rep[rep_level == level], g).max()))
    return int(lower)


def summary(fabric: Fabric, *, bisection_method: Literal["maxflow", "tiers"] = "maxflow") -> dict[str, Any]:
    """Counts and figures of a fabric, as plain JSON-ready values.

    Keys: name, kind, num_gpus, num_servers, num_switches, num_nvswitches, num_nics, num_nodes,
    num_links (cables), num_network_links (scale-out cables), bisection_bytes_per_s (see
    `bisection_bytes_per_s`; 0.0 for a single GPU), diameter_hops (see `diameter_hops`).
    """
    return dict(
        name=fabric.name,
        kind=str(fabric.params.get("kind", "custom")),
        num_gpus=fabric.num_gpus,
        num_servers=fabric.num_servers,
        num_switches=fabric.num_switches,
        num_nvswitches=fabric.num_nvswitches,
        num_nics=fabric.num_nics,
        num_nodes=fabric.num_nodes,
        num_links=fabric.num_links,
        num_network_links=fabric.num_network_links,
        bisection_bytes_per_s=(bisection_bytes_per_s(fabric, method=bisection_method)
                               if fabric.num_gpus > 1 else 0.0),
        diameter_hops=diameter_hops(fabric),
    )
