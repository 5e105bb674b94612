"""Closed forms and fixed points of the fluid models of DCTCP and DCQCN, and the transients of
a flow's start. Plain functions of scalars or numpy arrays; bytes, seconds, bytes per second.

Each function says what it approximates and where the model comes from. They are the parts of
`flowherd.engine.network.model` that can be checked by hand (tests/engine/network/test_network_fluid.py).
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "dcqcn_fixed_point",
    "dcqcn_ramp_loss_s",
    "dctcp_exit_loss_s",
    "dctcp_mark_fraction",
    "dctcp_queue",
    "incast_burst_bytes",
    "slow_start_loss_s",
    "tcp_ramp_loss_s",
]


def dctcp_queue(n: np.ndarray, bdp_bytes: np.ndarray, k_bytes: float, pkt_bytes: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """Time-average queue and utilization of a port shared by ``n`` long-lived DCTCP flows.

    Alizadeh, Javanmard and Prabhakar, "Analysis of DCTCP", SIGMETRICS 2011, Sec. 3 (the
    sawtooth of N synchronized flows): the queue peaks at ``Q_max = K + N`` packets and falls
    by the amplitude ``A = 0.5 * sqrt(2 N (C RTT + K))`` packets once per period; the
    aggregate window ramps linearly between its extremes, so the queue averages
    ``Q_max - A / 2`` over the part of the period it is positive, and the link is idle while
    the window is below the bandwidth-delay product (``Q_min < 0``): a utilization loss of
    ``Q_min^2 / (2 A BDP)`` (integral of the window's deficit over the linear ramp).

    Args:
        n: Flows on the port (>= 1).
        bdp_bytes: Capacity times base RTT of the port's flows.
        k_bytes: The ECN marking threshold K.
        pkt_bytes: Bytes of a full packet on the wire.

    Returns:
        (queue_bytes, utilization), arrays like ``n``.
    """
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    bdp = np.asarray(bdp_bytes, dtype=np.float64) / pkt_bytes
    k = k_bytes / pkt_bytes
    q_max = k + n
    amp = 0.5 * np.sqrt(2.0 * n * (bdp + k))
    q_min = q_max - amp
    # average of max(q, 0) over the linear ramp from q_min to q_max
    lo = np.maximum(q_min, 0.0)
    frac_pos = np.where(amp > 0, (q_max - lo) / np.maximum(amp, 1e-12), 1.0)
    q_avg = 0.5 * (q_max + lo) * frac_pos
    deficit = np.maximum(-q_min, 0.0)
    util = 1.0 - np.where(bdp > 0, deficit**2 / (2.0 * np.maximum(amp, 1e-12) * np.maximum(bdp, 1e-12)),
                          0.0)
    return q_avg * pkt_bytes, np.clip(util, 0.0, 1.0)


def dctcp_mark_fraction(n: np.ndarray, bdp_bytes: np.ndarray, k_bytes: float, pkt_bytes: float) -> np.ndarray:
    """Fraction of packets DCTCP's port marks in steady state: ``alpha ~ sqrt(2 / W*)`` with the
    per-flow window at the marking point ``W* = (C RTT + K) / N`` packets (SIGMETRICS 2011,
    Sec. 3.1, eq. for alpha), at most 1."""
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    w = (np.asarray(bdp_bytes, dtype=np.float64) + k_bytes) / pkt_bytes / n
    return np.minimum(1.0, np.sqrt(2.0 / np.maximum(w, 1e-9)))


@functools.lru_cache(maxsize=4096)
def dcqcn_fixed_point(n: int, capacity_bytes_per_s: float, pkt_bytes: float, kmin_bytes: float,
                      kmax_bytes: float, pmax: float, timer_s: float, byte_counter_bytes: float,
                      fast_recovery_steps: int, rai_bytes_per_s: float, cnp_interval_s: float,
                      alpha_interval_s: float) -> tuple[float, float]:
    """Marking probability and queue at the fixed point of DCQCN with ``n`` flows on a port.

    The fluid model of Zhu, Ghobadi, Misra and Padhye, "ECN or Delay: Lessons Learnt from
    Analysis of DCQCN and TIMELY", CoNEXT 2016, eqs. (1)-(5), at equilibrium: every flow at
    ``R_C = C / n``; ``alpha = 1 - (1 - p)^(tau' R_C)``; the target rate's decrease balances its
    timer and byte-counter increases, ``(R_T - R_C) a / tau = R_AI R_C (b_F b + c_F c)``; the
    current rate's decrease balances its recovery toward the target,
    ``R_C alpha a / (2 tau) = (R_T - R_C) R_C (b + c) / 2``, with
    ``a = 1 - (1 - p)^(tau R_C)``, ``b = p / ((1 - p)^-B - 1)``, ``c = p / ((1 - p)^(-T R_C) - 1)``,
    ``b_F = (1 - p)^(F B)``, ``c_F = (1 - p)^(F T R_C)`` (rates in packets per second, B in
    packets). Eliminating ``R_T`` leaves one equation in ``p``, solved by bisection; the queue is
    where RED marks with that probability: ``Kmin + p / pmax (Kmax - Kmin)``. The model's
    known property holds: the queue grows with ``n`` (DCQCN's queue is not bounded by a
    single threshold as DCTCP's is, CoNEXT 2016 Sec. 3.3).

    Returns:
        (p, queue_bytes).
    """
    rc = capacity_bytes_per_s / n / pkt_bytes
    tau, tau_a, t = cnp_interval_s, alpha_interval_s, timer_s
    big_b = byte_counter_bytes / pkt_bytes
    rai = rai_bytes_per_s / pkt_bytes
    f = fast_recovery_steps

    def resid(logp: float) -> float:
        p = math.exp(logp)
        l1p = math.log1p(-p)
        a = -math.expm1(tau * rc * l1p)
        alpha = -math.expm1(tau_a * rc * l1p)
        b = p * _inv_expm1(-big_b * l1p)
        c = p * _inv_expm1(-t * rc * l1p)
        bf = math.exp(f * big_b * l1p)
        cf = math.exp(f * t * rc * l1p)
        delta = tau * rai * rc * (bf * b + cf * c) / a
        return alpha * a / tau - delta * (b + c)

    lo, hi = math.log(1e-12), math.log(0.999)
    r_lo, r_hi = resid(lo), resid(hi)
    if r_lo * r_hi > 0:  # no root inside: the nearer end
        return _queue_at(math.exp(lo if abs(r_lo) < abs(r_hi) else hi), kmin_bytes, kmax_bytes, pmax)
    # imported here: scipy.optimize costs about 0.2 s of start-up, and the ideal network never calls this
    from scipy.optimize import brentq

    return _queue_at(math.exp(brentq(resid, lo, hi, xtol=1e-10)), kmin_bytes, kmax_bytes, pmax)


def _queue_at(p: float, kmin_bytes: float, kmax_bytes: float, pmax: float) -> tuple[float, float]:
    if p > pmax:  # above Kmax RED marks every packet: the queue sits at Kmax
        return p, kmax_bytes
    return p, kmin_bytes + p / pmax * (kmax_bytes - kmin_bytes)


def _inv_expm1(x: float) -> float:
    return 1.0 / math.expm1(x) if x < 700.0 else 0.0  # (1-p)^-B - 1 beyond a float: the term is 0


def slow_start_loss_s(size_bytes: np.ndarray, rate_bytes_per_s: np.ndarray, rtt_s: np.ndarray,
                      init_window_bytes: float, growth: float = 2.0) -> np.ndarray:
    """Time a TCP flow loses to slow start against sending at its fair rate from the start.

    Slow start (RFC 5681) grows the window by the factor ``growth`` once per RTT from the
    initial window ``W0``: 2 when the sender counts the bytes an ACK covers (Appropriate Byte
    Counting, RFC 3465, as Linux does), ``1 + 1/b`` when it adds one MSS per ACK and the
    receiver ACKs every ``b`` segments (RFC 3465 Sec. 1: 1.5 with delayed ACKs; ns-3's
    ``TcpNewReno::SlowStart``). A flow whose fair share is ``r`` needs
    ``k = ceil(log_g(r RTT / W0))`` RTTs to reach it and sends ``W0 (g^k - 1) / (g - 1)`` bytes
    meanwhile. A flow short enough to end within slow start takes the RTTs its windows need
    (the last one counted whole, as the last window's ACK clock has it). Loss = that time minus
    ``size / r``; never negative.
    """
    size = np.asarray(size_bytes, dtype=np.float64)
    r = np.maximum(np.asarray(rate_bytes_per_s, dtype=np.float64), 1e-300)
    rtt = np.asarray(rtt_s, dtype=np.float64)
    lg = math.log(growth)
    w_full = r * rtt
    k = np.ceil(np.log(np.maximum(w_full / init_window_bytes, 1.0)) / lg - 1e-12)
    ramp = init_window_bytes * (growth**k - 1.0) / (growth - 1.0)
    short = size <= ramp
    n_short = np.ceil(np.log(size / init_window_bytes * (growth - 1.0) + 1.0) / lg - 1e-12)
    t_short = np.maximum(n_short - 1.0, 0.0) * rtt + np.minimum(rtt, size / r)
    t_long = k * rtt + (size - ramp) / r
    t = np.where(short, t_short, t_long)
    return np.maximum(t - size / r, 0.0)


def dctcp_exit_loss_s(n: np.ndarray, bdp_bytes: np.ndarray, k_bytes: float, pkt_bytes: float,
                      capacity_bytes_per_s: np.ndarray, alpha_init: float) -> np.ndarray:
    """Time each of ``n`` DCTCP flows loses when they leave slow start together on one port.

    DCTCP starts with ``alpha = alpha_init`` (1 in Linux, ``dctcp_alpha_on_init`` = 1024/1024,
    and in ns-3's ``TcpDctcp``, ``DctcpAlphaOnInit`` = 1) and cuts its window by ``alpha / 2``
    on the first marked window (Alizadeh et al., SIGCOMM 2010, Sec. 3.1, eq. 2), so the first
    reduction is Reno's halving. The flows cut while the queue is above K, the last cut from
    the marking point: the aggregate window ``BDP + K`` falls to ``(1 - alpha / 2) (BDP + K)``.
    Below the bandwidth-delay product the port idles by the deficit ``D = BDP - W1`` packets,
    which the flows' additive increase (one MSS per RTT each, RFC 5681; DCTCP keeps it) closes
    in ``D / n`` RTTs: ``D^2 / (2 n)`` packets unsent, the same time for every flow,
    ``D^2 pkt / (2 n C)``. Zero where ``K`` alone keeps the window above the BDP (the
    SIGMETRICS 2011 condition, ``K > C RTT / 7``, is about the steady state; the first cut is
    deeper), which is why it matters at 400 Gb/s and little at 100 Gb/s.
    """
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    bdp = np.asarray(bdp_bytes, dtype=np.float64) / pkt_bytes
    w1 = (1.0 - 0.5 * alpha_init) * (bdp + k_bytes / pkt_bytes)
    deficit = np.maximum(bdp - w1, 0.0)
    return deficit**2 * pkt_bytes / (2.0 * n * np.asarray(capacity_bytes_per_s, dtype=np.float64))


def tcp_ramp_loss_s(rate_old: np.ndarray, rate_new: np.ndarray, rtt_s: np.ndarray, mss_bytes: float,
                    gain: float) -> np.ndarray:
    """Time a DCTCP flow loses taking up a larger share: congestion avoidance adds one MSS per
    RTT (RFC 5681; DCTCP keeps it, SIGCOMM 2010 Sec. 3.1), so growing by ``dr`` takes
    ``T = dr RTT^2 / MSS`` and the linear ramp leaves ``dr T / 2`` bytes unsent, which cost
    ``dr T / (2 r_new)`` at the new rate. ``gain`` scales it (fitted, `NetworkConfig.ramp_gain`)."""
    dr = np.maximum(np.asarray(rate_new) - np.asarray(rate_old), 0.0)
    rtt = np.asarray(rtt_s)
    t_ramp = dr * rtt * rtt / mss_bytes
    return gain * 0.5 * dr * t_ramp / np.maximum(np.asarray(rate_new), 1e-300)


def dcqcn_ramp_loss_s(rate_old: np.ndarray, rate_new: np.ndarray, timer_s: float,
                      fast_recovery_steps: int, rai_bytes_per_s: float, gain: float) -> np.ndarray:
    """Time a DCQCN flow loses taking up a larger share (SIGCOMM 2015, Sec. 3.1, the reaction
    point): with no congestion notification the target rate grows by ``R_AI`` per timer period
    for ``F`` periods, then by ``i R_HAI`` in the i-th hyper-increase period (``R_HAI = 10 R_AI``,
    an assumption where the paper leaves it to the NIC), the current rate closing half its gap
    to the target each period. Growing by ``dr`` takes ``(F + m) T`` with
    ``m (m + 1) / 2 R_HAI = dr - F R_AI``; the ramp's unsent bytes, about half of ``dr`` over
    that time, cost ``dr (F + m) T / (2 r_new)``."""
    dr = np.maximum(np.asarray(rate_new) - np.asarray(rate_old), 0.0)
    hai = 10.0 * rai_bytes_per_s
    rest = np.maximum(dr - fast_recovery_steps * rai_bytes_per_s, 0.0)
    m = np.ceil(0.5 * (np.sqrt(1.0 + 8.0 * rest / hai) - 1.0))
    t = (fast_recovery_steps + m + 1.0) * timer_s  # +1: the half-gap step toward the last target
    t = np.where(dr > 0, t, 0.0)
    return gain * 0.5 * dr * t / np.maximum(np.asarray(rate_new), 1e-300)


def incast_burst_bytes(first_window_bytes: np.ndarray, line_rate_bytes_per_s: np.ndarray,
                       capacity_bytes_per_s: float) -> float:
    """Peak queue that simultaneous first windows build at one port: each sender sends its
    ``first_window`` back to back at its line rate; the port drains at its capacity while the
    windows arrive (the longest one's duration). Zero if they arrive no faster than it drains."""
    w = np.asarray(first_window_bytes, dtype=np.float64)
    line = np.asarray(line_rate_bytes_per_s, dtype=np.float64)
    if w.size == 0 or line.sum() <= capacity_bytes_per_s:
        return 0.0
    dur = float(np.max(w / line))
    return max(float(w.sum()) - capacity_bytes_per_s * dur, 0.0)
