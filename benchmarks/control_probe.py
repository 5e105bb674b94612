"""Where the heavy control scenario's contention comes from: its first two jobs, 30 s, iteration times.

The heavy scenario's seed-5 window starts with two 32-GPU jobs whose data-parallel rings cross the
4:1 leaf uplinks (spread placement). This probe runs only those two jobs for 30 s and prints each
job's mean iteration time, iterations done, solo iteration time (alone on the ideal network, the
scenario's ECMP routing, no background: what the benchmark's isolated bound uses) and its
compute-only iteration time, for controllers and ablations of the flowherd policy, with and
without the scenario's 10% background, on a chosen network model and grant. It separates what the
`buffer` grant can reach (the jobs' sharing of the uplinks: paths and delays) from what it cannot
(the background's share of the links, which only a class above the background removes).

    python benchmarks/control_probe.py                      # roce, buffer, with and without background
    python benchmarks/control_probe.py --network ideal --controllers none flowherd
    python benchmarks/control_probe.py --grant priority --controllers flowherd --no-bare
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "control_heavy.yaml"
JOBS = ("philly-r32791", "philly-r31716")  # the first two jobs of seed 5's window
VARIANTS = {"none": ("none", {}), "adaptive": ("adaptive", {}), "flowherd": ("flowherd", {}),
            "paths-only": ("flowherd", {"interleave": False}),
            "delays-only": ("flowherd", {"balance": False})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--network", default="roce", help="ideal, roce or tcp")
    ap.add_argument("--grant", default="buffer", choices=["buffer", "weighted", "priority"])
    ap.add_argument("--controllers", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--no-bare", action="store_true", help="skip the runs without background")
    args = ap.parse_args(argv)

    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    base = read_scenario_mapping(str(SCENARIO))
    print(f"heavy scenario, seed 5, jobs {', '.join(JOBS)} only, 30 s, network {args.network}, grant "
          f"{args.grant}: per job mean iteration s (iterations) / solo s / compute-only s")
    for bg in (True,) if args.no_bare else (True, False):
        for label in args.controllers:
            name, params = VARIANTS[label]
            sc = scenario_from_mapping({**base, "seed": 5, "network": args.network,
                                        "controller": {"name": name, "params": params, "levers": args.grant},
                                        "simulation": {**base["simulation"], "horizon": "30s"}})
            sc = dataclasses.replace(sc, jobs=tuple(j for j in sc.jobs if j.name in JOBS))
            if not bg:
                sc = dataclasses.replace(sc, background=None)
            t = time.process_time()
            r = run_scenario(sc, solo=True)
            cells = [f"{np.mean(rec.iteration_s):.3f} ({len(rec.iteration_s)}) / "
                     f"{j['solo_iteration_s']:.3f} / {rec.compute_only_iteration_s:.3f}"
                     for rec, j in zip(r.cluster.jobs, r.jobs, strict=True)]
            print(f"  {'10% background' if bg else 'no background':<15} {label:<12} " + "   ".join(cells)
                  + f"   ({time.process_time() - t:.0f} s CPU)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
