"""The per-iteration gate (flowherd.control.gate): turns where bursts saturate the link, deadline
order by learnt slack, the guard, and the mixed-period family's scenario."""

from pathlib import Path

import numpy as np
import pytest

from flowherd.cluster.control_api import GRANTS, CoflowState, DecisionPoint, NetworkView
from flowherd.control import make_controller
from flowherd.control.gate import BurstGate, GateParams, burst_pattern
from flowherd.errors import ConfigError
from flowherd.units import GBps

CAP = 10 * GBps  # link 0, the shared one
BUCKET = 1e9  # bytes of one bucket: 0.1 s at the link's capacity
ROOT = Path(__file__).resolve().parents[2]


def _view(coflows=(), now_s=0.0, levers="buffer"):
    return NetworkView(now_s=now_s, link_capacity_bytes_per_s=np.full(2, CAP), link_utilization=np.zeros(2),
                       coflows=tuple(coflows), levers=GRANTS[levers])


def _point(job, t, size=BUCKET):
    return DecisionPoint(kind="collective", now_s=t, job=job, task=f"{job}@{t}", size_bytes=size,
                         link_idx=[0], link_bytes=[size])


def _teach(gate, job, period_s, buckets, spacing_s, n=3, offset_s=0.0):
    """``n`` iterations of ``job``: ``buckets`` buckets ``spacing_s`` apart from each origin."""
    for k in range(n):
        for b in range(buckets):
            t = offset_s + k * period_s + b * spacing_s
            gate.learner.observe(_point(job, t), _view(now_s=t), t)


def _inflight(job, size):
    return CoflowState(name=f"{job}/x", job=job, remaining_bytes=size, link_idx=[0],
                       link_remaining_bytes=[size])


def test_the_pattern_is_the_fastest_burst_and_its_span_ends_at_its_last_byte():
    g = BurstGate()
    g.learner.observe(_point("other", 0.0), _view(), 0.0)  # link 0 is shared
    _teach(g, "a", 1.0, 4, 0.1, n=3)  # 4 buckets back to back: span 0.4 s, W 0.4 s
    span, cum = burst_pattern(g.learner.jobs["a"], 0, CAP)
    assert span == pytest.approx(0.4) and cum.tolist() == pytest.approx([1e9, 2e9, 3e9, 4e9])


def test_turns_wait_for_a_saturating_burst_when_that_adds_no_delay():
    # a's bursts saturate the link (4 back-to-back buckets, W = span = 0.4 s). At b's origin a has
    # 1 bucket in flight and 2 unstarted: r = 0.3 s. b's burst W_b = 0.4 s: sharing would delay
    # both by min(0.3, 0.4) (0.6 s in all), waiting delays b alone by 0.3 s: b waits 0.3 s, plus,
    # as both have the period 1 s (one common frame), a quarter of the free time 1 - 0.4 - 0.4
    g = BurstGate(GateParams(deadlines=False))
    g.learner.observe(_point("other", 0.0), _view(), 0.0)
    _teach(g, "a", 1.0, 4, 0.1, n=3)
    _teach(g, "b", 1.0, 4, 0.1, n=3, offset_s=0.2)  # its last bucket 2.5 s: 3.1 s opens a burst
    t = 3.1  # a's second bucket started at 3.1 (its origin at 3.0)
    for tt in (3.0, 3.1):
        g.learner.observe(_point("a", tt), _view(now_s=tt), tt)
    d = g.decide(_point("b", t), _view([_inflight("a", BUCKET)], now_s=t))
    assert d is not None and d.delay_s == pytest.approx(0.1 + 0.2 + 0.25 * 0.2)
    # a job of another period (b2: 0.8 s) gets no margin: its turn is taken anew every burst
    g2 = BurstGate(GateParams(deadlines=False))
    g2.learner.observe(_point("other", 0.0), _view(), 0.0)
    _teach(g2, "a", 1.0, 4, 0.1, n=3)
    _teach(g2, "b2", 0.8, 4, 0.1, n=3, offset_s=0.5)  # origins 0.5, 1.3, 2.1: 3.1 opens a burst
    for tt in (3.0, 3.1):
        g2.learner.observe(_point("a", tt), _view(now_s=tt), tt)
    d2 = g2.decide(_point("b2", t), _view([_inflight("a", BUCKET)], now_s=t))
    assert d2 is not None and d2.delay_s == pytest.approx(0.1 + 0.2)


def test_turns_share_rather_than_wait_behind_a_long_burst_for_a_short_one():
    # a has 0.3 s left, b's burst is 0.1 s: sharing costs 2 x 0.1 = 0.2 s < 0.3 s of waiting
    g = BurstGate(GateParams(deadlines=False))
    g.learner.observe(_point("other", 0.0), _view(), 0.0)
    _teach(g, "a", 1.0, 4, 0.1, n=3)
    _teach(g, "b", 1.0, 1, 0.1, n=3, offset_s=0.2)
    for tt in (3.0, 3.1):
        g.learner.observe(_point("a", tt), _view(now_s=tt), tt)
    assert g.decide(_point("b", 3.1), _view([_inflight("a", BUCKET)], now_s=3.1)) is None


def test_turns_never_wait_for_a_burst_that_does_not_saturate_the_link():
    # a's buckets are released every 0.15 s by its compute (W 0.4 s over a 0.55-s span: 73%): a
    # waiting burst would idle the link between a's buckets
    g = BurstGate(GateParams(deadlines=False))
    g.learner.observe(_point("other", 0.0), _view(), 0.0)
    _teach(g, "a", 1.0, 4, 0.15, n=3)
    _teach(g, "b", 1.0, 4, 0.1, n=3, offset_s=0.3)
    for tt in (3.0, 3.15):
        g.learner.observe(_point("a", tt), _view(now_s=tt), tt)
    assert g.decide(_point("b", 3.3), _view([_inflight("a", BUCKET)], now_s=3.3)) is None


def test_deadline_order_defers_a_bucket_with_slack_behind_one_without():
    # a: 4 buckets 0.15 s apart (fastest span 0.55 s); at its 2nd bucket (3.15 s, origin 3.0) it has
    # 3 buckets (0.3 s) left: slack 3.0 + 0.55 - 3.15 - 0.3 = 0.1 s. b (4 back-to-back buckets, span
    # 0.4 s) is late: origin 2.75, its last bucket started at 3.10 and has 0.5 GB in flight; slack
    # max(2.75 + 0.4 - 3.15, 0) = 0. a's bucket waits for b's bytes to drain: 0.05 s
    g = BurstGate(GateParams(turns=False))
    g.learner.observe(_point("other", 0.0), _view(), 0.0)
    _teach(g, "a", 1.0, 4, 0.15, n=3)
    _teach(g, "b", 1.0, 4, 0.1, n=2, offset_s=0.75)
    for who, tt in (("b", 2.75), ("b", 2.85), ("b", 2.95), ("a", 3.0)):
        g.learner.observe(_point(who, tt), _view(now_s=tt), tt)
    # b's last bucket, in its tail (no slack), never waits for a's bytes
    assert g.decide(_point("b", 3.10), _view([_inflight("a", BUCKET)], now_s=3.10)) is None
    d = g.decide(_point("a", 3.15), _view([_inflight("b", 0.5e9)], now_s=3.15))
    assert d is not None and d.delay_s == pytest.approx(0.05)


def test_the_guard_stops_a_job_whose_waiting_iterations_are_longer():
    from flowherd.control.gate import _Guard

    g = BurstGate(GateParams(trial=2, tolerance=0.0))
    guard = _Guard()
    guard.waited.extend([1.2, 1.3])
    guard.free.extend([1.0, 1.0])
    g.guards["a"] = guard
    g.learner.observe(_point("other", 0.0), _view(), 0.0)
    _teach(g, "a", 1.0, 1, 0.1, n=2)
    g._measure("a")
    assert guard.stopped
    g.learner.observe(_point("a", 2.0), _view(now_s=2.0), 2.0)
    assert g.decide(_point("a", 2.05), _view([_inflight("other", BUCKET)], now_s=2.05)) is None


def test_gate_parameters_are_checked():
    with pytest.raises(ConfigError, match=r"saturation must be in \(0, 1\].*params.saturation"):
        make_controller("gate", saturation=0.0)
    with pytest.raises(ConfigError, match=r"trial must be an int >= 1"):
        GateParams(trial=0)


def test_the_mixed_period_family_draws_each_members_start_offsets_from_its_seed():
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    base = read_scenario_mapping(str(ROOT / "benchmarks" / "scenarios" / "control_mixed_periods.yaml"))
    subs = [tuple(j.submit_s for j in scenario_from_mapping({**base, "seed": s}).jobs) for s in (0, 1, 0)]
    assert subs[0] == subs[2] and subs[0] != subs[1]
    assert all(0.0 <= t < 0.3 for t in subs[0] + subs[1])
    sc = scenario_from_mapping({**base, "seed": 0})
    assert len(sc.jobs) >= 4 and sc.background is None
