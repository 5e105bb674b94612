"""Schedules built once, checked once (a collective's start-up): `steps_of` and `Step.retimed` make the
steps `Step` and `dataclasses.replace` made, and the builder's one pass over all flows the steps
its loop over them made (the loop is kept here, verbatim, as the reference)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flowherd.collectives import algorithms
from flowherd.collectives.algorithms import _Builder, build_schedule
from flowherd.collectives.nccl import WIRE_FRACTION, base_latency_s, step_latency_s
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule, Step, steps_of
from flowherd.errors import ConfigError
from flowherd.fabric.core import LinkKind
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.presets import preset


def _same_step(a: Step, b: Step) -> None:
    for name in Step.__slots__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y) and not x.flags.writeable, name
        else:
            assert type(x) is type(y) and x == y, name


def _reference_build(self: _Builder) -> Schedule:
    """`_Builder.build` as it was: one `Step` per added step (each step's flows its pattern's)."""
    gpus = np.asarray(self.coll.gpus, dtype=np.int64)
    fab = self.fabric
    intra_hw = "net"
    if fab is not None:
        intra_hw = "nvlink" if np.any(fab.link_kind == LinkKind.NVLINK) else "pci"
    base = base_latency_s(self.protocol, algorithm_family=self.family)
    steps = []
    for p, deps in self.raw:
        src, dst, size = self.pats[p]
        size = np.broadcast_to(size, src.shape)
        keep = size > 0
        s, d = gpus[src[keep]], gpus[dst[keep]]
        intra = bool(fab is not None and s.size and np.all(fab.gpu_server[s] == fab.gpu_server[d]))
        lat = step_latency_s(self.protocol, algorithm_family=self.family, hw=intra_hw if intra else "net")
        if self.hop_latency_s is not None:
            lat = self.hop_latency_s
        steps.append(Step(src_gpu=s, dst_gpu=d, size_bytes=size[keep], deps=deps,
                          latency_s=lat + (0.0 if deps else base), intra_server=intra))
    return Schedule(collective=self.coll, algorithm=self.algorithm, protocol=self.protocol.value,
                    steps=tuple(steps), wire_fraction=WIRE_FRACTION[self.protocol])


CASES = [("superpod", Op.ALLREDUCE, 64, 2**30, "nvlstree"), ("superpod", Op.ALLREDUCE, 16, 2**26, "ring"),
         ("superpod", Op.ALLREDUCE, 16, 2**26, "tree"), ("superpod", Op.ALLGATHER, 8, 2**20, "nvls"),
         ("superpod", Op.BROADCAST, 16, 2**24, "ring"), ("leafspine", Op.ALLTOALL, 8, 2**20, "pairwise"),
         ("leafspine", Op.REDUCESCATTER, 6, 2**20, "halving_doubling"),
         ("leafspine", Op.ALLREDUCE, 8, 2**20, "hierarchical"), ("leafspine", Op.ALLGATHER, 4, 0, "direct"),
         ("superpod", Op.REDUCESCATTER, 32, 2**24, "pat"), (None, Op.ALLREDUCE, 5, 2**20, "ring")]


def _fabric(name):
    if name == "superpod":
        return preset("dgx-superpod-h100-1su")
    if name == "leafspine":
        return leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1].value}-{c[4]}")
@pytest.mark.parametrize("model", ["nccl", "fabric"])
def test_one_pass_over_all_flows_builds_the_steps_the_loop_built(case, model, monkeypatch):
    name, op, n, size, algo = case
    fab = _fabric(name)
    gpus = tuple(range(0, 2 * n, 2)) if op == Op.ALLGATHER and fab is not None and n == 4 else tuple(range(n))
    coll = Collective(op=op, gpus=gpus, size_bytes=size)
    channels = 16 if fab is not None else None
    new = build_schedule(coll, algo, fabric=fab, channels=channels, latency_model=model)
    monkeypatch.setattr(algorithms._Builder, "build", _reference_build)
    old = build_schedule(coll, algo, fabric=fab, channels=channels, latency_model=model)
    assert new.num_steps == old.num_steps > 0 or size == 0
    for field in Schedule.__slots__:
        if field != "steps":
            assert getattr(new, field) == getattr(old, field), field
    for a, b in zip(new.steps, old.steps, strict=True):
        _same_step(a, b)


def test_steps_of_makes_the_steps_step_makes():
    rng = np.random.default_rng(2)
    lens = [3, 0, 5, 1]
    src = rng.integers(0, 8, sum(lens))
    dst = (src + 1 + rng.integers(0, 7, src.size)) % 8
    size = rng.uniform(0, 1e6, src.size)
    ptr = np.cumsum([0, *lens])
    deps, lat, intra = [(), (0,), (0, 1), (2,)], [1e-6, 2e-6, 0.0, 3e-6], [True, False, False, True]
    got = steps_of(f_ptr=ptr, src_gpu=src, dst_gpu=dst, size_bytes=size, deps=deps, latency_s=lat,
                   intra_server=intra)
    for i, st in enumerate(got):
        _same_step(st, Step(src_gpu=src[ptr[i]:ptr[i + 1]], dst_gpu=dst[ptr[i]:ptr[i + 1]],
                            size_bytes=size[ptr[i]:ptr[i + 1]], deps=deps[i], latency_s=lat[i],
                            intra_server=intra[i]))


def test_steps_of_refuses_a_flow_to_itself_as_step_does():
    with pytest.raises(ConfigError, match=r"from a GPU to itself"):
        steps_of(f_ptr=np.array([0, 1, 2]), src_gpu=np.array([0, 3]), dst_gpu=np.array([1, 3]),
                 size_bytes=np.ones(2), deps=[(), ()], latency_s=[0.0, 0.0], intra_server=[True, True])
    with pytest.raises(ConfigError, match=r"f_ptr must rise"):
        steps_of(f_ptr=np.array([0, 3]), src_gpu=np.array([0]), dst_gpu=np.array([1]),
                 size_bytes=np.ones(1), deps=[()], latency_s=[0.0], intra_server=[True])


def test_a_retimed_step_is_the_replaced_step():
    st = Step(src_gpu=[0, 1], dst_gpu=[1, 2], size_bytes=[5.0, 6.0], deps=(0,), latency_s=1e-6,
              intra_server=True)
    _same_step(st.retimed(latency_s=3e-6, min_transfer_s=2e-6),
               dataclasses.replace(st, latency_s=3e-6, min_transfer_s=2e-6))
    with pytest.raises(ConfigError, match=r"min_transfer_s must be >= 0 seconds, got -1.0"):
        st.retimed(latency_s=0.0, min_transfer_s=-1.0)
