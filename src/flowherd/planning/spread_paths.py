"""The routing LP's path set of a GPU pair when it has more shortest paths than the LP keeps.

The lower level (`flowherd.planning.congestion.route_windows`) routes each pair over at most
``paths_per_pair`` of its equal-cost shortest paths, and the simulator's `ExplicitRouter` then
sends the pair's flows over those paths only. The first ``limit`` paths in link-id order
(`flowherd.routing.paths.shortest_paths`) all share their first hops: on a 3-tier Clos such as
the Lingjun fabric (ToR -> 8 PSWs -> 8 core switches -> 8 PSWs -> ToR: 512 paths between two
PSW groups) the first 16 of every pair leave the ToR by one of its 8 uplinks and the PSW group
by the same 2 of its 64 core uplinks, so every pair crossing the core is confined to 1/32 of
it. `spread_paths` takes ``limit`` paths spread over the whole set instead: path number
``(offset + k * step) mod n`` for ``k < limit``, in the set's link-id order, with ``step`` the
least integer at or above ``n / limit`` coprime to ``n`` (so the ``limit`` numbers differ and,
the order being mixed-radix over the hops, every hop's choices are visited) and ``offset`` a
hash of the pair (so that pairs use different parts of the set). Where a pair has at most
``limit`` paths, they are all kept, in link-id order, as before.
"""

from __future__ import annotations

import math

import numpy as np

from flowherd.fabric.core import Fabric
from flowherd.routing.path_index import path_index
from flowherd.routing.paths import shortest_paths
from flowherd.routing.pathsets import flow_hash

__all__ = ["spread_indices", "spread_paths"]


def spread_indices(n: int, limit: int, offset: int) -> list[int]:
    """``limit`` distinct path numbers of ``n`` (module docstring); all of them if ``n <= limit``."""
    if n <= limit:
        return list(range(n))
    step = -(-n // limit)
    while math.gcd(step, n) != 1:
        step += 1
    return [(offset + k * step) % n for k in range(limit)]


def _nth_path(fabric: Fabric, dag, heads: dict[int, int], i: int) -> np.ndarray:
    """The ``i``-th shortest path of ``dag`` in link-id order (the order of
    `flowherd.routing.pathsets.PathDag.paths`)."""
    node, path = dag.src, []
    while node != dag.dst:
        for lk in dag.out[node].tolist():
            c = heads[lk]
            if i < c:
                break
            i -= c
        path.append(lk)
        node = int(fabric.link_dst[lk])
    return np.asarray(path, dtype=np.int64)


def spread_paths(fabric: Fabric, src: int, dst: int, limit: int | None) -> list[np.ndarray]:
    """At most ``limit`` shortest paths from GPU ``src`` to GPU ``dst``, spread over all of them
    (module docstring); None: every one."""
    if limit is None:
        return [np.asarray(p, np.int64) for p in shortest_paths(fabric, src, dst)]
    dag = path_index(fabric).dag(int(src), int(dst))
    n = int(dag.num_paths)
    if n <= limit or src == dst:
        return [np.asarray(p, np.int64) for p in shortest_paths(fabric, src, dst, limit=limit)]
    heads = {int(lk): round(float(h))
             for lk, h in zip(dag.link.tolist(), dag.head_paths.tolist(), strict=True)}
    offset = int(flow_hash(np.array([src]), np.array([dst]), np.array([0]), 0)[0] % np.uint64(n))
    return [_nth_path(fabric, dag, heads, i) for i in spread_indices(n, limit, offset)]
