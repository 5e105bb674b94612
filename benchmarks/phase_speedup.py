"""Speed-up of `phase` over `collective` fidelity on one cluster scenario, and their JCT agreement.

    .venv/bin/python benchmarks/phase_speedup.py [--servers 16] [--jobs 12] [--horizon 600]

The scenario: a leaf-spine of ``--servers`` servers of 8 H100 (3 servers per leaf, 1 spine,
uplinks 2:1 oversubscribed), ``--jobs`` Llama-3 8B training jobs of 8, 16 or 32 GPUs (TP 8, data
parallel over servers) submitted at random over the first sixth of the horizon, each running
200 to 1,000 iterations, placed first-fit (so multi-server jobs meet on the spines while they
overlap in time). Optionally background traffic (``--load``; ``--bg-mode``).

Prints both wall times, the speed-up, and the largest relative JCT difference over the jobs
that finished in both runs (the acceptance bound is 2%).
"""

from __future__ import annotations

import argparse

import numpy as np

from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
from flowherd.fabric.generators import leaf_spine
from flowherd.workload import TrainingJob


def scenario(num_jobs: int, horizon_s: float, seed: int) -> list[JobRequest]:
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(num_jobs):
        n = int(rng.choice([8, 16, 32], p=[0.3, 0.3, 0.4]))
        sub = float(rng.uniform(0, horizon_s / 6))
        spec = TrainingJob(model="llama3-8b", gpus=n, tp=8, iterations=int(rng.integers(200, 1000)),
                           name=f"j{i}", submit_s=sub)
        jobs.append(JobRequest(name=f"j{i}", tenant=f"t{i % 3}", spec=spec, submit_s=sub))
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=18)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--horizon", type=float, default=600.0)
    ap.add_argument("--load", type=float, default=0.0)
    ap.add_argument("--bg-mode", default="exact", choices=["exact", "sampled"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fab = leaf_spine(servers=args.servers, gpus_per_server=8, leaves=max(1, args.servers // 3), spines=1,
                     oversubscription=2)
    jobs = scenario(args.jobs, args.horizon, args.seed)
    bg = BackgroundSpec(load=args.load, max_flows_per_s=100, fast_forward=args.bg_mode) if args.load else None
    res = {f: simulate_cluster(fab, jobs, fidelity=f, horizon_s=args.horizon, background=bg, seed=args.seed)
           for f in ("collective", "phase")}
    c, p = res["collective"], res["phase"]
    diffs = []
    for a, b in zip(c.jobs, p.jobs, strict=True):
        if a.finish_s is not None and b.finish_s is not None:
            diffs.append(abs((b.finish_s - b.start_s) / (a.finish_s - a.start_s) - 1))
    ff = sum(j.fast_forwarded_iterations for j in p.jobs)
    iters = sum(len(j.iteration_end_s) for j in p.jobs)
    print(f"{fab.num_gpus} GPUs, {len(jobs)} jobs, horizon {args.horizon:g} s, background {args.load:.0%}"
          + (f" ({args.bg_mode})" if args.load else ""))
    print(f"collective: wall {c.wall_s:.2f} s, {c.num_coflows} coflows, {c.num_events} events")
    print(f"phase:      wall {p.wall_s:.2f} s, {p.num_coflows} coflows, {p.num_events} events, "
          f"{ff} of {iters} iterations fast-forwarded")
    print(f"speed-up {c.wall_s / p.wall_s:.1f}x; JCT max |phase/collective - 1| = "
          f"{max(diffs) if diffs else float('nan'):.3%} over {len(diffs)} finished jobs")


if __name__ == "__main__":
    main()
