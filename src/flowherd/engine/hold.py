"""Active flows taken off the network and put back later, with fewer bytes left (the exact
fast-forward among background flows, `flowherd.cluster.quiet`).

`hold_flows` brings flows to the clock at their current rates (their links credited with the
bytes sent), takes them off their links and buckets, and keeps them aside: they have no rate
and no end until `resume_flows` puts them back as if they started now with their bytes left
minus what the caller says they sent meanwhile (the rate update of that step gives them their
max-min rates). Held flows survive the dropping of finished flows (`incidence.compact_flows`
renumbers them with the rest).

Both are for the ideal network (no congestion model: its queues would not know) and are called
from an ``on_done`` listener (inside `Engine.run`), when the step's events are being processed:
a resumed flow joins the flows that start in that step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flowherd.engine import event_loop as ev
from flowherd.engine.allocation import settle
from flowherd.engine.incidence import adj_remove
from flowherd.errors import SimulationError

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState

__all__ = ["active_on", "held", "hold_flows", "remaining_bytes", "resume_flows"]


def held(eng: EngineState) -> dict[int, np.ndarray]:
    """The engine's held flows by handle (made on first use)."""
    h = getattr(eng, "_held", None)
    if h is None:
        h = eng._held = {}
    return h


def active_on(eng: EngineState, links: np.ndarray) -> np.ndarray:
    """The active flows with an incidence on ``links`` (sorted, distinct)."""
    links = np.asarray(links, np.int64)
    lo = eng._b_start[links]
    n = eng._b_len[links]
    if not n.any():
        return np.zeros(0, np.int64)
    idx = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    return np.unique(eng._b_flow[idx])


def remaining_bytes(eng: EngineState, flows: np.ndarray) -> np.ndarray:
    """Bytes the active ``flows`` have left now (as `allocation.settle` would count them)."""
    f = eng._f
    sent = np.minimum(np.maximum(f.rate[flows], 0.0) * (eng.now_s - f.t0[flows]), f.rem[flows])
    return f.rem[flows] - sent


def hold_flows(eng: EngineState, flows: np.ndarray) -> int:
    """Take the active ``flows`` off the network now; returns the handle `resume_flows` takes.

    The caller makes sure no other active flow shares a link with them (their rates would be
    due for an update that is not made here).
    """
    flows = np.ascontiguousarray(flows, np.int64)
    f, lk, ls = eng._f, eng._links, eng._ls
    now = float(eng.now_s)
    settle(flows, now, False, f.rate, f.rem, f.t0, f.lo, f.hi, lk.link, lk.frac, ls.bytes, ls.nact,
           ls.load, ls.busy_since, ls.busy_s)
    adj_remove(flows, f.lo, f.hi, lk.link, lk.pos, eng._b_start, eng._b_len, eng._b_flow, eng._b_inc)
    f.txend[flows] = np.inf
    act = eng._active
    eng._active = act[~np.isin(act, flows)]
    h = held(eng)
    handle = max(h, default=-1) + 1
    h[handle] = flows.copy()
    return handle


def resume_flows(eng: EngineState, handle: int, sent_bytes: np.ndarray) -> np.ndarray:
    """Put the flows of ``handle`` back now, ``sent_bytes`` (one per flow, in hold order) fewer
    bytes left each; they start in the step being processed. Returns their ids.

    Raises:
        SimulationError: not inside a step (an ``on_done`` listener), or a flow would be left
            with no bytes (the caller's window was too long).
    """
    flows = held(eng).pop(handle)
    st = eng._st_i
    if not eng._running or st[ev.PHASE] != 1:
        raise SimulationError("resume_flows must be called from an on_done listener of the run")
    f = eng._f
    rem = f.rem[flows] - np.asarray(sent_bytes, np.float64)
    if flows.size and not np.all(rem > 0):
        raise SimulationError(f"held flow {int(flows[np.argmin(rem)])} would resume with "
                              f"{float(rem.min())} bytes left; a window must end before its flows do")
    now = float(eng.now_s)
    f.rem[flows] = rem
    f.t0[flows] = now
    f.rate[flows] = 0.0
    f.txend[flows] = np.inf
    n = int(st[ev.N_STARTED])
    eng._started_buf[n:n + flows.size] = flows
    st[ev.N_STARTED] = n + flows.size
    return flows
