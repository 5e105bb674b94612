"""Simulated collectives against their closed forms, at both fidelities; ECMP vs spraying.

Fabric of the closed-form checks: ``leaf_spine(servers=n, leaves=1, spines=1)``, one GPU per
server: every GPU pair is GPU-NIC-leaf-NIC-GPU, bottleneck the 400 Gb/s NIC (B = 50 GB/s;
PCIe is 64 GB/s), path latency 2 x 1 us, non-blocking (one switch).

Latency is counted once. Under ``--latency-model nccl`` (default) a step's latency alpha is
NCCL's per-step hwLat of the protocol (tuning.cc), which holds the wire's, and NCCL's baseLat is
added once; the algorithms NCCL has (ring, tree), run on NCCL's channels, take NCCL's whole
latency (`flowherd.collectives.tuning.algo_latency_us`) and its bandwidth (the schedule's wire
fraction, `flowherd.collectives.calibrate`; tests/collectives/test_calibrate.py checks both
against tuning.cc). Under ``--latency-model fabric`` alpha is the path's 2 us, at full link rate.
"""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.collective import add_schedule, nccl_channels, simulate_collective
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.cost import (
    aggregate_time_s,
    alpha_beta_time_s,
    hierarchical_time_s,
)
from flowherd.collectives.nccl import WIRE_FRACTION, Protocol, base_latency_s, step_latency_s
from flowherd.collectives.ops import Collective, busbw_factor
from flowherd.collectives.selector import nccl_model
from flowherd.collectives.tuning import algo_latency_us
from flowherd.engine.core import Engine
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import GBps, Gbps, MiB, us

B = 400 * Gbps
PATH_S = 2 * us
SIZE = 96 * MiB

CASES = [  # (algorithm, op): every algorithm on every op it implements that has a 1-level form
    ("ring", "allreduce"), ("ring", "allgather"), ("ring", "reducescatter"), ("ring", "broadcast"),
    ("ring", "reduce"), ("tree", "allreduce"), ("halving_doubling", "allreduce"),
    ("halving_doubling", "allgather"), ("halving_doubling", "reducescatter"),
    ("direct", "alltoall"), ("direct", "allgather"), ("direct", "reducescatter"),
    ("direct", "allreduce"), ("direct", "broadcast"), ("pairwise", "alltoall"),
]
# algorithms whose every step loads every NIC alike: both fidelities have the same closed form
BALANCED = {"ring": {"allreduce", "allgather", "reducescatter"}, "direct": {"alltoall", "allgather",
            "reducescatter", "allreduce"}, "pairwise": {"alltoall"}}


NCCL_ALGOS = ("ring", "tree")


def _cap(fab, coll: Collective, algorithm: str, protocol: str = "simple") -> float:
    """The rate fraction of the simulated schedule over the protocol's: NCCL's bandwidth against
    the links' (`flowherd.collectives.calibrate.rate_fraction`; 1 off NCCL's algorithms)."""
    sched = build_schedule(coll, algorithm, fabric=fab, protocol=protocol,
                           channels=nccl_channels(fab, coll))
    return sched.rate_fraction / WIRE_FRACTION[Protocol(protocol)]


def _alpha(algorithm: str, protocol: str = "simple") -> tuple[float, float]:
    fam = "tree" if algorithm == "tree" else "ring"
    return (step_latency_s(protocol, algorithm_family=fam),
            base_latency_s(protocol, algorithm_family=fam))


def _nccl_latency_s(fab, coll: Collective, algorithm: str, protocol: str = "simple") -> float:
    """NCCL 2.30's latency of the call (tuning.cc ``latencies``, the ring's plateau factor)."""
    comm, _, tables = nccl_model(fab, coll.gpus)
    return algo_latency_us(comm, tables, coll.op, algorithm, protocol, coll.size_bytes) * us


def _check(algorithm: str, op: str, n: int, fidelity: str) -> None:
    fab = leaf_spine(servers=n, leaves=1, spines=1)
    coll = Collective(op=op, gpus=range(n), size_bytes=SIZE)
    res = simulate_collective(fab, coll, algorithm=algorithm, fidelity=fidelity)
    if algorithm in NCCL_ALGOS:  # NCCL's latency once, the bandwidth terms at alpha = 0
        alpha, base = 0.0, _nccl_latency_s(fab, coll, algorithm)
    else:
        alpha, base = _alpha(algorithm)
    b_eff = B * _cap(fab, coll, algorithm)
    # the simulator runs NCCL's channels: a chain pipelines in NCCL's chunks (512 KiB per channel)
    sched = build_schedule(coll, algorithm, fabric=fab, channels=nccl_channels(fab, coll))
    chunks = sched.num_steps - (n - 2) if algorithm == "ring" and op in ("broadcast", "reduce") \
        else None
    step_form = alpha_beta_time_s(algorithm, op, n, SIZE, alpha_s=alpha, bandwidth_bytes_per_s=b_eff,
                                  base_s=base, chunks=chunks)
    if fidelity == "step":
        expected = step_form
    else:
        expected = aggregate_time_s(sched, alpha_s=alpha, bandwidth_bytes_per_s=b_eff, base_s=base)
        power_of_two = n & (n - 1) == 0
        if op in BALANCED.get(algorithm, ()) or (algorithm == "halving_doubling" and power_of_two):
            # idle fabric + balanced steps: the sum of per-step maxima is the max of the sums
            assert expected == pytest.approx(step_form, rel=1e-9)
    assert res.time_s == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("fidelity", ["step", "collective"])
@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize(("algorithm", "op"), CASES)
def test_idle_time_matches_closed_form(algorithm, op, n, fidelity):
    _check(algorithm, op, n, fidelity)


@pytest.mark.parametrize("fidelity", ["step", "collective"])
@pytest.mark.parametrize("n", [8, 64])
@pytest.mark.parametrize(("algorithm", "op"), [c for c in CASES if c[1] in BALANCED.get(c[0], ())])
def test_fabric_latency_model_is_the_textbook_closed_form(algorithm, op, n, fidelity):
    # --latency-model fabric: alpha = the path's latency only (2 x 1 us), no NCCL base latency
    fab = leaf_spine(servers=n, leaves=1, spines=1)
    coll = Collective(op=op, gpus=range(n), size_bytes=SIZE)
    res = simulate_collective(fab, coll, algorithm=algorithm, fidelity=fidelity,
                              latency_model="fabric")
    expected = alpha_beta_time_s(algorithm, op, n, SIZE, alpha_s=PATH_S, bandwidth_bytes_per_s=B,
                                 base_s=0.0)
    assert res.time_s == pytest.approx(expected, rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("fidelity", ["step", "collective"])
@pytest.mark.parametrize("n", [1000, 1024])
@pytest.mark.parametrize(("algorithm", "op"), CASES)
def test_idle_time_matches_closed_form_1000_gpus(algorithm, op, n, fidelity):
    _check(algorithm, op, n, fidelity)


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter", "alltoall"])
@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_hierarchical_matches_two_level_closed_form(op, fidelity):
    # NVLink 900 GB/s per GPU through the server's NVSwitch, 0 latency; NIC 50 GB/s, 2 us (held
    # in NCCL's hop latency: not added)
    g, m = 4, 4
    fab = leaf_spine(servers=g, gpus_per_server=m, leaves=1, spines=1)
    coll = Collective(op=op, gpus=range(g * m), size_bytes=SIZE)
    res = simulate_collective(fab, coll, algorithm="hierarchical", fidelity=fidelity)
    expected = hierarchical_time_s(
        op, g, m, SIZE, alpha_intra_s=step_latency_s("simple", hw="nvlink"),
        bandwidth_intra_bytes_per_s=900 * GBps, alpha_inter_s=step_latency_s("simple"),
        bandwidth_inter_bytes_per_s=B, base_s=base_latency_s("simple"), fidelity=fidelity)
    assert res.time_s == pytest.approx(expected, rel=0.01)


def test_ll_protocol_doubles_wire_bytes_and_uses_its_latencies():
    n = 8
    fab = leaf_spine(servers=n, leaves=1, spines=1)
    coll = Collective(op="allreduce", gpus=range(n), size_bytes=SIZE)
    res = simulate_collective(fab, coll, algorithm="ring", protocol="ll")
    alpha, base = 0.0, _nccl_latency_s(fab, coll, "ring", "ll")  # NCCL's LL latency, once
    # LL: half of each 8-byte line is a flag, so the payload moves at B / 2, and NCCL caps LL at
    # llMaxBw (tuning.cc) where that binds: a rate limit (the steps' least durations), the wire
    # carries LL's 2x only
    cap = _cap(fab, coll, "ring", "ll")
    assert cap < 1
    expected = alpha_beta_time_s("ring", "allreduce", n, SIZE, alpha_s=alpha,
                                 bandwidth_bytes_per_s=B / 2 * cap, base_s=base)
    assert res.time_s == pytest.approx(expected, rel=1e-6)
    assert res.wire_bytes == pytest.approx(2 * 2 * (n - 1) * SIZE)


def test_busbw_follows_nccl_tests_conventions():
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n (AllReduce), (n-1)/n (AllGather),
    # 1 (Broadcast); a bandwidth-optimal ring AllReduce's busbw approaches the speed NCCL runs
    # its channels at: 2 x 24 GB/s here (search.cc: the GPU's PCIe Gen5 x16 counts 48 GB/s,
    # topo.cc kvDictPciGen 240 per lane; one NIC of 50), below the NIC's 50 GB/s
    n = 8
    fab = leaf_spine(servers=n, leaves=1, spines=1)
    for op, algo in (("allreduce", "ring"), ("allgather", "ring"), ("broadcast", "direct")):
        res = simulate_collective(fab, Collective(op=op, gpus=range(n), size_bytes=1 << 30),
                                  algorithm=algo)
        assert res.algbw_bytes_per_s == pytest.approx((1 << 30) / res.time_s)
        assert res.busbw_bytes_per_s == pytest.approx(res.algbw_bytes_per_s * busbw_factor(op, n))
        if op == "allreduce":
            assert 48e9 * 0.98 < res.busbw_bytes_per_s < 48e9


def test_add_schedule_chains_collectives_and_honours_at_s():
    n = 8
    fab = leaf_spine(servers=n, leaves=1, spines=1)
    coll = Collective(op="allreduce", gpus=range(n), size_bytes=SIZE)
    sched = build_schedule(coll, "ring", fabric=fab, channels=nccl_channels(fab, coll))
    eng = Engine(fab, make_router("spray", fab))
    first = add_schedule(eng, sched, fidelity="step", at_s=1.0)
    second = add_schedule(eng, sched, fidelity="collective", after=(first,))
    eng.run()
    one = simulate_collective(fab, sched.collective, algorithm="ring").time_s
    assert eng.coflow_finish_s(first) == pytest.approx(1.0 + one)
    assert eng.coflow_finish_s(second) == pytest.approx(1.0 + 2 * one)


def test_single_gpu_collective_takes_no_time():
    fab = leaf_spine(servers=2, leaves=1, spines=1)
    res = simulate_collective(fab, Collective(op="allreduce", gpus=[1], size_bytes=SIZE),
                              algorithm="ring")
    assert res.time_s == 0.0


def test_fidelities_differ_under_staggered_contention():
    # Two outside flows of E bytes: into GPU 1 from t = 0, into GPU 2 from mid-collective. Every
    # ring step loads every NIC alike, so in `step` fidelity each step waits for its slowed flow
    # and both slowdowns add up: T_step ~ T_idle + 2 E / B. In `collective` fidelity each NIC
    # works through its own bytes plus its elephant's at full rate, in parallel:
    # T_coll ~ T_idle + E / B (max-min halves the rate on the shared NIC while both are active).
    # NCCL's channels move 48 of the NIC's 50 GB/s: a least duration of the coflow, not a per-flow
    # cap, so at either fidelity the shared NIC's flow runs at 50 after the elephant and
    # the step or coflow ends up to (1 - 48/50) of its bandwidth time early (measured -2.9%)
    n = 8
    fab = leaf_spine(servers=n + 2, leaves=1, spines=1)
    coll = Collective(op="allreduce", gpus=range(n), size_bytes=SIZE)
    sched = build_schedule(coll, "ring", fabric=fab, channels=nccl_channels(fab, coll))
    idle = simulate_collective(fab, sched.collective, algorithm="ring").time_s
    e = SIZE / 4
    times = {}
    for fid in ("step", "collective"):
        eng = Engine(fab, make_router("spray", fab))
        eng.add_coflow(n, 1, e)
        eng.add_coflow(n + 1, 2, e, at_s=idle / 2)
        done = add_schedule(eng, sched, fidelity=fid)
        eng.run()
        times[fid] = eng.coflow_finish_s(done)
    assert times["step"] == pytest.approx(idle + 2 * e / B, rel=0.04)
    assert times["collective"] == pytest.approx(idle + e / B, rel=0.04)


def test_ecmp_collisions_slow_a_ring_down():
    # 16 GPUs on 2 leaves of 8, 8 spines, non-blocking (each uplink = one NIC's 50 GB/s).
    # Ranks alternate leaves, so each ring step sends 8 flows leaf0 -> leaf1 and 8 back. Spraying
    # splits each flow over all 8 spines (no link over B); ECMP hashes each flow onto one spine,
    # and 8 flows on 8 spines collide unless the hash is a permutation (8!/8^8 = 0.24 %).
    fab = leaf_spine(servers=16, leaves=2, spines=8)
    gpus = [g for pair in zip(range(8), range(8, 16), strict=True) for g in pair]
    coll = Collective(op="allreduce", gpus=gpus, size_bytes=SIZE)
    spray = simulate_collective(fab, coll, algorithm="ring", router="spray").time_s
    for seed in range(3):
        ecmp = simulate_collective(fab, coll, algorithm="ring", router="ecmp", seed=seed).time_s
        assert ecmp > 1.3 * spray  # a 2-way collision halves a step's rate


def test_ecmp_is_never_faster_than_spraying_on_one_leaf():
    fab = leaf_spine(servers=8, leaves=1, spines=2)
    coll = Collective(op="alltoall", gpus=range(8), size_bytes=SIZE)
    spray = simulate_collective(fab, coll, algorithm="direct", router="spray").time_s
    ecmp = simulate_collective(fab, coll, algorithm="direct", router="ecmp").time_s
    assert ecmp >= spray * (1 - 1e-9)


def test_bad_inputs_are_config_errors():
    fab = leaf_spine(servers=4, leaves=1, spines=1)
    with pytest.raises(ConfigError, match="GPU 7"):
        simulate_collective(fab, Collective(op="allreduce", gpus=range(4, 8), size_bytes=1))
    with pytest.raises(UnknownNameError, match="fidelity"):
        simulate_collective(fab, Collective(op="allreduce", gpus=range(4), size_bytes=1),
                            fidelity="packet")
    with pytest.raises(UnknownNameError, match="did you mean 'tree'"):
        simulate_collective(fab, Collective(op="allreduce", gpus=range(4), size_bytes=1),
                            algorithm="tre")


def test_auto_uses_the_selector():
    fab = leaf_spine(servers=8, leaves=1, spines=1)
    small = simulate_collective(fab, Collective(op="allreduce", gpus=range(8), size_bytes=4096))
    big = simulate_collective(fab, Collective(op="allreduce", gpus=range(8), size_bytes=1 << 30))
    assert (small.algorithm, small.protocol) == ("tree", "ll")
    # LL on the wire: 2x the tree's 2(n-1)S (NCCL's Tree/LL cap, tuning.cc, is a rate limit)
    assert _cap(fab, Collective(op="allreduce", gpus=range(8), size_bytes=4096), "tree", "ll") < 1
    assert small.wire_bytes == pytest.approx(2 * 2 * 7 * 4096)
    assert (big.algorithm, big.protocol) == ("ring", "simple")
    assert np.isfinite(small.busbw_bytes_per_s)


@pytest.mark.parametrize(("algorithm", "op"), [("ring", "allreduce"), ("halving_doubling", "allreduce"),
                                               ("direct", "alltoall"), ("tree", "allreduce")])
def test_spraying_makes_a_multi_leaf_clos_non_blocking(algorithm, op):
    # 64 GPUs on 4 leaves x 4 spines, oversubscription 1: spraying spreads each cross-leaf flow
    # over the 4 spines, so the NICs stay the bottleneck and the one-switch closed form holds
    # (the paths' latency is held in NCCL's, the same as on one leaf)
    n, size = 64, 1 << 30
    fab = leaf_spine(servers=n, leaves=4, spines=4)
    res = simulate_collective(fab, Collective(op=op, gpus=range(n), size_bytes=size),
                              algorithm=algorithm, router="spray")
    coll = Collective(op=op, gpus=range(n), size_bytes=size)
    alpha, base = ((0.0, _nccl_latency_s(fab, coll, algorithm)) if algorithm in NCCL_ALGOS
                   else _alpha(algorithm))
    expected = alpha_beta_time_s(algorithm, op, n, size, alpha_s=alpha,
                                 bandwidth_bytes_per_s=B * _cap(fab, coll, algorithm), base_s=base)
    assert res.time_s == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_zero_bytes_cost_only_the_latency_term(fidelity):
    # ring AllReduce of 0 B: 2(n-1) steps of NCCL 2.30's Ring/Simple hwLatencies (NET, 14 us) +
    # baseLatencies (8.4 us), no flows
    n = 4
    fab = leaf_spine(servers=n, leaves=1, spines=1)
    res = simulate_collective(fab, Collective(op="allreduce", gpus=range(n), size_bytes=0),
                              algorithm="ring", fidelity=fidelity)
    assert res.time_s == pytest.approx(2 * (n - 1) * 14.0 * us + 8.4 * us)
    bare = simulate_collective(fab, Collective(op="allreduce", gpus=range(n), size_bytes=0),
                               algorithm="ring", fidelity=fidelity, latency_model="fabric")
    assert bare.time_s == 0.0


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_two_equal_collectives_sharing_one_bottleneck_each_take_twice_as_long(fidelity):
    """Issue 2: two equal ring AllReduces whose only cross-leaf flows share the leaf uplinks.

    Leaf uplink = 4 NICs x B / 4 = B: alone, each cross-leaf flow gets B (as on its NIC), so the
    bandwidth term is 2(n-1)/n * S/B; together, two flows share every uplink, B/2 each, so the
    bandwidth term doubles (the fabric has no link latency; the protocol's per-step latency, the
    same alone and together, stays).
    """
    fab = leaf_spine(servers=8, gpus_per_server=1, leaves=2, spines=1, oversubscription=4.0,
                     nic_bandwidth_bytes_per_s=50 * GBps, nvlink_bandwidth_bytes_per_s=None,
                     link_latency_s=0.0)
    size = 64 * MiB
    a = Collective(op="allreduce", gpus=(0, 1, 4, 5), size_bytes=size)
    b = Collective(op="allreduce", gpus=(2, 3, 6, 7), size_bytes=size)

    def run(colls):
        eng = Engine(fab, make_router("shortest", fab))
        ends = [add_schedule(eng, build_schedule(c, "ring"), fidelity=fidelity) for c in colls]
        eng.run()
        return [eng.coflow_finish_s(e) for e in ends]

    bandwidth_s = 2 * 3 / 4 * size / (50 * GBps)
    (alone,) = run([a])
    latency_s = alone - bandwidth_s
    assert 0 <= latency_s < 0.05 * alone
    both = run([a, b])
    assert both == pytest.approx([2 * bandwidth_s + latency_s] * 2, rel=1e-9)
