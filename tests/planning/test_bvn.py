"""FLASH-style AllToAll: Birkhoff-von Neumann rounds are permutations and carry exactly the matrix."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.collective import simulate_collective
from flowherd.collectives.ops import Collective
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.planning.bvn import birkhoff_von_neumann, bvn, pad_to_doubly_balanced
from flowherd.units import MiB


def _skewed(s: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.exponential(1.0, (s, s)) * (rng.random((s, s)) < 0.7)
    np.fill_diagonal(m, 0.0)
    return m


@pytest.mark.parametrize("seed", range(5))
def test_rounds_are_permutations_that_carry_exactly_the_matrix(seed):
    s = 3 + seed
    m = _skewed(s, seed)
    d = birkhoff_von_neumann(m)
    for perm in d.perms:
        assert sorted(perm.tolist()) == list(range(s))  # one receiver per sender and vice versa
    assert np.allclose(d.reconstruct(), m, rtol=0, atol=1e-12 * m.sum())
    assert np.all(d.carried <= d.weights[:, None] * (1 + 1e-12))
    # Birkhoff: at most (s - 1)^2 + 1 permutations of an s x s matrix
    assert d.num_rounds <= (s - 1) ** 2 + 1
    # the rounds' weights cover the largest line sum: the time of an incast-free schedule
    line = max(m.sum(axis=0).max(), m.sum(axis=1).max())
    assert d.weights.sum() == pytest.approx(line)


def test_padding_balances_every_line():
    m = _skewed(6, 11)
    p = pad_to_doubly_balanced(m)
    target = max(m.sum(axis=0).max(), m.sum(axis=1).max())
    assert np.all(p >= m)
    assert p.sum(axis=0) == pytest.approx(np.full(6, target))
    assert p.sum(axis=1) == pytest.approx(np.full(6, target))


def test_uniform_alltoall_takes_s_minus_one_rounds():
    m = np.ones((5, 5)) - np.eye(5)
    assert birkhoff_von_neumann(m).num_rounds == 4


def _bvn_schedule(servers=4, gpus_per_server=2, matrix=None):
    f = leaf_spine(servers=servers, gpus_per_server=gpus_per_server, leaves=2, spines=2)
    n = f.num_gpus
    op = "alltoallv" if matrix is not None else "alltoall"
    coll = Collective(op=op, gpus=range(n), size_bytes=64 * MiB, matrix_bytes=matrix)
    return f, coll, bvn(coll, fabric=f)


def test_schedule_rounds_are_incast_free_and_rail_aligned():
    rng = np.random.default_rng(3)
    mat = rng.uniform(0, 8 * MiB, (8, 8))
    f, _, sched = _bvn_schedule(matrix=mat)
    inter = [st for st in sched.steps if st.num_flows and not st.intra_server]
    assert inter
    for st in inter:
        assert len(set(st.dst_gpu.tolist())) == st.num_flows  # every GPU receives from one GPU
        assert len(set(st.src_gpu.tolist())) == st.num_flows
        srv_s, srv_d = f.gpu_server[st.src_gpu], f.gpu_server[st.dst_gpu]
        pairs = set(zip(srv_s.tolist(), srv_d.tolist(), strict=True))
        assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs})
        # rail-aligned: local index is kept
        assert np.all(st.src_gpu % 2 == st.dst_gpu % 2)


def test_schedule_carries_exactly_the_matrix():
    rng = np.random.default_rng(5)
    mat = rng.uniform(0, 8 * MiB, (8, 8))
    np.fill_diagonal(mat, 0)
    f, _, sched = _bvn_schedule(matrix=mat)
    srv = f.gpu_server
    # server-level bytes crossing the network = the server matrix of the demands
    want = np.zeros((4, 4))
    np.add.at(want, (srv[:, None].repeat(8, 1), srv[None, :].repeat(8, 0)), mat)
    np.fill_diagonal(want, 0)
    got = np.zeros((4, 4))
    for st in sched.steps:
        cross = srv[st.src_gpu] != srv[st.dst_gpu]
        np.add.at(got, (srv[st.src_gpu[cross]], srv[st.dst_gpu[cross]]), st.size_bytes[cross])
    assert got == pytest.approx(want, rel=1e-9)
    # every GPU ends with what it is owed: received - sent = column sum - row sum
    net = np.zeros(8)
    for st in sched.steps:
        np.add.at(net, st.dst_gpu, st.size_bytes)
        np.add.at(net, st.src_gpu, -st.size_bytes)
    assert net == pytest.approx(mat.sum(axis=0) - mat.sum(axis=1), abs=1e-6 * mat.sum())


def test_bvn_runs_in_the_simulator_and_rejects_other_ops():
    f = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    coll = Collective(op="alltoall", gpus=range(8), size_bytes=64 * MiB)
    from flowherd.planning.teccl import register_collective_algorithms

    register_collective_algorithms()
    res = simulate_collective(f, coll, algorithm="bvn")
    assert res.algorithm == "bvn" and res.time_s > 0
    with pytest.raises(ConfigError, match="alltoall"):
        bvn(Collective(op="allreduce", gpus=range(8), size_bytes=1.0), fabric=f)
    with pytest.raises(ConfigError, match="fabric"):
        bvn(coll)
