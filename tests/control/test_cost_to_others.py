"""The cost to others of a controlled run, against the same run without control."""

import pytest

from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import scenario_from_mapping

MODEL = {"name": "tiny-lm", "layers": 4, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 32000}


def _scenario(controller, levers):
    # two small DP jobs of two tenants across an oversubscribed uplink, with background traffic
    def job(name, tenant):
        return {"name": name, "tenant": tenant, "model": MODEL, "gpus": 4, "parallelism": {"tp": 1, "dp": 4},
                "seq_len": 1024, "global_batch": 8, "iterations": 4, "submit": 0.0}

    return scenario_from_mapping({
        "name": "cost", "seed": 3,
        "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 2, "gpu": "h100",
                   "nic_bandwidth": "100Gbps", "leaves": 2, "spines": 1, "oversubscription": 2,
                   "link_latency": "1us"},
        "workload": {"jobs": [job("a", "t1"), job("b", "t2")],
                     "background": {"load": 0.3, "max_flows_per_s": 200}},
        "placement": {"method": "spread"}, "simulation": {"horizon": "2s"},
        "controller": {"name": controller, "levers": levers}})


def test_classes_above_background_show_as_a_cost_to_the_background():
    # crux marks every job's traffic; under `priority` that traffic goes before the background,
    # whose flows then take longer than without control (the same flows: drawn from the seed)
    run = run_scenario(_scenario("crux", "priority"), compare_none=True)
    cost = run.summary["cost_to_others"]
    assert cost["baseline"] == "none"
    assert cost["background_mean_fct_change"] > 0.0
    assert set(cost["tenant_slowdown_change"]) == {"t1", "t2"}
    assert cost["tenant_jain"] == run.summary["tenant_jain"]
    assert 0 < cost["tenant_jain_without_control"] <= 1


def test_under_buffer_an_ordering_baseline_without_classes_costs_nothing():
    # Sincronia orders by classes only: under `buffer` it decides nothing, so the run is no control's
    run = run_scenario(_scenario("sincronia", "buffer"), compare_none=True)
    cost = run.summary["cost_to_others"]
    assert cost["background_mean_fct_change"] == pytest.approx(0.0, abs=1e-12)
    assert cost["background_p99_fct_change"] == pytest.approx(0.0, abs=1e-12)
    assert all(v == pytest.approx(0.0, abs=1e-12) for v in cost["tenant_slowdown_change"].values())
    assert run.to_dict()["refused_decisions"] == 0 and run.to_dict()["levers"] == "buffer"


def test_no_comparison_without_a_controller():
    assert "cost_to_others" not in run_scenario(_scenario("none", "buffer"), compare_none=True).summary
