"""Max-min fair rate allocation of flows over capacitated links (weighted, strict priorities).

Flows are given in the CSR form of `flowherd.routing.base.Routes`: flow ``f`` puts the
fraction ``frac[k]`` of its rate on link ``link[k]`` for ``k in ptr[f]:ptr[f+1]``.

Progressive filling generalized to fractional incidence and weights: all unfrozen flows grow
together, flow ``f`` at ``weight[f] * t``; link ``l`` saturates at the level

    t_l = (capacity_l - load of frozen flows on l) / (sum of weight * frac of unfrozen flows on l)

and the link with the lowest ``t_l`` is the next bottleneck: its unfrozen flows freeze at
``weight * t_l``. Freezing flows at a level no higher than another link's level can only raise
that link's level, so links can be taken from a heap in increasing order of level; each
bottleneck is final when popped. A link's heap key is not updated when its level rises; a
popped key is then a lower bound, and the link is re-queued at its true level (lazy keys: far
fewer heap operations than one push per change). That is O(nnz log L) at worst, compiled
with numba (`max_min_rates`). `max_min_rates_reference` is the textbook one-numpy-pass-per-
level version, kept to cross-check the kernel in tests.

Strict priority classes (lower ``priority`` first) are allocated one after the other, each
on the capacity the classes before it left. A flow with no links gets rate ``+inf``.
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.errors import ConfigError

__all__ = ["Scratch", "fill_subset", "max_min_rates", "max_min_rates_reference", "max_min_subset"]


# capacity left on a link below this fraction of its capacity is rounding noise: taken as none,
# so that a starved flow gets exactly 0
_EPS = 1e-12


# ---- a binary min-heap of (key, link) in two arrays --------------------------------
@kernel(**NO_REFCOUNT)
def heap_push_pair(hk, hl, n, key, lnk):
    """Push ``(key, lnk)`` on the heap ``hk, hl`` of ``n`` entries (the caller keeps room; ties by
    the second array); returns the new size. `flowherd.engine.flow_heap` keeps its ends with it."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] < key or (hk[p] == key and hl[p] <= lnk):
            break
        hk[i] = hk[p]
        hl[i] = hl[p]
        i = p
    hk[i] = key
    hl[i] = lnk
    return n + 1


@kernel(**NO_REFCOUNT)
def _heap_pop(hk, hl, n):
    # removes the root; caller has read it already
    n -= 1
    key = hk[n]
    lnk = hl[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (hk[c + 1] < hk[c] or (hk[c + 1] == hk[c] and hl[c + 1] < hl[c])):
            c += 1
        if key < hk[c] or (key == hk[c] and lnk <= hl[c]):
            break
        hk[i] = hk[c]
        hl[i] = hl[c]
        i = c
    hk[i] = key
    hl[i] = lnk
    return n


@kernel(**NO_REFCOUNT)
def _flow_min(i, f_ptr, f_j, rem, den, cap):
    """Flow ``i``'s link of lowest level (ties: lowest id) and that level: ``(link, level)``,
    link -1 if it has none."""
    best = np.inf
    bj = -1
    for e in range(f_ptr[i], f_ptr[i + 1]):
        j = f_j[e]
        r = rem[j]
        r = r if r > _EPS * cap[j] else 0.0
        lvl = r / den[j]
        if lvl < best or (lvl == best and j < bj):
            best = lvl
            bj = j
    return bj, best


@kernel(**NO_REFCOUNT)
def _level(j, rem, den, cap):
    """Link ``j``'s level: what is left of it (none below rounding) over its unfrozen flows'
    weight."""
    r = rem[j]
    r = r if r > _EPS * cap[j] else 0.0
    return r / den[j]


@kernel(**NO_REFCOUNT)
def _lev_min(e, lm_ptr, lm_j, lev):
    """`_flow_min` of by-link entry ``e`` on the levels ``lev`` kept up to date (the same
    divisions, made once per change of a link instead of once per look)."""
    best = np.inf
    bj = -1
    for q in range(lm_ptr[e], lm_ptr[e + 1]):
        j = lm_j[q]
        lvl = lev[j]
        if lvl < best or (lvl == best and j < bj):
            best = lvl
            bj = j
    return bj, best


@kernel
def _more_heap(hk, hl, hn):
    """The heap ``hk, hl`` of ``hn`` entries in arrays of twice the room."""
    hk2 = np.empty(2 * hk.size, np.float64)
    hl2 = np.empty(2 * hk.size, np.int64)
    hk2[:hn] = hk[:hn]
    hl2[:hn] = hl[:hn]
    return hk2, hl2


@kernel(**NO_REFCOUNT)
def _drain(hk, hl, hn, pend, n_pend, hkey, f_ptr, f_j, f_fr, rem, den, cnt, cap, tptr, t_idx, state,
           w_loc, flows, rates, lm_ptr, lm_j, lm_st, lev, lm_pos, lm_on, lm_fill):
    """`_fill`'s bottleneck loop for one class: give the pending flows ``pend[:n_pend]`` their
    heap entries, then pop, freeze or re-queue until the heap is empty; returns ``(hn, -1)``.
    When the heap is full it returns early with the flows still pending first in ``pend`` and
    their number: the caller grows the heap and calls again (the same pushes in the same order).

    It allocates nothing and re-binds no array, so numba counts no references in its loops:
    `_fill` re-bound the heap's arrays where they grow, and numba then counted references to
    them at every step of the loop, 48% of a 1,024-GPU AllToAll's process (perf), whose links'
    levels rise by an ulp at a time and re-queue their flows again and again.

    A pending entry ``v >= 0`` is flow ``v``; ``v < 0`` is entry ``-v - 1`` of the by-link lists,
    whose flow's links are copied, in order, to ``lm_j[lm_ptr[e]:lm_ptr[e + 1]]`` (the same
    links, the same level: `_flow_min` of either). Re-queuing reads a link's flows' links: by
    flow they lie all over memory (a downlink's flows are a thousand apart), and those cache
    misses were most of that AllToAll's time; so once the flows re-queued outnumber the copies
    (``lm_st[1]`` counts them, ``lm_st[2]`` is the copy's length, ``lm_st[0]`` says it is
    made) the copy is made and read,
    with each link's level in ``lev`` from then on (unfrozen links only), and whether each
    entry's flow is unfrozen in ``lm_on`` (``lm_pos``: each incidence's entry), read in order
    instead of the flows' states all over memory."""
    while True:
        # each pending flow's entry: its link of lowest level, unless a key as low is there
        for q in range(n_pend):
            v = pend[q]
            if v >= 0:
                bj, best = _flow_min(v, f_ptr, f_j, rem, den, cap)
            else:
                bj, best = _lev_min(-v - 1, lm_ptr, lm_j, lev)
            if bj >= 0 and best < hkey[bj]:
                if hn == hk.size:
                    for m in range(q, n_pend):
                        pend[m - q] = pend[m]
                    return hn, n_pend - q
                hkey[bj] = best
                hn = heap_push_pair(hk, hl, hn, best, bj)
        n_pend = 0
        if hn == 0:
            return hn, -1
        key = hk[0]
        j = hl[0]
        hn = _heap_pop(hk, hl, hn)
        if key == hkey[j]:
            hkey[j] = np.inf
        if cnt[j] == 0:
            continue
        r = rem[j]
        r = r if r > _EPS * cap[j] else 0.0
        share = r / den[j]
        if share > key:
            # a lower bound that has gone stale: give each unfrozen flow of the link an entry
            # at its current lowest level (`_flow_min` reads no heap key: collecting them
            # first pushes the same entries in the same order)
            if lm_st[0] == 0:
                lm_st[1] += tptr[j + 1] - tptr[j]
                if lm_st[1] > lm_st[2]:
                    m = 0
                    for e in range(t_idx.size):
                        i = t_idx[e]
                        lm_ptr[e] = m
                        for q in range(f_ptr[i], f_ptr[i + 1]):
                            lm_j[m] = f_j[q]
                            m += 1
                    lm_ptr[t_idx.size] = m
                    for jj in range(lm_fill.size):
                        lm_fill[jj] = tptr[jj]
                    for i in range(state.size):  # each incidence's entry, as `_fill` laid them
                        for q in range(f_ptr[i], f_ptr[i + 1]):
                            jj = f_j[q]
                            lm_pos[q] = lm_fill[jj]
                            lm_on[lm_fill[jj]] = state[i] == 1
                            lm_fill[jj] += 1
                    lm_st[0] = 1
                    for jj in range(lev.size):
                        if cnt[jj] > 0:
                            lev[jj] = _level(jj, rem, den, cap)
            if lm_st[0]:
                for e in range(tptr[j], tptr[j + 1]):
                    if lm_on[e]:
                        pend[n_pend] = -e - 1
                        n_pend += 1
                continue
            for e in range(tptr[j], tptr[j + 1]):
                i = t_idx[e]
                if state[i] == 1:
                    pend[n_pend] = i
                    n_pend += 1
            continue
        for e in range(tptr[j], tptr[j + 1]):
            i = t_idx[e]
            if state[i] != 1:
                continue
            state[i] = 2
            w = w_loc[i]
            r_f = w * share
            rates[flows[i]] = r_f
            for q in range(f_ptr[i], f_ptr[i + 1]):
                mj = f_j[q]
                fr = f_fr[q]
                if lm_st[0]:
                    lm_on[lm_pos[q]] = False
                rem[mj] -= r_f * fr
                cnt[mj] -= 1
                # decided by count, not by the float sum reaching zero
                den[mj] = 0.0 if cnt[mj] == 0 else den[mj] - w * fr
                if lm_st[0] and cnt[mj] > 0:
                    lev[mj] = _level(mj, rem, den, cap)


@kernel
def _fill(flows, lo, hi, link_buf, frac_buf, weight, prio, capacity, rates, s_pos):
    """Max-min rates of ``flows`` (ids sorted by priority), written into ``rates[flow]``.

    ``s_pos`` is scratch of one entry per link, zero on entry and on return, so that a call
    costs O(nnz log L) of the flows it is given, not O(L). The links touched are numbered
    locally in increasing id order (so that ties break as by link id) and all work after that
    is on compact local arrays: the per-link arrays of a large fabric do not fit in the cache.
    """
    _fill_from(flows, lo, hi, link_buf, frac_buf, weight, prio, capacity, rates, s_pos,
               max(16, flows.size + 1), -1)


@kernel
def _fill_from(flows, lo, hi, link_buf, frac_buf, weight, prio, capacity, rates, s_pos, room,
               copy_after):
    """`_fill` with a heap of ``room`` entries at first (it grows when full) and `_drain`'s by-link
    copy made once ``copy_after`` flows were re-queued (-1: as many as the copy has entries);
    the tests start from one entry and copy at once or never, to check that neither changes a
    rate."""
    n = flows.size
    nnz = 0
    for i in range(n):
        f = flows[i]
        nnz += hi[f] - lo[f]
    # the links touched, in increasing id order, numbered 1.. in s_pos: sorted, or where they
    # are many, by a scan of the links' marks (the same list)
    touched = np.empty(nnz, np.int64)
    nt = 0
    for i in range(n):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if s_pos[lnk] == 0:
                s_pos[lnk] = 1
                touched[nt] = lnk
                nt += 1
    if nt * 16 >= s_pos.size:
        nt = 0
        for lnk in range(s_pos.size):
            if s_pos[lnk] != 0:
                touched[nt] = lnk
                nt += 1
        touched = touched[:nt]
    else:
        touched = np.sort(touched[:nt])
    for j in range(nt):
        s_pos[touched[j]] = j + 1
    # the flows' incidences with local link numbers, and the transpose (by link)
    f_ptr = np.empty(n + 1, np.int64)
    f_j = np.empty(nnz, np.int64)
    f_fr = np.empty(nnz, np.float64)
    deg = np.zeros(nt + 1, np.int64)
    m = 0
    for i in range(n):
        f = flows[i]
        f_ptr[i] = m
        for k in range(lo[f], hi[f]):
            j = s_pos[link_buf[k]] - 1
            f_j[m] = j
            f_fr[m] = frac_buf[k]
            deg[j + 1] += 1
            m += 1
    f_ptr[n] = m
    for j in range(nt):
        s_pos[touched[j]] = 0
    tptr = np.zeros(nt + 1, np.int64)
    for j in range(nt):
        tptr[j + 1] = tptr[j] + deg[j + 1]
    fill = tptr[:-1].copy()
    t_idx = np.empty(nnz, np.int64)
    for i in range(n):
        for e in range(f_ptr[i], f_ptr[i + 1]):
            j = f_j[e]
            t_idx[fill[j]] = i
            fill[j] += 1
    cap = np.empty(nt, np.float64)
    rem = np.empty(nt, np.float64)
    for j in range(nt):
        cap[j] = capacity[touched[j]]
        rem[j] = cap[j]
    den = np.zeros(nt, np.float64)
    cnt = np.zeros(nt, np.int64)
    w_loc = np.empty(n, np.float64)
    for i in range(n):
        w_loc[i] = weight[flows[i]]
    state = np.zeros(n, np.int8)  # 0 later class, 1 unfrozen in this class, 2 frozen
    hkey = np.full(nt, np.inf)  # the lowest key of a link's entries in the heap
    hk = np.empty(max(1, room), np.float64)
    hl = np.empty(hk.size, np.int64)
    pend = np.empty(max(1, n), np.int64)  # flows due a heap entry (each at most once)
    # the by-link copy of the flows' links (`_drain`), made only if re-queuing needs it
    nsq = 0
    for i in range(n):
        nsq += (f_ptr[i + 1] - f_ptr[i]) ** 2
    lm_ptr = np.empty(nnz + 1, np.int64)
    lm_j = np.empty(nsq, np.int64)
    lm_st = np.zeros(3, np.int64)
    lm_st[2] = nsq if copy_after < 0 else copy_after
    lev = np.empty(nt, np.float64)
    lm_pos = np.empty(nnz, np.int64)
    lm_on = np.empty(nnz, np.bool_)
    lm_fill = np.empty(nt, np.int64)
    a = 0
    while a < n:
        b = a
        while b < n and prio[flows[b]] == prio[flows[a]]:
            b += 1
        n_pend = 0
        for i in range(a, b):
            if f_ptr[i + 1] == f_ptr[i]:
                rates[flows[i]] = np.inf
                state[i] = 2
                continue
            state[i] = 1
            w = w_loc[i]
            for e in range(f_ptr[i], f_ptr[i + 1]):
                j = f_j[e]
                den[j] += w * f_fr[e]
                cnt[j] += 1
            pend[n_pend] = i
            n_pend += 1
        if lm_st[0]:  # `_drain`'s by-link copy: this class's levels and flows
            for j in range(nt):
                if cnt[j] > 0:
                    lev[j] = _level(j, rem, den, cap)
            for i in range(a, b):
                if state[i] == 1:
                    for e in range(f_ptr[i], f_ptr[i + 1]):
                        lm_on[lm_pos[e]] = True
        # each unfrozen flow has an entry in the heap for one of its links whose key is at most
        # the lowest level of its links (levels only rise, so it stays a lower bound): then the
        # top of the heap is at most every link's level, and a link popped at its true level is
        # the next bottleneck. One entry per flow, not per link: most links of a fabric never
        # are a bottleneck, and popping them was most of the time.
        hn = 0
        while True:  # the heap's arrays grow here, out of `_drain`'s loops
            hn, n_pend = _drain(hk, hl, hn, pend, n_pend, hkey, f_ptr, f_j, f_fr, rem, den, cnt,
                                cap, tptr, t_idx, state, w_loc, flows, rates, lm_ptr, lm_j, lm_st,
                                lev, lm_pos, lm_on, lm_fill)
            if n_pend < 0:
                break
            hk, hl = _more_heap(hk, hl, hn)
        a = b


class Scratch:
    """Per-link work array reused across calls of `max_min_subset` (zero between calls)."""

    __slots__ = ("pos",)

    def __init__(self, num_links: int):
        self.pos = np.zeros(num_links, np.int64)


@kernel
def fill_subset(flows, lo, hi, link, frac, weight, priority, capacity, rates, s_pos):
    """`max_min_subset` in compiled code (for callers that are compiled too)."""
    order = np.argsort(priority[flows], kind="mergesort")  # stable
    _fill(flows[order], lo, hi, link, frac, weight, priority, capacity, rates, s_pos)


def max_min_subset(flows: np.ndarray, lo: np.ndarray, hi: np.ndarray, link: np.ndarray,
                   frac: np.ndarray, weight: np.ndarray, priority: np.ndarray,
                   capacity_bytes_per_s: np.ndarray, rates: np.ndarray, scratch: Scratch) -> None:
    """Engine entry point: allocate the flows ``flows`` (int64 ids, any order) in place.

    Flow ``f``'s links are ``link[lo[f]:hi[f]]``; the flows given must be all the flows using
    those links (a closed component), since the links' full capacity is shared among them.
    ``rates[f]`` is written for every given flow. No input checks: the caller validated.
    """
    fill_subset(flows, lo, hi, link, frac, weight, priority, capacity_bytes_per_s, rates,
                scratch.pos)


def _check(ptr, link, frac, capacity, weight, priority):
    ptr = np.asarray(ptr, dtype=np.int64)
    link = np.asarray(link, dtype=np.int64)
    frac = np.asarray(frac, dtype=np.float64)
    cap = np.asarray(capacity, dtype=np.float64)
    if ptr.ndim != 1 or ptr.size < 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 0):
        raise ConfigError("ptr must be a non-decreasing int array starting at 0 (CSR by flow), "
                          f"got {ptr[:8]!r}... (ptr)")
    nnz = int(ptr[-1])
    if link.shape != (nnz,) or frac.shape != (nnz,):
        raise ConfigError(f"link and frac must have ptr[-1]={nnz} entries, got {link.shape} and "
                          f"{frac.shape} (link, frac)")
    if np.any(~(cap > 0)) or np.any(~np.isfinite(cap)):
        i = int(np.flatnonzero(~(cap > 0) | ~np.isfinite(cap))[0])
        raise ConfigError(f"capacity must be positive and finite, got {cap[i]!r} (capacity[{i}])")
    if nnz and (link.min() < 0 or link.max() >= cap.size):
        raise ConfigError(f"link ids must lie in 0..{cap.size - 1}, got {link.min()}..{link.max()} "
                          "(link)")
    bad = np.flatnonzero(~(frac > 0) | ~(frac <= 1))
    if bad.size:
        raise ConfigError(f"frac must lie in (0, 1], got {frac[bad[0]]!r} (frac[{bad[0]}])")
    num_flows = ptr.size - 1
    w = np.ones(num_flows) if weight is None else np.asarray(weight, dtype=np.float64)
    if w.shape != (num_flows,):
        raise ConfigError(f"weight must have {num_flows} entries, got {w.shape} (weight)")
    bad = np.flatnonzero(~(w > 0) | ~np.isfinite(w))
    if bad.size:
        raise ConfigError(f"weight must be positive and finite, got {w[bad[0]]!r} "
                          f"(weight[{bad[0]}])")
    if priority is None:
        p = np.zeros(num_flows, np.int64)
    else:
        p0 = np.asarray(priority)
        if p0.shape != (num_flows,) or not np.issubdtype(p0.dtype, np.integer):
            raise ConfigError(f"priority must be {num_flows} integers, got shape {p0.shape} of "
                              f"{p0.dtype} (priority)")
        p = p0.astype(np.int64)
    return ptr, link, frac, cap, w, p


def max_min_rates(ptr, link, frac, capacity, *, weight=None, priority=None) -> np.ndarray:
    """Max-min fair rates of F flows (weighted, by strict priority class), compiled kernel.

    Args:
        ptr: ``int[F + 1]``, CSR row pointer by flow.
        link: ``int[nnz]``, the links of the flows.
        frac: ``float[nnz]`` in (0, 1], the fraction of the flow's rate on each link.
        capacity: ``float[L]``, link capacities in bytes per second.
        weight: ``float[F] > 0``; a flow's share of a bottleneck is proportional to it. Default 1.
        priority: ``int[F]``; lower is served first, each class max-min fair on what the classes
            before it left. Default 0.

    Returns:
        ``float64[F]`` rates in bytes per second; ``+inf`` for a flow with no links.

    >>> max_min_rates([0, 1, 2, 4], [0, 0, 0, 1], [1.0, 1.0, 1.0, 1.0], [3.0, 10.0])
    array([1., 1., 1.])
    """
    ptr, link, frac, cap, w, p = _check(ptr, link, frac, capacity, weight, priority)
    num_flows = ptr.size - 1
    rates = np.zeros(num_flows)
    max_min_subset(np.arange(num_flows, dtype=np.int64), ptr[:-1], ptr[1:], link, frac, w, p, cap,
                   rates, Scratch(cap.size))
    return rates


def max_min_rates_reference(ptr, link, frac, capacity, *, weight=None, priority=None,
                            rel_tol: float = 1e-12) -> np.ndarray:
    """The same allocation by plain progressive filling: one numpy pass per bottleneck level.

    Slow (O(levels * nnz)); for cross-checking `max_min_rates`. Links whose level is within
    ``rel_tol`` of the lowest saturate together.
    """
    ptr, link, frac, cap, w, p = _check(ptr, link, frac, capacity, weight, priority)
    num_flows = ptr.size - 1
    num_links = cap.size
    flow_of = np.repeat(np.arange(num_flows), np.diff(ptr))
    rates = np.zeros(num_flows)
    rates[np.diff(ptr) == 0] = np.inf
    rem = cap.copy()
    for cls in np.unique(p):
        unfrozen = (p == cls) & (np.diff(ptr) > 0)
        while unfrozen.any():
            on = unfrozen[flow_of]
            den = np.bincount(link[on], weights=(w[flow_of] * frac)[on], minlength=num_links)
            cnt = np.bincount(link[on], minlength=num_links)
            live = cnt > 0
            level = np.full(num_links, np.inf)
            left = np.where(rem > _EPS * cap, rem, 0.0)
            level[live] = left[live] / den[live]
            t = level.min()
            bottleneck = live & (level <= t * (1 + rel_tol))
            hit = np.zeros(num_flows, bool)
            hit[flow_of[on & bottleneck[link]]] = True
            rates[hit] = w[hit] * t
            unfrozen &= ~hit
            sel = hit[flow_of]
            rem -= np.bincount(link[sel], weights=(rates[flow_of] * frac)[sel], minlength=num_links)
    return rates
