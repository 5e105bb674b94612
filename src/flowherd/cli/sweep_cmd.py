"""`flowherd sweep`: run every point and seed of a sweep file (in this process, or on Ray for large
sweeps), into one DuckDB file."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import typer

from flowherd.cli import app


@app.command("sweep")
def sweep(
    sweep_file: Path = typer.Argument(..., help="a sweep YAML file (base, set, axes, seeds; see scenarios/)"),
    out: Path = typer.Option(None, "--out", help="directory for results.duckdb (default: runs/<sweep name>)"),
    address: str = typer.Option(None, "--address",
                                help="an existing Ray cluster to run on"),
    resume: bool = typer.Option(False, "--resume", help="skip the runs already stored in --out"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="with --resume, run failed runs again"),
    num_cpus: int = typer.Option(None, "--num-cpus", min=1,
                                 help="CPUs of a local Ray instance (implies --ray)"),
    batch: int = typer.Option(None, "--batch", min=1,
                              help="runs per Ray task (default: chosen from the size)"),
    inline: bool = typer.Option(False, "--inline", help="run in this process, one run after the other"),
    use_ray: bool = typer.Option(False, "--ray", help="run on a local Ray instance, one run per CPU"),
    max_memory: str = typer.Option(None, "--max-memory", help="memory the sweep and each run may use, "
                                   "e.g. 8GiB (default: what this machine, its cgroup and ulimit -v leave); "
                                   "the Ray workers hold their runs to it"),
    max_events: int = typer.Option(None, "--max-events", help="simulator events the sweep may be "
                                   "estimated to take (default: 10^10)"),
) -> None:
    """Run a sweep: every point x seed, in this process or on Ray, stored run by run.

    Small sweeps (at most 32 runs) run in this process; larger ones, or with --address, --num-cpus
    or --ray, on Ray (a local instance by default). Exits with 0 when every run of the sweep is
    stored as ok, 1 when some are stored as failed (run now or skipped by --resume), 2 on bad
    input. `flowherd results DIR` prints the numbers."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from flowherd.cli.checks import check_out_dir
    from flowherd.errors import ConfigError
    from flowherd.experiments.budget import set_limits
    from flowherd.experiments.sweep import INLINE_MAX_RUNS, RAY_LOG, load_sweep, run_sweep
    from flowherd.sanitize import file_component, shown

    if inline and (use_ray or address is not None or num_cpus is not None):
        raise ConfigError("--inline runs in this process: it takes no --ray, --address or --num-cpus "
                          "(--inline)")
    set_limits(max_memory, max_events)
    # the terminal's stream itself: Ray's messages, sent to ray.log while it runs, do not reach it
    err = Console(file=sys.stderr)
    say = _say(err)

    def making(done: int, total: int) -> None:  # a million points take minutes to make
        say(f"sweep {shown(sweep_file)}: made {done:,} of {total:,} points")

    spec = load_sweep(sweep_file, progress=making)
    # the name is checked to be one path component (load_sweep); runs/<name> stays under runs/
    out_dir = out if out is not None else Path("runs") / file_component(spec.name)
    check_out_dir(out_dir, "--out")
    say(f"sweep {spec.name!r}: {len(spec.points)} points x {len(spec.seeds)} seeds = {len(spec.runs)} runs "
        f"-> {shown(out_dir)}")
    labels = _run_labels(spec)
    backend = "inline" if inline else ("ray" if use_ray else "auto")
    t0 = time.perf_counter()
    clock = {"running": None}
    with Progress(TextColumn("[bold]sweep[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("[red]{task.fields[failed]} failed[/]"), TextColumn("{task.fields[eta]}"),
                  TextColumn("{task.fields[last]}"), console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task(spec.name, total=len(spec.runs), failed=0, eta="", last="")

        def tick(state: dict[str, Any]) -> None:
            if state["phase"] == "starting":
                if state["skipped_failed"]:
                    # said before anything runs, so that a user waiting for them knows at once
                    say(f"--resume skips {state['skipped_failed']} run(s) stored as failed; pass "
                        "--retry-failed to run them again")
                todo = state["total"] - state["done"]
                if state["backend"] == "inline":
                    say(f"{todo} runs in this process (sweeps of up to {INLINE_MAX_RUNS} runs; --ray for "
                        "Ray)")
                elif todo:
                    where = f"the cluster at {address}" if address else "a local instance"
                    say(f"{todo} runs on Ray ({where}; its messages: {out_dir / RAY_LOG}); starting Ray ...")
                bar.update(task, completed=state["done"])
                return
            now = time.perf_counter()
            if clock["running"] is None:
                clock["running"] = now
            eta = _eta(state, now - clock["running"])
            run_id = state["run_id"]
            last = f"{labels.get(run_id, run_id)} {state['status']}" if run_id else ""
            bar.update(task, completed=state["done"], failed=state["failed"], last=last, eta=eta)
            if not err.is_terminal and state["run_id"]:
                # one line per stored run where no bar is drawn (logs, CI, the resume test)
                err.print(f"[{state['done']}/{state['total']}] {last} ({eta})", highlight=False, markup=False)

        stored = {"done": 0, "total": len(spec.runs)}

        def counting(state: dict) -> None:
            stored.update(done=state["done"], total=state["total"])
            tick(state)

        try:
            outcome = run_sweep(spec, out_dir, address=address, num_cpus=num_cpus, resume=resume,
                                retry_failed=retry_failed, batch=batch, backend=backend, progress=counting)
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
               f"{shown(outcome.store_path)} (flowherd results {shown(out_dir)})")
    if outcome.any_failed:
        say(f"sweep {spec.name!r}: {outcome.failed + outcome.skipped_failed} of {outcome.total} runs "
            f"failed; their errors are in the runs table of {shown(outcome.store_path)} (--resume "
            "--retry-failed runs them again)")
        raise typer.Exit(1)


def _say(console: Any) -> Any:
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    return say


def _run_labels(spec: Any) -> dict[str, str]:
    """Each run's swept values and seed, as progress shows them: ``oversubscription=4 load=0.2 seed 1``
    (the last component of each path when that tells them apart)."""
    from flowherd.sanitize import shown

    keys = list(dict.fromkeys(k for p in spec.points for k in p.params))
    short = [k.rsplit(".", 1)[-1] for k in keys]
    names = dict(zip(keys, short if len(set(short)) == len(short) else keys, strict=True))
    out = {}
    for run in spec.runs:
        values = " ".join(f"{names[k]}={_value(v)}" for k, v in run.point.params.items())
        out[run.run_id] = shown(f"{values} seed {run.seed}".strip())
    return out


def _value(v: Any) -> str:
    text = v if isinstance(v, str) else repr(v)
    return text if len(text) <= 24 else text[:21] + "..."


def _eta(state: dict[str, Any], running_s: float) -> str:
    """Time left from the runs this call executed so far (Ray's start-up and resumed runs left out)."""
    from flowherd.cli.progress import format_elapsed

    left = state["total"] - state["done"]
    if left == 0:
        return "done"
    if state["executed"] == 0 or running_s <= 0:
        return "ETA -"
    return f"ETA {format_elapsed(running_s / state['executed'] * left)}"
