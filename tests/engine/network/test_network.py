"""The congestion model (flowherd.engine.network) on hand-solvable cases."""

import math

import numpy as np
import pytest

from flowherd.cluster.control_types import MARKED_PRIORITY_BASE
from flowherd.engine.core import Engine
from flowherd.engine.network import (
    SWITCHES,
    NetworkConfig,
    fluid,
    load_network,
    network_from_mapping,
    use_network,
)
from flowherd.errors import ConfigError
from flowherd.fabric.core import NodeKind
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import KB, MB, Gbps, us


def _fabric(hosts=8, leaves=2, uplink_over=1.0, gbps=100):
    return leaf_spine(servers=hosts, gpus_per_server=1, leaves=leaves, spines=1,
                      nic_bandwidth_bytes_per_s=gbps * Gbps, nvlink_bandwidth_bytes_per_s=None,
                      oversubscription=uplink_over, link_latency_s=1 * us)


def _run(fab, flows, network):
    eng = Engine(fab, make_router("shortest", fab), network=network)
    ids = [eng.add_coflow(s, d, size, at_s=t) for s, d, size, t in flows]
    eng.run()
    return eng, ids


def _link(fab, src_name, dst_name):
    names = [fab.node_name(i) for i in range(fab.num_nodes)]
    for lnk in range(fab.num_directed_links):
        if names[fab.link_src[lnk]] == src_name and names[fab.link_dst[lnk]] == dst_name:
            return lnk
    raise AssertionError(f"no link {src_name} -> {dst_name}")


def test_ideal_is_todays_engine_bit_for_bit():
    fab = _fabric()
    flows = [(1, 0, 3e6, 0.0), (5, 0, 2e6, 1e-5), (6, 2, 4e6, 0.0), (7, 3, 1e6, 2e-4)]
    plain, _ = _run(fab, flows, None)
    ideal, _ = _run(fab, flows, network_from_mapping({"model": "ideal"}))
    with use_network(NetworkConfig()):
        ctx, _ = _run(fab, flows, None)
    assert ideal.network is None and ctx.network is None
    for other in (ideal, ctx):
        a, b = plain.result(), other.result()
        assert np.array_equal(a.coflow_finish_s, b.coflow_finish_s)
        assert np.array_equal(a.link_bytes, b.link_bytes)
        assert np.array_equal(a.link_busy_s, b.link_busy_s)
        assert a.num_rate_updates == b.num_rate_updates


@pytest.mark.parametrize("model", ["roce", "tcp"])
def test_one_flow_alone_keeps_line_rate_and_zero_queue(model):
    fab = _fabric()
    cfg = network_from_mapping({"model": model, "switch": "shallow"})
    size = 10 * MB
    eng, (c,) = _run(fab, [(5, 0, size, 0.0)], cfg)
    rate = 100 * Gbps * cfg.wire_efficiency  # line rate, in payload
    lat = 4 * us  # host-leaf, leaf-spine, spine-leaf, leaf-host
    expect = size / rate + lat
    if model == "tcp":  # plus slow start from 10 segments (fluid.slow_start_loss_s, by hand)
        pkt = cfg.payload_bytes + cfg.overhead_bytes  # serialized on each hop: 100G NICs, 400G uplinks
        rtt = 8 * us + 2 * pkt / (100 * Gbps) + 2 * pkt / (400 * Gbps)
        w0 = 10 * cfg.payload_bytes
        k = math.ceil(math.log2(rate * rtt / w0))
        expect += k * rtt - w0 * (2**k - 1) / rate
    assert eng.coflow_finish_s(c) == pytest.approx(expect, rel=1e-9)
    st = eng.network.stats(eng.now_s)
    assert st.queue_max_bytes.max() == 0.0 and st.drop_bytes.sum() == 0.0 and st.pause_s.sum() == 0.0


def test_pfc_pauses_a_victim_that_shares_only_the_upstream_link():
    fab = _fabric(hosts=16, leaves=2, uplink_over=1.0)  # 8 x 100G hosts per leaf, 800G uplink
    cfg = network_from_mapping({"model": "roce", "port_buffer": "1MB", "pfc_xoff": "100KB",
                                "pfc_xon": "80KB"})
    victim = (15, 1, 20 * MB, 0.0)  # leaf 1 -> host 1: crosses spine->leaf0, not leaf0->host0
    bystander = (2, 3, 20 * MB, 0.0)  # inside leaf 0: shares nothing with the incast
    incast = [(8 + i, 0, 4 * MB, 0.0) for i in range(7)]
    alone, (v0, b0) = _run(fab, [victim, bystander], cfg)
    eng, ids = _run(fab, [victim, bystander, *incast], cfg)
    st = eng.network.stats(eng.now_s)
    up = _link(fab, "spine0", "leaf0")
    assert st.pause_s[up] > 0 and st.num_pauses >= 1
    slowed = eng.coflow_finish_s(ids[0]) - alone.coflow_finish_s(v0)
    assert slowed >= st.pause_s[up] * (1 - 1e-9)  # the victim waited out the pause
    assert eng.coflow_finish_s(ids[1]) == pytest.approx(alone.coflow_finish_s(b0), rel=1e-12)
    assert st.drop_bytes.sum() == 0.0  # lossless


def test_buffer_overflow_on_a_lossy_port_drops():
    fab = _fabric(hosts=40, leaves=4, uplink_over=0.25)  # 4 Tb/s uplinks: only the last hop fills
    buf = 100 * KB
    cfg = network_from_mapping({"model": "tcp", "port_buffer": f"{int(buf)}B", "ecn_k": "50KB",
                                "min_rto": "5ms"})
    n = 32
    eng, ids = _run(fab, [(1 + i, 0, 1 * MB, 0.0) for i in range(n)], cfg)
    st = eng.network.stats(eng.now_s)
    port = _link(fab, "leaf0", "nic0")
    # 32 first windows of 10 full packets, sent back to back at 100G, drain at 100G while the
    # longest window arrives (fluid.incast_burst_bytes): peak minus the buffer is dropped
    pkt = cfg.payload_bytes + cfg.overhead_bytes
    w = 10 * pkt
    peak = n * w - 100 * Gbps * (w / (100 * Gbps))
    assert st.drop_bytes[port] == pytest.approx(peak - buf, rel=1e-9)
    assert st.num_timeouts == math.ceil((peak - buf) / w)
    assert max(eng.coflow_finish_s(c) for c in ids) > 5e-3  # someone waited a timeout
    deep = network_from_mapping({"model": "tcp", "port_buffer": "10MB", "ecn_k": "50KB"})
    eng2, _ = _run(fab, [(1 + i, 0, 1 * MB, 0.0) for i in range(n)], deep)
    assert eng2.network.stats(eng2.now_s).drop_bytes.sum() == 0.0


@pytest.mark.parametrize("model", ["ideal", "roce", "tcp"])
def test_bytes_are_conserved_in_every_model(model):
    fab = _fabric(hosts=16, leaves=2, uplink_over=4.0)
    rng = np.random.default_rng(3)
    flows = [(int(s), int(d), float(rng.integers(1, 4e6)), float(rng.uniform(0, 2e-4)))
             for s, d in rng.integers(0, 16, size=(40, 2)) if s != d]
    eng, ids = _run(fab, flows, network_from_mapping({"model": model, "port_buffer": "200KB"}))
    res = eng.result()
    ref, _ = _run(fab, flows, None)
    # every link carried exactly its flows' bytes, as in the ideal engine with the same routes
    np.testing.assert_allclose(res.link_bytes, ref.result().link_bytes, rtol=1e-9, atol=1e-3)
    nic_out = np.asarray(fab.node_kind)[fab.link_src] == NodeKind.GPU  # GPU -> NIC: each flow once
    assert res.link_bytes[nic_out].sum() == pytest.approx(sum(f[2] for f in flows), rel=1e-12)
    assert all(eng.coflow_finish_s(c) is not None for c in ids)


def test_congestion_never_makes_a_flow_faster_than_ideal():
    fab = _fabric(hosts=16, leaves=2, uplink_over=8.0)
    flows = [(i, 8 + (i + 1) % 8, 2e6, 0.0) for i in range(8)] + [(8, 0, 1e5, 1e-4)]
    ideal, ids = _run(fab, flows, None)
    for model in ("roce", "tcp"):
        eng, _ = _run(fab, flows, network_from_mapping(model))
        for c in ids:
            assert eng.coflow_finish_s(c) >= ideal.coflow_finish_s(c)


def test_controller_classes_map_onto_the_ports_queues():
    # a DSCP-like map: unmarked traffic in the default queue, marked classes above it (the
    # first ones on queues of their own, the rest sharing the lowest above the default),
    # demoted classes below it, the last queue shared; the engine's order is kept
    cfg = network_from_mapping({"model": "roce", "queues": 4, "lossless": [0, 1], "default_queue": 2})
    marked = [MARKED_PRIORITY_BASE + c for c in range(4)]
    assert [cfg.queue_of(p) for p in marked] == [0, 1, 1, 1]
    assert [cfg.queue_of(p) for p in range(4)] == [2, 3, 3, 3]
    assert [cfg.is_lossless(p) for p in (marked[0], marked[1], 0, 1)] == [True, True, False, False]
    levels = [*marked, *range(9)]
    assert [cfg.queue_of(p) for p in levels] == sorted(cfg.queue_of(p) for p in levels)
    fab = _fabric()
    eng = Engine(fab, make_router("shortest", fab), network=cfg)
    c = eng.add_coflow(1, 0, 1e3, priority=7)
    assert int(eng._f.prio[eng._c_flow_lo[c]]) == 3
    # the defaults: roce's default queue and the two above it lossless, tcp lossy, 8 queues
    roce, tcp = network_from_mapping("roce"), network_from_mapping("tcp")
    assert (roce.queues, roce.default_queue, roce.lossless) == (8, 2, (0, 1, 2))
    assert [roce.queue_of(p) for p in (marked[0], marked[1], marked[3], 0, 1, 9)] == [0, 1, 1, 2, 3, 7]
    assert [tcp.queue_of(p) for p in (*marked, 0, 1, 9)] == [0, 1, 2, 3, 4, 5, 7]
    assert not tcp.is_lossless(0) and not tcp.is_lossless(marked[0])
    # a smaller port: the default queue follows it
    small = network_from_mapping({"model": "roce", "queues": 2})
    assert (small.default_queue, small.lossless) == (1, (0, 1))


def test_a_higher_class_gets_ahead_under_roce():
    # three 10 MB flows into host 0 at once: marked class 0, marked class 1, unmarked. On the
    # port's queues (0, 1, 2: all lossless) strict priority serves them one after the other:
    # class 0 ends after one transfer time T of the link, class 1 after at least 2 T (plus
    # DCQCN's recovery from the rate it was held at), the unmarked flow after at least 3 T.
    # Sharing one queue (every class while the map clamped them onto queue 0) all end together
    # after 3 T plus DCQCN's start transient (three flows starting at line rate into one port are
    # cut below their share, `dcqcn.start_loss_s`; the RDMA ns-3 fork loses 15% on a 4-to-1
    # incast, validation/results_roce.json), at most a quarter more.
    fab = _fabric()
    cfg = network_from_mapping("roce")
    size = 10 * MB
    one = size / (100 * Gbps * cfg.wire_efficiency)

    def run(priorities):
        eng = Engine(fab, make_router("shortest", fab), network=cfg)
        ids = [eng.add_coflow(1 + i, 0, size, priority=p) for i, p in enumerate(priorities)]
        eng.run()
        assert eng.network.stats(eng.now_s).drop_bytes.sum() == 0.0  # all three classes lossless
        return [eng.coflow_finish_s(c) for c in ids]

    t0, t1, t2 = run([MARKED_PRIORITY_BASE, MARKED_PRIORITY_BASE + 1, 0])
    shared = run([0, 0, 0])
    assert t0 == pytest.approx(one, rel=0.02)
    assert t1 >= t0 + one and t2 >= t1 + one
    assert max(shared) - min(shared) < 1e-3 * one
    assert 3 * one < shared[0] <= 1.25 * 3 * one


def test_a_controllers_order_interleaves_two_lockstep_jobs_under_roce():
    # tests/control/test_cluster_control.py's closed form on the roce network: two jobs whose
    # AllReduces share an uplink run in lock step (C + 2 S / U each iteration) without control;
    # Sincronia's classes (0 and 1 under the priority grant) serve one after the other and the
    # jobs interleave at their solo time C + S / U. With both classes on one queue (the bug)
    # they stayed in lock step.
    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.control import make_controller
    from flowherd.workload import TrainingJob

    def job(name):
        spec = TrainingJob(model="llama3-8b", gpus=2, tp=1, bucket_bytes=1e15, iterations=6, name=name)
        return JobRequest(name=name, tenant="t", spec=spec, submit_s=0.0)

    fab = leaf_spine(servers=4, gpus_per_server=1, leaves=2, spines=1, oversubscription=4)
    kw = dict(horizon_s=100.0, placements={"a": [0, 2], "b": [1, 3]})
    with use_network(network_from_mapping("roce")):
        free = simulate_cluster(fab, [job("a"), job("b")], **kw)
        ordered = simulate_cluster(fab, [job("a"), job("b")], controller=make_controller("sincronia"),
                                   levers="priority", **kw)
    c = free.job("a").compute_only_iteration_s
    lock = free.job("a").iteration_s.mean()
    s_u = lock - c  # 2 S / U on this network (wire efficiency, DCQCN's costs included)
    assert s_u > 0.1 * c
    for n in "ab":
        np.testing.assert_allclose(ordered.job(n).iteration_s[1:], c + s_u / 2, rtol=0.03)
    assert not ordered.controller_issues


def test_pfc_pauses_only_the_paused_class_on_the_upstream_link():
    # the PFC case above with the victim in another (lossy, lower) class: PFC stops the incast's
    # priority on spine -> leaf 0, not the victim's (IEEE 802.1Qbb is per priority)
    fab = _fabric(hosts=16, leaves=2, uplink_over=1.0)
    cfg = network_from_mapping({"model": "roce", "port_buffer": "1MB", "pfc_xoff": "100KB",
                                "pfc_xon": "80KB"})
    incast = [(8 + i, 0, 4 * MB) for i in range(7)]

    def run(victim_priority):
        eng = Engine(fab, make_router("shortest", fab), network=cfg)
        v = eng.add_coflow(15, 1, 20 * MB, at_s=0.0, priority=victim_priority)
        for s, d, size in incast:
            eng.add_coflow(s, d, size, at_s=0.0, priority=MARKED_PRIORITY_BASE)
        eng.run()
        return eng.coflow_finish_s(v), eng.network.stats(eng.now_s)

    alone = Engine(fab, make_router("shortest", fab), network=cfg)
    v0 = alone.add_coflow(15, 1, 20 * MB, at_s=0.0)
    alone.run()
    same, st_same = run(MARKED_PRIORITY_BASE)
    other, st_other = run(0)
    up = _link(fab, "spine0", "leaf0")
    assert st_same.pause_s[up] > 0 and st_other.pause_s[up] > 0
    assert same - alone.coflow_finish_s(v0) >= st_same.pause_s[up] * (1 - 1e-9)
    assert other == pytest.approx(alone.coflow_finish_s(v0), rel=1e-9)  # not paused


def test_network_config_errors_name_the_field():
    with pytest.raises(ConfigError, match=r"unknown field 'ecn_kk' \(network.ecn_kk\).*'ecn_k'"):
        network_from_mapping({"model": "tcp", "ecn_kk": "1KB"})
    with pytest.raises(ConfigError, match=r"unknown network model 'rcoe'.*'roce'"):
        network_from_mapping({"model": "rcoe"})
    with pytest.raises(ConfigError, match=r"network.pfc_xon must be <= pfc_xoff"):
        network_from_mapping({"model": "roce", "pfc_xoff": "10KB", "pfc_xon": "20KB"})
    with pytest.raises(ConfigError, match=r"network.lossless must be queue indices in 0..3"):
        network_from_mapping({"model": "roce", "queues": 4, "lossless": [5]})
    with pytest.raises(ConfigError, match=r"unknown switch preset"):
        network_from_mapping({"model": "roce", "switch": "tomahawk9"})
    with pytest.raises(ConfigError, match=r"--network"):
        load_network("nonesuch")


def test_presets_cite_a_source_and_load_by_name():
    for sw in SWITCHES.values():
        assert sw.source and sw.shared_buffer_bytes > 0
        assert 0 < sw.port_buffer_bytes < sw.shared_buffer_bytes
    assert load_network("spectrum3").model == "roce"
    assert load_network("jericho3").model == "tcp"  # deep buffer: a lossy fabric
    assert load_network("roce").port_buffer_bytes == pytest.approx(SWITCHES["spectrum3"].port_buffer_bytes)


def test_dctcp_queue_by_hand():
    # N = 2, BDP = 50 packets, K = 20 packets: Q_max = 22, A = 0.5 sqrt(2*2*70) = 8.367,
    # Q_min = 13.63 > 0: the link never idles; mean queue (22 + 13.63) / 2
    q, u = fluid.dctcp_queue(np.array([2.0]), np.array([50 * 1500.0]), 20 * 1500.0, 1500.0)
    a = 0.5 * math.sqrt(2 * 2 * 70)
    assert q[0] == pytest.approx((22 + 22 - a) / 2 * 1500)
    assert u[0] == 1.0
    # K tiny, many packets of BDP: the window dips below the BDP and the link idles
    _, u2 = fluid.dctcp_queue(np.array([1.0]), np.array([200 * 1500.0]), 1500.0, 1500.0)
    assert u2[0] < 1.0


def test_dcqcn_queue_grows_with_the_number_of_flows():
    c = network_from_mapping("roce")
    qs = [fluid.dcqcn_fixed_point(n, 100 * Gbps, 4178.0, c.ecn_kmin_bytes, c.ecn_kmax_bytes, c.ecn_pmax,
                                  c.dcqcn_timer_s, c.dcqcn_byte_counter_bytes, c.dcqcn_fast_recovery_steps,
                                  c.dcqcn_rai_bytes_per_s, c.dcqcn_cnp_interval_s,
                                  c.dcqcn_alpha_interval_s)[1] for n in (2, 8, 32)]
    assert c.ecn_kmin_bytes <= qs[0] < qs[1] < qs[2] <= c.ecn_kmax_bytes


def test_slow_start_loss_by_hand():
    # W0 = 10 kB, r * RTT = 80 kB: 3 doubling rounds (10, 20, 40 kB sent) then full rate
    loss = fluid.slow_start_loss_s(np.array([1e6]), np.array([8e9]), np.array([10e-6]), 10e3)
    assert loss[0] == pytest.approx(3 * 10e-6 - 70e3 / 8e9)
    # a 30 kB flow ends in slow start: windows of 10 and 20 kB, two rounds; the last one's
    # bytes arrive at the rate, so it loses one RTT against 30 kB / r
    short = fluid.slow_start_loss_s(np.array([30e3]), np.array([8e9]), np.array([10e-6]), 10e3)
    assert short[0] == pytest.approx(10e-6)


def test_slow_start_with_delayed_acks_by_hand():
    # one MSS per ACK, an ACK per 2 segments: windows 10, 15, 22.5, 33.75 kB; r * RTT = 80 kB
    # needs ceil(log1.5(8)) = 6 rounds, sending 10 (1.5^6 - 1) / 0.5 = 207.8 kB meanwhile
    loss = fluid.slow_start_loss_s(np.array([1e6]), np.array([8e9]), np.array([10e-6]), 10e3, 1.5)
    sent = 10e3 * (1.5**6 - 1) / 0.5
    assert loss[0] == pytest.approx(6 * 10e-6 - sent / 8e9)
    assert loss[0] > fluid.slow_start_loss_s(np.array([1e6]), np.array([8e9]), np.array([10e-6]), 10e3)[0]
    # 25 kB ends in the second RTT (10 + 15): one whole RTT plus the last window at the rate
    short = fluid.slow_start_loss_s(np.array([25e3]), np.array([8e9]), np.array([10e-6]), 10e3, 1.5)
    assert short[0] == pytest.approx(10e-6)


def test_dctcp_exit_loss_by_hand():
    # BDP 300 packets, K 60: the halved window 180 leaves a deficit of 120 packets, which 8 flows
    # close at 8 packets per RTT: 120^2 / 16 packets unsent, at 1e10 B/s
    loss = fluid.dctcp_exit_loss_s(np.array([8.0]), np.array([300 * 1500.0]), 60 * 1500.0, 1500.0,
                                   np.array([1e10]), 1.0)
    assert loss[0] == pytest.approx(120**2 * 1500.0 / (2 * 8 * 1e10))
    # K above the BDP: the first cut keeps the port busy
    none = fluid.dctcp_exit_loss_s(np.array([8.0]), np.array([50 * 1500.0]), 60 * 1500.0, 1500.0,
                                   np.array([1e10]), 1.0)
    assert none[0] == 0.0


def test_a_synchronized_400g_incast_pays_dctcps_first_cut():
    # 8 x 400G senders on leaf 1 into host 0 (3.2T uplink): the halved aggregate window
    # (BDP + K) / 2 falls below the BDP (~270 packets at 8 us), so the port idles while the
    # flows' additive increase closes the gap (fluid.dctcp_exit_loss_s); with alpha 0 (no cut)
    # nothing is lost, and a lone flow never cuts
    fab = _fabric(hosts=16, leaves=2, gbps=400)
    base = {"model": "tcp", "port_buffer": "300KB", "ecn_k": "97500B"}
    flows = [(8 + i, 0, 4 * MB, 0.0) for i in range(8)]
    cut, ids = _run(fab, flows, network_from_mapping(base))
    nocut, ids2 = _run(fab, flows, network_from_mapping({**base, "dctcp_alpha_init": 0.0}))
    fin = max(cut.coflow_finish_s(c) for c in ids)
    fin0 = max(nocut.coflow_finish_s(c) for c in ids2)
    cfg = network_from_mapping(base)
    pkt = cfg.payload_bytes + cfg.overhead_bytes
    cap = 400 * Gbps
    rtt = 8 * us + 2 * pkt / cap + 2 * pkt / (3200 * Gbps)
    bdp = cap * rtt / pkt
    deficit = bdp - 0.5 * (bdp + 97500 / pkt)
    assert fin - fin0 == pytest.approx(deficit**2 * pkt / (2 * 8 * cap), rel=1e-6)
    assert fin - fin0 > 10 * us
    alone, _ = _run(fab, flows[:1], network_from_mapping(base))
    alone0, _ = _run(fab, flows[:1], network_from_mapping({**base, "dctcp_alpha_init": 0.0}))
    assert alone.now_s == pytest.approx(alone0.now_s, rel=1e-12)


def test_the_compiled_start_costs_are_the_fluid_formulas():
    from flowherd.engine.network.kernels import flow_extras

    rng = np.random.default_rng(3)
    n = 400
    size = rng.uniform(1e3, 5e7, n)
    old = np.where(rng.random(n) < 0.5, 0.0, rng.uniform(1e8, 5e10, n))
    new = old + rng.uniform(0.0, 5e10, n)
    rem = np.where(old == 0.0, size, size * 0.5)
    rtt, rtt_q = rng.uniform(2e-6, 3e-5, n), rng.uniform(3e-5, 6e-5, n)
    start = np.zeros(n)
    comp = np.arange(n)
    net = rng.random(n) < 0.8  # the others stay inside a server: no TCP, no DCQCN, no cost
    fresh = (old == 0.0) & (new > 0)
    grow = ~fresh & (new > old * (1 + 1e-9))
    for tcp in (True, False):
        lat = np.zeros(n)
        got = flow_extras(comp, net, old, new, rem, size, start, 0.0, rtt, rtt_q, lat, tcp, 1, 14480.0, 1.5,
                          1448.0, 1.0, 55e-6, 5, 5e6)
        assert np.array_equal(got, fresh & net)
        want = np.where(fresh, rtt_q, 0.0)
        if tcp:
            ss = fluid.slow_start_loss_s(rem, new, rtt_q, 14480.0, 1.5)
            ramp = np.minimum(fluid.tcp_ramp_loss_s(old, new, rtt, 1448.0, 1.0), ss)
            want += np.where(fresh, ss, 0.0) + np.where(grow, ramp, 0.0)
        else:
            want += np.where(grow, fluid.dcqcn_ramp_loss_s(old, new, 55e-6, 5, 5e6, 1.0), 0.0)
        assert lat == pytest.approx(np.where(net, want, 0.0), rel=1e-12, abs=1e-18)


@pytest.mark.parametrize("model", ["roce", "tcp"])
def test_a_flow_inside_a_server_pays_no_network_cost(model):
    # two GPUs of one server over NVLink: no TCP slow start, no DCQCN ramp, no queue; the same
    # finish as on the ideal network (the network model only acts on network links)
    fab = leaf_spine(servers=2, gpus_per_server=4, leaves=1, spines=1, link_latency_s=1 * us)
    flows = [(0, 1, 50 * MB, 0.0), (2, 1, 50 * MB, 0.0), (0, 3, 10 * MB, 1e-4)]  # shares that change
    ideal, ids = _run(fab, flows, None)
    eng, _ = _run(fab, flows, network_from_mapping(model))
    for c in ids:
        assert eng.coflow_finish_s(c) == pytest.approx(ideal.coflow_finish_s(c), rel=1e-12)
    # a flow to the other server crosses the network and pays for it
    eng2, (c,) = _run(fab, [(0, 5, 10 * MB, 0.0)], network_from_mapping(model))
    ref, (c0,) = _run(fab, [(0, 5, 10 * MB, 0.0)], None)
    assert eng2.coflow_finish_s(c) > ref.coflow_finish_s(c0)
