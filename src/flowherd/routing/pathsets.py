"""A GPU pair's shortest-path set as a DAG of path counts (`PathDag`), and the flow hashing
the routers walk it with (`flow_hash`). `flowherd.routing.paths` explains the path sets;
`flowherd.routing.path_index` builds them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flowherd.fabric.core import Fabric
from flowherd.fabric.sparse_rows import ranges

__all__ = ["PathDag", "flow_hash", "splitmix64"]


# ---- hashing ----------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray | int) -> np.ndarray:
    """SplitMix64 finalizer (Steele, Lea, Flood 2014), vectorized over uint64; wraps mod 2**64."""
    z = np.asarray(x).astype(np.uint64) + _GOLDEN
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def flow_hash(src: np.ndarray, dst: np.ndarray, key: np.ndarray, seed: int) -> np.ndarray:
    """Per-flow 64-bit hash of (src, dst, key, seed): the same in every process and platform."""
    h = splitmix64(np.full(np.shape(src), seed % 2**64, dtype=np.uint64))
    for part in (src, dst, key):
        h = splitmix64(h ^ np.asarray(part).astype(np.int64).astype(np.uint64))
    return h


_ranges = ranges  # the routing modules' name for it (one definition, in flowherd.fabric)


# ---- one pair's path set ------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PathDag:
    """All shortest paths from `src` to `dst`, as the DAG of the links they use.

    Attributes:
        src, dst: Node ids (GPUs).
        hops: Links on every shortest path.
        num_paths: Number of distinct shortest paths.
        link: ``int32[m]``, the directed links on at least one shortest path, ordered by
            their distance from `src`, then by id.
        tail_paths: ``float64[m]``, shortest paths from `src` to each link's tail.
        head_paths: ``float64[m]``, shortest paths from each link's head to `dst`.
        latency_s: The largest propagation delay over all shortest paths.
        scale_up: True when the paths stay in the server's NVLink domain.
        out: Node -> DAG links leaving it, ascending ids (the next hops that stay on a
            shortest path).
    """

    src: int
    dst: int
    hops: int
    num_paths: int
    link: np.ndarray
    tail_paths: np.ndarray
    head_paths: np.ndarray
    latency_s: float
    scale_up: bool
    out: dict[int, np.ndarray] = field(repr=False)

    @property
    def frac(self) -> np.ndarray:
        """Share of the shortest paths that use each link (an even split over all of them)."""
        return self.tail_paths * self.head_paths / self.num_paths

    def walk(self, fabric: Fabric, salt: np.ndarray, hash64: int | None) -> np.ndarray:
        """One path: at every hop the next link is ``out[node][h % n]`` with
        ``h = splitmix64(hash64 ^ salt[node])``, or the lowest id when `hash64` is None."""
        node, path = self.src, []
        while node != self.dst:
            cand = self.out[node]
            if hash64 is None or len(cand) == 1:
                i = 0
            else:
                h = splitmix64(np.uint64(hash64) ^ salt[node])
                i = int(h % np.uint64(len(cand)))
            lk = int(cand[i])
            path.append(lk)
            node = int(fabric.link_dst[lk])
        return np.asarray(path, dtype=np.int32)

    def paths(self, fabric: Fabric, limit: int | None = None) -> list[np.ndarray]:
        """Enumerate shortest paths (lowest link ids first), at most `limit` of them."""
        out: list[np.ndarray] = []
        if self.src == self.dst:
            return [np.zeros(0, dtype=np.int32)]
        stack: list[tuple[int, list[int]]] = [(self.src, [])]
        while stack and (limit is None or len(out) < limit):
            node, prefix = stack.pop()
            if node == self.dst:
                out.append(np.asarray(prefix, dtype=np.int32))
                continue
            for lk in self.out[node][::-1]:
                stack.append((int(fabric.link_dst[lk]), [*prefix, int(lk)]))
        return out


def _finish_dag(fabric: Fabric, src: int, dst: int, links: list[int], depth: list[int],
                tail: list[float], head: list[float], num_paths: float, hops: int,
                scale_up: bool) -> PathDag:
    order = np.lexsort((np.asarray(links), np.asarray(depth)))
    link = np.asarray(links, dtype=np.int32)[order]
    lat_to: dict[int, float] = {src: 0.0}
    out: dict[int, list[int]] = {}
    for lk in link:
        u, w = int(fabric.link_src[lk]), int(fabric.link_dst[lk])
        val = lat_to[u] + float(fabric.link_latency_s[lk])
        if val > lat_to.get(w, -1.0):
            lat_to[w] = val
        out.setdefault(u, []).append(int(lk))
    return PathDag(src=src, dst=dst, hops=hops, num_paths=round(num_paths), link=link,
                   tail_paths=np.asarray(tail, dtype=np.float64)[order],
                   head_paths=np.asarray(head, dtype=np.float64)[order],
                   latency_s=lat_to.get(dst, 0.0), scale_up=scale_up,
                   out={u: np.asarray(sorted(v), dtype=np.int32) for u, v in out.items()})


def _empty_dag(node: int) -> PathDag:
    return PathDag(src=node, dst=node, hops=0, num_paths=1, link=np.zeros(0, np.int32),
                   tail_paths=np.zeros(0), head_paths=np.zeros(0), latency_s=0.0,
                   scale_up=False, out={})


# ---- the per-fabric index -------------------------------------------------------------------
