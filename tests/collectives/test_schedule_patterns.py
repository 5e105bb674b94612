"""Steps that repeat their flows share one pattern: the schedule holds each distinct set of flows
once, and what it sums over all flows (pair bytes, total bytes, per-step port bounds) is what
the sums over every step's own flows gave, to the last bit."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.calibrate import _busiest_port_s, step_bounds_s
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule, Step, pair_index, steps_shared
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.presets import preset

CASES = [("superpod", Op.ALLREDUCE, 64, 2**30, "ring"), ("superpod", Op.ALLREDUCE, 16, 3 * 2**26 + 7, "tree"),
         ("superpod", Op.ALLREDUCE, 64, 2**30, "nvlstree"), ("superpod", Op.BROADCAST, 16, 2**24, "ring"),
         ("leafspine", Op.ALLREDUCE, 8, 10**9 + 3, "direct"),
         ("leafspine", Op.ALLTOALL, 8, 2**20, "pairwise"),
         ("leafspine", Op.ALLREDUCE, 6, 10**9 / 7, "halving_doubling"),
         ("leafspine", Op.ALLREDUCE, 8, 2**20, "hierarchical"), (None, Op.ALLREDUCE, 7, 10**9 / 3, "ring")]


def _fabric(name):
    if name == "superpod":
        return preset("dgx-superpod-h100-1su")
    if name == "leafspine":
        return leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    return None


def _schedule(case) -> Schedule:
    name, op, n, size, algo = case
    fab = _fabric(name)
    return build_schedule(Collective(op=op, gpus=tuple(range(n)), size_bytes=size), algo, fabric=fab,
                          channels=16 if fab is not None else None)


def test_a_ring_allreduce_holds_its_flows_once():
    # 2(n-1) steps over the same n edges (one channel): one pattern, one set of arrays
    s = build_schedule(Collective(op=Op.ALLREDUCE, gpus=tuple(range(64)), size_bytes=2**30), "ring")
    of, first = s.patterns()
    assert s.num_steps == 126 and len(first) == 1 and np.all(of == 0)
    assert all(st.src_gpu is first[0].src_gpu and st.size_bytes is first[0].size_bytes for st in s.steps)
    assert s.num_flows == 126 * 64


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1].value}-{c[4]}")
def test_pair_bytes_are_the_sums_over_every_flow(case):
    s = _schedule(case)
    src = np.concatenate([st.src_gpu for st in s.steps])
    dst = np.concatenate([st.dst_gpu for st in s.steps])
    size = np.concatenate([st.size_bytes for st in s.steps])
    uniq, inv, width = pair_index(src, dst)
    want = np.bincount(inv, weights=size, minlength=len(uniq))  # every flow, in step order
    got_s, got_d, got = s.pair_bytes()
    assert np.array_equal(got_s, (uniq // width).astype(np.int32))
    assert np.array_equal(got_d, (uniq % width).astype(np.int32))
    assert got.tobytes() == want.tobytes()
    assert s.total_bytes() == float(sum(float(st.size_bytes.sum()) for st in s.steps))


@pytest.mark.parametrize("case", [c for c in CASES if c[0] is not None], ids=lambda c: f"{c[0]}-{c[4]}")
def test_step_bounds_are_each_steps_own(case):
    s = _schedule(case)
    fab = _fabric(case[0])
    src = np.concatenate([st.src_gpu for st in s.steps])
    dst = np.concatenate([st.dst_gpu for st in s.steps])
    size = np.concatenate([st.size_bytes for st in s.steps])
    group = np.repeat(np.arange(s.num_steps), [st.num_flows for st in s.steps])
    want = _busiest_port_s(src, dst, size, group, s.num_steps, fab)
    got = step_bounds_s(s, fab)
    assert (got is None) == (want is None)
    if got is not None:
        assert got.tobytes() == want.tobytes()


def test_pair_bytes_add_a_pattern_that_repeats_a_pair_in_flow_order():
    # one pattern with the pair (0, 1) twice, between steps of another: np.add.at's order
    a = (np.array([0, 0, 2]), np.array([1, 1, 3]), np.array([0.1, 0.2, 0.3]))
    b = (np.array([0]), np.array([1]), np.array([0.7]))
    steps = steps_shared(patterns=[a, b], step_pattern=[0, 1, 0], deps=[(), (0,), (1,)],
                         latency_s=[0.0] * 3, intra_server=[False] * 3)
    s = Schedule(collective=Collective(op=Op.ALLREDUCE, gpus=(0, 1, 2, 3), size_bytes=1.0),
                 algorithm="x", protocol="simple", steps=steps)
    _, _, got = s.pair_bytes()
    want = ((((0.0 + 0.1) + 0.2) + 0.7) + 0.1) + 0.2
    assert got[0] == want and got[1] == 0.3 + 0.3
    assert steps[0].src_gpu is steps[2].src_gpu and not steps[0].src_gpu.flags.writeable


def test_a_shared_pattern_is_checked_like_a_step():
    with pytest.raises(ConfigError, match="from a GPU to itself"):
        steps_shared(patterns=[(np.array([1]), np.array([1]), np.array([1.0]))], step_pattern=[0],
                     deps=[()], latency_s=[0.0], intra_server=[False])
    with pytest.raises(ConfigError, match="equal length"):
        steps_shared(patterns=[(np.array([1, 2]), np.array([0]), np.array([1.0]))], step_pattern=[0],
                     deps=[()], latency_s=[0.0], intra_server=[False])
    assert isinstance(steps_shared(patterns=[], step_pattern=[], deps=[], latency_s=[], intra_server=[]),
                      tuple)
    assert Step.__slots__  # the fields steps_shared fills
