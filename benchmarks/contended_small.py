"""CPU and wall time of the small contended run (prints figures; not a test).

    .venv/bin/python benchmarks/contended_small.py [--horizon 20] [--src /work/main/src] [--network ideal]
    .venv/bin/python benchmarks/contended_small.py --scenario contended_small_bg10   # 7 M background flows

Runs `benchmarks/scenarios/contended_small.yaml` (128 H100, four Llama-3-8B jobs whose DDP
buckets cross 16:1 leaf uplinks, 20% background, collective fidelity) in process up to
``--horizon`` simulated seconds (default: the scenario's own, to its end) and prints the CPU and
wall seconds and each job's completed iterations and last iteration end. CPU seconds are the
figure to quote on a shared machine. ``--src`` runs another checkout's package (e.g. main) in a
subprocess the same way, so that two trees are measured side by side, runs alternated.
``--network`` runs another network model than the scenario's (``roce``), e.g. ``ideal``.
``--scenario`` runs another file of benchmarks/scenarios/ (``contended_small_bg10``: the same jobs
with web-search background loading the leaf uplinks 10%, 7.2 million background flows over the
half hour). The run's peak resident memory is printed too, and the background flows' streaming
summary (`flowherd.cluster.bg_stats`); a run to the scenario's end saves its figures
(`benchmarks/record.py`, one file per scenario).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SCENARIOS = Path(__file__).parent / "scenarios"


def run_here(horizon_s: float | None, network: str | None = None, scenario: str = "contended_small",
             save: bool = True) -> None:
    import resource

    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    source = read_scenario_mapping(str(SCENARIOS / f"{scenario}.yaml"))
    sc = scenario_from_mapping(source if network is None else {**source, "network": network})
    if horizon_s is not None:
        sc = dataclasses.replace(sc, horizon_s=horizon_s)
    t, c = time.perf_counter(), time.process_time()
    run = run_scenario(sc)
    cpu, wall = time.process_time() - c, time.perf_counter() - t
    jobs = ", ".join(f"{j.name}: {len(j.iteration_end_s)} it" +
                     (f" to {j.iteration_end_s[-1]:.3f} s" if len(j.iteration_end_s) else "")
                     for j in run.cluster.jobs)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  {cpu:7.1f} CPU s {wall:7.1f} wall s  peak resident {peak_mb:.0f} MB   ({jobs})", flush=True)
    bg = run.cluster.background
    if bg is not None:
        mean, p99 = bg.mean_fct_s(), bg.percentile_fct_s(99)
        print(f"  background: {bg.flows:,} flows (k={bg.aggregation}), {bg.finished:,} finished, FCT mean "
              f"{mean or float('nan'):.4f} s, p99 {p99 or float('nan'):.4f} s", flush=True)
    if save and horizon_s is None and network is None:
        import record  # benchmarks/record.py

        fig = record.figure
        figures = {"CPU time": fig(round(cpu, 1), "s"),
                   "peak resident memory": fig(round(peak_mb), "MB", target="<= 1000", met=peak_mb <= 1000),
                   "mean JCT": fig(round(float(np.mean([j.iteration_end_s[-1] - j.submit_s
                                                        for j in run.cluster.jobs if j.finish_s])), 3), "s")}
        if bg is not None:
            figures["background flows"] = fig(bg.flows, "")
            figures["background p99 FCT"] = fig(bg.percentile_fct_s(99), "s")
        path = record.save(scenario, figures, notes="whole run in process; CPU and peak resident memory "
                           "of the process (imports and the run)")
        print(f"  saved {path}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=float, default=None, help="simulated seconds")
    ap.add_argument("--src", action="append", default=[],
                    help="another tree's src/ to run side by side (repeatable)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--network", default=None, help="network model instead of the scenario's (roce)")
    ap.add_argument("--scenario", default="contended_small",
                    help="a file of benchmarks/scenarios/ (no .yaml)")
    ap.add_argument("--no-save", action="store_true", help="print only (no benchmarks/results file)")
    ap.add_argument("--here", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.here or not args.src:
        run_here(args.horizon, args.network, args.scenario, save=not args.no_save and not args.here)
        return
    here = str(Path(__file__).resolve().parents[1] / "src")
    for _ in range(args.repeats):
        for src in [*args.src, here]:
            print(src, flush=True)
            env = dict(os.environ, PYTHONPATH=src)
            cmd = [sys.executable, __file__, "--here", "--scenario", args.scenario]
            if args.horizon is not None:
                cmd += ["--horizon", str(args.horizon)]
            if args.network is not None:
                cmd += ["--network", args.network]
            subprocess.run(cmd, env=env, check=True)


if __name__ == "__main__":
    main()
