"""One result file per headline benchmark: the figures it printed and what made them.

A benchmark that prints a headline figure also calls :func:`save`, which writes
``benchmarks/results/<name>.json``::

    {"benchmark": "planner", "command": "python benchmarks/planner.py --simulate",
     "date": "2026-12-07T10:11:12Z", "commit": "d996ee8", "dirty": false,
     "machine": {"cpus": 2, "load_avg": [0.4, 0.3, 0.2], "platform": "Linux-...", "python": "3.11.7"},
     "figures": {"heuristic vs topology+backfill, mean JCT": {"value": -0.02, "unit": "s",
                 "ci95": 0.03, "target": "<= -10%", "met": false}},
     "tables": [{"title": "...", "columns": [...], "rows": [[...], ...]}],
     "notes": "what the figures mean, in a sentence or two"}

``benchmarks/summarize.py`` turns every such file into one table per benchmark in
``benchmarks/results/README.md``; the files, not the README, are the record (git keeps the ones
they replace). A benchmark run with other arguments than its headline run passes ``name=`` with
a suffix (``planner_llm``) so that it does not overwrite the headline file.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def figure(value: float | int | str, unit: str = "", *, ci95: float | None = None,
           target: str | None = None, met: bool | None = None) -> dict[str, Any]:
    """One headline figure: its value with its unit, its 95% CI half-width, its target."""
    out: dict[str, Any] = {"value": value, "unit": unit}
    if ci95 is not None:
        out["ci95"] = ci95
    if target is not None:
        out["target"] = target
    if met is not None:
        out["met"] = met
    return out


def table(title: str, columns: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    """A table as printed: its title, column headers (with units) and rows."""
    return {"title": title, "columns": list(columns), "rows": [list(r) for r in rows]}


def _git(*args: str, cwd: Path | None = None) -> str:
    try:
        return subprocess.run(["git", *args], cwd=cwd or RESULTS.parent, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def sources_dirty(cwd: Path | None = None) -> bool:
    """Whether the package's sources (``src/`` at the repository's top) differ from HEAD.

    The pathspec is anchored at the top (``:(top)src``): a bare ``src`` would name
    ``benchmarks/src``, which never exists, and every record would say clean.
    """
    return bool(_git("status", "--porcelain", "--untracked-files=no", "--", ":(top)src", cwd=cwd))


def machine() -> dict[str, Any]:
    """What the figures were measured on: CPUs, the load when the file is written, the platform."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {"cpus": os.cpu_count(), "load_avg": load, "platform": platform.platform(),
            "python": platform.python_version()}


def save(name: str, figures: dict[str, Any], *, tables: list[dict[str, Any]] | None = None,
         notes: str = "", argv: list[str] | None = None, directory: Path | None = None) -> Path:
    """Write ``<directory>/<name>.json`` (default ``benchmarks/results``) and return its path.

    Written to a temporary file and renamed, so that a benchmark killed while writing leaves the
    previous file whole.
    """
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]) if argv else Path("?")
    with contextlib.suppress(ValueError):
        script = script.resolve().relative_to(RESULTS.parents[1])
    record = {
        "benchmark": name,
        "command": shlex.join(["python", str(script), *argv[1:]]),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": sources_dirty(),
        "machine": machine(),
        "figures": figures,
        "tables": tables or [],
        "notes": notes,
    }
    out_dir = RESULTS if directory is None else directory
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh, indent=1, default=float)
        fh.write("\n")
    os.replace(tmp, path)
    return path
