"""How far the `collective` fidelity is from the `step` fidelity, idle and under contention.

Run: ``.venv/bin/python benchmarks/fidelity.py [--size 256MiB]``. For each scenario it
simulates the same workload twice, once with every collective at `step` fidelity and once at
`collective` fidelity, and prints each collective's time at both, their relative
difference and the wall-clock time of each simulation.

Scenarios:
* idle: one ring AllReduce alone (theory: equal, `cluster/collective.py` docstring);
* idle-tree: the pipelined double binary tree alone (collective has no pipeline fill/drain);
* two-jobs-oversub: a ring and (2 ms later) a halving-doubling AllReduce on interleaved GPUs of
  a 2:1 oversubscribed leaf-spine;
* ecmp-collisions: a ring AllReduce whose ranks alternate leaves, routed by ECMP (seed 0);
* staggered-elephants: ring AllReduce + two outside flows hitting two NICs at different times;
* mixed-ops: a ring AllReduce and a direct AllToAll sharing NICs of a non-blocking leaf-spine.
"""

from __future__ import annotations

import argparse
import time

from flowherd.cluster.collective import add_schedule
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective
from flowherd.engine.core import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import format_time, parse_size


def _run(fabric, jobs, extra, fidelity, router="spray"):
    """jobs: [(name, collective, algorithm, at_s)]; extra: [(src, dst, bytes, at_s)]."""
    eng = Engine(fabric, make_router(router, fabric), record_flows=False)
    for src, dst, size, at in extra:
        eng.add_coflow(src, dst, size, at_s=at)
    done = {}
    for name, coll, algo, at in jobs:
        sched = build_schedule(coll, algo, fabric=fabric)
        done[name] = (add_schedule(eng, sched, fidelity=fidelity, at_s=at), at)
    t0 = time.perf_counter()
    eng.run()
    wall = time.perf_counter() - t0
    return {name: eng.coflow_finish_s(cid) - at for name, (cid, at) in done.items()}, wall


def scenarios(size: float):
    ls16 = leaf_spine(servers=16, leaves=2, spines=2)
    yield "idle", ls16, [("ring", Collective(op="allreduce", gpus=range(16), size_bytes=size), "ring",
                          0.0)], []
    yield "idle-tree", ls16, [("tree", Collective(op="allreduce", gpus=range(16), size_bytes=size),
                               "tree", 0.0)], []
    over = leaf_spine(servers=16, leaves=2, spines=2, oversubscription=2.0)
    a = [g for g in range(16) if g % 2 == 0]
    b = [g for g in range(16) if g % 2 == 1]
    yield "two-jobs-oversub", over, [
        ("job-a", Collective(op="allreduce", gpus=a[::2] + a[1::2], size_bytes=size), "ring", 0.0),
        ("job-b", Collective(op="allreduce", gpus=b, size_bytes=size), "halving_doubling", 0.002)], []
    ls16x8 = leaf_spine(servers=16, leaves=2, spines=8)
    alt = [g for pair in zip(range(8), range(8, 16), strict=True) for g in pair]
    yield "ecmp-collisions", ls16x8, [("ring", Collective(op="allreduce", gpus=alt, size_bytes=size),
                                       "ring", 0.0)], "ecmp"
    ls10 = leaf_spine(servers=10, leaves=1, spines=1)
    ring8 = Collective(op="allreduce", gpus=range(8), size_bytes=size)
    t_idle = _run(ls10, [("ring", ring8, "ring", 0.0)], [], "step")[0]["ring"]
    yield "staggered-elephants", ls10, [("ring", ring8, "ring", 0.0)], [
        (8, 1, size / 4, 0.0), (9, 2, size / 4, t_idle / 2)]
    yield "mixed-ops", ls16, [
        ("allreduce", Collective(op="allreduce", gpus=range(8), size_bytes=size), "ring", 0.0),
        ("alltoall", Collective(op="alltoall", gpus=range(4, 12), size_bytes=size), "direct", 0.0)], []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="256MiB", help="collective size (nccl-tests convention)")
    args = ap.parse_args()
    size = parse_size(args.size, field="--size")
    print(f"{'scenario':22} {'collective':10} {'step':>10} {'collective':>11} {'diff':>8} "
          f"{'wall step':>10} {'wall coll':>10}")
    for name, fab, jobs, extra in scenarios(size):
        router = "spray"
        if extra == "ecmp":
            router, extra = "ecmp", []
        step, w_step = _run(fab, jobs, extra, "step", router)
        coll, w_coll = _run(fab, jobs, extra, "collective", router)
        for job in step:
            diff = coll[job] / step[job] - 1
            print(f"{name:22} {job:10} {format_time(step[job]):>10} {format_time(coll[job]):>11} "
                  f"{diff:+8.2%} {w_step:9.3f}s {w_coll:9.3f}s")


if __name__ == "__main__":
    main()
