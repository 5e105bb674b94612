"""Reports of a result store: PNG figures (matplotlib) and one self-contained HTML page (plotly).

`write_report` is the entry point; matplotlib and plotly are imported only when it runs (the
``report`` extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ReportFiles", "write_report"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportFiles:
    """What `write_report` wrote.

    Attributes:
        out_dir: The report directory.
        html: The HTML page.
        figures: The PNG files.
        runs, failed: Runs in the store, and how many of them failed.
    """

    out_dir: Path
    html: Path
    figures: tuple[Path, ...]
    runs: int
    failed: int


def default_out_dir(results: str | Path) -> Path:
    """``report/`` beside the result store."""
    from flowherd.experiments.store import resolve_store_path

    return resolve_store_path(results).parent / "report"


def write_report(results: str | Path, out_dir: str | Path | None = None, *,
                 run_id: str | None = None, sweeps: list[str] | tuple[str, ...] | None = None) -> ReportFiles:
    """Draw the figures and the HTML page of a result store.

    Args:
        results: The DuckDB file, or the sweep directory holding ``results.duckdb``.
        out_dir: Where to write (default: ``report/`` beside the store).
        run_id: Draw this run in the per-run figures (heatmap, Gantt, fabric) instead of one
            representative run per method.
        sweeps: Draw only the runs stored under these sweep names (default: all).

    Raises:
        ConfigError: No store at `results`, an empty store (or no run of `sweeps`), an unknown
            `run_id`.
    """
    from flowherd.report.data import load_report_data
    from flowherd.report.figures import write_figures
    from flowherd.report.html import write_html

    data = load_report_data(results, run_id=run_id, sweeps=sweeps)
    out = Path(out_dir) if out_dir is not None else default_out_dir(results)
    figures = write_figures(data, out)
    from flowherd.report.telemetry_fig import write_telemetry_figures

    ok = [r for r in data.runs if r["status"] == "ok"]  # runs that kept telemetry (docs/telemetry.md)
    figures = [*figures, *write_telemetry_figures(data.source, out, {r["run_id"]: r["method"] for r in ok})]
    page = write_html(data, out)
    return ReportFiles(out_dir=out, html=page, figures=tuple(figures), runs=len(data.runs),
                       failed=len(data.failed))
