"""Compiled passes of the congestion model over a rate update's flows and their links.

One pass over the incidences of the re-allocated flows instead of a dozen numpy calls each
sized by the fabric: the model's cost per engine event stays proportional to the flows the
event touches (`flowherd.engine.network.model.NetworkModel.on_rates`).
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import NO_REFCOUNT, kernel

__all__ = ["burst_peaks", "done_pass", "flow_extras", "flow_pass", "link_update", "pause_victims",
           "rates_pass", "touched_links", "touched_net_links", "upstream_links"]


@kernel(**NO_REFCOUNT)
def _distinct_into(flows, lo, hi, link_buf, mark, is_net, net_only, res):
    # the distinct links into ``res`` (room for every incidence), how many
    m = 0
    for i in range(flows.size):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if (is_net[lnk] or not net_only) and not mark[lnk]:
                mark[lnk] = True
                res[m] = lnk
                m += 1
    for j in range(m):
        mark[res[j]] = False
    return m


@kernel
def _distinct_links(flows, lo, hi, link_buf, mark, is_net, net_only):
    # first-seen order; a preallocated buffer, not a list (a typed list costs microseconds a call)
    total = 0
    for i in range(flows.size):
        total += hi[flows[i]] - lo[flows[i]]
    res = np.empty(total, np.int64)
    return res[:_distinct_into(flows, lo, hi, link_buf, mark, is_net, net_only, res)]


@kernel
def touched_links(flows, lo, hi, link_buf, mark):
    """The distinct links of ``flows``, in first-seen order (``mark`` zero on entry and exit)."""
    return _distinct_links(flows, lo, hi, link_buf, mark, mark, False)


@kernel
def touched_net_links(flows, lo, hi, link_buf, mark, is_net):
    """The distinct network links of ``flows`` (`touched_links` without the others)."""
    return _distinct_links(flows, lo, hi, link_buf, mark, is_net, True)


@kernel(**NO_REFCOUNT)
def _fp_paths(comp, lo, hi, link_buf, frac_buf, rtt_part, q, cap_wire, is_net, rtt, rtt_q, line, net):
    # `flow_pass` per flow (``rtt``, ``rtt_q``, ``net`` zero and ``line`` inf on entry); returns
    # the flows' incidences
    total = 0
    for i in range(comp.size):
        f = comp[i]
        total += hi[f] - lo[f]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            fr = frac_buf[k]
            rtt[i] += rtt_part[lnk] * fr
            rtt_q[i] += q[lnk] / cap_wire[lnk] * fr
            if cap_wire[lnk] < line[i]:
                line[i] = cap_wire[lnk]
            if is_net[lnk]:
                net[i] = True
        rtt_q[i] += rtt[i]
    return total


@kernel(**NO_REFCOUNT)
def _fp_links(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, link_src, link_dst, is_net, mark, s_dload,
              s_rtt, s_cnt, rtt, line, net, nl, touched, keys, vals):
    # `flow_pass` per network link: the touched links, (link, ingress) pairs; returns how many
    m = 0
    npair = 0
    for i in range(comp.size):
        if not net[i]:
            continue
        f = comp[i]
        d = rate_new[f] - rate_old[f]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not is_net[lnk]:
                continue
            if not mark[lnk]:
                mark[lnk] = True
                touched[m] = lnk
                m += 1
            s_dload[lnk] += d * frac_buf[k]
            s_rtt[lnk] += rtt[i]
            s_cnt[lnk] += 1
            for k2 in range(lo[f], hi[f]):  # the link the flow enters lnk's switch by
                u = link_buf[k2]
                if link_dst[u] == link_src[lnk]:
                    keys[npair] = np.int64(lnk) * nl + u
                    vals[npair] = line[i]
                    npair += 1
                    break
    return m, npair


@kernel(**NO_REFCOUNT)
def _fp_tail(t, mark, s_dload, s_rtt, s_cnt, cap_wire, nl, keys, vals, order, npair, dload, rtt_l, pot):
    # `flow_pass` per touched link: load change, mean RTT, arrival potential (``order`` sorts
    # the ``npair`` keys); the scratch put back to zero
    m = t.size
    for j in range(m):
        lnk = t[j]
        dload[j] = s_dload[lnk]
        rtt_l[j] = s_rtt[lnk] / max(s_cnt[lnk], 1)
        s_cnt[lnk] = j  # reused: position of the link in `touched`
    if npair:
        cur = keys[order[0]]
        acc = 0.0
        for r in range(npair + 1):
            if r == npair or keys[order[r]] != cur:
                lnk = cur // nl
                u = cur % nl
                pot[s_cnt[lnk]] += min(cap_wire[u], acc)
                if r == npair:
                    break
                cur = keys[order[r]]
                acc = 0.0
            acc += vals[order[r]]
    for j in range(m):
        lnk = t[j]
        mark[lnk] = False
        s_dload[lnk] = 0.0
        s_rtt[lnk] = 0.0
        s_cnt[lnk] = 0


@kernel
def flow_pass(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rtt_part, q, cap_wire, link_src,
              link_dst, is_net, mark, s_dload, s_rtt, s_cnt):
    """Per flow of ``comp``: base RTT, RTT with the standing queues, line rate (narrowest link),
    whether it crosses a network link. Per distinct network link of theirs (returned
    ``touched``): load change, mean RTT of its flows and arrival potential
    (`NetworkModel._arrival_potential`). Scratch arrays are zero on entry and on exit."""
    n = comp.size
    rtt = np.zeros(n)
    rtt_q = np.zeros(n)
    line = np.full(n, np.inf)
    net = np.zeros(n, np.bool_)
    total = _fp_paths(comp, lo, hi, link_buf, frac_buf, rtt_part, q, cap_wire, is_net, rtt, rtt_q, line, net)
    touched = np.empty(total, np.int64)
    # (link, ingress link) pairs with the line rate of a flow entering the link's switch by it;
    # summed per pair after a sort (no typed dict: it costs microseconds a call)
    keys = np.empty(total, np.int64)
    vals = np.empty(total)
    nl = cap_wire.size
    m, npair = _fp_links(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, link_src, link_dst, is_net,
                         mark, s_dload, s_rtt, s_cnt, rtt, line, net, nl, touched, keys, vals)
    t = touched[:m].copy()
    dload = np.empty(m)
    rtt_l = np.empty(m)
    pot = np.zeros(m)
    order = np.argsort(keys[:npair], kind="mergesort") if npair else np.empty(0, np.int64)
    _fp_tail(t, mark, s_dload, s_rtt, s_cnt, cap_wire, nl, keys, vals, order, npair, dload, rtt_l, pot)
    return rtt, rtt_q, line, net, t, dload, rtt_l, pot


@kernel(inline="always")
def _saturated(lnk, n, load, is_net, src_is_switch, arrive, cap, cap_wire, sat_rtol):
    # a switch port loaded to its capacity whose flows can arrive faster than it drains
    return (is_net[lnk] and src_is_switch[lnk] and n > 0 and load >= cap[lnk] * (1.0 - sat_rtol)
            and arrive[lnk] > cap_wire[lnk] * (1.0 + sat_rtol))


@kernel(**NO_REFCOUNT)
def _link_set(links, nflows, load, rtt, now, q, q_t, q_int, q_max, mark, load_rec, marked, is_net,
              src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes, pkt_bytes, q_cap_bytes,
              dq_cls, dq_p, dq_q, dq_w, sat, ch_l, ch_q):
    # `link_update` into ``sat`` (zero on entry) and ``ch_l`` / ``ch_q`` (room for ``links``):
    # (queue changes, -1), or (0, i) when the table lacks the entry of ``links[i]``
    m = links.size
    if not tcp:  # every entry of DCQCN's table this update looks up is there (not NaN)
        for i in range(m):
            lnk = links[i]
            n = nflows[i]
            if _saturated(lnk, n, load[i], is_net, src_is_switch, arrive, cap, cap_wire, sat_rtol) and (
                    n >= dq_w or np.isnan(dq_q[dq_cls[lnk] * dq_w + n])):
                return 0, i
    nch = 0
    kp = k_bytes / pkt_bytes
    for i in range(m):
        lnk = links[i]
        dt = now - q_t[lnk]
        q_int[lnk] += q[lnk] * dt
        marked[lnk] += load_rec[lnk] * mark[lnk] * dt
        qn = 0.0
        mk = 0.0
        n = nflows[i]
        if _saturated(lnk, n, load[i], is_net, src_is_switch, arrive, cap, cap_wire, sat_rtol):
            sat[i] = True
            if tcp:
                nf = max(float(n), 1.0)
                bdp = cap_wire[lnk] * rtt[i] / pkt_bytes
                q_max_p = kp + nf
                amp = 0.5 * np.sqrt(2.0 * nf * (bdp + kp))
                lo = max(q_max_p - amp, 0.0)
                frac_pos = (q_max_p - lo) / max(amp, 1e-12) if amp > 0 else 1.0
                qn = min(0.5 * (q_max_p + lo) * frac_pos * pkt_bytes, q_cap_bytes)
                w = (cap_wire[lnk] * rtt[i] + k_bytes) / pkt_bytes / nf
                mk = min(1.0, np.sqrt(2.0 / max(w, 1e-9)))
            else:
                e = dq_cls[lnk] * dq_w + n
                qn = min(dq_q[e], q_cap_bytes)
                mk = dq_p[e]
        if abs(qn - q[lnk]) > 1e-9 * max(qn, 1.0):
            ch_l[nch] = lnk
            ch_q[nch] = qn
            nch += 1
        q[lnk] = qn
        if qn > q_max[lnk]:
            q_max[lnk] = qn
        mark[lnk] = mk
        load_rec[lnk] = load[i] if is_net[lnk] else 0.0
        q_t[lnk] = now
    return nch, -1


@kernel
def link_update(links, nflows, load, rtt, now, q, q_t, q_int, q_max, mark, load_rec, marked, is_net,
                src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes, pkt_bytes, q_cap_bytes,
                dq_cls, dq_p, dq_q, dq_w):
    """`NetworkModel._set_links` in one pass: integrate each link's queue and marks up to ``now``,
    then set its new standing queue and marking fraction (DCTCP's closed form, `fluid.dctcp_queue`
    and `fluid.dctcp_mark_fraction`, when ``tcp``; else DCQCN's fixed point, tabulated per
    capacity class ``dq_cls[link]`` and flow count in ``dq_p`` / ``dq_q``, rows of ``dq_w``),
    capped at ``q_cap_bytes``. Returns (congested per link of ``links``, the links whose queue
    changed, their new queues, -1); or, touching nothing, (..., i) when the table lacks the
    entry of congested link ``links[i]`` (NaN: not solved yet, or beyond the row)."""
    m = links.size
    sat = np.zeros(m, np.bool_)
    ch_l = np.empty(m, np.int64)
    ch_q = np.empty(m)
    nch, need = _link_set(links, nflows, load, rtt, now, q, q_t, q_int, q_max, mark, load_rec, marked, is_net,
                          src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes, pkt_bytes,
                          q_cap_bytes, dq_cls, dq_p, dq_q, dq_w, sat, ch_l, ch_q)
    return sat, ch_l[:nch], ch_q[:nch], need


@kernel
def upstream_links(flows, lo, hi, link_buf, link_dst, node, mark):
    """The distinct links of ``flows`` that end at switch ``node`` (the links feeding a port of
    it), sorted (``mark`` zero on entry and exit)."""
    links = touched_links(flows, lo, hi, link_buf, mark)
    res = links[link_dst[links] == node]
    res.sort()
    return res


@kernel
def pause_victims(flows_u, prio, cls_mask, on_port_sorted, comp_sorted, comp_order, t_pause, extra, lat):
    """Each flow of a paused link whose port queue ``prio[v]`` is a paused class (``cls_mask``)
    and that is not one of the congested port's own (``on_port``) loses ``t_pause``: into
    ``extra`` if it is one of the flows being started (``comp``), else onto its ``lat``
    directly. Returns how many of the link's flows are in a paused class."""
    n_cls = 0
    for i in range(flows_u.size):
        v = flows_u[i]
        if not cls_mask[prio[v]]:
            continue
        n_cls += 1
        k = np.searchsorted(on_port_sorted, v)
        if k < on_port_sorted.size and on_port_sorted[k] == v:
            continue
        j = np.searchsorted(comp_sorted, v)
        if j < comp_sorted.size and comp_sorted[j] == v:
            extra[comp_order[j]] += t_pause
        else:
            lat[v] += t_pause
    return n_cls


@kernel(**NO_REFCOUNT)
def _slow_start_loss(size, rate, rtt, iw, growth):
    # scalar `fluid.slow_start_loss_s` (the documented reference; tests check they agree)
    r = max(rate, 1e-300)
    lg = np.log(growth)
    k = np.ceil(np.log(max(r * rtt / iw, 1.0)) / lg - 1e-12)
    ramp = iw * (growth**k - 1.0) / (growth - 1.0)
    if size <= ramp:
        n_short = np.ceil(np.log(size / iw * (growth - 1.0) + 1.0) / lg - 1e-12)
        t = max(n_short - 1.0, 0.0) * rtt + min(rtt, size / r)
    else:
        t = k * rtt + (size - ramp) / r
    return max(t - size / r, 0.0)


@kernel(**NO_REFCOUNT)
def _extras_into(comp, net, rate_old, rate_new, rem, size, start, now, rtt, rtt_q, lat, tcp, setup_rtts, iw,
                 growth, mss, ramp_gain, dcqcn_timer, dcqcn_steps, dcqcn_rai, fresh):
    # `flow_extras` into ``fresh`` (zero on entry)
    for i in range(comp.size):
        if not net[i]:
            continue
        f = comp[i]
        old = rate_old[f]
        new = rate_new[f]
        fr = old == 0.0 and rem[f] == size[f] and start[f] == now and new > 0
        fresh[i] = fr
        grow = (not fr) and new > old * (1.0 + 1e-9)
        e = 0.0
        if fr and setup_rtts:
            e += setup_rtts * rtt_q[i]
        if tcp:
            if fr or grow:
                ss = _slow_start_loss(rem[f], new, rtt_q[i], iw, growth)
                if fr:
                    e += ss
                else:
                    dr = max(new - old, 0.0)
                    t_ramp = dr * rtt[i] * rtt[i] / mss
                    e += min(ramp_gain * 0.5 * dr * t_ramp / max(new, 1e-300), ss)
        elif grow:
            dr = max(new - old, 0.0)
            hai = 10.0 * dcqcn_rai
            rest = max(dr - dcqcn_steps * dcqcn_rai, 0.0)
            m = np.ceil(0.5 * (np.sqrt(1.0 + 8.0 * rest / hai) - 1.0))
            t = (dcqcn_steps + m + 1.0) * dcqcn_timer if dr > 0 else 0.0
            e += ramp_gain * 0.5 * dr * t / max(new, 1e-300)
        if e != 0.0:
            lat[f] += e


@kernel
def flow_extras(comp, net, rate_old, rate_new, rem, size, start, now, rtt, rtt_q, lat, tcp, setup_rtts, iw,
                growth, mss, ramp_gain, dcqcn_timer, dcqcn_steps, dcqcn_rai):
    """The start and convergence costs of `NetworkModel.on_rates` per flow of ``comp`` that
    crosses the network (``net``; a flow inside a server, over NVLink or PCIe, runs neither TCP
    nor DCQCN), added to ``lat``: setup round trips and slow start of a fresh flow
    (`fluid.slow_start_loss_s`), the ramp of a growing one (`fluid.tcp_ramp_loss_s`, at most a
    restart's slow start, on ``tcp``; `fluid.dcqcn_ramp_loss_s` on ``roce``). Returns which
    flows are fresh (network flows only)."""
    fresh = np.zeros(comp.size, np.bool_)
    _extras_into(comp, net, rate_old, rate_new, rem, size, start, now, rtt, rtt_q, lat, tcp, setup_rtts, iw,
                 growth, mss, ramp_gain, dcqcn_timer, dcqcn_steps, dcqcn_rai, fresh)
    return fresh


@kernel
def burst_peaks(comp, lo, hi, link_buf, frac_buf, rtt, line, rem, prio, is_net, load, cap_wire, q, lossless_q,
                wire_eff, tcp, iw_wire, cnp_interval, pos, arrive):
    """The first-window bursts of the fresh flows ``comp`` (`NetworkModel._bursts`): per network
    link they enter (their incidences ``lo``/``hi`` into ``link_buf``/``frac_buf``), the peak
    queue the windows build on top of the standing one when they arrive faster than it
    drains, and whether a lossless flow is among them. Returns (links, peak, lossless), the
    links sorted; empty when no port can fill (a lone flow whose every link drains faster than
    it arrives). ``pos`` is -1 on entry and exit.

    The fresh flows that leave one sender by the same first network link (a NIC's queue pairs
    or sockets) share it: each starts at ``line / k`` for ``k`` of them (the NIC serves its
    queues in turn; RoCE NICs start every queue pair at line rate, the arbiter divides it), so
    on RoCE each sends ``line / k`` times (RTT + CNP interval) before its first cut, and a TCP
    flow's initial window takes ``k`` times as long to leave."""
    # k per first network link, counted in `pos` (-1 on entry, put back below)
    first = np.full(comp.size, -1, np.int64)
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            if is_net[link_buf[k]]:
                first[i] = link_buf[k]
                pos[first[i]] -= 1
                break
    line = line.copy()
    for i in range(comp.size):
        if first[i] >= 0:
            line[i] /= -1 - pos[first[i]]
    for i in range(comp.size):
        if first[i] >= 0:
            pos[first[i]] = -1
    w = np.empty(comp.size)
    for i in range(comp.size):
        size_wire = rem[comp[i]] / wire_eff
        # tcp: the initial window; roce: its share of line rate until the first CNP acts (one
        # RTT + interval)
        w[i] = min(size_wire, iw_wire) if tcp else min(size_wire, line[i] * (rtt[i] + cnp_interval))
    any_net = False
    over = False
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if is_net[lnk]:
                any_net = True
                if load[lnk] + line[i] > cap_wire[lnk]:
                    over = True
    if not any_net or (comp.size == 1 and not over):
        return np.empty(0, np.int64), np.empty(0), np.empty(0, np.bool_)
    total = 0
    for i in range(comp.size):
        total += hi[comp[i]] - lo[comp[i]]
    h = np.empty(total, np.int64)
    nh = 0
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if is_net[lnk] and pos[lnk] < 0:
                pos[lnk] = 0
                h[nh] = lnk
                nh += 1
    h = h[:nh].copy()
    h.sort()
    for j in range(h.size):
        pos[h[j]] = j
    sum_w = np.zeros(h.size)
    sum_line = np.zeros(h.size)
    dur = np.zeros(h.size)
    ll = np.zeros(h.size, np.bool_)
    for i in range(comp.size):
        f = comp[i]
        lossless = lossless_q[prio[f]]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not is_net[lnk]:
                continue
            j = pos[lnk]
            sum_w[j] += w[i] * frac_buf[k]
            sum_line[j] += line[i]
            dur[j] = max(dur[j], w[i] / line[i])
            if lossless:
                ll[j] = True
    peak = np.zeros(h.size)
    for j in range(h.size):
        lnk = h[j]
        pos[lnk] = -1
        old = load[lnk]
        # the windows arrive no faster than the links into the port's switch carry them (the
        # arrival potential, `flow_pass`): behind a narrower ingress they queue there instead
        a = sum_line[j] if arrive[lnk] <= 0.0 else min(sum_line[j], arrive[lnk])
        if a + old > cap_wire[lnk]:
            peak[j] = q[lnk] + sum_w[j] + (old - cap_wire[lnk]) * max(dur[j], sum_w[j] / a)
    return h, peak, ll


@kernel
def rates_pass(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rem, size, start, prio, lat, now,
               rtt_part, q, q_max, cap_wire, link_src, link_dst, is_net, load, b_len, arrive, lossless_q,
               mark, s_dload, s_rtt, s_cnt, pos, tcp, setup_rtts, iw, growth, mss, ramp_gain, dcqcn_timer,
               dcqcn_steps, dcqcn_rai, wire_eff, iw_wire, cnp_interval, pfc_xoff, port_buffer,
               q_t, q_int, mark_frac, load_rec, marked, src_is_switch, cap, sat_rtol, k_bytes, pkt_bytes,
               q_cap_bytes, dq_cls, dq_p, dq_q, dq_w):
    """`flow_pass`, `flow_extras`, `burst_peaks` and `link_update` of one rate update in one
    compiled call (the call overhead, not the work, dominates updates of a few flows): the
    costs are added to ``lat``, the touched links' arrival potentials written to ``arrive``, the
    burst peaks to ``q_max`` (capped by PFC Xoff on a lossless port, the buffer on a lossy
    one), the touched links' queues and marks updated (`link_update`; ``mark_frac`` is its
    ``mark``). Returns (positions in ``comp`` of the fresh flows, touched network links, their
    flow counts, new loads and mean RTTs, the burst links, peaks, lossless, and
    `link_update`'s four results); the burst arrays are empty when no port fills. When
    `link_update` needs an entry of DCQCN's table (its last result >= 0) it has touched nothing
    and the caller updates the links after solving it; everything else is done."""
    rtt, rtt_q, line, net, t, dload, rtt_l, pot = flow_pass(
        comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rtt_part, q, cap_wire, link_src, link_dst,
        is_net, mark, s_dload, s_rtt, s_cnt)
    nflows = np.empty(t.size, np.int64)
    new_load = np.empty(t.size)
    for j in range(t.size):
        lnk = t[j]
        arrive[lnk] = pot[j]
        nflows[j] = b_len[lnk]
        new_load[j] = load[lnk] + dload[j]
    h = np.empty(0, np.int64)
    peak = np.empty(0)
    ll = np.empty(0, np.bool_)
    fi = np.empty(0, np.int64)
    if t.size:
        fresh = np.zeros(comp.size, np.bool_)
        _extras_into(comp, net, rate_old, rate_new, rem, size, start, now, rtt, rtt_q, lat, tcp, setup_rtts,
                     iw, growth, mss, ramp_gain, dcqcn_timer, dcqcn_steps, dcqcn_rai, fresh)
        fi = np.flatnonzero(fresh)
    if fi.size:
        h2, peak2, ll2 = burst_peaks(comp[fi], lo, hi, link_buf, frac_buf, rtt[fi], line[fi], rem, prio,
                                     is_net, load, cap_wire, q, lossless_q, wire_eff, tcp, iw_wire,
                                     cnp_interval, pos, arrive)
        any_peak = False
        for j in range(h2.size):
            if peak2[j] > 0:
                any_peak = True
                cap_j = pfc_xoff if ll2[j] else port_buffer
                v = min(peak2[j], cap_j)
                if v > q_max[h2[j]]:
                    q_max[h2[j]] = v
        if any_peak:
            h, peak, ll = h2, peak2, ll2
    sat = np.zeros(t.size, np.bool_)
    ch_l = np.empty(t.size, np.int64)
    ch_q = np.empty(t.size)
    nch, need = _link_set(t, nflows, new_load, rtt_l, now, q, q_t, q_int, q_max, mark_frac, load_rec, marked,
                          is_net, src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes, pkt_bytes,
                          q_cap_bytes, dq_cls, dq_p, dq_q, dq_w, sat, ch_l, ch_q)
    return fi, t, nflows, new_load, rtt_l, h, peak, ll, sat, ch_l[:nch], ch_q[:nch], need


@kernel(**NO_REFCOUNT)
def done_core(done, lo, hi, link_buf, scratch, is_net, b_len, load, rtt_part, now, q, q_t, q_int, q_max,
              mark_frac, load_rec, marked, src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes,
              pkt_bytes, q_cap_bytes, dq_cls, dq_p, dq_q, dq_w, t, nflows, ld, rtt, sat, ch_l, ch_q):
    """`done_pass` into work arrays ``t`` .. ``ch_q`` of one entry per link (no allocation, no
    reference counts: the event loop calls it at every step that ends flows). Returns (links
    in ``t``, changes in ``ch_l``/``ch_q``, `link_update`'s need)."""
    m = _distinct_into(done, lo, hi, link_buf, scratch, is_net, True, t)
    for j in range(m):
        nflows[j] = b_len[t[j]]
        ld[j] = load[t[j]]
        rtt[j] = 3.0 * rtt_part[t[j]]
        sat[j] = False
    nch, need = _link_set(t[:m], nflows[:m], ld[:m], rtt[:m], now, q, q_t, q_int, q_max, mark_frac,
                          load_rec, marked, is_net, src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp,
                          k_bytes, pkt_bytes, q_cap_bytes, dq_cls, dq_p, dq_q, dq_w, sat[:m], ch_l, ch_q)
    return m, nch, need


@kernel
def done_pass(done, lo, hi, link_buf, scratch, is_net, b_len, load, rtt_part, now, q, q_t, q_int, q_max,
              mark_frac, load_rec, marked, src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes,
              pkt_bytes, q_cap_bytes, dq_cls, dq_p, dq_q, dq_w):
    """`NetworkModel.on_done` in one compiled call: the network links of the flows ``done``
    and `link_update` of them (a link's RTT without its flows at hand: three hops through it,
    host-leaf-host). Returns (links, then `link_update`'s four results)."""
    total = 0
    for i in range(done.size):
        total += hi[done[i]] - lo[done[i]]
    t = np.empty(total, np.int64)
    nflows = np.empty(total, np.int64)
    ld = np.empty(total)
    rtt = np.empty(total)
    sat = np.empty(total, np.bool_)
    ch_l = np.empty(total, np.int64)
    ch_q = np.empty(total)
    m, nch, need = done_core(done, lo, hi, link_buf, scratch, is_net, b_len, load, rtt_part, now, q, q_t,
                             q_int, q_max, mark_frac, load_rec, marked, src_is_switch, arrive, cap, cap_wire,
                             sat_rtol, tcp, k_bytes, pkt_bytes, q_cap_bytes, dq_cls, dq_p, dq_q, dq_w, t,
                             nflows, ld, rtt, sat, ch_l, ch_q)
    return t[:m], sat[:m], ch_l[:nch], ch_q[:nch], need
