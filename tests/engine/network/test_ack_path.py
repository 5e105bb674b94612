"""ACKs behind the receiver's own data (flowherd.engine.network.ack_path) on hand-solvable cases."""

import math

import numpy as np
import pytest

from flowherd.engine.core import Engine
from flowherd.engine.network import network_from_mapping
from flowherd.engine.network.ack_path import (
    ReverseQueue,
    ack_delay_loss_s,
    delivery_time_s,
    reverse_queue,
    two_way_queue_bytes,
    window_excess_bytes,
)
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import KB, MB, Gbps, us

RWND = 187.5 * KB  # the validation's receive window: 1.5 BDP of 100 Gb/s at 10 us
KW = dict(rwnd_bytes=RWND, init_window_bytes=10 * 1448.0, growth=2.0, setup_rtts=1)


def _steady(cap_bytes: float, line: float, rate: float) -> ReverseQueue:
    # one reverse flow whose window reached rwnd long ago and runs for ever
    return ReverseQueue(t_bdp_s=np.array([-1.0]), slope_bytes_per_s=np.array([1e18]),
                        cap_bytes=np.array([cap_bytes]), t_end_s=np.array([math.inf]),
                        rate_bytes_per_s=np.array([rate]), line_bytes_per_s=line)


def test_the_extra_rtt_is_the_queued_excess_over_the_line_rate():
    # host B sends to C inside its leaf (RTT 4.24 us, C's NIC idle) with its window at rwnd:
    # B's NIC holds rwnd - C RTT; a flow A -> B across the leaves (RTT 8.3 us) sees its round
    # trip grow by that over the line rate, and with its window at rwnd moves at rwnd / RTT'
    line = 100 * Gbps
    excess = window_excess_bytes(RWND, line, 4.24 * us)
    assert excess == pytest.approx(RWND - line * 4.24 * us, rel=1e-12)
    q = _steady(excess, line, line)
    assert q.delay_s(0.0) == pytest.approx(excess / line, rel=1e-12)
    size, rtt = 2 * MB, 8.3 * us
    v = RWND / (rtt + excess / line)  # 9.5 GB/s of 12.5: window-limited
    assert v < line
    t = delivery_time_s(size, line, rtt, 0.0, q, fresh=False, **KW)
    assert t == pytest.approx(size / v, rel=1e-12)
    # an idle ACK path leaves it at line rate: the loss is the difference
    assert ack_delay_loss_s(size, line, rtt, 0.0, q, fresh=False, **KW) == pytest.approx(
        size / v - size / line, rel=1e-9)


def test_two_hosts_each_sending_to_the_other_move_a_window_per_burst_cycle():
    # two-way traffic (Zhang, Shenker, Clark 1991): a cycle is the burst's drain rwnd / C plus
    # the ACK bunch's one-way trip RTT / 2; the queue the ACKs wait behind is rwnd - r RTT / 2
    line, rtt = 100 * Gbps, 8.3 * us
    qb = float(two_way_queue_bytes(RWND, line, rtt))
    assert qb == pytest.approx(RWND - line * rtt / 2, rel=1e-12)
    rate = RWND / (rtt + qb / line)
    assert rate == pytest.approx(RWND / (RWND / line + rtt / 2), rel=1e-12)
    # in the engine: each flow of the pair loses time against the same flow alone, about what
    # that cycle costs over the bytes sent after both windows reached rwnd (not the smooth
    # half-and-half split, which would leave both at line rate)
    fab = _fabric()
    cfg = _tcp()
    size = 4 * MB
    alone = _run(fab, [(3, 8, size)], cfg)
    pair = _run(fab, [(3, 8, size), (8, 3, size)], cfg)
    r = 100 * Gbps * cfg.wire_efficiency
    v = RWND / (RWND / r + rtt / 2)
    full = size * (1 / v - 1 / r)
    assert pair[0] == pytest.approx(pair[1], rel=1e-12)  # symmetric
    assert 0.6 * full < pair[0] - alone[0] < full


def test_no_effect_when_the_reverse_direction_is_idle():
    fab = _fabric()
    flows = [(3, 8, 2 * MB), (0, 9, 1 * MB), (4, 12, 3 * MB)]  # no host both receives and sends
    with_rwnd = _run(fab, flows, _tcp())
    without = _run(fab, flows, _tcp(rwnd="0B"))
    assert with_rwnd == without  # bit for bit
    idle = ReverseQueue.idle()
    assert ack_delay_loss_s(2 * MB, 12e9, 8e-6, 0.0, idle, fresh=True, **KW) == 0.0


def test_a_chain_of_acks_alternates_full_and_empty_queues():
    # B -> C whose own ACKs wait behind C's queue: only the part of its excess its ACK delay
    # does not absorb queues at B (never below zero)
    line = 100 * Gbps
    args = dict(start_s=np.array([0.0]), rate_bytes_per_s=np.array([line]), rtt_s=np.array([4.24 * us]),
                end_s=np.array([1.0]), size_bytes=np.array([1e9]), line_bytes_per_s=line, **KW)
    excess = window_excess_bytes(RWND, line, 4.24 * us)
    t_full = 1e-3  # every ramp has reached its cap
    alone = reverse_queue(**args)
    assert alone.queue_bytes(t_full) == pytest.approx(excess, rel=1e-12)
    part = reverse_queue(**args, children=(_steady(0.4 * excess, line, line),))
    assert part.queue_bytes(t_full) == pytest.approx(0.6 * excess, rel=1e-12)
    full = reverse_queue(**args, children=(_steady(2 * excess, line, line),))
    assert full.queue_bytes(t_full) == 0.0
    # before the reverse flow's window passes its BDP nothing queues: setup + slow-start rounds
    rounds = math.ceil(math.log2(line * 4.24 * us / KW["init_window_bytes"]))
    t_bdp = (1 + rounds) * 4.24 * us
    assert alone.t_bdp_s[0] == pytest.approx(t_bdp, rel=1e-12)
    assert alone.queue_bytes(t_bdp * 0.999) == 0.0 and alone.queue_bytes(t_bdp + 1e-6) > 0.0


def test_slow_start_rounds_take_the_ack_delay_by_hand():
    # IW 1000 B, doubling, RTT 1 s, ACK delay 1 s, rate 1000 B/s, no setup: with the delay the
    # the first RTT (2 s) carries 1000 B, then the window (2000 B) fills r (RTT + d): 6000 B at
    # line rate, done at 8 s; without it the window fills r RTT at once: 7000 B in 7 s
    kw = dict(rwnd_bytes=1e12, init_window_bytes=1000.0, growth=2.0, setup_rtts=0)
    q = _steady(1000.0, 1000.0, 1000.0)
    assert delivery_time_s(7000.0, 1000.0, 1.0, 0.0, q, fresh=True, **kw) == pytest.approx(8.0)
    idle = ReverseQueue.idle()
    assert delivery_time_s(7000.0, 1000.0, 1.0, 0.0, idle, fresh=True, **kw) == pytest.approx(7.0)
    assert ack_delay_loss_s(7000.0, 1000.0, 1.0, 0.0, q, fresh=True, **kw) == pytest.approx(1.0)


def test_bytes_are_conserved_with_the_ack_path():
    fab = _fabric()
    flows = [(3, 8, 2 * MB), (8, 9, 2 * MB), (9, 3, 1 * MB), (8, 3, 3 * MB), (0, 1, 2 * MB)]
    eng = Engine(fab, make_router("shortest", fab), network=_tcp())
    ids = [eng.add_coflow(s, d, size, at_s=1e-5 * i) for i, (s, d, size) in enumerate(flows)]
    eng.run()
    ref = Engine(fab, make_router("shortest", fab))
    for i, (s, d, size) in enumerate(flows):
        ref.add_coflow(s, d, size, at_s=1e-5 * i)
    ref.run()
    np.testing.assert_allclose(eng.result().link_bytes, ref.result().link_bytes, rtol=1e-9, atol=1e-3)
    assert eng.network._ack.num_delayed > 0  # the mechanism acted
    assert all(eng.coflow_finish_s(c) >= ref.coflow_finish_s(c) for c in ids)


def test_receive_window_config():
    assert network_from_mapping({"model": "tcp", "rwnd": "187.5KB"}).rwnd_bytes == 187500
    assert network_from_mapping("tcp").rwnd_bytes == 0.0  # off by default
    with pytest.raises(ConfigError, match=r"network\.rwnd"):
        network_from_mapping({"model": "tcp", "rwnd": -5})
    with pytest.raises(ConfigError, match=r"network\.rwnd.*tcp"):
        network_from_mapping({"model": "roce", "rwnd": "100KB"})


def _fabric():
    return leaf_spine(servers=16, gpus_per_server=1, leaves=2, spines=1, nic_bandwidth_bytes_per_s=100 * Gbps,
                      nvlink_bandwidth_bytes_per_s=None, oversubscription=2.0, link_latency_s=1 * us)


def _tcp(rwnd=f"{int(RWND)}B"):
    return network_from_mapping({"model": "tcp", "switch": "shallow", "setup_rtts": 1, "rwnd": rwnd})


def _run(fab, flows, cfg):
    eng = Engine(fab, make_router("shortest", fab), network=cfg)
    ids = [eng.add_coflow(s, d, size) for s, d, size in flows]
    eng.run()
    return [eng.coflow_finish_s(c) for c in ids]
