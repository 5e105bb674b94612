"""Compiled passes of the congestion model over a burst: drops, DCQCN's start, PFC's pause tree.

`flowherd.engine.network.model.NetworkModel._bursts` hands the first-window bursts of the flows a
rate update starts (the ports they fill, `kernels.burst_peaks`) to two calls here instead of a
numpy pass per port and per paused link (a profile of `benchmarks/cluster.py --scale a` under
``roce`` had the per-port Python loops at half of the model's time):

* `burst_members`: per filled port the fresh flows that cross it, and for the ports where
  DCQCN's start transient applies, what `dcqcn.start_loss_s` is asked (the caller memoizes it);
* `burst_apply`: the drops of lossy ports, the start losses, and each pausing port's pause tree
  (what the model's docstring describes; the per-link rules are in `burst_apply`'s).

The arithmetic is the numpy reference's operation for operation (sums and means in numpy's
pairwise order, `pairwise_sum`), so the results are the same bit for bit
(tests/engine/network/test_network_compiled.py runs both).
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import kernel
from flowherd.engine.network.kernels import upstream_links

__all__ = ["burst_apply", "burst_members", "pairwise_sum"]

_PW_BLOCK = 128  # numpy's PW_BLOCKSIZE (numpy/_core/src/umath/loops_utils.h.src)


@kernel
def _pw_block(a, idx, lo, n):
    # numpy's pairwise_sum of a[idx[lo:lo + n]] for n <= 128: eight accumulators
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[idx[i]]
        return res
    r = np.empty(8)
    for j in range(8):
        r[j] = a[idx[lo + j]]
    i = 8
    while i < n - (n % 8):
        for j in range(8):
            r[j] += a[idx[lo + i + j]]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[idx[lo + i]]
        i += 1
    return res


@kernel
def _pw(a, idx, lo, n):
    # numpy's pairwise_sum: above 128 terms the sum of the halves (the first a multiple of 8),
    # its recursion walked with an explicit stack (stage 0: go left, 1: go right, 2: add)
    if n <= _PW_BLOCK:
        return _pw_block(a, idx, lo, n)
    s_lo = np.empty(64, np.int64)
    s_n = np.empty(64, np.int64)
    s_stage = np.zeros(64, np.int64)
    s_left = np.empty(64)
    sp = 0
    s_lo[0] = lo
    s_n[0] = n
    ret = 0.0
    while sp >= 0:
        m = s_n[sp]
        if m <= _PW_BLOCK:
            ret = _pw_block(a, idx, s_lo[sp], m)
            sp -= 1
            continue
        n2 = m // 2
        n2 -= n2 % 8
        st = s_stage[sp]
        if st == 0:
            s_stage[sp] = 1
            s_lo[sp + 1] = s_lo[sp]
            s_n[sp + 1] = n2
            s_stage[sp + 1] = 0
            sp += 1
        elif st == 1:
            s_left[sp] = ret
            s_stage[sp] = 2
            s_lo[sp + 1] = s_lo[sp] + n2
            s_n[sp + 1] = m - n2
            s_stage[sp + 1] = 0
            sp += 1
        else:
            ret = s_left[sp] + ret
            sp -= 1
    return ret


@kernel
def pairwise_sum(a, idx):
    """``a[idx].sum()`` as numpy computes it (pairwise, so the same bits)."""
    return _pw(a, idx, 0, idx.size)


@kernel
def burst_members(comp, lo, hi, link_buf, is_net, hot, peak, ll, roce, buffer_bytes, xoff_bytes, pos, b_len,
                  rem, cap_wire, wire_eff, link_src, link_dst, src_is_switch, scratch, dq_cls, dq_q, dq_w):
    """Which filled ports ``hot`` (peak queues ``peak``; ``ll``: a lossless flow among the fresh
    ones ``comp``) drop, pause and pay DCQCN's start, and the fresh flows on each.

    A lossy port drops above ``buffer_bytes``, a lossless one pauses above ``xoff_bytes``; on
    ``roce`` a lossless switch port with a queue whose flows (at least two) are all fresh ones
    pays DCQCN's start transient. Returns (``drop``, ``pausing``, ``ptr``, ``idx``, ``ok``,
    ``n``, ``size_wire``, ``line``, ``n_in``, ``need``): the positions in ``comp`` of the flows
    crossing ``hot[j]`` are ``idx[ptr[j]:ptr[j + 1]]``, ascending; for a start port ``ok[j]``
    and what `dcqcn.start_loss_s` takes: the flows' number, mean size in wire bytes, mean line
    share (each flow's NIC line rate over the fresh flows leaving by that NIC link) and the most
    ingress links they enter one switch port of their paths by (`_tree_ingress`); ``need`` is a
    pausing port whose DCQCN fixed point (``dq_q``, rows of ``dq_w``) `burst_apply` may ask and
    is not solved yet, else -1. ``pos`` (-1) and ``scratch`` (False) per link are put back."""
    m = hot.size
    drop = np.zeros(m, np.bool_)
    pausing = np.zeros(m, np.bool_)
    start = np.zeros(m, np.bool_)
    need = -1
    for j in range(m):
        lnk = hot[j]
        drop[j] = not ll[j] and peak[j] > buffer_bytes
        pausing[j] = ll[j] and peak[j] > xoff_bytes
        nb = b_len[lnk]
        # the start transient needs every flow of the port among the fresh ones: at most comp.size
        start[j] = roce and ll[j] and peak[j] > 0 and src_is_switch[lnk] and nb >= 2 and nb <= comp.size
        if pausing[j] and need < 0 and nb >= 2 and src_is_switch[lnk] and (
                nb >= dq_w or np.isnan(dq_q[dq_cls[lnk] * dq_w + nb])):
            need = j
    for j in range(m):
        pos[hot[j]] = j
    cnt = np.zeros(m + 1, np.int64)
    last = np.full(m, -1, np.int64)
    first = np.full(comp.size, -1, np.int64)  # each flow's first network link: its NIC's
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if first[i] < 0 and is_net[lnk]:
                first[i] = lnk
            j = pos[lnk]
            if j >= 0 and last[j] != i:
                last[j] = i
                cnt[j + 1] += 1
    ptr = np.cumsum(cnt)
    idx = np.empty(ptr[m], np.int64)
    fill = ptr[:m].copy()
    last[:] = -1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            j = pos[link_buf[k]]
            if j >= 0 and last[j] != i:
                last[j] = i
                idx[fill[j]] = i
                fill[j] += 1
    for j in range(m):
        pos[hot[j]] = -1
    ok = np.zeros(m, np.bool_)
    n_out = np.zeros(m, np.int64)
    size_wire = np.zeros(m)
    line = np.zeros(m)
    n_in = np.ones(m, np.int64)
    if not start.any():
        return drop, pausing, ptr, idx, ok, n_out, size_wire, line, n_in, need
    # the fresh flows per first network link, counted down in ``pos`` (-1 there again: -1 - pos
    # is the count; put back below), not in an array of every link zeroed per burst (at 16,384
    # GPUs that memset was 9% of a run, perf, issue 17)
    for i in range(comp.size):
        if first[i] >= 0:
            pos[first[i]] -= 1
    fl = np.empty(comp.size, np.int64)
    for j in range(m):
        lnk = hot[j]
        n = ptr[j + 1] - ptr[j]
        if not start[j] or n < 2 or n < b_len[lnk]:
            continue
        ok[j] = True
        n_out[j] = n
        sel = idx[ptr[j]:ptr[j + 1]]
        for q in range(n):
            fl[q] = comp[sel[q]]
        size_wire[j] = _pw(rem, fl, 0, n) / n / wire_eff
        share = np.empty(n)
        n_ok = 0
        for q in range(n):
            fq = first[sel[q]]
            if fq >= 0:
                share[n_ok] = cap_wire[fq] / (-1 - pos[fq])
                n_ok += 1
        if n_ok:
            line[j] = _pw(share, np.arange(n_ok), 0, n_ok) / n_ok
        else:
            line[j] = cap_wire[lnk]
        n_in[j] = _tree_ingress(fl[:n], lo, hi, link_buf, is_net, link_src, link_dst, src_is_switch,
                                cap_wire.size, scratch)
    for i in range(comp.size):
        if first[i] >= 0:
            pos[first[i]] = -1
    return drop, pausing, ptr, idx, ok, n_out, size_wire, line, n_in, need


@kernel
def _tree_ingress(fl, lo, hi, link_buf, is_net, link_src, link_dst, src_is_switch, num_links, scratch):
    # `NetworkModel` docstring: the most ingress links the flows ``fl`` enter one switch port of
    # their paths by (consecutive links of a flow: upstream, port)
    total = 0
    for q in range(fl.size):
        total += hi[fl[q]] - lo[fl[q]]
    keys = np.empty(total, np.int64)
    nk = 0
    for q in range(fl.size):
        f = fl[q]
        for k in range(lo[f], hi[f] - 1):
            up = link_buf[k]
            dn = link_buf[k + 1]
            if is_net[dn] and src_is_switch[dn] and link_dst[up] == link_src[dn]:
                keys[nk] = dn * num_links + up
                nk += 1
    if nk == 0:
        return 1
    keys = np.sort(keys[:nk])
    best = 0
    run = 0
    for r in range(nk):
        if r > 0 and keys[r] == keys[r - 1]:
            continue  # the same (port, ingress) pair again
        if r > 0 and keys[r] // num_links == keys[r - 1] // num_links:
            run += 1
        else:
            run = 1
        best = max(best, run)
    return best


@kernel
def burst_apply(comp, lo, hi, link_buf, is_net, prio, rate_new, rem, lat, b_start, b_len, b_flow,
                link_src, link_dst, src_is_switch, cap, cap_wire, load, lossless_q, default_mask,
                multi_class, hot, peak, drop, pausing, start_loss, ptr, idx, drops, pause, dq_cls, dq_q,
                dq_width, buffer_bytes, xoff_bytes, xon_bytes, min_rto_s, window_wire_bytes, depth_max,
                fpos, fmark, scratch):
    """The costs of the bursts of the fresh flows ``comp`` on the ports ``hot`` (peak queues
    ``peak``; members ``ptr``/``idx`` from `burst_members`), in the reference's order:

    * a lossy port with ``drop[j]`` drops ``peak - buffer`` (into ``drops``); its fresh lossy
      flows' last ``ceil(excess / window)`` first windows are lost and wait ``min_rto_s`` once;
    * each flow takes the largest ``start_loss[j]`` of the start ports it crosses (NaN: none);
    * a lossless port with ``pausing[j]`` pauses its upstream links for
      ``(peak - Xon) / capacity`` (`NetworkModel._pause_upstream`: per paused link its victims
      in the paused classes lose the pause, those of a PFC-bound port what moving at a
      congested flow's share costs them, and a backlog above Xoff pauses the links before it,
      at most ``depth_max`` hops).

    Extra time goes onto ``lat`` (a fresh flow's after all of it, as the reference adds it).
    ``dq_q`` is DCQCN's fixed-point queue per capacity class and flow count (``dq_width`` a
    row), covering the flows of every pausing port. ``fpos`` (-1), ``fmark`` (0) per flow and
    ``scratch`` (False) per link are put back on exit. Returns (timeouts taken, pauses, paused
    links and durations in the order the reference records them)."""
    nc = comp.size
    extra = np.zeros(nc)
    n_timeouts = 0
    # drops (lossy ports)
    timed_out = np.zeros(nc, np.bool_)
    nq = lossless_q.size
    for j in range(hot.size):
        if not drop[j]:
            continue
        lnk = hot[j]
        over = peak[j] - buffer_bytes
        drops[lnk] += over
        on = np.empty(ptr[j + 1] - ptr[j], np.int64)
        n_on = 0
        for r in range(ptr[j], ptr[j + 1]):
            i = idx[r]
            if not lossless_q[min(max(prio[comp[i]], 0), nq - 1)]:
                on[n_on] = i
                n_on += 1
        k = min(n_on, int(np.ceil(over / window_wire_bytes)))
        for r in range(n_on - k, n_on):  # in id order: the last windows to arrive are lost
            i = on[r]
            if not timed_out[i]:
                extra[i] += min_rto_s
                timed_out[i] = True
                n_timeouts += 1
    # DCQCN's start transient: a flow on several start ports takes the largest loss
    per_flow = np.zeros(nc)
    any_start = False
    for j in range(hot.size):
        if start_loss[j] == start_loss[j]:  # not NaN
            any_start = True
            for r in range(ptr[j], ptr[j + 1]):
                i = idx[r]
                per_flow[i] = max(per_flow[i], start_loss[j])
    if any_start:
        for i in range(nc):
            extra[i] += per_flow[i]
    # PFC's pause trees
    for i in range(nc):
        fpos[comp[i]] = i
    rec_u = np.empty(16, np.int64)
    rec_t = np.empty(16)
    n_rec = 0
    cls_mask = default_mask.copy()
    # frames of the depth-first walk (`NetworkModel._pause_upstream`'s recursion)
    f_lnk = np.zeros(depth_max, np.int64)
    f_tp = np.zeros(depth_max)
    f_hk = np.zeros(depth_max, np.int64)  # hold: 0 the port to ask, 1 held (f_rc, f_tc), 2 none
    f_hp = np.zeros(depth_max, np.int64)
    f_rc = np.zeros(depth_max)
    f_tc = np.zeros(depth_max)
    f_ups = [np.empty(0, np.int64) for _ in range(depth_max)]
    f_at = np.zeros(depth_max, np.int64)
    for j in range(hot.size):
        if not pausing[j]:
            continue
        lnk = hot[j]
        t_root = (peak[j] - xon_bytes) / cap_wire[lnk]
        if multi_class:  # the lossless classes of the burst's flows on the port
            cls_mask[:] = False
            for r in range(ptr[j], ptr[j + 1]):
                p = prio[comp[idx[r]]]
                if lossless_q[p]:
                    cls_mask[p] = True
        else:
            cls_mask[:] = default_mask
        if depth_max <= 0 or not src_is_switch[lnk]:
            continue
        d = 0
        _push(0, lnk, t_root, 0, lnk, 0.0, 0.0, f_lnk, f_tp, f_hk, f_hp, f_rc, f_tc, f_ups, f_at, fmark,
              b_start, b_len, b_flow, lo, hi, link_buf, link_dst, link_src, scratch)
        while d >= 0:
            if f_at[d] == f_ups[d].size:  # the frame is done
                b0 = b_start[f_lnk[d]]
                for r in range(b0, b0 + b_len[f_lnk[d]]):
                    fmark[b_flow[r]] &= ~(1 << d)
                d -= 1
                continue
            u = f_ups[d][f_at[d]]
            f_at[d] += 1
            tp = f_tp[d]
            bit = 1 << d
            pause[u] += tp
            if n_rec == rec_u.size:
                rec_u = np.concatenate((rec_u, np.empty(rec_u.size, np.int64)))
                rec_t = np.concatenate((rec_t, np.empty(rec_t.size)))
            rec_u[n_rec] = u
            rec_t[n_rec] = tp
            n_rec += 1
            u0 = b_start[u]
            un = b_len[u]
            # a paused class moves nothing on the link: each of its victims loses the pause
            n_cls = 0
            for r in range(u0, u0 + un):
                v = b_flow[r]
                if not cls_mask[prio[v]]:
                    continue
                n_cls += 1
                if fmark[v] & bit:
                    continue  # one of the congested port's own flows
                if fpos[v] >= 0:
                    extra[fpos[v]] += tp
                else:
                    lat[v] += tp
            if f_hk[d] == 0 and n_cls:  # `NetworkModel._pfc_hold` of the root port, asked once
                hp = f_hp[d]
                f_hk[d] = 2
                n = b_len[hp]
                if n >= 2 and src_is_switch[hp]:
                    b0 = b_start[hp]
                    on_port = b_flow[b0:b0 + n]
                    n_in = upstream_links(on_port, lo, hi, link_buf, link_dst, link_src[hp], scratch).size
                    if dq_q[dq_cls[hp] * dq_width + n] > xoff_bytes * max(n_in, 1):
                        f_hk[d] = 1
                        f_rc[d] = cap[hp] / n
                        f_tc[d] = pairwise_sum(rem, on_port) / cap[hp]
            if f_hk[d] == 1 and n_cls:  # held: the victims move at a congested flow's share
                r_c = f_rc[d]
                t_c = f_tc[d]
                for r in range(u0, u0 + un):
                    v = b_flow[r]
                    if not cls_mask[prio[v]] or fmark[v] & bit:
                        continue
                    rv = max(rate_new[v], 1e-300)
                    if not rv > r_c:
                        continue
                    rm = rem[v]
                    loss = rm / r_c - rm / rv if rm <= r_c * t_c else t_c * (1.0 - r_c / rv)
                    more = max(loss - tp, 0.0)
                    if fpos[v] >= 0:
                        extra[fpos[v]] += more
                    else:
                        lat[v] += more
            share = 1.0 if n_cls == un else n_cls / un
            backlog = load[u] * tp * share  # what piles up before the paused link
            if backlog > xoff_bytes and d + 1 < depth_max and src_is_switch[u]:
                _push(d + 1, u, (backlog - xon_bytes) / cap_wire[u], f_hk[d], f_hp[d], f_rc[d], f_tc[d],
                      f_lnk, f_tp, f_hk, f_hp, f_rc, f_tc, f_ups, f_at, fmark, b_start, b_len, b_flow, lo,
                      hi, link_buf, link_dst, link_src, scratch)
                d += 1
    for i in range(nc):
        fpos[comp[i]] = -1
        lat[comp[i]] += extra[i]
    return n_timeouts, n_rec, rec_u[:n_rec].copy(), rec_t[:n_rec].copy()


@kernel
def _push(d, lnk, tp, hk, hp, rc, tc, f_lnk, f_tp, f_hk, f_hp, f_rc, f_tc, f_ups, f_at, fmark, b_start,
          b_len, b_flow, lo, hi, link_buf, link_dst, link_src, scratch):
    # a frame of the pause walk: port ``lnk`` pauses its upstream links for ``tp``; its own
    # flows are marked with bit d (they are no victims of its pause)
    f_lnk[d] = lnk
    f_tp[d] = tp
    f_hk[d] = hk
    f_hp[d] = hp
    f_rc[d] = rc
    f_tc[d] = tc
    b0 = b_start[lnk]
    on_port = b_flow[b0:b0 + b_len[lnk]]
    f_ups[d] = upstream_links(on_port, lo, hi, link_buf, link_dst, link_src[lnk], scratch)
    f_at[d] = 0
    for r in range(on_port.size):
        fmark[on_port[r]] |= 1 << d
