"""`flowherd simulate`: run a scenario, print its summary, write its results."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import typer

from flowherd.cli import app
from flowherd.errors import ConfigError, WriteError


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _write_out(out_dir: Path, result: dict[str, Any], source: dict[str, Any]) -> list[Path]:
    """Write result.json, jobs.csv and the scenario; each file atomically (`flowherd.atomic`).

    Raises:
        WriteError: Naming the file and the cause (a full disk).
    """
    from flowherd import atomic

    written = []

    def put(name: str, text: str) -> None:
        written.append(atomic.write_text(out_dir / name, text, field="--out"))

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


def _save(out: Path, result: dict[str, Any], source: dict[str, Any], run: Any) -> list[Path]:
    """The files of `_write_out` and the run in ``OUT/results.duckdb`` (for `flowherd report OUT`),
    each written to a temporary name and renamed.

    Raises:
        WriteError: Naming the file and the cause.
    """
    from flowherd.experiments.sweep import store_run_result

    paths = _write_out(out, result, source)
    run_id = store_run_result(out, source, run, whole_file=True)
    paths.append(out / "results.duckdb")
    if run.scenario.telemetry is not None:  # beside the store (docs/telemetry.md)
        from flowherd.atomic import write_error
        from flowherd.experiments.telemetry import write_telemetry

        where = out / "telemetry" / run_id
        try:
            paths += write_telemetry(run, where).values()
        except OSError as err:
            raise write_error(where, err) from None
    return paths


def _save_elsewhere(result: dict[str, Any], source: dict[str, Any], run: Any) -> str:
    """Save the run in a fresh temporary directory; the clause that says where (or why not)."""
    import tempfile

    try:
        tmp = Path(tempfile.mkdtemp(prefix="flowherd-result-"))
    except OSError as err:
        return f" (and could not be saved elsewhere: {err.strerror or err})"
    try:
        _save(tmp, result, source, run)
    except WriteError as err:
        return f" (and could not be saved in {tmp} either: {err})"
    return f" and saved in {tmp}"


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
PROGRESS_FIRST_S = 4.0
#: A run estimated to take more CPU seconds than this says so before it starts
#: (`flowherd.experiments.cost`): the first line within seconds, whatever comes before the first
#: progress tick.
ANNOUNCE_CPU_S = 5.0


def _simulate(scenario: Any, plan: Any = None) -> Any:
    """Run a scenario with a progress bar and an estimate of the time left on stderr (on a
    terminal), or a progress line every `PROGRESS_EVERY_S` with the same estimate (elsewhere)."""
    import time

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from flowherd.experiments import cost
    from flowherd.experiments.runner import run_scenario
    from flowherd.sanitize import shown
    from flowherd.units import format_time

    err = Console(stderr=True)
    horizon_s = scenario.horizon_s
    label = shown(f"{scenario.name} ({scenario.placement})")
    estimate = cost.run_cost(scenario)
    cost.check(estimate, f"scenario {scenario.name!r}")
    if estimate.cpu_s >= ANNOUNCE_CPU_S:
        err.print(f"simulating {label}: estimated {estimate.describe()}", markup=False, highlight=False,
                  soft_wrap=True)
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
    from flowherd.cli.columns import cell

    for col in ("job", "tenant", "kind", "GPUs", "queue (s)", "JCT (s)", "mean iteration (s)",
                "slowdown (x)", "comm share (%)"):
        table.add_column(col, justify="left" if col in ("job", "tenant", "kind") else "right")
    for j in run.jobs:
        table.add_row(plain(j["name"]), plain(j["tenant"]), plain(j["kind"]), str(j["num_gpus"]),
                      cell(j["queue_s"]), cell(j["jct_s"]) if j["finished"] else "unfinished",
                      cell(j["mean_iteration_s"], 3), cell(j["slowdown"]),
                      cell(j["comm_share"], 1, scale=100))
    con.print(table)
    _print_services(con, run)
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


def _cells(row: dict[str, Any], *keys: str, digits: int, scale: float) -> str:
    from flowherd.cli.columns import cell

    return " / ".join(cell(row[k], digits, scale=scale) for k in keys)


def _print_services(con: Any, run: Any) -> None:
    """The inference services' table (time to first token, per output token, SLO attainment) and a
    warning line per overloaded service."""
    from rich.table import Table

    from flowherd.cli.checks import plain
    from flowherd.cli.columns import cell

    services = run.summary.get("services") or []
    if not services:
        return
    table = Table(title="inference services (p99 objectives as MLPerf's server rule; attainment: share of "
                        "requests within)")
    for col in ("service", "requests", "rate\n(1/s)", "capacity\n(1/s)", "TTFT (ms)\nmean / p99",
                "TPOT (ms)\nmean / p99", "SLO (ms)\nTTFT / TPOT", "within SLO (%)\nTTFT / TPOT / both",
                "SLO\nmet", "comm\nshare (%)"):
        table.add_column(col, justify="left" if col == "service" else "right")
    for sv in services:
        met = sv["slo_met"]

        table.add_row(plain(sv["name"]), str(sv["requests"]), cell(sv["request_rate_per_s"], 2),
                      cell(sv["capacity_per_s"], 2),
                      _cells(sv, "mean_ttft_s", "p99_ttft_s", digits=1, scale=1e3),
                      _cells(sv, "mean_tpot_s", "p99_tpot_s", digits=2, scale=1e3),
                      _cells(sv, "ttft_slo_s", "tpot_slo_s", digits=1, scale=1e3),
                      _cells(sv, "ttft_attainment", "tpot_attainment", "slo_attainment", digits=1, scale=100),
                      "-" if met is None else ("yes" if met else "no"), cell(sv["comm_share"], 1, scale=100))
    con.print(table)
    for line in run.summary.get("warnings") or []:
        con.print("warning: " + line, style="yellow", markup=False, highlight=False, soft_wrap=True)


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
    failed: WriteError | None = None
    if out is not None:
        try:
            paths = _save(out, result, source, run)
        except WriteError as err:  # the result is printed all the same, and kept elsewhere
            failed = err
    if as_json:
        typer.echo(json.dumps(result))
    else:
        _print_run(run)
    if failed is not None:
        raise WriteError(f"{failed}; the result is printed above{_save_elsewhere(result, source, run)}")
    if out is not None and not as_json:
        from flowherd.sanitize import shown

        _console().print(f"results written to {shown(out)} ({', '.join(shown(p.name) for p in paths)})",
                         markup=False, highlight=False, soft_wrap=True)


@app.command("simulate")
def simulate(
    scenario: str = typer.Argument(..., help="a scenario YAML file or an embedded scenario name (default)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path = typer.Option(None, "--out", help="directory for result.json, jobs.csv, scenario.yaml "
                             "and results.duckdb (for flowherd report)"),
    seed: int = typer.Option(None, "--seed", help="override the scenario's seed"),
    plan: Path = typer.Option(None, "--plan", help="a plan JSON (flowherd plan --out) pinning the jobs"),
    controller: str = typer.Option(None, "--controller", help="an online controller: none, adaptive, "
                                   "cassini, crux, sincronia, varys, mltcp, threshold, interleave, gate, "
                                   "kv-guard, flowherd, or the path of a model trained by flowherd train "
                                   "(.zip); overrides the scenario's (a controlled run is also run without "
                                   "control, for the cost to others)"),
    network: str = typer.Option(None, "--network", help="the network model: ideal, roce, tcp, a switch "
                                "preset (tomahawk2, spectrum2, spectrum3, jericho3, shallow, deep) or a "
                                "YAML file of a network: section; overrides the scenario's"),
    max_memory: str = typer.Option(None, "--max-memory", help="memory the run may use, e.g. 8GiB "
                                   "(default: what this machine, its cgroup and ulimit -v leave); an "
                                   "estimate over it is refused before the run"),
    max_events: int = typer.Option(None, "--max-events", help="simulator events the run may be "
                                   "estimated to take (default: 10^10)"),
) -> None:
    """Simulate a scenario: jobs arrive, get placed, run on the shared fabric; print per-job metrics."""
    from flowherd.experiments.budget import set_limits

    set_limits(max_memory, max_events)
    run_and_report(scenario, as_json=as_json, out=out, seed=seed, plan=plan, controller=controller,
                   network=network)
