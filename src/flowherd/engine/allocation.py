"""Exact max-min re-allocation of the flows an event can affect (the engine's rate update).

`reallocate` is the one place where rates are computed from capacities and flows: an event's
seed flows (started or ended) and the flows coupled to them over saturated links are
re-allocated max-min (`flowherd.engine.fairshare.max_min_subset`) on what the other flows leave;
if that saturates a link they share with other flows, those join and it is done again (see
`flowherd.engine.core` for why the result is the max-min allocation of all active flows). A
model that changes how capacity is shared hooks in here.

The kernels keep the per-link state the engine reports: bytes carried (credited when a flow's
rate changes or it ends), the number of flows with a positive rate and the busy time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.fairshare import fill_subset

__all__ = ["NO_CLASS", "NO_THRESHOLD", "LinkState", "activate", "arrival_levels", "arrival_threshold",
           "reallocate", "settle", "threshold"]

# a link loaded to within this fraction of its capacity counts as saturated (a bottleneck)
_SAT_RTOL = 1e-9


@kernel(inline="always")
def _movable(f, prio, rate, weight, p_thr, t_thr):
    """Whether flow ``f``'s rate can change: its class is below the threshold's, or it is in
    the threshold's class at a level (rate / weight) of at least ``t_thr``, or it has no rate
    yet (just started). See `reallocate`."""
    p = prio[f]
    if p != p_thr:
        return p > p_thr
    r = rate[f]
    return r == 0.0 or r >= t_thr * weight[f]


@kernel
def _closure(seeds, forced, lo, hi, link_buf, load, cap, b_start, b_len, b_flow, link_mark,
             flow_mark, prio, rate, weight, p_thr, t_thr):
    """The flows whose rates an event can change: active flows reached from the links of the
    ``seeds`` flows and the ``forced`` links, crossing from flow to flow over saturated links.

    A link with spare capacity does not couple the rates of its flows, so it is not crossed
    (the caller checks afterwards that none became saturated; see `Engine._rates`). Flows below
    the threshold ``(p_thr, t_thr)`` (`_movable`) keep their rates and are not crossed either.
    The active flows of link ``l`` are ``b_flow[b_start[l]:b_start[l] + b_len[l]]``.
    ``link_mark`` and ``flow_mark`` are zero on entry and on return. Returns the flow ids, sorted.
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
            if flow_mark[f] or not _movable(f, prio, rate, weight, p_thr, t_thr):
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



@kernel
def _residual(comp, lo, hi, link_buf, frac_buf, rate, nflows, cap, cap_eff, s_cnt, b_start, b_flow,
              b_inc, link_mark, flow_mark):
    """Set ``cap_eff`` on the links of ``comp`` to what the flows outside ``comp`` leave.

    Summed afresh from the outside flows' rates (the per-link buckets), not taken as capacity
    minus the running load plus the component's own: the running sum drifts by rounding over
    many updates, and flows kept at their rates would see the drift. ``link_mark`` and
    ``flow_mark`` are zero on entry and on return; ``s_cnt`` holds the component's incidences
    per link on return (for `_newly_saturated`).
    """
    for i in range(comp.size):
        f = comp[i]
        flow_mark[f] = True
        for k in range(lo[f], hi[f]):
            s_cnt[link_buf[k]] += 1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if link_mark[lnk]:
                continue
            link_mark[lnk] = True
            if s_cnt[lnk] == nflows[lnk]:
                cap_eff[lnk] = cap[lnk]  # no flow outside: exact
                continue
            out = 0.0
            for e in range(b_start[lnk], b_start[lnk] + nflows[lnk]):
                g = b_flow[e]
                if not flow_mark[g]:
                    out += rate[g] * frac_buf[b_inc[e]]
            left = cap[lnk] - out
            cap_eff[lnk] = left if left >= _SAT_RTOL * cap[lnk] * 1e-3 else 0.0
    for i in range(comp.size):
        f = comp[i]
        flow_mark[f] = False
        for k in range(lo[f], hi[f]):
            link_mark[link_buf[k]] = False


@kernel
def _newly_saturated(comp, lo, hi, link_buf, frac_buf, rate_new, nflows, cap, cap_eff, s_cnt,
                     s_pos, b_start, b_flow, prio, rate, weight, p_thr, t_thr):
    """Links of ``comp`` shared with outside flows whose rates can change (`_movable`) that the
    new rates saturate. Restores ``cap_eff`` to ``cap`` and ``s_cnt`` to zero on the links of
    ``comp``; ``s_pos`` is per-link scratch, zero on entry and on return."""
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
            # only a movable flow outside has to join (the others keep their rates)
            n_mov = 0
            for e in range(b_start[lnk], b_start[lnk] + nflows[lnk]):
                if _movable(b_flow[e], prio, rate, weight, p_thr, t_thr):
                    n_mov += 1
            if n_mov > s_cnt[lnk]:
                out[q] = lnk
                q += 1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            cap_eff[lnk] = cap[lnk]
            s_cnt[lnk] = 0
    return out[:q]



@kernel(**NO_REFCOUNT)
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


@kernel(**NO_REFCOUNT)
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

    __slots__ = ("busy_s", "busy_since", "bytes", "cap", "cap_eff", "cnt", "load", "local", "mark",
                 "nact", "pos", "scratch")

    def __init__(self, capacity_bytes_per_s: np.ndarray):
        from flowherd.engine.fairshare import Scratch

        n = capacity_bytes_per_s.size
        self.cap = np.ascontiguousarray(capacity_bytes_per_s, dtype=np.float64)
        self.load = np.zeros(n)  # sum of rate * frac, bytes per second
        self.nact = np.zeros(n, np.int64)  # flows with a positive rate
        self.bytes = np.zeros(n)
        self.busy_s = np.zeros(n)
        self.busy_since = np.zeros(n)
        self.mark = np.zeros(n, np.bool_)
        self.local = None  # `flowherd.engine.bottleneck`'s work arrays, made on first use
        self.cap_eff = self.cap.copy()
        self.pos = np.zeros(n, np.int64)
        self.cnt = np.zeros(n, np.int64)
        self.scratch = Scratch(n)


@kernel
def _update(seeds, lo, hi, link, frac, rate, rate_new, weight, prio, load, cap, cap_eff, cnt, pos,
            link_mark, flow_mark, s_pos, b_start, b_len, b_flow, b_inc, p_thr, t_thr):
    """`reallocate`'s passes in one compiled call: the component, its max-min rates (in
    ``rate_new``) on what the rest leaves, widened while that saturates a link shared with a
    movable flow left out. Returns (component, passes, flows re-allocated over the passes)."""
    forced = np.zeros(0, np.int64)
    passes = 0
    moved = 0
    while True:
        comp = _closure(seeds, forced, lo, hi, link, load, cap, b_start, b_len, b_flow, link_mark,
                        flow_mark, prio, rate, weight, p_thr, t_thr)
        if not comp.size:
            return comp, passes, moved
        _residual(comp, lo, hi, link, frac, rate, b_len, cap, cap_eff, cnt, b_start, b_flow, b_inc,
                  link_mark, flow_mark)
        fill_subset(comp, lo, hi, link, frac, weight, prio, cap_eff, rate_new, s_pos)
        more = _newly_saturated(comp, lo, hi, link, frac, rate_new, b_len, cap, cap_eff, cnt, pos,
                                b_start, b_flow, prio, rate, weight, p_thr, t_thr)
        passes += 1
        moved += comp.size
        if not more.size:
            return comp, passes, moved
        forced = np.unique(np.concatenate((forced, more)))


@kernel
def arrival_levels(new, lo, hi, link_buf, frac_buf, weight, prio, cap, b_start, b_len, b_flow,
                   b_inc):
    """A lower bound of each flow of ``new``'s level (rate / weight) in the max-min allocation
    of the active flows (those in the buckets, ``new`` among them).

    A flow's bottleneck ``l`` is saturated and no flow on it has a higher level, so its level is
    at least ``cap[l] / sum(weight * frac of the flows on l)`` when no flow of a higher class
    (lower ``prio``) uses ``l``; the minimum over its links is the bound (0 if some link has
    such a flow).
    """
    out = np.empty(new.size)
    for i in range(new.size):
        g = new[i]
        p = prio[g]
        best = np.inf
        for k in range(lo[g], hi[g]):
            lnk = link_buf[k]
            den = 0.0
            for e in range(b_start[lnk], b_start[lnk] + b_len[lnk]):
                h = b_flow[e]
                if prio[h] < p:
                    den = -1.0
                    break
                if prio[h] == p:
                    den += weight[h] * frac_buf[b_inc[e]]
            if den <= 0.0:
                best = 0.0
                break
            v = cap[lnk] / den
            if v < best:
                best = v
        out[i] = best
    return out


@kernel
def arrival_threshold(new, lo, hi, link_buf, frac_buf, weight, prio, cap, b_start, b_len, b_flow,
                      b_inc):
    """The lowest (class, `arrival_levels` bound) among the flows ``new``."""
    lvl = arrival_levels(new, lo, hi, link_buf, frac_buf, weight, prio, cap, b_start, b_len,
                         b_flow, b_inc)
    p_min = NO_CLASS
    t_min = np.inf
    for i in range(new.size):
        p = prio[new[i]]
        if p < p_min or (p == p_min and lvl[i] < t_min):
            p_min = p
            t_min = lvl[i]
    return p_min, t_min


# a class no flow has: "no seed of this kind" in `threshold`
NO_CLASS = 1 << 62
# no restriction: every flow's rate can change
NO_THRESHOLD = (-(1 << 62), -np.inf)
# levels of flows left out are compared with the threshold lowered by this fraction: a flow
# at the threshold's level up to rounding is re-allocated, never wrongly kept
_THR_RTOL = 1e-9


def threshold(p_done: int, t_done: float, p_new: int, t_new: float) -> tuple[int, float]:
    """`reallocate`'s ``threshold`` for an event: the lower (class, level) of the flows that
    ended (their lowest level before; `flowherd.engine.step_kernels.end_flows`) and of those that
    started (`arrival_threshold`); ``NO_CLASS`` stands for none of a kind."""
    if p_new < p_done or (p_new == p_done and t_new < t_done):
        p_done, t_done = p_new, t_new
    if p_done == NO_CLASS:
        return NO_THRESHOLD
    return int(p_done), float(t_done) * (1.0 - _THR_RTOL)


def reallocate(seeds: np.ndarray, now: float, f, link: np.ndarray, frac: np.ndarray, ls: LinkState,
               b_start: np.ndarray, b_len: np.ndarray, b_flow: np.ndarray,
               on_rates: Callable[[np.ndarray], None] | None = None, *, b_inc: np.ndarray,
               threshold: tuple[int, float] = NO_THRESHOLD) -> tuple[int, int]:
    """Recompute the rates the flows ``seeds`` (just started or ended) can change, in place.

    Args:
        seeds: Flow ids whose start or end triggers the update.
        now: The clock, seconds.
        f: The engine's flow columns (``lo``, ``hi``, ``rate``, ``rate_new``, ``weight``,
            ``prio``, ``rem``, ``t0``, ``txend``, ``mark``).
        link, frac: The incidence pool (flow ``i``'s links are ``link[lo[i]:hi[i]]``).
        ls: Per-link state (loads, accounting) updated with the new rates.
        b_start, b_len, b_flow, b_inc: Per-link buckets of the active flows (``b_inc``: each
            entry's incidence).
        on_rates: Called with the re-allocated flows once their max-min rates are in
            ``f.rate_new`` and before they apply (the congestion model's hook, `flowherd.engine.network`;
            None: ideal sharing).
        threshold: ``(class, level)``, at most the lowest of the seeds (`threshold`): flows of
            a higher class (lower ``prio``), or of that class at a lower level (rate / weight),
            keep their rates. Default: none does.

    Returns:
        (max-min passes run, flows re-allocated summed over the passes).

    Why flows below the threshold keep their rates: progressive filling (`flowherd.engine.fairshare`)
    freezes flows in increasing order of level. Before and after the event it runs the same up
    to the threshold's level: a flow that ended at level ``t`` was growing with the others up to
    ``t`` and none of its links had saturated below ``t``, so without it none saturates earlier
    and the other links see the same loads; a flow that starts has a level of at least its
    bound (`arrival_levels`), and the same holds with the roles swapped. So every flow frozen
    below the threshold is frozen at the same level after the event. The others are then
    max-min on what those leave (a part of a max-min allocation is max-min on the capacity the
    rest leaves: every flow keeps its bottleneck).

    Among the others, the flows coupled to the seeds over saturated links are re-allocated on
    what the rest leave; if that saturates a link shared with other flows whose rates can
    change, those join and it is done again. The result is the max-min allocation of all
    active flows: every flow left out keeps its bottleneck (a saturated link no re-allocated
    flow uses) and every re-allocated flow's bottleneck is saturated and carries no flow left
    out whose rate can change.
    """
    p_thr, t_thr = threshold
    comp, passes, moved = _update(seeds, f.lo, f.hi, link, frac, f.rate, f.rate_new, f.weight, f.prio,
                                  ls.load, ls.cap, ls.cap_eff, ls.cnt, ls.pos, ls.mark, f.mark,
                                  ls.scratch.pos, b_start, b_len, b_flow, b_inc, p_thr, t_thr)
    apply_rates(comp, now, f, link, frac, ls, on_rates)
    return passes, moved


def apply_rates(comp: np.ndarray, now: float, f, link: np.ndarray, frac: np.ndarray, ls: LinkState,
                on_rates: Callable[[np.ndarray], None] | None) -> None:
    """The re-allocated flows ``comp`` take their new rates (``f.rate_new``) at ``now``: the
    congestion model's hook first, then their bytes so far settled at the old rates and the new
    ones applied to their links (shared by both re-allocation rules)."""
    if not comp.size:
        return
    if on_rates is not None:
        on_rates(comp)
    settle(comp, now, False, f.rate, f.rem, f.t0, f.lo, f.hi, link, frac, ls.bytes, ls.nact, ls.load,
           ls.busy_since, ls.busy_s)
    activate(comp, now, f.rate, f.rate_new, f.rem, f.txend, f.lo, f.hi, link, frac, ls.nact, ls.load,
             ls.busy_since)
