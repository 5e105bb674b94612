"""Closed forms of the cost models against the published formulas they implement."""

from __future__ import annotations

import math

import pytest

from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.cost import (
    aggregate_time_s,
    alpha_beta_time_s,
    direct_time_s,
    halving_doubling_time_s,
    hierarchical_time_s,
    pairwise_time_s,
    ring_time_s,
    tree_max_rank_bytes,
    tree_time_s,
)
from flowherd.collectives.ops import Collective
from flowherd.errors import ConfigError

S, B, A = 1e9, 1e10, 1e-5


@pytest.mark.parametrize("n", [2, 3, 8, 100])
def test_ring_allreduce_is_patarasuk_yuan(n):
    # Patarasuk & Yuan 2009: T = 2(n-1) alpha + 2(n-1)/n S/B
    assert ring_time_s("allreduce", n, S, alpha_s=A, bandwidth_bytes_per_s=B) == pytest.approx(
        2 * (n - 1) * A + 2 * (n - 1) / n * S / B)
    assert ring_time_s("allgather", n, S, alpha_s=A, bandwidth_bytes_per_s=B) == pytest.approx(
        (n - 1) * A + (n - 1) / n * S / B)


def test_chain_broadcast_pipelines():
    # pipelined chain: (n - 2 + c)(alpha + S/(c B)); c = 1 is store-and-forward (n-1)(alpha + S/B)
    assert ring_time_s("broadcast", 5, S, alpha_s=A, bandwidth_bytes_per_s=B, chunks=1) == \
        pytest.approx(4 * (A + S / B))
    assert ring_time_s("broadcast", 5, S, alpha_s=0, bandwidth_bytes_per_s=B, chunks=100) == \
        pytest.approx(103 / 100 * S / B)


@pytest.mark.parametrize("p", [2, 4, 16, 1024])
def test_rabenseifner_power_of_two(p):
    # Thakur, Rabenseifner & Gropp 2005, Sec. 4.3: 2 lg p alpha + 2 (p-1)/p S/B (no gamma term)
    t = halving_doubling_time_s("allreduce", p, S, alpha_s=A, bandwidth_bytes_per_s=B)
    assert t == pytest.approx(2 * math.log2(p) * A + 2 * (p - 1) / p * S / B)
    t = halving_doubling_time_s("allgather", p, S, alpha_s=A, bandwidth_bytes_per_s=B)
    assert t == pytest.approx(math.log2(p) * A + (p - 1) / p * S / B)  # Sec. 3.1, recursive doubling


def test_rabenseifner_fold_adds_two_full_exchanges():
    # Sec. 4.3: for p not a power of two, 2 (alpha + S/B) more than for p' = 2^floor(lg p)
    t6 = halving_doubling_time_s("allreduce", 6, S, alpha_s=A, bandwidth_bytes_per_s=B)
    t4 = halving_doubling_time_s("allreduce", 4, S, alpha_s=A, bandwidth_bytes_per_s=B)
    assert t6 - t4 == pytest.approx(2 * (A + S / B))


def test_tree_tends_to_nccl_bandwidth_for_many_chunks():
    # NCCL tuning.cc: tree algbw = busbw * 0.5, i.e. T -> 2 S / B for the double binary tree
    t = tree_time_s(64, S, alpha_s=0, bandwidth_bytes_per_s=B, chunks=4000)
    assert t == pytest.approx(2 * S / B, rel=0.01)
    assert t > 2 * S / B
    assert tree_max_rank_bytes(64, S) == 2 * S


def test_direct_and_pairwise():
    n = 8
    assert direct_time_s("alltoall", n, S, alpha_s=A, bandwidth_bytes_per_s=B) == pytest.approx(
        A + 7 / 8 * S / B)
    assert direct_time_s("broadcast", n, S, alpha_s=A, bandwidth_bytes_per_s=B) == pytest.approx(
        A + 7 * S / B)
    assert pairwise_time_s(n, S, alpha_s=A, bandwidth_bytes_per_s=B) == pytest.approx(7 * (A + S / 8 / B))


def test_hierarchical_reduces_to_ring_with_one_gpu_per_server():
    t = hierarchical_time_s("allreduce", 8, 1, S, alpha_intra_s=0, bandwidth_intra_bytes_per_s=1,
                            alpha_inter_s=A, bandwidth_inter_bytes_per_s=B)
    assert t == pytest.approx(ring_time_s("allreduce", 8, S, alpha_s=A, bandwidth_bytes_per_s=B))


def test_hierarchical_collective_fidelity_overlaps_phases():
    kw = dict(alpha_intra_s=0, bandwidth_intra_bytes_per_s=B, alpha_inter_s=0,
              bandwidth_inter_bytes_per_s=B)
    step = hierarchical_time_s("allreduce", 4, 4, S, **kw)
    coll = hierarchical_time_s("allreduce", 4, 4, S, fidelity="collective", **kw)
    intra, inter = 2 * 3 / 4 * S / B, 2 * 3 / 16 * S / B
    assert step == pytest.approx(intra + inter) and coll == pytest.approx(max(intra, inter))


def test_aggregate_equals_step_form_for_ring():
    coll = Collective(op="allreduce", gpus=range(8), size_bytes=S)
    sched = build_schedule(coll, "ring")
    assert aggregate_time_s(sched, alpha_s=A, bandwidth_bytes_per_s=B) == pytest.approx(
        ring_time_s("allreduce", 8, S, alpha_s=A, bandwidth_bytes_per_s=B))


def test_unknown_algorithm_or_op_is_a_config_error():
    with pytest.raises(ConfigError, match="algorithm"):
        alpha_beta_time_s("hierarchical", "allreduce", 8, S, alpha_s=A, bandwidth_bytes_per_s=B)
    with pytest.raises(ConfigError, match="alltoall"):
        alpha_beta_time_s("ring", "alltoall", 8, S, alpha_s=A, bandwidth_bytes_per_s=B)
