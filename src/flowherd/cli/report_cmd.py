"""`flowherd report`: PNG figures and one self-contained HTML page from a result store."""

from __future__ import annotations

from pathlib import Path

import typer

from flowherd.cli import app


@app.command("report")
def report(
    results: Path = typer.Argument(..., help="results.duckdb, or the sweep directory holding it"),
    out: Path = typer.Option(None, "--out", help="directory for the figures and report.html "
                             "(default: report/ beside the results)"),
    run: str = typer.Option(None, "--run",
                            help="run id to draw in the per-run figures (default: one per method)"),
) -> None:
    """Draw a result store: JCT CDF, slowdown against load, fairness, utilization, Gantt, fabric."""
    from flowherd.cli.checks import check_out_dir
    from flowherd.experiments.store import resolve_store_path
    from flowherd.report import default_out_dir, write_report
    from flowherd.sanitize import shown

    # before the store is read: the figures must have a place to go (not an existing file, not
    # on a read-only file system); a missing store is said first
    if resolve_store_path(results).is_file():
        check_out_dir(out if out is not None else default_out_dir(results), "--out")
    files = write_report(results, out, run_id=run)
    typer.echo(f"{len(files.figures)} figures and {shown(files.html)} from {files.runs} runs "
               f"({files.failed} failed)")
    for path in files.figures:
        typer.echo(f"  {shown(path)}")
