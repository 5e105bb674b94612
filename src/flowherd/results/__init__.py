"""Results out of a result store: one table per question, the swept values as columns.

A result store (``results.duckdb``, written by ``flowherd sweep``, ``flowherd demo`` and
``flowherd simulate --out``) keeps each run's swept values as one JSON text (``runs.params``).
Here they become columns, named by their scenario path (``fabric.oversubscription``) and typed by
their values (integers, floats, booleans, text; anything else as JSON text), so that a run is one
row and a sweep reads like a data frame of Ray Tune's:

>>> import flowherd.results                                        # doctest: +SKIP
>>> df = flowherd.results.load("runs/tiny")                        # doctest: +SKIP
>>> df.groupby("fabric.oversubscription")["mean_jct_s"].mean()    # doctest: +SKIP

Tables (`TABLES`; every column is described in ``docs/results-schema.md``):

* ``runs``: one row per run: its id, sweep, swept values, seed, status, labels and summary
  metrics (JCT, slowdown, makespan, in seconds or as ratios);
* ``jobs``, ``tenants``, ``links``, ``network_links``: one row per job, tenant, link tier or
  congested link of each run, with the run's swept values and seed beside them.

Series (a job's iteration times, a tier's utilization over time, a queue's samples) are lists;
they are left out unless asked for (``series=True``), so that the tables fit CSV.

DuckDB (the ``store`` extra) is imported by `flowherd.experiments.store`; `load` needs pandas
(the ``results`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError
from flowherd.registry import Registry

__all__ = ["TABLES", "ResultTable", "load", "point_summary", "read", "swept_columns"]

#: The tables `load` and `read` return, by name.
TABLES = Registry("results table", {
    "runs": "one row per run", "jobs": "one row per job of a run", "tenants": "one row per tenant of a run",
    "links": "one row per link tier of a run", "network_links": "one row per congested link of a run",
})

# runs: the columns shown, in order (the swept values come after `sweep`); the scenario texts, the
# summary JSON and the point hash stay in the store
_RUN_HEAD = ("run_id", "sweep")
_RUN_TAIL = ("seed", "status", "error", "scenario_name", "placement", "routing", "controller", "fidelity",
             "background_load", "num_gpus", "horizon_s", "jobs_total", "jobs_finished", "mean_jct_s",
             "p99_jct_s", "mean_queue_s", "mean_slowdown", "makespan_s", "wall_s", "finished_at",
             "point_hash")
# the order of the per-run rows of each child table
_CHILD_ORDER = {"jobs": "t.submit_s, t.name", "tenants": "t.tenant", "links": "t.rowid",
                "network_links": "t.link"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultTable:
    """Rows of one table, as plain values.

    Attributes:
        name: The table (`TABLES`).
        columns: Column names, in order.
        swept: The columns that hold swept values (a subset of `columns`).
        rows: One tuple per row, in column order.
    """

    name: str
    columns: tuple[str, ...]
    swept: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts (column name -> value)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _tuples(store: Any, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    return [tuple(row.values()) for row in store.query(sql, params)]


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_type(values: Sequence[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "BIGINT"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "DOUBLE"
    if all(isinstance(v, str) for v in present):
        return "VARCHAR"
    return "JSON"


def swept_columns(store: Any) -> list[tuple[str, str]]:
    """The swept parameters of the runs in `store` (a `ResultStore`), in the order they first appear,
    each with the SQL type of its values (BOOLEAN, BIGINT, DOUBLE, VARCHAR, or JSON text)."""
    values: dict[str, list[Any]] = {}
    for (text,) in _tuples(store, "SELECT params FROM runs ORDER BY sweep, params, seed"):
        for key, value in (json.loads(text) if text else {}).items():
            values.setdefault(str(key), []).append(value)
    return [(key, _sql_type(vals)) for key, vals in values.items()]


def _param_expr(key: str, kind: str) -> str:
    pointer = _sql_text("/" + key.replace("~", "~0").replace("/", "~1"))
    if kind == "VARCHAR":
        return f"json_extract_string(r.params, {pointer})"
    if kind == "JSON":
        return f"CAST(json_extract(r.params, {pointer}) AS VARCHAR)"
    return f"CAST(json_extract(r.params, {pointer}) AS {kind})"


def _column_names(store: Any, table: str) -> list[tuple[str, str]]:
    return [(n, t) for n, t in _tuples(
        store, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position", [table])]


def _query(store: Any, table: str, series: bool) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The SELECT of `table` with the swept values as columns: (sql, columns, swept columns)."""
    params = swept_columns(store)
    own = _column_names(store, table)
    if not own:  # a store written before the table existed
        raise ConfigError(f"the result store has no {table} table (--table)")
    taken = {n for n, _ in own} | set(_RUN_HEAD) | set(_RUN_TAIL)
    # a swept value named like a column of the table keeps its name with a "param:" prefix
    names = [(k, t, f"param:{k}" if k in taken else k) for k, t in params]
    swept_sql = [f"{_param_expr(k, t)} AS {_ident(n)}" for k, t, n in names]
    swept = tuple(n for _, _, n in names)
    order_params = ", ".join(_ident(n) for n in swept)
    if table == "runs":
        kept = sorted((n for n, _ in own if n in _RUN_TAIL), key=_RUN_TAIL.index)
        cols = [*_RUN_HEAD, *swept, *kept]
        select = ", ".join([*(f"r.{c}" for c in _RUN_HEAD), *swept_sql, *(f"r.{c}" for c in kept)])
        order = ", ".join(filter(None, ["r.sweep", order_params, "r.seed"]))
        return f"SELECT {select} FROM runs r ORDER BY {order}", tuple(cols), swept
    kept = [n for n, t in own if n != "run_id" and (series or not t.endswith("[]"))]
    cols = ["run_id", "sweep", *swept, "seed", *kept]
    select = ", ".join(["r.run_id", "r.sweep", *swept_sql, "r.seed", *(f"t.{_ident(c)}" for c in kept)])
    order = ", ".join(filter(None, ["r.sweep", order_params, "r.seed", _CHILD_ORDER[table]]))
    sql = f"SELECT {select} FROM {table} t JOIN runs r ON r.run_id = t.run_id ORDER BY {order}"
    return sql, tuple(cols), swept


@contextmanager
def _open(path: str | Path) -> Iterator[Any]:
    from flowherd.experiments.store import ResultStore

    with ResultStore(path, read_only=True) as store:
        yield store


def read(path: str | Path, table: str = "runs", *, series: bool = False) -> ResultTable:
    """One table of the store at `path` (a ``results.duckdb`` file or the directory holding it),
    the swept values as columns.

    Args:
        path: The store.
        table: One of `TABLES`.
        series: Keep the list columns (iteration times, utilization and queue series).

    Raises:
        ConfigError: No store at `path`, an unknown table.
    """
    TABLES[table]
    with _open(path) as store:
        sql, cols, swept = _query(store, table, series)
        rows = tuple(_tuples(store, sql))
    return ResultTable(name=table, columns=cols, swept=swept, rows=rows)


def load(path: str | Path, table: str = "runs", *, series: bool = False) -> Any:
    """One table of a result store as a pandas ``DataFrame``: one row per run (``runs``), or per
    job, tenant, link tier or congested link of a run, with the swept parameters as columns.

    Args:
        path: ``results.duckdb``, or the directory holding it (``runs/tiny``).
        table: One of `TABLES`.
        series: Keep the list columns (iteration times, utilization and queue series).

    Raises:
        ConfigError: No store at `path`, an unknown table.
        ModuleNotFoundError: pandas is not installed (``pip install 'flowherd[results]'``).
    """
    import pandas  # noqa: F401  (DuckDB's .df() needs it; a missing pandas fails here, by name)

    TABLES[table]
    with _open(path) as store:
        sql, _, _ = _query(store, table, series)
        return store.dataframe(sql)


def write_parquet(path: str | Path, table: str, out: str | Path, *, series: bool = False) -> int:
    """Write one table (as `read` returns it) to the Parquet file `out`; returns its row count."""
    TABLES[table]
    with _open(path) as store:
        sql, _, _ = _query(store, table, series)
        store.copy_parquet(sql, out)
        return int(_tuples(store, f"SELECT count(*) AS n FROM ({sql})")[0][0])


@dataclass(frozen=True, slots=True, kw_only=True)
class PointSummary:
    """The runs of one point (one sweep's swept values), over its seeds.

    Attributes:
        sweep: The sweep.
        values: The swept values, by column.
        seeds: Runs stored (ok or failed).
        ok: Runs that finished.
        metrics: Per metric (`SUMMARY_METRICS`), the mean over the finished runs and the half-width
            of its 95% confidence interval (Student's t; nan for one run).
        label: The point's scenario, placement and controller (what tells apart points whose swept
            values are equal, such as the runs of ``flowherd demo``).
    """

    sweep: str
    values: Mapping[str, Any]
    seeds: int
    ok: int
    metrics: Mapping[str, tuple[float, float]]
    label: str


#: The per-run metrics the terminal summary averages over seeds.
SUMMARY_METRICS = ("mean_jct_s", "p99_jct_s", "mean_slowdown", "makespan_s")


def point_summary(table: ResultTable) -> list[PointSummary]:
    """The ``runs`` table grouped by point (sweep and scenario: `point_hash`), means over the seeds."""
    import math

    from flowherd.experiments.stats import mean_ci95

    if table.name != "runs":
        raise ConfigError(f"a point summary is made of the runs table, got {table.name!r} (table)")
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in table.records():
        key = (rec["sweep"], rec["point_hash"])
        groups.setdefault(key, []).append(rec)
    out = []
    for recs in groups.values():
        ok = [r for r in recs if r["status"] == "ok"]
        metrics = {}
        for m in SUMMARY_METRICS:
            xs = [float(r[m]) for r in ok if r[m] is not None and math.isfinite(float(r[m]))]
            metrics[m] = mean_ci95(xs) if xs else (math.nan, math.nan)
        first = recs[0]
        out.append(PointSummary(sweep=first["sweep"], values={c: first[c] for c in table.swept},
                                seeds=len(recs), ok=len(ok), metrics=metrics,
                                label=f"{first['scenario_name']}: {first['placement']} + "
                                      f"{first['controller'] or 'no control'}"))
    return out
