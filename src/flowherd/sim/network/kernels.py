"""Compiled passes of the congestion model over a rate update's flows and their links.

One pass over the incidences of the re-allocated flows instead of a dozen numpy calls each
sized by the fabric: the model's cost per engine event stays proportional to the flows the
event touches (`flowherd.sim.network.model.NetworkModel.on_rates`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

__all__ = ["flow_pass", "touched_links"]


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
