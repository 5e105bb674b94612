"""CPU and wall time of the small contended run (prints figures; not a test).

    .venv/bin/python benchmarks/contended_small.py [--horizon 20] [--src /work/main/src] [--network ideal]

Runs `benchmarks/scenarios/contended_small.yaml` (128 H100, four Llama-3-8B jobs whose DDP
buckets cross 16:1 leaf uplinks, 20% background, collective fidelity) in process up to
``--horizon`` simulated seconds (default: the scenario's own, to its end) and prints the CPU and
wall seconds and each job's completed iterations and last iteration end. CPU seconds are the
figure to quote on a shared machine. ``--src`` runs another checkout's package (e.g. main) in a
subprocess the same way, so that two trees are measured side by side, runs alternated.
``--network`` runs another network model than the scenario's (``roce``), e.g. ``ideal``. A run of
this tree alone saves its figures (`record.save`: ``contended_small``, or
``contended_small_<network>_<horizon>s`` with other options).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

SCENARIO = Path(__file__).parent / "scenarios" / "contended_small.yaml"


def run_here(horizon_s: float | None, network: str | None = None) -> dict:
    """Run the scenario in this process; print and return its CPU and wall seconds and jobs."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    source = read_scenario_mapping(str(SCENARIO))
    sc = scenario_from_mapping(source if network is None else {**source, "network": network})
    if horizon_s is not None:
        sc = dataclasses.replace(sc, horizon_s=horizon_s)
    t, c = time.perf_counter(), time.process_time()
    run = run_scenario(sc)
    cpu, wall = time.process_time() - c, time.perf_counter() - t
    jobs = ", ".join(f"{j.name}: {len(j.iteration_end_s)} it" +
                     (f" to {j.iteration_end_s[-1]:.3f} s" if len(j.iteration_end_s) else "")
                     for j in run.cluster.jobs)
    print(f"  {cpu:7.1f} CPU s {wall:7.1f} wall s   ({jobs})", flush=True)
    return {"cpu_s": cpu, "wall_s": wall, "horizon_s": sc.horizon_s, "network": sc.network.model,
            "jobs": [[j.name, len(j.iteration_end_s),
                      float(j.iteration_end_s[-1]) if len(j.iteration_end_s) else None]
                     for j in run.cluster.jobs]}


def save(r: dict, horizon_s: float | None, network: str | None) -> None:
    import record

    name = "contended_small" if horizon_s is None and network is None else (
        f"contended_small_{r['network']}_{r['horizon_s']:g}s")
    record.save(name, {"simulation": record.figure(round(r["cpu_s"], 1), "CPU-s"),
                       "simulation, wall": record.figure(round(r["wall_s"], 1), "s wall")},
                tables=[record.table(f"jobs at the {r['horizon_s']:g} s horizon, network {r['network']}",
                                     ["job", "iterations", "last iteration end (s)"], r["jobs"])],
                notes="benchmarks/scenarios/contended_small.yaml in one process: CPU seconds of "
                      "run_scenario (the scenario's runs, fabric and jobs built inside).")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=float, default=None, help="simulated seconds")
    ap.add_argument("--src", action="append", default=[],
                    help="another tree's src/ to run side by side (repeatable)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--network", default=None, help="network model instead of the scenario's (roce)")
    ap.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.here:
        run_here(args.horizon, args.network)
        return
    if not args.src:
        save(run_here(args.horizon, args.network), args.horizon, args.network)
        return
    here = str(Path(__file__).resolve().parents[1] / "src")
    for _ in range(args.repeats):
        for src in [*args.src, here]:
            print(src, flush=True)
            env = dict(os.environ, PYTHONPATH=src)
            cmd = [sys.executable, __file__, "--here"]
            if args.horizon is not None:
                cmd += ["--horizon", str(args.horizon)]
            if args.network is not None:
                cmd += ["--network", args.network]
            subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
