"""`flowherd simulate`: run a scenario, print its summary, write its results."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import typer
import yaml

from flowherd.cli import app


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _write_out(out_dir: Path, result: dict[str, Any], source: dict[str, Any]) -> list[Path]:
    """Write result.json, jobs.csv and the scenario; each file atomically (tmp + rename)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def put(name: str, text: str) -> None:
        tmp = out_dir / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out_dir / name)
        written.append(out_dir / name)

    put("scenario.yaml", yaml.safe_dump(source, sort_keys=False))
    put("result.json", json.dumps(result, indent=1))
    jobs = result["jobs"]
    if jobs:
        import io

        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(jobs[0]))
        w.writeheader()
        w.writerows(jobs)
        put("jobs.csv", buf.getvalue())
    return written


def _fmt(x: float | None, unit: str = "s") -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    from flowherd.units import format_seconds

    # seconds throughout, as the report's axes (a mix of "94 s" and "3.7 min" is hard to compare)
    return format_seconds(x) if unit == "s" else f"{x:.3g}"


def _simulate(scenario: Any, plan: Any = None) -> Any:
    """Run a scenario with a progress bar on stderr (drawn only on a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.cli.progress import Heartbeat
    from flowherd.experiments.runner import run_scenario

    err = Console(stderr=True)
    # off a terminal the bar draws nothing: one line a minute instead
    beat = None if err.is_terminal else Heartbeat("simulate")
    with Progress(TextColumn("[bold]simulating[/] {task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}% of the horizon"), TimeElapsedColumn(),
                  console=err, transient=True, disable=beat is not None) as bar:
        task = bar.add_task(f"{scenario.name} ({scenario.placement})", total=scenario.horizon_s)

        def tick(t: float) -> None:
            bar.update(task, completed=min(t, scenario.horizon_s))
            if beat is not None:
                beat.tick(f"{scenario.name}: {100 * min(t, scenario.horizon_s) / scenario.horizon_s:.0f}% "
                          "of the horizon")

        return run_scenario(scenario, progress=tick, plan=plan)


def _console() -> Any:
    from rich.console import Console

    con = Console()
    # piped output: wide enough that the job table keeps its columns readable
    return con if con.is_terminal else Console(width=150)


def _print_run(run: Any) -> None:
    from rich.table import Table

    scenario = run.scenario
    con = _console()
    table = Table(title=f"{scenario.name}: {len(run.jobs)} jobs on {scenario.fabric.num_gpus} GPUs "
                        f"({scenario.placement} placement, {scenario.fidelity} fidelity, "
                        f"seed {scenario.seed})")
    for col in ("job", "tenant", "kind", "GPUs", "queue", "JCT", "mean iteration", "slowdown", "comm share"):
        table.add_column(col, justify="left" if col in ("job", "tenant", "kind") else "right")
    for j in run.jobs:
        table.add_row(j["name"], j["tenant"], j["kind"], str(j["num_gpus"]), _fmt(j["queue_s"]),
                      _fmt(j["jct_s"]) if j["finished"] else "unfinished", _fmt(j["mean_iteration_s"]),
                      _fmt(j["slowdown"], "x"), _fmt(j["comm_share"], "x"))
    con.print(table)
    s = run.summary
    con.print(f"finished {s['jobs_finished']}/{s['jobs_total']} jobs; mean JCT {_fmt(s['mean_jct_s'])}, "
              f"p99 JCT {_fmt(s['p99_jct_s'])}, makespan {_fmt(s['makespan_s'])}, "
              f"mean slowdown {_fmt(s['mean_slowdown'], 'x')}; simulated in {run.wall_s:.1f} s")


def run_and_report(scenario_name: str, *, as_json: bool, out: Path | None, seed: int | None,
                   plan: Path | None = None, controller: str | None = None) -> None:
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    source = read_scenario_mapping(scenario_name)
    if seed is not None:
        source = {**source, "seed": seed}
    if controller is not None:
        source = {**source, "controller": {**source.get("controller", {}), "name": controller}}
    planned = None
    if plan is not None:
        from flowherd.planning.plan import Plan

        planned = Plan.from_json(plan)
        # the plan places the jobs: the run is named and stored by the plan's method, not by the
        # scenario's placer (which it overrides)
        source = {**source, "placement": {**source.get("placement", {}), "method": planned.method}}
    scenario = scenario_from_mapping(source)
    run = _simulate(scenario, planned)
    result = _clean(run.to_dict())
    if out is not None:
        from flowherd.experiments.sweep import store_run_result

        paths = _write_out(out, result, source)
        # the same run in a result store, so that `flowherd report OUT` draws it
        store_run_result(out, source, run)
        paths.append(out / "results.duckdb")
    if as_json:
        typer.echo(json.dumps(result))
        return
    _print_run(run)
    if out is not None:
        _console().print(f"results written to {out} ({', '.join(p.name for p in paths)})")


@app.command("simulate")
def simulate(
    scenario: str = typer.Argument(..., help="a scenario YAML file or an embedded scenario name (default)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path = typer.Option(None, "--out", help="directory for result.json, jobs.csv, scenario.yaml "
                             "and results.duckdb (for flowherd report)"),
    seed: int = typer.Option(None, "--seed", help="override the scenario's seed"),
    plan: Path = typer.Option(None, "--plan", help="a plan JSON (flowherd plan --out) pinning the jobs"),
    controller: str = typer.Option(None, "--controller", help="an online controller: none, adaptive, "
                                   "cassini, crux, sincronia, varys, threshold, flowherd, or the path of a "
                                   "model trained by flowherd train (.zip); overrides the scenario's"),
) -> None:
    """Simulate a scenario: jobs arrive, get placed, run on the shared fabric; print per-job metrics."""
    run_and_report(scenario, as_json=as_json, out=out, seed=seed, plan=plan, controller=controller)
