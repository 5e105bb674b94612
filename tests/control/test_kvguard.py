"""The `kv-guard` policy: route training pairs around KV-cache transfers, hold a collective while
enough KV bytes are still to cross its links, never longer than the transfers need."""

import math

import numpy as np
import pytest

from flowherd.cluster.control_api import GRANTS, DecisionPoint, NetworkView, TransferState
from flowherd.control import make_controller
from flowherd.control.kvguard import KvGuardController, KvGuardParams, hold_threshold, kv_hold_s
from flowherd.errors import ConfigError

GBps = 1e9
MiB = 2**20


def view(transfers, flows=None, levers="buffer", now=0.0):
    n = 4
    return NetworkView(now_s=now, link_capacity_bytes_per_s=np.full(n, 10 * GBps),
                       link_utilization=np.zeros(n),
                       levers=GRANTS[levers], transfers=tuple(transfers),
                       link_flows=np.zeros(n, np.int64) if flows is None else np.asarray(flows))


def kv(links, remaining, started=True, start_s=0.0):
    links = np.asarray(links)
    return TransferState(name="svc/b0/kv", job="svc", started=started, start_s=start_s,
                         remaining_bytes=float(remaining * links.size), link_idx=links,
                         link_remaining_bytes=np.full(links.size, float(remaining)))


# one GPU pair with two candidate paths: over links (0, 2) or over links (1, 3)
POINT = DecisionPoint(kind="collective", now_s=0.0, job="train", link_idx=[0, 2], link_bytes=[1e9, 1e9],
                      src_gpu=[0], dst_gpu=[1], candidate_paths=((np.array([0, 2]), np.array([1, 3])),))


def test_paths_go_around_a_kv_transfer_and_then_no_hold_is_needed():
    d = KvGuardController(KvGuardParams(alpha=math.inf)).decide(POINT, view([kv([0], 64 * MiB)]))
    assert d.path_choice == (1,) and d.delay_s == 0.0


def test_a_collective_that_must_share_holds_until_the_transfer_is_expected_done():
    # both paths cross link 2's KV transfer: 100 MB left at 10 GB/s alone on it -> 10 ms; the
    # collective puts 1 GB there, more than the transfer: holding is free (W <= B)
    d = KvGuardController(KvGuardParams(alpha=0.0, paths=False)).decide(
        POINT, view([kv([2], 100e6)], flows=[0, 0, 1, 0]))
    assert d.path_choice is None
    assert d.delay_s == pytest.approx(0.01)
    # a transfer expected to start in 2 ms adds those 2 ms
    d = KvGuardController(KvGuardParams(alpha=0.0, paths=False)).decide(
        POINT, view([kv([2], 100e6, started=False, start_s=0.002)]))
    assert d.delay_s == pytest.approx(0.012)


def test_hold_follows_the_optimal_threshold():
    # W = 3 GB waiting against B = 1 GB, no slack, C = 10 GB/s: threshold max(B, 0) + alpha B;
    # alpha 1 -> 2 GB: go; alpha 2 -> 3 GB: hold (capped)
    v = view([kv([2], 3e9)], flows=[0, 0, 1, 0])
    guard = lambda **kw: KvGuardController(KvGuardParams(**{"paths": False, "max_hold_s": 1.0, **kw}))  # noqa: E731
    assert guard(alpha=1.0).decide(POINT, v) is None
    assert guard(alpha=2.0).decide(POINT, v).delay_s == pytest.approx(0.3)
    assert guard(alpha=2.0, hold=False).decide(POINT, v) is None
    assert guard(alpha=math.inf, max_hold_s=0.004).decide(POINT, v).delay_s == pytest.approx(0.004)


def test_hold_threshold_closed_form():
    # Theorem 1 of docs/rl-structure.md: max(B, s C) + alpha B
    assert hold_threshold(1e9, 0.0, 1e10, 0.0) == pytest.approx(1e9)
    assert hold_threshold(1e9, 0.5, 1e10, 1.0) == pytest.approx(5e9 + 1e9)
    assert hold_threshold(1e9, 0.5, 1e10, math.inf) == math.inf


def test_transfers_beyond_the_lookahead_do_not_count():
    v = view([kv([0, 2], 100e6, started=False, start_s=0.5)])
    assert KvGuardController(KvGuardParams(lookahead_s=0.05)).decide(POINT, v) is None
    d = KvGuardController(KvGuardParams(lookahead_s=1.0, max_hold_s=1.0, paths=False)).decide(POINT, v)
    assert d.delay_s == pytest.approx(0.5 + 0.01)


def test_the_hold_time_shares_each_link_among_its_flows():
    # three flows on link 2 (the transfer and two others): a third of 10 GB/s for 100 MB
    assert kv_hold_s(np.array([2]), view([kv([2], 100e6)], flows=[0, 0, 3, 0]), 0.05) == pytest.approx(0.03)


def test_no_transfer_no_decision_and_grants_are_respected():
    assert KvGuardController().decide(POINT, view([])) is None
    # a grant without delays or paths: nothing to decide with
    from flowherd.cluster.control_api import Levers

    v = NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(4, 10 * GBps), link_utilization=np.zeros(4),
                    levers=Levers(name="none", delay=False, paths=False), transfers=(kv([2], 1e8),))
    assert KvGuardController().decide(POINT, v) is None


def test_registry_name_and_bad_parameters():
    c = make_controller("kv-guard", alpha=2.0)
    assert c.name == "kv-guard" and c.params.alpha == 2.0
    with pytest.raises(ConfigError, match="alpha"):
        KvGuardParams(alpha=-1.0)
    with pytest.raises(ConfigError, match="paths"):
        KvGuardParams(paths="yes")


def test_holds_are_counted_and_a_collective_off_the_kv_links_is_never_held():
    g = KvGuardController(KvGuardParams(alpha=math.inf, paths=False))
    g.reset(0)
    # the transfer crosses link 1 only; the collective's default route is links 0 and 2
    assert g.decide(POINT, view([kv([1], 100e6)], flows=[0, 1, 0, 0])) is None
    assert (g.holds, g.held_s) == (0, 0.0)
    # on link 2 it shares: held 10 ms, counted
    d = g.decide(POINT, view([kv([2], 100e6)], flows=[0, 0, 1, 0]))
    assert d.delay_s == pytest.approx(0.01)
    assert g.holds == 1 and g.held_s == pytest.approx(0.01)
    g.reset(1)
    assert (g.holds, g.held_s) == (0, 0.0)
