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
from numba import njit

from flowherd.errors import ConfigError

__all__ = ["Scratch", "max_min_rates", "max_min_rates_reference", "max_min_subset"]


# capacity left on a link below this fraction of its capacity is rounding noise: taken as none,
# so that a starved flow gets exactly 0
_EPS = 1e-12


# ---- a binary min-heap of (key, link) in two arrays --------------------------------
@njit(cache=True, inline="always")
def _heap_push(hk, hl, n, key, lnk):
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


@njit(cache=True, inline="always")
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


@njit(cache=True)
def _fill(flows, lo, hi, link_buf, frac_buf, weight, prio, capacity, rates,
          s_rem, s_den, s_cnt, s_pos):
    """Max-min rates of ``flows`` (ids sorted by priority), written into ``rates[flow]``.

    ``s_*`` are scratch arrays of one entry per link, all zero on entry and on return, so that
    a call costs O(nnz log L) of the flows it is given, not O(L).
    """
    n = flows.size
    nnz = 0
    for i in range(n):
        f = flows[i]
        nnz += hi[f] - lo[f]
    # links touched, and each one's degree (s_pos holds position + 1)
    touched = np.empty(nnz, np.int64)
    deg = np.zeros(nnz + 1, np.int64)
    nt = 0
    for i in range(n):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if s_pos[lnk] == 0:
                touched[nt] = lnk
                nt += 1
                s_pos[lnk] = nt
                s_rem[lnk] = capacity[lnk]
            deg[s_pos[lnk]] += 1
    # transpose: for each touched link, its (flow index, frac) entries
    tptr = np.zeros(nt + 1, np.int64)
    for j in range(nt):
        tptr[j + 1] = tptr[j] + deg[j + 1]
    fill = tptr[:-1].copy()
    t_idx = np.empty(nnz, np.int64)
    t_frac = np.empty(nnz, np.float64)
    for i in range(n):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            j = s_pos[link_buf[k]] - 1
            t_idx[fill[j]] = i
            t_frac[fill[j]] = frac_buf[k]
            fill[j] += 1
    state = np.zeros(n, np.int8)  # 0 later class, 1 unfrozen in this class, 2 frozen
    pushed = np.zeros(nt, np.int64)  # class stamp: link already pushed for this class
    cap_heap = nt + 1  # each link is in the heap at most once at a time
    hk = np.empty(cap_heap, np.float64)
    hl = np.empty(cap_heap, np.int64)
    a = 0
    cls = 0
    while a < n:
        cls += 1
        b = a
        while b < n and prio[flows[b]] == prio[flows[a]]:
            b += 1
        for i in range(a, b):
            f = flows[i]
            if hi[f] == lo[f]:
                rates[f] = np.inf
                state[i] = 2
                continue
            state[i] = 1
            w = weight[f]
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                s_den[lnk] += w * frac_buf[k]
                s_cnt[lnk] += 1
        hn = 0
        for i in range(a, b):
            f = flows[i]
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                j = s_pos[lnk] - 1
                if pushed[j] != cls:
                    pushed[j] = cls
                    r = s_rem[lnk]
                    r = r if r > _EPS * capacity[lnk] else 0.0
                    hn = _heap_push(hk, hl, hn, r / s_den[lnk], lnk)
        while hn > 0:
            key = hk[0]
            lnk = hl[0]
            hn = _heap_pop(hk, hl, hn)
            if s_cnt[lnk] == 0:
                continue
            r = s_rem[lnk]
            r = r if r > _EPS * capacity[lnk] else 0.0
            share = r / s_den[lnk]
            if share > key:
                # levels only rise as flows freeze, so a popped key is a lower bound of the
                # link's level: re-queue at the true level rather than pushing every change
                hn = _heap_push(hk, hl, hn, share, lnk)
                continue
            j = s_pos[lnk] - 1
            for e in range(tptr[j], tptr[j + 1]):
                i = t_idx[e]
                if state[i] != 1:
                    continue
                state[i] = 2
                f = flows[i]
                w = weight[f]
                r_f = w * share
                rates[f] = r_f
                for k in range(lo[f], hi[f]):
                    m = link_buf[k]
                    fr = frac_buf[k]
                    s_rem[m] -= r_f * fr
                    s_cnt[m] -= 1
                    # decided by count, not by the float sum reaching zero
                    s_den[m] = 0.0 if s_cnt[m] == 0 else s_den[m] - w * fr
        a = b
    for j in range(nt):
        lnk = touched[j]
        s_rem[lnk] = 0.0
        s_den[lnk] = 0.0
        s_cnt[lnk] = 0
        s_pos[lnk] = 0


class Scratch:
    """Per-link work arrays reused across calls of `max_min_subset` (all zero between calls)."""

    __slots__ = ("cnt", "den", "pos", "rem")

    def __init__(self, num_links: int):
        self.rem = np.zeros(num_links, np.float64)
        self.den = np.zeros(num_links, np.float64)
        self.cnt = np.zeros(num_links, np.int64)
        self.pos = np.zeros(num_links, np.int64)


def max_min_subset(flows: np.ndarray, lo: np.ndarray, hi: np.ndarray, link: np.ndarray,
                   frac: np.ndarray, weight: np.ndarray, priority: np.ndarray,
                   capacity_bytes_per_s: np.ndarray, rates: np.ndarray, scratch: Scratch) -> None:
    """Engine entry point: allocate the flows ``flows`` (int64 ids, any order) in place.

    Flow ``f``'s links are ``link[lo[f]:hi[f]]``; the flows given must be all the flows using
    those links (a closed component), since the links' full capacity is shared among them.
    ``rates[f]`` is written for every given flow. No input checks: the caller validated.
    """
    order = np.argsort(priority[flows], kind="stable")
    _fill(flows[order], lo, hi, link, frac, weight, priority, capacity_bytes_per_s, rates,
          scratch.rem, scratch.den, scratch.cnt, scratch.pos)


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
