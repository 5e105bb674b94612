"""The congestion model's per-update passes behind few arguments: its per-link state packed in
three flat arrays, its constants in two.

A compiled call costs about half a microsecond per array argument to convert and check (the
exported wrapper, `flowherd.sim.aot`), which for `kernels.rates_pass` (58 arguments) was more
than its work on the one to five flows a cluster run's rate update re-allocates. `rates_step`
and `done_step` take the rows of ``lf`` (floats), ``li`` (integers) and ``lb`` (flags), each
``L`` links long in the order of the constants below, and call the passes on views of them:
the same code on the same data, so the same numbers.
"""

from __future__ import annotations

from flowherd.sim.aot import kernel
from flowherd.sim.network.kernels import done_pass, rates_pass

__all__ = ["CF", "CI", "LB", "LF", "LI", "done_step", "rates_step"]

#: rows of the float link state ``lf``
LF = ("rtt_part", "q", "q_max", "cap_wire", "arrive", "s_dload", "s_rtt", "q_t", "q_int", "mark", "load",
      "marked", "cap")
#: rows of the integer link state ``li``
LI = ("link_src", "link_dst", "s_cnt", "pos", "dq_cls")
#: rows of the flags ``lb``
LB = ("is_net", "scratch", "src_is_switch")
#: the float constants ``cf`` and the integer ones ``ci`` (``tcp`` 0 or 1)
CF = ("iw", "growth", "mss", "ramp_gain", "dcqcn_timer", "dcqcn_rai", "wire_eff", "iw_wire", "cnp_interval",
      "pfc_xoff", "port_buffer", "sat_rtol", "k_bytes", "pkt_bytes", "q_cap_bytes")
CI = ("tcp", "setup_rtts", "dcqcn_steps")

(_RTT_PART, _Q, _Q_MAX, _CAP_WIRE, _ARRIVE, _S_DLOAD, _S_RTT, _Q_T, _Q_INT, _MARK, _LOAD, _MARKED,
 _CAP) = range(13)
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
