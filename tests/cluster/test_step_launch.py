"""Steps launched as they become ready (`flowherd.cluster.step_launch`) against all steps added at
once (`add_schedule` at ``step`` fidelity): the same times, flows merged only where exact, the
engine holding the steps in flight, not the schedule."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.collective import add_schedule, nccl_channels, simulate_collective
from flowherd.cluster.step_launch import _merge, launch_schedule, step_plan
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective, Op
from flowherd.engine.core import Engine
from flowherd.engine.network import load_network, use_network
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router


def _fabric():
    # 4 servers of 8 GPUs (NCCL's 8 rings cross the same NVLink pairs), 2:1 oversubscribed
    return leaf_spine(servers=4, gpus_per_server=8, leaves=2, spines=2, oversubscription=2.0)


def _both(fab, sched, router, *, at_s=0.0, others=()):
    """Finish time of the schedule added at once, and launched step by step (plus each run's
    outside coflows' finish times)."""
    out = []
    for how in ("batch", "launch"):
        eng = Engine(fab, router, record_flows=False)
        ids = [eng.add_coflow(s, d, z, at_s=t) for s, d, z, t in others]
        if how == "batch":
            done = add_schedule(eng, sched, fidelity="step", at_s=at_s)
            eng.run()
            t = eng.coflow_finish_s(done)
        else:
            end = []
            launch_schedule(eng, step_plan(sched, router, merge=eng.network is None), then=end.append,
                            at_s=at_s)
            eng.run()
            t = end[0]
        out.append((t, [eng.coflow_finish_s(i) for i in ids]))
    return out


@pytest.mark.parametrize("algo", ["ring", "tree", "halving_doubling", "direct"])
def test_launched_steps_end_when_the_batch_does(algo):
    fab = _fabric()
    coll = Collective(op=Op.ALLREDUCE, gpus=tuple(range(32)), size_bytes=64 * 2**20)
    ch = nccl_channels(fab, coll) if algo in ("ring", "tree") else None
    sched = build_schedule(coll, algo, fabric=fab, channels=ch)
    rtr = make_router("ecmp", fab, seed=0)
    # outside traffic on the uplinks, starting mid-collective: the steps share links unevenly
    others = [(np.array([0, 9]), np.array([17, 30]), np.array([3e8, 2e8]), 1e-4)]
    (t_b, o_b), (t_l, o_l) = _both(fab, sched, rtr, at_s=2e-5, others=others)
    assert t_b > 2e-5 and t_l == pytest.approx(t_b, rel=1e-9)
    assert o_l == pytest.approx(o_b, rel=1e-9)


def test_identical_flows_merge_into_one_of_their_weight():
    src, dst = np.array([3, 1, 3, 3, 1]), np.array([4, 2, 4, 4, 2])
    size = np.array([5.0, 2.0, 5.0, 6.0, 2.0])
    s, d, z, k = _merge(src, dst, size)
    # (3, 4, 5) twice, (1, 2, 2) twice, (3, 4, 6) once: in the order of their first flow
    assert s.tolist() == [3, 1, 3] and d.tolist() == [4, 2, 4]
    assert z.tolist() == [10.0, 4.0, 6.0] and k.tolist() == [2.0, 2.0, 1.0]


def test_an_nccl_ring_step_merges_its_shared_nvlink_pairs():
    fab = _fabric()
    coll = Collective(op=Op.ALLREDUCE, gpus=tuple(range(32)), size_bytes=2**30)
    sched = build_schedule(coll, "ring", fabric=fab, channels=nccl_channels(fab, coll))
    rtr = make_router("spray", fab, seed=0)
    merged, plain = step_plan(sched, rtr, merge=True), step_plan(sched, rtr, merge=False)
    assert plain.num_engine_flows == sched.num_flows
    assert merged.num_engine_flows < plain.num_engine_flows / 2
    # every merged flow stands for its share of the schedule's bytes
    for p, q in zip(merged.patterns, plain.patterns, strict=True):
        assert p.share.sum() == q.src.size and p.wire_bytes.sum() == pytest.approx(q.wire_bytes.sum())


def test_simulated_collective_holds_the_steps_in_flight_only():
    fab = _fabric()
    coll = Collective(op=Op.ALLREDUCE, gpus=tuple(range(32)), size_bytes=2**26)
    sched = build_schedule(coll, "ring", fabric=fab, channels=nccl_channels(fab, coll))
    rtr = make_router("spray", fab, seed=0)
    eng = Engine(fab, rtr, record_flows=False)
    eng._compact_min = 0  # drop finished flows at every step that can
    plan = step_plan(sched, rtr, merge=True)
    held = []

    def then(t):
        held.append(t)

    launch_schedule(eng, plan, then=then)
    per_step = max(p.src.size for p in plan.patterns)
    peak = 0
    while not held:
        eng.run(until_s=eng.now_s + 1e-5)
        peak = max(peak, eng._f.count)
    assert eng.num_coflows == sched.num_steps
    assert peak <= 3 * per_step < sched.num_flows / 10


def test_a_congestion_model_sees_every_flow():
    fab = _fabric()
    coll = Collective(op=Op.ALLREDUCE, gpus=tuple(range(32)), size_bytes=2**24)
    with use_network(load_network("roce")):
        eng = Engine(fab, make_router("spray", fab, seed=0), record_flows=False)
    assert eng.network is not None
    sched = build_schedule(coll, "ring", fabric=fab, channels=nccl_channels(fab, coll))
    plan = step_plan(sched, eng.router, merge=eng.network is None)
    assert not plan.merged and plan.num_engine_flows == sched.num_flows


def test_simulate_collective_step_equals_the_batch_on_an_idle_fabric():
    fab = _fabric()
    coll = Collective(op=Op.ALLREDUCE, gpus=tuple(range(32)), size_bytes=2**30)
    r = simulate_collective(fab, coll, algorithm="ring", router="spray", fidelity="step")
    sched = build_schedule(coll, "ring", fabric=fab, channels=r.channels)
    eng = Engine(fab, make_router("spray", fab, seed=0), record_flows=False)
    done = add_schedule(eng, sched, fidelity="step", at_s=0.0)
    eng.run()
    assert r.time_s == pytest.approx(eng.coflow_finish_s(done), rel=1e-12)
    assert r.num_flows == sched.num_flows and r.num_steps == 62
