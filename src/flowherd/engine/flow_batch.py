"""Many coflows of one flow each added to an engine in one call (background traffic), with the
records of finished ones reused.

Background traffic adds thousands of single-flow coflows at a time, millions over a run; one
``add_coflow`` each would cost its Python per flow. `add_flows` checks the batch once and
writes the engine's columns with a few numpy calls, with the same ids, events and results as
one ``add_coflow`` per flow. It sits apart from `flowherd.engine.core` as `add_batch`
(`flowherd.engine.coflow_batch`) does: a helper that takes the engine by its protocol
(`flowherd.engine.state.EngineState`) and fills its arrays in place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flowherd.engine.coflow_input import as_1d, check_flows, check_routes
from flowherd.engine.event_loop import RELEASE, heap_push_many
from flowherd.engine.incidence import COFLOW_COLUMNS
from flowherd.errors import ConfigError
from flowherd.routing.base import Routes

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState

__all__ = ["add_flows"]

_NO_I = np.zeros(0, np.int64)


def add_flows(eng: EngineState, src, dst, size_bytes, *, at_s, routes: Routes, name: str = "",
              reuse: np.ndarray | None = None) -> np.ndarray:
    """`flowherd.engine.core.Engine.add_flows` (see there)."""
    c0 = eng._c.count
    what = f"coflows {c0}.. (add_flows)"
    src_a, dst_a, size_a = check_flows(src, dst, size_bytes, eng.fabric.num_gpus, what)
    n = src_a.size
    at_a = np.broadcast_to(as_1d("at_s", at_s, np.float64), (n,))
    bad = np.flatnonzero(~np.isfinite(at_a) | ~(at_a >= 0))
    if bad.size:
        raise ConfigError(f"at_s must be finite times >= 0, got {float(at_a[bad[0]])!r} "
                          f"(at_s[{bad[0]}] of {what})")
    lnk, frc, ptr, lat = check_routes(routes, n, eng.fabric.num_directed_links, what)
    c = eng._c
    r = _NO_I if reuse is None else np.asarray(reuse, dtype=np.int64).ravel()
    if r.size:
        if r.size > n:
            raise ConfigError(f"reuse names {r.size} coflows for {n} flows; expected at most one "
                              f"per flow (reuse of {what})")
        if np.any((r < 0) | (r >= c0)):
            bad = int(r[np.argmax((r < 0) | (r >= c0))])
            raise ConfigError(f"reuse names unknown coflow {bad}, expected ids in 0..{c0 - 1} "
                              f"(reuse of {what})")
        busy = np.isnan(c.finish[r]) | c.cb[r] | (c.dhead[r] >= 0)
        if np.any(busy) or np.any(np.diff(np.sort(r)) == 0):  # not np.unique: it imports numpy.ma
            bad = int(r[np.argmax(busy)]) if np.any(busy) else int(r[0])
            raise ConfigError(f"reuse names coflow {bad}, which has not finished, is waited for or "
                              f"is named twice; expected finished coflows nobody waits for (reuse of "
                              f"{what})")
        for col, (_dtype, fill) in COFLOW_COLUMNS.items():  # the reused records afresh
            getattr(c, col)[r] = fill
    ids = np.concatenate([r, np.arange(c0, c0 + n - r.size, dtype=np.int64)])
    fs = eng._f.extend(n)
    ls = eng._links.extend(lnk.size)
    f = eng._f
    f.coflow[fs] = ids
    f.src[fs] = src_a
    f.dst[fs] = dst_a
    f.size[fs] = size_a
    f.lat[fs] = lat
    f.weight[fs] = 1.0
    f.prio[fs] = 0 if eng.network is None else eng.network.port_class(0)
    f.lo[fs] = ptr[:-1] + ls.start
    f.hi[fs] = ptr[1:] + ls.start
    eng._links.link[ls] = lnk
    eng._links.frac[ls] = frc
    for cid in r.tolist():
        eng._c_name[cid] = name
    eng._c_name.extend([name] * (n - r.size))
    c.extend(n - r.size)
    c.flo[ids] = np.arange(fs.start, fs.stop)
    c.fhi[ids] = c.flo[ids] + 1
    c.base[ids] = at_a
    c.alo[ids] = c.ahi[ids] = eng._after.count
    eng._heap_room()
    heap_push_many(eng._hp.t, eng._hp.seq, eng._hp.kind, eng._hp.cid, eng._st_i,
                   np.maximum(at_a + 0.0, eng.now_s), RELEASE, ids)
    return ids
