"""Sweep speed-up: the same sweep on a local Ray instance with one worker, then with two.

    .venv/bin/python benchmarks/sweep.py [--sweep scenarios/sweep_tiny.yaml] [--workers 1 2]

Each configuration starts its own local Ray instance (``num_cpus`` = workers), runs every run of
the sweep into a fresh DuckDB file and stops Ray; the time printed is the whole `run_sweep` call
(Ray start-up and shutdown included), and the time the runs themselves took (the sum of their
wall times) shows how much of it is simulation. The rows of every configuration are checked equal.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from flowherd.experiments.store import ResultStore
from flowherd.experiments.sweep import load_sweep, run_sweep

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default=str(ROOT / "scenarios" / "sweep_tiny.yaml"))
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    sweep = load_sweep(args.sweep)
    print(f"sweep {sweep.name!r}: {len(sweep.points)} points x {len(sweep.seeds)} seeds = "
          f"{len(sweep.runs)} runs; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other work on the machine slows "
          "the two-worker case most)")
    times: dict[int, float] = {}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.workers:
            out = Path(tmp) / f"w{w}"
            t0 = time.perf_counter()
            res = run_sweep(sweep, out, num_cpus=w)
            times[w] = time.perf_counter() - t0
            with ResultStore(out, read_only=True) as st:
                busy = sum(r["wall_s"] for r in st.runs())
                rows[w] = {t: st.table_rows(t) for t in ("runs", "jobs", "links", "tenants")}
            print(f"{w} worker{'s' if w > 1 else ' '}: {times[w]:6.1f} s wall ({res.ok} ok, "
                  f"{res.failed} failed); the runs took {busy:.1f} s of worker time, {busy / times[w]:.2f} "
                  "runs in flight on average")
    base = args.workers[0]
    for w in args.workers[1:]:
        print(f"speed-up {w} workers vs {base}: {times[base] / times[w]:.2f}x")
        assert rows[w] == rows[base], "results differ between worker counts"
    print("rows identical across worker counts")


if __name__ == "__main__":
    main()
