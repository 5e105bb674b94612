"""Slowdown of collectives from ECMP hash collisions, against packet spraying, over seeds and sizes.

Run: ``.venv/bin/python benchmarks/ecmp_collisions.py [--seeds 10] [--sizes 16MiB,256MiB,1GiB]``.

On a non-blocking leaf-spine, spraying splits every flow evenly over the spines, so the NICs
are the only bottleneck. ECMP puts each flow on one hashed spine; when two flows of a step hash
onto the same uplink, both run at half rate and the whole step waits for them. The table
prints the spray time and ECMP's slowdown (ECMP time / spray time) as mean, min and max over
the seeds, at step fidelity.
"""

from __future__ import annotations

import argparse

import numpy as np

from flowherd.cluster.collective import simulate_collective
from flowherd.collectives.ops import Collective
from flowherd.fabric.generators import leaf_spine
from flowherd.units import format_size, format_time, parse_size


def cases(size: float):
    # ranks alternate between the two leaves: every ring flow crosses the spine layer
    ls16 = leaf_spine(servers=16, leaves=2, spines=8)
    alt = [g for pair in zip(range(8), range(8, 16), strict=True) for g in pair]
    yield "ring AR, 16 GPUs alternating 2 leaves, 8 spines", ls16, \
        Collective(op="allreduce", gpus=alt, size_bytes=size), "ring"
    yield "ring AR, 16 GPUs packed on 2 leaves, 8 spines", ls16, \
        Collective(op="allreduce", gpus=range(16), size_bytes=size), "ring"
    ls64 = leaf_spine(servers=64, leaves=4, spines=16)
    yield "direct AllToAll, 64 GPUs, 4 leaves, 16 spines", ls64, \
        Collective(op="alltoall", gpus=range(64), size_bytes=size), "direct"
    yield "halving-doubling AR, 64 GPUs, 4 leaves, 16 spines", ls64, \
        Collective(op="allreduce", gpus=range(64), size_bytes=size), "halving_doubling"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--sizes", default="16MiB,256MiB,1GiB")
    args = ap.parse_args()
    sizes = [parse_size(s, field="--sizes") for s in args.sizes.split(",")]
    print(f"{'case':52} {'size':>8} {'spray':>10} {'ECMP/spray mean':>16} {'min':>6} {'max':>6}")
    for size in sizes:
        for name, fab, coll, algo in cases(size):
            spray = simulate_collective(fab, coll, algorithm=algo, router="spray").time_s
            ecmp = np.array([simulate_collective(fab, coll, algorithm=algo, router="ecmp",
                                                 seed=s).time_s for s in range(args.seeds)])
            r = ecmp / spray
            print(f"{name:52} {format_size(size):>8} {format_time(spray):>10} {r.mean():16.3f} "
                  f"{r.min():6.3f} {r.max():6.3f}")


if __name__ == "__main__":
    main()
