"""`flowherd simulate` and `flowherd demo`: run a scenario, print its summary, write its results."""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
import yaml

from flowherd.cli import app
from flowherd.control import FLOWHERD_POLICIES, LITERATURE_BASELINES


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
    from flowherd.units import format_time

    return format_time(x) if unit == "s" else f"{x:.3g}"


def _simulate(scenario: Any, plan: Any = None) -> Any:
    """Run a scenario with a progress bar on stderr (drawn only on a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.experiments.runner import run_scenario

    err = Console(stderr=True)
    with Progress(TextColumn("[bold]simulating[/] {task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}% of the horizon"), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task(f"{scenario.name} ({scenario.placement})", total=scenario.horizon_s)

        def tick(t: float) -> None:
            bar.update(task, completed=min(t, scenario.horizon_s))

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
                   plan: Path | None = None, controller: str | None = None,
                   network: str | None = None) -> None:
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    source = read_scenario_mapping(scenario_name)
    if seed is not None:
        source = {**source, "seed": seed}
    if controller is not None:
        source = {**source, "controller": {**source.get("controller", {}), "name": controller}}
    if network is not None:  # a model or switch name, or a YAML file (flowherd.sim.network)
        source = {**source, "network": network}
    scenario = scenario_from_mapping(source)
    planned = None
    if plan is not None:
        from flowherd.planning.plan import Plan

        planned = Plan.from_json(plan)
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


# `flowherd demo`: the simulator's packed placer against the planner's heuristic, both without
# control; then, on the heuristic's plan, every literature baseline and every flowherd policy, of
# which the best of each group is reported beside no control.
DEMO_PLACEMENTS = ("packed", "heuristic")
DEMO_BASELINES = LITERATURE_BASELINES
DEMO_SWEEP = "demo"
DEMO_CANDIDATES_SWEEP = "demo-candidates"


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOutcome:
    """What `run_demo` did.

    Attributes:
        store_path: The DuckDB file.
        report_html: The report page.
        best_baseline, best_policy: Names of the chosen controllers (None if every candidate failed).
        candidates: Per candidate controller (on the heuristic plan), its run summary, or None if
            it failed.
        methods: The report's method labels with their mean JCT, seconds (None: no job finished).
        wall_s: Wall-clock time of the demo, seconds.
    """

    store_path: Path
    report_html: Path
    best_baseline: str | None
    best_policy: str | None
    candidates: dict[str, dict[str, Any] | None]
    methods: dict[str, float | None]
    wall_s: float


def _rank(summary: dict[str, Any]) -> tuple[float, float]:
    # most jobs finished first (a controller that stalls jobs must not win on the few that end),
    # then the lowest mean JCT
    jct = summary.get("mean_jct_s")
    return -float(summary.get("jobs_finished") or 0), math.inf if jct is None else float(jct)


def _fresh_demo_store(out: Path) -> Path:
    """The demo's store path, with the runs of an earlier demo there removed (they would mix)."""
    from flowherd.errors import ConfigError
    from flowherd.experiments.store import ResultStore, resolve_store_path

    path = resolve_store_path(out)
    if path.is_file():
        with ResultStore(path, read_only=True) as st:
            sweeps = {r["sweep"] for r in st.runs()}
        others = sorted(sweeps - {DEMO_SWEEP, DEMO_CANDIDATES_SWEEP})
        if others:
            raise ConfigError(f"{path} holds runs of other sweeps {others}, not only of an earlier demo; "
                              "choose another directory (--out)")
        for p in (path, path.with_name(path.name + ".wal")):
            p.unlink(missing_ok=True)
    return path


def _demo_run(source: dict[str, Any], plan: Any, progress: Any = None) -> Any:
    """One simulation of the demo (here or in a worker process)."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping

    return run_scenario(scenario_from_mapping(source), plan=plan, progress=progress)


def run_demo(out: Path, *, scenario: str | dict[str, Any] = "default",
             baselines: tuple[str, ...] = DEMO_BASELINES,
             policies: tuple[str, ...] = FLOWHERD_POLICIES, workers: int | None = None) -> DemoOutcome:
    """The pipeline on one scenario: plan, simulate without and with control, store, report.

    1. Without control: the scenario under each of `DEMO_PLACEMENTS` (the last is the planner's
       heuristic, planned once here).
    2. On the heuristic's plan: each of `baselines` and each of `policies` that is registered in
       `flowherd.control.CONTROLLERS`. The best of each group (most jobs finished, then lowest
       mean JCT; ties to the first listed) is its representative.
    3. Storage in ``OUT/results.duckdb``: the compared runs (no control per placement, best
       baseline, best flowherd policy) under sweep ``demo`` with their ``role``; the other
       candidates under ``demo-candidates``. The report (``OUT/report``) draws sweep ``demo``.

    Args:
        out: Directory for the results and the report (an earlier demo's results there are replaced).
        scenario: An embedded scenario name, a YAML path, or a scenario mapping.
        baselines: Literature controllers to try.
        policies: flowherd policies to try (unregistered names are skipped).
        workers: Simulations run at once, each in its own process (the runs are independent and
            seeded, so the results do not depend on it); None: one per CPU, at most 4.

    Raises:
        ConfigError: A bad scenario, or `out` holding results of something else than a demo.
    """
    import time

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.control import CONTROLLERS
    from flowherd.errors import ConfigError
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.experiments.sweep import store_run_result
    from flowherd.planning.plan import make_plan
    from flowherd.report import write_report
    from flowherd.report.data import ROLE_PARAM, controller_label, load_report_data

    wall0 = time.perf_counter()
    if workers is None:
        workers = min(4, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r} (--workers)")
    base = dict(scenario) if isinstance(scenario, dict) else read_scenario_mapping(scenario)
    unknown = [c for c in baselines if c not in CONTROLLERS]
    if unknown:
        raise ConfigError(f"demo baselines {unknown} are not controllers; expected some of "
                          f"{', '.join(CONTROLLERS)} (baselines)")
    available = tuple(c for c in policies if c in CONTROLLERS)
    skipped = [c for c in policies if c not in CONTROLLERS]
    store = _fresh_demo_store(out)
    con = _console()
    planner = DEMO_PLACEMENTS[-1]
    plain = {m: {**base, "placement": {"method": m}} for m in DEMO_PLACEMENTS}
    first = scenario_from_mapping(plain[planner])
    total = len(DEMO_PLACEMENTS) + len(baselines) + len(available)
    con.print(f"[bold]demo[/]: scenario {first.name!r}, {len(first.jobs)} jobs on {first.fabric.num_gpus} "
              f"GPUs, {first.horizon_s:g} s horizon; {total} simulations: {len(DEMO_PLACEMENTS)} placements "
              f"without control, then on the {planner} plan {len(baselines)} literature baselines "
              f"({', '.join(baselines)}) and {len(available)} flowherd "
              f"polic{'y' if len(available) == 1 else 'ies'} ({', '.join(available) or 'none registered'}); "
              f"{workers} at a time")
    if skipped:
        con.print(f"  (flowherd policies not registered yet, skipped: {', '.join(skipped)})")
    t0 = time.perf_counter()
    plan = make_plan(first.fabric, first.jobs, method=planner, seed=first.seed)
    out.mkdir(parents=True, exist_ok=True)
    plan_path = out / f"plan-{planner}.json"
    plan.to_json(plan_path)
    con.print(f"[bold]demo[/]: planned {len(plan.jobs)} jobs with the {planner} placer in "
              f"{time.perf_counter() - t0:.1f} s -> {plan_path}")

    best: dict[str, tuple[str, Any, dict[str, Any]] | None] = {"baseline": None, "policy": None}
    candidates: dict[str, dict[str, Any] | None] = {}
    uncontrolled: dict[str, dict[str, Any]] = {}
    # (label, scenario source, with the plan, group, controller): no control per placement, then the
    # controllers on the heuristic's plan
    todo = [(f"{m} + no control", plain[m], m == planner, "none", m) for m in DEMO_PLACEMENTS]
    todo += [(f"{planner} + {name}", {**plain[planner], "controller": {"name": name}}, True, group, name)
             for group, name in [("baseline", c) for c in baselines] + [("policy", c) for c in available]]
    runs: dict[str, Any] = {}
    with Progress(TextColumn("[bold]demo[/] {task.description}"), BarColumn(),
                  TextColumn("{task.fields[what]}"), TimeElapsedColumn(), console=con,
                  disable=not con.is_terminal) as bar:
        overall = bar.add_task("pipeline", total=total, what=f"0/{total} simulations")
        current = bar.add_task("", total=1.0, what="", visible=workers <= 1)
        done = 0

        meta = {label: (source, group) for label, source, _, group, _ in todo}

        def finished(label: str, run: Any) -> None:
            """Store a run as soon as it ends (a demo stopped half-way keeps it) and print it."""
            nonlocal done
            done += 1
            bar.update(overall, completed=done, what=f"{done}/{total} simulations")
            source, group = meta[label]
            if group == "none":
                store_run_result(store, source, run, sweep=DEMO_SWEEP, params={ROLE_PARAM: "no control"})
            elif not isinstance(run, BaseException):
                store_run_result(store, source, run, sweep=DEMO_CANDIDATES_SWEEP)
            if isinstance(run, BaseException):
                con.print(f"  [{done}/{total}] {label:<34} [red]failed[/]: {type(run).__name__}: {run}",
                          highlight=False)
                return
            s = run.summary
            con.print(f"  [{done}/{total}] {label:<34} mean JCT {_fmt(s['mean_jct_s']):>8}, "
                      f"{s['jobs_finished']}/{s['jobs_total']} jobs finished  ({run.wall_s:.1f} s)",
                      highlight=False)

        if workers <= 1:
            h = first.horizon_s

            def tick(t: float) -> None:
                bar.update(current, completed=min(t, h), what=f"{100 * min(t, h) / h:3.0f}% of the horizon")

            for label, source, with_plan, group, _ in todo:
                bar.reset(current, total=h, description=label, what="  0% of the horizon")
                try:
                    runs[label] = _demo_run(source, plan if with_plan else None, tick)
                except Exception as err:
                    if group == "none":  # no control must run; a failing controller must not end the demo
                        raise
                    runs[label] = err
                finished(label, runs[label])
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            # spawn: no fork of a process that holds the progress bar's thread
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = {pool.submit(_demo_run, source, plan if with_plan else None): label
                           for label, source, with_plan, _, _ in todo}
                for fut in as_completed(futures):
                    label = futures[fut]
                    err = fut.exception()
                    if err is not None and meta[label][1] == "none":
                        raise err
                    runs[label] = fut.result() if err is None else err
                    finished(label, runs[label])
        bar.update(current, visible=False)

    # in the listed order, whatever order they finished in: ties go to the first listed
    for label, source, _, group, name in todo:
        run = runs[label]
        if group == "none":
            uncontrolled[name] = run.summary
            continue
        if isinstance(run, BaseException):
            candidates[name] = None
            continue
        candidates[name] = run.summary
        cur = best[group]
        if cur is None or _rank(run.summary) < _rank(cur[1].summary):
            best[group] = (name, run, source)

    # the winners move from the candidates to the compared runs (same run id: the row is replaced)
    roles = {"baseline": "best baseline", "policy": "flowherd"}
    for group, chosen in best.items():
        if chosen is not None:
            store_run_result(store, chosen[2], chosen[1], sweep=DEMO_SWEEP, params={ROLE_PARAM: roles[group]})
    _print_candidates(con, candidates, baselines, available,
                      {g: (b[0] if b else None) for g, b in best.items()})

    con.print("[bold]demo[/]: writing the report ...")
    data = load_report_data(store, sweeps=[DEMO_SWEEP])
    files = write_report(store, sweeps=[DEMO_SWEEP])
    methods: dict[str, float | None] = {}
    for m in data.methods:
        xs = [r["mean_jct_s"] for r in data.runs if r["method"] == m and r["mean_jct_s"] is not None]
        methods[m] = sum(xs) / len(xs) if xs else None
    _print_methods(con, data)
    none_jct = uncontrolled[planner]["mean_jct_s"]
    for group in ("baseline", "policy"):
        chosen = best[group]
        if chosen is None or none_jct is None or chosen[1].summary["mean_jct_s"] is None:
            continue
        gain = 1 - chosen[1].summary["mean_jct_s"] / none_jct
        con.print(f"  {controller_label(chosen[0], roles[group])} on the {planner} plan: mean JCT "
                  f"{100 * abs(gain):.2f} % {'shorter' if gain >= 0 else 'longer'} than without control",
                  highlight=False)
    wall_s = time.perf_counter() - wall0
    con.print(f"[bold]demo[/] done in {wall_s:.0f} s; results in {store}; report: {files.html}")
    return DemoOutcome(store_path=store, report_html=files.html,
                       best_baseline=best["baseline"][0] if best["baseline"] else None,
                       best_policy=best["policy"][0] if best["policy"] else None,
                       candidates=candidates, methods=methods, wall_s=wall_s)


def _print_candidates(con: Any, candidates: dict[str, dict[str, Any] | None], baselines: tuple[str, ...],
                      policies: tuple[str, ...], chosen: dict[str, str | None]) -> None:
    from rich.table import Table

    table = Table(title="controllers on the heuristic plan (best: most jobs finished, then lowest mean JCT)")
    for col in ("controller", "group", "jobs finished", "mean JCT", "p99 JCT", "mean slowdown", ""):
        table.add_column(col, justify="left" if col in ("controller", "group", "") else "right")
    for group, names in (("baseline", baselines), ("policy", policies)):
        for name in names:
            s = candidates.get(name)
            mark = "best" if chosen[group] == name else ""
            kind = "literature" if group == "baseline" else "flowherd"
            if s is None:
                table.add_row(name, kind, "failed", "-", "-", "-", "")
                continue
            table.add_row(name, kind, f"{s['jobs_finished']}/{s['jobs_total']}", _fmt(s["mean_jct_s"]),
                          _fmt(s["p99_jct_s"]), _fmt(s["mean_slowdown"], "x"), mark)
    con.print(table)


def _print_methods(con: Any, data: Any) -> None:
    from rich.table import Table

    table = Table(title="the report's methods")
    for col in ("method", "jobs finished", "mean JCT", "p99 JCT", "mean slowdown", "makespan"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for m in data.methods:
        for r in (r for r in data.runs if r["method"] == m and r["status"] == "ok"):
            table.add_row(m, f"{r['jobs_finished']}/{r['jobs_total']}", _fmt(r["mean_jct_s"]),
                          _fmt(r["p99_jct_s"]), _fmt(r["mean_slowdown"], "x"), _fmt(r["makespan_s"]))
    con.print(table)


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
    network: str = typer.Option(None, "--network", help="the network model: ideal, roce, tcp, a switch "
                                "preset (tomahawk2, spectrum2, spectrum3, jericho3, shallow, deep) or a "
                                "YAML file of a network: section; overrides the scenario's"),
) -> None:
    """Simulate a scenario: jobs arrive, get placed, run on the shared fabric; print per-job metrics."""
    run_and_report(scenario, as_json=as_json, out=out, seed=seed, plan=plan, controller=controller,
                   network=network)


@app.command("demo")
def demo(
    out: Path = typer.Option(Path("flowherd-demo"), "--out", help="directory for the results and report"),
    as_json: bool = typer.Option(False, "--json", help="only simulate the default; print one JSON object"),
    workers: int = typer.Option(None, "--workers", help="simulations at once, one process each "
                                "(default: one per CPU, at most 4)"),
) -> None:
    """The whole pipeline on the embedded default: plan (packed placer, flowherd's heuristic),
    simulate without control, with every literature baseline and every flowherd policy, store the
    runs, report no control, the best baseline and the best flowherd policy, and print where the
    report is (--json: one run without control, as simulate --json)."""
    if as_json:
        run_and_report("default", as_json=True, out=None, seed=None)
        return
    run_demo(out, workers=workers)
