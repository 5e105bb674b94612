"""flowherd against ASTRA-sim's analytical backend on the recorded cases (prints figures; not a test).

    .venv/bin/python benchmarks/astra_compare.py [--sizes 64 256 1024] [--repeats 3]

The cases and ASTRA-sim's figures are those of ../shared/data/peers/astra_sim_analytical.md
(astra-sim 518bd513, measured on a 2-vCPU machine of this kind; wall = median of 3 runs of the
whole process, start-up included): ring AllReduce and direct AllToAll of 1 GiB on one switch
(``topology: [Switch]``, 50 GB/s with GB = 2^30 B, 1 us per link, so a message crosses two
links), the shipped 4-chunk system config. flowherd runs the same collective on the same
fabric (N GPUs around one switch, 50 * 2^30 B/s and 1 us per link) as a whole process too:
``python -c`` importing flowherd, building the fabric, simulating, printing; the wall time of
each process is measured here, runs alternated between the fidelities (median of
``--repeats``; the CPU time of the process is printed too, since on a shared machine its wall
time is mostly waiting). ASTRA-sim's congestion-aware backend is the reference for speed (the unaware
one cannot model link sharing, so for AllToAll it is n times too optimistic).

Not run here: ASTRA-sim itself (its build steps are at the end of that file; 26 minutes on this
kind of machine) and the ResNet-50 data-parallel case (its per-layer trace is not in the repo).
The simulated times are printed next to ASTRA-sim's for reference: flowherd's flow model
has no store-and-forward (ASTRA-sim aware pays the serialization on both links of the switch,
about +100% at 1 GiB) and no chunking (its 4 serial chunks pay the latency 4 times).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# ASTRA-sim, 1 GiB, shipped 4-chunk config (astra_sim_analytical.md sections 3, 6 and 8):
# (simulated ms unaware, simulated ms aware, wall s unaware, wall s aware)
ASTRA = {
    ("allreduce", 64): (42.3696, 81.7446, 0.068, 0.082),
    ("allreduce", 256): (45.9480, 85.7912, 0.518, 0.677),
    ("allreduce", 1024): (58.4052, 98.3594, 8.655, 15.806),
    ("alltoall", 64): (0.3206, 20.0081, 0.056, 0.078),
    ("alltoall", 256): (0.0862, 20.0078, 1.228, 1.772),
    ("alltoall", 1024): (0.0276, 20.0048, 32.968, 93.574),
}

CHILD = """
import json, sys, numpy as np
from flowherd.collectives.ops import Collective, Op
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import LinkKind, NodeKind
from flowherd.sim.collective import simulate_collective
op, n, fid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
b = FabricBuilder(f"switch-{n}")
gpus = b.add_gpus(servers=np.arange(n), gpu_type=["h100"] * n)
sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
b.connect(gpus, np.repeat(sw, n), 50 * 2**30, 1e-6, LinkKind.NETWORK)
fab = b.build()
algo = "ring" if op == "allreduce" else "direct"
r = simulate_collective(fab, Collective(op=Op(op), size_bytes=2**30, gpus=tuple(range(n))), algorithm=algo,
                        router="shortest", fidelity=fid)
print(json.dumps({"time_s": r.time_s, "steps": r.num_steps, "flows": r.num_flows}))
"""


def run_once(op: str, n: int, fidelity: str) -> tuple[float, float, dict]:
    """Wall and CPU seconds (user + system) of one whole process, and what it printed."""
    t = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", CHILD, op, str(n), fidelity], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=1800)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return time.perf_counter() - t, cpu, json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--ops", nargs="+", default=["allreduce", "alltoall"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("case                  fidelity    flowherd sim   ASTRA aware sim   flowherd wall (CPU)   "
          "ASTRA aware wall   speed-up wall (CPU)")
    for op in args.ops:
        for n in args.sizes:
            walls: dict[str, list[float]] = {"step": [], "collective": []}
            cpus: dict[str, list[float]] = {"step": [], "collective": []}
            res: dict[str, dict] = {}
            for _ in range(args.repeats):  # alternated between the fidelities
                for fid in walls:
                    w, c, r = run_once(op, n, fid)
                    walls[fid].append(w)
                    cpus[fid].append(c)
                    res[fid] = r
            _, aware_ms, _, aware_wall = ASTRA[(op, n)]
            for fid, ws in walls.items():
                w, c = statistics.median(ws), statistics.median(cpus[fid])
                print(f"{op:>9} 1 GiB n={n:<5} {fid:<10} {res[fid]['time_s'] * 1e3:10.3f} ms "
                      f"{aware_ms:12.3f} ms {w:10.2f} s ({c:6.2f} s) {aware_wall:14.3f} s "
                      f"{aware_wall / w:9.1f}x ({aware_wall / c:.1f}x)")


if __name__ == "__main__":
    main()
