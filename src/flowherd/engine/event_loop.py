"""The engine's event loop in compiled code: events are processed without returning to Python
until something needs it (a coflow with a listener finishes, the bucket pool is full, a Python
rate rule or congestion hook is due, the run's end).

Per event the Python loop dispatched eight to ten compiled kernels (about 120 array arguments,
each type-checked at every call) and walked the coflow bookkeeping in Python: 60-100 us per
event, most of a cluster run once the rate updates were local (profile of
`benchmarks/contended_small.py`). Here one call runs many events: the kernels are the
same (`flowherd.engine.step_kernels`, `flowherd.engine.bottleneck`, `flowherd.engine.allocation`), called
from compiled code, in the same order on the same data, so the results are the same bit for bit
(`tests/engine/test_engine_exact.py`).

The pending events are a binary heap of ``(time, sequence number)`` (a coflow's release and its
finish; sequence numbers are unique, so the order is the one ``heapq`` gave the Python loop). A
coflow's dependents are a linked list of edges in add order. ``run_events`` is resumable: where it
hands over to Python it records the phase of the step it is in (``st_i[PHASE]``) and goes on from
there when called again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flowherd.engine.allocation import activate, settle
from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.bottleneck import local_core
from flowherd.engine.flow_heap import fh_build, fh_requeue, fh_soonest, fh_take_done, squeeze
from flowherd.engine.incidence import adj_insert, buckets_add
from flowherd.engine.network.packed import loop_done, loop_rates, loop_rates_tail, loop_room, rates_fast
from flowherd.engine.network.rates_core import FB, IB, _sort_ints
from flowherd.errors import SimulationError

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState
from flowherd.engine.step_kernels import count_off, end_flows, soonest, split_done, start_flows

__all__ = [
    "DONE",
    "RELEASE",
    "S_AFTER",
    "S_CALLBACK",
    "S_EMPTY",
    "S_HOOK_DONE",
    "S_NET_FLUSH",
    "S_NET_PAUSES",
    "S_NET_RATES",
    "S_RATES",
    "S_ROOM",
    "S_UNTIL",
    "drive",
    "heap_push",
    "heap_push_many",
    "link_coflows",
    "run_events",
    "work_sizes",
]

RELEASE, DONE = 0, 1
# what run_events returns
S_EMPTY = 0  # no event left
S_UNTIL = 1  # the next event is after the time asked for
S_CALLBACK = 2  # coflow st_i[CB_CID] finished at st_f[CB_T] and has a listener
S_ROOM = 3  # the bucket pool is full: started flows from st_i[INSERTED] on are not in it
S_HOOK_DONE = 4  # flows ended (done_buf[:st_i[N_DONE]]): the congestion model's hook is due
S_RATES = 5  # the rate update is Python's (st_i[PY_RATES])
S_AFTER = 6  # a step with a rate update ended and the per-link loads are due for a refresh, or
# a step ended and the flows that are over are due to be dropped
S_NET_RATES = 7  # the congestion model's rest of a rate update is Python's (a burst fills a port)
S_NET_FLUSH = 8  # the congestion model's record buffers are due to be emptied (before a step)
S_NET_PAUSES = 9  # a burst's PFC pause records did not fit the model's buffer: they are returned
# st_i slots
HEAP_N, SEQ, N_ACT, N_STARTED, N_DONE, PHASE, EVENTS, UPDATES, PASSES, MOVED, DEAD, CB_CID, \
    INSERTED, B_USED, REFRESH_AT, COMPACT_MIN, RECORD, F_COUNT, PY_RATES, PY_ON_DONE, P_DONE, \
    RATED, COUNTED, SCAN, STEPS, NET, N_COMP = range(27)
NUM_I = 27
# SCAN: 1 finds the flows that end by a scan of all active flows (`flow_heap`'s reference);
# STEPS: the steps the last call ran (the heap, rebuilt at every call, pays from a few steps on)
_HEAP_STEPS = 4
# st_f slots
NOW, CB_T, T_DONE, RTOL = range(4)
NUM_F = 4
_TIME_RTOL = 1e-12


@kernel(**NO_REFCOUNT)
def heap_push(h_t, h_seq, h_kind, h_cid, st_i, t, kind, cid):
    """Push event ``(t, next sequence number)`` (the caller keeps room for it)."""
    n = st_i[HEAP_N]
    seq = st_i[SEQ]
    st_i[SEQ] = seq + 1
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if h_t[p] < t or (h_t[p] == t and h_seq[p] < seq):
            break
        h_t[i] = h_t[p]
        h_seq[i] = h_seq[p]
        h_kind[i] = h_kind[p]
        h_cid[i] = h_cid[p]
        i = p
    h_t[i] = t
    h_seq[i] = seq
    h_kind[i] = kind
    h_cid[i] = cid
    st_i[HEAP_N] = n + 1


@kernel(**NO_REFCOUNT)
def heap_push_many(h_t, h_seq, h_kind, h_cid, st_i, t, kind, cid):
    for i in range(t.size):
        heap_push(h_t, h_seq, h_kind, h_cid, st_i, t[i], kind, cid[i])


@kernel(**NO_REFCOUNT)
def _heap_pop(h_t, h_seq, h_kind, h_cid, st_i):
    """Drop the first event (the caller read it at index 0)."""
    n = st_i[HEAP_N] - 1
    st_i[HEAP_N] = n
    if n == 0:
        return
    t = h_t[n]
    seq = h_seq[n]
    kind = h_kind[n]
    cid = h_cid[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (h_t[c + 1] < h_t[c] or (h_t[c + 1] == h_t[c] and h_seq[c + 1] < h_seq[c])):
            c += 1
        if t < h_t[c] or (t == h_t[c] and seq < h_seq[c]):
            break
        h_t[i] = h_t[c]
        h_seq[i] = h_seq[c]
        h_kind[i] = h_kind[c]
        h_cid[i] = h_cid[c]
        i = c
    h_t[i] = t
    h_seq[i] = seq
    h_kind[i] = kind
    h_cid[i] = cid


@kernel(**NO_REFCOUNT)
def _release_time(d, now, c_base, c_delay, c_finish, c_alo, c_ahi, after_buf):
    start = c_base[d]
    for k in range(c_alo[d], c_ahi[d]):
        start = max(start, c_finish[after_buf[k]])
    return max(start + c_delay[d], now)


@kernel
def link_coflows(c0, c1, now, c_base, c_delay, c_finish, c_waiting, c_alo, c_ahi, c_dhead,
                 c_dtail, after_buf, e_to, e_next, e_count, h_t, h_seq, h_kind, h_cid, st_i):
    """Wire coflows ``c0 .. c1 - 1`` (their ``after`` lists in place) to their dependencies, in
    add order: each waits for the distinct ones not finished, is appended to their dependents,
    and is released now if it waits for none. Returns the new edge count."""
    for c in range(c0, c1):
        waiting = 0
        for k in range(c_alo[c], c_ahi[c]):
            a = after_buf[k]
            dup = False
            for q in range(c_alo[c], k):
                if after_buf[q] == a:
                    dup = True
                    break
            if dup or not np.isnan(c_finish[a]):
                continue
            waiting += 1
            e = e_count
            e_count += 1
            e_to[e] = c
            e_next[e] = -1
            if c_dhead[a] < 0:
                c_dhead[a] = e
            else:
                e_next[c_dtail[a]] = e
            c_dtail[a] = e
        c_waiting[c] = waiting
        if waiting == 0:
            t = _release_time(c, now, c_base, c_delay, c_finish, c_alo, c_ahi, after_buf)
            heap_push(h_t, h_seq, h_kind, h_cid, st_i, t, RELEASE, c)
    return e_count


@kernel(inline="always")
def _leave(status, holes, act_buf, st_i, apos, steps):
    """``status`` and no pause records, the holes squeezed out of ``act_buf`` first
    (`flowherd.engine.flow_heap`)."""
    st_i[STEPS] = steps
    if holes:
        st_i[N_ACT] = squeeze(act_buf, st_i[N_ACT], apos)
    return status, np.empty(0, np.int64), np.empty(0)


@kernel
def run_events(until, st_i, st_f, act_buf, started_buf, done_buf,
               f_coflow, f_size, f_lat, f_weight, f_prio, f_lo, f_hi, f_start, f_txend, f_finish,
               f_rem, f_t0, f_rate, f_rate_new, f_mark, f_bn, link_buf, frac_buf, inc_pos,
               cap, cap_eff, l_load, l_bytes, l_nact, l_busy_since, l_busy_s, l_mark, s_pos,
               sc_load, sc_pmax, sc_mlev, sc_stamp, sc_raw, sc_dirty, sc_uid,
               b_start, b_len, b_cap, b_flow, b_inc,
               c_left, c_last, c_flo, c_fhi, c_base, c_delay, c_min, c_start, c_finish, c_waiting,
               c_alo, c_ahi, c_dhead, c_cb, after_buf, e_to, e_next,
               h_t, h_seq, h_kind, h_cid,
               lossless_q, default_mask, n_lf, n_li, n_lb, n_cf, n_ci, n_bf, n_ms, dq_p, dq_q, dq_w, ser_t,
               ser_l, ser_q, ser_n, mk_i, mk_f, pz_t, pz_l, pz_d, fpos, fmark, comp_buf, fi_buf, ho_i, ho_f,
               w_i, w_f, w_b):
    """Process events up to ``until`` (inclusive; ``inf``: all), in steps exactly as
    `flowherd.engine.core.Engine` defines them, until one of the ``S_*`` hand-overs.
    ``act_buf[:st_i[N_ACT]]`` are the active flows; the buffers hold at least as many entries as
    there are flows and the heap room for two events per coflow. The exact mode finds the
    flows that end in a heap of their ends (`flowherd.engine.flow_heap`), with or without the
    congestion model in the loop: the model changes flows' latencies, not their transmission
    ends, which only the rate updates here (and Python, before the heap is rebuilt) set.

    With ``st_i[NET]`` the congestion model's hooks run here too (`flowherd.engine.network.packed`:
    ``loop_done``, ``loop_rates``, on its state ``lossless_q`` .. ``fmark``, where they would run
    from Python), handing over only what they cannot do (``S_NET_RATES``, ``S_HOOK_DONE``).
    Returns (the ``S_*`` status, and with ``S_NET_PAUSES`` the pause records' links and
    durations, else empty arrays).

    ``w_i``, ``w_f``, ``w_b`` hold the call's work arrays (`work_sizes`; none needs its contents on
    entry), kept by the caller between calls: allocated here at every call, a run whose every step
    hands over to Python (a collective launched step by step) spent a fifth of its time mapping
    and unmapping them (system time)."""
    heap = (st_f[RTOL] == 0.0 and st_i[PY_RATES] == 0 and st_i[PY_ON_DONE] == 0 and st_i[SCAN] == 0
            and st_i[STEPS] >= _HEAP_STEPS)
    holes = 0
    steps = 0
    nf = f_rate.size
    nl = cap.size
    fh_cap = 2 * act_buf.size + 64
    nw = nl if st_i[NET] else 0
    nr = 1 if st_i[NET] else 0
    # int64: lu_mem, lu_re, lu_gr, so_out, so_ord, so_tmp, apos (nf each); lu_eff, lu_dl (nl);
    # hf (fh_cap); nw_i (3 nw); nr_i
    o = 0
    lu_mem = w_i[o:o + nf]
    o += nf
    lu_re = w_i[o:o + nf]
    o += nf
    lu_gr = w_i[o:o + nf]
    o += nf
    # the re-allocated flows sorted without an allocation per update (`rates_core._sort_ints`)
    so_out = w_i[o:o + nf]
    o += nf
    so_ord = w_i[o:o + nf]
    o += nf
    so_tmp = w_i[o:o + nf]
    o += nf
    apos = w_i[o:o + nf]
    o += nf
    lu_eff = w_i[o:o + nl]
    o += nl
    lu_dl = w_i[o:o + nl]
    o += nl
    hf = w_i[o:o + fh_cap]
    o += fh_cap
    # the congestion model's per-step work arrays (`packed.loop_done`: one entry per link)
    nw_i = w_i[o:o + 3 * nw]
    o += 3 * nw
    # and `packed.rates_fast`'s (`rates_core.work_arrays`)
    nr_i = w_i[o:o + nr * (2 * FB + 5 * IB) + 2 * nw]
    # float64: lu_prev (nf), ht (fh_cap), nw_f (3 nw), nr_f
    o = 0
    lu_prev = w_f[o:o + nf]
    o += nf
    ht = w_f[o:o + fh_cap]
    o += fh_cap
    nw_f = w_f[o:o + 3 * nw]
    o += 3 * nw
    nr_f = w_f[o:o + nr * (5 * FB + IB) + 9 * nw]
    # bool: lu_chk (nf), nw_b (nw), nr_b
    o = 0
    lu_chk = w_b[o:o + nf]
    o += nf
    nw_b = w_b[o:o + nw]
    o += nw
    nr_b = w_b[o:o + nr * 2 * FB + 2 * nw]
    nr_res = np.zeros(5, np.int64)
    hn = fh_build(act_buf, st_i[N_ACT], f_txend, apos, ht, hf) if heap else 0
    while True:
        phase = st_i[PHASE]
        if phase == 0 and st_i[NET] and not loop_room(cap.size, ser_t, ser_n, n_ms, pz_t):
            return _leave(S_NET_FLUSH, holes, act_buf, st_i, apos, steps)
        if phase == 0:  # the next step's time, then the flows that end
            steps += 1
            n_act = st_i[N_ACT]
            if heap:
                t_flow, hn = fh_soonest(ht, hf, hn, f_txend, apos)
            else:
                t_flow = soonest(act_buf[:n_act], f_txend) if n_act else np.inf
            t_heap = h_t[0] if st_i[HEAP_N] else np.inf
            t = min(t_flow, t_heap)
            if t == np.inf:
                return _leave(S_EMPTY, holes, act_buf, st_i, apos, steps)
            if t > until:
                return _leave(S_UNTIL, holes, act_buf, st_i, apos, steps)
            now = max(t, st_f[NOW])
            st_f[NOW] = now
            st_i[N_DONE] = 0
            st_i[N_STARTED] = 0
            st_i[P_DONE] = 1 << 62
            st_f[T_DONE] = np.inf
            st_i[COUNTED] = 0
            st_i[PHASE] = 1
            if heap and hn:
                n_d, hn = fh_take_done(ht, hf, hn, f_txend, apos, now + _TIME_RTOL * abs(now), act_buf,
                                       done_buf)
                holes += n_d
                done = done_buf[:n_d]
            elif n_act and not heap:
                done, keep = split_done(act_buf[:n_act], f_txend, f_start, now, _TIME_RTOL * abs(now),
                                        st_f[RTOL])
                if done.size:
                    act_buf[:keep.size] = keep
                    st_i[N_ACT] = keep.size
            else:
                done = done_buf[:0]
            if done.size:
                p_d, t_d = end_flows(done, now, f_rate, f_weight, f_prio, f_rem, f_t0, f_lo, f_hi,
                                     link_buf, frac_buf, l_bytes, l_nact, l_load, l_busy_since,
                                     l_busy_s, inc_pos, b_start, b_len, b_flow, b_inc, f_txend,
                                     f_finish, f_lat)
                st_i[P_DONE] = p_d
                st_f[T_DONE] = t_d
                done_buf[:done.size] = done
                st_i[N_DONE] = done.size
                if st_i[PY_ON_DONE]:  # the hook, then the rest of this phase (PHASE 1)
                    return _leave(S_HOOK_DONE, holes, act_buf, st_i, apos, steps)
                if st_i[NET] and loop_done(done, f_lo, f_hi, link_buf, b_len, l_load, now, n_lf, n_li,
                                           n_lb, n_cf, n_ci, dq_p, dq_q, dq_w, ser_t, ser_l, ser_q,
                                           ser_n, nw_i, nw_f, nw_b):
                    # DCQCN's table first: the model's hook does it all
                    return _leave(S_HOOK_DONE, holes, act_buf, st_i, apos, steps)
        if st_i[PHASE] == 1 and st_i[N_DONE] and st_i[COUNTED] == 0:
            # the flows that ended, counted off (after the congestion model's hook)
            n_done = st_i[N_DONE]
            st_i[DEAD] += n_done
            st_i[EVENTS] += n_done
            fin = count_off(done_buf[:n_done], f_coflow, f_finish, c_left, c_last)
            for i in range(fin.size):  # not before its least duration (NCCL's channel rate)
                cf = fin[i]
                heap_push(h_t, h_seq, h_kind, h_cid, st_i, max(c_last[cf], c_start[cf] + c_min[cf]),
                          DONE, cf)
            st_i[COUNTED] = 1
        if st_i[PHASE] == 1:  # the events due now
            now = st_f[NOW]
            while st_i[HEAP_N] and h_t[0] <= now:
                t = h_t[0]
                kind = h_kind[0]
                cid = h_cid[0]
                _heap_pop(h_t, h_seq, h_kind, h_cid, st_i)
                st_i[EVENTS] += 1
                if kind == RELEASE:
                    lo = c_flo[cid]
                    hi = c_fhi[cid]
                    c_start[cid] = now
                    if lo == hi:  # a pure delay
                        c_left[cid] = 0
                        c_last[cid] = now
                        heap_push(h_t, h_seq, h_kind, h_cid, st_i, now + c_min[cid], DONE, cid)
                        continue
                    real, last, n_inst = start_flows(lo, hi, now, f_size, f_lo, f_hi, f_lat, f_start,
                                                     f_txend, f_finish, f_rem, f_t0, f_rate)
                    st_i[DEAD] += n_inst
                    c_left[cid] = real.size
                    c_last[cid] = last
                    if real.size == 0:
                        heap_push(h_t, h_seq, h_kind, h_cid, st_i, max(last, now + c_min[cid]), DONE, cid)
                    n_s = st_i[N_STARTED]
                    started_buf[n_s:n_s + real.size] = real
                    st_i[N_STARTED] = n_s + real.size
                else:
                    c_finish[cid] = t
                    e = c_dhead[cid]
                    while e >= 0:
                        d = e_to[e]
                        c_waiting[d] -= 1
                        if c_waiting[d] == 0:
                            heap_push(h_t, h_seq, h_kind, h_cid, st_i,
                                      _release_time(d, now, c_base, c_delay, c_finish, c_alo, c_ahi,
                                                    after_buf), RELEASE, d)
                        e = e_next[e]
                    if c_cb[cid]:
                        st_i[CB_CID] = cid
                        st_f[CB_T] = t
                        return _leave(S_CALLBACK, holes, act_buf, st_i, apos, steps)
            n_s = st_i[N_STARTED]
            if n_s:
                n_act = st_i[N_ACT]
                act_buf[n_act:n_act + n_s] = started_buf[:n_s]
                st_i[N_ACT] = n_act + n_s
                if heap:
                    for i in range(n_s):
                        apos[started_buf[i]] = n_act + i
            st_i[INSERTED] = 0
            st_i[PHASE] = 2
        if st_i[PHASE] == 2:  # the started flows into the per-link buckets
            n_s = st_i[N_STARTED]
            ins = st_i[INSERTED]
            if ins < n_s:
                k, used = adj_insert(started_buf[ins:n_s], f_lo, f_hi, link_buf, inc_pos, b_start,
                                     b_len, b_cap, b_flow, b_inc, st_i[B_USED])
                st_i[B_USED] = used
                st_i[INSERTED] = ins + k
                if ins + k < n_s:
                    return _leave(S_ROOM, holes, act_buf, st_i, apos, steps)
            st_i[PHASE] = 3
        if st_i[PHASE] == 3:  # one rate update for the step
            n_s = st_i[N_STARTED]
            n_done = st_i[N_DONE]
            st_i[PHASE] = 4
            st_i[RATED] = 0
            if (n_s or n_done) and st_i[N_ACT] > holes:
                st_i[RATED] = 1
                if st_i[PY_RATES]:
                    return _leave(S_RATES, holes, act_buf, st_i, apos, steps)
                now = st_f[NOW]
                n_c, passes, moved = local_core(
                    started_buf[:n_s], done_buf[:n_done], f_lo, f_hi, link_buf, frac_buf, f_rate,
                    f_rate_new, f_weight, f_prio, cap, cap_eff, s_pos, l_mark, f_mark, b_start, b_len,
                    b_flow, b_inc, f_bn, sc_load, sc_pmax, sc_mlev, sc_stamp, sc_raw, sc_dirty, sc_uid,
                    lu_mem, lu_prev, lu_re, lu_gr, lu_chk, lu_eff, lu_dl)
                _sort_ints(lu_mem, n_c, so_ord, so_tmp, so_out)  # distinct ids: np.sort's order
                comp = so_out[:n_c]
                st_i[UPDATES] += 1
                st_i[PASSES] += passes
                st_i[MOVED] += moved
                if comp.size and st_i[NET]:  # the model's hook, then the new rates (PHASE 5)
                    comp_buf[:comp.size] = comp
                    st_i[N_COMP] = comp.size
                    st_i[PHASE] = 5
                    fast = rates_fast(
                        comp, f_lo, f_hi, link_buf, frac_buf, f_rate, f_rate_new, f_rem, f_size, f_start,
                        f_prio, f_lat, now, l_load, b_len, lossless_q, n_lf, n_li, n_lb, n_cf, n_ci, dq_p,
                        dq_q, dq_w, ser_t, ser_l, ser_q, ser_n, nr_i, nr_f, nr_b, nr_res)
                    if fast != 1:  # bursts, a hand-over, or an update larger than the work arrays
                        if fast == 2:
                            status, rec_u, rec_t = loop_rates_tail(
                                comp, f_lo, f_hi, link_buf, f_prio, f_rate_new, f_rem, f_lat, now, l_load,
                                b_start, b_len, b_flow, lossless_q, default_mask, n_lf, n_li, n_lb, n_cf,
                                n_ci, n_bf, n_ms, dq_q, dq_w, mk_i, mk_f, pz_t, pz_l, pz_d, fpos, fmark,
                                fi_buf, ho_i, ho_f, nr_i, nr_f, nr_b, nr_res)
                        else:
                            status, rec_u, rec_t = loop_rates(
                                comp, f_lo, f_hi, link_buf, frac_buf, f_rate, f_rate_new, f_rem, f_size,
                                f_start, f_prio, f_lat, now, l_load, b_start, b_len, b_flow, lossless_q,
                                default_mask, n_lf, n_li, n_lb, n_cf, n_ci, n_bf, n_ms, dq_p, dq_q, dq_w,
                                ser_t, ser_l, ser_q, ser_n, mk_i, mk_f, pz_t, pz_l, pz_d, fpos, fmark,
                                fi_buf, ho_i, ho_f)
                        if status == 1:
                            return _leave(S_NET_RATES, holes, act_buf, st_i, apos, steps)
                        if status == 2:
                            st_i[STEPS] = steps
                            if holes:
                                st_i[N_ACT] = squeeze(act_buf, st_i[N_ACT], apos)
                            return S_NET_PAUSES, rec_u, rec_t
                elif comp.size:
                    settle(comp, now, False, f_rate, f_rem, f_t0, f_lo, f_hi, link_buf, frac_buf,
                           l_bytes, l_nact, l_load, l_busy_since, l_busy_s)
                    activate(comp, now, f_rate, f_rate_new, f_rem, f_txend, f_lo, f_hi, link_buf,
                             frac_buf, l_nact, l_load, l_busy_since)
                    if heap:
                        hn = fh_requeue(comp, f_txend, hn, fh_cap, act_buf, st_i[N_ACT], apos, ht, hf)
        if st_i[PHASE] == 5:  # the new rates after the congestion model's hook
            now = st_f[NOW]
            comp = comp_buf[:st_i[N_COMP]]
            settle(comp, now, False, f_rate, f_rem, f_t0, f_lo, f_hi, link_buf, frac_buf, l_bytes, l_nact,
                   l_load, l_busy_since, l_busy_s)
            activate(comp, now, f_rate, f_rate_new, f_rem, f_txend, f_lo, f_hi, link_buf, frac_buf, l_nact,
                     l_load, l_busy_since)
            if heap:
                hn = fh_requeue(comp, f_txend, hn, fh_cap, act_buf, st_i[N_ACT], apos, ht, hf)
            st_i[PHASE] = 4
        if st_i[PHASE] == 4:  # the end of the step: what Python does now and then
            st_i[PHASE] = 0
            rated = st_i[RATED]
            st_i[RATED] = 0
            dead = st_i[DEAD]
            if (rated and st_i[UPDATES] >= st_i[REFRESH_AT]) or (
                    st_i[RECORD] == 0 and dead > max(st_i[COMPACT_MIN], 2 * (st_i[F_COUNT] - dead))):
                st_i[RATED] = rated
                return _leave(S_AFTER, holes, act_buf, st_i, apos, steps)
            if holes > 1024 and 2 * holes > st_i[N_ACT]:
                st_i[N_ACT] = squeeze(act_buf, st_i[N_ACT], apos)
                holes = 0


# ---- the Python side ------------------------------------------------------------------------
_NO_I, _NO_F, _NO_B = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.bool_)
# `NetworkModel.loop_args` of an engine without one in the loop
_NO_NET = (_NO_B, _NO_B, _NO_F, _NO_I, _NO_B, _NO_F, _NO_I, _NO_F, _NO_I, _NO_F, _NO_F, 0, _NO_F, _NO_I,
           _NO_F, _NO_I, _NO_I, _NO_F, _NO_F, _NO_I, _NO_F, _NO_I, _NO_I, _NO_I, _NO_F)


def work_sizes(num_flows: int, num_links: int, act_size: int, net: bool) -> tuple[int, int, int]:
    """Entries of `run_events`' int64, float64 and bool work arrays for these sizes (``num_flows``
    the flow columns' length, ``act_size`` the active buffer's, ``net`` the congestion model in
    the loop)."""
    fh_cap = 2 * act_size + 64
    nw = num_links if net else 0
    nr = 1 if net else 0
    n_i = 7 * num_flows + 2 * num_links + fh_cap + 3 * nw + nr * (2 * FB + 5 * IB) + 2 * nw
    n_f = num_flows + fh_cap + 3 * nw + nr * (5 * FB + IB) + 9 * nw
    n_b = num_flows + nw + nr * 2 * FB + 2 * nw
    return n_i, n_f, n_b


def _work(eng: EngineState, net: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`run_events`' work arrays, kept on the engine and grown (to twice the need) when short."""
    need = work_sizes(eng._f.rate.size, eng._ls.cap.size, eng._act_buf.size, net)
    have = getattr(eng, "_loop_work", None)
    if have is None or any(a.size < n for a, n in zip(have, need, strict=True)):
        have = (np.empty(2 * need[0], np.int64), np.empty(2 * need[1]), np.empty(2 * need[2], np.bool_))
        eng._loop_work = have
    return have


def _buffers(eng: EngineState) -> None:
    """Room in the loop's flow buffers for every flow (active, started or ended in a step)."""
    n = eng._f.count
    for name in ("_act_buf", "_started_buf", "_done_buf", "_comp_buf", "_fi_buf"):
        buf = getattr(eng, name)
        if buf.size < n:
            grown = np.zeros(2 * n, np.int64)
            grown[:buf.size] = buf
            setattr(eng, name, grown)
    eng._st_i[F_COUNT] = n


def drive(eng: EngineState, until: float, py_rates: bool) -> None:
    """`run_events` of engine ``eng`` up to ``until``, doing in Python what it hands over
    (``py_rates``: the rate updates too, ``eng._py_rates``)."""
    st = eng._st_i
    net = eng.network
    in_loop = net is not None and net.in_loop and not py_rates  # its hooks in `run_events`
    st[PY_ON_DONE] = net is not None and not in_loop
    st[NET] = in_loop
    st[PY_RATES] = py_rates
    while True:
        _buffers(eng)
        f, lk, ls, sc, c, h = eng._f, eng._links, eng._ls, eng._ls.local, eng._c, eng._hp
        na = net.loop_args(eng) if in_loop else _NO_NET
        status, rec_u, rec_t = run_events(
            until, st, eng._st_f, eng._act_buf, eng._started_buf, eng._done_buf,
            f.coflow, f.size, f.lat, f.weight, f.prio, f.lo, f.hi, f.start, f.txend, f.finish,
            f.rem, f.t0, f.rate, f.rate_new, f.mark, f.bn, lk.link, lk.frac, lk.pos,
            ls.cap, ls.cap_eff, ls.load, ls.bytes, ls.nact, ls.busy_since, ls.busy_s, ls.mark,
            ls.scratch.pos, sc.load, sc.pmax, sc.mlev, sc.stamp, sc.raw, sc.dirty, sc.uid,
            eng._b_start, eng._b_len, eng._b_cap, eng._b_flow, eng._b_inc,
            c.left, c.last, c.flo, c.fhi, c.base, c.delay, c.cmin, c.start, c.finish, c.waiting,
            c.alo, c.ahi, c.dhead, c.cb, eng._after.cid, eng._edges.to, eng._edges.next,
            h.t, h.seq, h.kind, h.cid, *na[:-2], eng._comp_buf, eng._fi_buf, *na[-2:],
            *_work(eng, in_loop))
        if status == S_CALLBACK:
            cid = int(st[CB_CID])
            eng._cbs.pop(cid)(cid, float(eng._st_f[CB_T]))
        elif status == S_HOOK_DONE:  # NETWORK HOOK 3/4: link state after departures
            eng.network.on_done(eng, eng._done_buf[:st[N_DONE]].copy(), eng.now_s)
        elif status == S_NET_RATES:
            net.loop_rates_rest(eng, eng._comp_buf[:st[N_COMP]], eng.now_s)
        elif status == S_NET_FLUSH:
            net.flush_records()
        elif status == S_NET_PAUSES:
            net._now = eng.now_s
            net._add_pauses(rec_u, rec_t)
        elif status == S_ROOM:
            buckets_add(eng, eng._started_buf[st[INSERTED]:st[N_STARTED]].copy())
            st[INSERTED] = st[N_STARTED]
            st[PHASE] = 3
        elif status == S_RATES:
            eng._py_rates()
        elif status == S_AFTER:
            if st[RATED] and st[UPDATES] >= st[REFRESH_AT]:
                eng._refresh_load()
            st[RATED] = 0
            if not eng.record_flows and st[DEAD] > max(st[COMPACT_MIN], 2 * (eng._f.count - st[DEAD])):
                eng._compact()
        elif status == S_EMPTY:
            act = eng._act_buf[:st[N_ACT]]
            if act.size:
                raise SimulationError(
                    f"{act.size} flows have rate 0 and nothing is left that could free capacity "
                    f"for them at t={eng.now_s} s (e.g. flow {int(act[0])}); check link "
                    "capacities and priorities")
            return
        else:
            return
