"""The agent's action spaces: the structured one is the flowherd policy's parameterization,
the raw one a bare delay."""

import numpy as np
import pytest

from flowherd.cluster.control_api import GRANTS, CoflowState, DecisionPoint, JobState, Levers, NetworkView
from flowherd.control.agent import RAW_DELAY_FRACTIONS, action_space_size, decide, distinct_decisions, prepare
from flowherd.control.herd import ACTIONS, HerdController, HerdParams
from flowherd.control.threshold import ThresholdController, ThresholdParams
from flowherd.errors import ConfigError

CAP = 1e10  # bytes per second


def _herd():
    """The flowherd policy with its yield to jobs with less work left (off by default)."""
    return HerdController(HerdParams(yield_fraction=1.0))


def _view(levers="buffer"):
    jobs = {n: JobState(name=n, num_gpus=8, period_s=2.0, solo_period_s=1.0, iterations_total=r,
                        iterations_done=0) for n, r in (("short", 2), ("long", 8))}
    cof = [CoflowState(name="s", job="short", remaining_bytes=3e9, link_idx=[0], link_remaining_bytes=[3e9])]
    lv = GRANTS[levers] if isinstance(levers, str) else levers
    return NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(2, CAP), link_utilization=np.zeros(2),
                       coflows=tuple(cof), jobs=jobs, levers=lv)


def _point(job):
    return DecisionPoint(kind="collective", now_s=0.0, job=job, task=f"{job}/t", size_bytes=1e9, link_idx=[0],
                         link_bytes=[1e9])


def test_structured_default_is_the_flowherd_policys_decision():
    # under buffer the policy holds "long" back while "short" (less work left) drains link 0
    view = _view()
    herd = _herd().decide(_point("long"), view)
    assert herd is not None and herd.delay_s == pytest.approx(0.3)
    mask, default, ctx = prepare("structured", _herd(), _point("long"), view)
    assert mask.shape == (len(ACTIONS),) and mask[default] and ACTIONS[default][1]
    d = decide("structured", default, ctx, _herd(), _point("long"), view)
    assert d.delay_s == pytest.approx(herd.delay_s) and d.priority is None
    # not buffering starts it now
    now = ACTIONS.index((ACTIONS[default][0], False))
    assert decide("structured", now, ctx, _herd(), _point("long"), view) is None
    # the job with less left is not held: buffering cannot delay it, and the mask says so
    mask, default, _ = prepare("structured", _herd(), _point("short"), view)
    assert not ACTIONS[default][1] and not any(m for m, (_c, b) in zip(mask, ACTIONS, strict=True) if b)


def test_raw_actions_are_fractions_of_the_period_and_need_the_delay_lever():
    view = _view()
    mask, default, ctx = prepare("raw", _herd(), _point("long"), view)
    assert mask.all() and mask.shape == (len(RAW_DELAY_FRACTIONS),)
    assert RAW_DELAY_FRACTIONS[default] * 2.0 == pytest.approx(0.25)  # nearest level to the policy's 0.3 s
    for a, f in enumerate(RAW_DELAY_FRACTIONS):
        d = decide("raw", a, ctx, _herd(), _point("long"), view)
        assert (d.delay_s if d is not None else 0.0) == pytest.approx(f * 2.0)  # the current period
    paths_only = Levers(name="custom", delay=False, paths=True)
    mask, default, _ = prepare("raw", _herd(), _point("long"), _view(paths_only))
    assert mask.tolist() == [f == 0 for f in RAW_DELAY_FRACTIONS] and default == 0


def test_unknown_space_and_bad_actions_are_one_clear_error():
    with pytest.raises(ConfigError, match="action space must be one of"):
        action_space_size("free")
    view = _view()
    _, _, ctx = prepare("raw", _herd(), _point("long"), view)
    with pytest.raises(ConfigError, match=r"action must be an int in 0\.\.5"):
        decide("raw", 6, ctx, _herd(), _point("long"), view)


@pytest.mark.parametrize(("slack_s", "period_s", "competing_bytes", "want_s"),
                         [(0.0, 2.0, 3e9, 0.0),   # no slack: the threshold rule never waits
                          (0.1, 2.0, 3e9, 0.1),   # capped by the slack
                          (5.0, 2.0, 3e9, 0.3),   # the competing burst's end, 3e9 B / 1e10 B/s
                          (5.0, 0.2, 3e9, 0.1),   # capped by max_delay_fraction x period = 0.5 x 0.2
                          (5.0, 2.0, 0.0, 0.0)])  # nothing competing: contention 0, no wait
def test_structured_buffer_action_is_the_threshold_policy_at_theta_zero(slack_s, period_s, competing_bytes,
                                                                         want_s):
    # where the flowherd policy itself does not shift the collective, "buffer" is exactly the threshold
    # policy's decision at theta = 0 (flowherd.control.threshold: wait min(R/C, slack, f x period)),
    # and "do not buffer" is no delay; a point where the threshold rule would not wait offers no buffer
    jobs = {"long": JobState(name="long", num_gpus=8, period_s=period_s, solo_period_s=1.0,
                             iterations_total=8, iterations_done=0, slack_s=slack_s)}
    cof = [CoflowState(name="s", job="other", remaining_bytes=competing_bytes, link_idx=[0],
                       link_remaining_bytes=[competing_bytes])]
    view = NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(2, CAP), link_utilization=np.zeros(2),
                       coflows=tuple(cof), jobs=jobs, levers=GRANTS["buffer"])
    ctrl = HerdController()
    assert ctrl.decide(_point("long"), view) is None or ctrl.decide(_point("long"), view).delay_s == 0
    mask, default, ctx = prepare("structured", HerdController(), _point("long"), view)
    threshold = ThresholdController(ThresholdParams(theta=0.0, max_delay_fraction=0.5)).decide(_point("long"),
                                                                                               view)
    assert (threshold.delay_s if threshold is not None else 0.0) == pytest.approx(want_s, abs=1e-12)
    assert not ACTIONS[default][1]  # the policy's own action does not buffer here
    buffer = ACTIONS.index((ACTIONS[default][0], True))
    assert mask[buffer] == (threshold is not None)
    if threshold is not None:
        got = decide("structured", buffer, ctx, HerdController(), _point("long"), view)
        assert got.delay_s == threshold.delay_s
    assert decide("structured", default, ctx, HerdController(), _point("long"), view) is None


def test_distinct_decisions_counts_classes_only_where_the_grant_has_them():
    both = np.ones(len(ACTIONS), bool)
    no_buffer = np.array([not d for _c, d in ACTIONS])
    assert distinct_decisions("structured", both, GRANTS["buffer"]) == 2  # buffer or not
    assert distinct_decisions("structured", no_buffer, GRANTS["buffer"]) == 1  # no choice
    k = GRANTS["priority"].priority_classes
    assert distinct_decisions("structured", both, GRANTS["priority"]) == 2 * k
    two = Levers(name="custom", delay=True, paths=True, priority_classes=2)
    assert distinct_decisions("structured", no_buffer, two) == 2  # classes 1..7 clip to class 1
    raw = np.array([True, False, True, False, False, False])
    assert distinct_decisions("raw", raw, GRANTS["buffer"]) == 2
