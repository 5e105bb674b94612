"""NCCL's protocol constants and tuning model (NVIDIA/nccl src/graph/tuning.cc @ 01afd20a)."""

from __future__ import annotations

import pytest

from flowherd.collectives.nccl import (
    BASE_LATENCY_S,
    HW_LATENCY_S,
    WIRE_FRACTION,
    Protocol,
    nccl_predictions,
    select,
    step_latency_s,
)
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.units import GBps, us


def test_wire_fractions():
    # LL: 4 data bytes per 8-byte line; LL128: 120 of 128 bytes (NCCL_LL128_DATAELEMS/LINEELEMS)
    assert WIRE_FRACTION[Protocol.LL] == 0.5
    assert WIRE_FRACTION[Protocol.LL128] == 120 / 128
    assert WIRE_FRACTION[Protocol.SIMPLE] == 1.0


def test_latency_tables_match_tuning_cc():
    assert BASE_LATENCY_S[("ring", Protocol.SIMPLE)] == pytest.approx(8.4 * us)
    assert BASE_LATENCY_S[("ring", Protocol.LL128)] == pytest.approx(10.0 * us)
    assert BASE_LATENCY_S[("tree", Protocol.LL)] == pytest.approx(4.4 * us)
    assert HW_LATENCY_S[("net", "ring", Protocol.SIMPLE)] == pytest.approx(9.6 * us)
    assert HW_LATENCY_S[("nvlink", "ring", Protocol.LL)] == pytest.approx(0.47 * us)
    assert HW_LATENCY_S[("net", "tree", Protocol.LL128)] == pytest.approx(8.5 * us)
    # tree/simple's 28/50 us is a whole 256 kB chunk: the simulator uses ring/simple per hop
    assert step_latency_s("simple", algorithm_family="tree") == pytest.approx(9.6 * us)


def test_ring_allreduce_simple_prediction_is_the_tuning_formula():
    # n=16 ranks on 2 nodes, bus bw 40 GB/s: algbw = 40 * n / (2(n-1)); latency = baseLat 8.4 +
    # (nsteps - ninter) * 3.4 (NVLink) + ninter * 9.6 (NET), x1.9 plateau for large sizes
    n, nodes, size = 16, 2, 1 << 30
    pred = {(p.algorithm, p.protocol): p for p in
            nccl_predictions("allreduce", size, n, nodes, bus_bandwidth_bytes_per_s=40 * GBps)}
    p = pred[("ring", Protocol.SIMPLE)]
    nsteps, ninter = 2 * (n - 1), 2 * (nodes - 1)
    lat_us = (8.4 + (nsteps - ninter) * 3.4 + ninter * 9.6) * 1.9
    algbw = 40 * n / nsteps
    assert p.latency_s == pytest.approx(lat_us * us)
    assert p.time_s == pytest.approx((lat_us + size / (1000 * algbw)) * us)


def test_tree_is_predicted_at_half_bus_bandwidth():
    preds = nccl_predictions("allreduce", 1 << 30, 64, 8, bus_bandwidth_bytes_per_s=50 * GBps)
    tree = next(p for p in preds if p.algorithm == "tree" and p.protocol == Protocol.SIMPLE)
    assert tree.algbw_bytes_per_s == pytest.approx(50 * 0.9 * 0.5 * GBps)  # min(bw*.9, 80) * .5


def test_selector_follows_nccl_regimes():
    # small AllReduce across nodes: tree + LL (latency-bound); large: ring + Simple (bandwidth)
    assert select("allreduce", 4096, 64, 8) == ("tree", Protocol.LL)
    assert select("allreduce", 4 << 30, 64, 8) == ("ring", Protocol.SIMPLE)
    # protocol moves LL -> LL128 -> Simple as the size grows (AllGather has only ring)
    seq = [select("allgather", s, 64, 8)[1] for s in (1e3, 1e7, 1e9)]
    assert seq == [Protocol.LL, Protocol.LL128, Protocol.SIMPLE]
    assert select("alltoall", 1 << 20, 8, 8) == ("direct", Protocol.SIMPLE)


def test_selector_picks_the_fastest_prediction():
    for size in (1e3, 1e5, 1e7, 1e9):
        preds = nccl_predictions("allreduce", size, 32, 4)
        best = min(preds, key=lambda p: p.time_s)
        assert select("allreduce", size, 32, 4) == (best.algorithm, best.protocol)


def test_ll128_disabled_is_never_chosen():
    for size in (1e3, 1e6, 1e7, 1e9):
        assert select("allreduce", size, 64, 8, ll128=False)[1] != Protocol.LL128


def test_bad_inputs():
    with pytest.raises(ConfigError, match="nodes"):
        nccl_predictions("allreduce", 1e6, 4, 8)
    with pytest.raises(UnknownNameError, match="did you mean 'll128'"):
        step_latency_s("ll129")
