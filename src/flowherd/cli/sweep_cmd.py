"""`flowherd sweep`: run every point and seed of a sweep file on Ray, into one DuckDB file."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from flowherd.cli import app


@app.command("sweep")
def sweep(
    sweep_file: Path = typer.Argument(..., help="a sweep YAML file (base, axes, seeds; see scenarios/)"),
    out: Path = typer.Option(None, "--out", help="directory for results.duckdb (default: runs/<sweep name>)"),
    address: str = typer.Option(None, "--address",
                                help="an existing Ray cluster (default: a local instance)"),
    resume: bool = typer.Option(False, "--resume", help="skip the runs already stored in --out"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="with --resume, run failed runs again"),
    num_cpus: int = typer.Option(None, "--num-cpus", min=1,
                                 help="CPUs of the local Ray instance (default: all)"),
    batch: int = typer.Option(None, "--batch", min=1,
                              help="runs per Ray task (default: chosen from the size)"),
    inline: bool = typer.Option(False, "--inline", help="run in this process, without Ray (debugging)"),
    max_memory: str = typer.Option(None, "--max-memory", help="memory the sweep and each run may use, "
                                   "e.g. 8GiB (default: what this machine, its cgroup and ulimit -v leave); "
                                   "the Ray workers hold their runs to it"),
    max_events: int = typer.Option(None, "--max-events", help="simulator events the sweep may be "
                                   "estimated to take (default: 10^10)"),
) -> None:
    """Run a sweep: every point x seed on a local Ray instance (or --address), stored run by run.

    Exits with 0 when every run of the sweep is stored as ok, 1 when some are stored as failed
    (run now or skipped by --resume), 2 on bad input."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from flowherd.cli.checks import check_out_dir
    from flowherd.experiments.budget import set_limits
    from flowherd.experiments.sweep import load_sweep, run_sweep
    from flowherd.sanitize import file_component, shown

    set_limits(max_memory, max_events)
    err = Console(stderr=True)

    def making(done: int, total: int) -> None:  # a million points take minutes to make
        err.print(f"sweep {shown(sweep_file)}: made {done:,} of {total:,} points", markup=False,
                  highlight=False, soft_wrap=True)

    spec = load_sweep(sweep_file, progress=making)
    # the name is checked to be one path component (load_sweep); runs/<name> stays under runs/
    out_dir = out if out is not None else Path("runs") / file_component(spec.name)
    check_out_dir(out_dir, "--out")
    err.print(f"sweep {spec.name!r}: {len(spec.points)} points x {len(spec.seeds)} seeds = "
              f"{len(spec.runs)} runs -> {shown(out_dir)}", markup=False, highlight=False, soft_wrap=True)
    t0 = time.perf_counter()
    with Progress(TextColumn("[bold]sweep[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("[red]{task.fields[failed]} failed[/]"), TimeRemainingColumn(),
                  TextColumn("{task.fields[last]}"), console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task(spec.name, total=len(spec.runs), failed=0, last="starting Ray ...")

        def tick(state: dict) -> None:
            if state["run_id"] is None and state["skipped_failed"]:
                # said before anything runs, so that a user waiting for them knows at once
                err.print(f"--resume skips {state['skipped_failed']} run(s) stored as failed; pass "
                          "--retry-failed to run them again", markup=False, highlight=False, soft_wrap=True)
            last = f"{state['run_id']} {state['status']}" if state["run_id"] else ""
            bar.update(task, completed=state["done"], failed=state["failed"], last=last)
            if not err.is_terminal and state["run_id"]:
                # one line per stored run where no bar is drawn (logs, CI, the resume test)
                err.print(f"[{state['done']}/{state['total']}] {last}", highlight=False, markup=False)

        stored = {"done": 0, "total": len(spec.runs)}

        def counting(state: dict) -> None:
            stored.update(done=state["done"], total=state["total"])
            tick(state)

        try:
            outcome = run_sweep(spec, out_dir, address=address, num_cpus=num_cpus, resume=resume,
                                retry_failed=retry_failed, batch=batch, backend="inline" if inline else "ray",
                                progress=counting)
        except BaseException as exc:
            from flowherd.errors import Interrupted, caused_by_interrupt

            if not caused_by_interrupt(exc):
                raise
            from flowherd.cli.interrupt import last_signal
            from flowherd.experiments.store import resolve_store_path

            raise Interrupted(f"sweep {spec.name!r} interrupted: {stored['done']} of {stored['total']} runs "
                              f"are stored in {shown(resolve_store_path(out_dir))}; flowherd sweep "
                              f"{shown(sweep_file)} --out {shown(out_dir)} --resume runs the rest",
                              signum=last_signal()) from None
    typer.echo(f"{outcome.ok} ok, {outcome.failed} failed, {outcome.skipped} already stored, of "
               f"{outcome.total} runs in {time.perf_counter() - t0:.1f} s; results in "
               f"{shown(outcome.store_path)}")
    if outcome.any_failed:
        err.print(f"sweep {spec.name!r}: {outcome.failed + outcome.skipped_failed} of {outcome.total} runs "
                  f"failed; their errors are in the runs table of {shown(outcome.store_path)} (--resume "
                  "--retry-failed runs them again)",
                  markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
