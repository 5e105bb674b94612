"""`flowherd simulate`: run a scenario, print its summary, write its results."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import typer

from flowherd.cli import app
from flowherd.errors import ConfigError


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

    import yaml  # here: `simulate --help` and a run without --out need none

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


# off a terminal (logs, CI) a long simulation prints a line this often, wall seconds, instead of
# staying silent; the first after PROGRESS_FIRST_S
PROGRESS_EVERY_S = 60.0
PROGRESS_FIRST_S = 10.0


def _simulate(scenario: Any, plan: Any = None) -> Any:
    """Run a scenario with a progress bar and an estimate of the time left on stderr (on a
    terminal), or a progress line every `PROGRESS_EVERY_S` with the same estimate (elsewhere)."""
    import time

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from flowherd.experiments.runner import run_scenario
    from flowherd.units import format_time

    err = Console(stderr=True)
    horizon_s = scenario.horizon_s
    label = f"{scenario.name} ({scenario.placement})"
    t0 = time.perf_counter()
    next_line = [t0 + PROGRESS_FIRST_S]
    with Progress(TextColumn("simulating {task.description}", markup=False), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}% of the horizon"), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task(label, total=horizon_s)

        def tick(t: float) -> None:
            bar.update(task, completed=min(t, horizon_s))
            now = time.perf_counter()
            if err.is_terminal or now < next_line[0]:
                return
            next_line[0] = now + PROGRESS_EVERY_S
            frac = min(t, horizon_s) / horizon_s if horizon_s > 0 else 1.0
            wall = now - t0
            left = f"about {format_time(wall * (1 - frac) / frac)} left" if frac > 0 else "time left unknown"
            err.print(f"simulating {label}: {100 * frac:.1f}% of the {format_time(horizon_s)} horizon after "
                      f"{format_time(wall)} of wall time; {left} at this pace",
                      markup=False, highlight=False, soft_wrap=True)

        # a controlled run is compared with the same run without control: what it costs the others
        return run_scenario(scenario, progress=tick, plan=plan, compare_none=True)


def _console() -> Any:
    from rich.console import Console

    con = Console()
    # piped output: wide enough that the job table keeps its columns readable
    return con if con.is_terminal else Console(width=150)


def _print_run(run: Any) -> None:
    from rich.table import Table

    from flowherd.cli.checks import plain

    scenario = run.scenario
    con = _console()
    # names come from the scenario (data): shown as text, never read as rich markup
    table = Table(title=plain(f"{scenario.name}: {len(run.jobs)} jobs on {scenario.fabric.num_gpus} GPUs "
                              f"({scenario.placement} placement, {scenario.fidelity} fidelity, "
                              f"seed {scenario.seed})"))
    for col in ("job", "tenant", "kind", "GPUs", "queue", "JCT", "mean iteration", "slowdown", "comm share"):
        table.add_column(col, justify="left" if col in ("job", "tenant", "kind") else "right")
    for j in run.jobs:
        table.add_row(plain(j["name"]), plain(j["tenant"]), plain(j["kind"]), str(j["num_gpus"]),
                      _fmt(j["queue_s"]),
                      _fmt(j["jct_s"]) if j["finished"] else "unfinished", _fmt(j["mean_iteration_s"]),
                      _fmt(j["slowdown"], "x"), _fmt(j["comm_share"], "x"))
    con.print(table)
    s = run.summary
    con.print(f"finished {s['jobs_finished']}/{s['jobs_total']} jobs; mean JCT {_fmt(s['mean_jct_s'])}, "
              f"p99 JCT {_fmt(s['p99_jct_s'])}, makespan {_fmt(s['makespan_s'])}, "
              f"mean slowdown {_fmt(s['mean_slowdown'], 'x')}; simulated in {run.wall_s:.1f} s",
              markup=False, highlight=False, soft_wrap=True)
    cost = s.get("cost_to_others")
    if cost is not None:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{100 * x:+.1f}%"

        tenants = ", ".join(f"{plain(t)} {pct(v)}" for t, v in cost["tenant_slowdown_change"].items())
        jain = cost["tenant_jain"]
        jain0 = cost["tenant_jain_without_control"]
        con.print(f"cost to others against no control (grant {scenario.levers.name}): background FCT mean "
                  f"{pct(cost['background_mean_fct_change'])}, p99 {pct(cost['background_p99_fct_change'])}; "
                  f"tenant slowdown {tenants or 'n/a'}; Jain's index {_fmt(jain, 'x')} "
                  f"(without control {_fmt(jain0, 'x')}); refused decisions "
                  f"{sum(i.refused for i in run.cluster.controller_issues)}",
                  markup=False, highlight=False, soft_wrap=True)


def run_and_report(scenario_name: str, *, as_json: bool, out: Path | None, seed: int | None,
                   plan: Path | None = None, controller: str | None = None,
                   network: str | None = None) -> None:
    from flowherd.cli.checks import check_out_dir, check_seed
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    if seed is not None:
        check_seed(seed, "--seed")
    source = read_scenario_mapping(scenario_name)
    if seed is not None:
        source = {**source, "seed": seed}
    if controller is not None:
        source = {**source, "controller": {**source.get("controller", {}), "name": controller}}
    if network is not None:  # a model or switch name, or a YAML file (flowherd.engine.network)
        source = {**source, "network": network}
    planned = None
    if plan is not None:
        from flowherd.experiments.loading import read_text_file
        from flowherd.planning.plan import Plan

        expected = "a plan JSON file (flowherd plan --out)"
        text = read_text_file(plan, what="plan", expected=expected)
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"plan file {str(plan)!r} is not JSON: {err} (--plan); "
                              f"expected {expected}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"plan file {str(plan)!r} does not hold a JSON object, got "
                              f"{type(data).__name__} (--plan); expected {expected}")
        planned = Plan.from_dict(data)
        # the plan places the jobs: the run is named and stored by the plan's method, not by the
        # scenario's placer (which it overrides)
        source = {**source, "placement": {**source.get("placement", {}), "method": planned.method}}
    scenario = scenario_from_mapping(source)
    if out is not None:
        # before the simulation: a run of minutes must not end in a directory that cannot be written
        check_out_dir(out, "--out")
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
        _console().print(f"results written to {out} ({', '.join(p.name for p in paths)})", markup=False,
                         highlight=False)


@app.command("simulate")
def simulate(
    scenario: str = typer.Argument(..., help="a scenario YAML file or an embedded scenario name (default)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path = typer.Option(None, "--out", help="directory for result.json, jobs.csv, scenario.yaml "
                             "and results.duckdb (for flowherd report)"),
    seed: int = typer.Option(None, "--seed", help="override the scenario's seed"),
    plan: Path = typer.Option(None, "--plan", help="a plan JSON (flowherd plan --out) pinning the jobs"),
    controller: str = typer.Option(None, "--controller", help="an online controller: none, adaptive, "
                                   "cassini, crux, sincronia, varys, mltcp, threshold, interleave, flowherd, "
                                   "or the path of a model trained by flowherd train (.zip); overrides the "
                                   "scenario's (a controlled run is also run without control, for the "
                                   "cost to others)"),
    network: str = typer.Option(None, "--network", help="the network model: ideal, roce, tcp, a switch "
                                "preset (tomahawk2, spectrum2, spectrum3, jericho3, shallow, deep) or a "
                                "YAML file of a network: section; overrides the scenario's"),
) -> None:
    """Simulate a scenario: jobs arrive, get placed, run on the shared fabric; print per-job metrics."""
    run_and_report(scenario, as_json=as_json, out=out, seed=seed, plan=plan, controller=controller,
                   network=network)
