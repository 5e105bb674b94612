"""The control benchmark's per-run tables: where a run's mean JCT goes (queue wait, solo run,
contention), each tenant's slowdown with Jain's index, and a trained model's learning curve
(`benchmarks/control.py` prints them beside its paired figures)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np


def horizon_s(path: Path) -> float:
    """The horizon of a scenario file, seconds (the runs' JCTs are censored at it)."""
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    return float(scenario_from_mapping(read_scenario_mapping(str(path))).horizon_s)


def breakdown(r: dict, horizon_s: float) -> dict[str, float]:
    """Where one run's mean JCT goes, seconds per job submitted before the horizon: ``wait`` (submit
    to start, to the horizon for a job that never started), ``solo`` (its run at its solo
    iteration time, censored at the horizon) and ``contention`` (the rest of its run: what sharing
    the network cost it). wait + solo + contention = the mean censored JCT."""
    w, so, co = [], [], []
    for d in r["job_detail"]:
        if d["submit_s"] >= horizon_s:
            continue
        start = horizon_s if d["start_s"] is None else min(d["start_s"], horizon_s)
        end = horizon_s if d["finish_s"] is None else min(d["finish_s"], horizon_s)
        run = max(end - start, 0.0)
        alone = 0.0 if d["start_s"] is None else min(d["iterations"] * (d["solo_iteration_s"] or 0.0), run)
        w.append(start - d["submit_s"])
        so.append(alone)
        co.append(run - alone)
    return {"wait": float(np.mean(w)), "solo": float(np.mean(so)), "contention": float(np.mean(co))}


def print_breakdown(rows: list[dict], labels: list[str], horizon_s: float) -> None:
    """Per controller, its mean JCT split into queue wait, solo run and contention (`breakdown`),
    mean over seeds: a controller of the network shortens the contention directly and the wait
    only through it (jobs that end sooner free their GPUs for the queue)."""
    print(f"where the mean JCT goes (s per job, mean over seeds; horizon {horizon_s:.0f} s):")
    print(f"  {'controller':<20} {'wait':>8} {'solo run':>9} {'contention':>11} {'total':>8}")
    for lab in labels:
        rs = [r for r in rows if r["controller"] == lab and r.get("job_detail")]
        if not rs:
            continue
        b = [breakdown(r, horizon_s) for r in rs]
        m = {k: float(np.mean([x[k] for x in b])) for k in ("wait", "solo", "contention")}
        print(f"  {lab:<20} {m['wait']:>8.2f} {m['solo']:>9.2f} {m['contention']:>11.2f} "
              f"{sum(m.values()):>8.2f}")


def tenant_slowdowns(rows: list[dict], labels: list[str]) -> dict[str, dict[str, tuple[float, int]]]:
    """Per controller, each tenant's mean slowdown (`tenant_slowdown`: the mean slowdown of its
    finished jobs in a run) averaged over the seeds where it has one, with that count of seeds."""
    out = {}
    for lab in labels:
        by: dict[str, list[float]] = {}
        for r in rows:
            if r["controller"] == lab:
                for t, v in (r.get("tenant_slowdown") or {}).items():
                    by.setdefault(t, []).append(v)
        if by:
            out[lab] = {t: (float(np.mean(v)), len(v)) for t, v in sorted(by.items())}
    return out


def print_tenants(rows: list[dict], labels: list[str]) -> None:
    """Per controller, each tenant's mean slowdown over seeds (`tenant_slowdowns`; the seeds where
    the tenant finished a job, in brackets when fewer than the controller's runs) and the mean
    Jain index of the tenants' shares (1 / mean slowdown)."""
    ts = tenant_slowdowns(rows, labels)
    tenants = sorted({t for v in ts.values() for t in v})
    if not tenants:
        return
    print("per-tenant mean slowdown of finished jobs (mean over seeds) and Jain's index:")
    print(f"  {'controller':<20} " + " ".join(f"{t:>12}" for t in tenants) + f" {'Jain':>6}")
    for lab, by in ts.items():
        n = sum(r["controller"] == lab for r in rows)
        cells = [("" if t not in by else f"{by[t][0]:.3f}" + ("" if by[t][1] == n else f" ({by[t][1]})"))
                 for t in tenants]
        jain = np.nanmean([r.get("tenant_jain", math.nan) for r in rows if r["controller"] == lab])
        print(f"  {lab:<20} " + " ".join(f"{c:>12}" for c in cells) + f" {jain:>6.3f}")


def print_curve(model: Path) -> None:
    curve = model.with_name(model.stem + "_curve.csv")
    if not curve.is_file():
        print(f"(no learning curve next to {model})")
        return
    with open(curve) as f:
        rows = list(csv.DictReader(f))
    print(f"\nlearning curve of {model.name} (mean JCT on its validation seeds):")
    print(f"{'steps':>8} {'wall s':>8} {'mean JCT s':>11}")
    for r in rows:
        print(f"{int(r['steps']):>8} {float(r['wall_s']):>8.0f} {float(r['mean_jct_s']):>11.3f}")
