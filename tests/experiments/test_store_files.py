"""The result store opens nothing but itself, and a file that is not one is one clear line.

DuckDB runs with extension auto-install and auto-load off and no external access
(`flowherd.experiments.store.DUCKDB_CONFIG`, locked); files that are not a flowherd store (an
SQLite file named results.duckdb, a truncated store, a runs table of other columns) are refused
with one line, through the Python API and through `flowherd report`, which also checks its
``--out`` before reading anything.
"""

import copy
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flowherd.cli import main
from flowherd.errors import ConfigError
from flowherd.experiments.store import DUCKDB_CONFIG, ResultStore

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A real store: one tiny run written by `flowherd simulate --out`."""
    d = tmp_path_factory.mktemp("store")
    data = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
    data["simulation"]["horizon"] = "2s"
    data["workload"]["background"]["load"] = 0.0
    (d / "s.yaml").write_text(yaml.safe_dump(data))
    assert main(["simulate", str(d / "s.yaml"), "--out", str(d / "out"), "--json"]) == 0
    return d / "out" / "results.duckdb"


def _sqlite(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.commit()
    con.close()
    return path


def _report_line(capsys, argv, *parts):
    assert main(["report", *argv]) == 2
    cap = capsys.readouterr()
    err = cap.err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err + cap.out, err
    for p in parts:
        assert p in err, (p, err)


def test_every_connection_has_extensions_and_external_access_off(store, tmp_path):
    import duckdb

    for path, ro in ((store, True), (tmp_path / "new.duckdb", False)):
        with ResultStore(path, read_only=ro) as st:
            con = st._con
            for key, value in DUCKDB_CONFIG.items():
                assert con.execute(f"SELECT current_setting('{key}')").fetchone()[0] == value, key
            with pytest.raises(duckdb.Error):  # locked: no statement turns them back on
                con.execute("SET autoinstall_known_extensions = true")
            with pytest.raises(duckdb.Error):  # no file but the store
                con.execute("SELECT * FROM read_csv('/etc/hostname')")


def test_parquet_connections_load_no_extension_on_demand(tmp_path):
    # telemetry and `flowherd results --parquet` write Parquet beside the store: local files only
    import duckdb

    from flowherd.experiments.store import LOCAL_FILES_CONFIG, local_files_connection

    con = local_files_connection()
    try:
        for key in ("autoinstall_known_extensions", "autoload_known_extensions",
                    "allow_community_extensions", "allow_unsigned_extensions"):
            assert con.execute(f"SELECT current_setting('{key}')").fetchone()[0] is False, key
        assert LOCAL_FILES_CONFIG["lock_configuration"] is True
        with pytest.raises(duckdb.Error):
            con.execute("SET autoload_known_extensions = true")
        con.execute(f"COPY (SELECT 1 AS x) TO '{tmp_path / 'x.parquet'}' (FORMAT PARQUET)")
        assert con.execute(f"SELECT x FROM read_parquet('{tmp_path / 'x.parquet'}')").fetchall() == [(1,)]
    finally:
        con.close()


def test_an_sqlite_file_named_results_duckdb_is_one_line(tmp_path, capsys):
    path = _sqlite(tmp_path / "results.duckdb")
    with pytest.raises(ConfigError, match="is an SQLite database, not a DuckDB database"):
        ResultStore(path, read_only=True)
    with pytest.raises(ConfigError, match="SQLite"):  # a sweep writing into it: refused too
        ResultStore(path)
    _report_line(capsys, [str(tmp_path)], "results.duckdb", "is an SQLite database", "expected a flowherd")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root for unshare -n")
def test_an_sqlite_store_without_a_network_attempts_no_download(tmp_path):
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n does not work here")
    path = _sqlite(tmp_path / "results.duckdb")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    res = subprocess.run(["unshare", "-n", sys.executable, "-c",
                          "import sys; from flowherd.cli import main; sys.exit(main())", "report", str(path)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "SQLite" in res.stderr and "download" not in res.stderr.lower() and "http" not in res.stderr


@pytest.mark.parametrize("keep", [100, 5000, 0.3, 0.6, 0.95])
def test_a_truncated_store_is_one_line(store, tmp_path, capsys, keep):
    data = store.read_bytes()
    n = keep if isinstance(keep, int) else int(keep * len(data))
    cut = tmp_path / "results.duckdb"
    cut.write_bytes(data[:n])
    _report_line(capsys, [str(cut), "--out", str(tmp_path / "rep")], "results.duckdb", "expected a flowherd")
    assert not any((tmp_path / "rep").glob("*.png"))


def test_a_runs_table_of_other_columns_is_one_line(tmp_path, capsys):
    import duckdb

    path = tmp_path / "results.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs (run_id VARCHAR, status INTEGER)")
    con.execute("CREATE TABLE jobs (x INTEGER)")
    con.close()
    _report_line(capsys, [str(path)], "is not a flowherd result store", "its runs table lacks",
                 "sweep, point_hash")
    with pytest.raises(ConfigError, match="runs table lacks"):
        ResultStore(path)  # a sweep would have failed on its first INSERT


def test_report_out_an_existing_file_is_one_line_before_reading(store, tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    _report_line(capsys, [str(store), "--out", str(target)], "is a file, not a directory (--out)")
    assert target.read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")
def test_report_out_on_a_read_only_file_system_is_one_line(store, tmp_path, capsys):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        _report_line(capsys, [str(store), "--out", str(mnt / "rep")], "Read-only file system", "(--out)")
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_new_store_keeps_schema_and_runs(store, tmp_path):
    """The checks let a real store through: read, and reopened for writing."""
    copy_path = tmp_path / "results.duckdb"
    copy_path.write_bytes(store.read_bytes())
    with ResultStore(copy_path, read_only=True) as st:
        runs = st.runs()
    assert len(runs) == 1 and runs[0]["status"] == "ok"
    with ResultStore(copy_path) as st:
        assert st.run_status() == {runs[0]["run_id"]: "ok"}
    assert copy.deepcopy(runs)  # plain values


def test_a_stored_run_can_be_relabelled_and_its_summary_read_back(store, tmp_path):
    """What `flowherd demo --resume` uses: the summaries of stored runs, and a move to another sweep."""
    path = tmp_path / "results.duckdb"
    path.write_bytes(store.read_bytes())
    with ResultStore(path) as st:
        (run_id, summary), = st.stored_summaries().items()
        assert summary["jobs_total"] == 3 and summary["mean_jct_s"] > 0 and "jobs" not in summary
        st.relabel_run(run_id, sweep="demo", params={"role": "flowherd"})
    with ResultStore(path, read_only=True) as st:
        (row,) = st.runs()
    assert row["sweep"] == "demo" and row["params"] == {"role": "flowherd"} and row["run_id"] == run_id
