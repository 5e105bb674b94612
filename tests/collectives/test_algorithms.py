"""Invariants of every registered collective algorithm, checked by one validator."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.collectives.algorithms import ALGORITHMS, build_schedule, fold
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule
from flowherd.collectives.trees import nccl_btree, nccl_dtree, tree_depths
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric.generators import leaf_spine
from flowherd.units import MiB

S = 12 * MiB  # divisible by every n used below, so sizes are exact


def _fabric(n: int, per_server: int = 1):
    return leaf_spine(servers=n // per_server, gpus_per_server=per_server, leaves=1, spines=1)


def _supported(algorithm: str, op: Op, n: int, per_server: int = 1) -> Schedule | None:
    m = np.full((n, n), S / n) if op == Op.ALLTOALLV else None
    coll = Collective(op=op, gpus=range(n), size_bytes=S, matrix_bytes=m)
    try:
        return build_schedule(coll, algorithm, fabric=_fabric(n, per_server))
    except ConfigError as err:
        assert op.value in str(err) and algorithm in str(err)
        return None


def _knowledge(sched: Schedule) -> np.ndarray:
    """know[r, o]: whether data of rank o can have reached rank r when the schedule ends, moving
    only along flows and only from a step to the steps that wait for it."""
    coll = sched.collective
    n = coll.n
    rank = {g: i for i, g in enumerate(coll.gpus)}
    init = np.eye(n, dtype=bool)
    after = []
    for st in sched.steps:
        before = init.copy()
        for d in st.deps:
            before |= after[d]
        now = before.copy()
        for s, d in zip(st.src_gpu, st.dst_gpu, strict=True):
            now[rank[int(d)]] |= before[rank[int(s)]]
        after.append(now)
    out = init.copy()
    for k in sched.sinks():
        out |= after[k]
    return out


def _expected_total_bytes(algorithm: str, op: Op, n: int, per_server: int) -> float:
    """Payload all flows carry together, from the algorithms' definitions."""
    if op == Op.ALLREDUCE:
        return 2 * (n - 1) * S  # every AllReduce here moves 2(n-1)S (ring: 2(n-1) steps x n x S/n)
    if op in (Op.ALLTOALL, Op.ALLTOALLV) and algorithm == "hierarchical":
        g, m = n // per_server, per_server
        return (2 * n - g - m) * S  # intra relay (m-1) g S + inter (g-1) m S
    if op == Op.REDUCESCATTER and algorithm in ("halving_doubling", "pat"):
        r = n - fold(n)[2]
        return (n - 1) * S + r * S / n  # Thakur et al. fold: folded ranks get their shard back
    if op == Op.SENDRECV:
        return S
    return (n - 1) * S


SWITCH_LOADS = ("nvls", "nvlstree")
CASES = [(a, op, n) for a in ALGORITHMS for op in Op for n in (1, 2, 3, 5, 8, 12)]


@pytest.mark.parametrize(("algorithm", "op", "n"), CASES)
def test_every_schedule_is_complete_and_moves_the_expected_bytes(algorithm, op, n):
    if op == Op.SENDRECV and n != 2:
        return
    per_server = 4 if algorithm in ("hierarchical", "nvlstree") and n % 4 == 0 else 1
    if algorithm == "nvls":
        per_server = n  # NVLS runs inside one server
    sched = _supported(algorithm, op, n, per_server)
    if sched is None:
        return
    gpus = set(range(n))
    for i, st in enumerate(sched.steps):
        assert all(0 <= d < i for d in st.deps)
        assert set(st.src_gpu.tolist()) <= gpus and set(st.dst_gpu.tolist()) <= gpus
        assert np.all(st.size_bytes > 0)
    if n == 1:
        assert sched.total_bytes() == 0
        return
    know = _knowledge(sched)
    if op in (Op.ALLREDUCE, Op.ALLGATHER, Op.REDUCESCATTER, Op.ALLTOALL, Op.ALLTOALLV):
        assert know.all(), f"some rank misses some rank's data:\n{know.astype(int)}"
    elif op == Op.BROADCAST:
        assert know[:, 0].all()
    elif op == Op.REDUCE:
        assert know[0].all()
    elif op == Op.SENDRECV:
        assert know[1, 0]
    if algorithm in SWITCH_LOADS and per_server > 1:
        return  # NVSwitch loads carried by GPU flows (collectives/nvls.py), checked in test_nvls
    expected = _expected_total_bytes(algorithm, op, n, per_server)
    assert sched.total_bytes() == pytest.approx(expected, rel=1e-12)


def test_ring_allreduce_sends_s_over_n_to_the_next_rank_in_2n_minus_2_steps():
    # Patarasuk & Yuan 2009: 2(n-1) steps, each rank sends S/n to its successor
    n = 5
    sched = build_schedule(Collective(op="allreduce", gpus=range(10, 15), size_bytes=S), "ring")
    assert sched.num_steps == 2 * (n - 1)
    for st in sched.steps:
        assert np.array_equal(st.dst_gpu - 10, (st.src_gpu - 10 + 1) % n)
        assert np.allclose(st.size_bytes, S / n)


def test_nccl_btree_matches_the_trees_cc_illustration():
    # NVIDIA/nccl src/graph/trees.cc: 0-8; 8-4,12; 4-2,6; 12-10,13 ... for 14 ranks
    parent = nccl_btree(14)
    assert parent[0] == -1 and parent[8] == 0
    assert parent[4] == 8 and parent[12] == 8
    assert parent[2] == 4 and parent[6] == 4 and parent[10] == 12
    assert parent[13] == 12 and parent[1] == 2 and parent[3] == 2


def test_double_tree_roots_and_complementary_leaves():
    # trees.cc ncclGetDtreeRoots: root 0, and n-1 (n even, mirror) or 1 (n odd, shift)
    for n, root1 in ((8, 7), (12, 11), (7, 1), (13, 1)):
        t0, t1 = nccl_dtree(n)
        assert np.flatnonzero(t0 < 0).tolist() == [0]
        assert np.flatnonzero(t1 < 0).tolist() == [root1]
        if n % 2 == 0:  # mirror: a rank inner in one tree is a leaf in the other
            inner0 = set(t0[t0 >= 0].tolist())
            inner1 = set(t1[t1 >= 0].tolist())
            assert not (inner0 & inner1)
        assert tree_depths(t0).max() == tree_depths(t1).max()


def test_tree_carries_half_per_tree_and_pipelines_chunks():
    n, c = 8, 4
    sched = build_schedule(Collective(op="allreduce", gpus=range(n), size_bytes=S), "tree", chunks=c)
    depth = tree_depths(nccl_btree(n)).max()
    assert sched.num_steps == c + 2 * depth - 1
    assert np.allclose(np.concatenate([st.size_bytes for st in sched.steps]), S / (2 * c))


def test_halving_doubling_power_of_two_has_2log2n_steps_of_halving_sizes():
    # Thakur et al. 2005 Sec. 4.1: sizes S/2, S/4, .., S/p then S/p, .., S/2
    sched = build_schedule(Collective(op="allreduce", gpus=range(8), size_bytes=S), "halving_doubling")
    sizes = [float(st.size_bytes[0]) for st in sched.steps]
    assert sizes == [S / 2, S / 4, S / 8, S / 8, S / 4, S / 2]


def test_fold_keeps_a_power_of_two_of_survivors():
    for n in (3, 5, 6, 7, 12, 1000):
        surv, weight, p2 = fold(n)
        assert len(surv) == p2 and p2 & (p2 - 1) == 0 and p2 <= n < 2 * p2
        assert weight.sum() == n


def test_hierarchical_uses_nvlink_inside_servers_only():
    fab = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2)
    coll = Collective(op="allreduce", gpus=range(16), size_bytes=S)
    sched = build_schedule(coll, "hierarchical", fabric=fab)
    kinds = [st.intra_server for st in sched.steps]
    assert kinds == [True] * 3 + [False] * 6 + [True] * 3
    for st in sched.steps[3:9]:  # inter phase: same local rank, next server
        assert np.array_equal(st.src_gpu % 4, st.dst_gpu % 4)
        assert np.all(fab.gpu_server[st.src_gpu] != fab.gpu_server[st.dst_gpu])


def test_hierarchical_rejects_uneven_servers_and_a_missing_fabric():
    fab = leaf_spine(servers=2, gpus_per_server=4, leaves=1, spines=1)
    with pytest.raises(ConfigError, match="same number of ranks"):
        build_schedule(Collective(op="allreduce", gpus=range(6), size_bytes=S), "hierarchical",
                       fabric=fab)
    with pytest.raises(ConfigError, match="fabric"):
        build_schedule(Collective(op="allreduce", gpus=range(4), size_bytes=S), "hierarchical")


def test_unsupported_op_names_op_and_algorithm():
    with pytest.raises(ConfigError, match=r"'tree'.*'alltoall'"):
        build_schedule(Collective(op="alltoall", gpus=range(4), size_bytes=S), "tree")


def test_unknown_algorithm_suggests_the_closest_name():
    with pytest.raises(UnknownNameError, match="did you mean 'ring'"):
        build_schedule(Collective(op="allreduce", gpus=range(4), size_bytes=S), "rign")


def test_bad_chunks_is_a_config_error():
    with pytest.raises(ConfigError, match="chunks"):
        build_schedule(Collective(op="broadcast", gpus=range(4), size_bytes=S), "ring", chunks=0)


def test_protocol_sets_wire_fraction_and_step_latency():
    coll = Collective(op="allreduce", gpus=range(4), size_bytes=S)
    simple = build_schedule(coll, "ring", protocol="simple")
    ll = build_schedule(coll, "ring", protocol="ll")
    assert simple.wire_fraction == 1.0 and ll.wire_fraction == 0.5
    # NCCL 2.30.7 tuning.cc hwLatencies NET Ring: LL 2.7 us < Simple 14 us; baseLatencies Ring:
    # LL 6.6, Simple 8.4
    assert ll.steps[1].latency_s == pytest.approx(2.7e-6)
    assert simple.steps[1].latency_s == pytest.approx(14e-6)
    assert simple.steps[0].latency_s == pytest.approx(14e-6 + 8.4e-6)
    assert ll.steps[0].latency_s == pytest.approx(2.7e-6 + 6.6e-6)


def test_fabric_latency_model_drops_every_step_latency():
    coll = Collective(op="allreduce", gpus=range(4), size_bytes=S)
    sched = build_schedule(coll, "ring", latency_model="fabric")
    assert sched.num_steps == 6 and all(st.latency_s == 0 for st in sched.steps)
    with pytest.raises(UnknownNameError, match="latency model"):
        build_schedule(coll, "ring", latency_model="ncc")


def test_zero_size_makes_empty_steps():
    sched = build_schedule(Collective(op="allreduce", gpus=range(4), size_bytes=0), "ring")
    assert sched.num_flows == 0 and sched.num_steps == 6
