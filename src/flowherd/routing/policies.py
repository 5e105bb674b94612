"""Routing policies: which of the shortest paths each flow takes, and in what shares.

Every policy satisfies `flowherd.routing.base.Router` and is made by name:

>>> from flowherd.fabric.generators import leaf_spine
>>> f = leaf_spine(servers=4, leaves=2, spines=2)
>>> r = make_router("spray", f)
>>> routes = r.route(np.array([0]), np.array([3]), np.array([0]))
>>> sorted(set(np.round(routes.frac, 3).tolist()))
[0.5, 1.0]

* ``ecmp``: one shortest path per flow, chosen hop by hop as switches do: each node hashes
  the flow (splitmix64 of src, dst, key, seed, salted by the node id) and takes that hash
  modulo the number of next hops that stay on a shortest path;
* ``spray``: fluid packet spraying, an even split over all equal-cost shortest paths: the
  share on a link is the share of the shortest paths that use it;
* ``shortest``: one deterministic shortest path, always the lowest-id next hop;
* ``explicit``: paths and weights given from outside (the planner), with a fallback router
  for the other flows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.registry import Registry
from flowherd.routing.base import Router, Routes
from flowherd.routing.path_index import PathIndex, path_index
from flowherd.routing.pathsets import _ranges, flow_hash

__all__ = [
    "ROUTERS",
    "EcmpRouter",
    "ExplicitRouter",
    "ShortestRouter",
    "SprayRouter",
    "make_router",
]

ROUTERS: Registry[type] = Registry("router")


def make_router(name: str, fabric: Fabric, *, seed: int = 0, **options: Any) -> Router:
    """Make the router registered under `name` for `fabric`.

    Args:
        name: A key of `ROUTERS` ("ecmp", "spray", "shortest", "explicit").
        fabric: The fabric to route on.
        seed: Hash seed (ECMP); the same seed gives the same paths in every process.
        **options: Router-specific options (``explicit``: ``splits``, ``fallback``).

    Raises:
        UnknownNameError: `name` is not registered.
        ConfigError: An option the router does not take.
    """
    cls = ROUTERS[name]
    allowed = cls.options
    for opt in options:
        if opt not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise ConfigError(f"router {name!r} takes no option {opt!r} (expected: {expected})")
    return cls(fabric, seed=seed, **options)


# ---- shared helpers ---------------------------------------------------------------------
def _check_flows(fabric: Fabric, src: Any, dst: Any,
                 key: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arrays = []
    for what, arr in (("src", src), ("dst", dst), ("key", key)):
        a = np.asarray(arr)
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise ConfigError(f"{what} must be a 1-D array of integers, got shape {a.shape} "
                              f"dtype {a.dtype} (route)")
        arrays.append(a.astype(np.int64))
    s, d, k = arrays
    if not len(s) == len(d) == len(k):
        raise ConfigError(f"src, dst and key must have equal lengths, got {len(s)}, {len(d)}, "
                          f"{len(k)} (route)")
    g = fabric.num_gpus
    for what, a in (("src", s), ("dst", d)):
        bad = np.flatnonzero((a < 0) | (a >= g))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(f"{what}[{i}] must be a GPU id in 0..{g - 1}, got {int(a[i])} (route)")
    return s, d, k


def _merge(nflow: int, parts: list[tuple[np.ndarray, Routes]]) -> Routes:
    """Routes of `nflow` flows from parts (flow indices, their routes); other flows: no links."""
    lens = np.zeros(nflow, dtype=np.int64)
    latency = np.zeros(nflow)
    for idx, r in parts:
        lens[idx] = np.diff(r.ptr)
        latency[idx] = r.latency_s
    ptr = np.zeros(nflow + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    link = np.zeros(int(ptr[-1]), dtype=np.int32)
    frac = np.zeros(int(ptr[-1]))
    for idx, r in parts:
        pos = _ranges(ptr[idx], lens[idx])
        link[pos] = r.link
        frac[pos] = r.frac
    return Routes(ptr=ptr, link=link, frac=frac, latency_s=latency)


def _single_paths(fabric: Fabric, paths: list[np.ndarray]) -> Routes:
    lens = np.asarray([len(p) for p in paths], dtype=np.int64)
    ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    link = np.concatenate(paths).astype(np.int32) if paths else np.zeros(0, np.int32)
    owner = np.repeat(np.arange(len(paths)), lens)
    lat = np.bincount(owner, weights=fabric.link_latency_s[link], minlength=len(paths))
    return Routes(ptr=ptr, link=link, frac=np.ones(link.size), latency_s=lat)


class _DagRouter:
    """Shared skeleton: self flows, per-pair DAG flows, vectorized Clos flows."""

    name: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, fabric: Fabric, *, seed: int = 0):
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise ConfigError(f"seed must be an integer, got {seed!r} (router)")
        self.fabric = fabric
        self.seed = int(seed)
        self.index: PathIndex = path_index(fabric)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fabric={self.fabric.name!r}, seed={self.seed})"

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None) -> Routes:
        """Route flows ``src[i] -> dst[i]`` (GPU ids); `key` (default zeros) is the flow's
        hash input. ``src == dst`` gives no links and zero latency.

        Raises:
            ConfigError: A GPU id out of range, or arrays of different lengths.
            InfeasibleError: A pair with no path.
        """
        if key is None:
            key = np.zeros(np.shape(src), dtype=np.int64)
        s, d, k = _check_flows(self.fabric, src, dst, key)
        idx = self.index
        server = self.fabric.gpu_server
        parts: list[tuple[np.ndarray, Routes]] = []
        todo = s != d
        # the pairs with one two-hop path: over an NVSwitch in a server, over a switch between
        # servers (the same links, shares and latency as their `PathDag`, without the search)
        for star, up, down in ((idx.star_pairs(s, d), idx.star_up, idx.star_down),
                               (idx.net_star_pairs(s, d), idx.net_star_up, idx.net_star_down)):
            star = np.flatnonzero(todo & star)
            if star.size:
                links = np.stack([up[s[star]], down[d[star]]], axis=1)
                lat = self.fabric.link_latency_s[links].sum(axis=1)
                parts.append((star, Routes(ptr=np.arange(star.size + 1, dtype=np.int64) * 2,
                                           link=links.ravel(), frac=np.ones(links.size),
                                           latency_s=lat)))
                todo[star] = False
        if idx.mode == "clos":
            net = np.flatnonzero(todo & (server[s] != server[d]))
            if net.size:
                big_t, ok = idx.clos_meet_tier(s[net], d[net])
                for t in np.flatnonzero(np.bincount(big_t[ok])):  # the tiers met, in order
                    sel = net[ok & (big_t == t)]
                    done, r = self._route_clos(sel, s[sel], d[sel], k[sel], int(t))
                    if done.size:
                        parts.append((done, r))
                        todo[done] = False
        rest = np.flatnonzero(todo)
        if rest.size:
            parts.append((rest, self._route_dags(s[rest], d[rest], k[rest])))
        return _merge(len(s), parts)

    def _route_clos(self, flows: np.ndarray, s: np.ndarray, d: np.ndarray, k: np.ndarray,
                    big_t: int) -> tuple[np.ndarray, Routes]:
        raise NotImplementedError

    def _route_dags(self, s: np.ndarray, d: np.ndarray, k: np.ndarray) -> Routes:
        raise NotImplementedError


class _SinglePathRouter(_DagRouter):
    """One path per flow; `_hash` gives the per-flow hash or None for lowest-id next hops."""

    def _hash(self, s: np.ndarray, d: np.ndarray, k: np.ndarray) -> np.ndarray | None:
        raise NotImplementedError

    def _route_clos(self, flows, s, d, k, big_t):
        links = self.index.clos_walk(s, d, big_t, self._hash(s, d, k))
        nflow = len(s)
        return flows, Routes(ptr=np.arange(nflow + 1, dtype=np.int64) * 2 * big_t,
                             link=links.ravel(), frac=np.ones(links.size),
                             latency_s=self.fabric.link_latency_s[links].sum(axis=1))

    def _route_dags(self, s, d, k):
        h = self._hash(s, d, k)
        idx, f = self.index, self.fabric
        paths = [
            idx.dag(int(a), int(b)).walk(f, idx.salt, None if h is None else int(h[i]))
            for i, (a, b) in enumerate(zip(s, d, strict=True))
        ]
        return _single_paths(f, paths)


@ROUTERS.register("ecmp")
class EcmpRouter(_SinglePathRouter):
    """ECMP: per-hop hash choice among the next hops that stay on a shortest path.

    The hash of a flow is ``flow_hash(src, dst, key, seed)`` (splitmix64, identical in every
    process); at node v the chosen next hop is ``splitmix64(hash ^ salt[v]) % count`` among the
    candidate links in ascending id order, as a switch hashes the 5-tuple with its own seed.
    """

    name = "ecmp"

    def _hash(self, s, d, k):
        return flow_hash(s, d, k, self.seed)


@ROUTERS.register("shortest")
class ShortestRouter(_SinglePathRouter):
    """One deterministic shortest path per pair: always the lowest-id next hop."""

    name = "shortest"

    def _hash(self, s, d, k):
        return None


@ROUTERS.register("spray")
class SprayRouter(_DagRouter):
    """Fluid packet spraying: an even split over all equal-cost shortest paths.

    The share of a flow on a link is the share of its shortest paths that use the link, from
    path counts (tail paths x head paths / all paths), never from listing the paths.
    ``latency_s`` is the largest latency over the shortest paths.
    """

    name = "spray"

    def _route_dags(self, s, d, k):
        dags = [self.index.dag(int(a), int(b)) for a, b in zip(s, d, strict=True)]
        lens = np.asarray([len(g.link) for g in dags], dtype=np.int64)
        ptr = np.zeros(len(dags) + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        link = np.concatenate([g.link for g in dags]).astype(np.int32)
        frac = np.concatenate([g.frac for g in dags])
        return Routes(ptr=ptr, link=link, frac=frac,
                      latency_s=np.asarray([g.latency_s for g in dags]))

    def _route_clos(self, flows, s, d, k, big_t):
        idx = self.index
        cache: dict[int, tuple[int, bool]] = {}
        halves = []
        local: dict[int, int] = {}

        def lookup(g: int) -> tuple[int, bool]:
            hit = cache.get(g)
            if hit is None:
                h, simple = idx.half(g, big_t)
                pos = local.get(id(h))
                if pos is None:
                    pos = local[id(h)] = len(halves)
                    halves.append(h)
                hit = cache[g] = (pos, simple)
            return hit

        hs, ss = np.asarray([lookup(int(g)) for g in s]).T.astype(np.int64)
        hd, sd = np.asarray([lookup(int(g)) for g in d]).T.astype(np.int64)
        ss, sd = ss.astype(bool), sd.astype(bool)
        sym = np.asarray([h.symmetric for h in halves])
        ok = sym[hs] & sym[hd]
        hs, hd, ss, sd, s, d, flows = hs[ok], hd[ok], ss[ok], sd[ok], s[ok], d[ok], flows[ok]
        hlen = np.asarray([len(h.link) for h in halves], dtype=np.int64)
        hptr = np.concatenate([[0], np.cumsum(hlen)])
        hlink = np.concatenate([h.link for h in halves])
        hfrac = np.concatenate([h.frac for h in halves])
        ls, a, b, ld = 2 * ss, hlen[hs], hlen[hd], 2 * sd
        ptr = np.zeros(len(s) + 1, dtype=np.int64)
        np.cumsum(ls + a + b + ld, out=ptr[1:])
        link = np.empty(int(ptr[-1]), dtype=np.int32)
        frac = np.ones(int(ptr[-1]))
        stub = idx._stub_links
        rev = idx.rev
        base = ptr[:-1]
        up = np.flatnonzero(ss)
        link[base[up]] = stub[s[up], 0]
        link[base[up] + 1] = stub[s[up], 1]
        pos, src_pos = _ranges(base + ls, a), _ranges(hptr[hs], a)
        link[pos], frac[pos] = hlink[src_pos], hfrac[src_pos]
        pos, src_pos = _ranges(base + ls + a, b), _ranges(hptr[hd], b)
        link[pos], frac[pos] = rev[hlink[src_pos]], hfrac[src_pos]
        dn = np.flatnonzero(sd)
        end = base + ls + a + b
        link[end[dn]] = rev[stub[d[dn], 1]]
        link[end[dn] + 1] = rev[stub[d[dn], 0]]
        # largest latency: max over meeting nodes m of (up to m) + (down from m)
        lat = np.where(ss, idx._stub_lat_up[s], 0.0) + np.where(sd, idx._stub_lat_down[d], 0.0)
        up_max = np.asarray([h.lat_up_s.max() for h in halves])
        dn_max = np.asarray([h.lat_down_s.max() for h in halves])
        up_const = np.asarray([h.lat_up_s.min() == h.lat_up_s.max() for h in halves])
        dn_const = np.asarray([h.lat_down_s.min() == h.lat_down_s.max() for h in halves])
        core = up_max[hs] + dn_max[hd]
        for i in np.flatnonzero(~(up_const[hs] | dn_const[hd])):
            core[i] = float(np.max(halves[hs[i]].lat_up_s + halves[hd[i]].lat_down_s))
        return flows, Routes(ptr=ptr, link=link, frac=frac, latency_s=lat + core)


@ROUTERS.register("explicit")
class ExplicitRouter:
    """Paths and weights given from outside (e.g. by the planner's multi-commodity-flow LP).

    Args:
        fabric: The fabric.
        splits: Maps ``(src, dst)`` or ``(src, dst, key)`` to a list of ``(path, weight)``:
            a path is an array of directed link ids from GPU src to GPU dst, in order; weights
            are positive and normalized per entry. A ``(src, dst, key)`` entry wins over the
            ``(src, dst)`` entry for flows of that key.
        fallback: Router (or router name) for the flows no entry covers.
        seed: Seed of a fallback made by name.

    Raises:
        ConfigError: A path that is not contiguous, does not go from src to dst, or uses
            links that do not exist; a weight that is not positive; a bad key.
    """

    name = "explicit"
    options: ClassVar[tuple[str, ...]] = ("splits", "fallback")

    def __init__(self, fabric: Fabric,
                 splits: Mapping[tuple[int, ...], Sequence[tuple[Any, float]]] | None = None,
                 fallback: Router | str = "ecmp", *, seed: int = 0):
        self.fabric = fabric
        self.fallback: Router = (make_router(fallback, fabric, seed=seed)
                                 if isinstance(fallback, str) else fallback)
        self._entries: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, float]] = {}
        for pair, paths in (splits or {}).items():
            checked = self._check_key(pair)
            self._entries[checked] = self._check_paths(pair, paths)

    def __repr__(self) -> str:
        return (f"ExplicitRouter(fabric={self.fabric.name!r}, entries={len(self._entries)}, "
                f"fallback={self.fallback!r})")

    def _check_key(self, pair: Any) -> tuple[int, ...]:
        g = self.fabric.num_gpus
        ok = isinstance(pair, tuple) and len(pair) in (2, 3) and all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in pair)
        if not ok:
            raise ConfigError(f"a splits key must be (src, dst) or (src, dst, key) of integers, "
                              f"got {pair!r} (explicit router)")
        for what, v in zip(("src", "dst"), pair[:2], strict=False):
            if not 0 <= v < g:
                raise ConfigError(f"{what} of splits pair {pair!r} must be a GPU id in "
                                  f"0..{g - 1}, got {v} (explicit router)")
        return tuple(int(v) for v in pair)

    def _check_paths(self, pair: tuple[int, ...],
                     paths: Sequence[tuple[Any, float]]) -> tuple[np.ndarray, np.ndarray, float]:
        f = self.fabric
        s, d = int(pair[0]), int(pair[1])
        where = f"(explicit router, pair {pair!r})"
        if isinstance(paths, str | bytes) or not isinstance(paths, Sequence) or not paths:
            raise ConfigError(f"splits of pair {pair!r} must be a non-empty list of "
                              f"(path, weight), got {paths!r} {where}")
        num_links = f.num_directed_links
        links, weights, lat = [], [], 0.0
        for i, entry in enumerate(paths):
            if not isinstance(entry, Sequence) or len(entry) != 2:
                raise ConfigError(f"splits[{i}] must be a (path, weight) pair, got {entry!r} {where}")
            path, w = np.asarray(entry[0]), entry[1]
            if isinstance(w, bool) or not isinstance(w, int | float | np.number) or not (
                    np.isfinite(w) and w > 0):
                raise ConfigError(f"weight of path {i} must be positive and finite, got {w!r} {where}")
            if path.ndim != 1 or (path.size and path.dtype.kind not in "iu"):
                raise ConfigError(f"path {i} must be a 1-D array of link ids, got {path!r} {where}")
            path = path.astype(np.int64)
            bad = np.flatnonzero((path < 0) | (path >= num_links))
            if bad.size:
                raise ConfigError(f"path {i} uses link {int(path[bad[0]])}, expected link ids in "
                                  f"0..{num_links - 1} {where}")
            if s == d:
                if path.size:
                    raise ConfigError(f"path {i} must be empty for src == dst, got {path.size} "
                                      f"links {where}")
            else:
                if path.size == 0:
                    raise ConfigError(f"path {i} is empty, expected links from GPU {s} to GPU {d} "
                                      f"{where}")
                if f.link_src[path[0]] != s or f.link_dst[path[-1]] != d:
                    raise ConfigError(
                        f"path {i} goes from node {int(f.link_src[path[0]])} to node "
                        f"{int(f.link_dst[path[-1]])}, expected GPU {s} to GPU {d} {where}")
                gap = np.flatnonzero(f.link_dst[path[:-1]] != f.link_src[path[1:]])
                if gap.size:
                    j = int(gap[0])
                    raise ConfigError(f"path {i} is not contiguous: link {int(path[j])} ends at "
                                      f"node {int(f.link_dst[path[j]])} but link "
                                      f"{int(path[j + 1])} starts at node "
                                      f"{int(f.link_src[path[j + 1]])} {where}")
                if np.unique(path).size != path.size:
                    raise ConfigError(f"path {i} uses a link twice, expected a simple path {where}")
            links.append(path)
            weights.append(np.full(path.size, float(w)))
            lat = max(lat, float(f.link_latency_s[path].sum()))
        total = sum(float(e[1]) for e in paths)
        all_links = np.concatenate(links)
        uniq, inv = np.unique(all_links, return_inverse=True)
        frac = np.bincount(inv, weights=np.concatenate(weights), minlength=uniq.size) / total
        return uniq.astype(np.int32), frac, lat

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None) -> Routes:
        """Route given flows by their entries, the others by the fallback router."""
        if key is None:
            key = np.zeros(np.shape(src), dtype=np.int64)
        s, d, k = _check_flows(self.fabric, src, dst, key)
        given_idx, given = [], []
        for i, (a, b, c) in enumerate(zip(s.tolist(), d.tolist(), k.tolist(), strict=True)):
            e = self._entries.get((a, b, c)) or self._entries.get((a, b))
            if e is not None:
                given_idx.append(i)
                given.append(e)
        parts: list[tuple[np.ndarray, Routes]] = []
        if given:
            lens = np.asarray([len(e[0]) for e in given], dtype=np.int64)
            ptr = np.zeros(len(given) + 1, dtype=np.int64)
            np.cumsum(lens, out=ptr[1:])
            parts.append((np.asarray(given_idx, dtype=np.int64), Routes(
                ptr=ptr, link=np.concatenate([e[0] for e in given]).astype(np.int32),
                frac=np.concatenate([e[1] for e in given]),
                latency_s=np.asarray([e[2] for e in given]))))
        mask = np.ones(len(s), dtype=bool)
        mask[given_idx] = False
        rest = np.flatnonzero(mask)
        if rest.size:
            parts.append((rest, self.fallback.route(s[rest], d[rest], k[rest])))
        return _merge(len(s), parts)
