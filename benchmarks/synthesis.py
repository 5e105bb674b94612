"""AllToAll (and AllGather) synthesis against the built-in algorithms on DGX-1, NDv2 and DGX-2,
and the synthesis LP's solve time against the number of GPUs (its limit of scale).

    .venv/bin/python benchmarks/synthesis.py [--size 256MiB] [--scale] [--allgather]

Prints, per fabric, the simulated time and algbw (nccl-tests: size / time) of ``mcf`` (the
time-expanded LP of `flowherd.planning.teccl`), ``bvn`` (FLASH-style), ``direct`` and
``hierarchical``, plus the LP's predicted finish, its lower bound and its solve time. ``--scale``
times the AllToAll LP on leaf-spine fabrics of 4 to 32 GPUs (2 GPUs per server).
"""

from __future__ import annotations

import argparse
import time

from flowherd.cluster.collective import add_schedule, simulate_collective
from flowherd.collectives.ops import Collective
from flowherd.engine.core import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.generators.nvlink import dgx1
from flowherd.fabric.presets import preset
from flowherd.planning.teccl import register_collective_algorithms, synthesize_allgather, synthesize_alltoall
from flowherd.routing.policies import make_router
from flowherd.units import format_time, parse_size


def simulate_schedule(fabric, schedule) -> float:
    """Simulated time of a given schedule (step fidelity, spraying), seconds."""
    eng = Engine(fabric, make_router("spray", fabric), record_flows=False)
    done = add_schedule(eng, schedule, fidelity="step", at_s=0.0)
    eng.run()
    return float(eng.coflow_finish_s(done))


def compare(op: str, size_bytes: float, fabrics: list[str], algos: list[str]) -> None:
    print(f"\n{op} of {size_bytes / 2**20:g} MiB, step fidelity, spraying")
    print(f"{'fabric':8} {'algorithm':13} {'time':>12} {'algbw GB/s':>11}   LP: finish / bound / solve")
    for name in fabrics:
        f = preset(name)
        coll = Collective(op=op, gpus=range(f.num_gpus), size_bytes=size_bytes)
        t0 = time.perf_counter()
        if op == "alltoall":
            syn = synthesize_alltoall(coll, f)
        else:
            syn = synthesize_allgather(coll, f, time_limit_s=20.0)
        solve = time.perf_counter() - t0
        for algo in algos:
            extra = ""
            if algo == "mcf":  # the synthesized schedule itself (mcf may fall back beyond its scale)
                t = simulate_schedule(f, syn.schedule)
                extra = (f"   {format_time(syn.finish_s)} / {format_time(syn.lower_bound_s)} / "
                         f"{solve:.2f} s, {syn.epochs} epochs, {syn.status}")
                if syn.mip_gap:
                    extra += f", gap {syn.mip_gap:.1%}"
            else:
                try:
                    t = simulate_collective(f, coll, algorithm=algo).time_s
                except Exception as err:  # an algorithm that does not apply
                    print(f"{name:8} {algo:13} {'-':>12} {'-':>11}   ({err})")
                    continue
            print(f"{name:8} {algo:13} {format_time(t):>12} {size_bytes / t / 1e9:11.2f}{extra}")


def scale(size_bytes: float) -> None:
    print("\nAllToAll LP solve time vs GPUs (all-pairs GPU graph). default: the epoch search "
          "(1, 2, 4, 8 epochs, stops at the reference time); 8 epochs: one search at 8 epochs, "
          "the expensive case")
    print(f"{'fabric':16} {'GPUs':>5} {'default s':>10} {'epochs':>7} {'8 epochs s':>11} {'epochs':>7}")
    cases = [(f"leaf-spine {n}", leaf_spine(servers=n // 2, gpus_per_server=2, leaves=2, spines=2))
             for n in (4, 8, 12, 16, 24)]
    cases += [(f"dgx1 x{c}", dgx1(chassis=c)) for c in (1, 2)]
    for label, f in cases:
        coll = Collective(op="alltoall", gpus=range(f.num_gpus), size_bytes=size_bytes)
        t0 = time.perf_counter()
        syn = synthesize_alltoall(coll, f)
        t1 = time.perf_counter()
        syn8 = synthesize_alltoall(coll, f, epochs=8)
        t2 = time.perf_counter()
        print(f"{label:16} {f.num_gpus:5d} {t1 - t0:10.2f} {syn.epochs:7d} {t2 - t1:11.2f} {syn8.epochs:7d}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--scale", action="store_true", help="time the LP against the number of GPUs")
    ap.add_argument("--allgather", action="store_true", help="also AllGather (MILP; NDv2 is slow)")
    args = ap.parse_args()
    register_collective_algorithms()
    size = parse_size(args.size, field="--size")
    compare("alltoall", size, ["ndv2", "dgx1", "dgx2"], ["mcf", "bvn", "direct", "hierarchical"])
    if args.allgather:
        compare("allgather", size, ["dgx1", "ndv2"], ["mcf", "ring", "direct", "hierarchical"])
    if args.scale:
        scale(size)


if __name__ == "__main__":
    main()
