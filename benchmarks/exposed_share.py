"""Exposed communication of the embedded default and the LLM-era families' training jobs.

For every training job of a scenario (the embedded ``default`` and ``benchmarks/scenarios/llm_*.yaml``,
one seed each) it prints the share of an iteration that communication adds beyond the compute
critical path (``1 - compute_only_iteration / iteration``, `flowherd.experiments.metrics`):

* **alone**: the job on its own GPUs of the run on the idle fabric (``collective`` fidelity, the
  runner's solo measurement): what the iteration model exposes by its mechanisms (bucket order,
  pipeline sends, TP collectives, the step's all-gathers);
* **in the run**: the same job's mean iteration inside the scenario, contention and background
  included: what the planner's and the controllers' levers can win back.

Both are GPU-seconds weighted means over the scenario's training jobs (each job weighted by its
GPUs times its completed iterations' time), with the median and maximum job.

Usage::

    PYTHONPATH=src python benchmarks/exposed_share.py                  # default + 4 LLM families
    PYTHONPATH=src python benchmarks/exposed_share.py --scenarios default --label before
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import record  # benchmarks/record.py
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
ALL = ("default", "llm_kalos_4to1", "llm_kalos_8to1", "llm_seren_1to1", "llm_kalos_rail", "llm_inference")


def shares(name: str) -> dict:
    """The exposed-communication shares of one scenario's training jobs (module docstring)."""
    source = name if name == "default" else str(SCENARIOS / f"{name}.yaml")
    run = run_scenario(load_scenario(source), solo=True)
    alone, inside, weights = [], [], []
    for j in run.jobs:
        if j["kind"] != "training" or not j["mean_iteration_s"] or not j["solo_iteration_s"]:
            continue
        compute = (1.0 - j["comm_share"]) * j["mean_iteration_s"]  # compute-only critical path
        alone.append(max(0.0, 1.0 - compute / j["solo_iteration_s"]))
        inside.append(j["comm_share"])
        weights.append(j["num_gpus"] * j["iterations"] * j["mean_iteration_s"])
    a, i, w = np.array(alone), np.array(inside), np.array(weights)
    if not len(w):
        return {"jobs": 0}
    return {"jobs": len(w), "alone": float(np.average(a, weights=w)),
            "inside": float(np.average(i, weights=w)),
            "alone_median": float(np.median(a)), "alone_max": float(a.max()),
            "inside_median": float(np.median(i)), "inside_max": float(i.max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", default=",".join(ALL), help="comma-separated: default and llm_* names")
    ap.add_argument("--label", default="", help="suffix of the result file (exposed_share_<label>)")
    args = ap.parse_args()
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    rows, figures = [], {}
    print(f"{'scenario':<18} {'jobs':>5} {'alone':>8} {'median':>8} {'max':>8} {'in run':>8} {'median':>8} "
          f"{'max':>8}")
    for name in names:
        t0 = time.perf_counter()
        s = shares(name)
        if not s["jobs"]:
            print(f"{name:<18} {0:>5}")
            continue
        row = [name, s["jobs"], round(s["alone"], 4), round(s["alone_median"], 4), round(s["alone_max"], 4),
               round(s["inside"], 4), round(s["inside_median"], 4), round(s["inside_max"], 4)]
        rows.append(row)
        print(f"{name:<18} {s['jobs']:>5} {s['alone']:>8.1%} {s['alone_median']:>8.1%} "
              f"{s['alone_max']:>8.1%} "
              f"{s['inside']:>8.1%} {s['inside_median']:>8.1%} {s['inside_max']:>8.1%} "
              f"{time.perf_counter() - t0:>6.0f} s", flush=True)
        figures[f"{name}: exposed communication alone"] = record.figure(round(100 * s["alone"], 2), "%")
        figures[f"{name}: exposed communication in the run"] = record.figure(round(100 * s["inside"], 2), "%")
    record.save("exposed_share" + (f"_{args.label}" if args.label else ""), figures, tables=[
        record.table("exposed communication share of the training jobs (GPU-time weighted)",
                     ["scenario", "training jobs", "alone", "alone median", "alone max", "in the run",
                      "in the run median", "in the run max"], rows)],
        notes="Share of an iteration that communication adds beyond the compute critical path, each "
              "training job alone on the idle fabric and inside its scenario (seed of the file).")


if __name__ == "__main__":
    main()
