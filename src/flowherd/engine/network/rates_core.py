"""`kernels.rates_pass` for the engine's event loop without allocation or reference counts.

numba counts references to every array a kernel binds (an atomic increment and decrement per
argument per call, per slice, per array it allocates): with the end-of-flow pass out of it
(`kernels.done_core`), the rate update's chain (`packed.loop_rates` -> `rates_step` ->
`rates_pass` -> `flow_pass`, `burst_peaks`, their ~150 arrays) was a quarter of the counts left
in a roce run of `benchmarks/cluster.py --scale a` (gdb tally of `NRT_incref`/`NRT_decref`
callers, issue 17, eighth session). `rates_core` is the same arithmetic in the same order into
work arrays the loop makes once per call (`RatesWork`), compiled without numba's runtime
(`aot.NO_REFCOUNT`); the sorts are a stable merge sort (`_argsort_stable`: the permutation of
numpy's stable argsort, the only stable one) and one of distinct integers (`_sort_ints`: a sort
of distinct values has one result). `kernels.rates_pass` stays the reference the Python hook
runs; tests/engine/network/test_network_loop.py compares the two paths bit for bit.
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel
from flowherd.engine.network.kernels import _extras_into, _fp_links, _fp_paths, _fp_tail, _link_set

__all__ = ["FB", "IB", "rates_core", "work_arrays"]

FB = 4096  # flows of one rate update the work arrays hold (more: the allocating reference)
IB = 32768  # their link incidences
_RUN = 16  # insertion-sorted runs of the merge sorts

# int64 rows: fi, first (FB each); touched, keys, order, tmp, h (IB each); nflows, ch_l (L each)
# float rows: rtt, rtt_q, line, line2, w (FB); vals (IB); dload, rtt_l, pot, new_load, sum_w,
# sum_line, dur, peak, ch_q (L); flag rows: net, fresh (FB); sat, ll (L)


def work_arrays(num_links: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The work arrays of `rates_core` for a fabric of ``num_links`` links (int, float, flags)."""
    return (np.empty(2 * FB + 5 * IB + 2 * num_links, np.int64), np.empty(5 * FB + IB + 9 * num_links),
            np.empty(2 * FB + 2 * num_links, np.bool_))


@kernel(**NO_REFCOUNT)
def _argsort_stable(keys, n, order, tmp):
    # the stable ascending order of keys[:n] into order[:n]: insertion-sorted runs, then
    # bottom-up merges taking the left element on ties
    for i in range(n):
        order[i] = i
    for s0 in range(0, n, _RUN):
        e0 = min(s0 + _RUN, n)
        for i in range(s0 + 1, e0):
            v = order[i]
            kv = keys[v]
            j = i - 1
            while j >= s0 and keys[order[j]] > kv:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = v
    width = _RUN
    in_tmp = False
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if in_tmp:
                    a, b = tmp[i], tmp[j]
                else:
                    a, b = order[i], order[j]
                if keys[b] < keys[a]:
                    v = b
                    j += 1
                else:
                    v = a
                    i += 1
                if in_tmp:
                    order[k] = v
                else:
                    tmp[k] = v
                k += 1
            while i < mid:
                v = tmp[i] if in_tmp else order[i]
                if in_tmp:
                    order[k] = v
                else:
                    tmp[k] = v
                i += 1
                k += 1
            while j < hi:
                v = tmp[j] if in_tmp else order[j]
                if in_tmp:
                    order[k] = v
                else:
                    tmp[k] = v
                j += 1
                k += 1
        in_tmp = not in_tmp
        width *= 2
    if in_tmp:
        for i in range(n):
            order[i] = tmp[i]


@kernel(**NO_REFCOUNT)
def _sort_ints(a, n, order, tmp, out):
    # a[:n] (distinct) sorted into out[:n]
    _argsort_stable(a, n, order, tmp)
    for i in range(n):
        out[i] = a[order[i]]


@kernel(**NO_REFCOUNT)
def _burst_core(comp, fi, nfi, lo, hi, link_buf, frac_buf, rtt, line, rem, prio, is_net, load, cap_wire, q,
                lossless_q, wire_eff, tcp, iw_wire, cnp_interval, pos, arrive, first, line2, w, h_raw, order,
                tmp, h, sum_w, sum_line, dur, ll, peak):
    # `kernels.burst_peaks` of the flows comp[fi[:nfi]] (its rtt and line: rtt[fi], line[fi]):
    # the burst links into h, returns how many (0: no port can fill)
    for i in range(nfi):
        first[i] = -1
        f = comp[fi[i]]
        for k in range(lo[f], hi[f]):
            if is_net[link_buf[k]]:
                first[i] = link_buf[k]
                pos[first[i]] -= 1
                break
    for i in range(nfi):
        line2[i] = line[fi[i]]
    for i in range(nfi):
        if first[i] >= 0:
            line2[i] /= -1 - pos[first[i]]
    for i in range(nfi):
        if first[i] >= 0:
            pos[first[i]] = -1
    for i in range(nfi):
        size_wire = rem[comp[fi[i]]] / wire_eff
        w[i] = min(size_wire, iw_wire) if tcp else min(size_wire, line2[i] * (rtt[fi[i]] + cnp_interval))
    any_net = False
    over = False
    for i in range(nfi):
        f = comp[fi[i]]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if is_net[lnk]:
                any_net = True
                if load[lnk] + line2[i] > cap_wire[lnk]:
                    over = True
    if not any_net or (nfi == 1 and not over):
        return 0
    nh = 0
    for i in range(nfi):
        f = comp[fi[i]]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if is_net[lnk] and pos[lnk] < 0:
                pos[lnk] = 0
                h_raw[nh] = lnk
                nh += 1
    _sort_ints(h_raw, nh, order, tmp, h)
    for j in range(nh):
        pos[h[j]] = j
        sum_w[j] = 0.0
        sum_line[j] = 0.0
        dur[j] = 0.0
        ll[j] = False
        peak[j] = 0.0
    for i in range(nfi):
        f = comp[fi[i]]
        lossless = lossless_q[prio[f]]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not is_net[lnk]:
                continue
            j = pos[lnk]
            sum_w[j] += w[i] * frac_buf[k]
            sum_line[j] += line2[i]
            dur[j] = max(dur[j], w[i] / line2[i])
            if lossless:
                ll[j] = True
    for j in range(nh):
        lnk = h[j]
        pos[lnk] = -1
        old = load[lnk]
        a = sum_line[j] if arrive[lnk] <= 0.0 else min(sum_line[j], arrive[lnk])
        if a + old > cap_wire[lnk]:
            peak[j] = q[lnk] + sum_w[j] + (old - cap_wire[lnk]) * max(dur[j], sum_w[j] / a)
    return nh


@kernel(**NO_REFCOUNT)
def rates_core(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now,
               rtt_part, q, q_max, cap_wire, link_src, link_dst, is_net, load, b_len, arrive, lossless_q,
               mark, s_dload, s_rtt, s_cnt, pos, tcp, setup_rtts, iw, growth, mss, ramp_gain, dcqcn_timer,
               dcqcn_steps, dcqcn_rai, wire_eff, iw_wire, cnp_interval, pfc_xoff, port_buffer,
               q_t, q_int, mark_frac, load_rec, marked, src_is_switch, cap, sat_rtol, k_bytes, pkt_bytes,
               q_cap_bytes, dq_cls, dq_p, dq_q, dq_w, wi, wf, wb, res):
    """`kernels.rates_pass` (the same arguments, then the work arrays of `work_arrays`) into the
    work arrays: ``res`` gets (fresh flows, touched links, burst links, queue changes, need);
    -1 in ``res[0]`` when the update is larger than the arrays (nothing touched: the caller
    runs the reference). The rows, by offset: ``wi`` fi at 0, touched at 2 FB, h at 2 FB + 4 IB,
    nflows and ch_l after the incidence rows; ``wf`` dload, rtt_l, new_load, peak, ch_q after
    the flow and incidence rows (`loop_rates`' reading of them is `packed._rates_fast`)."""
    nc = comp.size
    total = 0
    for i in range(nc):
        total += hi[comp[i]] - lo[comp[i]]
    nl = cap_wire.size
    if nc > FB or total > IB:
        res[0] = -1
        return
    fi = wi[0:FB]
    first = wi[FB:2 * FB]
    touched = wi[2 * FB:2 * FB + IB]
    keys = wi[2 * FB + IB:2 * FB + 2 * IB]
    order = wi[2 * FB + 2 * IB:2 * FB + 3 * IB]
    tmp = wi[2 * FB + 3 * IB:2 * FB + 4 * IB]
    h = wi[2 * FB + 4 * IB:2 * FB + 5 * IB]
    o = 2 * FB + 5 * IB
    nflows = wi[o:o + nl]
    ch_l = wi[o + nl:o + 2 * nl]
    rtt = wf[0:FB]
    rtt_q = wf[FB:2 * FB]
    line = wf[2 * FB:3 * FB]
    line2 = wf[3 * FB:4 * FB]
    w = wf[4 * FB:5 * FB]
    vals = wf[5 * FB:5 * FB + IB]
    o = 5 * FB + IB
    dload = wf[o:o + nl]
    rtt_l = wf[o + nl:o + 2 * nl]
    new_load = wf[o + 2 * nl:o + 3 * nl]
    peak = wf[o + 3 * nl:o + 4 * nl]
    ch_q = wf[o + 4 * nl:o + 5 * nl]
    pot = wf[o + 5 * nl:o + 6 * nl]
    sum_w = wf[o + 6 * nl:o + 7 * nl]
    sum_line = wf[o + 7 * nl:o + 8 * nl]
    dur = wf[o + 8 * nl:o + 9 * nl]
    net = wb[0:FB]
    fresh = wb[FB:2 * FB]
    sat = wb[2 * FB:2 * FB + nl]
    ll = wb[2 * FB + nl:2 * FB + 2 * nl]
    # `flow_pass`
    for i in range(nc):
        rtt[i] = 0.0
        rtt_q[i] = 0.0
        line[i] = np.inf
        net[i] = False
    _fp_paths(comp, lo, hi, link_buf, frac_buf, rtt_part, q, cap_wire, is_net, rtt, rtt_q, line, net)
    m, npair = _fp_links(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, link_src, link_dst, is_net,
                         mark, s_dload, s_rtt, s_cnt, rtt, line, net, nl, touched, keys, vals)
    for j in range(m):
        pot[j] = 0.0
    _argsort_stable(keys, npair, order, tmp)
    t = touched[:m]
    _fp_tail(t, mark, s_dload, s_rtt, s_cnt, cap_wire, nl, keys, vals, order, npair, dload, rtt_l, pot)
    # the rest of `rates_pass`
    for j in range(m):
        lnk = t[j]
        arrive[lnk] = pot[j]
        nflows[j] = b_len[lnk]
        new_load[j] = load[lnk] + dload[j]
    nfi = 0
    if m:
        for i in range(nc):
            fresh[i] = False
        _extras_into(comp, net, rate_old, rate_new, rem, size, start, now, rtt, rtt_q, lat, tcp, setup_rtts,
                     iw, growth, mss, ramp_gain, dcqcn_timer, dcqcn_steps, dcqcn_rai, fresh)
        for i in range(nc):
            if fresh[i]:
                fi[nfi] = i
                nfi += 1
    nh = 0
    if nfi:
        nh2 = _burst_core(comp, fi, nfi, lo, hi, link_buf, frac_buf, rtt, line, rem, prio, is_net, load,
                          cap_wire, q, lossless_q, wire_eff, tcp, iw_wire, cnp_interval, pos, arrive, first,
                          line2, w, keys, order, tmp, h, sum_w, sum_line, dur, ll, peak)
        any_peak = False
        for j in range(nh2):
            if peak[j] > 0:
                any_peak = True
                cap_j = pfc_xoff if ll[j] else port_buffer
                v = min(peak[j], cap_j)
                if v > q_max[h[j]]:
                    q_max[h[j]] = v
        if any_peak:
            nh = nh2
    for j in range(m):
        sat[j] = False
    nch, need = _link_set(
        t, nflows[:m], new_load[:m], rtt_l[:m], now, q, q_t, q_int, q_max, mark_frac, load_rec, marked,
        is_net, src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes, pkt_bytes, q_cap_bytes,
        dq_cls, dq_p, dq_q, dq_w, sat[:m], ch_l, ch_q)
    res[0] = nfi
    res[1] = m
    res[2] = nh
    res[3] = nch
    res[4] = need
