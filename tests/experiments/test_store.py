"""The DuckDB result store: what a run writes, atomically, and what reads back."""

from pathlib import Path

import pytest
import yaml

duckdb = pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.errors import ConfigError  # noqa: E402
from flowherd.experiments.store import ResultStore, resolve_store_path  # noqa: E402
from flowherd.experiments.sweep import execute_run, sweep_from_mapping  # noqa: E402

TINY = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "4s"


@pytest.fixture(scope="module")
def run_and_record():
    s = sweep_from_mapping({"name": "st", "base": TINY, "seeds": [4]})
    run = s.runs[0]
    return run, execute_run(run.scenario())


def test_a_run_writes_one_row_per_run_job_tier_and_tenant(tmp_path, run_and_record):
    run, rec = run_and_record
    with ResultStore(tmp_path) as st:
        st.write_run(sweep="st", run=run, record=rec)
        assert st.run_status() == {run.run_id: "ok"}
        r = st.runs()[0]
        assert (r["sweep"], r["seed"], r["point_hash"]) == ("st", 4, run.point.hash)
        assert r["mean_jct_s"] == pytest.approx(rec["result"]["mean_jct_s"])
        assert yaml.safe_load(r["scenario_yaml"]) == run.scenario()
        jobs = st.jobs()
        assert [j["name"] for j in jobs] == ["a", "b", "c"]
        by = {j["name"]: j for j in rec["records"]}
        for j in jobs:
            assert j["gpus"] == by[j["name"]]["gpus"] and len(j["gpus"]) == j["num_gpus"]
            assert j["iteration_end_s"] == pytest.approx(by[j["name"]]["iteration_end_s"])
        links = st.links(run.run_id)
        assert [li["tier"] for li in links] == rec["utilization"]["tiers"]
        for li, series in zip(links, rec["utilization"]["series"], strict=True):
            assert li["utilization"] == pytest.approx(series)
            assert len(li["bin_edges_s"]) == len(series) + 1
            assert li["peak_utilization"] == pytest.approx(max(series))
        assert sorted(t["tenant"] for t in st.tenants()) == ["lab-a", "lab-b"]


def test_rewriting_a_run_replaces_it(tmp_path, run_and_record):
    run, rec = run_and_record
    with ResultStore(tmp_path) as st:
        st.write_run(sweep="st", run=run, record={"status": "failed", "error": "boom", "wall_s": 1.0})
        st.write_run(sweep="st", run=run, record=rec)
        assert st.run_status() == {run.run_id: "ok"}
        assert len(st.jobs()) == 3


def test_a_write_that_fails_halfway_leaves_nothing_of_the_run(tmp_path, run_and_record):
    run, rec = run_and_record
    broken = {**rec, "utilization": {"tiers": ["x"], "capacity_bytes_per_s": [1.0],
                                     "bin_edges_s": [0.0, 1.0], "series": []}}  # zip(strict) fails late
    with ResultStore(tmp_path) as st:
        with pytest.raises(ValueError):
            st.write_run(sweep="st", run=run, record=broken)
        assert st.run_status() == {}
        assert st.jobs() == []  # the job rows inserted before the failure were rolled back
        st.write_run(sweep="st", run=run, record=rec)  # and the store is still usable
        assert st.run_status() == {run.run_id: "ok"}


def test_committed_runs_survive_a_connection_that_never_closed(tmp_path, run_and_record):
    # a crash right after a commit: the file is reopened without a clean close of the writer
    import subprocess
    import sys

    run, rec = run_and_record
    code = ("import os, pickle, sys; from flowherd.experiments.store import ResultStore; "
            "run, rec = pickle.load(sys.stdin.buffer); st = ResultStore(sys.argv[1]); "
            "st.write_run(sweep='st', run=run, record=rec); os._exit(0)")
    import pickle

    subprocess.run([sys.executable, "-c", code, str(tmp_path)], input=pickle.dumps((run, rec)), check=True)
    with ResultStore(tmp_path, read_only=True) as st:
        assert st.run_status() == {run.run_id: "ok"} and len(st.jobs()) == 3


def test_read_only_store_must_exist_and_be_a_flowherd_store(tmp_path):
    with pytest.raises(ConfigError, match="no result store"):
        ResultStore(tmp_path / "missing", read_only=True)
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    with pytest.raises(ConfigError, match="not a flowherd result store"):
        ResultStore(other, read_only=True)
    with pytest.raises(ConfigError, match="table must be one of"):
        ResultStore(tmp_path).table_rows("nope")


def test_store_path_is_the_file_or_results_duckdb_in_a_directory(tmp_path):
    assert resolve_store_path(tmp_path) == tmp_path / "results.duckdb"
    assert resolve_store_path(tmp_path / "new") == tmp_path / "new" / "results.duckdb"
    assert resolve_store_path(tmp_path / "x.duckdb") == tmp_path / "x.duckdb"


def test_a_single_simulate_run_can_be_stored_for_a_report(tmp_path):
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping
    from flowherd.experiments.sweep import canonical_hash, store_run_result

    source = {**TINY, "seed": 2}
    run = run_scenario(scenario_from_mapping(source))
    run_id = store_run_result(tmp_path, source, run)
    assert run_id == f"{canonical_hash(source)[:16]}-s2"
    with ResultStore(tmp_path, read_only=True) as st:
        (r,) = st.runs()
        assert (r["sweep"], r["status"], r["jobs_total"]) == ("simulate", "ok", 3)
        assert [j["jct_s"] for j in st.jobs()] == pytest.approx([j["jct_s"] for j in run.jobs])
