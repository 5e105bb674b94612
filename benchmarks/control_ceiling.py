"""An estimate (not a bound) of what a delay-and-paths controller could reach on a control scenario.

Under the `buffer` grant a controller decides when a collective starts and which path each GPU
pair takes; it cannot take link capacity from the background, whose flows keep their max-min
share of every link they cross (a delay or a path changes neither how many background flows a
link carries nor their share). This script estimates what such a controller could reach on the
mean JCT with two measured limits and one relaxation. It is an estimate, never a bound: a job
among other jobs can run faster than alone with the background (max-min shares are not monotone:
the other jobs' flows slow background flows on other links, which then take less of the job's;
`control_share_probe.py` measured four heavy-scenario jobs together without the background at
0.77-0.79 s per iteration against 0.83 s each alone), and the background's average is not its
share at every moment. The bound that holds is `control_bounds.py`'s (each job at the least time
any routing gives its bytes, in the same FIFO queue): the shares below are of the gap between no
control and that isolated bound.

* **Each job's speed**: its iteration time alone on the fabric with the scenario's background,
  on the GPUs it had in a given run (``--runs``, the `flowherd` rows' ``gpu_ids``), under the
  `flowherd` policy's least-contended paths (``alone_bg_s``). No other job shares the fabric, so
  nothing a controller does about other jobs can make it faster; a job that never started in
  that run is placed by the scenario's placer on the idle fabric.
* **The leaves' uplinks and downlinks**: each job's bytes per iteration on each leaf's uplinks
  and on each leaf's downlinks (a *group*; ``group_bytes``, measured alone without background;
  in a leaf-spine every cross-leaf byte leaves its source leaf by one of its uplinks and enters
  its destination leaf by one of its downlinks whichever spine carries it, so no path choice
  changes a group's bytes) and the background's average bytes per second on each group
  (``bg_group_bytes_per_s``). Whatever the controller, the jobs running at a moment carry at
  most a group's capacity minus the background's average there:
  ``sum_j r_j group_bytes_j[g] <= C_g - B_g`` (``r_j`` iterations per second). This relaxes the
  per-link limits into one per group (as if the spine choice balanced every byte perfectly) and
  the background's bytes into their average (a controller cannot make them fewer, only later,
  at their FCT's cost).
* **The queue**: the run's strict FIFO queue for GPUs (as `flowherd.control.bound.queue_bound_jct_s`).

The fluid replay then runs every job at the largest rates these allow, in two orders: ``fair``
(max-min fair in the share of its own speed each job gets, by progressive filling: what a
perfectly balanced network gives jobs that all send all the time) and ``srpt`` (the job with
the least time left first, up to its speed: the order that minimizes the mean completion time on
one shared resource, Schrage 1968; the buffer grant can only approach it by delays, which idle
the delayed job's GPUs). The ``fair`` row is the estimate of a perfect delay-and-paths
controller; ``srpt`` is looser still. A third replay, ``alone``, drops the leaves' limit and
runs every job at its speed alone with the background (the same FIFO queue): the queue-aware
replay (`flowherd.control.bound.queue_bound_jct_s`) at those speeds, the background's per-flow
share of the links kept (an estimate too: see above). ``fair`` and ``srpt`` ignore the per-link
limits and the max-min losses (a
pair's flow is held by its most contended link, and a background flow hashed to a link stays
there) that keep the measured leaf-spine tier under 90% busy, so they are optimistic: a
controller that reaches them is perfect; falling short of them does not show that a controller
can do better; and since the speeds are measured, not bounded, a controller can exceed them.

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
import control_bounds as bounds  # noqa: E402  (beside this script)
from control import SCENARIOS, ci95  # noqa: E402  (the benchmark beside this script)

ITERS_BYTES = 2  # iterations alone without background to count a job's leaf-group bytes
ITERS_SPEED = 6  # iterations alone with the background to time it (the first is dropped)
HORIZON_S = 120.0  # a lone job's run ends before this (its iterations at a few seconds each)


def leaf_groups(fabric) -> tuple[np.ndarray, np.ndarray, int]:
    """The leaf-spine links, each one's group (a leaf's uplinks, or its downlinks) and the number
    of groups. Every cross-leaf byte leaves its source leaf on one of that leaf's uplinks and
    enters its destination leaf on one of its downlinks whichever spine carries it, so a group's
    bytes do not depend on the paths chosen."""
    from flowherd.cluster.background import link_tiers

    names, tier = link_tiers(fabric)
    links = np.flatnonzero(tier == list(names).index("leaf-spine"))
    src, dst = np.asarray(fabric.link_src)[links], np.asarray(fabric.link_dst)[links]
    up = np.asarray(fabric.node_tier)[src] == 2
    leaf = np.where(up, src, dst)
    leaves = np.unique(leaf)
    group = np.searchsorted(leaves, leaf) * 2 + (~up).astype(np.int64)
    return links, group, 2 * leaves.size


def measure_job(scenario, spec, gpus, groups: tuple[np.ndarray, np.ndarray, int]) -> dict:
    """One job alone: its bytes per iteration on each leaf group (no background) and its
    iteration time with the scenario's background under the flowherd policy, on ``gpus`` (None:
    the scenario's placer on the idle fabric); and the background's bytes per second per group."""
    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.control import make_controller
    from flowherd.engine.network import use_network

    links, group, n = groups

    def run(iterations: int, background, controller):
        short = dataclasses.replace(spec, name="alone", submit_s=0.0, iterations=iterations)
        req = JobRequest(name="alone", tenant="alone", spec=short, submit_s=0.0)
        with use_network(scenario.network):
            return simulate_cluster(scenario.fabric, [req], placer=scenario.placement if gpus is None
                                    else "first-fit", fidelity=scenario.fidelity, horizon_s=HORIZON_S,
                                    router=scenario.routing, background=background, seed=scenario.seed,
                                    placements=None if gpus is None else {"alone": tuple(gpus)},
                                    controller=controller, levers="buffer")

    def per_group(res) -> np.ndarray:
        return np.bincount(group, weights=np.asarray(res.link_bytes, dtype=float)[links], minlength=n)

    bare = run(ITERS_BYTES, None, None)
    done = len(bare.jobs[0].iteration_s)
    group_bytes = per_group(bare) / max(done, 1)
    with_bg = run(ITERS_SPEED, scenario.background, make_controller("flowherd"))
    it = np.asarray(with_bg.jobs[0].iteration_s, dtype=float)
    end = float(with_bg.util_bin_edges_s[-1])  # the run goes on to the horizon (the background does)
    bg = np.maximum(per_group(with_bg) - group_bytes * it.size, 0.0) / end
    return {"group_bytes": group_bytes, "alone_bg_s": float(it[1:].mean() if it.size > 1 else it.mean()),
            "bg_group_bytes_per_s": bg, "gpus": len(with_bg.jobs[0].gpus)}


def fluid_jct_s(jobs: list[dict], horizon_s: float, num_gpus: int, capacity: np.ndarray, order: str) -> float:
    """Mean JCT (censored at the horizon) of the fluid replay (module docstring): strict FIFO for
    GPUs; running job ``j`` at rate ``r_j <= 1 / alone_bg_s`` iterations per second with
    ``sum_j r_j group_bytes_j[g] <= capacity[g]`` on every group ``g``, shared ``fair`` (max-min
    fair in the share of its own speed each job gets, by progressive filling) or ``srpt`` (least
    time left first, each up to its speed)."""
    queue = sorted((j for j in jobs if j["submit_s"] < horizon_s), key=lambda j: j["submit_s"])
    left = {id(j): float(j["iterations"]) for j in queue}
    running: list[dict] = []
    done: dict[int, float] = {}
    free, now, nxt = num_gpus, 0.0, 0
    while now < horizon_s and (nxt < len(queue) or running):
        while nxt < len(queue) and queue[nxt]["submit_s"] <= now + 1e-12 and queue[nxt]["gpus"] <= free:
            free -= queue[nxt]["gpus"]
            running.append(queue[nxt])
            nxt += 1
        rates = _rates(running, left, np.asarray(capacity, dtype=float), order)
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


def _rates(running: list[dict], left: dict, capacity: np.ndarray, order: str) -> dict[int, float]:
    """Iterations per second of each running job (`fluid_jct_s`)."""
    # demand[j, g]: bytes per second job j puts on group g at its own speed
    demand = np.array([np.asarray(j["group_bytes"], dtype=float) / j["alone_bg_s"] for j in running])
    demand = demand.reshape(len(running), capacity.size)
    x = np.zeros(len(running))  # the share of its own speed each job gets
    room = capacity.copy()
    if order == "srpt":
        for i in sorted(range(len(running)), key=lambda i: left[id(running[i])] * running[i]["alone_bg_s"]):
            on = demand[i] > 0
            x[i] = min(1.0, float(np.min(room[on] / demand[i, on]))) if on.any() else 1.0
            room = np.maximum(room - x[i] * demand[i], 0.0)
    else:  # progressive filling: raise every unfrozen job's share together until a group fills
        active = np.ones(len(running), dtype=bool)
        while active.any():
            load = demand[active].sum(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = np.where(load > 0, room / load, math.inf)
            t = min(float(step.min()), float((1.0 - x[active]).min()))
            x[active] += t
            room = np.maximum(room - t * load, 0.0)
            full = (load > 0) & (room <= 1e-9 * np.maximum(capacity, 1.0))
            frozen = active & ((x >= 1.0 - 1e-12) | (demand[:, full] > 0).any(axis=1))
            if not frozen.any():
                break
            active &= ~frozen
    return {id(j): x[i] / j["alone_bg_s"] for i, j in enumerate(running)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="a benchmarks/control.py --json-out file "
                    "whose flowherd rows have gpu_ids")
    ap.add_argument("--scenario", default="heavy")
    ap.add_argument("--network", default="roce")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--placements-of", default="flowherd", help="the controller whose run's GPUs are used")
    ap.add_argument("--record", default=None,
                    help="save the shares with benchmarks/record.py under this name")
    args = ap.parse_args(argv)

    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    rows = [r for r in json.loads(args.runs.read_text()) if r["scenario"] == args.scenario
            and r.get("network") == args.network and r.get("background", "on") == "on"]
    path = SCENARIOS.get(args.scenario, Path(args.scenario))
    base = read_scenario_mapping(str(path))
    closed: dict[str, list[float]] = {"fair": [], "srpt": [], "alone": [], "queue": []}
    t0 = time.process_time()
    for sd in range(args.first_seed, args.first_seed + args.seeds):
        of = {r["controller"]: r for r in rows if r["seed"] == sd}
        if "none" not in of or args.placements_of not in of:
            print(f"seed {sd}: no none / {args.placements_of} run in {args.runs}")
            continue
        sc = scenario_from_mapping({**base, "seed": sd, "network": args.network,
                                    "controller": {"name": "flowherd", "levers": "buffer"}})
        groups = leaf_groups(sc.fabric)
        links, group, ng = groups
        cap = np.asarray(sc.fabric.link_capacity_bytes_per_s, dtype=float)
        capacity = np.bincount(group, weights=cap[links], minlength=ng)
        detail = {d["name"]: d for d in of[args.placements_of]["job_detail"]}
        cache: dict = {}
        jobs = []
        for spec in sc.jobs:
            d = detail[spec.name]
            gpus = tuple(d.get("gpu_ids") or ()) or None
            key = (repr(dataclasses.replace(spec, name="k", tenant="k", submit_s=0.0, iterations=1)), gpus)
            if key not in cache:
                cache[key] = measure_job(sc, spec, gpus, groups)
            m = cache[key]
            jobs.append({"name": spec.name, "submit_s": spec.submit_s, "gpus": m["gpus"],
                         "iterations": int(spec.iterations), **m})
        bg = np.median([j["bg_group_bytes_per_s"] for j in jobs], axis=0)  # the same background each time
        seed_rows = [bounds.run_bounds(r, path) for r in of.values()]
        n = of["none"]["mean_jct_s"]
        iso = bounds.seed_bound(seed_rows, sd, "bound_jct_s")
        qb = bounds.seed_bound(seed_rows, sd, "bound_queue_jct_s")
        res = {o: fluid_jct_s([dict(j) for j in jobs], float(sc.horizon_s), int(sc.fabric.num_gpus),
                              np.maximum(capacity - bg, 0.0), o) for o in ("fair", "srpt")}
        res["alone"] = fluid_jct_s([dict(j) for j in jobs], float(sc.horizon_s), int(sc.fabric.num_gpus),
                                   np.full(capacity.size, math.inf), "fair")
        share = {o: 100 * (n - v) / (n - iso) for o, v in res.items()}
        share["queue"] = 100 * (n - qb) / (n - iso)
        for k, v in share.items():
            closed[k].append(v)
        got = {lab: 100 * (n - r["mean_jct_s"]) / (n - iso) for lab, r in of.items()}
        print(f"seed {sd}: none {n:.2f} s, isolated bound {iso:.2f}, queue-aware bound {qb:.2f}; leaf groups "
              f"{capacity.mean() / 1e9:.0f} GB/s each, the background {100 * bg.min() / capacity.mean():.0f}-"
              f"{100 * bg.max() / capacity.mean():.0f}% of one; "
              f"estimates: fluid fair {res['fair']:.2f} s ({share['fair']:+.1f}% of the gap), "
              f"srpt {res['srpt']:.2f} s "
              f"({share['srpt']:+.1f}%), alone with the background {res['alone']:.2f} s "
              f"({share['alone']:+.1f}%), queue-aware {share['queue']:+.1f}%; runs: "
              + ", ".join(f"{lab} {v:+.1f}%" for lab, v in sorted(got.items()) if lab != "none"), flush=True)
        for j in jobs:
            print(f"    {j['name']:<14} {j['gpus']:>3} GPUs  {j['iterations']:>3} it  leaf-spine "
                  f"{j['group_bytes'].sum() / 1e9:6.2f} GB/it over {int((j['group_bytes'] > 0).sum())} "
                  "groups  "
                  f"alone with background {j['alone_bg_s']:.3f} s/it")
    print("\nshare of the gap between no control and the isolated bound, mean +- 95% CI over seeds "
          "(fair, srpt, alone: estimates; queue: the bound no network controller passes):")
    figures = {}
    for k, v in closed.items():
        if v:
            m, h = ci95(np.array(v))
            print(f"  {k:<6} {m:+.1f} +-{h:.1f}%")
            what = "bound" if k == "queue" else "estimate"
            figures[f"{args.scenario}: {k} ({what}), share of the gap to the isolated bound"] = {
                "value": round(m, 1), "unit": "%", "ci95": round(h, 1)}
    if args.record:
        import record

        record.save(args.record, figures,
                    notes="Fluid estimates (fair, srpt, alone) of what a delay-and-paths controller reaches, "
                          "and the queue-aware bound, as shares of the gap between no control and the "
                          "isolated bound (control_bounds.py).")
    print(f"({time.process_time() - t0:.0f} CPU-s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
