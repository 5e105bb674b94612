"""Telemetry out: link series on a bounded grid and per-collective records, as Parquet."""

from pathlib import Path

import numpy as np
import pytest

from flowherd.errors import ConfigError
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.experiments.telemetry import SCHEMA, flow_table, link_table, schema_markdown, write_telemetry

duckdb = pytest.importorskip("duckdb")

ROOT = Path(__file__).resolve().parents[2]
SCEN = {"name": "tel", "seed": 1,
        "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "gpu": "h100",
                   "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 2, "spines": 1,
                   "oversubscription": 4, "link_latency": "1us"},
        "workload": {"jobs": [
            {"name": "a", "tenant": "t1", "model": "llama3-8b", "gpus": 16, "parallelism": {"tp": 8, "dp": 2},
             "seq_len": 4096, "global_batch": 4, "iterations": 3},
            {"name": "b", "tenant": "t2", "model": "llama3-8b", "gpus": 16, "parallelism": {"tp": 8, "dp": 2},
             "seq_len": 4096, "global_batch": 4, "iterations": 3, "submit": "0.3s"}]},
        "placement": {"method": "spread"}, "network": "roce",
        "simulation": {"fidelity": "collective", "horizon": "10s"}}


def _run(telemetry, network="roce"):
    sim = {**SCEN["simulation"], "telemetry": telemetry}
    return run_scenario(scenario_from_mapping({**SCEN, "simulation": sim, "network": network}), solo=False)


@pytest.fixture(scope="module")
def on():
    return _run({"bin": "50ms"})


def test_telemetry_is_off_by_default_and_changes_nothing_when_on(on):
    off = _run(False)
    assert off.scenario.telemetry is None and off.cluster.link_bin_bytes is None
    assert [j["jct_s"] for j in on.jobs] == [j["jct_s"] for j in off.jobs]
    assert on.cluster.num_events == off.cluster.num_events


def test_link_series_add_up_to_each_links_bytes_and_stay_under_capacity(on):
    t = link_table(on)
    total = np.bincount(t["link"], weights=t["bytes"], minlength=on.scenario.fabric.num_directed_links)
    assert total == pytest.approx(on.cluster.link_bytes[:total.size], rel=1e-9, abs=1.0)
    assert t["utilization"].max() <= 1.0 and t["utilization"].max() > 0.3
    assert len(np.unique(t["bin"])) <= 200  # 10 s in 50 ms bins
    assert np.all(t["t1_s"] - t["t0_s"] == pytest.approx(0.05))


def test_queues_and_pauses_come_from_the_congestion_model(on):
    t = link_table(on)
    assert np.all(np.isfinite(t["queue_mean_bytes"])) and t["queue_mean_bytes"].max() > 0
    # the queue's time integral over the bins is the model's mean queue times the run (NetworkStats)
    queue_int = np.zeros(on.scenario.fabric.num_directed_links)
    np.add.at(queue_int, t["link"], t["queue_mean_bytes"] * (t["t1_s"] - t["t0_s"]))
    net = {r["link"]: r for r in on.cluster.network["links"]}
    busiest = max(net, key=lambda k: net[k]["queue_mean_bytes"])
    want = net[busiest]["queue_mean_bytes"] * on.cluster.horizon_s
    assert queue_int[busiest] == pytest.approx(want, rel=1e-6)
    ideal = _run(True, network="ideal")
    ti = link_table(ideal)
    assert np.all(np.isnan(ti["queue_mean_bytes"])) and np.all(np.isnan(ti["pause_s"]))


def test_a_jobs_own_uplink_bins_carry_its_tenant_while_it_runs(on):
    t = link_table(on)
    a = on.cluster.job("a")
    own = set(a.footprint_links.tolist()) - set(on.cluster.job("b").footprint_links.tolist())
    sel = np.isin(t["link"], list(own)) & (t["t1_s"] <= on.cluster.job("b").start_s)
    assert sel.any() and set(t["tenant"][sel]) == {"t1"}


def test_flow_records_hold_every_collective_of_every_iteration(on):
    f = flow_table(on)
    coll = f["kind"] == "collective"
    for j in on.cluster.jobs:
        mine = coll & (f["job"] == j.name)
        assert sorted(set(f["iteration"][mine])) == [0, 1, 2]
        assert np.all(f["finish_s"][mine] >= f["start_s"][mine])
        assert set(f["group"][mine]) <= {"tp", "dp"} and "dp" in set(f["group"][mine])
    spec = on.scenario.jobs[0].iteration_graph()
    assert f["size_bytes"][coll & (f["job"] == "a")].sum() == pytest.approx(
        3 * sum(t.total_bytes for t in spec.tasks))


def test_parquet_files_follow_the_documented_schema(on, tmp_path):
    files = write_telemetry(on, tmp_path)
    assert set(files) == set(SCHEMA)
    con = duckdb.connect()
    for name, cols in SCHEMA.items():
        desc = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{files[name]}')").fetchall()
        assert [(d[0], d[1]) for d in desc] == [(k, t) for k, (t, _) in cols.items()]
    n = con.execute(f"SELECT count(*) FROM read_parquet('{files['links.parquet']}')").fetchone()[0]
    assert n == len(link_table(on)["link"])


def test_the_schema_page_is_generated_from_the_schema():
    text = (ROOT / "docs" / "telemetry.md").read_text()
    assert schema_markdown() in text, "docs/telemetry.md is stale: paste schema_markdown() into it"


@pytest.mark.parametrize(("value", "expect"), [
    ("yes", "invalid value 'yes' (simulation.telemetry"),
    ({"bins": "1s"}, "unknown field 'bins' (simulation.telemetry)"),
    ({"bin": "1us"}, "at most 2000"),
    ({"bin": "-1s"}, "(simulation.telemetry.bin)"),
    ({"flows": "no"}, "(simulation.telemetry.flows)"),
])
def test_bad_telemetry_settings_are_one_line(value, expect):
    with pytest.raises(ConfigError) as err:
        scenario_from_mapping({**SCEN, "simulation": {**SCEN["simulation"], "telemetry": value}})
    assert expect in str(err.value) and "\n" not in str(err.value)


def test_the_report_draws_the_timeline_and_the_heatmap_by_method(on, tmp_path):
    from flowherd.report.telemetry_fig import write_telemetry_figures

    write_telemetry(on, tmp_path / "telemetry" / "r1")
    write_telemetry(on, tmp_path / "telemetry" / "r2")
    files = write_telemetry_figures(tmp_path, tmp_path / "report", {"r1": "none", "r2": "adaptive"})
    assert [p.name for p in files] == ["telemetry_timeline_0.png", "telemetry_timeline_1.png",
                                       "telemetry_links_by_method.png"]
    assert all(p.stat().st_size > 10_000 for p in files)
    (tmp_path / "empty").mkdir()
    assert write_telemetry_figures(tmp_path / "empty", tmp_path / "r", {"r1": "x"}) == []
