"""Compiled passes of the congestion model over a rate update's flows and their links.

One pass over the incidences of the re-allocated flows instead of a dozen numpy calls each
sized by the fabric: the model's cost per engine event stays proportional to the flows the
event touches (`flowherd.sim.network.model.NetworkModel.on_rates`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

__all__ = ["flow_pass", "link_update", "pause_victims", "touched_links", "upstream_links"]


@njit(cache=True)
def touched_links(flows, lo, hi, link_buf, mark):
    """The distinct links of ``flows``, in first-seen order (``mark`` zero on entry and exit)."""
    out = []
    for i in range(flows.size):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not mark[lnk]:
                mark[lnk] = True
                out.append(lnk)
    res = np.empty(len(out), np.int64)
    for i in range(len(out)):
        res[i] = out[i]
        mark[out[i]] = False
    return res


@njit(cache=True)
def flow_pass(comp, lo, hi, link_buf, frac_buf, rate_old, rate_new, rtt_part, q, cap_wire, link_src,
              link_dst, mark, s_dload, s_rtt, s_cnt):
    """Per flow of ``comp``: base RTT, RTT with the standing queues, line rate (narrowest link).
    Per distinct link of theirs (returned ``touched``): load change, mean RTT of its flows and
    arrival potential (`NetworkModel._arrival_potential`). Scratch arrays are zero on entry and
    on exit."""
    n = comp.size
    rtt = np.zeros(n)
    rtt_q = np.zeros(n)
    line = np.full(n, np.inf)
    touched = []
    for i in range(n):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            fr = frac_buf[k]
            rtt[i] += rtt_part[lnk] * fr
            rtt_q[i] += q[lnk] / cap_wire[lnk] * fr
            if cap_wire[lnk] < line[i]:
                line[i] = cap_wire[lnk]
        rtt_q[i] += rtt[i]
    pairs = Dict.empty(key_type=types.int64, value_type=types.float64)
    for i in range(n):
        f = comp[i]
        d = rate_new[f] - rate_old[f]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not mark[lnk]:
                mark[lnk] = True
                touched.append(lnk)
            s_dload[lnk] += d * frac_buf[k]
            s_rtt[lnk] += rtt[i]
            s_cnt[lnk] += 1
            for k2 in range(lo[f], hi[f]):  # the link the flow enters lnk's switch by
                u = link_buf[k2]
                if link_dst[u] == link_src[lnk]:
                    key = np.int64(lnk) * cap_wire.size + u
                    if key in pairs:
                        pairs[key] += line[i]
                    else:
                        pairs[key] = line[i]
                    break
    m = len(touched)
    t = np.empty(m, np.int64)
    dload = np.empty(m)
    rtt_l = np.empty(m)
    pot = np.zeros(m)
    for j in range(m):
        lnk = touched[j]
        t[j] = lnk
        dload[j] = s_dload[lnk]
        rtt_l[j] = s_rtt[lnk] / max(s_cnt[lnk], 1)
        s_cnt[lnk] = j  # reused: position of the link in `touched`
    for key, val in pairs.items():
        lnk = key // cap_wire.size
        u = key % cap_wire.size
        pot[s_cnt[lnk]] += min(cap_wire[u], val)
    for j in range(m):
        lnk = touched[j]
        mark[lnk] = False
        s_dload[lnk] = 0.0
        s_rtt[lnk] = 0.0
        s_cnt[lnk] = 0
    return rtt, rtt_q, line, t, dload, rtt_l, pot


@njit(cache=True)
def link_update(links, nflows, load, rtt, now, q, q_t, q_int, q_max, mark, load_rec, marked, is_net,
                src_is_switch, arrive, cap, cap_wire, sat_rtol, tcp, k_bytes, pkt_bytes, q_cap_bytes,
                dq_cls, dq_p, dq_q):
    """`NetworkModel._set_links` in one pass: integrate each link's queue and marks up to ``now``,
    then set its new standing queue and marking fraction (DCTCP's closed form, `fluid.dctcp_queue`
    and `fluid.dctcp_mark_fraction`, when ``tcp``; else DCQCN's fixed point, tabulated per
    capacity class ``dq_cls[link]`` and flow count in ``dq_p`` / ``dq_q``), capped at
    ``q_cap_bytes``. Returns (congested, queue changed) per link of ``links``."""
    m = links.size
    sat = np.zeros(m, np.bool_)
    changed = np.zeros(m, np.bool_)
    kp = k_bytes / pkt_bytes
    for i in range(m):
        lnk = links[i]
        dt = now - q_t[lnk]
        q_int[lnk] += q[lnk] * dt
        marked[lnk] += load_rec[lnk] * mark[lnk] * dt
        qn = 0.0
        mk = 0.0
        n = nflows[i]
        if (is_net[lnk] and src_is_switch[lnk] and n > 0 and load[i] >= cap[lnk] * (1.0 - sat_rtol)
                and arrive[lnk] > cap_wire[lnk] * (1.0 + sat_rtol)):
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
                c = dq_cls[lnk]
                qn = min(dq_q[c, n], q_cap_bytes)
                mk = dq_p[c, n]
        if abs(qn - q[lnk]) > 1e-9 * max(qn, 1.0):
            changed[i] = True
        q[lnk] = qn
        if qn > q_max[lnk]:
            q_max[lnk] = qn
        mark[lnk] = mk
        load_rec[lnk] = load[i] if is_net[lnk] else 0.0
        q_t[lnk] = now
    return sat, changed


@njit(cache=True)
def upstream_links(flows, lo, hi, link_buf, link_dst, node, mark):
    """The distinct links of ``flows`` that end at switch ``node`` (the links feeding a port of
    it), sorted (``mark`` zero on entry and exit)."""
    out = []
    for i in range(flows.size):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if link_dst[lnk] == node and not mark[lnk]:
                mark[lnk] = True
                out.append(lnk)
    res = np.empty(len(out), np.int64)
    for i in range(len(out)):
        res[i] = out[i]
        mark[out[i]] = False
    res.sort()
    return res


@njit(cache=True)
def pause_victims(flows_u, on_port_sorted, comp_sorted, comp_order, t_pause, extra, lat):
    """Each flow of a paused link that is not one of the congested port's own (``on_port``)
    loses ``t_pause``: into ``extra`` if it is one of the flows being started (``comp``), else
    onto its ``lat`` directly."""
    for i in range(flows_u.size):
        v = flows_u[i]
        k = np.searchsorted(on_port_sorted, v)
        if k < on_port_sorted.size and on_port_sorted[k] == v:
            continue
        j = np.searchsorted(comp_sorted, v)
        if j < comp_sorted.size and comp_sorted[j] == v:
            extra[comp_order[j]] += t_pause
        else:
            lat[v] += t_pause
