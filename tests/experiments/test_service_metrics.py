"""Request-level metrics of inference services: TTFT, TPOT, SLO attainment, the scenario's
objectives, the store's services table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from flowherd.cluster.records import JobRecord, ServiceRecord
from flowherd.errors import ConfigError
from flowherd.experiments.metrics import SERVICE_KEYS, service_metrics
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.workload.slo import ServiceSlo, slo_from_mapping

NAN = math.nan


def record(arrival, first, last, out=5, rate=1.0, capacity=10.0) -> JobRecord:
    n = len(arrival)
    sv = ServiceRecord(arrival_s=np.asarray(arrival, float), batch=np.arange(n),
                       first_token_s=np.asarray(first, float), last_token_s=np.asarray(last, float),
                       output_tokens=out, batch_close_s=np.asarray(arrival, float),
                       prefill_start_s=np.asarray(arrival, float), prefill_end_s=np.asarray(first, float),
                       kv_end_s=np.asarray(first, float), exec_s=1.0, compute_s=0.5,
                       request_rate_per_s=rate, capacity_per_s=capacity, capacity_note="decode pool")
    return JobRecord(name="s", tenant="t", kind="inference", submit_s=0.0, start_s=0.0, finish_s=None,
                     gpus=(0,), iterations_planned=n, iteration_end_s=np.zeros(0), iteration_s=np.zeros(0),
                     compute_only_iteration_s=0.0, solo_iteration_s=None, gpu_busy_s=0.0,
                     fast_forwarded_iterations=0, service=sv)


def test_ttft_tpot_and_attainment_by_hand():
    # four requests, horizon 10 s, objectives TTFT 1 s, TPOT 0.5 s (4 steps after the first token)
    rec = record(arrival=[0.0, 1.0, 2.0, 3.0], first=[0.5, 2.5, 2.8, 3.2], last=[1.5, 4.5, 6.0, 4.0])
    m = service_metrics(rec, horizon_s=10.0, slo=ServiceSlo(ttft_s=1.0, tpot_s=0.5))
    ttft = np.array([0.5, 1.5, 0.8, 0.2])
    tpot = np.array([1.0, 2.0, 3.2, 0.8]) / 4
    assert m["requests"] == 4
    assert m["mean_ttft_s"] == pytest.approx(ttft.mean())
    assert m["p99_ttft_s"] == pytest.approx(np.percentile(ttft, 99))
    assert m["mean_tpot_s"] == pytest.approx(tpot.mean())
    assert m["ttft_attainment"] == pytest.approx(3 / 4)  # the second misses
    assert m["tpot_attainment"] == pytest.approx(3 / 4)  # the third (0.8 s a token) misses
    assert m["slo_attainment"] == pytest.approx(2 / 4)
    assert m["slo_met"] is False  # p99 TTFT 1.48 s > 1 s


def test_a_request_cut_off_by_the_horizon_counts_only_once_decided():
    # horizon 5 s: the third request (arrived 4.8 s) has no first token yet and is within its 1 s:
    # undecided, left out; the fourth arrived at 2 s, no token by 5 s: already 3 s past, a miss;
    # one arriving after the horizon is not counted at all
    rec = record(arrival=[0.0, 1.0, 4.8, 2.0, 6.0], first=[0.5, 1.5, NAN, NAN, 6.5],
                 last=[1.0, 2.0, NAN, NAN, 7.0])
    m = service_metrics(rec, horizon_s=5.0, slo=ServiceSlo(ttft_s=1.0))
    assert m["requests"] == 4
    assert m["ttft_attainment"] == pytest.approx(2 / 3)
    # the cut-off ones counted to the horizon
    assert m["mean_ttft_s"] == pytest.approx((0.5 + 0.5 + 0.2 + 3.0) / 4)
    assert m["tpot_attainment"] is None and m["slo_attainment"] == pytest.approx(2 / 3)


def test_training_jobs_have_no_service_metrics():
    rec = record([0.0], [1.0], [2.0])
    training = JobRecord(**{f: getattr(rec, f) for f in JobRecord.__slots__ if f != "service"}, service=None)
    assert service_metrics(training, horizon_s=5.0) == dict.fromkeys(SERVICE_KEYS)


def test_overload_flag_follows_capacity():
    m = service_metrics(record([0.0], [1.0], [2.0], rate=12.0, capacity=10.0), horizon_s=5.0)
    assert m["overloaded"] is True and m["ttft_attainment"] is None  # no objectives: no attainment


def test_slo_mapping_takes_units_and_names_a_bad_key():
    assert slo_from_mapping({"ttft": "200ms", "tpot": "50ms"}, "x") == ServiceSlo(ttft_s=0.2, tpot_s=0.05)
    with pytest.raises(ConfigError, match=r"did you mean 'ttft'.*|unknown field 'tfft' \(x\.tfft\)"):
        slo_from_mapping({"tfft": "1s"}, "x")
    with pytest.raises(ConfigError, match="slo"):
        ServiceSlo(ttft_s=-1.0)


BASE = {"fabric": {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "leaves": 1, "spines": 1},
        "simulation": {"horizon": "2s"}}


def test_scenario_reads_serving_slo_and_a_workload_default():
    jobs = [{"name": "a", "kind": "inference", "model": "llama3-8b",
             "serving": {"tp": 2, "duration_s": 1.0, "slo": {"ttft": "200ms", "tpot": "50ms"}}},
            {"name": "b", "kind": "inference", "model": "llama3-8b", "serving": {"tp": 2, "duration_s": 1.0}},
            {"name": "c", "model": "llama3-8b", "gpus": 8, "parallelism": {"tp": 8}}]
    sc = scenario_from_mapping({**BASE, "workload": {"jobs": jobs}})
    assert sc.slos == {"a": ServiceSlo(ttft_s=0.2, tpot_s=0.05)}
    sc = scenario_from_mapping({**BASE, "workload": {"jobs": jobs, "slo": {"ttft": "1s"}}})
    assert sc.slos == {"a": ServiceSlo(ttft_s=0.2, tpot_s=0.05), "b": ServiceSlo(ttft_s=1.0)}
    bad = [{**jobs[2], "serving": {"slo": {"ttft": "1s"}}}]
    with pytest.raises(ConfigError, match=r"workload\.jobs\[0\]\.serving\.slo"):
        scenario_from_mapping({**BASE, "workload": {"jobs": bad}})


def test_arrivals_of_a_template_with_an_slo_keep_it():
    mix = [{"name": "svc", "kind": "inference", "model": "llama3-8b",
            "serving": {"tp": 2, "duration_s": 0.5, "slo": {"ttft": "300ms"}}},
           {"name": "tr", "model": "llama3-8b", "gpus": 8, "parallelism": {"tp": 8}}]
    sc = scenario_from_mapping({**BASE, "seed": 3, "workload": {
        "arrivals": [{"rate": 5.0, "mix": mix, "until": "1.5s"}]}})
    services = [j.name for j in sc.jobs if j.name.endswith("-svc")]
    assert services and set(sc.slos) == set(services)
    assert all(v == ServiceSlo(ttft_s=0.3) for v in sc.slos.values())


def test_the_store_keeps_one_services_row_per_service(tmp_path):
    pytest.importorskip("duckdb")
    from flowherd.experiments.store import ResultStore
    from flowherd.experiments.sweep import execute_run, sweep_from_mapping

    tiny = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())
    tiny["simulation"]["horizon"] = "3s"
    tiny["workload"]["jobs"].append({"name": "svc", "kind": "inference", "model": "llama3-8b", "submit": "0s",
                                     "serving": {"tp": 1, "duration_s": 1.0, "request_rate_per_s": 4.0,
                                                 "output_tokens": 8, "slo": {"ttft": "1s"}}})
    run = sweep_from_mapping({"name": "sv", "base": tiny, "seeds": [1]}).runs[0]
    rec = execute_run(run.scenario())
    with ResultStore(tmp_path) as st:
        st.write_run(sweep="sv", run=run, record=rec)
        rows = st.services()
    assert [r["name"] for r in rows] == ["svc"]
    r = rows[0]
    (expected,) = rec["result"]["services"]
    assert r["requests"] == expected["requests"] > 0
    assert r["ttft_slo_s"] == pytest.approx(1.0)
    assert r["ttft_attainment"] == pytest.approx(expected["ttft_attainment"])
