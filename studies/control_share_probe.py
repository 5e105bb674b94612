"""Two jobs on one pair of leaves, with and without the background: what sharing costs on heavy.

The heavy control scenario's seed-2 window starts with four 16-GPU jobs (tp 8 x dp 2) that the
spread placer puts two by two on the same pairs of leaves (servers 0+2 and 1+3, 4+6 and 5+7), so
each pair of jobs shares its leaves' 4:1 uplinks and downlinks. This probe runs those four jobs
(all submitted at 0, their iterations raised so none ends) for 30 s under a controller and prints
each job's mean iteration time together and each alone, with the scenario's 10% background and
without it, the leaf-spine tier's busy share, and the iterations per second of all jobs together
against alone. ``--offset S`` submits the second job of each pair S seconds later (a one-time
shift of its bursts). ``--tail`` prints, per network collective, the slowest pair's rate over the
mean of its pairs' as the flowherd policy predicts it when it chooses the paths (the share of a
link a new flow gets, `flowherd.control.herd._widest_share`), byte-weighted, for the four jobs
with the background.

    python studies/control_share_probe.py                        # flowherd, roce
    python studies/control_share_probe.py --offset 0.3 --no-alone
    python studies/control_share_probe.py --tail --no-alone
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCENARIO = BENCH / "scenarios" / "control_heavy.yaml"
JOBS = ("philly-r31925", "philly-r31782", "philly-r76804", "philly-r29848")  # seed 2's first 16-GPU jobs
SECOND = ("philly-r76804", "philly-r29848")  # the second job of each pair of leaves
ITERATIONS = 200  # more than 30 s of iterations: no job ends in the probe


def run(controller: str, network: str, jobs: tuple[str, ...], background: bool, offset_s: float = 0.0):
    """The probe's run: {job: (mean iteration s, its servers)} and the leaf-spine tier's busy share."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    base = read_scenario_mapping(str(SCENARIO))
    sc = scenario_from_mapping({**base, "seed": 2, "network": network,
                                "controller": {"name": controller, "levers": "buffer"},
                                "simulation": {**base["simulation"], "horizon": "30s"}})
    specs = tuple(dataclasses.replace(j, submit_s=offset_s if j.name in SECOND else 0.0,
                                      iterations=ITERATIONS) for j in sc.jobs if j.name in jobs)
    sc = dataclasses.replace(sc, jobs=specs, background=sc.background if background else None)
    c = run_scenario(sc, solo=False).cluster
    busy = float(c.util_by_tier[list(c.util_tiers).index("leaf-spine")].mean())
    per = {j.name: (float(np.mean(j.iteration_s)), tuple(int(g) // 8 for g in j.gpus[::8])) for j in c.jobs}
    return per, busy


def tail_ratio(network: str) -> float:
    """Byte-weighted mean over the four jobs' network collectives (with the background) of the
    slowest pair's predicted rate over its pairs' mean, under the flowherd policy."""
    import flowherd.control.herd as herd

    seen: list[tuple[float, float]] = []
    choose = herd._widest_share

    def recording(point, view):
        choice = choose(point, view)
        _, capl, n = herd._link_lists(view)
        paths = [cands[k].tolist() for cands, k in zip(point.candidate_paths, choice, strict=True)]
        for p in paths:  # every pair of the collective counted on its links
            for lk in p:
                n[lk] += 1.0
        rates = [min(capl[lk] / n[lk] for lk in p) for p in paths if p]
        if len(rates) > 1:
            seen.append((point.size_bytes, min(rates) / float(np.mean(rates))))
        return choice

    herd._widest_share = recording
    try:
        run("flowherd", network, JOBS, True)
    finally:
        herd._widest_share = choose
    w = np.array(seen)
    return float(np.sum(w[:, 0] * w[:, 1]) / w[:, 0].sum()) if w.size else math.nan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--controller", default="flowherd")
    ap.add_argument("--network", default="roce")
    ap.add_argument("--offset", type=float, default=0.0,
                    help="the second job of each pair starts this much later, s")
    ap.add_argument("--no-alone", action="store_true", help="skip each job alone")
    ap.add_argument("--tail", action="store_true", help="the slowest pair's share over the mean (flowherd)")
    args = ap.parse_args(argv)

    t0 = time.process_time()
    print(f"heavy seed 2, jobs {', '.join(JOBS)}, 30 s, {args.controller}, {args.network}, buffer"
          + (f", second of each pair {args.offset:g} s later" if args.offset else ""))
    for bg in (True, False):
        together, busy = run(args.controller, args.network, JOBS, bg, args.offset)
        print(f"  {'with' if bg else 'without'} the background, together: "
              + ", ".join(f"{n} {v[0]:.3f} s/it (servers {v[1]})" for n, v in together.items())
              + f"; leaf-spine busy {100 * busy:.0f}%", flush=True)
        if args.no_alone:
            continue
        alone = {j: run(args.controller, args.network, (j,), bg)[0][j][0] for j in JOBS}
        print("    each alone: " + ", ".join(f"{n} {v:.3f} s/it" for n, v in alone.items()))
        rate, rate_alone = sum(1 / v[0] for v in together.values()), sum(1 / v for v in alone.values())
        print(f"    iterations per second of the four: together {rate:.2f}, each alone {rate_alone:.2f}",
              flush=True)
    if args.tail:
        print(f"  slowest pair's predicted rate over its collective's mean (byte-weighted): "
              f"{tail_ratio(args.network):.3f}")
    print(f"({time.process_time() - t0:.0f} CPU-s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
