"""Reading an engine's records: bytes per link so far, and the `SimResult` snapshot.

Both copy out of the engine's columns and change nothing, so they are safe mid-run; they sit
apart from `flowherd.engine.core` as its other helpers do, taking the engine by its protocol
(`flowherd.engine.state.EngineState`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flowherd.engine.incidence import ranges
from flowherd.engine.results import SimResult

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState

__all__ = ["link_bytes_now", "snapshot"]


def link_bytes_now(eng: EngineState) -> np.ndarray:
    """`flowherd.engine.core.Engine.link_bytes_now` (see there)."""
    f = eng._f
    link_bytes = eng._ls.bytes.copy()
    act = eng._active
    if act.size:  # bytes sent since the active flows' last settle
        sent = np.minimum(f.rate[act] * (eng.now_s - f.t0[act]), f.rem[act])
        lens = f.hi[act] - f.lo[act]
        idx = ranges(f.lo[act], f.hi[act])
        link_bytes += np.bincount(eng._links.link[idx], weights=eng._links.frac[idx] *
                                  np.repeat(sent, lens), minlength=link_bytes.size)
    return link_bytes


def snapshot(eng: EngineState) -> SimResult:
    """`flowherd.engine.core.Engine.result` (see there)."""
    f = eng._f
    n = f.count
    busy = eng._ls.busy_s.copy()
    on = eng._ls.nact > 0
    busy[on] += eng.now_s - eng._ls.busy_since[on]
    link_bytes = eng.link_bytes_now()
    finish = eng._c.finish[:eng._c.count].copy()
    rec = eng.record_flows
    return SimResult(
        now_s=eng.now_s,
        flow_coflow=f.coflow[:n].copy() if rec else None,
        flow_src=f.src[:n].copy() if rec else None,
        flow_dst=f.dst[:n].copy() if rec else None,
        flow_size_bytes=f.size[:n].copy() if rec else None,
        flow_start_s=f.start[:n].copy() if rec else None,
        flow_finish_s=f.finish[:n].copy() if rec else None,
        coflow_name=tuple(eng._c_name),
        coflow_start_s=eng._c.start[:eng._c.count].copy(),
        coflow_finish_s=finish,
        link_bytes=link_bytes,
        link_busy_s=busy,
        makespan_s=float(np.nanmax(finish)) if np.any(~np.isnan(finish)) else 0.0,
        num_events=eng.num_events,
        num_rate_updates=eng.num_rate_updates,
    )

