"""Sweep speed-up: the same sweep on a local Ray instance with two workers against one.

    .venv/bin/python benchmarks/sweep.py                  # 10 runs of the default scenario, 3 repeats
    .venv/bin/python benchmarks/sweep.py --repeats 5 --seeds 6 --workers 1 2
    .venv/bin/python benchmarks/sweep.py --sweep scenarios/sweep_default.yaml

The built-in sweep is the embedded default scenario (256 GPUs, 32 jobs; a run takes about 20 s
alone on this machine) under two placements (first-fit, packed) and 5 seeds: 10 runs of similar
cost, so that two workers get 5 each and the per-run Ray overhead (a few ms of scheduling and
pickling, the first task's imports in each worker) is small against the simulation. Every run is
its own Ray task (batch 1), so that a worker that is done takes the next run.

Each measurement starts a fresh local Ray instance with ``num_cpus`` = workers (what
``flowherd sweep --num-cpus N`` does), runs the sweep into a fresh DuckDB file, and stops Ray. Two
times are taken: *sweep* is the `run_sweep` call with Ray already up (the runs, their storage and
the workers' start-up), *total* adds Ray's start and stop. Worker counts alternate within each
repeat (1, 2, then 2, 1, ...) so that a change in the machine's load hits both alike; the figures
are medians over the repeats. The per-run time (median of the runs' own wall times) shows the
contention: with two workers on two cores each run gets a core only if nothing else runs, so on
a shared machine the runs slow down and the speed-up falls. The rows stored by every
configuration are checked equal.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import record
from flowherd.experiments.store import ResultStore
from flowherd.experiments.sweep import Sweep, load_sweep, run_sweep, sweep_from_mapping


def builtin_sweep(seeds: int) -> Sweep:
    """The default scenario under first-fit and packed placement, `seeds` seeds each."""
    return sweep_from_mapping({"name": "bench-ray-speedup", "base": "default",
                               "axes": {"placement.method": ["first-fit", "packed"]},
                               "seeds": list(range(seeds)), "batch": 1})


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def measure(sweep: Sweep, workers: int, out: Path) -> dict[str, float]:
    """One measurement (module docstring): times in seconds and the stored rows."""
    import ray

    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=workers, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, logging_level=logging.WARNING)
    t1 = time.perf_counter()
    try:
        res = run_sweep(sweep, out, num_cpus=workers, batch=1)
        t2 = time.perf_counter()
    finally:
        ray.shutdown()
    t3 = time.perf_counter()
    if res.failed:
        raise SystemExit(f"{res.failed} runs failed with {workers} workers; see {res.store_path}")
    with ResultStore(out, read_only=True) as st:
        walls = [r["wall_s"] for r in st.runs()]
        rows = {t: st.table_rows(t) for t in ("runs", "jobs", "links", "tenants")}
    return {"sweep_s": t2 - t1, "total_s": t3 - t0, "ray_start_s": t1 - t0,
            "run_s": statistics.median(walls), "busy_s": sum(walls), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default=None, help="a sweep YAML file instead of the built-in sweep")
    ap.add_argument("--seeds", type=int, default=5, help="seeds per placement of the built-in sweep")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sweep = load_sweep(args.sweep) if args.sweep else builtin_sweep(args.seeds)
    print(f"sweep {sweep.name!r}: {len(sweep.points)} points x {len(sweep.seeds)} seeds = {len(sweep.runs)} "
          f"runs; {args.repeats} repeats of workers {args.workers}; {os.cpu_count()} CPUs, {_load()}")
    results: dict[int, list[dict]] = {w: [] for w in args.workers}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            order = args.workers if rep % 2 == 0 else args.workers[::-1]
            for w in order:
                m = measure(sweep, w, Path(tmp) / f"r{rep}-w{w}")
                results[w].append(m)
                print(f"  repeat {rep + 1}, {w} worker{'s' if w > 1 else ' '}: sweep {m['sweep_s']:6.1f} s, "
                      f"total {m['total_s']:6.1f} s (Ray start {m['ray_start_s']:.1f} s); a run "
                      f"{m['run_s']:.2f} s (median), {m['busy_s'] / m['sweep_s']:.2f} runs in flight; "
                      f"{_load()}", flush=True)
    base = args.workers[0]
    ref = results[base][0]["rows"]
    for w in args.workers:
        assert all(m["rows"] == ref for m in results[w]), f"stored rows differ with {w} workers"
    med = {w: {k: statistics.median(m[k] for m in ms) for k in ("sweep_s", "total_s", "run_s")}
           for w, ms in results.items()}
    print(f"medians over {args.repeats} repeats:")
    for w in args.workers:
        spread = [m["sweep_s"] for m in results[w]]
        print(f"  {w} worker{'s' if w > 1 else ' '}: sweep {med[w]['sweep_s']:6.1f} s "
              f"(min {min(spread):.1f}, max {max(spread):.1f}), total {med[w]['total_s']:6.1f} s, "
              f"a run {med[w]['run_s']:.2f} s")
    n = len(sweep.runs)
    figures = {}
    for w in args.workers:
        if w == base:
            continue
        # the best a perfect scheduler can do with n equal runs on w workers against base
        ideal = (-(-n // base)) / (-(-n // w))
        sweep_x = med[base]["sweep_s"] / med[w]["sweep_s"]
        total_x = med[base]["total_s"] / med[w]["total_s"]
        slower = med[w]["run_s"] / med[base]["run_s"]
        print(f"speed-up {w} workers vs {base}: {sweep_x:.2f}x for the sweep, {total_x:.2f}x with Ray start "
              f"and stop (ideal {ideal:.2f}x for {n} equal runs; each run took {slower:.2f}x as long with "
              f"{w} workers as with {base})")
        figures[f"speed-up, {w} workers vs {base}, sweep"] = record.figure(
            round(sweep_x, 2), "x", target=f"ideal {ideal:.2f}x for {n} equal runs")
        figures[f"speed-up, {w} workers vs {base}, with Ray start and stop"] = record.figure(
            round(total_x, 2), "x")
        figures[f"a run's time, {w} workers over {base}"] = record.figure(round(slower, 2), "x")
    print(f"rows identical across worker counts and repeats; {_load()}")
    cpu = sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
              for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    figures["whole run, this process and its children"] = record.figure(round(cpu, 1), "CPU-s")
    rows = [[w, round(med[w]["sweep_s"], 1), round(min(m["sweep_s"] for m in results[w]), 1),
             round(max(m["sweep_s"] for m in results[w]), 1), round(med[w]["total_s"], 1),
             round(med[w]["run_s"], 2)] for w in args.workers]
    headline = args.sweep is None and args.seeds == 5 and args.workers == [1, 2] and args.repeats == 3
    record.save("sweep" if headline else "sweep_custom", figures, tables=[record.table(
        f"sweep {sweep.name!r}, {n} runs, medians over {args.repeats} repeats (wall)",
        ["workers", "sweep (s)", "min (s)", "max (s)", "with Ray start/stop (s)", "a run (s)"], rows)],
        notes="Wall-clock speed-up of a local Ray sweep: on a shared 2-core machine the runs of two "
              "workers contend for the cores, so the figure falls with the machine's load (in the "
              "record). The stored rows are checked equal across worker counts.")


if __name__ == "__main__":
    main()
