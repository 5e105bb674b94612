"""Compiled pieces of the engine's event step (`flowherd.engine.core.Engine._step`): which flows
end now, taking them off their links, and counting them off their coflows, each one call per
batch of events instead of a dozen numpy calls (the Python overhead per event was most of a
cluster run's time once the rate updates got local)."""

from __future__ import annotations

import numpy as np

from flowherd.engine.allocation import NO_CLASS, settle
from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.incidence import adj_remove

__all__ = ["count_off", "end_flows", "soonest", "split_done", "start_flows"]

@kernel(**NO_REFCOUNT)
def soonest(act, txend):
    """The earliest transmission end of the flows ``act`` (+inf if none)."""
    t = np.inf
    for i in range(act.size):
        v = txend[act[i]]
        if v < t:
            t = v
    return t


@kernel
def split_done(act, txend, start, now, time_tol, completion_rtol):
    """``act`` split into the flows that end at ``now`` (transmission end within ``time_tol``
    of it, or, in the approximate mode, within ``completion_rtol`` of the time since the flow
    started) and the others, both in the order of ``act``."""
    n = act.size
    done = np.empty(n, np.int64)
    keep = np.empty(n, np.int64)
    nd = 0
    nk = 0
    lim = now + time_tol
    for i in range(n):
        f = act[i]
        te = txend[f]
        if te <= lim or (completion_rtol > 0.0 and te - now <= completion_rtol * (now - start[f])):
            done[nd] = f
            nd += 1
        else:
            keep[nk] = f
            nk += 1
    return done[:nd], keep[:nk]


@kernel(**NO_REFCOUNT)
def end_flows(done, now, rate, weight, prio, rem, t0, lo, hi, link_buf, frac_buf, link_bytes,
              link_nact, link_load, busy_since, busy_s, inc_pos, b_start, b_len, b_flow, b_inc,
              txend, finish, lat):
    """Flows ``done`` sent their last byte at ``now``: credit their links, take them off their
    links and buckets, set their ends. Returns the lowest (class, level) among them before they
    ended (`flowherd.engine.allocation.threshold`)."""
    p_min = NO_CLASS
    t_min = np.inf
    for i in range(done.size):
        f = done[i]
        p = prio[f]
        lvl = rate[f] / weight[f]
        if p < p_min or (p == p_min and lvl < t_min):
            p_min = p
            t_min = lvl
    settle(done, now, True, rate, rem, t0, lo, hi, link_buf, frac_buf, link_bytes, link_nact,
           link_load, busy_since, busy_s)
    adj_remove(done, lo, hi, link_buf, inc_pos, b_start, b_len, b_flow, b_inc)
    for i in range(done.size):
        f = done[i]
        txend[f] = now
        finish[f] = now + lat[f]
    return p_min, t_min


@kernel
def count_off(done, coflow, finish, c_left, c_last):
    """Count the flows ``done`` off their coflows (flows left, latest finish); returns the
    coflows that have none left, in increasing id order."""
    out = np.empty(done.size, np.int64)
    m = 0
    for i in range(done.size):
        f = done[i]
        c = coflow[f]
        c_left[c] -= 1
        if finish[f] > c_last[c]:
            c_last[c] = finish[f]
        if c_left[c] == 0:
            out[m] = c
            m += 1
    return np.sort(out[:m])


@kernel
def start_flows(lo, hi, now, size, f_lo, f_hi, lat, start, txend, finish, rem, t0, rate):
    """Start the flows ``lo .. hi - 1`` of a coflow at ``now``. Zero-byte and link-less
    (same-GPU) flows are over at once (no rate, only latency). Returns the others (to put on
    their links), the latest finish of the instant ones (``now`` if none) and their number."""
    real = np.empty(hi - lo, np.int64)
    m = 0
    last = now
    for f in range(lo, hi):
        start[f] = now
        if size[f] == 0.0 or f_hi[f] == f_lo[f]:
            txend[f] = now
            finish[f] = now + lat[f]
            if finish[f] > last:
                last = finish[f]
        else:
            rem[f] = size[f]
            t0[f] = now
            rate[f] = 0.0
            txend[f] = np.inf
            real[m] = f
            m += 1
    return real[:m], last, hi - lo - m
