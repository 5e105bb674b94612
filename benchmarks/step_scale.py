"""How a 1 GiB ring AllReduce's cost grows with the GPUs, at step and collective fidelity (prints
figures; not a test).

    PYTHONPATH=src python benchmarks/step_scale.py [--sizes 64 128 ... 4096] [--collective 16384]
    PYTHONPATH=src python benchmarks/step_scale.py --gpus-per-server 8     # NCCL's 8 rings per server

Each case is a whole process (``python -c`` importing flowherd, building the fabric, simulating,
printing), as `benchmarks/astra_compare.py` measures them: its CPU seconds (user + system) and
its peak resident memory, and inside it the simulation's own CPU seconds
(`simulate_collective` alone) and its growth of the resident memory over what the process held
before it. The fabric is a leaf-spine with 32 spines and 32 servers per leaf (one GPU per server
unless ``--gpus-per-server``), NIC 400 Gb/s, 1 us per link; the collective ring AllReduce of
1 GiB on every GPU, NCCL's channels and latencies (`flowherd.cluster.collective`), spraying.

A ring AllReduce over ``n`` GPUs is ``2(n-1)`` steps of ``n`` flows (times NCCL's rings per
server), so the whole run is ``O(n^2)`` flows; at step fidelity every step's flows are simulated,
and the target shape is ``O(n)`` time per step and ``O(n)`` memory: the printed exponents are the
least-squares slopes of log(CPU s) and log(memory) over log(GPUs), from ``--fit-from`` GPUs on
(below, start-up dominates). A warm-up process runs first so that no timed case compiles the
engine's kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import record

SRC = Path(__file__).resolve().parents[1] / "src"

CHILD = """
import json, resource, sys, time
from flowherd.collectives.ops import Collective, Op
from flowherd.fabric.generators import leaf_spine
from flowherd.cluster.collective import simulate_collective
n, fid, gps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
servers = n // gps
fab = leaf_spine(servers=servers, gpus_per_server=gps, leaves=max(1, servers // 32), spines=32)
def rss_kb():
    with open("/proc/self/status") as fh:
        return next(int(x.split()[1]) for x in fh if x.startswith("VmRSS:"))
before = rss_kb()
c = time.process_time()
r = simulate_collective(fab, Collective(op=Op.ALLREDUCE, size_bytes=2**30, gpus=tuple(range(n))),
                        algorithm="ring", router="spray", fidelity=fid)
sim_cpu = time.process_time() - c
print(json.dumps({"time_s": r.time_s, "steps": r.num_steps, "flows": r.num_flows, "sim_cpu_s": sim_cpu,
                  "rss_before_kb": before, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_case(n: int, fidelity: str, gps: int) -> dict:
    """One whole process: its CPU seconds (user + system, from the children's rusage around it),
    its peak resident memory (its own ``ru_maxrss`` at the end) and what it printed."""
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, str(n), fidelity, str(gps)], env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"the {n}-GPU {fidelity} case failed: {p.stderr.strip().splitlines()[-1:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    got.update(n=n, fidelity=fidelity, wall_s=wall, peak_kb=got["maxrss_kb"],
               cpu_s=(r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return got


def slope(x: list[float], y: list[float]) -> float:
    """Least-squares slope of log(y) over log(x)."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048, 4096],
                    help="GPUs of the step-fidelity series")
    ap.add_argument("--collective", type=int, nargs="*", default=[4096, 16384],
                    help="GPUs of the collective-fidelity cases")
    ap.add_argument("--gpus-per-server", type=int, default=1)
    ap.add_argument("--fit-from", type=int, default=512, help="fit the exponents from this many GPUs on")
    ap.add_argument("--no-save", action="store_true", help="print only (no benchmarks/results file)")
    args = ap.parse_args()
    gps = args.gpus_per_server
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; leaf-spine, 32 spines, 32 "
          f"servers per leaf, {gps} GPU(s) per server; 1 GiB ring AllReduce, spraying", flush=True)
    run_case(64, "step", gps)  # warm-up: the kernels compile (or load from numba's cache) here
    print(f"{'GPUs':>6} {'fidelity':<10} {'steps':>6} {'flows':>12} {'sim ms':>9} {'CPU s':>8} "
          f"{'in sim s':>9} {'ms/step':>8} {'peak MB':>8} {'sim MB':>7}", flush=True)
    rows, series = [], []
    cases = [(n, "step") for n in args.sizes] + [(n, "collective") for n in args.collective]
    for n, fid in cases:
        g = run_case(n, fid, gps)
        sim_mb = max(0.0, (g["maxrss_kb"] - g["rss_before_kb"]) / 1024)
        per_step = g["sim_cpu_s"] / g["steps"] * 1e3
        print(f"{n:>6} {fid:<10} {g['steps']:>6} {g['flows']:>12,} {g['time_s'] * 1e3:>9.3f} "
              f"{g['cpu_s']:>8.2f} {g['sim_cpu_s']:>9.2f} {per_step:>8.3f} {g['peak_kb'] / 1024:>8.0f} "
              f"{sim_mb:>7.0f}", flush=True)
        rows.append([n, fid, g["steps"], g["flows"], round(g["time_s"] * 1e3, 4), round(g["cpu_s"], 2),
                     round(g["sim_cpu_s"], 2), round(per_step, 4), round(g["peak_kb"] / 1024), round(sim_mb)])
        if fid == "step":
            series.append((n, g["sim_cpu_s"], per_step, max(sim_mb, 1.0), g["peak_kb"] / 1024, g["cpu_s"]))
    fit = [s for s in series if s[0] >= args.fit_from]
    figures = {}
    if len(fit) >= 2:
        ns = [s[0] for s in fit]
        e_time, e_step = slope(ns, [s[1] for s in fit]), slope(ns, [s[2] for s in fit])
        e_mem, e_peak = slope(ns, [s[3] for s in fit]), slope(ns, [s[4] for s in fit])
        print(f"fitted exponents from {args.fit_from} to {ns[-1]} GPUs (step fidelity): simulation CPU "
              f"{e_time:.2f} (per step {e_step:.2f}); simulation memory {e_mem:.2f}, whole-process peak "
              f"memory {e_peak:.2f}", flush=True)
        fig = record.figure
        figures.update({
            "exponent of simulation CPU s over GPUs (step)": fig(round(e_time, 3), "", target="~2"),
            "exponent of CPU s per step over GPUs (step)": fig(round(e_step, 3), "", target="<= 1.1",
                                                               met=e_step <= 1.1),
            "exponent of simulation memory over GPUs (step)": fig(round(e_mem, 3), "", target="<= 1.1",
                                                                  met=e_mem <= 1.1),
            "exponent of whole-process peak memory over GPUs (step)": fig(round(e_peak, 3), "")})
    by = {(r[0], r[1]): r for r in rows}
    if (4096, "step") in by and gps == 1:
        r = by[4096, "step"]
        figures["4,096 GPUs step fidelity, whole process"] = record.figure(r[5], "CPU s", target="<= 60",
                                                                           met=r[5] <= 60)
        figures["4,096 GPUs step fidelity, peak resident"] = record.figure(r[8], "MB", target="<= 2000",
                                                                           met=r[8] <= 2000)
    if (16384, "collective") in by and gps == 1:
        r = by[16384, "collective"]
        figures["16,384 GPUs collective fidelity, whole process"] = record.figure(
            r[5], "CPU s", target="<= 30", met=r[5] <= 30)
    print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    if not args.no_save:
        name = "step_scale" if gps == 1 else f"step_scale_{gps}gps"
        cols = ["GPUs", "fidelity", "steps", "flows", "simulated ms", "CPU s", "in simulation CPU s",
                "CPU ms per step", "peak MB", "simulation MB"]
        path = record.save(name, figures, tables=[record.table(
            "1 GiB ring AllReduce, one process per case", cols, rows)],
            notes="CPU seconds and peak resident memory of whole processes; the exponents are "
                  "least-squares slopes in log-log from the fit's first size on.")
        print(f"saved {path}", flush=True)


if __name__ == "__main__":
    main()
