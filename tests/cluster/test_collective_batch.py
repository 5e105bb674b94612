"""A step-fidelity schedule is added to the engine as one batch (`flowherd.cluster.collective.add_schedule`,
issue 16's start-up): the same run bit for bit as one `Engine.add_coflow` per step, and the flat
batch the same as `make_batch` of one coflow per step."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.collective import add_schedule, choose, nccl_channels
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective, Op
from flowherd.engine.coflow_batch import BatchCoflow, make_batch, make_flat_batch
from flowherd.engine.core import Engine
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.presets import preset
from flowherd.routing.base import Routes
from flowherd.routing.policies import make_router

CASES = [  # (fabric, op, GPUs, bytes, algorithm, latency model, router)
    ("superpod", Op.ALLREDUCE, 16, 64 * 2**20, "auto", "nccl", "spray"),  # NVLSTree, pipelined
    ("superpod", Op.ALLREDUCE, 16, 64 * 2**20, "ring", "nccl", "ecmp"),
    ("superpod", Op.ALLGATHER, 16, 8 * 2**20, "auto", "fabric", "spray"),
    ("leafspine", Op.ALLREDUCE, 8, 2**20, "tree", "fabric", "ecmp"),
    ("leafspine", Op.ALLTOALL, 8, 2**20, "hierarchical", "nccl", "spray"),
    ("leafspine", Op.REDUCESCATTER, 8, 2**20, "halving_doubling", "fabric", "shortest"),
]


def _fabric(name):
    if name == "superpod":
        return preset("dgx-superpod-h100-1su")
    return leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2, oversubscription=2)


def _run(fab, case, batched: bool, monkeypatch) -> dict[str, np.ndarray]:
    _, op, n, size, algo, model, router = case
    monkeypatch.setattr(Engine, "_batched", batched)
    coll = Collective(op=op, gpus=tuple(range(n)), size_bytes=size)
    algo, proto = choose(fab, coll, algo)
    sched = build_schedule(coll, algo, fabric=fab, protocol=proto, channels=nccl_channels(fab, coll),
                           latency_model=model)
    eng = Engine(fab, make_router(router, fab, seed=3), record_flows=True)
    gate = eng.add_coflow(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), delay_s=1e-4)
    # twice, the second after the first and not before a later time: `after` and `at_s` both act
    first = add_schedule(eng, sched, after=(gate,), name="a")
    add_schedule(eng, sched, after=(first,), at_s=2e-4, name="b", weight=2.0)
    eng.run()
    res = eng.result()
    return {"start": eng._c.start[:eng._c.count].copy(), "finish": eng._c.finish[:eng._c.count].copy(),
            "names": np.array(eng._c_name), "flow_finish": np.asarray(res.flow_finish_s),
            "link_bytes": np.asarray(res.link_bytes)}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1].value}-{c[4]}-{c[5]}-{c[6]}")
def test_a_schedule_as_one_batch_runs_as_one_add_coflow_per_step_bit_for_bit(case, monkeypatch):
    fab = _fabric(case[0])
    batched = _run(fab, case, True, monkeypatch)
    one_by_one = _run(fab, case, False, monkeypatch)
    assert batched.keys() == one_by_one.keys()
    for key, a in batched.items():
        b = one_by_one[key]
        assert a.shape == b.shape and a.dtype == b.dtype, key
        assert np.array_equal(a, b), key  # exact: no tolerance
    assert np.all(np.isfinite(batched["finish"]))


def test_the_comparison_sees_a_changed_step(monkeypatch):
    # the comparison above can fail: one step's latency a picosecond longer moves the finish
    fab = _fabric("leafspine")
    coll = Collective(op=Op.ALLREDUCE, gpus=tuple(range(8)), size_bytes=2**20)
    sched = build_schedule(coll, "ring", fabric=fab, latency_model="fabric")

    def finish(s):
        eng = Engine(fab, make_router("ecmp", fab), record_flows=False)
        done = add_schedule(eng, s, at_s=0.0)
        eng.run()
        return eng.coflow_finish_s(done)

    st = sched.steps[3]
    moved = type(sched)(collective=sched.collective, algorithm=sched.algorithm, protocol=sched.protocol,
                        steps=(*sched.steps[:3], st.retimed(latency_s=st.latency_s + 1e-12),
                               *sched.steps[4:]), wire_fraction=sched.wire_fraction)
    assert finish(moved) != finish(sched)


def _coflows(rng):
    out = []
    for i in range(5):
        k = int(rng.integers(0, 4))
        src = rng.integers(0, 8, k)
        dst = (src + 1 + rng.integers(0, 7, k)) % 8
        hops = rng.integers(1, 4, k)
        ptr = np.concatenate([[0], np.cumsum(hops)]).astype(np.int64)
        routes = Routes(ptr=ptr, link=rng.integers(0, 40, int(ptr[-1])).astype(np.int32),
                        frac=rng.uniform(0.1, 1.0, int(ptr[-1])), latency_s=rng.uniform(0, 1e-6, k))
        out.append(BatchCoflow(deps=tuple(int(d) for d in rng.choice(i, min(i, 2), replace=False)),
                               delay_s=float(rng.uniform(0, 1e-5)), min_duration_s=float(i) * 1e-6,
                               src=src, dst=dst, size_bytes=rng.uniform(0, 1e6, k), weight=1.5,
                               routes=routes, suffix=f"/s{i}"))
    return out


def test_a_flat_batch_is_make_batch_of_one_coflow_per_step():
    coflows = _coflows(np.random.default_rng(5))
    ref = make_batch(coflows)
    flat = make_flat_batch(
        f_ptr=np.cumsum([0] + [c.src.size for c in coflows]),
        src=np.concatenate([c.src for c in coflows]), dst=np.concatenate([c.dst for c in coflows]),
        size_bytes=np.concatenate([c.size_bytes for c in coflows]),
        routes=Routes.concat([c.routes for c in coflows]),
        delay_s=np.array([c.delay_s for c in coflows]),
        min_duration_s=np.array([c.min_duration_s for c in coflows]),
        deps=[c.deps for c in coflows], weight=1.5, suffix=[c.suffix for c in coflows])
    for field in ref.__dataclass_fields__:
        a, b = getattr(ref, field), getattr(flat, field)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), field
        else:
            assert a == b, field


@pytest.mark.parametrize("bad,match", [
    ({"delay_s": np.array([0.0, -1.0])}, r"delay_s must be finite and >= 0, got -1.0 \(delay_s of coflow 1"),
    ({"min_duration_s": np.array([np.nan, 0.0])}, r"min_duration_s .* \(min_duration_s of coflow 0"),
    ({"deps": [(), (1,)]}, r"deps must name earlier coflows .*got 1 \(deps of coflow 1"),
    ({"f_ptr": np.array([0, 2, 1])}, r"f_ptr must rise from 0"),
])
def test_a_flat_batch_refuses_bad_input_naming_the_field(bad, match):
    kw = dict(f_ptr=np.array([0, 1, 1]), src=np.array([0]), dst=np.array([1]), size_bytes=np.array([1.0]),
              routes=Routes(ptr=np.array([0, 1]), link=np.array([0], np.int32), frac=np.array([1.0]),
                            latency_s=np.array([0.0])),
              delay_s=np.zeros(2), min_duration_s=np.zeros(2), deps=[(), (0,)], suffix=["/a", "/b"])
    kw.update(bad)
    with pytest.raises(ConfigError, match=match):
        make_flat_batch(**kw)
