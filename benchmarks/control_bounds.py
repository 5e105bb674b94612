"""The bounds of the control benchmark (benchmarks/control.py): what no controller can beat.

Two bounds per run, from each job's `flowherd.control.bound.IterationBound` (its iteration with
every collective at the least time any routing over shortest paths gives its bytes, no background, no
other job; a job that never started: its compute-only critical path):

* ``bound_jct_s``, the *isolated bound*: every job starts when submitted and runs its iterations
  at its bound (censored at the horizon, as the runs' JCTs);
* ``bound_queue_jct_s``, the *queue-aware bound*: the same jobs wait for GPUs in the cluster's
  strict FIFO queue (`flowherd.control.bound.queue_bound_jct_s`).

Each run's bounds hold for that run (its jobs on its GPUs); a seed's bound is the least over the
seed's runs, which therefore holds for every one of them. The bounds are computed from a row's
``job_detail`` (GPU ids, iterations, submit times) and the scenario, so stored runs get them
without being re-run.

"Gap closed" (the share of the gap between no control and the isolated bound that a controller
closes on the same seed) is printed only where the gap is larger than the seed spread: the mean
gap over the seeds exceeds the standard deviation over the seeds of no control's mean JCT.
Elsewhere the denominator is within the noise between windows and the share would swing with it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

_BOUNDS: dict = {}  # (scenario path, seed) -> (scenario, IterationBound)
_KNOWN: dict = {}  # (scenario path, seed, job name, GPU ids) -> a stored run's bound_iteration_s


def _scenario(path: Path, seed: int):
    from flowherd.control.bound import IterationBound
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    key = (str(path), int(seed))
    if key not in _BOUNDS:
        sc = scenario_from_mapping({**read_scenario_mapping(str(path)), "seed": int(seed)})
        fab_key = str(path)
        shared = next((b for (p, _), (_, b) in _BOUNDS.items() if p == fab_key), None)
        _BOUNDS[key] = (sc, shared if shared is not None else IterationBound(sc.fabric))
    return _BOUNDS[key]


def remember(rows: list[dict], paths: dict) -> int:
    """Files the job bounds of stored runs (``rows`` with `run_bounds`' ``bound_iteration_s``,
    their scenario's file in ``paths`` by the rows' ``scenario``) for `run_bounds`: a job of the
    same scenario and seed on the same GPUs has the same bound, so a new run takes it rather than
    solving its LPs again (on a 6,776-GPU fabric those take minutes a run). Returns how many job
    bounds were filed."""
    n = 0
    for r in rows:
        path = paths.get(r.get("scenario"))
        if path is None:
            continue
        for d in r.get("job_detail") or ():
            b = d.get("bound_iteration_s")
            if b is not None and d.get("start_s") is not None and d.get("gpu_ids"):
                key = (str(path), int(r["seed"]), d["name"], tuple(int(g) for g in d["gpu_ids"]))
                n += key not in _KNOWN
                _KNOWN[key] = float(b)
    return n


def run_bounds(row: dict, path: Path) -> dict:
    """``row`` with ``bound_jct_s``, ``bound_queue_jct_s`` and each job's ``bound_iteration_s``
    (module docstring); a row that has them is returned as it is."""
    if "bound_jct_s" in row or not row.get("job_detail"):
        return row
    from flowherd.control.bound import isolated_jct_s, queue_bound_jct_s
    from flowherd.workload import TrainingJob

    sc, bound = _scenario(path, row["seed"])
    specs = {j.name: j for j in sc.jobs}
    detail = []
    for d in row["job_detail"]:
        spec = specs.get(d["name"])
        it = None
        if isinstance(spec, TrainingJob):
            gpus = d.get("gpu_ids") if d.get("start_s") is not None else None
            k = (str(path), int(row["seed"]), d["name"], tuple(int(g) for g in gpus)) if gpus else None
            it = _KNOWN[k] if k in _KNOWN else bound.job_s(spec, gpus)
        detail.append({**d, "bound_iteration_s": it})
    known = [{"submit_s": d["submit_s"], "gpus": d["gpus"], "iterations": d["iterations"],
              "iteration_s": d["bound_iteration_s"]} for d in detail if d["bound_iteration_s"] is not None]
    horizon = float(sc.horizon_s)
    return {**row, "job_detail": detail, "bound_jct_s": isolated_jct_s(known, horizon),
            "bound_queue_jct_s": queue_bound_jct_s(known, horizon, int(sc.fabric.num_gpus))}


def seed_bound(rows: list[dict], seed: int, key: str) -> float:
    """The least ``key`` over the runs of ``seed`` (a bound of each of them, so of all)."""
    v = [r[key] for r in rows if r["seed"] == seed and math.isfinite(r.get(key, math.nan))]
    return min(v) if v else math.nan


def gap_exceeds_spread(rows: list[dict]) -> tuple[bool, float, float]:
    """Whether the gap between no control and the isolated bound exceeds the seed spread (module
    docstring), with the mean gap and the spread, seconds."""
    none = sorted((r for r in rows if r["controller"] == "none"), key=lambda r: r["seed"])
    gaps = [r["mean_jct_s"] - seed_bound(rows, r["seed"], "bound_jct_s") for r in none]
    if len(gaps) < 2:
        return False, float(np.mean(gaps)) if gaps else math.nan, math.nan
    spread = float(np.std([r["mean_jct_s"] for r in none], ddof=1))
    gap = float(np.mean(gaps))
    return gap > spread, gap, spread


def gap_shares(rs: list[dict], rows: list[dict], key: str = "bound_jct_s") -> np.ndarray:
    """Per seed of ``rs`` (one controller's runs), the share of the gap between no control and the
    seed's bound ``key`` that the run closes, percent (seeds without a positive gap left out)."""
    none = {r["seed"]: r for r in rows if r["controller"] == "none"}
    out = []
    for r in rs:
        n = none.get(r["seed"])
        if n is None:
            continue
        b = seed_bound(rows, r["seed"], key)
        if n["mean_jct_s"] > b:
            out.append(100 * (n["mean_jct_s"] - r["mean_jct_s"]) / (n["mean_jct_s"] - b))
    return np.array(out)


def beaten(rows: list[dict]) -> list[tuple[str, int, float, float]]:
    """Runs whose mean JCT is below their seed's isolated bound: (controller, seed, JCT, bound).
    Empty unless the bound is wrong."""
    return [(r["controller"], r["seed"], r["mean_jct_s"], seed_bound(rows, r["seed"], "bound_jct_s"))
            for r in rows if r["mean_jct_s"] < seed_bound(rows, r["seed"], "bound_jct_s") - 1e-9]


def beaten_jobs(row: dict) -> list[tuple[str, float, float]]:
    """Jobs of a run (with `run_bounds`) that ran faster than their bound: (job, run seconds per
    iteration, bound). Empty unless the bound is wrong."""
    out = []
    for d in row.get("job_detail", ()):
        b = d.get("bound_iteration_s")
        if b is None or d.get("finish_s") is None or d.get("start_s") is None or not d["iterations"]:
            continue
        per = (d["finish_s"] - d["start_s"]) / d["iterations"]
        if per < b * (1 - 1e-9):
            out.append((d["name"], per, b))
    return out


def headline(sub: list[dict], labels: list[str], level: str, ci95) -> tuple[dict, list[list]]:
    """The figures `benchmarks/record.py` saves for one scenario of a control benchmark run: per
    controller its mean JCT, its paired difference with no control and with the best other
    controller's (a table), and flowherd's paired differences with no control and adaptive
    routing and its gap closed (figures; gap closed only where the gap exceeds the seed spread)."""
    by = {lab: sorted((r for r in sub if r["controller"] == lab), key=lambda r: r["seed"])
          for lab in labels}
    none = {r["seed"]: r["mean_jct_s"] for r in by.get("none", [])}
    gap_ok, gap_s, spread_s = gap_exceeds_spread(sub)
    rows, figures = [], {}
    for lab, rs in by.items():
        if not rs:
            continue
        m, h = ci95([r["mean_jct_s"] for r in rs])
        d = [r["mean_jct_s"] - none[r["seed"]] for r in rs if r["seed"] in none]
        dm, dh = ci95(d) if len(d) >= 2 else (math.nan, math.nan)
        g = gap_shares(rs, sub) if gap_ok else np.array([])
        gm, gh = ci95(g) if g.size >= 2 else (math.nan, math.nan)
        rows.append([lab, round(m, 3), round(h, 3), round(dm, 3), round(dh, 3),
                     None if not g.size else round(gm, 1), None if not g.size else round(gh, 1), len(rs)])
    seeds = sorted(none)
    iso = [seed_bound(sub, s, "bound_jct_s") for s in seeds]
    if iso:
        figures[f"{level}: isolated bound, mean JCT"] = {"value": round(float(np.mean(iso)), 3), "unit": "s"}
        figures[f"{level}: gap between no control and the bound"] = {
            "value": round(gap_s, 3), "unit": "s",
            "target": f"> seed spread {spread_s:.3f} s to print gap closed",
            "met": bool(gap_ok)}
    q = [100 * (none[s] - seed_bound(sub, s, "bound_queue_jct_s")) / (none[s] - b)
         for s, b in zip(seeds, iso, strict=True) if none[s] > b]
    if len(q) >= 2:
        qm, qh = ci95(q)
        figures[f"{level}: the most of the gap any network controller closes (queue-aware bound)"] = {
            "value": round(qm, 1), "unit": "%", "ci95": round(qh, 1)}
    mine = {r["seed"]: r["mean_jct_s"] for r in by.get("flowherd", [])}
    for other in ("none", "adaptive"):
        base = {r["seed"]: r["mean_jct_s"] for r in by.get(other, [])}
        common = sorted(set(mine) & set(base))
        if len(common) >= 2:
            d, h = ci95([mine[s] - base[s] for s in common])
            figures[f"{level}: flowherd - {other}, mean JCT"] = {
                "value": round(d, 3), "unit": "s", "ci95": round(h, 3),
                "target": "< 0 (beats)" if other == "adaptive" else "not significantly > 0",
                "met": bool(d + h < 0) if other == "adaptive" else bool(d - h <= 0)}
    if gap_ok and mine:
        g = gap_shares(by["flowherd"], sub)
        if g.size >= 2:
            gm, gh = ci95(g)
            figures[f"{level}: flowherd gap closed"] = {"value": round(gm, 1), "unit": "%",
                                                        "ci95": round(gh, 1)}
    return figures, rows


HEADLINE_COLUMNS = ["controller", "mean JCT s", "+- s", "minus none s", "+- s", "gap closed %", "+- %",
                    "seeds"]
