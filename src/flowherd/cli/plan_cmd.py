"""`flowherd plan`: place a scenario's jobs with a planner method and print or write the plan."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from flowherd.cli import app
from flowherd.errors import ConfigError


@app.command("plan")
def plan(
    scenario: str = typer.Argument(..., help="a scenario YAML file or an embedded scenario name (default)"),
    method: str = typer.Option("heuristic", "--method",
                               help="random, packed, topology, hetero, milp, heuristic, arnold, bilevel or "
                                    "monkeytree"),
    time_limit: float = typer.Option(None, "--time-limit", help="solver time limit, seconds"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    out: Path = typer.Option(None, "--out", help="write the plan to this JSON file"),
    seed: int = typer.Option(None, "--seed", help="override the scenario's seed"),
    routes: bool = typer.Option(False, "--routes", help="also route the traffic (multi-commodity-flow LP)"),
    schedule: str = typer.Option(None, "--schedule",
                                 help="fifo or backfill (EASY); default: the method's own (backfill for "
                                      "heuristic and bilevel, fifo for the others)"),
    export: str = typer.Option(None, "--export",
                               help="also write files a cluster applies: slurm (sbatch lines, hostfile in "
                                    "rank order), k8s (pod spec fragments with node affinity) or nccl "
                                    "(NCCL environment, NCCL_TOPO_FILE XML); flowherd.planning.export"),
    export_dir: Path = typer.Option(Path("plan-export"), "--export-dir",
                                    help="where --export writes its files"),
    hosts: str = typer.Option(None, "--hosts", help="host name of server s for --export, a format with "
                                                    "{server} (default node{server:03d})"),
) -> None:
    """Plan where (and when) each job of a scenario runs; `flowherd simulate --plan` executes it."""
    from flowherd.cli.checks import check_out_file, check_seed, plain
    from flowherd.experiments.scenario import load_scenario
    from flowherd.planning.placers import PLANNERS
    from flowherd.planning.plan import make_plan

    PLANNERS[method]  # an unknown method fails before the scenario is read
    if schedule not in (None, "fifo", "backfill"):
        raise ConfigError(f"schedule must be 'fifo' or 'backfill', got {schedule!r} (--schedule)")
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise ConfigError(f"time limit must be a positive number of seconds, got {time_limit!r} "
                          "(--time-limit)")
    if seed is not None:
        check_seed(seed, "--seed")
    if out is not None:
        check_out_file(out, "--out")  # before planning: a long solve must not end unwritable
    if export is not None:
        from flowherd.planning.export import EXPORTS

        if export not in EXPORTS:
            raise ConfigError(f"unknown export {export!r} (--export); expected one of: {', '.join(EXPORTS)}")
    sc = load_scenario(scenario, seed=seed)
    p = make_plan(sc.fabric, sc.jobs, method=method, time_limit_s=time_limit, seed=sc.seed,
                  routes=routes, backfill=None if schedule is None else schedule == "backfill",
                  max_utilization=sc.max_utilization, background=sc.background,
                  routing=sc.routing, pace=sc.pace,
                  migration_cost_per_worker_s=sc.migration_cost_per_worker_s)
    if out is not None:
        p.to_json(out)
    if export is not None:
        from flowherd.planning.export import export_plan

        written = export_plan(p, sc.fabric, export, export_dir, hosts_format=hosts)
        if not as_json:
            typer.echo(f"{export}: {len(written)} files in {export_dir}: "
                       + ", ".join(x.name for x in written[:6]) + (" ..." if len(written) > 6 else ""))
    if as_json:
        typer.echo(json.dumps(json.loads(p.to_json())))
        return
    from rich.console import Console
    from rich.table import Table

    from flowherd.cli.columns import cell

    table = Table(title=plain(f"{sc.name}: plan by {p.method} ({p.status}) for {len(p.jobs)} jobs on "
                              f"{sc.fabric.num_gpus} GPUs"))
    for col in ("job", "GPUs", "first GPU", "start (s)", "iteration (s)", "predicted JCT (s)"):
        table.add_column(col, justify="left" if col == "job" else "right")
    for j in p.jobs:
        table.add_row(plain(j.name), str(len(j.gpus)), str(j.gpus[0]), cell(j.start_s),
                      cell(j.predicted_iteration_s, 3), cell(j.predicted_jct_s))
    con = Console()
    if not con.is_terminal:  # piped: wide enough that job names are not cut
        con = Console(width=150)
    con.print(table)
    con.print(f"predicted mean JCT {cell(p.objective)} s, lower bound {cell(p.lower_bound)} s, "
              f"gap {100 * p.gap:.2f}%, solved in {p.solve_s:.2f} s")
    if out is not None:
        con.print(f"plan written to {plain(out)}", markup=False, highlight=False, soft_wrap=True)
