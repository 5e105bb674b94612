"""`flowherd results`: the numbers of a result store, as terminal tables, CSV, JSON or Parquet."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import typer

from flowherd.cli import app

# the per-point columns of the terminal summary: metric, header (unit in it), decimals
_SUMMARY = (("mean_jct_s", "mean JCT (s)", 3), ("p99_jct_s", "p99 JCT (s)", 3),
            ("mean_slowdown", "mean slowdown (x)", 2), ("makespan_s", "makespan (s)", 3))
# the per-run columns of `--runs`
_RUNS = (("seed", "seed", None), ("status", "status", None), ("jobs_finished", "jobs done", None),
         ("mean_jct_s", "mean JCT (s)", 3), ("p99_jct_s", "p99 JCT (s)", 3),
         ("mean_slowdown", "mean slowdown (x)", 2), ("makespan_s", "makespan (s)", 3),
         ("wall_s", "wall (s)", 1))


@app.command("results")
def results(
    store: Path = typer.Argument(..., help="results.duckdb, or the directory holding it (runs/tiny)"),
    table: str = typer.Option("runs", "--table", help="runs (one row per run), jobs, tenants, links or "
                              "network_links (one row per job ... of a run)"),
    as_csv: bool = typer.Option(False, "--csv", help="print the table as CSV (one row per run for runs)"),
    as_json: bool = typer.Option(False, "--json", help="print the table as one JSON array of objects"),
    parquet: bool = typer.Option(False, "--parquet", help="write the table as Parquet (to --out, default "
                                 "<table>.parquet beside the store)"),
    out: Path = typer.Option(None, "--out", help="write the CSV, JSON or Parquet to this file"),
    runs: bool = typer.Option(False, "--runs", help="in the terminal: one line per run, not per point"),
    series: bool = typer.Option(False, "--series", help="keep the list columns (iteration times, "
                                "utilization and queue series; JSON and Parquet)"),
) -> None:
    """Print a result store's numbers: per point (means over seeds), per run, CSV, JSON or Parquet.

    Every table has the swept values as columns, named by their scenario path
    (fabric.oversubscription); docs/results-schema.md describes every column. In Python:
    flowherd.results.load(DIR) gives the same table as a pandas DataFrame.
    """
    from flowherd.errors import ConfigError
    from flowherd.results import TABLES, point_summary, read, write_parquet

    TABLES[table]
    if as_csv + as_json + parquet > 1:
        raise ConfigError("choose one of --csv, --json and --parquet (--csv)")
    if series and as_csv:
        raise ConfigError("--series makes list columns, which CSV cannot hold: use --json or --parquet "
                          "(--series)")
    if parquet:
        from flowherd.experiments.store import resolve_store_path

        target = out if out is not None else resolve_store_path(store).parent / f"{table}.parquet"
        n = write_parquet(store, table, target, series=series)
        typer.echo(f"{n} rows of {table} -> {target}")
        return
    data = read(store, table, series=series)
    if as_csv or as_json:
        stream = open(out, "w", newline="", encoding="utf-8") if out is not None else sys.stdout  # noqa: SIM115
        try:
            if as_csv:
                _write_csv(stream, data.columns, data.rows)
            else:
                json.dump([{k: _jsonable(v) for k, v in r.items()} for r in data.records()], stream,
                          indent=None, default=str)
                stream.write("\n")
        finally:
            if out is not None:
                stream.close()
        if out is not None:
            typer.echo(f"{len(data.rows)} rows of {table} -> {out}")
        return
    if out is not None:
        raise ConfigError("--out writes --csv, --json or --parquet; the terminal tables go to the terminal "
                          "(--out)")
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a pipe or a file: no 80-column wrap of a table meant to be read whole
        console = Console(width=200)
    if table != "runs":
        _print_generic(console, data)
    elif runs:
        _print_runs(console, data)
    else:
        _print_points(console, data, point_summary(data))


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _csv_cell(v: Any) -> Any:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, list | dict):
        return json.dumps(v)
    return v


def _write_csv(stream: Any, columns: tuple[str, ...], rows: tuple[tuple[Any, ...], ...]) -> None:
    w = csv.writer(stream, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_csv_cell(v) for v in row])


def _fmt(v: Any, digits: int | None) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.{digits}f}" if digits is not None else f"{v:g}"
    return str(v)


def _short_names(columns: tuple[str, ...]) -> list[str]:
    """Terminal headers of swept columns: the last path component when that names each one apart."""
    last = [c.rsplit(".", 1)[-1] for c in columns]
    return last if len(set(last)) == len(last) else list(columns)


def _swept_text(v: Any) -> Any:
    from flowherd.cli.checks import plain

    return plain("-" if v is None else v if isinstance(v, str) else json.dumps(v, default=str))


def _title(data: Any, what: str) -> Any:
    from flowherd.cli.checks import plain

    sweeps = sorted({r[1] for r in data.rows})
    ok = sum(1 for r in data.records() if r["status"] == "ok")
    return plain(f"{what}: {len(data.rows)} runs ({ok} ok) of sweep {', '.join(sweeps)}")


def _print_points(console: Any, data: Any, points: list[Any]) -> None:
    from rich.table import Table

    t = Table(title=_title(data, "means over seeds ± their 95% confidence interval (Student's t)"))
    many = len({p.sweep for p in points}) > 1
    failed = any(p.ok < p.seeds for p in points)
    # the points' scenario, placement and controller where the swept values do not tell them apart
    shown = [(p.sweep, json.dumps(dict(p.values), sort_keys=True, default=str)) for p in points]
    labelled = not data.swept or len(set(shown)) < len(shown)
    if many:
        t.add_column("sweep")
    for c in _short_names(data.swept):
        t.add_column(c, no_wrap=True)
    if labelled:
        t.add_column("scenario: placement + controller")
    t.add_column("seeds", justify="right")
    if failed:
        t.add_column("ok", justify="right")
    for _, header, _ in _SUMMARY:
        t.add_column(header, justify="right", no_wrap=True)
    for p in points:
        cells: list[Any] = [_swept_text(p.sweep)] if many else []
        cells += [_swept_text(p.values[c]) for c in data.swept]
        if labelled:
            cells.append(_swept_text(p.label))
        cells += [str(p.seeds), *([str(p.ok)] if failed else [])]
        for m, _, digits in _SUMMARY:
            mean, half = p.metrics[m]
            cells.append(_fmt(mean, digits) + ("" if math.isnan(half) else f" ± {half:.{digits}f}"))
        t.add_row(*cells)
    console.print(t)
    console.print("one line per run: --runs; every column: --csv or --json; in Python: "
                  "flowherd.results.load(DIR)", highlight=False, markup=False)


def _print_runs(console: Any, data: Any) -> None:
    from rich.table import Table

    t = Table(title=_title(data, "runs"))
    t.add_column("run", no_wrap=True)
    for c in _short_names(data.swept):
        t.add_column(c, no_wrap=True)
    for _, header, _ in _RUNS:
        t.add_column(header, justify="right", no_wrap=True)
    for r in data.records():
        cells = [_swept_text(r["run_id"]), *(_swept_text(r[c]) for c in data.swept)]
        cells += [_fmt(r[k], d) for k, _, d in _RUNS]
        t.add_row(*cells)
    console.print(t)


def _print_generic(console: Any, data: Any) -> None:
    from rich.table import Table

    from flowherd.cli.checks import plain

    t = Table(title=plain(f"{data.name}: {len(data.rows)} rows"))
    for c in data.columns:
        t.add_column(c, justify="right" if c.endswith(("_s", "_bytes", "_utilization")) else "left")
    for row in data.rows:
        t.add_row(*(plain(_fmt(v, 4)) for v in row))
    console.print(t)
