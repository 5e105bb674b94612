"""Shortest path sets between GPUs, as path COUNTS rather than enumerated paths.

Three kinds of GPU pairs:

* same server: the scale-up domain (NVLINK links only: GPU -> NVSwitch -> GPU, a direct
  NVLink, or several hops through other GPUs of a point-to-point mesh such as DGX-1's hybrid
  cube-mesh). A server without an NVLink path between two of its GPUs uses the network;
* different servers on a Clos (``mode == "clos"``): up, then down over ``node_tier``
  (GPU 0 -> NIC 1 -> leaf 2 -> spine 3 -> core 4), turning at the lowest tier where the
  up-sets of source and destination meet. Path counts come from dynamic programming over the
  up-DAG, so a k=64 fat-tree's 1,024 core paths are never listed one by one;
* any other fabric (``mode == "graph"``: tiers absent, links that skip tiers, or valleys that
  are shorter than up-down paths): all shortest paths by breadth-first search, per pair,
  cached. Only switches forward traffic; a GPU's own NICs are its first and last hops.

Every pair's path set is a `PathDag`: the directed links that lie on at least one shortest
path, each with the number of shortest paths from the source to its tail and from its head
to the destination. An even split over all shortest paths puts
``tail_paths * head_paths / num_paths`` of a flow on each link.

`PathIndex` also holds the vectorized tables the routers use for the common case (a Clos
whose tiers partition the GPUs), so that 100k flows route without a Python loop per flow.

Modules: `flowherd.routing.pathsets` (a pair's path set, `PathDag`, and flow hashing),
`flowherd.routing.path_index` (`PathIndex`: building and indexing the path sets of a fabric);
this one re-exports both and holds the per-pair queries (`shortest_paths`, `path_count`,
`k_shortest_paths`).
"""

from __future__ import annotations

import itertools

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.routing.path_index import PathIndex, path_index
from flowherd.routing.pathsets import PathDag, flow_hash, splitmix64

__all__ = [
    "PathDag",
    "PathIndex",
    "flow_hash",
    "k_shortest_paths",
    "path_count",
    "path_index",
    "shortest_paths",
    "splitmix64",
]
def shortest_paths(fabric: Fabric, src_gpu: int, dst_gpu: int, *,
                   limit: int | None = None) -> list[np.ndarray]:
    """All shortest paths from one GPU to another, each an ``int32`` array of directed link ids
    in order. Same-server pairs use the NVLink domain when it connects them.

    Args:
        fabric: The fabric.
        src_gpu, dst_gpu: GPU ids.
        limit: Return at most this many paths (lowest link ids first); None for all.

    >>> from flowherd.fabric.generators import leaf_spine
    >>> f = leaf_spine(servers=4, leaves=2, spines=2)
    >>> [len(p) for p in shortest_paths(f, 0, 3)]
    [6, 6]
    """
    idx = path_index(fabric)
    s = idx.check_gpu(src_gpu, "src_gpu")
    d = idx.check_gpu(dst_gpu, "dst_gpu")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive integer or None, got {limit!r}")
    return idx.dag(s, d).paths(fabric, limit)


def path_count(fabric: Fabric, src: int, dst: int) -> int:
    """Number of shortest paths from GPU `src` to GPU `dst` (1 when src == dst).

    >>> from flowherd.fabric.generators import leaf_spine
    >>> path_count(leaf_spine(servers=4, leaves=2, spines=3), 0, 3)
    3
    """
    idx = path_index(fabric)
    return idx.dag(idx.check_gpu(src, "src"), idx.check_gpu(dst, "dst")).num_paths


def k_shortest_paths(fabric: Fabric, src_gpu: int, dst_gpu: int, k: int) -> list[np.ndarray]:
    """The `k` shortest simple paths by hop count, equal or longer than the shortest (for a
    planner that spreads load beyond the equal-cost set), each an ``int32`` array of link ids.

    Yen's algorithm (networkx ``shortest_simple_paths``) on the scope the pair routes in: the
    server's NVLink domain for a same-server pair it connects, else the network (switches and
    the pair's own NICs forward), else every link. Parallel links count once (the lowest id).
    Off the hot path: it can be slow on a large fabric.

    >>> from flowherd.fabric.generators import leaf_spine
    >>> f = leaf_spine(servers=3, leaves=3, spines=2)
    >>> [len(p) for p in k_shortest_paths(f, 0, 1, 3)]
    [6, 6, 8]
    """
    import networkx as nx

    idx = path_index(fabric)
    s = idx.check_gpu(src_gpu, "src_gpu")
    d = idx.check_gpu(dst_gpu, "dst_gpu")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if s == d:
        return [np.zeros(0, dtype=np.int32)]
    dag = idx.dag(s, d)
    if dag.scale_up:
        scope = "nvlink"
        graph = idx.nx_graph(scope)
        keep = {int(v) for v in fabric.link_src[dag.link]} | {d}
        # the whole NVLink component of the server, not only the shortest-path nodes
        comp = nx.node_connected_component(graph.to_undirected(as_view=True), s) | keep
        view = nx.subgraph_view(graph, filter_node=lambda v: v in comp)
    else:
        net = idx.nx_graph("network")
        own = {int(fabric.link_dst[lk]) for g in (s, d) for lk in fabric.out_links(g) if idx._net[lk]}
        own |= {s, d}
        switch = idx._switch
        view = nx.subgraph_view(net, filter_node=lambda v: bool(switch[v]) or v in own)
        if s not in view or d not in view or not nx.has_path(view, s, d):
            view = idx.nx_graph("all")
    out = []
    for nodes in itertools.islice(nx.shortest_simple_paths(view, s, d), k):
        out.append(np.asarray([view[u][v]["link"] for u, v in itertools.pairwise(nodes)],
                              dtype=np.int32))
    return out

