"""Many coflows checked once and added to an engine in one call (a job's iteration: a hundred
coflows, every iteration the same).

One ``add_coflow`` per coflow cost 80-110 us of Python (checks, memo look-ups, a dozen column
writes, the dependency lists), most of a cluster run once the event loop was compiled
(`benchmarks/contended_small.py`). A `CoflowBatch` holds the coflows' flows, routes,
delays and dependencies as flat arrays, checked when it is made; `add_batch` copies them into
the engine's columns with a few numpy calls and wires the dependencies in compiled code
(`flowherd.engine.event_loop.link_coflows`), with the same ids, order and events as one
``add_coflow`` per coflow in batch order, so the runs are the same bit for bit
(`tests/engine/test_engine_exact.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from flowherd.engine.coflow_input import check_flows, check_routes, check_timing, check_weight
from flowherd.engine.event_loop import RELEASE, heap_push, link_coflows
from flowherd.engine.incidence import ranges
from flowherd.errors import ConfigError
from flowherd.routing.base import Routes

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState

__all__ = ["BatchCoflow", "CoflowBatch", "add_batch", "make_batch", "make_flat_batch"]

_BIG = np.iinfo(np.int32).max  # ids are checked against the engine's fabric when added


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchCoflow:
    """One coflow of a batch (what `make_batch` takes).

    Attributes:
        deps: Indices of earlier coflows of the batch it waits for; empty: it waits for the
            batch's ``after`` instead.
        delay_s: Added after its dependencies (and the batch's ``at_s``), seconds.
        src, dst, size_bytes: Its flows (empty: a pure delay).
        weight: Weighted max-min share of each flow (one per flow) or of all.
        routes: One row per flow (None for a pure delay).
        suffix: Appended to the batch's name.
        min_duration_s: Least time from its start to its finish, seconds
            (`flowherd.engine.core.Engine.add_coflow`).
    """

    deps: tuple[int, ...] = ()
    delay_s: float = 0.0
    min_duration_s: float = 0.0
    src: np.ndarray | None = None
    dst: np.ndarray | None = None
    size_bytes: np.ndarray | None = None
    weight: float | np.ndarray = 1.0
    routes: Routes | None = None
    suffix: str = ""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CoflowBatch:
    """Coflows ready to be added (from `make_batch`); coflow ``i`` waits for ``dep[dep_ptr[i]:
    dep_ptr[i + 1]]`` (batch indices) or, if it has none, for the batch's ``after``."""

    num: int
    delay_s: np.ndarray
    min_duration_s: np.ndarray
    dep_ptr: np.ndarray
    dep: np.ndarray
    has_deps: np.ndarray
    f_ptr: np.ndarray  # flows of coflow i: f_ptr[i]:f_ptr[i + 1]
    flow_coflow: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    weight: np.ndarray
    lat: np.ndarray
    l_ptr: np.ndarray  # links of flow j: l_ptr[j]:l_ptr[j + 1]
    link: np.ndarray
    frac: np.ndarray
    suffix: tuple[str, ...]
    max_gpu: int
    max_link: int


def make_batch(coflows: Sequence[BatchCoflow]) -> CoflowBatch:
    """Check ``coflows`` once (as ``add_coflow`` would) and lay them out flat.

    Raises:
        ConfigError: a dependency that is not an earlier coflow, a bad delay, flows or routes
            (the message names the coflow's index in the batch).
    """
    n = len(coflows)
    delay = np.zeros(n)
    least = np.zeros(n)
    dep_ptr = np.zeros(n + 1, np.int64)
    deps: list[int] = []
    srcs, dsts, sizes, weights, lats, links, fracs, lens = [], [], [], [], [], [], [], []
    f_ptr = np.zeros(n + 1, np.int64)
    for i, c in enumerate(coflows):
        what = f"coflow {i} of the batch"
        check_timing(None, c.delay_s, 0, what)
        delay[i] = c.delay_s
        m = c.min_duration_s
        if m != 0.0 and not (math.isfinite(m) and m >= 0):
            raise ConfigError(f"min_duration_s must be finite and >= 0, got {m!r} (min_duration_s of {what})")
        least[i] = m
        for d in c.deps:
            if not 0 <= d < i:
                raise ConfigError(f"deps must name earlier coflows of the batch (0..{i - 1}), got {d} "
                                  f"(deps of {what})")
        deps.extend(c.deps)
        dep_ptr[i + 1] = len(deps)
        k = 0
        if c.routes is not None:
            s, d, z = check_flows(c.src, c.dst, c.size_bytes, _BIG, what)
            k = s.size
            check_weight(c.weight, k, what)
            lnk, frc, ptr, lat = check_routes(c.routes, k, _BIG, what)
            srcs.append(s)
            dsts.append(d)
            sizes.append(z)
            weights.append(np.broadcast_to(np.asarray(c.weight, np.float64), (k,)))
            lats.append(lat)
            links.append(lnk)
            fracs.append(frc)
            lens.append(np.diff(ptr))
        f_ptr[i + 1] = f_ptr[i] + k

    def cat(parts, dtype):
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

    src, dst = cat(srcs, np.int64), cat(dsts, np.int64)
    link = cat(links, np.int64)
    l_ptr = np.concatenate([[0], np.cumsum(cat(lens, np.int64))]).astype(np.int64)
    return CoflowBatch(
        num=n, delay_s=delay, min_duration_s=least, dep_ptr=dep_ptr, dep=np.array(deps, np.int64),
        has_deps=np.diff(dep_ptr) > 0, f_ptr=f_ptr,
        flow_coflow=np.repeat(np.arange(n, dtype=np.int64), np.diff(f_ptr)), src=src, dst=dst,
        size=cat(sizes, np.float64), weight=cat(weights, np.float64), lat=cat(lats, np.float64),
        l_ptr=l_ptr, link=link, frac=cat(fracs, np.float64),
        suffix=tuple(c.suffix for c in coflows),
        max_gpu=int(max(src.max(initial=-1), dst.max(initial=-1))), max_link=int(link.max(initial=-1)))


def make_flat_batch(*, f_ptr: np.ndarray, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray,
                    routes: Routes, delay_s: np.ndarray, min_duration_s: np.ndarray,
                    deps: Sequence[tuple[int, ...]], weight: float = 1.0,
                    suffix: Sequence[str]) -> CoflowBatch:
    """`make_batch` of coflows whose flows come as one set of arrays: coflow ``i`` has flows
    ``f_ptr[i]:f_ptr[i + 1]`` of ``src``, ``dst``, ``size_bytes`` and ``routes`` (one row per
    flow), delay ``delay_s[i]``, least duration ``min_duration_s[i]``, dependencies ``deps[i]``;
    every flow has ``weight``. The same batch as `make_batch` of one `BatchCoflow` per coflow,
    checked once for all flows, not once per coflow (a 512-step collective's schedule: 30 ms).

    Raises:
        ConfigError: as `make_batch` (the message names the first bad coflow or flow).
    """
    f_ptr = np.asarray(f_ptr, dtype=np.int64)
    n = f_ptr.size - 1
    what = "the flat batch"
    delay = np.asarray(delay_s, dtype=np.float64)
    least = np.asarray(min_duration_s, dtype=np.float64)
    if n < 0 or delay.shape != (n,) or least.shape != (n,) or len(deps) != n or len(suffix) != n:
        raise ConfigError(f"f_ptr must have one entry more than the coflows, and delay_s, "
                          f"min_duration_s, deps and suffix one per coflow, got {f_ptr.size}, "
                          f"{delay.size}, {least.size}, {len(deps)}, {len(suffix)} (batch of {what})")
    src_a, dst_a, size_a = check_flows(src, dst, size_bytes, _BIG, what)
    if f_ptr[0] != 0 or f_ptr[-1] != src_a.size or np.any(np.diff(f_ptr) < 0):
        raise ConfigError(f"f_ptr must rise from 0 to the {src_a.size} flows, got {f_ptr[:8]!r} "
                          f"(f_ptr of {what})")
    for name, arr in (("delay_s", delay), ("min_duration_s", least)):
        bad = np.flatnonzero(~np.isfinite(arr) | ~(arr >= 0))
        if bad.size:
            raise ConfigError(f"{name} must be finite and >= 0, got {float(arr[bad[0]])!r} "
                              f"({name} of coflow {bad[0]} of the batch)")
    check_weight(weight, src_a.size, what)
    lnk, frc, ptr, lat = check_routes(routes, src_a.size, _BIG, what)
    dep_ptr = np.zeros(n + 1, np.int64)
    flat: list[int] = []
    for i, d in enumerate(deps):
        for j in d:
            if not 0 <= j < i:
                raise ConfigError(f"deps must name earlier coflows of the batch (0..{i - 1}), got {j} "
                                  f"(deps of coflow {i} of the batch)")
        flat.extend(d)
        dep_ptr[i + 1] = len(flat)
    return CoflowBatch(
        num=n, delay_s=delay, min_duration_s=least, dep_ptr=dep_ptr, dep=np.array(flat, np.int64),
        has_deps=np.diff(dep_ptr) > 0, f_ptr=f_ptr,
        flow_coflow=np.repeat(np.arange(n, dtype=np.int64), np.diff(f_ptr)), src=src_a, dst=dst_a,
        size=size_a, weight=np.broadcast_to(np.asarray(weight, np.float64), src_a.shape).copy(),
        lat=lat, l_ptr=ptr, link=lnk, frac=frc, suffix=tuple(suffix),
        max_gpu=int(max(src_a.max(initial=-1), dst_a.max(initial=-1))),
        max_link=int(lnk.max(initial=-1)))


def add_batch(eng: EngineState, batch: CoflowBatch, *, at_s: float | None = None, after: Sequence[int] = (),
              name: str = "", on_done: Callable[[int, float], None] | None = None) -> int:
    """`flowherd.engine.core.Engine.add_coflows` (see there)."""
    c0 = eng._c.count
    what = f"coflows {c0}.. (add_coflows)"
    check_timing(at_s, 0.0, 0, what)
    if batch.max_gpu >= eng.fabric.num_gpus or batch.max_link >= eng.fabric.num_directed_links:
        raise ConfigError(f"the batch names GPU {batch.max_gpu} and link {batch.max_link}, the fabric "
                          f"has {eng.fabric.num_gpus} GPUs and {eng.fabric.num_directed_links} links "
                          f"(batch of {what})")
    after_t = tuple(int(a) for a in np.atleast_1d(np.asarray(after, dtype=np.int64)))
    for a in after_t:
        if not 0 <= a < c0:
            raise ConfigError(f"after names unknown coflow {a}, expected ids in 0..{c0 - 1} "
                              f"(after of {what})")
    n = batch.num
    nf = batch.src.size
    f, lk, c = eng._f, eng._links, eng._c
    fs = f.extend(nf)
    if nf:
        ls = lk.extend(batch.link.size)
        f.coflow[fs] = c0 + batch.flow_coflow
        f.src[fs] = batch.src
        f.dst[fs] = batch.dst
        f.size[fs] = batch.size
        f.lat[fs] = batch.lat
        f.weight[fs] = batch.weight
        f.prio[fs] = 0 if eng.network is None else eng.network.port_class(0)
        f.lo[fs] = batch.l_ptr[:-1] + ls.start
        f.hi[fs] = batch.l_ptr[1:] + ls.start
        lk.link[ls] = batch.link
        lk.frac[ls] = batch.frac
    if n == 1 and not after_t and not batch.has_deps[0]:
        # one coflow waiting for nothing (a collective's step added when it is ready, as
        # `flowherd.cluster.step_launch` does thousands of times): what `link_coflows` does for
        # it, without the dependency pool and the kernel call
        eng._c_name.append(name + batch.suffix[0])
        c.extend(1)
        c.flo[c0] = fs.start
        c.fhi[c0] = fs.stop
        base = eng.now_s if at_s is None else float(at_s)
        c.base[c0] = base
        c.delay[c0] = batch.delay_s[0]
        c.cmin[c0] = batch.min_duration_s[0]
        c.alo[c0] = c.ahi[c0] = eng._after.count
        c.waiting[c0] = 0
        if on_done is not None:
            c.cb[c0] = True
            eng._cbs[c0] = on_done
        eng._heap_room()
        h = eng._hp
        heap_push(h.t, h.seq, h.kind, h.cid, eng._st_i, max(base + float(c.delay[c0]), eng.now_s), RELEASE,
                  c0)
        return c0
    eng._c_name.extend([name + s for s in batch.suffix])
    cs = c.extend(n)
    c.flo[cs] = fs.start + batch.f_ptr[:-1]
    c.fhi[cs] = fs.start + batch.f_ptr[1:]
    c.base[cs] = eng.now_s if at_s is None else float(at_s)
    c.delay[cs] = batch.delay_s
    c.cmin[cs] = batch.min_duration_s
    # the after pool: each coflow's deps, or the batch's after where it has none
    lens = np.where(batch.has_deps, np.diff(batch.dep_ptr), len(after_t))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    al = eng._after.extend(int(ptr[-1]))
    pool = eng._after.cid
    if batch.dep.size:
        has = batch.has_deps
        pool[al.start + ranges(ptr[:-1][has], ptr[1:][has])] = c0 + batch.dep
    if after_t:
        for i in np.flatnonzero(~batch.has_deps).tolist():
            pool[al.start + ptr[i]:al.start + ptr[i + 1]] = after_t
    c.alo[cs] = al.start + ptr[:-1]
    c.ahi[cs] = al.start + ptr[1:]
    if on_done is not None:
        c.cb[c0 + n - 1] = True
        eng._cbs[c0 + n - 1] = on_done
    # at most one edge per dependency entry
    ed = eng._edges
    e0 = ed.count
    ed.extend(int(ptr[-1]))
    eng._heap_room()
    h = eng._hp
    ed.count = link_coflows(c0, c0 + n, eng.now_s, c.base, c.delay, c.finish, c.waiting, c.alo,
                            c.ahi, c.dhead, c.dtail, pool, ed.to, ed.next, e0, h.t, h.seq, h.kind,
                            h.cid, eng._st_i)
    return c0
