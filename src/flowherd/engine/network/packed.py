"""The congestion model's per-update passes behind few arguments: its per-link state packed in
three flat arrays, its constants in two.

A compiled call costs about half a microsecond per array argument to convert and check (the
exported wrapper, `flowherd.engine.aot`), which for `kernels.rates_pass` (58 arguments) was more
than its work on the one to five flows a cluster run's rate update re-allocates. `rates_step`
and `done_step` take the rows of ``lf`` (floats), ``li`` (integers) and ``lb`` (flags), each
``L`` links long in the order of the constants below, and call the passes on views of them:
the same code on the same data, so the same numbers.
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.network.burst_kernels import burst_apply, burst_members
from flowherd.engine.network.dcqcn import start_loss_stepped_s
from flowherd.engine.network.kernels import done_core, done_pass, rates_pass
from flowherd.engine.network.rates_core import FB, IB, rates_core

__all__ = ["BF", "CF", "CI", "LB", "LF", "LI", "MS", "PFC_DEPTH", "SERIES_MAX", "done_step", "loop_done",
           "loop_rates", "loop_rates_tail", "loop_room", "memo_rehash", "rates_fast", "rates_step",
           "record_series", "start_loss_memo"]

#: rows of the float link state ``lf``
LF = ("rtt_part", "q", "q_max", "cap_wire", "arrive", "s_dload", "s_rtt", "q_t", "q_int", "mark", "load",
      "marked", "cap", "drops", "pause")
#: rows of the integer link state ``li``
LI = ("link_src", "link_dst", "s_cnt", "pos", "dq_cls")
#: rows of the flags ``lb``
LB = ("is_net", "scratch", "src_is_switch")
#: the float constants ``cf`` and the integer ones ``ci`` (``tcp`` 0 or 1)
CF = ("iw", "growth", "mss", "ramp_gain", "dcqcn_timer", "dcqcn_rai", "wire_eff", "iw_wire", "cnp_interval",
      "pfc_xoff", "port_buffer", "sat_rtol", "k_bytes", "pkt_bytes", "q_cap_bytes")
CI = ("tcp", "setup_rtts", "dcqcn_steps")

#: the bursts' float constants ``bf`` (PFC Xon, the minimum RTO, then what
#: `dcqcn.start_loss_stepped_s` takes after the port: Xoff .. its step and horizon)
BF = ("xon", "min_rto", "xoff", "kmin", "kmax", "pmax", "pkt", "cnp_interval", "alpha_interval", "timer",
      "rai", "rhai", "g", "min_rate", "dt", "t_max")
#: the model's integer state ``ms``: timeouts and pause episodes so far, whether some flow is
#: outside the default queue, start-loss memo entries, pause records in the buffer and in all
MS = ("timeouts", "pauses", "multi_class", "memo_n", "pz_buf", "pz_kept")
PFC_DEPTH = 3  # hops a pause may spread upstream
_NLF = len(LF)

(_RTT_PART, _Q, _Q_MAX, _CAP_WIRE, _ARRIVE, _S_DLOAD, _S_RTT, _Q_T, _Q_INT, _MARK, _LOAD, _MARKED,
 _CAP, _DROPS, _PAUSE) = range(15)
_TIMEOUTS, _PAUSES, _MULTI, _MEMO_N, _PZ_BUF, _PZ_KEPT = range(6)
_SRC, _DST, _S_CNT, _POS, _DQ_CLS = range(5)
_IS_NET, _SCRATCH, _SW = range(3)


@kernel(inline="always")
def _row(a, k, n):
    return a[k * n:(k + 1) * n]


@kernel
def rates_step(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now, load,
               b_len, lossless_q, lf, li, lb, cf, ci, dq_p, dq_q, dq_w):
    """`kernels.rates_pass` of the re-allocated flows ``comp`` (its results)."""
    n = lf.size // len(LF)
    return rates_pass(
        comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now,
        _row(lf, _RTT_PART, n), _row(lf, _Q, n), _row(lf, _Q_MAX, n), _row(lf, _CAP_WIRE, n),
        _row(li, _SRC, n), _row(li, _DST, n), _row(lb, _IS_NET, n), load, b_len, _row(lf, _ARRIVE, n),
        lossless_q, _row(lb, _SCRATCH, n), _row(lf, _S_DLOAD, n), _row(lf, _S_RTT, n), _row(li, _S_CNT, n),
        _row(li, _POS, n), ci[0] != 0, ci[1], cf[0], cf[1], cf[2], cf[3], cf[4], ci[2], cf[5], cf[6], cf[7],
        cf[8], cf[9], cf[10], _row(lf, _Q_T, n), _row(lf, _Q_INT, n), _row(lf, _MARK, n), _row(lf, _LOAD, n),
        _row(lf, _MARKED, n), _row(lb, _SW, n), _row(lf, _CAP, n), cf[11], cf[12], cf[13], cf[14],
        _row(li, _DQ_CLS, n), dq_p, dq_q, dq_w)


@kernel
def done_step(done, lo, hi, link_buf, b_len, load, now, lf, li, lb, cf, ci, dq_p, dq_q, dq_w):
    """`kernels.done_pass` of the flows ``done`` (its results)."""
    n = lf.size // len(LF)
    return done_pass(
        done, lo, hi, link_buf, _row(lb, _SCRATCH, n), _row(lb, _IS_NET, n), b_len, load,
        _row(lf, _RTT_PART, n), now, _row(lf, _Q, n), _row(lf, _Q_T, n), _row(lf, _Q_INT, n),
        _row(lf, _Q_MAX, n), _row(lf, _MARK, n),
        _row(lf, _LOAD, n), _row(lf, _MARKED, n), _row(lb, _SW, n), _row(lf, _ARRIVE, n), _row(lf, _CAP, n),
        _row(lf, _CAP_WIRE, n), cf[11], ci[0] != 0, cf[12], cf[13], cf[14], _row(li, _DQ_CLS, n), dq_p, dq_q,
        dq_w)


# ---- the passes inside the engine's event loop (`flowherd.engine.event_loop.run_events`) -------
#: queue changes kept in a run's series (the rest dropped, counted; `NetworkModel.stats`)
SERIES_MAX = 1_000_000


@kernel(**NO_REFCOUNT)
def record_series(now, ch_l, ch_q, ser_t, ser_l, ser_q, ser_n):
    """`NetworkModel._record` into the model's series buffer: ``ser_n`` is (entries in the
    buffer, entries kept in the run); the caller leaves room for ``ch_l.size`` more."""
    if ch_l.size and ser_n[1] < SERIES_MAX:
        k = ser_n[0]
        for j in range(ch_l.size):
            ser_t[k + j] = now
            ser_l[k + j] = ch_l[j]
            ser_q[k + j] = ch_q[j]
        ser_n[0] = k + ch_l.size
        ser_n[1] += ch_l.size


@kernel(**NO_REFCOUNT)
def loop_done(done, lo, hi, link_buf, b_len, load, now, lf, li, lb, cf, ci, dq_p, dq_q, dq_w, ser_t, ser_l,
              ser_q, ser_n, w_i, w_f, w_b):
    """`NetworkModel.on_done` without Python: False when done, True when DCQCN's table lacks
    an entry (`done_step` touched nothing; the model's Python hook does it). `done_step`'s
    work in the event loop's work arrays ``w_i`` (three rows of one integer per link), ``w_f``
    (three of floats), ``w_b`` (one of flags): no allocation, no reference counts (these were
    28% of the counts of a roce run at scale a, issue 17)."""
    n = lf.size // _NLF
    _, nch, need = done_core(
        done, lo, hi, link_buf, _row(lb, _SCRATCH, n), _row(lb, _IS_NET, n), b_len, load,
        _row(lf, _RTT_PART, n), now, _row(lf, _Q, n), _row(lf, _Q_T, n), _row(lf, _Q_INT, n),
        _row(lf, _Q_MAX, n), _row(lf, _MARK, n),
        _row(lf, _LOAD, n), _row(lf, _MARKED, n), _row(lb, _SW, n), _row(lf, _ARRIVE, n), _row(lf, _CAP, n),
        _row(lf, _CAP_WIRE, n), cf[11], ci[0] != 0, cf[12], cf[13], cf[14], _row(li, _DQ_CLS, n), dq_p, dq_q,
        dq_w, _row(w_i, 0, n), _row(w_i, 1, n), _row(w_f, 0, n), _row(w_f, 1, n), w_b[:n], _row(w_i, 2, n),
        _row(w_f, 2, n))
    if need >= 0:
        return True
    record_series(now, w_i[2 * n:2 * n + nch], w_f[2 * n:2 * n + nch], ser_t, ser_l, ser_q, ser_n)
    return False


@kernel(**NO_REFCOUNT)
def _memo_slot(n, ks, kl, cap, n_in, mk_i, mk_f):
    # open addressing, linear probing; the slot of the key or the empty one it would take
    slots = mk_f.size // 2
    h = ((n * 1000003 + ks) * 1000003 + kl) * 1000003 + n_in * 8191 + np.int64(cap) // 1000
    s = h & (slots - 1)
    while mk_i[5 * s + 4] and not (mk_i[5 * s] == n and mk_i[5 * s + 1] == ks and mk_i[5 * s + 2] == kl
                                   and mk_i[5 * s + 3] == n_in and mk_f[2 * s] == cap):
        s = (s + 1) & (slots - 1)
    return s


@kernel
def start_loss_memo(n, size_wire, line, cap, n_in, mk_i, mk_f, ms, bf, steps):
    """`dcqcn.start_loss_stepped_s` memoized on a grid of 1% in size and line share (a cluster
    run repeats the same starts): the first value computed for a key is the key's. The table
    is ``mk_i`` (n, size key, line key, n_in, used) and ``mk_f`` (cap, value) per slot, a power
    of two of slots; the caller keeps it at most half full (``ms[memo_n]`` entries)."""
    ks = np.int64(np.rint(np.log(max(size_wire, 1.0)) * 100.0))
    kl = np.int64(np.rint(np.log(line) * 100.0))
    s = _memo_slot(n, ks, kl, cap, n_in, mk_i, mk_f)
    if mk_i[5 * s + 4]:
        return mk_f[2 * s + 1]
    v = start_loss_stepped_s(n, size_wire, line, cap, n_in, bf[2], bf[3], bf[4], bf[5], bf[6], bf[7], bf[8],
                             bf[9], steps, bf[10], bf[11], bf[12], bf[13], bf[14], bf[15])
    mk_i[5 * s] = n
    mk_i[5 * s + 1] = ks
    mk_i[5 * s + 2] = kl
    mk_i[5 * s + 3] = n_in
    mk_i[5 * s + 4] = 1
    mk_f[2 * s] = cap
    mk_f[2 * s + 1] = v
    ms[_MEMO_N] += 1
    return v


@kernel
def memo_rehash(old_i, old_f, mk_i, mk_f):
    """The entries of memo table ``old_*`` into the empty, larger ``mk_*``."""
    for s in range(old_f.size // 2):
        if old_i[5 * s + 4]:
            t = _memo_slot(old_i[5 * s], old_i[5 * s + 1], old_i[5 * s + 2], old_f[2 * s], old_i[5 * s + 3],
                           mk_i, mk_f)
            mk_i[5 * t:5 * t + 5] = old_i[5 * s:5 * s + 5]
            mk_f[2 * t:2 * t + 2] = old_f[2 * s:2 * s + 2]


@kernel
def _loop_bursts(comp, hot, peak, ll, lo, hi, link_buf, prio, rate_new, rem, lat, b_start, b_len,
                 b_flow, load, now, lossless_q, default_mask, lf, li, lb, cf, ci, bf, ms, dq_q, dq_w, mk_i,
                 mk_f, pz_t, pz_l, pz_d, fpos, fmark):
    """`NetworkModel._bursts` of the fresh flows ``comp`` on ``roce``. Returns (0, ...) when
    done; (1, ...) when it is Python's, having changed nothing but the start-loss memo (DCQCN's
    table lacks an entry, the per-flow scratch or the memo is short of room); (2, links,
    durations) when done but the pause records do not fit the buffer (the caller keeps them)."""
    n = lf.size // len(LF)
    is_net, src_is_switch, scratch = _row(lb, _IS_NET, n), _row(lb, _SW, n), _row(lb, _SCRATCH, n)
    cap_wire, cap, dq_cls = _row(lf, _CAP_WIRE, n), _row(lf, _CAP, n), _row(li, _DQ_CLS, n)
    link_src, link_dst = _row(li, _SRC, n), _row(li, _DST, n)
    no_i, no_f = np.empty(0, np.int64), np.empty(0)
    if fpos.size < rem.size or 2 * (ms[_MEMO_N] + hot.size) > mk_f.size // 2:
        return 1, no_i, no_f
    drop, pausing, ptr, idx, ok, nn, size_wire, line, n_in, need = burst_members(
        comp, lo, hi, link_buf, is_net, hot, peak, ll, True, cf[10], cf[9], _row(li, _POS, n), b_len, rem,
        cap_wire, cf[6], link_src, link_dst, src_is_switch, scratch, dq_cls, dq_q, dq_w)
    if need >= 0:
        return 1, no_i, no_f
    start_loss = np.full(hot.size, np.nan)
    if ok.any():
        for j in range(hot.size):
            if ok[j]:
                start_loss[j] = start_loss_memo(nn[j], size_wire[j], line[j], cap_wire[hot[j]], n_in[j], mk_i,
                                                mk_f, ms, bf, ci[2])
    elif not (drop.any() or pausing.any()):
        return 0, no_i, no_f
    n_to, n_rec, rec_u, rec_t = burst_apply(
        comp, lo, hi, link_buf, is_net, prio, rate_new, rem, lat, b_start, b_len, b_flow, link_src, link_dst,
        src_is_switch, cap, cap_wire, load, lossless_q, default_mask, ms[_MULTI] != 0, hot, peak, drop,
        pausing, start_loss, ptr, idx, _row(lf, _DROPS, n), _row(lf, _PAUSE, n), dq_cls, dq_q, dq_w, cf[10],
        cf[9], bf[0], bf[1], cf[7], PFC_DEPTH, fpos, fmark, scratch)
    ms[_TIMEOUTS] += n_to
    ms[_PAUSES] += n_rec
    k = min(n_rec, SERIES_MAX - ms[_PZ_KEPT])
    if k <= 0:
        return 0, no_i, no_f
    b = ms[_PZ_BUF]
    if b + k > pz_t.size:
        return 2, rec_u, rec_t
    for r in range(k):
        pz_t[b + r] = now
        pz_l[b + r] = rec_u[r]
        pz_d[b + r] = rec_t[r]
    ms[_PZ_BUF] = b + k
    ms[_PZ_KEPT] += k
    return 0, no_i, no_f


@kernel
def _hand_over(fi, hot, ll, peak, t, nflows, new_load, rtt_l, need, fi_buf, ho_i, ho_f):
    """`loop_rates`' hand-over to Python in ``fi_buf`` / ``ho_i`` / ``ho_f`` (its docstring):
    the fresh flows, the burst links, and where DCQCN's table lacks an entry the touched links."""
    nh = hot.size
    nt = t.size if need >= 0 else 0
    fi_buf[:fi.size] = fi
    ho_i[0] = fi.size
    ho_i[1] = nh
    ho_i[2] = nt
    ho_i[3] = need
    k = 4
    for j in range(nh):
        ho_i[k + j] = hot[j]
        ho_i[k + nh + j] = 1 if ll[j] else 0
        ho_f[j] = peak[j]
    k += 2 * nh
    for j in range(nt):
        ho_i[k + j] = t[j]
        ho_i[k + nt + j] = nflows[j]
        ho_f[nh + j] = new_load[j]
        ho_f[nh + nt + j] = rtt_l[j]


@kernel
def loop_rates(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now, load,
               b_start, b_len, b_flow, lossless_q, default_mask, lf, li, lb, cf, ci, bf, ms, dq_p, dq_q, dq_w,
               ser_t, ser_l, ser_q, ser_n, mk_i, mk_f, pz_t, pz_l, pz_d, fpos, fmark, fi_buf, ho_i, ho_f):
    """`NetworkModel.on_rates` (``roce``) without Python as far as it goes: `rates_step`, its
    queue changes recorded, the bursts (`_loop_bursts`). Returns (0, ...) when that is all;
    (2, links, durations) likewise, with pause records the buffer had no room for; (1, ...) when
    the rest is the model's (`NetworkModel.loop_rates_rest`: the bursts, where DCQCN's table
    lacks an entry, the links' update too), handed over as ``fi_buf[:n_fresh]`` (positions in
    ``comp`` of the fresh flows) and, in ``ho_i`` / ``ho_f``: (n_fresh, n_hot, n_touched,
    need), the burst links, their lossless flags (0/1), the touched links and their flow
    counts; the peaks, new loads and mean RTTs."""
    no_i, no_f = np.empty(0, np.int64), np.empty(0)
    fi, t, nflows, new_load, rtt_l, hot, peak, ll, _, ch_l, ch_q, need = rates_step(
        comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now, load, b_len,
        lossless_q, lf, li, lb, cf, ci, dq_p, dq_q, dq_w)
    if need < 0:
        record_series(now, ch_l, ch_q, ser_t, ser_l, ser_q, ser_n)
        if not hot.size:
            return 0, no_i, no_f
        status, rec_u, rec_t = _loop_bursts(
            comp[fi], hot, peak, ll, lo, hi, link_buf, prio, rate_new, rem, lat, b_start, b_len, b_flow,
            load, now, lossless_q, default_mask, lf, li, lb, cf, ci, bf, ms, dq_q, dq_w, mk_i, mk_f, pz_t,
            pz_l, pz_d, fpos, fmark)
        if status != 1:
            return status, rec_u, rec_t
    _hand_over(fi, hot, ll, peak, t, nflows, new_load, rtt_l, need, fi_buf, ho_i, ho_f)
    return 1, no_i, no_f


@kernel(**NO_REFCOUNT)
def rates_fast(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now,
               load, b_len, lossless_q, lf, li, lb, cf, ci, dq_p, dq_q, dq_w, ser_t, ser_l, ser_q, ser_n, wi,
               wf, wb, res):
    """`loop_rates` as far as it goes without allocation or reference counts
    (`rates_core.rates_core` on the rows of the model's state, the work arrays ``wi`` / ``wf``
    / ``wb``, its counts in ``res``). Returns 1 when that was all (no port fills, DCQCN's table
    had every entry: the queue changes are recorded), 2 when the rest is `loop_rates_tail`'s,
    0 when the update is larger than the work arrays and nothing was done (`loop_rates`)."""
    n = lf.size // _NLF
    rates_core(
        comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now,
        _row(lf, _RTT_PART, n), _row(lf, _Q, n), _row(lf, _Q_MAX, n), _row(lf, _CAP_WIRE, n),
        _row(li, _SRC, n), _row(li, _DST, n), _row(lb, _IS_NET, n), load, b_len, _row(lf, _ARRIVE, n),
        lossless_q, _row(lb, _SCRATCH, n), _row(lf, _S_DLOAD, n), _row(lf, _S_RTT, n), _row(li, _S_CNT, n),
        _row(li, _POS, n), ci[0] != 0, ci[1], cf[0], cf[1], cf[2], cf[3], cf[4], ci[2], cf[5], cf[6], cf[7],
        cf[8], cf[9], cf[10], _row(lf, _Q_T, n), _row(lf, _Q_INT, n), _row(lf, _MARK, n), _row(lf, _LOAD, n),
        _row(lf, _MARKED, n), _row(lb, _SW, n), _row(lf, _CAP, n), cf[11], cf[12], cf[13], cf[14],
        _row(li, _DQ_CLS, n), dq_p, dq_q, dq_w, wi, wf, wb, res)
    if res[0] < 0:
        return 0
    if res[4] < 0:
        o_i, o_f = 2 * FB + 5 * IB + n, 5 * FB + IB + 4 * n
        record_series(now, wi[o_i:o_i + res[3]], wf[o_f:o_f + res[3]], ser_t, ser_l, ser_q, ser_n)
        if res[2] == 0:
            return 1
    return 2


@kernel
def loop_rates_tail(comp, lo, hi, link_buf, prio, rate_new, rem, lat, now, load, b_start, b_len, b_flow,
                    lossless_q, default_mask, lf, li, lb, cf, ci, bf, ms, dq_q, dq_w, mk_i, mk_f, pz_t, pz_l,
                    pz_d, fpos, fmark, fi_buf, ho_i, ho_f, wi, wf, wb, res):
    """The rest of `loop_rates` after `rates_fast` returned 2, on its results in the work
    arrays: the bursts, or the hand-over to Python; returns what `loop_rates` returns."""
    n = lf.size // _NLF
    nfi, m, nh, need = res[0], res[1], res[2], res[4]
    fi = wi[0:nfi]
    t = wi[2 * FB:2 * FB + m]
    hot = wi[2 * FB + 4 * IB:2 * FB + 4 * IB + nh]
    nflows = wi[2 * FB + 5 * IB:2 * FB + 5 * IB + m]
    o = 5 * FB + IB
    rtt_l = wf[o + n:o + n + m]
    new_load = wf[o + 2 * n:o + 2 * n + m]
    peak = wf[o + 3 * n:o + 3 * n + nh]
    ll = wb[2 * FB + n:2 * FB + n + nh]
    no_i, no_f = np.empty(0, np.int64), np.empty(0)
    if need < 0:
        status, rec_u, rec_t = _loop_bursts(
            comp[fi], hot, peak, ll, lo, hi, link_buf, prio, rate_new, rem, lat, b_start, b_len, b_flow,
            load, now, lossless_q, default_mask, lf, li, lb, cf, ci, bf, ms, dq_q, dq_w, mk_i, mk_f, pz_t,
            pz_l, pz_d, fpos, fmark)
        if status != 1:
            return status, rec_u, rec_t
    _hand_over(fi, hot, ll, peak, t, nflows, new_load, rtt_l, need, fi_buf, ho_i, ho_f)
    return 1, no_i, no_f


@kernel(**NO_REFCOUNT)
def loop_room(num_links, ser_t, ser_n, ms, pz_t):
    """Whether the record buffers have room for a step: each of its two passes records a link
    at most once; the pause buffer at most half full (a burst that overflows it hands its
    records over)."""
    return ser_n[0] + 2 * num_links <= ser_t.size and 2 * ms[_PZ_BUF] <= pz_t.size
