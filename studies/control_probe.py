"""Where the heavy control scenario's contention comes from: its first two jobs, 30 s, iteration times.

The heavy scenario's seed-5 window starts with two 32-GPU jobs whose data-parallel rings cross the
4:1 leaf uplinks (spread placement). This probe runs only those two jobs for 30 s and prints each
job's mean iteration time, iterations done, solo iteration time (alone on the ideal network, the
scenario's ECMP routing, no background: what the benchmark's isolated bound uses) and its
compute-only iteration time, and the mean utilization of the NIC (host-leaf) and leaf-spine link
tiers, for controllers and ablations of the flowherd policy, with and without the scenario's 10%
background and (--alone) each job alone with it, on a chosen network model and grant; and the
background's shape (its aggregated flows' size and how many cross the jobs' NICs at once). It
separates what the `buffer` grant can reach (the jobs' sharing of the uplinks: paths and delays)
from what it cannot (the background's share of the links, which only a class above the
background removes).

    python studies/control_probe.py                      # roce, buffer, with and without background
    python studies/control_probe.py --network ideal --controllers none flowherd
    python studies/control_probe.py --grant priority --controllers flowherd --no-bare
    python studies/control_probe.py --alone --no-bare --controllers none flowherd  # each job alone too
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCENARIO = BENCH / "scenarios" / "control_heavy.yaml"
JOBS = ("philly-r32791", "philly-r31716")  # the first two jobs of seed 5's window
GPUS_PER_SERVER = 8  # the scenario's fabric
VARIANTS = {"none": ("none", {}), "adaptive": ("adaptive", {}), "flowherd": ("flowherd", {}),
            "paths-only": ("flowherd", {"interleave": False}),
            "delays-only": ("flowherd", {"balance": False}),
            "split-paths": ("flowherd", {"path_metric": "split"}),  # bytes split by share
            "spray": ("flowherd", {"spray": True}),
            "yield": ("flowherd", {"yield_fraction": 1.0})}


def background_on(cluster, gpus, horizon_s: float) -> tuple[float, float]:
    """The background flows that touch a job's servers (each crosses one NIC there): the mean
    number in flight over ``[0, horizon_s]`` and the share of that time with at least one."""
    servers = np.unique(np.asarray(gpus) // GPUS_PER_SERVER)
    touch = np.isin(cluster.background_src_server, servers) | np.isin(cluster.background_dst_server, servers)
    st = cluster.background_start_s[touch]
    fi = np.nan_to_num(cluster.background_finish_s[touch], nan=horizon_s)
    # sweep: +1 at a start, -1 at a finish; the time with >= 1 in flight
    t = np.concatenate((st, fi))
    d = np.concatenate((np.ones(st.size), -np.ones(fi.size)))
    order = np.argsort(t, kind="stable")
    t, level = np.append(t[order], horizon_s), np.cumsum(d[order])
    dt = np.clip(np.diff(np.minimum(t, horizon_s)), 0.0, None)
    return float(np.sum(level * dt) / horizon_s), float(np.sum(dt[level >= 1]) / horizon_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--network", default="roce", help="ideal, roce or tcp")
    ap.add_argument("--grant", default="buffer", choices=["buffer", "weighted", "priority"])
    ap.add_argument("--controllers", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--no-bare", action="store_true", help="skip the runs without background")
    ap.add_argument("--alone", action="store_true",
                    help="also run each job alone with the background (no other job to share with)")
    args = ap.parse_args(argv)

    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    base = read_scenario_mapping(str(SCENARIO))
    print(f"heavy scenario, seed 5, jobs {', '.join(JOBS)} only, 30 s, network {args.network}, grant "
          f"{args.grant}: per job mean iteration s (iterations) / solo s / compute-only s")
    modes = [("10% background", JOBS, True)] + ([] if args.no_bare else [("no background", JOBS, False)])
    modes += [("alone, 10% bg", (j,), True) for j in JOBS] if args.alone else []
    for mode, jobs, bg in modes:
        for label in args.controllers:
            name, params = VARIANTS[label]
            sc = scenario_from_mapping({**base, "seed": 5, "network": args.network,
                                        "controller": {"name": name, "params": params, "levers": args.grant},
                                        "simulation": {**base["simulation"], "horizon": "30s"}})
            sc = dataclasses.replace(sc, jobs=tuple(j for j in sc.jobs if j.name in jobs))
            if not bg:
                sc = dataclasses.replace(sc, background=None)
            t = time.process_time()
            r = run_scenario(sc, solo=True, background_records=True)
            cells = [f"{np.mean(rec.iteration_s):.3f} ({len(rec.iteration_s)}) / "
                     f"{j['solo_iteration_s']:.3f} / {rec.compute_only_iteration_s:.3f}"
                     for rec, j in zip(r.cluster.jobs, r.jobs, strict=True)]
            c = r.cluster
            tiers = "   ".join(f"{name} {100 * c.util_by_tier[k].mean():.0f}%"
                               for k, name in enumerate(c.util_tiers) if name in ("host-leaf", "leaf-spine"))
            print(f"  {mode:<15} {label:<12} " + "   ".join(cells) + f"   busy: {tiers}"
                  + f"   ({time.process_time() - t:.0f} s CPU)", flush=True)
            if bg and label == args.controllers[0] and c.background_size_bytes.size:
                on = [background_on(c, rec.gpus, 30.0) for rec in c.jobs]
                print(f"    background: {c.background_size_bytes.size} flows of {c.background_aggregation} "
                      f"web-search flows each, mean {c.background_size_bytes.mean() / 1e9:.2f} GB, mean FCT "
                      f"{np.nanmean(c.background_finish_s - c.background_start_s):.2f} s; on each job's "
                      "servers' NICs: " + ", ".join(f"{n:.1f} in flight, >= 1 {100 * f:.1f}% of the time"
                                                    for n, f in on))
    return 0


if __name__ == "__main__":
    sys.exit(main())
