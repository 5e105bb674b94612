"""The result store: one DuckDB file per sweep directory.

Tables (one row per ...):

* ``runs`` (run): ``run_id`` (point hash prefix + seed, primary key), ``sweep``, ``point_hash``,
  ``seed``, ``params`` (JSON of the axis values), ``status`` ("ok" / "failed"), ``error``,
  ``wall_s``, ``finished_at``; the labels a report groups by (``scenario_name``, ``placement``,
  ``routing``, ``controller``, ``fidelity``, ``background_load``, ``num_gpus``, ``horizon_s``);
  the run summary (``jobs_total``, ``jobs_finished``, ``mean_jct_s``, ``p99_jct_s``,
  ``mean_queue_s``, ``mean_slowdown``, ``makespan_s``, ``summary`` JSON); and the full scenario
  (``scenario_json``, ``scenario_yaml``).
* ``jobs`` (job of a run): the metrics of `flowherd.experiments.metrics.job_metrics`, plus
  ``gpus`` (INTEGER[]), ``iteration_end_s`` / ``iteration_s`` (DOUBLE[]) and
  ``compute_only_iteration_s``.
* ``links`` (link tier of a run): ``tier``, ``capacity_bytes_per_s``, ``mean_utilization``,
  ``peak_utilization``, and the series ``bin_edges_s`` / ``utilization`` (DOUBLE[]).
* ``tenants`` (tenant of a run): the aggregates of `tenant_metrics`.
* ``services`` (inference service of a run): its request-level metrics
  (`flowherd.experiments.metrics.service_metrics`: time to first token and per output token,
  their objectives and attainment, offered rate against capacity, communication share without
  queueing). A store written before the table has it empty.
* ``network_links`` (congested link of a run on a congestion model, `flowherd.engine.network.network_record`):
  ``model``, ``link``, ``name``, ``queue_mean_bytes``, ``queue_max_bytes``, ``pause_s``,
  ``ecn_marked_bytes``, ``drop_bytes`` and the series ``series_t_s`` / ``series_queue_bytes``
  and ``pause_t_s`` / ``pause_dur_s`` (DOUBLE[]); none for ``ideal`` runs.

`ResultStore.write_run` writes all rows of one run in one transaction: after a crash, a kill or a
full disk a run is either wholly present or absent. Only the driver process writes.

Every connection is opened with `DUCKDB_CONFIG`: DuckDB never installs or loads an extension
(it would download one to open an SQLite file named ``results.duckdb``), reads or writes no file
but the store, and no SQL can change that. A file that is not a flowherd store (another format,
a truncated store, a ``runs`` table of other columns) is one `ConfigError` naming the path, what
was found and what was expected, before any query, and a read that fails later (a store damaged
past its header) is one too.

DuckDB is imported only here (the ``sweep`` extra).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from flowherd.errors import ConfigError, WriteError
from flowherd.experiments.runs import Run, check_seed
from flowherd.sanitize import shown

__all__ = ["DUCKDB_CONFIG", "SCHEMA_VERSION", "ResultStore", "check_store_file", "resolve_store_path"]

#: Settings of every DuckDB connection flowherd opens (DuckDB's configuration reference,
#: https://duckdb.org/docs/configuration/overview): no extension is downloaded or loaded, no file
#: other than the store is read or written (no read_csv, COPY, ATTACH or INSTALL), and the
#: configuration is locked so that no statement can turn these back on.
DUCKDB_CONFIG: dict[str, Any] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "enable_external_access": False,
    "lock_configuration": True,
}
#: A connection for local Parquet files (written beside a store, read back by the report): no
#: extension is installed or loaded on demand, so nothing reaches the network; only the local file
#: system is open to it (Parquet is built into DuckDB).
LOCAL_FILES_CONFIG = {**{k: v for k, v in DUCKDB_CONFIG.items() if k != "enable_external_access"},
                      "threads": 1}


def local_files_connection() -> Any:
    """An in-memory DuckDB connection for reading and writing local Parquet files
    (`LOCAL_FILES_CONFIG`)."""
    import duckdb

    return duckdb.connect(config=dict(LOCAL_FILES_CONFIG))


#: DuckDB's file header: 8 bytes of checksum, then the magic bytes (duckdb/storage/storage_info.hpp,
#: MainHeader::MAGIC_BYTES); the three header blocks take 12 KiB (4,096 bytes each).
_DUCKDB_MAGIC = b"DUCK"
_HEADER_BYTES = 3 * 4096
_OTHER_FORMATS = {b"SQLite format 3\x00": "an SQLite database", b"PK\x03\x04": "a zip archive",
                  b"PAR1": "a Parquet file", b"\x89PNG": "a PNG image", b"{": "JSON text"}
#: Columns of the runs table that reports and resumes read.
_RUNS_REQUIRED = ("run_id", "sweep", "point_hash", "seed", "params", "status", "error", "scenario_name",
                  "placement", "routing", "controller", "fidelity", "background_load", "num_gpus",
                  "horizon_s", "jobs_total", "jobs_finished", "mean_jct_s", "p99_jct_s", "mean_queue_s",
                  "mean_slowdown", "makespan_s", "summary", "scenario_json")
_EXPECTED = ("expected a flowherd result store (results.duckdb written by flowherd simulate --out, sweep "
             "or demo)")

SCHEMA_VERSION = 1
STORE_FILE = "results.duckdb"

_JOB_COLS = [
    ("name", "VARCHAR"), ("tenant", "VARCHAR"), ("kind", "VARCHAR"), ("num_gpus", "INTEGER"),
    ("submit_s", "DOUBLE"), ("start_s", "DOUBLE"), ("finish_s", "DOUBLE"), ("finished", "BOOLEAN"),
    ("jct_s", "DOUBLE"), ("queue_s", "DOUBLE"), ("iterations", "INTEGER"),
    ("iterations_planned", "INTEGER"), ("mean_iteration_s", "DOUBLE"), ("p99_iteration_s", "DOUBLE"),
    ("solo_iteration_s", "DOUBLE"), ("slowdown", "DOUBLE"), ("iteration_slowdown", "DOUBLE"),
    ("comm_share", "DOUBLE"), ("gpu_utilization", "DOUBLE"), ("fast_forwarded_iterations", "INTEGER"),
]
_TENANT_COLS = [
    ("tenant", "VARCHAR"), ("jobs", "INTEGER"), ("finished", "INTEGER"), ("mean_jct_s", "DOUBLE"),
    ("mean_queue_s", "DOUBLE"), ("mean_slowdown", "DOUBLE"), ("gpu_hours", "DOUBLE"),
]
_SERVICE_COLS = [
    ("name", "VARCHAR"), ("tenant", "VARCHAR"), ("requests", "INTEGER"), ("mean_ttft_s", "DOUBLE"),
    ("p99_ttft_s", "DOUBLE"), ("mean_tpot_s", "DOUBLE"), ("p99_tpot_s", "DOUBLE"), ("ttft_slo_s", "DOUBLE"),
    ("tpot_slo_s", "DOUBLE"), ("ttft_attainment", "DOUBLE"), ("tpot_attainment", "DOUBLE"),
    ("slo_attainment", "DOUBLE"), ("slo_met", "BOOLEAN"), ("request_rate_per_s", "DOUBLE"),
    ("capacity_per_s", "DOUBLE"), ("overloaded", "BOOLEAN"), ("comm_share", "DOUBLE"),
    ("capacity_note", "VARCHAR"),
]
_NET_NUM = ["queue_mean_bytes", "queue_max_bytes", "pause_s", "ecn_marked_bytes", "drop_bytes"]
_SUMMARY_COLS = ["jobs_total", "jobs_finished", "mean_jct_s", "p99_jct_s", "mean_queue_s", "mean_slowdown",
                 "makespan_s"]

_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, sweep VARCHAR, point_hash VARCHAR, seed BIGINT, params VARCHAR,
    status VARCHAR, error VARCHAR, wall_s DOUBLE, finished_at TIMESTAMP,
    scenario_name VARCHAR, placement VARCHAR, routing VARCHAR, controller VARCHAR, fidelity VARCHAR,
    background_load DOUBLE, num_gpus INTEGER, horizon_s DOUBLE,
    jobs_total INTEGER, jobs_finished INTEGER, mean_jct_s DOUBLE, p99_jct_s DOUBLE, mean_queue_s DOUBLE,
    mean_slowdown DOUBLE, makespan_s DOUBLE, summary VARCHAR,
    scenario_json VARCHAR, scenario_yaml VARCHAR);
CREATE TABLE IF NOT EXISTS jobs (
    run_id VARCHAR, {", ".join(f"{n} {t}" for n, t in _JOB_COLS)},
    gpus INTEGER[], iteration_end_s DOUBLE[], iteration_s DOUBLE[], compute_only_iteration_s DOUBLE);
CREATE TABLE IF NOT EXISTS links (
    run_id VARCHAR, tier VARCHAR, capacity_bytes_per_s DOUBLE, mean_utilization DOUBLE,
    peak_utilization DOUBLE, bin_edges_s DOUBLE[], utilization DOUBLE[]);
CREATE TABLE IF NOT EXISTS tenants (run_id VARCHAR, {", ".join(f"{n} {t}" for n, t in _TENANT_COLS)});
CREATE TABLE IF NOT EXISTS services (run_id VARCHAR, {", ".join(f"{n} {t}" for n, t in _SERVICE_COLS)});
CREATE TABLE IF NOT EXISTS network_links (
    run_id VARCHAR, model VARCHAR, link INTEGER, name VARCHAR, queue_mean_bytes DOUBLE,
    queue_max_bytes DOUBLE, pause_s DOUBLE, ecn_marked_bytes DOUBLE, drop_bytes DOUBLE,
    series_t_s DOUBLE[], series_queue_bytes DOUBLE[], pause_t_s DOUBLE[], pause_dur_s DOUBLE[]);
"""


def _q(path: str | Path) -> str:
    return shown(repr(str(path)))


def check_store_file(path: Path) -> None:
    """Refuse an existing file that is not a DuckDB database from its first bytes, before DuckDB
    opens it (DuckDB would try an extension for an SQLite file).

    Raises:
        ConfigError: Another format, or a file shorter than DuckDB's header (truncated).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEADER_BYTES)
    except OSError as err:
        raise ConfigError(f"cannot read result store {_q(path)}: {err.strerror or err} (results)") from None
    if head[8:12] == _DUCKDB_MAGIC and len(head) == _HEADER_BYTES:
        return
    if head[8:12] == _DUCKDB_MAGIC:
        raise ConfigError(f"result store {_q(path)} is truncated ({len(head):,} bytes, shorter than "
                          f"DuckDB's {_HEADER_BYTES:,}-byte header); {_EXPECTED}")
    what = next((name for magic, name in _OTHER_FORMATS.items() if head.startswith(magic)),
                "empty" if not head else "not a DuckDB database")
    raise ConfigError(f"{_q(path)} is {what}, not a DuckDB database (no DUCK magic at byte 8); "
                      f"{_EXPECTED}")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return " ".join(text[0].split())[:200] if text else type(err).__name__


def resolve_store_path(path: str | Path) -> Path:
    """The DuckDB file of `path`: the file itself, or ``results.duckdb`` in a directory.

    A path that does not exist is a directory unless it ends in ``.duckdb`` or ``.db``.
    """
    p = Path(path)
    if p.is_dir() or (not p.exists() and p.suffix not in (".duckdb", ".db")):
        return p / STORE_FILE
    return p


def _num(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x


def _get(mapping: Mapping[str, Any], *path: str) -> Any:
    node: Any = mapping
    for p in path:
        if not isinstance(node, Mapping) or p not in node:
            return None
        node = node[p]
    return node


class ResultStore:
    """A DuckDB result file (module docstring for the tables).

    Args:
        path: The file, or a directory holding ``results.duckdb``.
        read_only: Open for reading only (reports); the file must exist.

    Raises:
        ConfigError: A read-only store that does not exist or is not a flowherd store.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False):
        import duckdb

        self.path = resolve_store_path(path)
        self._duckdb_error = duckdb.Error
        self._duckdb_interrupt = duckdb.InterruptException
        if read_only and not self.path.is_file():
            raise ConfigError(f"no result store at {_q(path)} (expected a results.duckdb file or a sweep "
                              "directory holding one)")
        exists = self.path.exists()
        if exists:
            if self.path.is_dir():
                raise ConfigError(f"result store {_q(self.path)} is a directory; {_EXPECTED}")
            check_store_file(self.path)
        elif not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise WriteError(f"cannot create directory {_q(self.path.parent)} for the result store: "
                                 f"{err.strerror or err}") from None
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only, config=dict(DUCKDB_CONFIG))
        except duckdb.IOException as err:
            if not exists:  # a new store that cannot be created: a full disk, a read-only directory
                raise WriteError(f"cannot write result store {_q(self.path)}: {_first_line(err)}") from None
            raise ConfigError(f"cannot open result store {_q(self.path)}: {_first_line(err)}; "
                              f"{_EXPECTED}") from None
        except duckdb.Error as err:
            raise ConfigError(f"cannot open result store {_q(self.path)}: {_first_line(err)}; "
                              f"{_EXPECTED}") from None
        try:
            if exists:
                self._check_schema()
            if not read_only:
                try:
                    self._con.execute(_DDL)
                    self._con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                                      [str(SCHEMA_VERSION)])
                except duckdb.Error as err:
                    raise WriteError(f"cannot write result store {_q(self.path)}: {_first_line(err)}") \
                        from None
        except BaseException:
            self._con.close()
            raise

    def _execute(self, sql: str, params: list[Any] | None = None) -> Any:
        """``execute`` with a DuckDB failure made one `ConfigError` (a store damaged past its header)."""
        try:
            return self._con.execute(sql, params or [])
        except self._duckdb_error as err:
            raise ConfigError(f"result store {_q(self.path)} cannot be read: {_first_line(err)}; "
                              f"{_EXPECTED} (a truncated or damaged file?)") from None

    def _check_schema(self) -> None:
        tables = {r[0] for r in self._execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "runs" not in tables:
            raise ConfigError(f"{_q(self.path)} is a DuckDB file but not a flowherd result store (no runs "
                              f"table); {_EXPECTED}")
        cols = {r[0] for r in self._execute("SELECT column_name FROM information_schema.columns WHERE "
                                            "table_name = 'runs'").fetchall()}
        missing = [c for c in _RUNS_REQUIRED if c not in cols]
        absent = [t for t in ("jobs", "links", "tenants") if t not in tables]
        if missing or absent:
            what = (f"its runs table lacks {len(missing)} of flowherd's columns ({', '.join(missing[:4])}"
                    f"{', ...' if len(missing) > 4 else ''})" if missing else
                    f"it has no {' / '.join(absent)} table")
            raise ConfigError(f"{_q(self.path)} is not a flowherd result store: {what}; {_EXPECTED}")
        if "meta" in tables:
            row = self._execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is not None and str(row[0]).isdigit() and int(row[0]) > SCHEMA_VERSION:
                raise ConfigError(f"result store {_q(self.path)} has schema version {row[0]}, newer than "
                                  f"this flowherd's {SCHEMA_VERSION}; expected a store of version "
                                  f"{SCHEMA_VERSION} or older (upgrade flowherd)")

    # ---- writing --------------------------------------------------------------------------------
    def write_run(self, *, sweep: str, run: Run, record: Mapping[str, Any]) -> None:
        """Store one executed run (`flowherd.experiments.sweep.execute_run` record) atomically.

        A run already stored under the same id (a retried failure) is replaced.
        """
        check_seed(run.seed, "seed")  # DuckDB's BIGINT would fail mid-transaction
        scen = run.scenario()
        result = record.get("result") or {}
        summary = {k: v for k, v in result.items() if k not in ("jobs", "tenants")}
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            for table in ("runs", "jobs", "links", "tenants", "network_links", "services"):
                con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run.run_id])
            ctrl = _get(scen, "controller", "name")
            load = _get(scen, "workload", "background", "load")
            con.execute(
                "INSERT INTO runs VALUES (" + ", ".join(["?"] * 27) + ")",
                [run.run_id, sweep, run.point.hash, run.seed,
                 json.dumps(_jsonable(dict(run.point.params)), sort_keys=True, default=str),
                 record["status"], record.get("error"), _num(record.get("wall_s")),
                 _dt.datetime.now(_dt.UTC).replace(tzinfo=None),
                 str(scen.get("name", "scenario")),
                 result.get("placement") or _get(scen, "placement", "method") or "first-fit",
                 result.get("routing") or _get(scen, "simulation", "routing") or "ecmp",
                 None if ctrl is None else str(ctrl),
                 result.get("fidelity") or _get(scen, "simulation", "fidelity") or "collective",
                 float(load) if isinstance(load, int | float) else 0.0,
                 result.get("num_gpus"), _num(result.get("horizon_s")),
                 *[_num(result.get(k)) for k in _SUMMARY_COLS],
                 json.dumps(_jsonable(summary), default=str) if result else None,
                 json.dumps(_jsonable(scen), sort_keys=True, default=str),
                 yaml.safe_dump(_jsonable(scen), sort_keys=False)])
            if record["status"] == "ok":
                recs = {r["name"]: r for r in record["records"]}
                rows = []
                for j in result["jobs"]:
                    r = recs[j["name"]]
                    rows.append([run.run_id, *[_num(j[n]) for n, _ in _JOB_COLS], r["gpus"],
                                 r["iteration_end_s"], r["iteration_s"], r["compute_only_iteration_s"]])
                if rows:
                    con.executemany("INSERT INTO jobs VALUES (" + ", ".join(["?"] * len(rows[0])) + ")", rows)
                u = record["utilization"]
                lu = result.get("link_utilization", {})
                rows = [[run.run_id, tier, cap, _get(lu, tier, "mean"), _get(lu, tier, "peak"),
                         u["bin_edges_s"], series]
                        for tier, cap, series in zip(u["tiers"], u["capacity_bytes_per_s"], u["series"],
                                                     strict=True)]
                if rows:
                    con.executemany("INSERT INTO links VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                rows = [[run.run_id, *[_num(t[n]) for n, _ in _TENANT_COLS]] for t in result["tenants"]]
                if rows:
                    con.executemany("INSERT INTO tenants VALUES (" + ", ".join(["?"] * len(rows[0])) + ")",
                                    rows)
                rows = [[run.run_id, *[_num(sv.get(n)) for n, _ in _SERVICE_COLS]]
                        for sv in result.get("services", [])]
                if rows:
                    con.executemany("INSERT INTO services VALUES (" + ", ".join(["?"] * len(rows[0])) + ")",
                                    rows)
                net = record.get("network") or {}
                rows = [[run.run_id, net["model"], r["link"], r["name"], *[_num(r[k]) for k in _NET_NUM],
                         r["series_t_s"], r["series_queue_bytes"], r["pause_t_s"], r["pause_dur_s"]]
                        for r in net.get("links", [])]
                if rows:
                    con.executemany("INSERT INTO network_links VALUES (" + ", ".join(["?"] * 13) + ")", rows)
            con.execute("COMMIT")
        except (self._duckdb_interrupt, RuntimeError) as err:
            # DuckDB turns a Ctrl-C or SIGTERM that arrives inside a query into its own error
            # ("Query interrupted"): the run is not stored and the command stops as interrupted
            with contextlib.suppress(self._duckdb_error):
                con.execute("ROLLBACK")
            if isinstance(err, self._duckdb_interrupt) or "interrupted" in str(err).lower():
                raise KeyboardInterrupt from err
            raise
        except self._duckdb_error as err:
            with contextlib.suppress(self._duckdb_error):
                con.execute("ROLLBACK")
            raise WriteError(f"cannot store run {run.run_id} in {_q(self.path)}: {_first_line(err)} "
                             "(the runs stored before are kept)") from None
        except BaseException:
            with contextlib.suppress(self._duckdb_error):
                con.execute("ROLLBACK")
            raise

    def relabel_run(self, run_id: str, *, sweep: str, params: Mapping[str, Any]) -> None:
        """Move a stored run to `sweep` with `params` (its rows stay; the run id does not depend
        on either).

        Raises:
            WriteError: The store cannot be written.
        """
        try:
            text = json.dumps(_jsonable(dict(params)), sort_keys=True, default=str)
            self._con.execute("UPDATE runs SET sweep = ?, params = ? WHERE run_id = ?", [sweep, text, run_id])
        except self._duckdb_error as err:
            raise WriteError(f"cannot store run {run_id} in {_q(self.path)}: {_first_line(err)}") from None

    def stored_summaries(self) -> dict[str, dict[str, Any]]:
        """The summary (`flowherd.experiments.runner.RunResult.to_dict` without jobs and tenants) of
        every run stored as ok, by run id."""
        rows = self.query("SELECT run_id, summary FROM runs WHERE status = 'ok' AND summary IS NOT NULL")
        return {r["run_id"]: json.loads(r["summary"]) for r in rows}

    # ---- reading --------------------------------------------------------------------------------
    def run_status(self) -> dict[str, str]:
        """Status ("ok" / "failed") of every stored run, by run id."""
        return dict(self._execute("SELECT run_id, status FROM runs").fetchall())

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a SQL query as dicts (column name -> value)."""
        cur = self._execute(sql, params)
        cols = [d[0] for d in cur.description]
        try:
            rows = cur.fetchall()
        except self._duckdb_error as err:
            raise ConfigError(f"result store {_q(self.path)} cannot be read: {_first_line(err)}; "
                              f"{_EXPECTED} (a truncated or damaged file?)") from None
        return [dict(zip(cols, row, strict=True)) for row in rows]

    def runs(self, *, status: str | None = None) -> list[dict[str, Any]]:
        """Stored runs (all columns, ``params`` decoded), ordered by sweep, point and seed."""
        where = "" if status is None else "WHERE status = ?"
        rows = self.query(f"SELECT * FROM runs {where} ORDER BY sweep, params, point_hash, seed",
                          [] if status is None else [status])
        for r in rows:
            r["params"] = json.loads(r["params"]) if r["params"] else {}
        return rows

    def jobs(self, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
        """Job rows, of the given runs (default: all), in submission order."""
        if run_ids is None:
            return self.query("SELECT * FROM jobs ORDER BY run_id, submit_s, name")
        return self.query("SELECT * FROM jobs WHERE list_contains(?, run_id) ORDER BY run_id, submit_s, name",
                          [list(run_ids)])

    def links(self, run_id: str) -> list[dict[str, Any]]:
        """Link-tier rows of one run."""
        return self.query("SELECT * FROM links WHERE run_id = ? ORDER BY rowid", [run_id])

    def network_links(self, run_id: str) -> list[dict[str, Any]]:
        """Congested-link rows of one run (none for ``ideal`` runs and stores older than the table)."""
        if not self._execute("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                             "'network_links'").fetchone()[0]:
            return []
        return self.query("SELECT * FROM network_links WHERE run_id = ? ORDER BY link", [run_id])

    def services(self, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
        """Inference-service rows, of the given runs (default: all); none from a store older than
        the table."""
        if not self._con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                                 "'services'").fetchone()[0]:
            return []
        if run_ids is None:
            return self.query("SELECT * FROM services ORDER BY run_id, name")
        return self.query("SELECT * FROM services WHERE list_contains(?, run_id) ORDER BY run_id, name",
                          [list(run_ids)])

    def tenants(self) -> list[dict[str, Any]]:
        """Tenant rows of all runs."""
        return self.query("SELECT * FROM tenants ORDER BY run_id, tenant")

    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of `table` without the volatile columns (wall time, timestamp), sorted.

        Two executions of the same sweep give equal lists (the resume test compares them).
        """
        if table not in ("runs", "jobs", "links", "tenants", "services"):
            raise ConfigError(f"table must be one of runs, jobs, links, tenants, services, got {table!r} "
                              "(table)")
        exclude = {"wall_s", "finished_at", "summary"} if table == "runs" else set()
        cols = [r[0] for r in self._execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position",
            [table]).fetchall() if r[0] not in exclude]
        rows = self._execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
        return sorted(rows, key=repr)

    # ---- export (flowherd.results) --------------------------------------------------------------
    def dataframe(self, sql: str, params: list[Any] | None = None) -> Any:
        """The rows of a SQL query as a pandas ``DataFrame`` (pandas: the ``results`` extra)."""
        return self._con.execute(sql, params or []).df()

    def copy_parquet(self, sql: str, path: str | Path) -> None:
        """Write the rows of a SQL query (no parameters) to a Parquet file (DuckDB's writer)."""
        target = str(path).replace("'", "''")
        rows = self._con.execute(sql).df()  # the store's own connection reaches no file but its own
        con = local_files_connection()
        try:
            con.register("result_rows", rows)
            con.execute(f"COPY result_rows TO '{target}' (FORMAT PARQUET)")
        finally:
            con.close()

    def close(self) -> None:
        """Close the file (a writable store is checkpointed first: its write-ahead log folded in).

        Raises:
            WriteError: The checkpoint cannot be written (a full disk); the runs are in the log.
        """
        try:
            self._con.close()
        except self._duckdb_error as err:
            raise WriteError(f"cannot write result store {_q(self.path)}: {_first_line(err)}") from None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
