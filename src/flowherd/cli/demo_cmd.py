"""`flowherd demo`: the whole pipeline on the embedded default, in a few minutes.

The simulator's packed placer against the planner's heuristic, both without control; then, on
the heuristic's plan, literature baselines and flowherd's policies, of which the best of each
group is reported beside no control. The quick demo (the default) tries the flowherd policy and
the baselines of `QUICK_BASELINES`; ``--full`` tries every literature baseline and every flowherd
policy (several times longer: CASSINI and Crux cost 7-10 runs without control each).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from flowherd.cli import app
from flowherd.cli.simulate_cmd import _console, _fmt, run_and_report

DEMO_PLACEMENTS = ("packed", "heuristic")
#: Every literature controller (`flowherd.control.LITERATURE_BASELINES`); ``--full`` tries them all.
FULL_BASELINES = ("adaptive", "cassini", "crux", "sincronia", "varys")
#: The quick demo's baselines: the two cheapest to simulate on the default. CPU time of one run on
#: the heuristic's plan, as a multiple of the run without control (2-core machine, 2026-12-01):
#: Varys 2.1x, adaptive routing 2.8x; CASSINI about 6x and Crux about 10x (wall times of one full
#: demo). On the default Crux's mean JCT is Varys' within 0.01%: `--full` tries it and the rest.
QUICK_BASELINES = ("adaptive", "varys")
FULL_POLICIES = ("flowherd", "threshold")  # best first on ties
QUICK_POLICIES = ("flowherd",)
DEMO_BASELINES = QUICK_BASELINES
DEMO_SWEEP = "demo"
DEMO_CANDIDATES_SWEEP = "demo-candidates"


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOutcome:
    """What `run_demo` did.

    Attributes:
        store_path: The DuckDB file.
        report_html: The report page.
        best_baseline, best_policy: Names of the chosen controllers (None if every candidate failed).
        ties: Per group ("baseline", "policy"), the other candidates whose result equals the
            chosen one's (jobs finished and mean JCT): the choice among them is only list order.
        candidates: Per candidate controller (on the heuristic plan), its run summary, or None if
            it failed.
        methods: The report's method labels with their mean JCT, seconds (None: no job finished).
        wall_s: Wall-clock time of the demo, seconds.
    """

    store_path: Path
    report_html: Path
    best_baseline: str | None
    best_policy: str | None
    ties: dict[str, tuple[str, ...]]
    candidates: dict[str, dict[str, Any] | None]
    methods: dict[str, float | None]
    wall_s: float


def _rank(summary: dict[str, Any]) -> tuple[float, float]:
    # most jobs finished first (a controller that stalls jobs must not win on the few that end),
    # then the lowest mean JCT
    jct = summary.get("mean_jct_s")
    return -float(summary.get("jobs_finished") or 0), math.inf if jct is None else float(jct)


def _same_rank(a: dict[str, Any], b: dict[str, Any]) -> bool:
    (fa, ja), (fb, jb) = _rank(a), _rank(b)
    # equal runs give equal floats; the tolerance only absorbs summation order
    return fa == fb and (ja == jb or math.isclose(ja, jb, rel_tol=1e-9))


def _ties(chosen: str, candidates: dict[str, dict[str, Any] | None],
          names: tuple[str, ...]) -> tuple[str, ...]:
    best = candidates[chosen]
    assert best is not None
    return tuple(n for n in names if n != chosen and candidates.get(n) is not None
                 and _same_rank(candidates[n], best))  # type: ignore[arg-type]


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


def _demo_run(source: dict[str, Any], plan: Any, progress: Any = None) -> tuple[Any, float]:
    """One simulation of the demo (here or in a worker process), with its CPU time, seconds (on a
    busy machine the wall time says little about what the run costs)."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping

    cpu0 = time.process_time()
    run = run_scenario(scenario_from_mapping(source), plan=plan, progress=progress)
    return run, time.process_time() - cpu0


def run_demo(out: Path, *, scenario: str | dict[str, Any] = "default",
             baselines: tuple[str, ...] = DEMO_BASELINES,
             policies: tuple[str, ...] = QUICK_POLICIES, workers: int | None = None) -> DemoOutcome:
    """The pipeline on one scenario: plan, simulate without and with control, store, report.

    1. Without control: the scenario under each of `DEMO_PLACEMENTS` (the last is the planner's
       heuristic, planned once here).
    2. On the heuristic's plan: each of `baselines` and each of `policies` that is registered in
       `flowherd.control.CONTROLLERS`. The best of each group (most jobs finished, then lowest
       mean JCT) is its representative; candidates equal to it are named as ties (the choice
       among equals is list order, not merit).
    3. Storage in ``OUT/results.duckdb``: the compared runs (no control per placement, best
       baseline, best flowherd policy) under sweep ``demo`` with their ``role``; the other
       candidates under ``demo-candidates``. The report (``OUT/report``) draws sweep ``demo``.

    Progress: a bar on a terminal; elsewhere one line per finished run and one a minute between.

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
    from flowherd.cli.progress import Heartbeat, is_terminal
    from flowherd.control import CONTROLLERS
    from flowherd.errors import ConfigError
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.planning.plan import make_plan

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
    beat = None if is_terminal(con) else Heartbeat("demo")
    planner = DEMO_PLACEMENTS[-1]
    plain = {m: {**base, "placement": {"method": m}} for m in DEMO_PLACEMENTS}
    first = scenario_from_mapping(plain[planner])
    total = len(DEMO_PLACEMENTS) + len(baselines) + len(available)
    con.print(f"[bold]demo[/]: scenario {first.name!r}, {len(first.jobs)} jobs on {first.fabric.num_gpus} "
              f"GPUs, {first.horizon_s / 60:g} min horizon; {total} simulations: {len(DEMO_PLACEMENTS)} "
              f"placements without control, then on the {planner} plan {len(baselines)} literature "
              f"baselines ({', '.join(baselines)}) and {len(available)} flowherd "
              f"polic{'y' if len(available) == 1 else 'ies'} ({', '.join(available) or 'none registered'}); "
              f"{workers} at a time", highlight=False)
    if skipped:
        con.print(f"  (flowherd policies not registered yet, skipped: {', '.join(skipped)})")
    t0 = time.perf_counter()
    plan = make_plan(first.fabric, first.jobs, method=planner, seed=first.seed)
    out.mkdir(parents=True, exist_ok=True)
    plan_path = out / f"plan-{planner}.json"
    plan.to_json(plan_path)
    con.print(f"[bold]demo[/]: planned {len(plan.jobs)} jobs with the {planner} placer in "
              f"{time.perf_counter() - t0:.1f} s -> {plan_path}", highlight=False)

    # (label, scenario source, with the plan, group, controller): no control per placement, then the
    # controllers on the heuristic's plan
    todo = [(f"{m} + no control", plain[m], m == planner, "none", m) for m in DEMO_PLACEMENTS]
    todo += [(f"{planner} + {name}", {**plain[planner], "controller": {"name": name}}, True, group, name)
             for group, name in [("baseline", c) for c in baselines] + [("policy", c) for c in available]]
    runs = _run_all(todo, plan, store, con, beat, workers, first.horizon_s)
    return _conclude(out, store, con, todo, runs, planner, baselines, available, wall0)


def _run_all(todo: list[tuple[str, dict[str, Any], bool, str, str]], plan: Any, store: Path, con: Any,
             beat: Any, workers: int, horizon_s: float) -> dict[str, Any]:
    """Simulate every item of `todo`, storing each as it ends; label -> result (or the exception)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.experiments.sweep import store_run_result
    from flowherd.report.data import ROLE_PARAM

    total = len(todo)
    runs: dict[str, Any] = {}
    cpu: dict[str, float] = {}
    meta = {label: (source, group) for label, source, _, group, _ in todo}
    with Progress(TextColumn("[bold]demo[/] {task.description}"), BarColumn(),
                  TextColumn("{task.fields[what]}"), TimeElapsedColumn(), console=con,
                  disable=beat is not None) as bar:
        overall = bar.add_task("pipeline", total=total, what=f"0/{total} simulations")
        current = bar.add_task("", total=1.0, what="", visible=workers <= 1)
        done = 0

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
            if beat is not None:
                beat.last_s = beat.clock()  # this line is the news; the next heartbeat a minute on
            if isinstance(run, BaseException):
                from rich.markup import escape

                # the error's text is data: escaped, never read as markup
                con.print(f"  \\[{done}/{total}] {escape(label):<34} [red]failed[/]: "
                          f"{escape(f'{type(run).__name__}: {run}')}", highlight=False)
                return
            s = run.summary
            con.print(f"  [{done}/{total}] {label:<34} mean JCT {_fmt(s['mean_jct_s']):>8}, "
                      f"{s['jobs_finished']}/{s['jobs_total']} jobs finished  ({run.wall_s:.0f} s wall, "
                      f"{cpu[label]:.0f} s CPU)", highlight=False)

        if workers <= 1:
            for label, source, with_plan, group, _ in todo:
                bar.reset(current, total=horizon_s, description=label, what="  0% of the horizon")

                def tick(t: float, label: str = label) -> None:
                    frac = min(t, horizon_s) / horizon_s
                    bar.update(current, completed=min(t, horizon_s),
                               what=f"{100 * frac:3.0f}% of the horizon")
                    if beat is not None:
                        beat.tick(f"{done}/{total} simulations done; {label}: {100 * frac:.0f}% "
                                  "of the horizon")

                try:
                    runs[label], cpu[label] = _demo_run(source, plan if with_plan else None, tick)
                except Exception as err:
                    if group == "none":  # no control must run; a failing controller must not end the demo
                        raise
                    runs[label] = err
                finished(label, runs[label])
        else:
            import multiprocessing
            from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

            # spawn: no fork of a process that holds the progress bar's thread
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = {pool.submit(_demo_run, source, plan if with_plan else None): label
                           for label, source, with_plan, _, _ in todo}
                pending = set(futures)
                while pending:
                    # a timeout so that a heartbeat goes out while long runs are under way
                    ended, pending = wait(pending, timeout=5.0, return_when=FIRST_COMPLETED)
                    for fut in ended:
                        label = futures[fut]
                        err = fut.exception()
                        if err is not None and meta[label][1] == "none":
                            raise err
                        if err is None:
                            runs[label], cpu[label] = fut.result()
                        else:
                            runs[label] = err
                        finished(label, runs[label])
                    if beat is not None and pending:
                        beat.tick(f"{done}/{total} simulations done, {min(workers, len(pending))} running")
        bar.update(current, visible=False)
    con.print(f"[bold]demo[/]: {len(cpu)} simulations took {sum(cpu.values()) / 60:.1f} CPU-minutes",
              highlight=False)
    return runs


def _conclude(out: Path, store: Path, con: Any, todo: list[tuple[str, dict[str, Any], bool, str, str]],
              runs: dict[str, Any], planner: str, baselines: tuple[str, ...], policies: tuple[str, ...],
              wall0: float) -> DemoOutcome:
    """Choose the best of each group, store the compared runs, write and summarize the report."""
    from flowherd.experiments.sweep import store_run_result
    from flowherd.report import write_report
    from flowherd.report.data import ROLE_PARAM, TIED_PARAM, controller_label, load_report_data

    best: dict[str, tuple[str, Any, dict[str, Any]] | None] = {"baseline": None, "policy": None}
    candidates: dict[str, dict[str, Any] | None] = {}
    uncontrolled: dict[str, dict[str, Any]] = {}
    # in the listed order, whatever order they finished in: among equals the first listed is kept
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
    names = {"baseline": baselines, "policy": policies}
    ties = {g: (_ties(b[0], candidates, names[g]) if b else ()) for g, b in best.items()}

    # the winners move from the candidates to the compared runs (same run id: the row is replaced)
    roles = {"baseline": "best baseline", "policy": "flowherd"}
    for group, chosen in best.items():
        if chosen is not None:
            params: dict[str, Any] = {ROLE_PARAM: roles[group]}
            if ties[group]:
                params[TIED_PARAM] = list(ties[group])
            store_run_result(store, chosen[2], chosen[1], sweep=DEMO_SWEEP, params=params)
    _print_candidates(con, candidates, baselines, policies,
                      {g: (b[0] if b else None) for g, b in best.items()}, ties)

    con.print("[bold]demo[/]: writing the report ...")
    data = load_report_data(store, sweeps=[DEMO_SWEEP])
    files = write_report(store, sweeps=[DEMO_SWEEP])
    methods: dict[str, float | None] = {}
    for m in data.methods:
        xs = [r["mean_jct_s"] for r in data.runs if r["method"] == m and r["mean_jct_s"] is not None]
        methods[m] = sum(xs) / len(xs) if xs else None
    _print_methods(con, data)
    none_jct = uncontrolled[planner]["mean_jct_s"]
    packed_jct = uncontrolled[DEMO_PLACEMENTS[0]]["mean_jct_s"]
    if none_jct is not None and packed_jct:
        gain = 1 - none_jct / packed_jct
        con.print(f"  the {planner} plan without control: mean JCT {100 * abs(gain):.1f}% "
                  f"{'shorter' if gain >= 0 else 'longer'} than {DEMO_PLACEMENTS[0]} placement",
                  highlight=False)
    for group in ("baseline", "policy"):
        chosen = best[group]
        if chosen is None or none_jct is None or chosen[1].summary["mean_jct_s"] is None:
            continue
        gain = 1 - chosen[1].summary["mean_jct_s"] / none_jct
        con.print(f"  {controller_label(chosen[0], roles[group], ties[group])} on the {planner} plan: "
                  "mean JCT "
                  f"{100 * abs(gain):.1f}% {'shorter' if gain >= 0 else 'longer'} than without control",
                  highlight=False)
    wall_s = time.perf_counter() - wall0
    con.print(f"[bold]demo[/] done in {wall_s / 60:.1f} min; results in {store}; report: {files.html}",
              highlight=False)
    return DemoOutcome(store_path=store, report_html=files.html,
                       best_baseline=best["baseline"][0] if best["baseline"] else None,
                       best_policy=best["policy"][0] if best["policy"] else None, ties=ties,
                       candidates=candidates, methods=methods, wall_s=wall_s)


def _print_candidates(con: Any, candidates: dict[str, dict[str, Any] | None], baselines: tuple[str, ...],
                      policies: tuple[str, ...], chosen: dict[str, str | None],
                      ties: dict[str, tuple[str, ...]]) -> None:
    from rich.table import Table

    table = Table(title="controllers on the heuristic plan (best: most jobs finished, then lowest mean JCT; "
                        "equal results are ties)")
    for col in ("controller", "group", "jobs finished", "mean JCT", "p99 JCT", "mean slowdown", ""):
        table.add_column(col, justify="left" if col in ("controller", "group", "") else "right")
    for group, names in (("baseline", baselines), ("policy", policies)):
        for name in names:
            s = candidates.get(name)
            tied = (chosen[group] == name and ties[group]) or name in ties[group]
            mark = "tied best" if tied else ("best" if chosen[group] == name else "")
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


@app.command("demo")
def demo(
    out: Path = typer.Option(Path("flowherd-demo"), "--out", help="directory for the results and report"),
    full: bool = typer.Option(False, "--full", help="try every literature baseline and every flowherd "
                              "policy (several times the quick demo's time)"),
    as_json: bool = typer.Option(False, "--json", help="only simulate the default; print one JSON object"),
    workers: int = typer.Option(None, "--workers", help="simulations at once, one process each "
                                "(default: one per CPU, at most 4)"),
) -> None:
    """The whole pipeline on the embedded default: plan, simulate without and with control, store, report.

    Plans the jobs (packed placer, flowherd's heuristic), simulates both without control, then the
    heuristic's plan under literature baselines (adaptive routing, Varys; --full: all five) and the
    flowherd policy (--full: every flowherd policy), stores the runs, reports no control, the best
    baseline and the best flowherd policy, and prints where the report is (--json: one run without
    control, as simulate --json).
    """
    if as_json:
        run_and_report("default", as_json=True, out=None, seed=None)
        return
    if full:
        run_demo(out, baselines=FULL_BASELINES, policies=FULL_POLICIES, workers=workers)
    else:
        run_demo(out, workers=workers)
