"""`flowherd train`: behaviour cloning of the structured policy, then PPO; prints the learning curve."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from flowherd.cli import app
from flowherd.errors import ConfigError

ALGO_NAMES = ("ppo", "a2c")


@app.command("train")
def train(
    scenario: str = typer.Argument(..., help="a scenario YAML file or an embedded scenario name (default)"),
    algo: str = typer.Option("ppo", "--algo", help="ppo or a2c (stable-baselines3)"),
    steps: int = typer.Option(20_000, "--steps", help="environment steps of RL training"),
    out: Path = typer.Option(..., "--out", help="the model file to write (.zip); MODEL_curve.csv (the "
                             "learning curve) and MODEL_last.zip (the last model) go next to it"),
    seed: int = typer.Option(0, "--seed", help="seed of the training (network initialization, sampling)"),
    eval_every: int = typer.Option(None, "--eval-every", help="validate every this many steps "
                                   "(default: about 10 points)"),
    first_seed: int = typer.Option(None, "--first-seed", help="first scenario seed to train on (default: "
                                   "the scenario's seed); keep evaluation seeds out of the range"),
    train_seeds: int = typer.Option(4, "--train-seeds", min=1,
                                    help="train on scenario seeds first..first+N-1"),
    val_seeds: int = typer.Option(2, "--val-seeds", min=1,
                                  help="validate on the held-out seeds that follow: first+N..first+N+V-1"),
    horizon: str = typer.Option(None, "--horizon", help="override the scenario's horizon (e.g. 30s)"),
    time_limit: str = typer.Option(None, "--time-limit", help="stop RL training after this wall time, "
                                   "cloning included (e.g. 30min)"),
    choice_only: bool = typer.Option(False, "--choice-only", help="ask the agent only where its actions "
                                     "make different decisions (under buffer: where buffering is possible)"),
    bc_balance: bool = typer.Option(False, "--bc-balance", help="weight behaviour cloning by the inverse "
                                    "frequency of each structured action (rare actions count)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (curve and figures)"),
) -> None:
    """Train a policy for a scenario's collectives (priority class, buffer or not) and save it;
    `flowherd simulate SCENARIO --controller MODEL` runs it. The saved model is the best one on
    the validation seeds."""
    import sys

    from rich.markup import escape

    from flowherd.cli.checks import check_out_file, check_seed
    from flowherd.registry import Registry
    from flowherd.units import parse_time

    limit_s = None if time_limit is None else parse_time(time_limit, field="--time-limit")
    # an unknown --algo fails before anything is read, and before flowherd.rl loads (it pulls the
    # simulator and gymnasium: seconds); the names are rl.train.ALGOS' (a test compares them)
    Registry("--algo", dict.fromkeys(ALGO_NAMES))[algo]
    check_seed(seed, "--seed")
    if first_seed is not None:
        check_seed(first_seed, "--first-seed")
    for flag, value in (("--steps", steps), ("--eval-every", eval_every)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be a positive number of steps, got {value} ({flag})")
    check_out_file(out, "--out")  # before training: minutes of it must not end unwritable
    if out.suffix != ".zip":  # as train() says it, before the first line
        raise ConfigError(f"the model file must end in .zip, got {str(out)!r} (--out)")
    # the first line before torch and stable-baselines3 load (seconds on a busy machine)
    from flowherd.sanitize import shown

    print(f"train: {algo} on {shown(scenario)}, {steps} steps"
          + ("" if limit_s is None else f", time limit {time_limit}") + "; loading torch ...",
          file=sys.stderr, flush=True)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.cli.progress import Heartbeat
    from flowherd.experiments.scenario import read_scenario_mapping
    from flowherd.rl.train import train as run_training

    horizon_s = None if horizon is None else parse_time(horizon, field="--horizon")
    source = read_scenario_mapping(scenario)
    base = int(source.get("seed", 0)) if first_seed is None else int(first_seed)
    err = Console(stderr=True)
    # off a terminal: the phase lines, every validation point, and one line a minute between
    beat = None if err.is_terminal else Heartbeat("train")
    with Progress(TextColumn("[bold]train[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=err,
                  disable=not err.is_terminal) as bar:
        # the description is read as markup by the column: the scenario's name is escaped
        task = bar.add_task(escape(shown(f"{algo} on {source.get('name', scenario)}")), total=steps,
                            last="cloning ...")

        def tick(done: int, total: int, point) -> None:
            last = "" if point is None else f"mean JCT {point.mean_jct_s:.4g} s at {point.steps} steps"
            if point is None:
                bar.update(task, completed=min(done, total))
                if beat is not None:
                    beat.tick(f"{done}/{total} steps")
            else:
                bar.update(task, completed=min(done, total), last=last)
                if beat is not None:
                    beat.line(f"{done}/{total} steps, {last}")

        def log(line: str) -> None:
            if beat is not None:
                beat.line(line)
            else:
                bar.console.print(f"[bold]train[/] {escape(shown(line))}", highlight=False)

        res = run_training(source, out=out, algo=algo, steps=steps, seed=seed, eval_every=eval_every,
                           train_seeds=[base + i for i in range(train_seeds)],
                           val_seeds=[base + train_seeds + i for i in range(val_seeds)], horizon_s=horizon_s,
                           time_limit_s=limit_s, choice_only=choice_only, bc_balance=bc_balance,
                           progress=tick, log=log)
    if as_json:
        typer.echo(json.dumps({
            "model": str(res.model_path), "last_model": str(res.last_model_path),
            "curve_csv": str(res.curve_path),
            "algo": algo, "steps": res.steps, "n_steps": res.n_steps, "best_steps": res.best_steps,
            "train_seeds": list(res.train_seeds), "val_seeds": list(res.val_seeds),
            "bc_accuracy": res.bc_accuracy, "bc_samples": res.bc_samples,
            "structured_mean_jct_s": res.structured_mean_jct_s, "none_mean_jct_s": res.none_mean_jct_s,
            "curve": [{"steps": p.steps, "wall_s": p.wall_s, "mean_jct_s": p.mean_jct_s} for p in res.curve],
            "wall_s": res.wall_s}))
        return
    from rich.table import Table

    con = Console()
    table = Table(title=f"learning curve: {algo}, mean JCT on validation seeds {list(res.val_seeds)}")
    for col in ("steps", "wall", "mean JCT", "vs structured"):
        table.add_column(col, justify="right")
    for p in res.curve:
        table.add_row(str(p.steps), f"{p.wall_s:.1f} s", f"{p.mean_jct_s:.4g} s",
                      f"{100 * (p.mean_jct_s / res.structured_mean_jct_s - 1):+.2f}%")
    con.print(table)
    con.print(f"behaviour cloning copies the structured policy on {100 * res.bc_accuracy:.1f}% of "
              f"{res.bc_samples} samples; structured policy {res.structured_mean_jct_s:.4g} s, no control "
              f"{res.none_mean_jct_s:.4g} s")
    con.print(f"model (best on validation, at {res.best_steps} steps) written to {shown(res.model_path)}; "
              f"last model {shown(res.last_model_path)}; curve {shown(res.curve_path)}; {res.wall_s:.1f} s",
              markup=False, highlight=False, soft_wrap=True)
