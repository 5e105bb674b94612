"""The active flows' transmission ends as a binary heap inside the compiled event loop (issue 17).

Scanning every active flow at every step for the soonest end (and again for the flows that
end) cost ~60 us a step with 5,000 background flows in flight, most of a cluster run under the
exact background rule (16,384 GPUs: 5,000 to 10,000 flows in flight, ~5,000 steps per simulated
second, each touching a few dozen of them). Here a step costs O(changed flows x log n):

* the heap holds ``(transmission end, flow)`` entries, pushed whenever a rate update gives a
  flow a finite end; an entry is *stale* when its flow is no longer active (``apos[f] < 0``) or
  has another end now (``txend[f] != t``), and stale entries are dropped when they come up;
* a flow's position in ``act_buf`` is kept in ``apos``; a flow that ends leaves a hole (-1) in
  ``act_buf`` instead of the buffer being rewritten at every step; holes are squeezed out when
  they outnumber the live flows and before the loop hands over to Python (which then sees
  ``act_buf[:N_ACT]`` as before, in the same order).

The flows that end in a step are those of the scan (every active flow with a transmission end
within the step's time tolerance), in the order of ``act_buf`` (sorted by position), so the loop
does the same floating-point operations in the same order as with the scan: the same results bit
for bit (tests/engine/test_engine_exact.py). The heap and ``apos`` are rebuilt at every entry into
the loop from ``act_buf`` and ``txend`` (Python may have changed both in between: held flows,
compaction, a Python rate rule), so nothing outside the loop has to keep them.
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.fairshare import heap_push_pair

__all__ = ["fh_build", "fh_push", "fh_requeue", "fh_soonest", "fh_take_done", "squeeze"]


@kernel(**NO_REFCOUNT)
def _sift_down(ht, hf, hn, i):
    t = ht[i]
    f = hf[i]
    while True:
        c = 2 * i + 1
        if c >= hn:
            break
        if c + 1 < hn and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hf[c + 1] < hf[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and f < hf[c]):
            break
        ht[i] = ht[c]
        hf[i] = hf[c]
        i = c
    ht[i] = t
    hf[i] = f


@kernel(**NO_REFCOUNT)
def fh_push(ht, hf, hn, t, f):
    """Push ``(t, f)`` (the caller keeps room); returns the new size."""
    return heap_push_pair(ht, hf, hn, t, f)


@kernel(**NO_REFCOUNT)
def _pop(ht, hf, hn):
    hn -= 1
    if hn > 0:
        ht[0] = ht[hn]
        hf[0] = hf[hn]
        _sift_down(ht, hf, hn, 0)
    return hn


@kernel(**NO_REFCOUNT)
def fh_build(act_buf, n_ext, txend, apos, ht, hf):
    """Positions of the flows of ``act_buf[:n_ext]`` (holes: -1) in ``apos``, and the heap of the
    finite ends among them (bottom-up); returns its size."""
    hn = 0
    for i in range(n_ext):
        f = act_buf[i]
        if f < 0:
            continue
        apos[f] = i
        t = txend[f]
        if t < np.inf:
            ht[hn] = t
            hf[hn] = f
            hn += 1
    for i in range((hn >> 1) - 1, -1, -1):
        _sift_down(ht, hf, hn, i)
    return hn


@kernel(**NO_REFCOUNT)
def fh_requeue(comp, txend, hn, cap, act_buf, n_ext, apos, ht, hf):
    """The heap after the flows of ``comp`` took new ends: built anew from ``act_buf[:n_ext]``
    when their pushes would pass ``cap`` (the heap full of stale entries), else each finite
    end pushed; returns its size."""
    if hn + comp.size > cap:
        return fh_build(act_buf, n_ext, txend, apos, ht, hf)
    for i in range(comp.size):
        g = comp[i]
        if txend[g] < np.inf:
            hn = heap_push_pair(ht, hf, hn, txend[g], g)
    return hn


@kernel(**NO_REFCOUNT)
def fh_soonest(ht, hf, hn, txend, apos):
    """The soonest end of an active flow (+inf if none), stale entries dropped on the way:
    ``(t, new size)``."""
    while hn > 0:
        f = hf[0]
        if apos[f] >= 0 and txend[f] == ht[0]:
            return ht[0], hn
        hn = _pop(ht, hf, hn)
    return np.inf, hn


@kernel
def fh_take_done(ht, hf, hn, txend, apos, lim, act_buf, out):
    """The active flows that end by ``lim``, taken off the heap, into ``out`` in the order of
    ``act_buf`` (their holes made there, their ``apos`` -1): ``(count, new size)``."""
    m = 0
    while hn > 0 and ht[0] <= lim:
        f = hf[0]
        if apos[f] >= 0 and txend[f] == ht[0]:
            out[m] = f
            m += 1
        hn = _pop(ht, hf, hn)
    if m > 1:  # act order; one flow could have two entries with the same end
        pos = np.empty(m, np.int64)
        for i in range(m):
            pos[i] = apos[out[i]]
        o = np.argsort(pos)
        tmp = out[:m].copy()
        k = 0
        for i in range(m):
            f = tmp[o[i]]
            if k and out[k - 1] == f:
                continue
            out[k] = f
            k += 1
        m = k
    for i in range(m):
        f = out[i]
        act_buf[apos[f]] = -1
        apos[f] = -1
    return m, hn


@kernel(**NO_REFCOUNT)
def squeeze(act_buf, n_ext, apos):
    """Squeeze the holes out of ``act_buf[:n_ext]`` (order kept, ``apos`` updated); returns the
    number of flows left."""
    k = 0
    for i in range(n_ext):
        f = act_buf[i]
        if f >= 0:
            act_buf[k] = f
            apos[f] = k
            k += 1
    return k
