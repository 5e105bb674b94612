"""The per-option features of the paths spaces (`flowherd.control.paths_agent`): the own-pair rate
tells an option that crowds the collective's own pairs onto one link from one that spreads them,
where the rate a new flow gets cannot (docs/rl-structure.md, Theorem 2 under A8')."""

import numpy as np
import pytest

from flowherd.cluster.control_api import DecisionPoint, NetworkView
from flowherd.control.paths_agent import OPTION_FEATURES, OPTIONS, own_rate, prepare
from flowherd.control.paths_rule import rule_logits

_CAP = 100.0
_RATE = OPTION_FEATURES.index("rate_over_capacity")
_OWN = OPTION_FEATURES.index("own_rate_over_capacity")


def test_own_rate_is_the_max_min_share_with_the_own_pairs_counted():
    # a full link of 100 with one flow of others: one own pair gets C / 2 = 50, four get C / 5 = 20
    # each; with 60 unused (the other flow sends 40) one own pair takes the 60 and four take
    # max(60 / 4, 100 / 5) = 20 each; the option's rate is its slowest link's
    free, cap = np.array([0.0, 60.0]), np.array([_CAP, _CAP])
    flows = np.array([1.0, 1.0])
    assert own_rate(free[:1], cap[:1], flows[:1], np.array([1.0])) == pytest.approx(50.0)
    assert own_rate(free[:1], cap[:1], flows[:1], np.array([4.0])) == pytest.approx(20.0)
    assert own_rate(free[1:], cap[1:], flows[1:], np.array([1.0])) == pytest.approx(60.0)
    assert own_rate(free[1:], cap[1:], flows[1:], np.array([4.0])) == pytest.approx(20.0)
    assert own_rate(free, cap, flows, np.array([1.0, 4.0])) == pytest.approx(20.0)


def _spines_point():
    # four GPU pairs, each with two candidate paths: over spine 0 (link 0) or spine 1 (link 1), and
    # its own NIC link (2 + p); both spine links full with one flow of others; the default routes
    # (ECMP) hash all four pairs onto spine 0
    cands = tuple((np.array([0, 2 + p]), np.array([1, 2 + p])) for p in range(4))
    pair_bytes = 1e6
    point = DecisionPoint(kind="collective", now_s=0.0, job=None, size_bytes=4 * pair_bytes,
                          link_idx=np.array([0, 2, 3, 4, 5]),
                          link_bytes=np.array([4 * pair_bytes] + [pair_bytes] * 4),
                          src_gpu=np.arange(4), dst_gpu=np.arange(4) + 4, candidate_paths=cands)
    view = NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(6, _CAP),
                       link_utilization=np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
                       link_flows=np.array([1, 1, 0, 0, 0, 0]))
    return point, view


def test_an_option_crowding_its_own_pairs_on_one_spine_scores_below_one_spreading_them():
    point, view = _spines_point()
    obs, _mask, _default, ctx = prepare("paths-raw", point, view)
    feats = obs[:len(OPTIONS) * len(OPTION_FEATURES)].reshape(len(OPTIONS), len(OPTION_FEATURES))
    widest, cand0, cand1 = OPTIONS.index("widest"), OPTIONS.index("cand0"), OPTIONS.index("cand1")
    assert sorted(ctx.choices[widest]) == [0, 0, 1, 1]  # the widest share spreads the pairs 2 + 2
    assert ctx.choices[cand0] == (0, 0, 0, 0) and ctx.choices[cand1] == (1, 1, 1, 1)
    # the rate a new flow gets is C / 2 on every option: it cannot tell them apart
    assert feats[[0, widest, cand0, cand1], _RATE] == pytest.approx([0.5] * 4)
    # with the own pairs counted: 2 per spine get C / 3, 4 on one spine get C / 5
    assert feats[widest, _OWN] == pytest.approx(1 / 3, rel=1e-6)
    assert feats[[0, cand0, cand1], _OWN] == pytest.approx([0.2] * 3, rel=1e-6)
    # the index of Theorem 2 (own pairs counted) ranks the widest share first
    iobs, imask, _d, ictx = prepare("paths-index", point, view)
    assert ictx.order[0] == widest
    # a rule-family member that weighs the own-pair rate prefers it; one that weighs the new-flow
    # rate alone scores every option alike
    w_own = np.zeros(6)
    w_own[_OWN] = 1.0
    w_rate = np.zeros(6)
    w_rate[_RATE] = 1.0
    own_logits = np.where(imask, rule_logits(iobs, w_own, 0.0, 0.0), -np.inf)
    assert ictx.order[int(np.argmax(own_logits)) // 2] == widest
    rate_logits = rule_logits(iobs, w_rate, 0.0, 0.0)[0::2][imask[0::2]]
    assert imask[0::2].sum() == 4 and rate_logits == pytest.approx([0.5] * 4)
