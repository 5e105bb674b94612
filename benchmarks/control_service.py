"""The control benchmark's service figures: where a scenario serves inference beside training
(the inference family, `benchmarks/scenarios/llm_inference.yaml`), what each controller does to
the services' time to first token (TTFT), time per output token (TPOT) and SLO attainment
(`flowherd.experiments.metrics.service_metrics`), beside the training jobs' mean JCT alone
(`benchmarks/control.py` prints and records them after its JCT table)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

# per run, over its services: mean of the means, the worst 99th percentile, mean of the attainments
KEYS = ("mean_ttft_s", "p99_ttft_s", "mean_tpot_s", "p99_tpot_s", "ttft_attainment", "tpot_attainment",
        "slo_attainment")


def service_figures(run) -> dict:
    """A run's service figures (`KEYS` as ``svc_<key>``, ``services`` how many, ``with_slo`` how many
    have an objective, ``slo_met`` how many of those met their 99th-percentile objectives; the
    attainments are NaN without objectives) and its training jobs' mean JCT, censored at the horizon
    as the run's (``train_mean_jct_s``); ``{}`` for a run without services."""
    svc = run.summary.get("services") or []
    if not svc:
        return {}
    h = run.cluster.horizon_s
    train = [min(h if j.finish_s is None else j.finish_s, h) - j.submit_s
             for j in run.cluster.jobs if j.submit_s < h and getattr(j, "service", None) is None]
    with_slo = [s for s in svc if s.get("ttft_slo_s") is not None or s.get("tpot_slo_s") is not None]
    out: dict = {"services": len(svc), "with_slo": len(with_slo),
                 "slo_met": sum(bool(s.get("slo_met")) for s in with_slo),
                 "train_mean_jct_s": float(np.mean(train)) if train else math.nan}
    for k in KEYS:
        v = [s[k] for s in svc if s.get(k) is not None]
        out[f"svc_{k}"] = (float(np.max(v)) if k.startswith("p99") else float(np.mean(v))) if v else math.nan
    return out


COLUMNS = ["controller", "training mean JCT s", "+- s", "minus none s", "minus none +- s", "mean TTFT ms",
           "p99 TTFT ms", "mean TPOT ms", "p99 TPOT ms", "TTFT att. %", "TPOT att. %", "SLO att. %",
           "SLO att. minus none pts", "+- pts", "SLOs met", "seeds"]


def service_rows(rows: list[dict], labels: list[str], ci95: Callable) -> list[list]:
    """Per controller, mean over the seeds of the service figures (`service_figures`) and the
    training mean JCT, each paired against no control on the same seeds (95% CI, Student t);
    empty where no run has services."""
    none_of = {r["seed"]: r for r in rows if r["controller"] == "none" and r.get("services")}
    out = []
    for lab in labels:
        rs = sorted((r for r in rows if r["controller"] == lab and r.get("services")),
                    key=lambda r: r["seed"])
        if not rs:
            continue
        m, h = ci95([r["train_mean_jct_s"] for r in rs])
        paired = [r for r in rs if r["seed"] in none_of]
        d, dh = ci95([r["train_mean_jct_s"] - none_of[r["seed"]]["train_mean_jct_s"] for r in paired])
        a, ah = ci95([100 * (r["svc_slo_attainment"] - none_of[r["seed"]]["svc_slo_attainment"])
                      for r in paired])
        mean = {k: _mean([r[f"svc_{k}"] for r in rs]) for k in KEYS}
        slo = sum(r.get("with_slo", r["services"]) for r in rs)
        out.append([lab, round(m, 3), round(h, 3), round(d, 3), round(dh, 3),
                    round(1e3 * mean["mean_ttft_s"], 2), round(1e3 * mean["p99_ttft_s"], 2),
                    round(1e3 * mean["mean_tpot_s"], 3), round(1e3 * mean["p99_tpot_s"], 3),
                    round(100 * mean["ttft_attainment"], 2), round(100 * mean["tpot_attainment"], 2),
                    round(100 * mean["slo_attainment"], 2), round(a, 2), round(ah, 2),
                    f"{sum(r['slo_met'] for r in rs)}/{slo}" if slo else "no SLO", len(rs)])
    return out


def _mean(x: list[float]) -> float:
    """The mean of the finite values of ``x`` (NaN if none)."""
    a = np.asarray(x, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else math.nan


def print_services(rows: list[dict], labels: list[str], ci95: Callable) -> list[list]:
    """Print `service_rows` (nothing where no run has services) and return them."""
    t = service_rows(rows, labels, ci95)
    if t:
        print("services (mean over seeds; p99: the worst service's) and the training jobs alone, paired "
              "against no control:")
        print("  " + " | ".join(COLUMNS))
        for row in t:
            print("  " + " | ".join(str(c) for c in row))
    return t
