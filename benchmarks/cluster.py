"""Wall time of one simulated hour of a multi-tenant cluster (prints figures; not a test).

    .venv/bin/python benchmarks/cluster.py [--scale a b] [--horizon 3600] [--fidelity phase]

* (a) 1,024 GPUs (leaf-spine, 128 servers of 8 H100, 16 leaves, 8 spines) and 50 jobs;
* (b) 16,384 GPUs (2,048 servers, 128 leaves, 64 spines) and 500 jobs;

both with background traffic at 20% load (web search sizes, aggregated to at most
``--bg-flows-per-s`` flows per second, default 50, see `flowherd.cluster.simulate`), `phase` fidelity
with the "spread" background rule, the large-cluster rule of docs/scale.md (``--bg-mode``;
"sampled" and "mean" are earlier approximations; "exact" simulates every iteration of a
network job whose links background crosses, except in quiet windows, where the background
coupled to its links stays the same and it fast-forwards exactly, `flowherd.cluster.quiet`;
``--no-quiet`` turns those off; "mean" fast-forwards them at their mean iteration time among
the background; ``--compare-exact`` also runs the exact rule (under ``--bg-mode exact``: without
quiet windows) and prints the JCT error against it, and its CPU time) and the packed placer (``--placer``;
first-fit fragments jobs over servers, so TP groups cross the network).

The job mix (seeded): sizes 1, 2, 4, 8, 16, 32, 64 GPUs with probabilities .25, .1, .1, .3, .12,
.08, .05 (Philly-like: most jobs fit one server); Llama-3 8B (TP = min(8, GPUs), data parallel
over servers) up to 16 GPUs, Llama-3 70B (TP 8, PP 2) from 32; submissions uniform over the
first half of the horizon; iterations such that the job alone would run 5 to 30 minutes
(`TrainingJob.estimate_iteration_s`), capped by ``--max-iterations``. Half of the 1-8 GPU
jobs belong to tenant "t1", the rest spread over "t2".."t4".

If a horizon shorter than an hour is given, the hour's wall time is extrapolated linearly and
the line says so.

The network model (``--network``) is ``roce`` by default (lossless RoCE, PFC and DCQCN-like
rate control, `flowherd.engine.network`: what a GPU back-end fabric is); ``--network ideal`` is the
fluid max-min engine, ``--network ideal roce`` runs both and prints the cost ratio of roce.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

import record  # benchmarks/record.py
from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
from flowherd.engine.network import load_network, use_network
from flowherd.fabric.generators import leaf_spine
from flowherd.workload import TrainingJob

SIZES = np.array([1, 2, 4, 8, 16, 32, 64])
PROBS = np.array([0.25, 0.1, 0.1, 0.3, 0.12, 0.08, 0.05])
SCALES = {"a": (128, 16, 8, 50), "b": (2048, 128, 64, 500)}  # servers, leaves, spines, jobs


def job_mix(num_jobs: int, horizon_s: float, seed: int, max_iterations: int | None) -> list[JobRequest]:
    rng = np.random.default_rng(seed)
    sizes = rng.choice(SIZES, size=num_jobs, p=PROBS)
    submits = np.sort(rng.uniform(0, horizon_s / 2, size=num_jobs))
    est: dict[int, float] = {}
    jobs = []
    for i, (n, sub) in enumerate(zip(sizes.tolist(), submits.tolist(), strict=True)):
        if n <= 16:
            kw = dict(model="llama3-8b", gpus=n, tp=min(8, n))
        else:
            kw = dict(model="llama3-70b", gpus=n, tp=8, pp=2)
        if n not in est:
            est[n] = TrainingJob(**kw).estimate_iteration_s()
        run_s = rng.uniform(300, 1800)
        iters = max(1, round(run_s / est[n]))
        if max_iterations:
            iters = min(iters, max_iterations)
        tenant = "t1" if n <= 8 and rng.random() < 0.5 else f"t{2 + int(rng.integers(0, 3))}"
        spec = TrainingJob(**kw, iterations=iters, name=f"j{i}", tenant=tenant, submit_s=sub)
        jobs.append(JobRequest(name=f"j{i}", tenant=tenant, spec=spec, submit_s=sub))
    return jobs


def jct_errors(res, ref) -> np.ndarray:
    """|JCT / exact JCT - 1| of the jobs finished in both runs."""
    return np.array([abs((a.finish_s - a.start_s) / (b.finish_s - b.start_s) - 1.0)
                     for a, b in zip(res.jobs, ref.jobs, strict=True)
                     if a.finish_s is not None and b.finish_s is not None])


def error_line(res, ref) -> str:
    """JCT and iteration-count error of ``res`` against the exact rule's run ``ref``."""
    jct, its = [], []
    for a, b in zip(res.jobs, ref.jobs, strict=True):
        if a.finish_s is not None and b.finish_s is not None:
            jct.append(abs((a.finish_s - a.start_s) / (b.finish_s - b.start_s) - 1.0))
        its.append(len(a.iteration_end_s) - len(b.iteration_end_s))
    jct_a, its_a = np.array(jct), np.array(its)
    done = "no job finished in both"
    if jct_a.size:
        done = (f"JCT error over {jct_a.size} jobs finished in both: mean {jct_a.mean():.2%}, "
                f"max {jct_a.max():.2%}")
    return (f"{done}; iterations done {int(its_a.sum()):+d} in all "
            f"(max {int(np.abs(its_a).max()):d} for one job)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", nargs="+", default=["a", "b"], choices=sorted(SCALES))
    ap.add_argument("--horizon", type=float, default=3600.0, help="simulated seconds")
    ap.add_argument("--horizon-b", type=float, default=None, help="horizon of (b) if different")
    ap.add_argument("--fidelity", default="phase")
    ap.add_argument("--load", type=float, default=0.2)
    ap.add_argument("--bg-flows-per-s", type=float, default=50.0)
    ap.add_argument("--placer", default="packed")
    ap.add_argument("--bg-mode", default="spread", choices=["exact", "sampled", "mean", "spread"])
    ap.add_argument("--compare-exact", action="store_true",
                    help="also run the exact background rule and print the error against it")
    ap.add_argument("--no-quiet", action="store_true",
                    help="the exact rule without quiet windows (every such iteration simulated)")
    ap.add_argument("--max-iterations", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true",
                    help="print the simulated time reached and the CPU seconds so far every 1%% of "
                         "the horizon (a run cut short still tells how far it got)")
    ap.add_argument("--no-save", action="store_true", help="print only (no benchmarks/results file)")
    ap.add_argument("--network", nargs="+", default=["roce"],
                    help="network models (flowherd.engine.network) to run one after the other (default "
                         "roce: a GPU back-end fabric is lossless RoCE; ideal: fluid max-min); with "
                         "two or more the wall-time ratio to the first is printed")
    args = ap.parse_args()
    walls: dict[tuple[str, str], float] = {}
    cpus: dict[tuple[str, str], float] = {}
    rows: list[list] = []
    figures: dict[str, dict] = {}
    for scale, net_name in [(s, n) for s in args.scale for n in args.network]:
        servers, leaves, spines, num_jobs = SCALES[scale]
        horizon = args.horizon_b if (scale == "b" and args.horizon_b) else args.horizon
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        fab = leaf_spine(servers=servers, gpus_per_server=8, leaves=leaves, spines=spines)
        jobs = job_mix(num_jobs, 3600.0, args.seed, args.max_iterations)
        jobs = [j for j in jobs if j.submit_s < horizon]
        build_s = time.perf_counter() - t0
        bg = (BackgroundSpec(load=args.load, max_flows_per_s=args.bg_flows_per_s, fast_forward=args.bg_mode,
                             quiet_windows=not args.no_quiet) if args.load else None)
        def progress(t_s: float, cpu0: float = cpu0, scale: str = scale) -> None:
            print(f"    ({scale}) simulated {t_s:g} s, CPU {time.process_time() - cpu0:.1f} s", flush=True)

        with use_network(load_network(net_name)):
            res = simulate_cluster(fab, jobs, fidelity=args.fidelity, horizon_s=horizon, background=bg,
                                   placer=args.placer, seed=args.seed,
                                   progress=progress if args.progress else None)
        walls[scale, net_name] = res.wall_s
        cpu_s = time.process_time() - cpu0
        cpus[scale, net_name] = cpu_s
        done = sum(j.finish_s is not None for j in res.jobs)
        started = sum(j.start_s is not None for j in res.jobs)
        ff = sum(j.fast_forwarded_iterations for j in res.jobs)
        iters = sum(len(j.iteration_end_s) for j in res.jobs)
        bg_done = res.background.finished if res.background is not None else 0
        hour = res.wall_s * 3600.0 / horizon
        note = "" if horizon >= 3600 else f" (extrapolated from {horizon:g} s simulated: x{3600 / horizon:g})"
        print(f"({scale}) network {net_name}: {fab.num_gpus} GPUs, {len(jobs)} jobs, "
              f"background {args.load:.0%} "
              f"(k={res.background_aggregation}, {len(res.background_start_s)} flows, {bg_done} done), "
              f"fidelity {args.fidelity} ({args.bg_mode}), horizon {horizon:g} s")
        print(f"    wall {res.wall_s:.1f} s (+{build_s:.1f} s fabric/jobs; CPU {cpu_s:.1f} s in all) -> one "
              f"simulated hour: {hour:.1f} s{note}")
        print(f"    jobs started {started}, finished {done}; iterations {iters} ({ff} fast-forwarded); "
              f"events {res.num_events}, coflows {res.num_coflows}, rate updates {res.num_rate_updates}")
        cpu_hour = cpu_s * 3600.0 / horizon
        key = f"({scale}) {fab.num_gpus:,} GPUs, {net_name}, {args.bg_mode}: one simulated hour"
        figures[key] = record.figure(
            round(cpu_hour, 1),
            "CPU-s" + ("" if horizon >= 3600 else f" (x{3600 / horizon:g} of {horizon:g} s)"),
            target="<= 600" if scale == "b" and horizon >= 3600 else None,
            met=cpu_s <= 600 if scale == "b" and horizon >= 3600 else None)
        rows.append([scale, fab.num_gpus, len(jobs), net_name, horizon, round(res.wall_s, 1), round(cpu_s, 1),
                     round(cpu_hour, 1), started, done, iters, ff, res.num_events, res.num_rate_updates])
        if res.background is not None and res.background.flows:  # what the exact rule's events come from
            s = res.background
            moved = res.num_flows_reallocated / max(res.num_rate_updates, 1)
            mean = s.mean_fct_s()
            print(f"    flows re-allocated per rate update {moved:.1f}; background flows in flight "
                  f"{s.flow_seconds / horizon:.0f} on average, FCT mean "
                  f"{mean if mean is not None else float('nan'):.2f} s, "
                  f"size mean {s.bytes_offered / s.flows / 1e9:.1f} GB")
        if args.compare_exact and bg is not None and (args.bg_mode != "exact" or not args.no_quiet):
            cpu1 = time.process_time()
            with use_network(load_network(net_name)):
                ref = simulate_cluster(fab, jobs, fidelity=args.fidelity, horizon_s=horizon,
                                       background=dataclasses.replace(
                                           bg, fast_forward="exact",
                                           quiet_windows=bg.quiet_windows and args.bg_mode != "exact"),
                                       placer=args.placer, seed=args.seed)
            ref_ff = sum(j.fast_forwarded_iterations for j in ref.jobs)
            quiet = bg.quiet_windows and args.bg_mode != "exact"
            fct = ref.background.mean_fct_s() if ref.background is not None else None
            print(f"    exact rule{'' if quiet else ' without quiet windows'}: wall "
                  f"{ref.wall_s:.1f} s, CPU {time.process_time() - cpu1:.1f} s; {ref_ff} iterations "
                  f"fast-forwarded, events {ref.num_events}, background FCT mean "
                  f"{fct if fct is not None else float('nan'):.2f} s; " + error_line(res, ref))
            err = jct_errors(res, ref)
            if err.size:
                figures[f"({scale}) {args.bg_mode} vs exact: mean JCT error"] = record.figure(
                    round(100 * float(err.mean()), 2), "%", target="<= 2", met=float(err.mean()) <= 0.02)
                figures[f"({scale}) {args.bg_mode} vs exact: max JCT error"] = record.figure(
                    round(100 * float(err.max()), 2), "%", target="<= 5", met=float(err.max()) <= 0.05)
    for scale in args.scale:  # side by side in this one run
        base = args.network[0]
        for net_name in args.network[1:]:
            print(f"({scale}) wall-time ratio network {net_name} / {base}: "
                  f"{walls[scale, net_name] / walls[scale, base]:.2f}x "
                  f"({walls[scale, net_name]:.1f} s / {walls[scale, base]:.1f} s); CPU-time ratio "
                  f"{cpus[scale, net_name] / cpus[scale, base]:.2f}x "
                  f"({cpus[scale, net_name]:.1f} s / {cpus[scale, base]:.1f} s)")
            figures[f"({scale}) CPU-time ratio {net_name} / {base}"] = record.figure(
                round(cpus[scale, net_name] / cpus[scale, base], 2), "x")
    if not args.no_save and figures:
        name = (f"cluster_{''.join(args.scale)}_{args.horizon:g}s_{args.bg_mode}"
                + ("_noquiet" if args.no_quiet else "") + ("_compare" if args.compare_exact else ""))
        path = record.save(name, figures, tables=[record.table(
            "runs (wall and CPU seconds of the simulation; one hour extrapolated linearly from the horizon)",
            ["scale", "GPUs", "jobs", "network", "horizon (s)", "wall (s)", "CPU (s)", "CPU per hour (s)",
             "started", "finished", "iterations", "fast-forwarded", "events", "rate updates"], rows)],
            notes=f"{args.fidelity} fidelity, background {args.load:.0%} ({args.bg_mode} rule), placer "
                  f"{args.placer}, seed {args.seed}; the job mix of benchmarks/cluster.py's docstring. CPU "
                  "seconds of the whole run in process (fabric, jobs, simulation); JCT errors against "
                  "the exact background rule over the jobs finished in both runs.")
        print(f"saved {path}")


if __name__ == "__main__":
    main()
