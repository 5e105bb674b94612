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
* ``network_links`` (congested link of a run on a congestion model, `flowherd.engine.network.network_record`):
  ``model``, ``link``, ``name``, ``queue_mean_bytes``, ``queue_max_bytes``, ``pause_s``,
  ``ecn_marked_bytes``, ``drop_bytes`` and the series ``series_t_s`` / ``series_queue_bytes``
  and ``pause_t_s`` / ``pause_dur_s`` (DOUBLE[]); none for ``ideal`` runs.

`ResultStore.write_run` writes all rows of one run in one transaction: after a crash a run is
either wholly present or absent. Only the driver process writes.

DuckDB is imported only here (the ``sweep`` extra).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from flowherd.errors import ConfigError
from flowherd.experiments.runs import Run, check_seed

__all__ = ["SCHEMA_VERSION", "ResultStore", "resolve_store_path"]

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
CREATE TABLE IF NOT EXISTS network_links (
    run_id VARCHAR, model VARCHAR, link INTEGER, name VARCHAR, queue_mean_bytes DOUBLE,
    queue_max_bytes DOUBLE, pause_s DOUBLE, ecn_marked_bytes DOUBLE, drop_bytes DOUBLE,
    series_t_s DOUBLE[], series_queue_bytes DOUBLE[], pause_t_s DOUBLE[], pause_dur_s DOUBLE[]);
"""


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
        if read_only and not self.path.is_file():
            raise ConfigError(f"no result store at {str(path)!r} (expected a results.duckdb file or a sweep "
                              "directory holding one)")
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as err:
            raise ConfigError(f"cannot open result store {str(self.path)!r}: {err} (path)") from None
        if read_only:
            tables = {r[0] for r in self._con.execute("SELECT table_name FROM information_schema.tables")
                      .fetchall()}
            if "runs" not in tables:
                self._con.close()
                raise ConfigError(f"{str(self.path)!r} is a DuckDB file but not a flowherd result store "
                                  "(no runs table)")
        else:
            self._con.execute(_DDL)
            self._con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                              [str(SCHEMA_VERSION)])

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
            for table in ("runs", "jobs", "links", "tenants", "network_links"):
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
                net = record.get("network") or {}
                rows = [[run.run_id, net["model"], r["link"], r["name"], *[_num(r[k]) for k in _NET_NUM],
                         r["series_t_s"], r["series_queue_bytes"], r["pause_t_s"], r["pause_dur_s"]]
                        for r in net.get("links", [])]
                if rows:
                    con.executemany("INSERT INTO network_links VALUES (" + ", ".join(["?"] * 13) + ")", rows)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    # ---- reading --------------------------------------------------------------------------------
    def run_status(self) -> dict[str, str]:
        """Status ("ok" / "failed") of every stored run, by run id."""
        return dict(self._con.execute("SELECT run_id, status FROM runs").fetchall())

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a SQL query as dicts (column name -> value)."""
        cur = self._con.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

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
        if not self._con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                                 "'network_links'").fetchone()[0]:
            return []
        return self.query("SELECT * FROM network_links WHERE run_id = ? ORDER BY link", [run_id])

    def tenants(self) -> list[dict[str, Any]]:
        """Tenant rows of all runs."""
        return self.query("SELECT * FROM tenants ORDER BY run_id, tenant")

    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of `table` without the volatile columns (wall time, timestamp), sorted.

        Two executions of the same sweep give equal lists (the resume test compares them).
        """
        if table not in ("runs", "jobs", "links", "tenants"):
            raise ConfigError(f"table must be one of runs, jobs, links, tenants, got {table!r} (table)")
        exclude = {"wall_s", "finished_at", "summary"} if table == "runs" else set()
        cols = [r[0] for r in self._con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position",
            [table]).fetchall() if r[0] not in exclude]
        rows = self._con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
        return sorted(rows, key=repr)

    def close(self) -> None:
        """Close the file."""
        self._con.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
