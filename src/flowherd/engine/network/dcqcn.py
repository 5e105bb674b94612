"""DCQCN's start transient: what ``n`` RoCE flows that start together at one port lose.

RoCE NICs start a queue pair at line rate; the first congestion notification (CNP) halves its
rate (``alpha`` starts at 1), and while the port's queue stays above ECN's Kmax every later
rate-decrease interval halves it again. With PFC holding the queue at Xoff per ingress (a
lossless port never drains faster than its capacity, so the queue, and with it the marks,
persists), the cuts go on until the aggregate rate is far below the port's capacity; the port
then idles until the timer-driven recovery (fast recovery toward the target rate, then
additive and hyper increase) brings the rates back. That idle time is DCQCN's well-known
throughput loss under incast (Zhu et al., "Congestion Control for Large-Scale RDMA
Deployments", SIGCOMM 2015, Sec. 3 and Fig. 11; Mittal et al., "Revisiting Network Support
for RDMA", SIGCOMM 2018, Sec. 2), which the steady-state fixed point
(`fluid.dcqcn_fixed_point`) does not see.

`start_loss_s` integrates the reaction point of the CoNEXT 2016 fluid model (Zhu, Ghobadi,
Misra, Padhye, "ECN or Delay", eqs. 1-5) for ``n`` symmetric flows at one port with the
Mellanox NIC's event rules (rate cut by ``alpha / 2`` at most once per CNP interval when a CNP
came; ``alpha`` EWMA per alpha interval; the increase timer reset at each cut; the target rate
clamped only when a cut follows an increase), RED marking at the port and PFC as a fluid
limit (above Xoff per ingress queue the arrivals are held to the drain rate). Marks reach the
sender without delay (the base RTT, a few us, is short against the 50 us decrease interval),
and a flow takes a CNP in an interval when it can expect at least one marked packet in it.
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.aot import kernel

__all__ = ["start_loss_s", "start_loss_stepped_s"]


@kernel
def start_loss_s(n, size_wire_bytes, line_bytes_per_s, cap_bytes_per_s, n_ingress, xoff_bytes,
                 kmin_bytes, kmax_bytes, pmax, pkt_bytes, cnp_interval_s, alpha_interval_s, timer_s,
                 fast_recovery_steps, rai_bytes_per_s, rhai_bytes_per_s, g, min_rate_bytes_per_s,
                 dt_s=1e-6, t_max_s=0.05):
    """Time each of ``n`` flows of ``size_wire_bytes`` (wire bytes) loses against the port's
    fair share when they start together at line rate ``line_bytes_per_s`` into a port of
    ``cap_bytes_per_s`` (module docstring): the integrated finish (the last byte leaves the
    queue) minus ``n * size / cap``; never negative. ``n_ingress`` ingress queues share the
    port's queue for PFC's per-ingress Xoff. Seconds; steps of ``dt_s`` up to ``t_max_s``."""
    return start_loss_stepped_s(n, size_wire_bytes, line_bytes_per_s, cap_bytes_per_s, n_ingress, xoff_bytes,
                                kmin_bytes, kmax_bytes, pmax, pkt_bytes, cnp_interval_s, alpha_interval_s,
                                timer_s, fast_recovery_steps, rai_bytes_per_s, rhai_bytes_per_s, g,
                                min_rate_bytes_per_s, dt_s, t_max_s)


@kernel
def start_loss_stepped_s(n, size_wire_bytes, line_bytes_per_s, cap_bytes_per_s, n_ingress, xoff_bytes,
                         kmin_bytes, kmax_bytes, pmax, pkt_bytes, cnp_interval_s, alpha_interval_s, timer_s,
                         fast_recovery_steps, rai_bytes_per_s, rhai_bytes_per_s, g, min_rate_bytes_per_s,
                         dt_s, t_max_s):
    """`start_loss_s` with its step and horizon given (the compiled one takes every argument)."""
    if n * line_bytes_per_s <= cap_bytes_per_s or size_wire_bytes <= 0:
        return 0.0
    r = line_bytes_per_s
    rt = line_bytes_per_s
    alpha = 1.0
    stage = 0
    cut_yet = False
    next_dec = np.inf
    next_alpha = np.inf
    next_inc = np.inf
    m_dec = 0.0
    m_alpha = 0.0
    q = 0.0
    sent = 0.0
    t = 0.0
    hold = n_ingress * xoff_bytes
    while t < t_max_s and sent < size_wire_bytes:
        a = n * r
        if q >= hold and a > cap_bytes_per_s:
            a = cap_bytes_per_s  # PFC: paused senders, on average at the drain rate
        per = min(a / n * dt_s, size_wire_bytes - sent)
        sent += per
        q = max(q + n * per - cap_bytes_per_s * dt_s, 0.0)
        if q <= kmin_bytes:
            p = 0.0
        elif q > kmax_bytes:
            p = 1.0
        else:
            p = pmax * (q - kmin_bytes) / (kmax_bytes - kmin_bytes)
        deq = cap_bytes_per_s * dt_s if q > 0.0 else n * per
        m = p * deq / n / pkt_bytes
        m_dec += m
        m_alpha += m
        t += dt_s
        if not cut_yet and m_dec >= 1.0:  # the first CNP: alpha = 1, cut now, timers start
            cut_yet = True
            alpha = 1.0
            next_alpha = t + alpha_interval_s
            next_dec = t
            m_alpha = 0.0
        if t >= next_dec:
            if m_dec >= 1.0:
                if stage > 0:
                    rt = r
                r = max(min_rate_bytes_per_s, r * (1.0 - alpha / 2.0))
                stage = 0
                next_inc = t + timer_s
            m_dec = 0.0
            next_dec += cnp_interval_s
        if t >= next_alpha:
            alpha = (1.0 - g) * alpha + (g if m_alpha >= 1.0 else 0.0)
            m_alpha = 0.0
            next_alpha += alpha_interval_s
        if t >= next_inc:
            if stage == fast_recovery_steps:
                rt = min(rt + rai_bytes_per_s, line_bytes_per_s)
            elif stage > fast_recovery_steps:
                rt = min(rt + rhai_bytes_per_s, line_bytes_per_s)
            r = 0.5 * (r + rt)
            stage += 1
            next_inc += timer_s
    finish = t + q / cap_bytes_per_s
    return max(finish - n * size_wire_bytes / cap_bytes_per_s, 0.0)
