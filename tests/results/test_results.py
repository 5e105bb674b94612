"""`flowherd results` and `flowherd.results`: a store's tables with the swept values as columns."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("duckdb", reason="the store extra (duckdb) is not installed")

from flowherd.cli import main
from flowherd.experiments.sweep import run_sweep, sweep_from_mapping
from flowherd.results import load, point_summary, read

ROOT = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((ROOT / "scenarios" / "tiny.yaml").read_text())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = {**TINY, "simulation": {**TINY["simulation"], "horizon": "3s"}}
    sweep = sweep_from_mapping({"name": "t", "base": base, "set": {"placement.method": "spread"},
                                "axes": {"fabric.oversubscription": [1, 4],
                                         "workload.background.load": [0.2]},
                                "seeds": [3, 5]})
    out = tmp_path_factory.mktemp("store")
    outcome = run_sweep(sweep, out, backend="inline")
    assert outcome.ok == 4
    return out


def _cli(capsys, *args):
    code = main(["results", *args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_runs_are_one_row_each_with_the_swept_values_as_typed_columns(store):
    t = read(store)
    assert t.swept == ("fabric.oversubscription", "workload.background.load")
    recs = t.records()
    assert len(recs) == 4 and {r["run_id"] for r in recs} == {r.run_id for r in _runs(store)}
    assert [(r["fabric.oversubscription"], r["seed"]) for r in recs] == [(1, 3), (1, 5), (4, 3), (4, 5)]
    assert all(type(r["fabric.oversubscription"]) is int for r in recs)
    assert all(r["workload.background.load"] == 0.2 for r in recs)
    assert all(r["placement"] == "spread" for r in recs)  # `set:` reached every point, and is no column


def _runs(store):
    from flowherd.experiments.store import ResultStore

    with ResultStore(store, read_only=True) as st:
        return [type("R", (), {"run_id": r["run_id"]}) for r in st.runs()]


def test_child_tables_carry_the_runs_swept_values(store):
    jobs = read(store, "jobs")
    assert jobs.columns[:5] == ("run_id", "sweep", "fabric.oversubscription", "workload.background.load",
                                "seed")
    assert len(jobs.rows) == 4 * len(TINY["workload"]["jobs"])
    assert "iteration_s" not in jobs.columns and "iteration_s" in read(store, "jobs", series=True).columns


def test_load_is_a_dataframe_of_the_same_rows(store):
    pytest.importorskip("pandas", reason="the results extra (pandas) is not installed")
    df = load(store)
    t = read(store)
    assert list(df.columns) == list(t.columns) and len(df) == 4
    assert df["mean_jct_s"].tolist() == [r["mean_jct_s"] for r in t.records()]
    by = df.groupby("fabric.oversubscription")["mean_jct_s"].mean()
    assert by[4] == pytest.approx(sum(r["mean_jct_s"] for r in t.records()[2:]) / 2)


def test_point_summary_averages_the_seeds(store):
    points = point_summary(read(store))
    assert [(p.values["fabric.oversubscription"], p.seeds, p.ok) for p in points] == [(1, 2, 2), (4, 2, 2)]
    recs = [r for r in read(store).records() if r["fabric.oversubscription"] == 4]
    assert points[1].metrics["mean_jct_s"][0] == pytest.approx(sum(r["mean_jct_s"] for r in recs) / 2)


def test_csv_is_one_row_per_run_with_the_swept_values(store, capsys):
    code, out, _ = _cli(capsys, str(store), "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4
    assert list(rows[0])[:6] == ["run_id", "sweep", "fabric.oversubscription", "workload.background.load",
                                 "seed", "status"]
    assert [(r["fabric.oversubscription"], r["workload.background.load"], r["seed"]) for r in rows] == [
        ("1", "0.2", "3"), ("1", "0.2", "5"), ("4", "0.2", "3"), ("4", "0.2", "5")]
    assert float(rows[0]["mean_jct_s"]) == pytest.approx(read(store).records()[0]["mean_jct_s"])


def test_json_and_parquet_hold_the_same_table(store, capsys, tmp_path):
    code, out, _ = _cli(capsys, str(store), "--json", "--table", "tenants")
    assert code == 0
    data = json.loads(out)
    assert len(data) == len(read(store, "tenants").rows) and "fabric.oversubscription" in data[0]
    target = tmp_path / "runs.parquet"
    code, out, _ = _cli(capsys, str(store), "--parquet", "--out", str(target))
    assert code == 0 and "4 rows of runs" in out
    import duckdb

    got = duckdb.connect().execute(f"SELECT \"fabric.oversubscription\", seed FROM '{target}'").fetchall()
    assert got == [(1, 3), (1, 5), (4, 3), (4, 5)]


def test_terminal_tables_name_their_units(store, capsys):
    code, out, _ = _cli(capsys, str(store))
    assert code == 0
    for header in ("oversubscription", "seeds", "mean JCT (s)", "p99 JCT (s)", "mean slowdown (x)",
                   "makespan (s)"):
        assert header in out, header
    code, out, _ = _cli(capsys, str(store), "--runs")
    assert code == 0 and sum(1 for line in out.splitlines() if "-s3 " in line or "-s5 " in line) == 4


@pytest.mark.parametrize(("args", "message"), [
    (["--table", "job"], "did you mean 'jobs'"),
    (["--csv", "--json"], "choose one of"),
    (["--csv", "--series"], "(--series)"),
])
def test_bad_input_is_one_line(store, capsys, args, message):
    code, _, err = _cli(capsys, str(store), *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_a_missing_store_is_one_line(capsys, tmp_path):
    code, _, err = _cli(capsys, str(tmp_path / "nothing"))
    assert code == 2 and "no result store" in err


def test_the_schema_page_is_generated_from_the_store():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "docs" / "generate_results_schema.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text, missing = gen.page()
    assert missing == [], f"columns without a meaning in docs/generate_results_schema.py: {missing}"
    assert (ROOT / "docs" / "results-schema.md").read_text() == text, \
        "docs/results-schema.md is out of date: run `make docs`"


def test_points_with_equal_swept_values_stay_apart_by_their_scenario():
    # as flowherd demo stores them: two placements without control under one role
    from flowherd.results import ResultTable

    cols = ("run_id", "sweep", "role", "seed", "status", "scenario_name", "placement", "controller",
            "mean_jct_s", "p99_jct_s", "mean_slowdown", "makespan_s", "point_hash")
    rows = tuple((f"{h}-s{s}", "demo", "no control", s, "ok", "default", place, None, jct + s, 50.0, 1.1,
                  60.0, h) for h, place, jct in (("aa", "packed", 21.0), ("bb", "heuristic", 20.0))
                 for s in (7, 8))
    points = point_summary(ResultTable(name="runs", columns=cols, swept=("role",), rows=rows))
    assert [(p.label, p.seeds, p.metrics["mean_jct_s"][0]) for p in points] == [
        ("default: packed + no control", 2, 28.5), ("default: heuristic + no control", 2, 27.5)]
