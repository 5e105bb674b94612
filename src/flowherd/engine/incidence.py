"""Storage of the engine's flows: growable numpy columns and per-link buckets of active flows.

Flow ``f``'s links are ``link[lo[f]:hi[f]]`` of one incidence pool. The active flows of link
``l`` are ``b_flow[b_start[l]:b_start[l] + b_len[l]]`` (``b_inc`` holds each entry's incidence,
``pos`` where each incidence sits), kept up to date as flows come and go, so that finding the
flows of a part of the network costs only its size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel

__all__ = ["COFLOW_COLUMNS", "FLOW_COLUMNS", "Grow", "adj_insert", "adj_rebuild", "adj_remove", "buckets_add",
           "compact_flows", "ranges"]


@kernel(**NO_REFCOUNT)
def adj_insert(flows, lo, hi, link_buf, inc_pos, b_start, b_len, b_cap, b_flow, b_inc, used):
    """Add the incidences of ``flows`` to the per-link buckets (a bucket that is full moves to
    the end of the pool with twice the room). Returns how many flows were added (fewer when
    the pool ran out: the caller compacts and calls again) and the pool's used length."""
    for i in range(flows.size):
        f = flows[i]
        need = 0
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if b_len[lnk] == b_cap[lnk]:
                need += max(4, 2 * b_cap[lnk])
        if used + need > b_flow.size:
            return i, used
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if b_len[lnk] == b_cap[lnk]:
                nc = max(4, 2 * b_cap[lnk])
                ns = used
                used += nc
                for q in range(b_len[lnk]):
                    b_flow[ns + q] = b_flow[b_start[lnk] + q]
                    b_inc[ns + q] = b_inc[b_start[lnk] + q]
                    inc_pos[b_inc[ns + q]] = ns + q
                b_start[lnk] = ns
                b_cap[lnk] = nc
            p = b_start[lnk] + b_len[lnk]
            b_flow[p] = f
            b_inc[p] = k
            inc_pos[k] = p
            b_len[lnk] += 1
    return flows.size, used


@kernel(**NO_REFCOUNT)
def adj_remove(flows, lo, hi, link_buf, inc_pos, b_start, b_len, b_flow, b_inc):
    for i in range(flows.size):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            p = inc_pos[k]
            last = b_start[lnk] + b_len[lnk] - 1
            b_flow[p] = b_flow[last]
            b_inc[p] = b_inc[last]
            inc_pos[b_inc[p]] = p
            b_len[lnk] -= 1


@kernel(**NO_REFCOUNT)
def adj_rebuild(active, lo, hi, link_buf, inc_pos, b_start, b_len, b_cap, b_flow, b_inc):
    """Lay the buckets of the active flows out afresh, each with twice its length of room."""
    num_links = b_start.size
    for lnk in range(num_links):
        b_len[lnk] = 0
    for i in range(active.size):
        f = active[i]
        for k in range(lo[f], hi[f]):
            b_len[link_buf[k]] += 1
    used = 0
    for lnk in range(num_links):
        b_start[lnk] = used
        b_cap[lnk] = 2 * b_len[lnk]
        used += b_cap[lnk]
        b_len[lnk] = 0
    for i in range(active.size):
        f = active[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            p = b_start[lnk] + b_len[lnk]
            b_flow[p] = f
            b_inc[p] = k
            inc_pos[k] = p
            b_len[lnk] += 1
    return used



class Grow:
    """Named numpy columns that grow by doubling."""

    def __init__(self, spec: dict[str, tuple[Any, Any]]):
        self._spec = spec
        self.count = 0
        self._cap = 16
        for name, (dtype, fill) in spec.items():
            setattr(self, name, np.full(self._cap, fill, dtype=dtype))

    def extend(self, n: int) -> slice:
        need = self.count + n
        if need > self._cap:
            cap = max(need, 2 * self._cap)
            for name, (dtype, fill) in self._spec.items():
                new = np.full(cap, fill, dtype=dtype)
                new[: self.count] = getattr(self, name)[: self.count]
                setattr(self, name, new)
            self._cap = cap
        sl = slice(self.count, need)
        self.count = need
        return sl


FLOW_COLUMNS = {
    "coflow": (np.int64, 0), "src": (np.int32, 0), "dst": (np.int32, 0),
    "size": (np.float64, 0.0), "lat": (np.float64, 0.0), "weight": (np.float64, 1.0),
    "prio": (np.int64, 0), "lo": (np.int64, 0), "hi": (np.int64, 0),
    "start": (np.float64, np.nan), "txend": (np.float64, np.inf), "finish": (np.float64, np.nan),
    "rem": (np.float64, 0.0), "t0": (np.float64, 0.0), "rate": (np.float64, 0.0),
    "rate_new": (np.float64, 0.0), "mark": (np.bool_, False), "bn": (np.int64, -1),
}


# per coflow: flows left and latest flow finish (counted off as flows end), its flows
# ``flo:fhi``, earliest start and delay, start and finish, dependencies not finished, its
# ``after`` ids (a range of the engine's pool), the first and last edge of its dependents, and
# whether a listener waits for its end
COFLOW_COLUMNS = {
    "left": (np.int64, 0), "last": (np.float64, np.nan), "flo": (np.int64, 0), "fhi": (np.int64, 0),
    "base": (np.float64, 0.0), "delay": (np.float64, 0.0), "start": (np.float64, np.nan),
    "cmin": (np.float64, 0.0),  # least duration from start to finish (NCCL's channel rate), s
    "finish": (np.float64, np.nan), "waiting": (np.int64, 0), "alo": (np.int64, 0),
    "ahi": (np.int64, 0), "dhead": (np.int64, -1), "dtail": (np.int64, -1), "cb": (np.bool_, False),
}


def ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenated index ranges ``lo[i]:hi[i]`` (incidences of a set of flows)."""
    lens = hi - lo
    return np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))


def compact_flows(eng) -> None:
    """Drop the flows of engine ``eng`` that are over (no flow records are kept) and renumber
    the rest."""
    f, links = eng._f, eng._links
    n = f.count
    keep = np.zeros(n, bool)
    keep[eng._active] = True
    held = getattr(eng, "_held", None) or {}  # flows taken off the network (`flowherd.engine.hold`)
    for flows in held.values():
        keep[flows] = True
    c = eng._c
    pending = np.flatnonzero(np.isnan(c.start[:c.count]) & (c.fhi[:c.count] > c.flo[:c.count]))
    keep[ranges(c.flo[pending], c.fhi[pending])] = True
    ids = np.flatnonzero(keep)
    new_id = np.full(n, -1, np.int64)
    new_id[ids] = np.arange(ids.size)
    lens = f.hi[ids] - f.lo[ids]
    inc = ranges(f.lo[ids], f.hi[ids])
    for name in links._spec:
        col = getattr(links, name)
        col[:inc.size] = col[inc]
    links.count = inc.size
    for name, (_dtype, fill) in f._spec.items():
        col = getattr(f, name)
        col[:ids.size] = col[ids]
        # the freed rows back to their defaults: a flow added there later must not inherit a
        # dropped flow's state (a stale bottleneck pointer ``bn`` named a link the new flow
        # does not cross, and `bottleneck.local_update` tries that link first)
        col[ids.size:n] = fill
    f.count = ids.size
    f.lo[:ids.size] = np.cumsum(lens) - lens
    f.hi[:ids.size] = np.cumsum(lens)
    lo = new_id[c.flo[pending]]
    c.fhi[pending] = lo + c.fhi[pending] - c.flo[pending]
    c.flo[pending] = lo
    eng._active = new_id[eng._active]
    for h, flows in held.items():
        held[h] = new_id[flows]
    nnz = int((f.hi[eng._active] - f.lo[eng._active]).sum())
    if eng._b_flow.size < 2 * nnz:
        eng._b_flow = np.zeros(8 * nnz + 8 * eng.fabric.num_directed_links, np.int64)
        eng._b_inc = np.zeros(eng._b_flow.size, np.int64)
    eng._b_used = adj_rebuild(eng._active, f.lo, f.hi, links.link, links.pos, eng._b_start,
                               eng._b_len, eng._b_cap, eng._b_flow, eng._b_inc)
    eng._dead = 0


def buckets_add(eng, flows: np.ndarray) -> None:
    """Put ``flows`` into the per-link buckets of engine ``eng``, laying the pool out afresh
    when it is full."""
    f, links = eng._f, eng._links
    done = 0
    while True:
        k, eng._b_used = adj_insert(flows[done:], f.lo, f.hi, links.link, links.pos,
                                     eng._b_start, eng._b_len, eng._b_cap, eng._b_flow,
                                     eng._b_inc, eng._b_used)
        done += k
        if done == flows.size:
            return
        # pool full: lay the active flows out afresh in a pool twice their size
        act = eng._active
        nnz = int((f.hi[act] - f.lo[act]).sum())
        size = max(1024, 8 * nnz + 8 * eng.fabric.num_directed_links)  # room enough
        if size > eng._b_flow.size:
            eng._b_flow = np.zeros(size, np.int64)
            eng._b_inc = np.zeros(size, np.int64)
        # flows[done:] are in `act` but not yet in the buckets: rebuild from the rest
        pending = flows[done:]
        keep = act[~np.isin(act, pending)]
        eng._b_used = adj_rebuild(keep, f.lo, f.hi, links.link, links.pos, eng._b_start,
                                   eng._b_len, eng._b_cap, eng._b_flow, eng._b_inc)
