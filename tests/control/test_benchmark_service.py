"""The control benchmark's service figures (benchmarks/control_service.py): TTFT, TPOT and SLO
attainment per controller beside the training jobs' mean JCT, paired against no control."""

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCH))
_SPEC = importlib.util.spec_from_file_location("control_service", _BENCH / "control_service.py")
svc = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(svc)


def _ci95(x):
    import numpy as np
    from scipy import stats

    a = np.asarray(x, dtype=float)
    return float(a.mean()), float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))


def _service(ttft, p99, att):
    return {"name": "s", "mean_ttft_s": ttft, "p99_ttft_s": p99, "mean_tpot_s": 0.02, "p99_tpot_s": 0.03,
            "ttft_slo_s": 0.45, "tpot_slo_s": None, "ttft_attainment": att, "tpot_attainment": 1.0,
            "slo_attainment": att, "slo_met": p99 <= 0.45}


def test_service_figures_count_training_jobs_only_and_take_the_worst_p99():
    # two services (one of them misses its p99 TTFT) and two training jobs, one unfinished at the
    # 100 s horizon; a third training job submitted after the horizon is not counted
    jobs = [SimpleNamespace(submit_s=0.0, finish_s=30.0, service=None),
            SimpleNamespace(submit_s=10.0, finish_s=None, service=None),
            SimpleNamespace(submit_s=120.0, finish_s=None, service=None),
            SimpleNamespace(submit_s=0.0, finish_s=100.0, service=object()),
            SimpleNamespace(submit_s=0.0, finish_s=100.0, service=object())]
    run = SimpleNamespace(summary={"services": [_service(0.1, 0.3, 0.99), _service(0.2, 0.5, 0.9)]},
                          cluster=SimpleNamespace(horizon_s=100.0, jobs=jobs))
    f = svc.service_figures(run)
    assert f["train_mean_jct_s"] == pytest.approx((30.0 + 90.0) / 2)
    assert f["svc_p99_ttft_s"] == pytest.approx(0.5)
    assert f["svc_mean_ttft_s"] == pytest.approx(0.15)
    assert f["svc_slo_attainment"] == pytest.approx(0.945)
    assert (f["services"], f["with_slo"], f["slo_met"]) == (2, 2, 1)
    assert svc.service_figures(SimpleNamespace(summary={"services": []}, cluster=None)) == {}


def test_service_rows_pair_each_controller_with_no_control_on_the_same_seed():
    # x gains 1 s of training JCT and 2 points of SLO attainment on every seed, though the seeds'
    # own figures spread widely: the paired CI is 0 wide, the unpaired one is not
    def row(ctl, seed, jct, att):
        return {"controller": ctl, "seed": seed, "services": 1, "with_slo": 1, "slo_met": 1,
                "train_mean_jct_s": jct,
                **{f"svc_{k}": 0.1 for k in svc.KEYS}, "svc_slo_attainment": att}

    rows = [row("none", 0, 10.0, 0.90), row("none", 1, 30.0, 0.50), row("none", 2, 50.0, 0.70),
            row("x", 0, 9.0, 0.92), row("x", 1, 29.0, 0.52), row("x", 2, 49.0, 0.72),
            {"controller": "y", "seed": 0}]  # no services: no row
    t = {r[0]: dict(zip(svc.COLUMNS, r, strict=True))
         for r in svc.service_rows(rows, ["none", "x", "y"], _ci95)}
    assert set(t) == {"none", "x"}
    assert t["x"]["minus none s"] == pytest.approx(-1.0)
    assert t["x"]["minus none +- s"] == pytest.approx(0.0)
    assert t["x"]["+- s"] > 10  # the seeds' spread, unpaired
    assert t["x"]["training mean JCT s"] == pytest.approx(29.0)
    assert t["x"]["SLO att. minus none pts"] == pytest.approx(2.0)
    assert t["x"]["SLO att. %"] == pytest.approx(100 * (0.92 + 0.52 + 0.72) / 3)
    assert t["x"]["seeds"] == 3
    assert t["x"]["SLOs met"] == "3/3"
    # without objectives (no slo: in the scenario) no attainment and no count of SLOs met
    bare = [{**r, "with_slo": 0, "slo_met": 0, "svc_slo_attainment": math.nan} for r in rows[:6]]
    t = {r[0]: dict(zip(svc.COLUMNS, r, strict=True)) for r in svc.service_rows(bare, ["x"], _ci95)}
    assert t["x"]["SLOs met"] == "no SLO" and math.isnan(t["x"]["SLO att. %"])
