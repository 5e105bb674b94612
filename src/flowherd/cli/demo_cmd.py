"""`flowherd demo`: the whole pipeline on the embedded default, over several seeds, in a few minutes.

The simulator's packed placer against the planner's heuristic, both without control; then, on
the heuristic's plan, literature baselines and flowherd's policies under one grant of levers, of
which the best of each group is reported beside no control; every method on the same seeds, and
the conclusions as paired differences with their 95% confidence intervals (ties named). The
quick demo (the default) tries the flowherd policy and the baselines of `QUICK_BASELINES`;
``--full`` tries every literature baseline and every flowherd policy (several times longer:
CASSINI and Crux cost 7-10 runs without control each). Choosing the best of each group and the
tables printed about the candidates are `flowherd.cli.demo_summary`'s.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from flowherd.cli import app
from flowherd.cli.demo_summary import (
    NO_EFFECT,
    SAME_AS_NONE,
    _group_rank,
    _group_ties,
    _jcts,
    _print_candidates,
    _print_cost,
    _print_methods,
    _print_no_effect,
)
from flowherd.cli.simulate_cmd import _console, _fmt, run_and_report
from flowherd.sanitize import shown

__all__ = [
    "DEMO_BASELINES", "DEMO_CANDIDATES_SWEEP", "DEMO_PLACEMENTS", "DEMO_SEEDS", "DEMO_SWEEP",
    "FULL_BASELINES", "FULL_POLICIES", "NO_EFFECT", "QUICK_BASELINES", "QUICK_POLICIES",
    "SAME_AS_NONE", "DemoOutcome", "demo", "run_demo",
]

DEMO_PLACEMENTS = ("packed", "heuristic")
#: Every literature controller (`flowherd.control.LITERATURE_BASELINES`); ``--full`` tries them all.
FULL_BASELINES = ("adaptive", "cassini", "crux", "sincronia", "varys")
#: The quick demo's baselines: the two whose levers the `buffer` grant holds (paths: adaptive
#: routing; delay: CASSINI's time shifts). Under `buffer` the priority and rate levers of Crux,
#: Sincronia and Varys are refused, so those runs equal no control; `--full` tries them anyway.
#: CPU time of one run on the default's heuristic plan (seed 7, 2-core machine, 2026-12-01), as
#: a multiple of the run without control (7.6 s): CASSINI 2.1x, adaptive routing 3.8x, the
#: flowherd policy 5.1x.
QUICK_BASELINES = ("adaptive", "cassini")
FULL_POLICIES = ("flowherd", "threshold")  # best first on ties
QUICK_POLICIES = ("flowherd",)
DEMO_BASELINES = QUICK_BASELINES
#: Seeds of the demo (the scenario's own and the next ones): every method runs on each, and the
#: headline is the paired difference over them with its 95% confidence interval.
DEMO_SEEDS = 5
#: The grant of levers every controller of the demo runs under (`controller.levers`); None: the
#: scenario's own.
DEMO_GRANT: str | None = "buffer"
DEMO_SWEEP = "demo"
DEMO_CANDIDATES_SWEEP = "demo-candidates"


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOutcome:
    """What `run_demo` did.

    Attributes:
        store_path: The DuckDB file.
        report_html: The report page.
        best_baseline, best_policy: Names of the chosen controllers (None if every candidate failed).
        ties: Per group ("baseline", "policy"), the other candidates the seeds cannot tell from the
            chosen one (same jobs finished, paired difference of mean JCT a tie): the choice among
            them is only list order.
        candidates: Per candidate controller (on the heuristic plan), seed -> its run summary, or
            None if it failed on some seed.
        methods: The report's method labels with their mean JCT over the seeds, seconds (None: no
            job finished).
        seeds: The seeds every method ran on.
        headline: What the demo concludes: comparison -> paired difference of mean JCT over the
            seeds (`flowherd.experiments.stats.Paired`, seconds).
        wall_s: Wall-clock time of the demo, seconds.
    """

    store_path: Path
    report_html: Path
    best_baseline: str | None
    best_policy: str | None
    ties: dict[str, tuple[str, ...]]
    candidates: dict[str, dict[int, dict[str, Any]] | None]
    methods: dict[str, float | None]
    seeds: tuple[int, ...]
    headline: dict[str, Any]
    wall_s: float


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


def _ignore_sigint() -> None:
    """In a worker of the demo's pool: a terminal's Ctrl-C goes to the whole process group; the
    driver alone decides (it stops the workers)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _seed_label(label: str, seed: int) -> str:
    return f"{label} (seed {seed})"


def run_demo(out: Path, *, scenario: str | dict[str, Any] = "default",
             baselines: tuple[str, ...] = DEMO_BASELINES,
             policies: tuple[str, ...] = QUICK_POLICIES, seeds: int | tuple[int, ...] = DEMO_SEEDS,
             workers: int | None = None, resume: bool = False) -> DemoOutcome:
    """The pipeline on one scenario over several seeds: plan, simulate without and with control,
    store, report, and the paired differences with their confidence intervals.

    For each seed (the scenario's seed, then the next ones; each seed draws other arrivals,
    background and trace samples, and is planned anew):

    1. Without control: the scenario under each of `DEMO_PLACEMENTS` (the last is the planner's
       heuristic, planned once per seed here).
    2. On the heuristic's plan: each of `baselines` and each of `policies` that is registered in
       `flowherd.control.CONTROLLERS`, every controller under the same grant of levers
       (`DEMO_GRANT`).

    The best of each group over the seeds (most jobs finished, then lowest mean of the mean JCT)
    is its representative; candidates whose paired difference from it is a tie (its 95% interval
    holds 0) are named as ties. Storage in ``OUT/results.duckdb``: the compared runs (no control per
    placement, best baseline, best flowherd policy, every seed) under sweep ``demo`` with their
    ``role``; the other candidates under ``demo-candidates``. The report (``OUT/report``) draws
    sweep ``demo`` and heads with the paired differences.

    Progress: a bar on a terminal; elsewhere one line per finished run and one a minute between.

    Args:
        out: Directory for the results and the report (an earlier demo's results there are replaced).
        scenario: An embedded scenario name, a YAML path, or a scenario mapping.
        baselines: Literature controllers to try.
        policies: flowherd policies to try (unregistered names are skipped).
        seeds: How many seeds (from the scenario's own), or the seeds themselves.
        workers: Simulations run at once, each in its own process (the runs are independent and
            seeded, so the results do not depend on it); None: one per CPU, at most 4.
        resume: Keep the runs an interrupted demo stored in `out` and simulate only the others
            (the same scenario, seeds and methods give the same run ids).

    Raises:
        ConfigError: A bad scenario, seeds or workers, or `out` holding results of something else
            than a demo.
    """
    from flowherd.cli.progress import Heartbeat, is_terminal
    from flowherd.control import CONTROLLERS
    from flowherd.errors import ConfigError
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.experiments.store import resolve_store_path
    from flowherd.planning.plan import make_plan

    wall0 = time.perf_counter()
    if workers is None:
        workers = min(4, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r} (--workers)")
    base = dict(scenario) if isinstance(scenario, dict) else read_scenario_mapping(scenario)
    seed_list = _seeds(seeds, base)
    unknown = [c for c in baselines if c not in CONTROLLERS]
    if unknown:
        raise ConfigError(f"demo baselines {unknown} are not controllers; expected some of "
                          f"{', '.join(CONTROLLERS)} (baselines)")
    available = tuple(c for c in policies if c in CONTROLLERS)
    skipped = [c for c in policies if c not in CONTROLLERS]
    store = resolve_store_path(out) if resume else _fresh_demo_store(out)
    con = _console()
    beat = None if is_terminal(con) else Heartbeat("demo")
    planner = DEMO_PLACEMENTS[-1]
    base_of = {(m, s): {**base, "seed": s, "placement": {"method": m}}
             for m in DEMO_PLACEMENTS for s in seed_list}
    first = scenario_from_mapping(base_of[planner, seed_list[0]])
    per_seed = len(DEMO_PLACEMENTS) + len(baselines) + len(available)
    con.print(f"[bold]demo[/]: scenario {escape(shown(repr(first.name)))}, {len(first.jobs)} jobs on "
              f"{first.fabric.num_gpus} "
              f"GPUs, {first.horizon_s / 60:g} min horizon, {len(seed_list)} seeds "
              f"({', '.join(map(str, seed_list))}); {per_seed * len(seed_list)} simulations: per seed "
              f"{len(DEMO_PLACEMENTS)} placements without control, then on the {planner} plan "
              f"{len(baselines)} literature baselines ({', '.join(baselines)}) and {len(available)} flowherd "
              f"polic{'y' if len(available) == 1 else 'ies'} ({', '.join(available) or 'none registered'}) "
              f"under the grant {_grant_name()!r}; {workers} at a time", highlight=False)
    if skipped:
        con.print(f"  (flowherd policies not registered yet, skipped: {', '.join(skipped)})")
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    plans: dict[int, Any] = {}
    for s in seed_list:
        sc = first if s == seed_list[0] else scenario_from_mapping(base_of[planner, s])
        plans[s] = make_plan(sc.fabric, sc.jobs, method=planner, seed=sc.seed,
                             max_utilization=sc.max_utilization, background=sc.background,
                             routing=sc.routing, pace=sc.pace)  # what `flowherd plan` gives it
        plans[s].to_json(out / f"plan-{planner}-seed{s}.json")
    con.print(f"[bold]demo[/]: planned the jobs of {len(seed_list)} seeds with the {planner} placer in "
              f"{time.perf_counter() - t0:.1f} s -> {escape(shown(out / f'plan-{planner}-seed*.json'))}",
              highlight=False)

    # (label, scenario source, plan or None, group, controller, seed): no control per placement,
    # then the controllers on the heuristic's plan
    todo: list[_Todo] = []
    for s in seed_list:
        todo += [_Todo(_seed_label(f"{m} + no control", s), base_of[m, s], plans[s] if m == planner else None,
                       "none", m, s) for m in DEMO_PLACEMENTS]
        todo += [_Todo(_seed_label(f"{planner} + {name}", s),
                       {**base_of[planner, s], "controller": _controller(name)}, plans[s], group, name, s)
                 for group, name in [("baseline", c) for c in baselines] + [("policy", c) for c in available]]
    stored = _resumed(todo, store) if resume else {}
    if stored:
        con.print(f"[bold]demo[/]: {len(stored)} of {len(todo)} simulations are stored already (--resume)",
                  highlight=False)
    try:
        runs = {**stored, **_run_all([t for t in todo if t.label not in stored], store, con, beat, workers,
                                     first.horizon_s)}
    except BaseException as err:
        from flowherd.errors import Interrupted, caused_by_interrupt

        if not caused_by_interrupt(err):
            raise
        from flowherd.cli.interrupt import last_signal

        kept = _stored_runs(store)
        raise Interrupted(f"demo interrupted: {kept} of {len(todo)} simulations finished and are stored in "
                          f"{shown(store)} (flowherd report {shown(store)} draws them; flowherd demo --out "
                          f"{shown(out)} --resume runs the rest)", signum=last_signal()) from None
    return _conclude(out, store, con, todo, runs, planner, baselines, available, seed_list, wall0)


@dataclass(frozen=True, slots=True)
class _Stored:
    """A run an earlier, interrupted demo stored: its summary, as a finished run has one."""

    run_id: str
    summary: dict[str, Any]
    wall_s: float = 0.0


def _run_id(source: dict[str, Any]) -> str:
    """The id `store_run_result` stores a run of scenario `source` under."""
    from flowherd.experiments.runs import Point, Run, canonical_hash

    return Run(point=Point(params={}, scenario=source, hash=canonical_hash(source)),
               seed=int(source.get("seed", 0))).run_id


def _resumed(todo: list[_Todo], store: Path) -> dict[str, Any]:
    """Label -> `_Stored` for the items of `todo` that `store` holds as ok."""
    from flowherd.experiments.store import ResultStore

    if not store.is_file():
        return {}
    with ResultStore(store, read_only=True) as st:
        done = st.stored_summaries()
    ids = {t.label: _run_id(t.source) for t in todo}
    return {label: _Stored(run_id=rid, summary=done[rid]) for label, rid in ids.items() if rid in done}


def _stored_runs(store: Path) -> int:
    """Runs in the demo's store (0 if it cannot be read)."""
    from flowherd.errors import FlowherdError
    from flowherd.experiments.store import ResultStore

    if not store.is_file():
        return 0
    try:
        with ResultStore(store, read_only=True) as st:
            return len(st.run_status())
    except FlowherdError:
        return 0


def _seeds(seeds: int | tuple[int, ...], base: dict[str, Any]) -> tuple[int, ...]:
    from flowherd.errors import ConfigError

    if isinstance(seeds, bool):
        raise ConfigError(f"seeds must be a count >= 1 or a list of seeds, got {seeds!r} (--seeds)")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ConfigError(f"seeds must be >= 1, got {seeds} (--seeds)")
        first = int(base.get("seed", 0) or 0)
        return tuple(range(first, first + seeds))
    out = tuple(seeds)
    if not out or len(set(out)) != len(out) or not all(isinstance(s, int) and s >= 0 for s in out):
        raise ConfigError(f"seeds must be distinct integers >= 0, got {list(out)!r} (--seeds)")
    return out


def _grant_name() -> str:
    return DEMO_GRANT or "the scenario's"


def _controller(name: str) -> dict[str, Any]:
    """The controller section of a demo run: the controller under the demo's grant."""
    return {"name": name, **({"levers": DEMO_GRANT} if DEMO_GRANT else {})}


@dataclass(frozen=True, slots=True)
class _Todo:
    label: str
    source: dict[str, Any]
    plan: Any
    group: str  # "none", "baseline" or "policy"
    name: str  # the placement (group "none") or the controller
    seed: int


def _run_all(todo: list[_Todo], store: Path, con: Any, beat: Any, workers: int,
             horizon_s: float) -> dict[str, Any]:
    """Simulate every item of `todo`, storing each as it ends; label -> result (or the exception)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flowherd.experiments.sweep import store_run_result
    from flowherd.report.data import ROLE_PARAM

    total = len(todo)
    runs: dict[str, Any] = {}
    cpu: dict[str, float] = {}
    meta = {t.label: t for t in todo}
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
            item = meta[label]
            if item.group == "none":
                store_run_result(store, item.source, run, sweep=DEMO_SWEEP, params={ROLE_PARAM: "no control"})
            elif not isinstance(run, BaseException):
                store_run_result(store, item.source, run, sweep=DEMO_CANDIDATES_SWEEP)
            if beat is not None:
                beat.last_s = beat.clock()  # this line is the news; the next heartbeat a minute on
            if isinstance(run, BaseException):
                # the error's text is data: escaped, never read as markup
                con.print(f"  \\[{done}/{total}] {escape(shown(label)):<44} [red]failed[/]: "
                          f"{escape(shown(f'{type(run).__name__}: {run}'))}", highlight=False)
                return
            s = run.summary
            con.print(f"  [{done}/{total}] {label:<44} mean JCT {_fmt(s['mean_jct_s']):>8}, "
                      f"{s['jobs_finished']}/{s['jobs_total']} jobs finished  ({run.wall_s:.0f} s wall, "
                      f"{cpu[label]:.0f} s CPU)", highlight=False)

        if workers <= 1:
            for item in todo:
                bar.reset(current, total=horizon_s, description=item.label, what="  0% of the horizon")

                def tick(t: float, label: str = item.label) -> None:
                    frac = min(t, horizon_s) / horizon_s
                    bar.update(current, completed=min(t, horizon_s),
                               what=f"{100 * frac:3.0f}% of the horizon")
                    if beat is not None:
                        beat.tick(f"{done}/{total} simulations done; {label}: {100 * frac:.0f}% "
                                  "of the horizon")

                try:
                    runs[item.label], cpu[item.label] = _demo_run(item.source, item.plan, tick)
                except Exception as err:
                    from flowherd.errors import caused_by_interrupt

                    # no control must run; a failing controller must not end it; a Ctrl-C ends all
                    if item.group == "none" or caused_by_interrupt(err):
                        raise
                    runs[item.label] = err
                finished(item.label, runs[item.label])
        else:
            import multiprocessing
            from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

            from flowherd.cli.interrupt import stop_pool

            # spawn: no fork of a process that holds the progress bar's thread
            ctx = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_ignore_sigint)
            try:
                futures = {pool.submit(_demo_run, item.source, item.plan): item.label for item in todo}
                pending = set(futures)
                while pending:
                    # a timeout so that a heartbeat goes out while long runs are under way
                    ended, pending = wait(pending, timeout=5.0, return_when=FIRST_COMPLETED)
                    for fut in ended:
                        label = futures[fut]
                        err = fut.exception()
                        if err is not None and meta[label].group == "none":
                            raise err
                        if err is None:
                            runs[label], cpu[label] = fut.result()
                        else:
                            runs[label] = err
                        finished(label, runs[label])
                    if beat is not None and pending:
                        beat.tick(f"{done}/{total} simulations done, {min(workers, len(pending))} running")
            except BaseException:
                stop_pool(pool)  # a Ctrl-C: the finished runs are stored; the running ones are lost
                raise
            pool.shutdown(wait=True)
        bar.update(current, visible=False)
    con.print(f"[bold]demo[/]: {len(cpu)} simulations took {sum(cpu.values()) / 60:.1f} CPU-minutes",
              highlight=False)
    return runs


def _conclude(out: Path, store: Path, con: Any, todo: list[_Todo], runs: dict[str, Any], planner: str,
              baselines: tuple[str, ...], policies: tuple[str, ...], seed_list: tuple[int, ...],
              wall0: float) -> DemoOutcome:
    """Choose the best of each group, store the compared runs, write and summarize the report."""
    from flowherd.experiments.stats import paired
    from flowherd.experiments.sweep import store_run_result
    from flowherd.report import write_report
    from flowherd.report.data import ROLE_PARAM, TIED_PARAM, load_report_data

    per: dict[str, dict[int, Any]] = {}
    uncontrolled: dict[str, dict[int, dict[str, Any]]] = {}
    # in the listed order, whatever order they finished in: among equals the first listed is kept
    for item in todo:
        run = runs[item.label]
        key = item.name if item.group != "none" else f"none:{item.name}"
        per.setdefault(key, {})[item.seed] = (item, run)
        if item.group == "none":
            uncontrolled.setdefault(item.name, {})[item.seed] = run.summary
    candidates: dict[str, dict[int, dict[str, Any]] | None] = {}
    groups = {"baseline": baselines, "policy": policies}
    best: dict[str, str | None] = {"baseline": None, "policy": None}
    for group, names in groups.items():
        for name in names:
            got = per[name]
            if any(isinstance(r, BaseException) for _, r in got.values()):
                candidates[name] = None  # failed on a seed: not comparable over the seeds
                continue
            candidates[name] = {s: r.summary for s, (_, r) in got.items()}
            cur = best[group]
            if cur is None or _group_rank(candidates[name]) < _group_rank(candidates[cur]):  # type: ignore[arg-type]
                best[group] = name
    ties = {g: (_group_ties(b, candidates, groups[g]) if b else ()) for g, b in best.items()}

    # the winners move from the candidates to the compared runs (same run id: the row is replaced)
    roles = {"baseline": "best baseline", "policy": "flowherd"}
    for group, chosen in best.items():
        if chosen is None:
            continue
        params: dict[str, Any] = {ROLE_PARAM: roles[group]}
        if ties[group]:
            params[TIED_PARAM] = list(ties[group])
        for item, run in per[chosen].values():
            if isinstance(run, _Stored):  # stored by an interrupted demo: moved, not written again
                from flowherd.experiments.store import ResultStore

                with ResultStore(store) as st:
                    st.relabel_run(run.run_id, sweep=DEMO_SWEEP, params=params)
            else:
                store_run_result(store, item.source, run, sweep=DEMO_SWEEP, params=params)
    _print_candidates(con, candidates, baselines, policies, best, ties)

    con.print("[bold]demo[/]: writing the report ...")
    data = load_report_data(store, sweeps=[DEMO_SWEEP])
    files = write_report(store, sweeps=[DEMO_SWEEP])
    methods: dict[str, float | None] = {}
    for m in data.methods:
        xs = [r["mean_jct_s"] for r in data.runs if r["method"] == m and r["mean_jct_s"] is not None]
        methods[m] = sum(xs) / len(xs) if xs else None
    _print_methods(con, data)

    none_jct = _jcts(uncontrolled[planner])
    lines: dict[str, Any] = {}
    packed = _jcts(uncontrolled[DEMO_PLACEMENTS[0]])
    if none_jct and packed:
        lines[f"{planner} plan vs {DEMO_PLACEMENTS[0]} placement, no control"] = paired(none_jct, packed)
    for group in ("baseline", "policy"):
        chosen = best[group]
        if chosen is not None and none_jct and _jcts(candidates[chosen]):  # type: ignore[arg-type]
            lines[f"{roles[group]} ({chosen}) vs no control"] = paired(
                _jcts(candidates[chosen]), none_jct)  # type: ignore[arg-type]
    if best["baseline"] and best["policy"]:
        a, b = _jcts(candidates[best["policy"]]), _jcts(candidates[best["baseline"]])  # type: ignore[arg-type]
        if a and b:
            lines[f"flowherd ({best['policy']}) vs best baseline ({best['baseline']})"] = paired(a, b)
    con.print(f"[bold]demo[/]: paired differences of mean JCT over {len(seed_list)} seeds, controllers "
              f"under the grant {_grant_name()!r}:", highlight=False)
    for what, p in lines.items():
        con.print(f"  {what}: {p.phrase()}", highlight=False)
    _print_no_effect(con, candidates, uncontrolled[planner])
    _print_cost(con, {roles[g]: candidates[b] for g, b in best.items() if b}, uncontrolled[planner])
    wall_s = time.perf_counter() - wall0
    con.print(f"[bold]demo[/] done in {wall_s / 60:.1f} min; results in {escape(shown(store))}; report: "
              f"{escape(shown(files.html))}",
              highlight=False, soft_wrap=True)
    return DemoOutcome(store_path=store, report_html=files.html, best_baseline=best["baseline"],
                       best_policy=best["policy"], ties=ties, candidates=candidates, methods=methods,
                       seeds=seed_list, headline=lines, wall_s=wall_s)


@app.command("demo")
def demo(
    out: Path = typer.Option(Path("flowherd-demo"), "--out", help="directory for the results and report"),
    full: bool = typer.Option(False, "--full", help="try every literature baseline and every flowherd "
                              "policy (several times the quick demo's time)"),
    as_json: bool = typer.Option(False, "--json", help="only simulate the default; print one JSON object"),
    workers: int = typer.Option(None, "--workers", help="simulations at once, one process each "
                                "(default: one per CPU, at most 4)"),
    seeds: int = typer.Option(DEMO_SEEDS, "--seeds", help="seeds every method runs on (the scenario's "
                              "own and the next ones)"),
    max_memory: str = typer.Option(None, "--max-memory", help="memory each simulation may use, e.g. "
                                   "8GiB (default: what this machine leaves)"),
    resume: bool = typer.Option(False, "--resume", help="keep the runs an interrupted demo stored in "
                                "--out and simulate only the others"),
) -> None:
    """The whole pipeline on the embedded default: plan, simulate without and with control, store, report.

    Plans the jobs (packed placer, flowherd's heuristic), simulates both without control, then the
    heuristic's plan under literature baselines (adaptive routing and CASSINI; --full: also Crux,
    Sincronia and Varys) and the flowherd policy (--full: every flowherd policy), stores the runs,
    reports no control, the best baseline and the best flowherd policy, and prints where the report
    is (--json: one run without control, as simulate --json).
    """
    from flowherd.experiments.budget import set_limits

    set_limits(max_memory, None)
    if as_json:
        run_and_report("default", as_json=True, out=None, seed=None)
        return
    if full:
        run_demo(out, baselines=FULL_BASELINES, policies=FULL_POLICIES, seeds=seeds, workers=workers,
                 resume=resume)
    else:
        run_demo(out, seeds=seeds, workers=workers, resume=resume)
