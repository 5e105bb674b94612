"""`flowherd simulate` and `flowherd demo`: run a scenario, print its summary, write its results."""

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
    from flowherd.units import format_time

    return format_time(x) if unit == "s" else f"{x:.3g}"


def run_and_report(scenario_name: str, *, as_json: bool, out: Path | None, seed: int | None,
                   plan: Path | None = None) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import load_scenario, read_scenario_mapping

    scenario = load_scenario(scenario_name, seed=seed)
    planned = None
    if plan is not None:
        from flowherd.planning.plan import Plan

        planned = Plan.from_json(plan)
    err = Console(stderr=True)
    with Progress(TextColumn("[bold]simulating[/] {task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}% of the horizon"), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task(scenario.name, total=scenario.horizon_s)
        def tick(t: float) -> None:
            bar.update(task, completed=min(t, scenario.horizon_s))

        run = run_scenario(scenario, progress=tick, plan=planned)
    result = _clean(run.to_dict())
    if out is not None:
        source = read_scenario_mapping(scenario_name)
        if seed is not None:
            source = {**source, "seed": seed}
        paths = _write_out(out, result, source)
    if as_json:
        typer.echo(json.dumps(result))
        return
    from rich.table import Table

    con = Console()
    table = Table(title=f"{scenario.name}: {len(run.jobs)} jobs on {scenario.fabric.num_gpus} GPUs "
                        f"({scenario.fidelity} fidelity, seed {scenario.seed})")
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
    if out is not None:
        con.print(f"results written to {out} ({', '.join(p.name for p in paths)})")


@app.command("simulate")
def simulate(
    scenario: str = typer.Argument(..., help="a scenario YAML file or an embedded scenario name (default)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path = typer.Option(None, "--out", help="directory for result.json, jobs.csv, scenario.yaml"),
    seed: int = typer.Option(None, "--seed", help="override the scenario's seed"),
    plan: Path = typer.Option(None, "--plan", help="a plan JSON (flowherd plan --out) pinning the jobs"),
) -> None:
    """Simulate a scenario: jobs arrive, get placed, run on the shared fabric; print per-job metrics."""
    run_and_report(scenario, as_json=as_json, out=out, seed=seed, plan=plan)


@app.command("demo")
def demo(
    out: Path = typer.Option(None, "--out", help="directory for the results"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Run the embedded default scenario and print its summary."""
    run_and_report("default", as_json=as_json, out=out, seed=None)
