"""Exact max-min re-allocation of the flows an event can affect (the engine's rate update).

`reallocate` is the one place where rates are computed from capacities and flows: an event's
seed flows (started or ended) and the flows coupled to them over saturated links are
re-allocated max-min (`flowherd.sim.fairshare.max_min_subset`) on what the other flows leave;
if that saturates a link they share with other flows, those join and it is done again (see
`flowherd.sim.engine` for why the result is the max-min allocation of all active flows). A
model that changes how capacity is shared hooks in here.

The kernels keep the per-link state the engine reports: bytes carried (credited when a flow's
rate changes or it ends), the number of flows with a positive rate and the busy time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from flowherd.sim.fairshare import max_min_subset

__all__ = ["LinkState", "activate", "reallocate", "settle"]

# a link loaded to within this fraction of its capacity counts as saturated (a bottleneck)
_SAT_RTOL = 1e-9


@njit(cache=True)
def _closure(seeds, forced, lo, hi, link_buf, load, cap, b_start, b_len, b_flow, link_mark,
             flow_mark):
    """The flows whose rates an event can change: active flows reached from the links of the
    ``seeds`` flows and the ``forced`` links, crossing from flow to flow over saturated links.

    A link with spare capacity does not couple the rates of its flows, so it is not crossed
    (the caller checks afterwards that none became saturated; see `Engine._rates`). The active
    flows of link ``l`` are ``b_flow[b_start[l]:b_start[l] + b_len[l]]``. ``link_mark`` and
    ``flow_mark`` are zero on entry and on return. Returns the flow ids, sorted.
    """
    queue = [np.int64(0) for _ in range(0)]
    for s in range(seeds.size):
        f = seeds[s]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not link_mark[lnk]:
                link_mark[lnk] = True
                queue.append(lnk)
    for s in range(forced.size):
        lnk = forced[s]
        if not link_mark[lnk]:
            link_mark[lnk] = True
            queue.append(lnk)
    out = [np.int64(0) for _ in range(0)]
    qh = 0
    while qh < len(queue):
        j = queue[qh]
        qh += 1
        for e in range(b_start[j], b_start[j] + b_len[j]):
            f = b_flow[e]
            if flow_mark[f]:
                continue
            flow_mark[f] = True
            out.append(f)
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                if not link_mark[lnk] and load[lnk] >= cap[lnk] * (1.0 - _SAT_RTOL):
                    link_mark[lnk] = True
                    queue.append(lnk)
    for j in queue:
        link_mark[j] = False
    res = np.empty(len(out), np.int64)
    for i in range(len(out)):
        res[i] = out[i]
        flow_mark[out[i]] = False
    return np.sort(res)



@njit(cache=True)
def _residual(comp, lo, hi, link_buf, frac_buf, rate, load, nflows, cap, cap_eff, s_cnt):
    """Set ``cap_eff`` on the links of ``comp`` to what the flows outside ``comp`` leave."""
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            s_cnt[link_buf[k]] += 1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if s_cnt[lnk] == nflows[lnk]:
                cap_eff[lnk] = cap[lnk]  # no flow outside: exact, no cancellation
            else:
                cap_eff[lnk] = cap[lnk] - load[lnk]
    for i in range(comp.size):
        f = comp[i]
        r = rate[f]
        if r > 0.0:
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                if s_cnt[lnk] != nflows[lnk]:
                    cap_eff[lnk] += r * frac_buf[k]
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if cap_eff[lnk] < _SAT_RTOL * cap[lnk] * 1e-3:
                cap_eff[lnk] = 0.0


@njit(cache=True)
def _newly_saturated(comp, lo, hi, link_buf, frac_buf, rate_new, nflows, cap, cap_eff, s_cnt,
                     s_pos):
    """Links of ``comp`` shared with outside flows that the new rates saturate. Restores
    ``cap_eff`` to ``cap`` and ``s_cnt`` to zero on the links of ``comp``; ``s_pos`` is per-link
    scratch, zero on entry and on return."""
    nnz = 0
    for i in range(comp.size):
        nnz += hi[comp[i]] - lo[comp[i]]
    use = np.zeros(nnz, np.float64)
    links = np.empty(nnz, np.int64)
    m = 0
    for i in range(comp.size):
        f = comp[i]
        r = rate_new[f]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if s_cnt[lnk] == nflows[lnk]:
                continue
            if s_pos[lnk] == 0:
                links[m] = lnk
                m += 1
                s_pos[lnk] = m
            use[s_pos[lnk] - 1] += r * frac_buf[k]
    out = np.empty(m, np.int64)
    q = 0
    for j in range(m):
        lnk = links[j]
        s_pos[lnk] = 0
        outside = cap[lnk] - cap_eff[lnk]
        if outside + use[j] >= cap[lnk] * (1.0 - _SAT_RTOL):
            out[q] = lnk
            q += 1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            cap_eff[lnk] = cap[lnk]
            s_cnt[lnk] = 0
    return out[:q]



@njit(cache=True)
def settle(flows, now, finish, rate, rem, t0, lo, hi, link_buf, frac_buf, link_bytes, link_nact,
            link_load, busy_since, busy_s):
    """Bring ``flows`` to time ``now`` at their current rates (all bytes if ``finish``): credit
    their links with the bytes sent, then take them off their links (rate 0)."""
    for i in range(flows.size):
        f = flows[i]
        r = rate[f]
        if finish:
            sent = rem[f]
        elif r > 0.0:
            sent = r * (now - t0[f])
            if sent > rem[f]:
                sent = rem[f]
        else:
            sent = 0.0
        rem[f] -= sent
        t0[f] = now
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            link_bytes[lnk] += sent * frac_buf[k]
            if r > 0.0:
                link_nact[lnk] -= 1
                if link_nact[lnk] == 0:
                    busy_s[lnk] += now - busy_since[lnk]
                    link_load[lnk] = 0.0  # exact when empty, whatever rounding did before
                else:
                    link_load[lnk] -= r * frac_buf[k]
        rate[f] = 0.0


@njit(cache=True)
def activate(flows, now, rate, rate_new, rem, txend, lo, hi, link_buf, frac_buf, link_nact,
              link_load, busy_since):
    """Give ``flows`` their new rates, put them on their links, set their transmission ends."""
    for i in range(flows.size):
        f = flows[i]
        r = rate_new[f]
        rate[f] = r
        if r > 0.0:
            txend[f] = now + rem[f] / r
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                if link_nact[lnk] == 0:
                    busy_since[lnk] = now
                link_nact[lnk] += 1
                link_load[lnk] += r * frac_buf[k]
        else:
            txend[f] = np.inf



class LinkState:
    """Per-link arrays of one engine: capacity, current load, accounting and scratch."""

    __slots__ = ("busy_s", "busy_since", "bytes", "cap", "cap_eff", "cnt", "load", "mark", "nact",
                 "pos", "scratch")

    def __init__(self, capacity_bytes_per_s: np.ndarray):
        from flowherd.sim.fairshare import Scratch

        n = capacity_bytes_per_s.size
        self.cap = np.ascontiguousarray(capacity_bytes_per_s, dtype=np.float64)
        self.load = np.zeros(n)  # sum of rate * frac, bytes per second
        self.nact = np.zeros(n, np.int64)  # flows with a positive rate
        self.bytes = np.zeros(n)
        self.busy_s = np.zeros(n)
        self.busy_since = np.zeros(n)
        self.mark = np.zeros(n, np.bool_)
        self.cap_eff = self.cap.copy()
        self.pos = np.zeros(n, np.int64)
        self.cnt = np.zeros(n, np.int64)
        self.scratch = Scratch(n)


def reallocate(seeds: np.ndarray, now: float, f, link: np.ndarray, frac: np.ndarray, ls: LinkState,
               b_start: np.ndarray, b_len: np.ndarray, b_flow: np.ndarray,
               on_rates: Callable[[np.ndarray], None] | None = None) -> tuple[int, int]:
    """Recompute the rates the flows ``seeds`` (just started or ended) can change, in place.

    Args:
        seeds: Flow ids whose start or end triggers the update.
        now: The clock, seconds.
        f: The engine's flow columns (``lo``, ``hi``, ``rate``, ``rate_new``, ``weight``,
            ``prio``, ``rem``, ``t0``, ``txend``, ``mark``).
        link, frac: The incidence pool (flow ``i``'s links are ``link[lo[i]:hi[i]]``).
        ls: Per-link state (loads, accounting) updated with the new rates.
        b_start, b_len, b_flow: Per-link buckets of the active flows.
        on_rates: Called with the re-allocated flows once their max-min rates are in
            ``f.rate_new`` and before they apply (the congestion model's hook, `flowherd.sim.network`;
            None: ideal sharing).

    Returns:
        (max-min passes run, flows re-allocated summed over the passes).

    The flows coupled to the seeds over saturated links are re-allocated on what the other
    flows leave; if that saturates a link shared with other flows, those join and it is done
    again. The result is the max-min allocation of all active flows: every flow left out keeps
    its bottleneck (a saturated link no re-allocated flow uses) and every re-allocated flow's
    bottleneck is saturated and carries no flow left out.
    """
    forced = np.zeros(0, np.int64)
    passes = moved = 0
    while True:
        comp = _closure(seeds, forced, f.lo, f.hi, link, ls.load, ls.cap, b_start, b_len, b_flow,
                        ls.mark, f.mark)
        if not comp.size:
            return passes, moved
        _residual(comp, f.lo, f.hi, link, frac, f.rate, ls.load, b_len, ls.cap, ls.cap_eff, ls.cnt)
        max_min_subset(comp, f.lo, f.hi, link, frac, f.weight, f.prio, ls.cap_eff, f.rate_new,
                       ls.scratch)
        more = _newly_saturated(comp, f.lo, f.hi, link, frac, f.rate_new, b_len, ls.cap, ls.cap_eff,
                                ls.cnt, ls.pos)
        passes += 1
        moved += comp.size
        if not more.size:
            break
        forced = np.union1d(forced, more)
    if on_rates is not None:
        on_rates(comp)
    settle(comp, now, False, f.rate, f.rem, f.t0, f.lo, f.hi, link, frac, ls.bytes, ls.nact, ls.load,
           ls.busy_since, ls.busy_s)
    activate(comp, now, f.rate, f.rate_new, f.rem, f.txend, f.lo, f.hi, link, frac, ls.nact, ls.load,
             ls.busy_since)
    return passes, moved
