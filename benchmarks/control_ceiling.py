"""What a perfect delay-and-paths controller could reach on a control scenario: a fluid estimate.

Under the `buffer` grant a controller decides when a collective starts and which path each GPU
pair takes; it cannot take link capacity from the background, whose flows keep their max-min
share of every link they cross (a delay or a path changes neither how many background flows a
link carries nor their share). This script bounds what such a controller could reach on the
mean JCT with two measured limits and one relaxation:

* **Each job's speed**: its iteration time alone on the fabric with the scenario's background,
  on the GPUs it had in a given run (``--runs``, the `flowherd` rows' ``gpu_ids``), under the
  `flowherd` policy's least-contended paths (``alone_bg_s``). No other job shares the fabric, so
  nothing a controller does about other jobs can make it faster; a job that never started in
  that run is placed by the scenario's placer on the idle fabric.
* **The shared tier**: each job's bytes per iteration on the leaf-spine links (``tier_bytes``,
  measured alone without background; a path choice does not change it in a leaf-spine, where
  every cross-leaf byte crosses one uplink and one downlink whichever spine it takes) and the
  background's average bytes per second there (``bg_tier_bytes_per_s``). Whatever the
  controller, the jobs running at a moment carry at most the tier's capacity minus the
  background's average on it: ``sum_j r_j tier_bytes_j <= C - B`` (``r_j`` iterations per
  second). This relaxes every per-link limit into one pooled one, and the background's bytes
  into their average (a controller cannot make them fewer, only later, at their FCT's cost).
* **The queue**: the run's strict FIFO queue for GPUs (as `control.queue_bound_jct_s`).

The fluid replay then runs every job at the largest rates these allow, in two orders: ``fair``
(every running job slowed by the same factor: what a perfectly balanced max-min network gives
jobs that all send all the time) and ``srpt`` (the job with the least time left first, up to
its speed: the order that minimizes the mean completion time on one shared resource, Schrage
1968; the buffer grant can only approach it by delays, which idle the delayed job's GPUs). The
``fair`` row is the estimate of a perfect delay-and-paths controller; ``srpt`` is looser still.
Both ignore the per-link limits and the max-min losses (a pair's flow is held by its most
contended link) that keep the measured tier under 90% busy, so they are optimistic.

    python benchmarks/control_ceiling.py --runs benchmarks/results/control_roce_heavy.json \
        --scenario heavy --network roce --seeds 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from control import SCENARIOS, ci95  # noqa: E402  (the benchmark beside this script)

ITERS_BYTES = 2  # iterations alone without background to count a job's tier bytes
ITERS_SPEED = 6  # iterations alone with the background to time it (the first is dropped)
HORIZON_S = 120.0  # a lone job's run ends before this (its iterations at a few seconds each)


def _tier_links(fabric) -> np.ndarray:
    from flowherd.sim.cluster_background import link_tiers

    names, tier = link_tiers(fabric)
    return np.flatnonzero(tier == list(names).index("leaf-spine"))


def measure_job(scenario, spec, gpus, tier: np.ndarray) -> dict:
    """One job alone: its leaf-spine bytes per iteration (no background) and its iteration time
    with the scenario's background under the flowherd policy, on ``gpus`` (None: the scenario's
    placer on the idle fabric)."""
    from flowherd.control import make_controller
    from flowherd.sim.cluster import JobRequest, simulate_cluster
    from flowherd.sim.network import use_network

    def run(iterations: int, background, controller):
        short = dataclasses.replace(spec, name="alone", submit_s=0.0, iterations=iterations)
        req = JobRequest(name="alone", tenant="alone", spec=short, submit_s=0.0)
        with use_network(scenario.network):
            return simulate_cluster(scenario.fabric, [req], placer=scenario.placement if gpus is None
                                    else "first-fit", fidelity=scenario.fidelity, horizon_s=HORIZON_S,
                                    router=scenario.routing, background=background, seed=scenario.seed,
                                    placements=None if gpus is None else {"alone": tuple(gpus)},
                                    controller=controller, levers="buffer")

    bare = run(ITERS_BYTES, None, None)
    done = len(bare.jobs[0].iteration_s)
    tier_bytes = float(bare.link_bytes[tier].sum()) / max(done, 1)
    with_bg = run(ITERS_SPEED, scenario.background, make_controller("flowherd"))
    it = np.asarray(with_bg.jobs[0].iteration_s, dtype=float)
    rec = with_bg.jobs[0]
    end = float(with_bg.util_bin_edges_s[-1])  # the run goes on to the horizon (the background does)
    job_tier = tier_bytes * it.size
    bg_rate = max(float(with_bg.link_bytes[tier].sum()) - job_tier, 0.0) / end
    return {"tier_bytes": tier_bytes, "alone_bg_s": float(it[1:].mean() if it.size > 1 else it.mean()),
            "bg_tier_bytes_per_s": bg_rate, "gpus": len(rec.gpus)}


def fluid_jct_s(jobs: list[dict], horizon_s: float, num_gpus: int, capacity: float, order: str) -> float:
    """Mean JCT (censored at the horizon) of the fluid replay (module docstring): strict FIFO for
    GPUs; running job ``j`` at rate ``r_j <= 1 / alone_bg_s`` iterations per second with
    ``sum r_j tier_bytes_j <= capacity``, shared ``fair`` (one slowdown factor for all) or
    ``srpt`` (least time left first)."""
    queue = sorted((j for j in jobs if j["submit_s"] < horizon_s), key=lambda j: j["submit_s"])
    left = {id(j): float(j["iterations"]) for j in queue}
    running: list[dict] = []
    done: dict[int, float] = {}
    free, now, nxt = num_gpus, 0.0, 0
    while now < horizon_s and (nxt < len(queue) or running):
        while nxt < len(queue) and queue[nxt]["submit_s"] <= now + 1e-12 and queue[nxt]["gpus"] <= free:
            free -= queue[nxt]["gpus"]
            queue[nxt]["start_s"] = now
            running.append(queue[nxt])
            nxt += 1
        rates = _rates(running, left, capacity, order)
        # the next event: a job ends, or the queue's head is submitted (it may then fit)
        t_end = min((left[id(j)] / rates[id(j)] for j in running if rates[id(j)] > 0), default=math.inf)
        head = queue[nxt]["submit_s"] if nxt < len(queue) else math.inf
        t_sub = head - now if head > now else math.inf
        dt = min(t_end, t_sub, horizon_s - now)
        for j in running:
            left[id(j)] -= rates[id(j)] * dt
        now += dt
        for j in [j for j in running if left[id(j)] <= 1e-9]:
            running.remove(j)
            free += j["gpus"]
            done[id(j)] = now
    return float(np.mean([min(done.get(id(j), horizon_s), horizon_s) - j["submit_s"] for j in queue]))


def _rates(running: list[dict], left: dict, capacity: float, order: str) -> dict[int, float]:
    cap = {id(j): 1.0 / j["alone_bg_s"] for j in running}
    need = sum(cap[id(j)] * j["tier_bytes"] for j in running)
    if order == "fair" or need <= capacity:
        f = 1.0 if need <= capacity else capacity / need
        return {k: v * f for k, v in cap.items()}
    out, room = {}, capacity
    for j in sorted(running, key=lambda j: left[id(j)] * j["alone_bg_s"]):
        r = cap[id(j)] if j["tier_bytes"] <= 0 else min(cap[id(j)], room / j["tier_bytes"])
        out[id(j)] = r
        room -= r * j["tier_bytes"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="a benchmarks/control.py --json-out file "
                    "whose flowherd rows have gpu_ids")
    ap.add_argument("--scenario", default="heavy")
    ap.add_argument("--network", default="roce")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--placements-of", default="flowherd", help="the controller whose run's GPUs are used")
    args = ap.parse_args(argv)

    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    rows = [r for r in json.loads(args.runs.read_text()) if r["scenario"] == args.scenario
            and r.get("network") == args.network and r.get("background", "on") == "on"]
    path = SCENARIOS.get(args.scenario, Path(args.scenario))
    base = read_scenario_mapping(str(path))
    closed: dict[str, list[float]] = {"fair": [], "srpt": [], "queue": []}
    t0 = time.process_time()
    for sd in range(args.first_seed, args.first_seed + args.seeds):
        of = {r["controller"]: r for r in rows if r["seed"] == sd}
        if "none" not in of or args.placements_of not in of:
            print(f"seed {sd}: no none / {args.placements_of} run in {args.runs}")
            continue
        sc = scenario_from_mapping({**base, "seed": sd, "network": args.network,
                                    "controller": {"name": "flowherd", "levers": "buffer"}})
        tier = _tier_links(sc.fabric)
        capacity = float(np.asarray(sc.fabric.link_capacity_bytes_per_s)[tier].sum())
        detail = {d["name"]: d for d in of[args.placements_of]["job_detail"]}
        cache: dict = {}
        jobs = []
        for spec in sc.jobs:
            d = detail[spec.name]
            gpus = tuple(d.get("gpu_ids") or ()) or None
            key = (repr(dataclasses.replace(spec, name="k", tenant="k", submit_s=0.0, iterations=1)), gpus)
            if key not in cache:
                cache[key] = measure_job(sc, spec, gpus, tier)
            m = cache[key]
            jobs.append({"name": spec.name, "submit_s": spec.submit_s, "gpus": m["gpus"],
                         "iterations": int(spec.iterations), **m})
        bg = float(np.median([j["bg_tier_bytes_per_s"] for j in jobs]))
        n, iso = of["none"]["mean_jct_s"], of["none"]["isolated_jct_s"]
        qb = min(r["queue_bound_jct_s"] for r in of.values())
        res = {o: fluid_jct_s([dict(j) for j in jobs], float(sc.horizon_s), int(sc.fabric.num_gpus),
                              capacity - bg, o) for o in ("fair", "srpt")}
        share = {o: 100 * (n - v) / (n - iso) for o, v in res.items()}
        share["queue"] = 100 * (n - qb) / (n - iso)
        for k, v in share.items():
            closed[k].append(v)
        got = {lab: 100 * (n - r["mean_jct_s"]) / (n - iso) for lab, r in of.items()}
        print(f"seed {sd}: none {n:.2f} s, isolated {iso:.2f}, queue-aware bound {qb:.2f}; tier capacity "
              f"{capacity / 1e9:.0f} GB/s, background on it {bg / 1e9:.1f} GB/s "
              f"({100 * bg / capacity:.0f}%); "
              f"fluid fair {res['fair']:.2f} s ({share['fair']:+.1f}% of the gap), srpt {res['srpt']:.2f} s "
              f"({share['srpt']:+.1f}%), queue-aware {share['queue']:+.1f}%; runs: "
              + ", ".join(f"{lab} {v:+.1f}%" for lab, v in sorted(got.items()) if lab != "none"), flush=True)
        for j in jobs:
            print(f"    {j['name']:<14} {j['gpus']:>3} GPUs  {j['iterations']:>3} it  tier "
                  f"{j['tier_bytes'] / 1e9:6.2f} GB/it  alone with background {j['alone_bg_s']:.3f} s/it")
    print("\nshare of the gap between no control and the isolated bound, mean +- 95% CI over seeds:")
    for k, v in closed.items():
        if v:
            m, h = ci95(np.array(v))
            print(f"  {k:<6} {m:+.1f} +-{h:.1f}%")
    print(f"({time.process_time() - t0:.0f} CPU-s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
