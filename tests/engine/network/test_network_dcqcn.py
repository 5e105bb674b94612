"""DCQCN's start transient (flowherd.engine.network.dcqcn) and the PFC-bound victims of `roce`."""

import itertools

import pytest

from flowherd.engine.core import Engine
from flowherd.engine.network import network_from_mapping
from flowherd.engine.network.dcqcn import start_loss_s
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import KB, MB, Gbps, us

CAP = 100 * Gbps  # bytes/s on the wire
PKT = 4144.0
# DCQCN as `network: roce` (SIGCOMM 2015 Sec. 5): CNP 50 us, alpha 55 us, timer 55 us, F 5,
# R_AI 40 Mb/s, R_HAI 10 R_AI, g 1/256, floor 100 Mb/s
DC = (50e-6, 55e-6, 55e-6, 5, 40e6 / 8, 400e6 / 8, 1 / 256, 100e6 / 8)


def _loss(n, size=2 * MB, xoff=75 * KB, kmin=5 * KB, kmax=200 * KB, pmax=0.01, n_in=None):
    return start_loss_s(n, size * PKT / 4096, CAP, CAP, n if n_in is None else n_in, xoff, kmin, kmax, pmax,
                        PKT, *DC)


def test_no_transient_without_overload_or_marks():
    # flows that together fit the port never queue; without ECN marks no rate is cut, and PFC
    # alone holds the arrivals at the drain rate: the port never idles
    assert start_loss_s(1, 2 * MB, CAP, CAP, 1, 75 * KB, 5 * KB, 200 * KB, 0.01, PKT, *DC) == 0.0
    assert start_loss_s(4, 2 * MB, CAP / 4, CAP, 4, 75 * KB, 5 * KB, 200 * KB, 0.01, PKT, *DC) == 0.0
    assert _loss(8, kmin=1e12, kmax=2e12) == pytest.approx(0.0, abs=2e-6)


def test_the_cuts_idle_the_port_and_the_loss_grows_with_the_incast():
    # held at Xoff per ingress (8 x 75 KB above Kmax) every packet is marked: the rates halve
    # every 50 us down to a fraction of the share, and the port idles while they recover
    losses = [_loss(n) for n in (2, 4, 8, 16, 32)]
    assert losses[0] < 5e-6  # two flows: the queue stays below Kmax, one cut, no idling
    assert all(b > a for a, b in itertools.pairwise(losses[1:]))
    # a short flow loses no more than its own time
    assert _loss(8, size=64 * KB) <= 8 * 64 * KB * PKT / 4096 / CAP + 60e-6


def test_incast_times_against_the_rdma_fork():
    # validation/results_roce.json: the HPCC ns-3 fork's N-to-1 incasts of 2 MB at 100 Gb/s (Xoff
    # 75 KB per ingress queue): CCT 757.4 us (N=4), 1651.6 us (N=8), 3084.5 us (N=16); the fluid
    # time n * size / C (plus 4 us of propagation) is 15-22% short of them
    for n, ns3_us in ((4, 757.4), (8, 1651.6), (16, 3084.5)):
        fluid_s = n * 2 * MB * PKT / 4096 / CAP + 4 * us
        assert fluid_s + _loss(n) == pytest.approx(ns3_us * 1e-6, rel=0.08)


def _fab(uplink_over):
    return leaf_spine(servers=16, gpus_per_server=1, leaves=2, spines=1, nic_bandwidth_bytes_per_s=100 * Gbps,
                      nvlink_bandwidth_bytes_per_s=None, oversubscription=uplink_over, link_latency_s=1 * us)


def test_a_victim_of_a_pfc_bound_port_moves_at_a_congested_flows_share():
    # 7 hosts of leaf 0 into host 8 (leaf 1), full-rate uplinks: the port to host 8 stays
    # PFC-bound (DCQCN's fixed point for 7 flows, ~101 KB, above Xoff 75 KB of its one ingress),
    # the spine's link into leaf 1 keeps being paused, and host 0's flow to host 15 over it moves
    # at about a seventh of the port (the fork: the victim ends at 1181 us, beside the incast's
    # 1155-1531 us; alone it takes 164 us)
    fab = _fab(1.0)
    net = network_from_mapping({"model": "roce", "pfc_xoff": "75KB", "pfc_xon": "66808B",
                                "port_buffer": "300KB"})
    eng = Engine(fab, make_router("shortest", fab), network=net)
    inc = [eng.add_coflow(i, 8, 2 * MB) for i in range(1, 8)]
    victim = eng.add_coflow(0, 15, 2 * MB)
    eng.run()
    alone = 2 * MB / (100 * Gbps * net.wire_efficiency)
    t_v = eng.coflow_finish_s(victim)
    t_inc = max(eng.coflow_finish_s(c) for c in inc)
    assert t_v > 5 * alone and t_v <= t_inc
    # a deep Xoff (spectrum3's 1.78 MB): not PFC-bound, the victim only waits out the first burst
    deep = network_from_mapping({"model": "roce"})
    eng = Engine(fab, make_router("shortest", fab), network=deep)
    for i in range(1, 8):
        eng.add_coflow(i, 8, 2 * MB)
    victim = eng.add_coflow(0, 15, 2 * MB)
    eng.run()
    assert eng.coflow_finish_s(victim) < 3 * alone
