"""The structured `threshold` policy and its tuning."""

import itertools
import math

import numpy as np
import pytest

from flowherd.cluster.control_api import CoflowState, DecisionPoint, JobState, NetworkView, validate
from flowherd.control.threshold import (
    ThresholdController,
    ThresholdParams,
    bottleneck_link,
    threshold_delay_s,
    tune,
)
from flowherd.errors import ConfigError

CAP = 10e9  # bytes per second


def _case(util_b: float, slack_s: float, competing_bytes: float = 2e9, period_s: float | None = 1.0):
    """Link 1 is the bottleneck of the pending collective (4e9 bytes there vs 1e9 on link 0)."""
    job = JobState(name="a", num_gpus=8, period_s=period_s, slack_s=slack_s)
    other = CoflowState(name="b/ar", job="b", remaining_bytes=competing_bytes + 5e9, link_idx=[1, 2],
                        link_remaining_bytes=[competing_bytes, 5e9])
    mine = CoflowState(name="a/old", job="a", remaining_bytes=9e9, link_idx=[1], link_remaining_bytes=[9e9])
    view = NetworkView(now_s=3.0, link_capacity_bytes_per_s=np.full(3, CAP),
                       link_utilization=np.array([0.99, util_b, 0.99]), coflows=(other, mine),
                       jobs={"a": job})
    point = DecisionPoint(kind="collective", now_s=3.0, job="a", link_idx=[0, 1], link_bytes=[1e9, 4e9])
    return point, view


def test_bottleneck_is_the_link_slowest_to_drain_given_the_competition():
    point, view = _case(0.5, 0.1)
    assert bottleneck_link(point, view) == 1  # 4e9 B at half of 10 GB/s vs 1e9 B alone
    # link 0 at a tenth of the capacity: 1e9 B / 1 GB/s = 1 s alone > 4e9 B / 5 GB/s = 0.8 s shared
    cap = np.array([0.1 * CAP, CAP, CAP])
    v2 = NetworkView(now_s=3.0, link_capacity_bytes_per_s=cap, link_utilization=view.link_utilization,
                     coflows=view.coflows, jobs=view.jobs)
    assert bottleneck_link(point, v2) == 0
    # equal bytes over capacity: the shared link, then the busier one
    even = DecisionPoint(kind="collective", now_s=3.0, job="a", link_idx=[0, 1], link_bytes=[4e9, 4e9])
    assert bottleneck_link(even, view) == 1
    alone = NetworkView(now_s=3.0, link_capacity_bytes_per_s=np.full(3, CAP),
                        link_utilization=np.array([0.2, 0.1, 0.0]))
    assert bottleneck_link(even, alone) == 0


@pytest.mark.parametrize("util_b", [0.0, 0.3, 0.6, 0.7, 0.7000001, 0.8, 1.0])
@pytest.mark.parametrize("slack_s", [0.0, 0.05, 1.0])
def test_delays_iff_contention_above_theta_and_slack_positive(util_b, slack_s):
    # contention = max(utilization 0..1, 1/2: one competing coflow with bytes on the bottleneck)
    ctrl = ThresholdController(ThresholdParams(theta=0.7, max_delay_fraction=0.5))
    point, view = _case(util_b, slack_s)
    d = ctrl.decide(point, view)
    validate(d, point)
    should = util_b > 0.7 and slack_s > 0
    assert (d is not None and d.delay_s > 0) == should
    if should:
        # closed form: min(burst end R/C (only the other job's bytes on the bottleneck: 2e9 / 1e10),
        # slack, max_delay_fraction * period)
        assert d.delay_s == pytest.approx(min(2e9 / CAP, slack_s, 0.5 * 1.0))


def test_delay_is_monotone_in_contention():
    # the structural property the policy rests on: the delay never decreases as contention grows
    params = ThresholdParams(theta=0.6, max_delay_fraction=1.0)
    delays = [threshold_delay_s(*_case(u, 1.0), params) for u in np.linspace(0, 1, 21)]
    assert all(b >= a for a, b in itertools.pairwise(delays))
    assert delays[0] == 0 and delays[-1] > 0


def test_delay_is_capped_by_period_fraction_and_ignores_own_traffic():
    params = ThresholdParams(theta=0.1, max_delay_fraction=0.05)
    point, view = _case(0.9, 10.0, competing_bytes=50e9, period_s=2.0)
    assert threshold_delay_s(point, view, params) == pytest.approx(0.05 * 2.0)
    point, view = _case(0.9, 10.0, competing_bytes=50e9, period_s=None)  # no period: slack caps
    assert threshold_delay_s(point, view, params) == pytest.approx(5.0)  # 50e9 / 1e10 < 10 s slack


def test_competing_coflows_count_as_contention_between_their_bursts():
    # link idle now (a gap between bursts) but one competing coflow still has bytes on it: under
    # max-min it will take half the link, so the predicted contention is 1/2
    point, view = _case(0.0, 1.0)
    assert threshold_delay_s(point, view, ThresholdParams(theta=0.49)) == pytest.approx(2e9 / CAP)
    assert threshold_delay_s(point, view, ThresholdParams(theta=0.5)) == 0.0
    point, view = _case(0.0, 1.0, competing_bytes=0.0)  # nothing left on it: no contention
    assert threshold_delay_s(point, view, ThresholdParams(theta=0.0)) == 0.0


def test_only_collective_points_are_delayed():
    _, view = _case(0.9, 1.0)
    ctrl = ThresholdController()
    for kind in ("arrival", "departure", "tick"):
        assert ctrl.decide(DecisionPoint(kind=kind, now_s=3.0, job="a"), view) is None


def test_tune_finds_the_grid_minimum():
    # a synthetic objective whose minimum on the grid is known: theta 0.7, fraction 0.25
    def evaluate(p):
        return (p.theta - 0.7) ** 2 + 3 * (p.max_delay_fraction - 0.25) ** 2

    r = tune(evaluate, {"theta": [0.1, 0.4, 0.7, 0.9], "max_delay_fraction": [0.1, 0.25, 1.0]})
    assert (r.best.theta, r.best.max_delay_fraction) == (0.7, 0.25)
    assert len(r.params) == 12 and r.scores.shape == (12,)
    assert r.best_score == pytest.approx(0.0)
    # ties: the first in grid order
    assert tune(lambda p: 1.0, [ThresholdParams(theta=0.2), ThresholdParams(theta=0.3)]).best.theta == 0.2


def test_tune_rejects_bad_grids_and_scores():
    with pytest.raises(ConfigError, match="unknown parameter 'tau'"):
        tune(lambda p: 0.0, {"tau": [1.0]})
    with pytest.raises(ConfigError, match="grid is empty"):
        tune(lambda p: 0.0, [])
    with pytest.raises(ConfigError, match="finite number"):
        tune(lambda p: math.nan, {"theta": [0.5]})
    with pytest.raises(ConfigError, match=r"controller\.theta"):
        ThresholdParams(theta=1.5)
    with pytest.raises(ConfigError, match=r"controller\.max_delay_fraction"):
        ThresholdParams(max_delay_fraction=0.0)
