"""Exact local max-min re-allocation by bottleneck pointers (the engine's default rate update).

An allocation is max-min fair if and only if it is feasible and every flow has a *bottleneck*:
a saturated link on which no flow of its class has a higher level (rate / weight) and no flow
of a lower class has a positive rate (Bertsekas & Gallager, Data Networks, 2nd ed., Sec. 6.5.2,
the characterization of max-min fairness; strict classes are max-min in turn on what the
classes before them leave). So after an event only the flows whose bottleneck the event can
have broken need a look:

* every active flow keeps a pointer to one of its bottleneck links (``bn``);
* the links the event *touches* are those of the flows that started or ended and of the flows
  re-allocated; a link nobody touched keeps its load and its flows' rates, so a pointer to it
  stays valid;
* the flows ``C`` re-allocated start as the flows that started; they get their max-min rates
  on what the others leave (`flowherd.engine.fairshare.fill_subset`), then every flow of ``C`` and
  every other flow whose pointer names a touched link is checked: a flow of ``C`` whose every
  saturated link carries a flow outside ``C`` with a higher level (a *dominator*) brings those
  dominators into ``C``; a flow outside whose pointer link no longer is a bottleneck of it and
  that has no other one joins ``C``. Repeat until nothing joins.

When nothing joins, every flow has a bottleneck, so the rates are the max-min allocation of all
active flows (the characterization above), whatever ``C`` was. An ended flow's capacity spreads
over the flows it was a bottleneck for, those of their links where they gain, and so on, so
``C`` grows with the part of the network whose rates change, not with the flows in flight (a
flow ending among 100,000 on a saturated 16,384-GPU fat tree changes a few hundred rates; the
closure of `flowherd.engine.allocation.reallocate`, which follows every saturated link, takes half
of all flows there).

Comparisons allow rounding: a link is saturated when its load is within `_SAT_RTOL` of its
capacity, a level dominates when it is higher by more than `_LVL_RTOL`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flowherd.engine.allocation import LinkState, apply_rates
from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.fairshare import fill_subset

__all__ = ["local_core", "local_update", "reallocate_local"]

_SAT_RTOL = 4e-12
_LVL_RTOL = 1e-12


class _Scratch:
    """Per-link work arrays of `local_update` (one set per engine)."""

    __slots__ = ("dirty", "load", "mlev", "pmax", "raw", "stamp", "uid")

    def __init__(self, num_links: int):
        self.load = np.zeros(num_links)  # a link's load at the current rates
        self.pmax = np.zeros(num_links, np.int64)  # the lowest class with a positive rate on it
        self.mlev = np.zeros(num_links)  # the highest level in that class
        self.stamp = np.full(num_links, -1, np.int64)  # the three above are valid when == uid
        self.raw = np.zeros(num_links)  # capacity the flows outside C leave, unclipped
        self.dirty = np.zeros(num_links, np.bool_)
        self.uid = np.zeros(1, np.int64)  # one id per update: stamps need no reset


@kernel(**NO_REFCOUNT)
def _cur(g, in_c, rate, rate_new):
    return rate_new[g] if in_c[g] else rate[g]


@kernel(**NO_REFCOUNT)
def _summary(lnk, uid, frac_buf, b_start, b_len, b_flow, b_inc, in_c, rate, rate_new, weight, prio,
             s_load, s_pmax, s_mlev, s_stamp):
    """Load, lowest class with a positive rate and its highest level on ``lnk``, at the current
    rates (``rate_new`` for the flows of ``C``), computed once per change of the link."""
    if s_stamp[lnk] == uid:
        return
    load = 0.0
    pmax = -(1 << 62)
    mlev = 0.0
    for e in range(b_start[lnk], b_start[lnk] + b_len[lnk]):
        g = b_flow[e]
        r = _cur(g, in_c, rate, rate_new)
        load += r * frac_buf[b_inc[e]]
        if r > 0.0:
            pg = prio[g]
            lv = r / weight[g]
            if pg > pmax:
                pmax = pg
                mlev = lv
            elif pg == pmax and lv > mlev:
                mlev = lv
    s_load[lnk] = load
    s_pmax[lnk] = pmax
    s_mlev[lnk] = mlev
    s_stamp[lnk] = uid


@kernel(**NO_REFCOUNT)
def _find_bottleneck(f, first, uid, lo, hi, link_buf, frac_buf, cap, b_start, b_len, b_flow, b_inc,
                     in_c, rate, rate_new, weight, prio, s_load, s_pmax, s_mlev, s_stamp):
    """One bottleneck link of ``f`` at the current rates (``first`` tried first), or -1."""
    pf = prio[f]
    lim = _cur(f, in_c, rate, rate_new) / weight[f] * (1.0 + _LVL_RTOL)
    for q in range(lo[f] - 1, hi[f]):
        if q < lo[f]:
            lnk = first
            if lnk < 0:
                continue
        else:
            lnk = link_buf[q]
            if lnk == first:
                continue
        _summary(lnk, uid, frac_buf, b_start, b_len, b_flow, b_inc, in_c, rate, rate_new, weight,
                 prio, s_load, s_pmax, s_mlev, s_stamp)
        if s_load[lnk] < cap[lnk] * (1.0 - _SAT_RTOL):
            continue
        pm = s_pmax[lnk]
        if pm > pf or (pm == pf and s_mlev[lnk] > lim):
            continue
        return lnk
    return -1


@kernel(**NO_REFCOUNT)
def _add_dominators(f, uid, lo, hi, link_buf, frac_buf, cap, b_start, b_len, b_flow, b_inc, in_c,
                    rate, rate_new, weight, prio, s_load, s_pmax, s_mlev, s_stamp, grown, n_grown):
    """Bring into ``C`` (at their current rates) the flows outside it that dominate ``f`` on its
    saturated links. Returns the new count of ``grown`` (room for every flow) and ``f``'s most
    loaded link."""
    pf = prio[f]
    lim = rate_new[f] / weight[f] * (1.0 + _LVL_RTOL)
    best = -1.0
    best_l = -1
    for k in range(lo[f], hi[f]):
        lnk = link_buf[k]
        _summary(lnk, uid, frac_buf, b_start, b_len, b_flow, b_inc, in_c, rate, rate_new, weight,
                 prio, s_load, s_pmax, s_mlev, s_stamp)
        u = s_load[lnk] / cap[lnk]
        if u > best:
            best = u
            best_l = lnk
        if u < 1.0 - _SAT_RTOL:
            continue
        for e in range(b_start[lnk], b_start[lnk] + b_len[lnk]):
            g = b_flow[e]
            if in_c[g]:
                continue
            r = rate[g]
            pg = prio[g]
            if (pg == pf and r > lim * weight[g]) or (pg > pf and r > 0.0):
                in_c[g] = True
                rate_new[g] = r
                grown[n_grown] = g
                n_grown += 1
    return n_grown, best_l


@kernel(**NO_REFCOUNT)
def local_core(started, ended, lo, hi, link_buf, frac_buf, rate, rate_new, weight, prio, cap,
               cap_eff, s_pos, l_mark, in_c, b_start, b_len, b_flow, b_inc, bn, s_load, s_pmax,
               s_mlev, s_stamp, s_raw, dirty, uid_box, members, prev, recheck, grown, chk, eff, dl):
    """The flows whose rates change after ``started`` joined and ``ended`` left the active flows
    (both already in / out of the buckets), with their max-min rates in ``rate_new``; ``bn`` is
    updated for every flow whose bottleneck moved. ``l_mark``, ``dirty`` (per link) and ``in_c``
    (per flow) are False on entry and on return, ``cap_eff`` equal to ``cap``.

    Each pass: the capacity the flows outside ``C`` leave (updated for the flows that joined),
    ``C``'s max-min rates on it, then the checks, only where something changed: the flows of
    ``C`` whose rate or links changed (or that failed before), and the flows outside whose
    pointer names a link whose load or rates changed.

    The work arrays ``members``, ``recheck``, ``grown`` (int64), ``prev`` (float64), ``chk``
    (bool) have an entry per flow, ``eff`` and ``dl`` (int64) one per link: none can overflow
    (a flow joins ``C`` once, a link is marked once), so nothing is allocated, and the kernel
    counts no references to its thirty-odd arrays (`flowherd.engine.aot.NO_REFCOUNT`).

    Returns ``(n, passes, moved)``: the flows re-allocated are ``members[:n]``, in the order
    they joined; ``moved`` sums the flows re-allocated over the passes.
    """
    uid_box[0] += 1
    uid = uid_box[0]
    n_mem = 0
    for s in range(started.size):
        f = started[s]
        in_c[f] = True
        members[n_mem] = f
        prev[n_mem] = -1.0  # a new flow is checked in any case
        n_mem += 1
    n_eff = 0  # eff: links whose cap_eff is set
    n_dl = 0  # dl: links changed since the last check
    for s in range(ended.size):
        f = ended[s]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not dirty[lnk]:
                dirty[lnk] = True
                dl[n_dl] = lnk
                n_dl += 1
    n_re = 0  # recheck: members that failed their last check
    n_res = 0  # members whose links are in the residual
    passes = 0
    moved = 0
    while True:
        # the capacity the others leave: updated for a member that joined (first: a link met
        # in this loop has the joined flows out of its sum already), fresh for a new link
        for i in range(n_res, n_mem):
            g = members[i]
            for k in range(lo[g], hi[g]):
                lnk = link_buf[k]
                if l_mark[lnk]:
                    s_raw[lnk] += rate[g] * frac_buf[k]
                    cap_eff[lnk] = s_raw[lnk] if s_raw[lnk] >= 1e-12 * cap[lnk] else 0.0
        for i in range(n_res, n_mem):
            g = members[i]
            for k in range(lo[g], hi[g]):
                lnk = link_buf[k]
                if l_mark[lnk]:
                    continue
                l_mark[lnk] = True
                eff[n_eff] = lnk
                n_eff += 1
                out = 0.0
                for e in range(b_start[lnk], b_start[lnk] + b_len[lnk]):
                    h = b_flow[e]
                    if not in_c[h]:
                        out += rate[h] * frac_buf[b_inc[e]]
                s_raw[lnk] = cap[lnk] - out
                # what rounding leaves of a full link is none (the rule of `fill_subset`)
                cap_eff[lnk] = s_raw[lnk] if s_raw[lnk] >= 1e-12 * cap[lnk] else 0.0
        n_res = n_mem
        comp = members[:n_mem]
        if n_mem:
            fill_subset(comp, lo, hi, link_buf, frac_buf, weight, prio, cap_eff, rate_new, s_pos)
            passes += 1
            moved += n_mem
        # links whose state changed: those of the members whose rate changed
        for i in range(n_mem):
            chk[i] = False
        for i in range(n_mem):
            f = members[i]
            if rate_new[f] != prev[i]:
                chk[i] = True
                prev[i] = rate_new[f]
                for k in range(lo[f], hi[f]):
                    lnk = link_buf[k]
                    if not dirty[lnk]:
                        dirty[lnk] = True
                        dl[n_dl] = lnk
                        n_dl += 1
        for j in range(n_dl):
            s_stamp[dl[j]] = -1
        for j in range(n_re):
            chk[recheck[j]] = True
        n_re = 0
        n_gr = 0
        for i in range(n_mem):
            f = members[i]
            if not chk[i]:
                for k in range(lo[f], hi[f]):
                    if dirty[link_buf[k]]:
                        chk[i] = True
                        break
                if not chk[i]:
                    continue
            b = _find_bottleneck(f, bn[f], uid, lo, hi, link_buf, frac_buf, cap, b_start, b_len,
                                 b_flow, b_inc, in_c, rate, rate_new, weight, prio, s_load, s_pmax,
                                 s_mlev, s_stamp)
            if b >= 0:
                bn[f] = b
                continue
            n0 = n_gr
            n_gr, most = _add_dominators(f, uid, lo, hi, link_buf, frac_buf, cap, b_start,
                                                b_len, b_flow, b_inc, in_c, rate, rate_new, weight,
                                                prio, s_load, s_pmax, s_mlev, s_stamp, grown, n_gr)
            if n_gr == n0:
                bn[f] = most  # no flow to take from: a bottleneck but for rounding
            else:
                recheck[n_re] = i
                n_re += 1
        for j in range(n_dl):
            lnk = dl[j]
            for e in range(b_start[lnk], b_start[lnk] + b_len[lnk]):
                g = b_flow[e]
                if in_c[g] or bn[g] != lnk:
                    continue
                b = _find_bottleneck(g, lnk, uid, lo, hi, link_buf, frac_buf, cap, b_start, b_len,
                                     b_flow, b_inc, in_c, rate, rate_new, weight, prio, s_load,
                                     s_pmax, s_mlev, s_stamp)
                if b >= 0:
                    bn[g] = b
                    continue
                in_c[g] = True
                rate_new[g] = rate[g]
                grown[n_gr] = g
                n_gr += 1
                # it will rise (its bottleneck lost its hold): the flows it would find above
                # it on its saturated links join now, not one pass later (half the passes)
                n_gr, _ = _add_dominators(g, uid, lo, hi, link_buf, frac_buf, cap, b_start,
                                                 b_len, b_flow, b_inc, in_c, rate, rate_new, weight,
                                                 prio, s_load, s_pmax, s_mlev, s_stamp, grown,
                                                 n_gr)
            dirty[lnk] = False
        n_dl = 0
        if n_gr == 0:
            break
        for j in range(n_gr):
            members[n_mem] = grown[j]
            prev[n_mem] = -1.0  # checked after its first pass in any case
            n_mem += 1
    for j in range(n_eff):
        lnk = eff[j]
        l_mark[lnk] = False
        cap_eff[lnk] = cap[lnk]
    for i in range(n_mem):
        in_c[members[i]] = False
    return n_mem, passes, moved


@kernel
def local_update(started, ended, lo, hi, link_buf, frac_buf, rate, rate_new, weight, prio, cap,
                 cap_eff, s_pos, l_mark, in_c, b_start, b_len, b_flow, b_inc, bn, s_load, s_pmax,
                 s_mlev, s_stamp, s_raw, dirty, uid_box):
    """`local_core` with work arrays of its own: (the flows re-allocated, sorted; passes; flows
    re-allocated summed over passes)."""
    nf = rate.size
    nl = cap.size
    members = np.empty(nf, np.int64)
    recheck = np.empty(nf, np.int64)
    grown = np.empty(nf, np.int64)
    n, passes, moved = local_core(started, ended, lo, hi, link_buf, frac_buf, rate, rate_new, weight,
                                  prio, cap, cap_eff, s_pos, l_mark, in_c, b_start, b_len, b_flow, b_inc,
                                  bn, s_load, s_pmax, s_mlev, s_stamp, s_raw, dirty, uid_box, members,
                                  np.empty(nf), recheck, grown, np.zeros(nf, np.bool_),
                                  np.empty(nl, np.int64), np.empty(nl, np.int64))
    return np.sort(members[:n]), passes, moved


def reallocate_local(started: np.ndarray, ended: np.ndarray, now: float, f, link: np.ndarray,
                     frac: np.ndarray, ls: LinkState, b_start: np.ndarray, b_len: np.ndarray,
                     b_flow: np.ndarray, b_inc: np.ndarray,
                     on_rates: Callable[[np.ndarray], None] | None = None) -> tuple[int, int]:
    """Bring the rates to the max-min allocation after ``started`` joined and ``ended`` left.

    Args:
        started: Flow ids that started (in the buckets, rate 0).
        ended: Flow ids that ended (out of the buckets, settled).
        now: The clock, seconds.
        f: The engine's flow columns (``lo``, ``hi``, ``rate``, ``rate_new``, ``weight``,
            ``prio``, ``rem``, ``t0``, ``txend``, ``mark``, ``bn``).
        link, frac: The incidence pool.
        ls: Per-link state, updated with the new rates.
        b_start, b_len, b_flow, b_inc: Per-link buckets of the active flows.
        on_rates: Called with the re-allocated flows once their rates are in ``f.rate_new`` and
            before they apply (the congestion model's hook, `flowherd.engine.network`).

    Returns:
        (max-min passes run, flows re-allocated summed over the passes).
    """
    if ls.local is None:
        ls.local = _Scratch(ls.cap.size)
    s = ls.local
    comp, passes, moved = local_update(started, ended, f.lo, f.hi, link, frac, f.rate, f.rate_new,
                                       f.weight, f.prio, ls.cap, ls.cap_eff, ls.scratch.pos,
                                       ls.mark, f.mark, b_start, b_len, b_flow, b_inc, f.bn,
                                       s.load, s.pmax, s.mlev, s.stamp, s.raw, s.dirty, s.uid)
    apply_rates(comp, now, f, link, frac, ls, on_rates)
    return passes, moved
