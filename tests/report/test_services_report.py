"""The report's inference-service table and its services-against-training trade-off."""

from pathlib import Path

import pytest
import yaml


@pytest.fixture(scope="module")
def service_store(tmp_path_factory) -> Path:
    pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping
    from flowherd.experiments.sweep import store_run_result

    base = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())
    base["simulation"]["horizon"] = "4s"
    svc = {"name": "svc", "kind": "inference", "model": "llama3-8b", "tenant": "serve",
           "serving": {"tp": 4, "instances": 1, "disaggregated": True, "decode_instances": 1,
                       "duration_s": 2.0, "request_rate_per_s": 3.0, "output_tokens": 8,
                       "slo": {"ttft": "200ms", "tpot": "20ms"}}}
    base["workload"]["jobs"] = [*base["workload"]["jobs"][:1], svc]
    out = tmp_path_factory.mktemp("svc-store")
    for ctrl in ("none", "kv-guard"):
        src = {**base, "controller": {"name": ctrl}}
        store_run_result(out, src, run_scenario(scenario_from_mapping(src), solo=False))
    return out


def test_report_lists_services_and_draws_the_tradeoff(service_store):
    from flowherd.report.data import load_report_data, service_tradeoff
    from flowherd.report.html import render_html

    data = load_report_data(service_store)
    assert {s["name"] for s in data.services} == {"svc"} and len(data.services) == 2
    pts = service_tradeoff(data)
    assert len(pts) == 2 and all(0.0 <= att <= 1.0 for _m, att, _s, _j in pts)
    page = render_html(data)
    assert "<h2>Inference services</h2>" in page and "Services against training" in page
    assert "TTFT attainment" in page
