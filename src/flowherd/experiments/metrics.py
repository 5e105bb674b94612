"""Metrics of a cluster run: per job, per tenant and per run, from the simulator's raw records.

Definitions (all times in seconds):

* ``jct_s`` = finish - submit; ``queue_s`` = start - submit.
* ``mean_iteration_s`` / ``p99_iteration_s``: over the job's completed iterations (inference:
  over its request batches, the latency from a batch's close to its end).
* ``solo_iteration_s``: the same job alone on the idle fabric, on the same GPUs, at
  ``collective`` fidelity (the runner measures it).
* ``slowdown`` = jct / (iterations x solo_iteration_s): how much longer the job took, queueing
  included, than it would have alone on an idle cluster (the definition of Tiresias, NSDI'19,
  and Themis, NSDI'20). ``iteration_slowdown`` = mean_iteration / solo_iteration: contention
  alone, without queueing. An inference service runs for a set time, so its ``slowdown`` is its
  ``iteration_slowdown`` (mean batch latency over the same alone).
* ``comm_share`` = 1 - compute_only_iteration / mean_iteration: the part of an iteration that
  communication adds beyond the compute critical path. An inference service: 1 - compute / execution
  time of its steps (prefills, KV transfers, decode steps, each from its start to its end), so
  that waiting for a busy replica (queueing) is not counted as communication.
* Inference services (`service_metrics`; None for training jobs), over the requests that arrived
  before the horizon: ``ttft_s`` (time to first token: arrival to the first token at the
  client, `flowherd.cluster.service`) and ``tpot_s`` (time per output token after the first:
  ``(last - first token) / (output_tokens - 1)``), their mean and 99th percentile (a request
  still waiting at the horizon counted to it: a lower bound); with the scenario's objectives
  (`flowherd.workload.slo`): ``ttft_attainment`` / ``tpot_attainment`` / ``slo_attainment``, the
  share of the requests within the TTFT objective, the TPOT one, both (DistServe's SLO
  attainment; a request whose outcome the horizon cuts off is left out, one already past its
  objective counted as a miss), and ``slo_met`` (MLPerf's rule: both 99th percentiles within);
  ``request_rate_per_s`` against ``capacity_per_s`` (what its slowest pool sustains,
  ``overloaded`` when exceeded: `overload_warnings`).
* ``gpu_utilization``: GPU-seconds computing over GPU-seconds held (start to finish, or to the
  horizon).
* ``tenant_jain``: Jain's fairness index (Jain, Chiu and Hawe, DEC-TR-301, 1984),
  (sum x)^2 / (n sum x^2), over the tenants' x = 1 / mean slowdown (the share of its alone-speed
  each tenant got): 1 when every tenant is slowed alike, 1/n when one tenant gets everything.
* ``cost_to_others`` (a controlled run against the same scenario and seed without control, whose
  background flows are the same ones): the change of the background flows' mean and p99 flow
  completion time, of each tenant's mean slowdown, and Jain's index with and without control. A
  controller that cuts JCT by starving the others shows it here.
* ``mfu`` / ``hfu`` (training jobs): model / hardware FLOPs of one iteration over ``mean_iteration_s
  x GPUs x peak BF16 FLOP/s`` (`TrainingJob.mfu`, `TrainingJob.hfu`: hardware FLOPs include what
  recomputation repeats).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from flowherd.cluster.simulate import ClusterResult, JobRecord


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def _p99(xs: list[float]) -> float | None:
    return float(np.percentile(xs, 99)) if xs else None


SERVICE_KEYS = ("requests", "mean_ttft_s", "p99_ttft_s", "mean_tpot_s", "p99_tpot_s", "ttft_slo_s",
                "tpot_slo_s", "ttft_attainment", "tpot_attainment", "slo_attainment", "slo_met",
                "request_rate_per_s", "capacity_per_s", "overloaded")


def _censored(done: np.ndarray, since: np.ndarray, horizon_s: float) -> np.ndarray:
    """``done - since``, a time not reached by the horizon counted to it (a lower bound)."""
    return np.where(np.isnan(done), horizon_s, np.minimum(done, horizon_s)) - since


def _attained(value: np.ndarray, known: np.ndarray, slo: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per request: decided (its outcome known by the horizon) and met (within ``slo``)."""
    if slo is None:
        return np.zeros(value.size, bool), np.zeros(value.size, bool)
    met = known & (value <= slo)
    decided = known | (value > slo)  # already past the objective at the horizon: a miss
    return decided, met


def service_metrics(rec: JobRecord, *, horizon_s: float, slo: Any = None) -> dict[str, Any]:
    """The request-level metrics of an inference job (module docstring), keys `SERVICE_KEYS`;
    every value None for a training job or a service that never started. ``slo``: its
    `flowherd.workload.slo.ServiceSlo` (None: no objectives, attainments None)."""
    out: dict[str, Any] = dict.fromkeys(SERVICE_KEYS)
    sv = rec.service
    if sv is None:
        return out
    arrived = sv.arrival_s < horizon_s
    arr = sv.arrival_s[arrived]
    first = sv.first_token_s[arrived]
    last = sv.last_token_s[arrived]
    n = int(arr.size)
    ttft = _censored(first, arr, horizon_s)
    steps = max(sv.output_tokens - 1, 1)
    tpot = np.where(np.isnan(first), np.nan, _censored(last, np.nan_to_num(first), horizon_s) / steps)
    has_tpot = ~np.isnan(tpot)
    ttft_slo = None if slo is None else slo.ttft_s
    tpot_slo = None if slo is None else slo.tpot_s
    out.update(requests=n, request_rate_per_s=_num(sv.request_rate_per_s),
               capacity_per_s=_num(sv.capacity_per_s), overloaded=bool(sv.overloaded), ttft_slo_s=ttft_slo,
               tpot_slo_s=tpot_slo)
    if n:
        out.update(mean_ttft_s=_num(ttft.mean()), p99_ttft_s=_num(np.percentile(ttft, 99)))
    if has_tpot.any():
        t = tpot[has_tpot]
        out.update(mean_tpot_s=_num(np.mean(t)), p99_tpot_s=_num(np.percentile(t, 99)))
    d1, m1 = _attained(ttft, ~np.isnan(first) & (first <= horizon_s), ttft_slo)
    d2, m2 = _attained(np.nan_to_num(tpot, nan=0.0), ~np.isnan(last) & (last <= horizon_s), tpot_slo)
    if ttft_slo is not None and d1.any():
        out["ttft_attainment"] = float(m1[d1].mean())
    if tpot_slo is not None and d2.any():
        out["tpot_attainment"] = float(m2[d2].mean())
    if slo is not None:
        both_known = (d1 | (ttft_slo is None)) & (d2 | (tpot_slo is None))
        both_met = (m1 | (ttft_slo is None)) & (m2 | (tpot_slo is None))
        # decided: a miss on either is decided; otherwise both must be known
        decided = both_known | (d1 & ~m1) | (d2 & ~m2)
        if decided.any():
            out["slo_attainment"] = float(both_met[decided].mean())
        p99_ok = [out[f"p99_{k}_s"] <= v for k, v in (("ttft", ttft_slo), ("tpot", tpot_slo))
                  if v is not None and out[f"p99_{k}_s"] is not None]
        out["slo_met"] = bool(all(p99_ok)) if p99_ok else None
    return out


def overload_warnings(jobs: list[dict[str, Any]]) -> list[str]:
    """One line per inference service whose requests arrive faster than it can serve them."""
    out = []
    for j in jobs:
        if j.get("overloaded"):
            out.append(f"service {j['name']!r} is overloaded: requests arrive at "
                       f"{j['request_rate_per_s']:.3g}/s but it serves at most {j['capacity_per_s']:.3g}/s "
                       f"({j.get('capacity_note', '')}); its "
                       "queues grow for as long as it runs, so its latencies and SLO attainment measure the "
                       "horizon, not the service")
    return out


def job_metrics(rec: JobRecord, *, solo_iteration_s: float | None, horizon_s: float,
                spec: Any = None, slo: Any = None) -> dict[str, Any]:
    """The metrics of one job (module docstring), JSON-ready (None where undefined); ``spec`` is the
    job's `TrainingJob` (for MFU and HFU); ``slo`` an inference job's objectives."""
    it = np.asarray(rec.iteration_s, dtype=np.float64)
    finished = rec.finish_s is not None
    jct = rec.finish_s - rec.submit_s if finished else None
    queue = rec.start_s - rec.submit_s if rec.start_s is not None else None
    mean_it = float(it.mean()) if it.size else None
    p99_it = float(np.percentile(it, 99)) if it.size else None
    slowdown = iteration_slowdown = None
    if solo_iteration_s and solo_iteration_s > 0:
        if mean_it is not None:
            iteration_slowdown = mean_it / solo_iteration_s
        if rec.kind == "inference":
            # a service runs for its set duration: its slowdown is that of its request batches
            slowdown = iteration_slowdown
        elif jct is not None and rec.iterations_planned:
            slowdown = jct / (rec.iterations_planned * solo_iteration_s)
    comm_share = None
    if rec.service is not None:  # execution only: waiting for a replica is not communication
        if rec.service.exec_s > 0:
            comm_share = max(0.0, 1.0 - rec.service.compute_s / rec.service.exec_s)
    elif mean_it and mean_it > 0:
        comm_share = max(0.0, 1.0 - rec.compute_only_iteration_s / mean_it)
    gpu_util = None
    if rec.start_s is not None and rec.gpus:
        held = ((rec.finish_s if finished else horizon_s) - rec.start_s) * len(rec.gpus)
        gpu_util = rec.gpu_busy_s / held if held > 0 else None
    return {
        "name": rec.name,
        "tenant": rec.tenant,
        "kind": rec.kind,
        "num_gpus": len(rec.gpus),
        "submit_s": rec.submit_s,
        "start_s": _num(rec.start_s),
        "finish_s": _num(rec.finish_s),
        "finished": finished,
        "jct_s": _num(jct),
        "queue_s": _num(queue),
        "iterations": int(it.size),
        "iterations_planned": rec.iterations_planned,
        "mean_iteration_s": _num(mean_it),
        "p99_iteration_s": _num(p99_it),
        "solo_iteration_s": _num(solo_iteration_s),
        "slowdown": _num(slowdown),
        "iteration_slowdown": _num(iteration_slowdown),
        "comm_share": _num(comm_share),
        "gpu_utilization": _num(gpu_util),
        "fast_forwarded_iterations": rec.fast_forwarded_iterations,
        "mfu": _num(spec.mfu(mean_it)) if mean_it and hasattr(spec, "mfu") else None,
        "hfu": _num(spec.hfu(mean_it)) if mean_it and hasattr(spec, "hfu") else None,
        **service_metrics(rec, horizon_s=horizon_s, slo=slo),
        "capacity_note": rec.service.capacity_note if rec.service is not None else None,
    }


def jain_index(xs: list[float]) -> float | None:
    """Jain's fairness index of positive values (module docstring); None for none.

    >>> jain_index([1.0, 1.0]), jain_index([1.0, 0.0])
    (1.0, 0.5)
    """
    x = np.asarray(xs, dtype=np.float64)
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x < 0) or not x.any():
        return None
    return float(x.sum() ** 2 / (x.size * (x * x).sum()))


def tenant_metrics(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-tenant aggregates of job metrics."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for j in jobs:
        by[j["tenant"]].append(j)
    out = []
    for tenant in sorted(by):
        js = by[tenant]
        done = [j for j in js if j["finished"]]
        out.append({
            "tenant": tenant,
            "jobs": len(js),
            "finished": len(done),
            "mean_jct_s": _mean([j["jct_s"] for j in done]),
            "mean_queue_s": _mean([j["queue_s"] for j in js if j["queue_s"] is not None]),
            "mean_slowdown": _mean([j["slowdown"] for j in done if j["slowdown"] is not None]),
            "gpu_hours": sum((j["num_gpus"] * ((j["finish_s"] or 0.0) - (j["start_s"] or 0.0)))
                             for j in js if j["start_s"] is not None and j["finish_s"] is not None) / 3600,
        })
    return out


def background_metrics(result: ClusterResult) -> dict[str, Any]:
    """The background flows' count, finished count, aggregation, mean and p99 FCT: from their
    records where the run kept them (exact), else from its streaming summary (the p99 within a
    relative `flowherd.cluster.bg_stats.PERCENTILE_RTOL`, 0.136%)."""
    fin = result.background_finish_s
    if fin is not None or result.background is None:
        fin = np.zeros(0) if fin is None else fin
        ok = np.isfinite(fin)
        fct = fin[ok] - result.background_start_s[ok]
        return {"flows": len(fin), "finished": int(ok.sum()), "aggregation": result.background_aggregation,
                "mean_fct_s": float(fct.mean()) if fct.size else None,
                "p99_fct_s": float(np.percentile(fct, 99)) if fct.size else None}
    s = result.background
    return {"flows": s.flows, "finished": s.finished, "aggregation": s.aggregation,
            "mean_fct_s": s.mean_fct_s(), "p99_fct_s": s.percentile_fct_s(99)}


def run_metrics(result: ClusterResult, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Run-level metrics: JCT statistics, makespan, link utilization, background FCTs."""
    done = [j for j in jobs if j["finished"]]
    jcts = [j["jct_s"] for j in done]
    makespan = None
    if done:
        makespan = max(j["finish_s"] for j in done) - min(j["submit_s"] for j in jobs)
    util = {}
    for k, tier in enumerate(result.util_tiers):
        series = result.util_by_tier[k]
        util[tier] = {"mean": float(series.mean()) if series.size else 0.0,
                      "peak": float(series.max()) if series.size else 0.0}
    background = background_metrics(result)
    shares = [1.0 / t["mean_slowdown"] for t in tenant_metrics(jobs)
              if t["mean_slowdown"] is not None and t["mean_slowdown"] > 0]
    services = [j for j in jobs if j.get("requests") is not None]
    return {
        "warnings": overload_warnings(jobs),
        "services": [{k: j[k] for k in ("name", "tenant", *SERVICE_KEYS, "comm_share", "capacity_note")}
                     for j in services],
        "jobs_total": len(jobs),
        "jobs_finished": len(done),
        "mean_jct_s": _mean(jcts),
        "p99_jct_s": _p99(jcts),
        "mean_queue_s": _mean([j["queue_s"] for j in jobs if j["queue_s"] is not None]),
        "mean_slowdown": _mean([j["slowdown"] for j in done if j["slowdown"] is not None]),
        "mean_iteration_slowdown": _mean([j["iteration_slowdown"] for j in jobs
                                          if j["iteration_slowdown"] is not None]),
        "makespan_s": makespan,
        "tenant_jain": jain_index(shares),
        "link_utilization": util,
        "background": background,
    }


def _change(x: float | None, base: float | None) -> float | None:
    if x is None or base is None or not base > 0:
        return None
    return float(x / base - 1.0)


def cost_to_others(summary: dict[str, Any], tenants: list[dict[str, Any]], none_summary: dict[str, Any],
                   none_tenants: list[dict[str, Any]]) -> dict[str, Any]:
    """What a controlled run (``summary``, ``tenants``: `run_metrics`, `tenant_metrics`) costs the
    others against the same run without control (module docstring); changes are fractions
    (0.1 = 10% longer), None where undefined.

    >>> s = {"background": {"mean_fct_s": 2.0, "p99_fct_s": 7.5}, "tenant_jain": 0.9}
    >>> n = {"background": {"mean_fct_s": 1.0, "p99_fct_s": 10.0}, "tenant_jain": 1.0}
    >>> t, t0 = [{"tenant": "t", "mean_slowdown": 1.5}], [{"tenant": "t", "mean_slowdown": 1.0}]
    >>> c = cost_to_others(s, t, n, t0)
    >>> c["background_mean_fct_change"], c["background_p99_fct_change"], c["tenant_slowdown_change"]
    (1.0, -0.25, {'t': 0.5})
    """
    bg, bg0 = summary["background"], none_summary["background"]
    base = {t["tenant"]: t["mean_slowdown"] for t in none_tenants}
    return {
        "baseline": "none",
        "background_mean_fct_change": _change(bg.get("mean_fct_s"), bg0.get("mean_fct_s")),
        "background_p99_fct_change": _change(bg.get("p99_fct_s"), bg0.get("p99_fct_s")),
        "tenant_slowdown_change": {t["tenant"]: _change(t["mean_slowdown"], base.get(t["tenant"]))
                                   for t in tenants},
        "tenant_jain": summary.get("tenant_jain"),
        "tenant_jain_without_control": none_summary.get("tenant_jain"),
    }
