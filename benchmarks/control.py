"""Online controllers side by side: every controller on light, medium and heavy contention.

Runs each controller (no control, the literature baselines, flowherd's policies, and trained RL
models given with --model) on the scenarios of benchmarks/scenarios/ over several seeds (each seed
another window of the Philly trace and other background traffic), and prints per scenario and
controller: mean and p99 JCT and mean iteration slowdown, each with its 95% confidence interval
over the seeds (Student t), the change of mean JCT against no control, jobs finished, and the
controller's mean decision time; and what a gain costs others: the background flows' mean and p99
flow completion time against no control on the same seed (the same background flows: the
background is drawn from the seed, not from the controller) and Jain's index of the tenants'
shares (1 / mean slowdown; `flowherd.experiments.metrics`), and after each table every tenant's
mean slowdown (`print_tenants`). Jobs still running at the horizon
count with their time so far (their JCT is censored at the horizon), so a controller cannot gain
by leaving jobs unfinished.

Every controller runs under one grant of levers (--grant, `flowherd.cluster.control_api.GRANTS`;
default ``buffer``: delays and paths only); decisions outside it are refused and counted
("refused"). --network sets the network model of every run (ideal, roce, tcp; default: the
scenario's, ``roce`` in every scenario of benchmarks/scenarios/: a GPU back-end fabric is lossless
RoCE; each run's JSON row names its model, and a row of an older file that says "scenario" ran
the ideal engine, those scenarios' network until 2026-12-02). The isolated bound
(`control_bounds.py`) is each job alone with every collective at the least time any routing over
shortest paths gives its bytes (an LP, HiGHS), its planned iterations at that pace from its submission,
averaged over the jobs: no controller beats it, and the table says so or names the runs that
did. "gap closed" is the paired per-seed share of the gap between no control and that bound that
a controller closes, printed only where the gap exceeds the seed spread. The queue-aware bound
keeps the cluster's FIFO queue for GPUs: no network controller does better, so "gap (queue)",
the share of the gap to it that a controller closes, is the part of the gap a controller can be
asked for. Each job's time alone on its default routes (its solo time, ECMP) is printed beside
them and is not a bound (a path choice beats its hash collisions). Each run's per-job
submit, start, finish, GPUs (their count and ids), iterations and solo iteration time are in the
JSON (``job_detail``; `control_ceiling.py` reads the ids to time each job alone on its GPUs),
and each table is followed by where the mean JCT goes (`breakdown`): the wait in the queue for
GPUs, the run at solo speed and the rest of the run (contention), per job. The solo iteration
time is measured alone on the job's GPUs (`flowherd.experiments.runner`): the scenario's
network model and routing and no background traffic, so contention counts the background's
share of the links and the network model's losses too.

    python benchmarks/control.py --reuse benchmarks/results/control_roce.json \
        --scenarios heavy --controllers none adaptive cassini crux sincronia varys mltcp \
        interleave flowherd --network roce          # the stored runs' tables, nothing re-run

Each row records its controller's ``policy_code`` (`policy_code`: a hash of the source of the
controller's module and of the `flowherd.control` modules it imports): --reuse takes a stored
run only under the same code, so a changed policy is re-run while the baselines it does not
import are reused (rows written before the codes are taken as they are; the simulator's own code
is not in the hash: a changed engine needs a new file).

--no-background runs the scenarios without their background traffic (the rows say
``background: off``; the isolated bound has none either way): what the background's share of the
links, which no delay or path takes from it, costs each controller.

With --model, the learning curve saved next to each model (MODEL_curve.csv, by `flowherd train`)
is printed too. Evaluation seeds default to 0..4: train models on other seeds
(`flowherd train ... --first-seed 8`) so that they are evaluated on arrivals they never saw.

    python benchmarks/control.py --grant buffer --network roce   # 3 scenarios x 5 seeds
    python benchmarks/control.py --json-out control.json
    python benchmarks/control.py --model heavy.zip --reuse control.json   # adds the model's runs
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import control_bounds as bounds  # noqa: E402  (beside this script)
import runpool  # noqa: E402
from control_service import COLUMNS as SERVICE_COLUMNS  # noqa: E402
from control_service import print_services, service_figures  # noqa: E402
from control_tables import (  # noqa: E402, F401  (tests and control_home read them here)
    breakdown,
    horizon_s,
    print_breakdown,
    print_curve,
    print_tenants,
    tenant_slowdowns,
)

#: Exit code of a benchmark some of whose runs ended without a result (the rest are kept).
EXIT_INCOMPLETE = 3

SCENARIOS = {lvl: HERE / "scenarios" / f"control_{lvl}.yaml" for lvl in ("light", "medium", "heavy")}
# the other families, by name (--scenarios takes them, or any YAML path): the mixed-period and
# contended-small families, and the LLM-era families of docs/llm-clusters.md (Acme-sized jobs)
FAMILIES = {"mixed": HERE / "scenarios" / "control_mixed_periods.yaml",
            "contended": HERE / "scenarios" / "contended_small.yaml",
            "kalos4": HERE / "scenarios" / "llm_kalos_4to1.yaml",
            "kalos8": HERE / "scenarios" / "llm_kalos_8to1.yaml",
            "rail": HERE / "scenarios" / "llm_kalos_rail.yaml",
            "seren": HERE / "scenarios" / "llm_seren_1to1.yaml",
            "inference": HERE / "scenarios" / "llm_inference.yaml",
            "lingjun15": HERE / "scenarios" / "llm_lingjun_15to1.yaml",
            "lingjun1": HERE / "scenarios" / "llm_lingjun_1to1.yaml"}


def scenario_path(name: str) -> Path:
    """The scenario file of a --scenarios entry: a level (`SCENARIOS`), a family (`FAMILIES`) or
    the path of a YAML file; anything else is one `ConfigError` line (an unknown name lists the
    known ones)."""
    from flowherd.errors import ConfigError, UnknownNameError

    known = SCENARIOS.get(name) or FAMILIES.get(name)
    if known is not None:
        return known
    if name.endswith((".yaml", ".yml")):
        if not Path(name).is_file():
            raise ConfigError(f"no scenario file {name!r} (--scenarios; expected a YAML file that exists)")
        return Path(name)
    raise UnknownNameError("scenario (--scenarios; a level, a family or a YAML file)", name,
                           [*SCENARIOS, *FAMILIES])
# (label, controller name, params): every registered controller, and one ablation of flowherd's
CONTROLLERS = [
    ("none", "none", {}),
    ("adaptive", "adaptive", {}),
    ("cassini", "cassini", {}),
    ("crux", "crux", {}),
    ("sincronia", "sincronia", {}),
    ("varys", "varys", {}),
    ("mltcp", "mltcp", {}),
    ("threshold", "threshold", {}),
    ("interleave", "interleave", {}),
    ("gate", "gate", {}),  # the per-iteration gate alone (delays only)
    ("gate/turns", "gate", {"deadlines": False}),  # ... its turn-taking rule alone
    ("gate/deadlines", "gate", {"turns": False}),  # ... its deadline order alone
    ("threshold/0", "threshold", {"theta": 0.0}),  # every collective with slack waits for the burst
    ("flowherd", "flowherd", {}),
    ("flowherd/gate", "flowherd", {"buffering": "gate"}),  # the per-iteration gate throughout
    ("flowherd/auto", "flowherd", {"buffering": "auto"}),  # the shift where periods agree, else the gate
    ("flowherd/shift", "flowherd", {"buffering": "shift"}),  # the one-time shift throughout
    ("flowherd/1-class", "flowherd", {"num_classes": 1}),
    ("flowherd/spray", "flowherd", {"spray": True}),  # packet spraying instead of choosing a path
    ("flowherd/util-paths", "flowherd", {"path_metric": "utilization"}),  # adaptive's path choice
    ("flowherd/yield", "flowherd", {"yield_fraction": 1.0}),  # delays that yield to less work left
    # ... for at most a quarter period, and only while the favoured job's bytes are in flight
    ("flowherd/drain-yield", "flowherd", {"yield_fraction": 0.25, "yield_burst": False}),
]
LITERATURE = ("adaptive", "cassini", "crux", "sincronia", "varys", "mltcp")
OURS = ("threshold", "interleave", "gate", "flowherd")
# Grants a controller's run is the same under (--reuse takes a run of any of them): decisions of
# delays and paths only are valid under every grant, and the grant changes nothing else in a run
# (`ControlHook`); flowherd uses classes only where granted, weights never.
_ALL = ("buffer", "weighted", "priority")
SAME_RUN = {**{lab: {g: _ALL for g in _ALL} for lab in ("none", "adaptive", "cassini", "threshold",
                                                         "interleave", "gate", "gate/turns",
                                                         "gate/deadlines")},
            "crux": {"buffer": ("buffer", "weighted"), "weighted": ("weighted", "buffer")},
            **{lab: {"buffer": ("buffer", "weighted"), "weighted": ("weighted", "buffer")}
               for lab in ("flowherd", "flowherd/gate", "flowherd/auto", "flowherd/shift", "flowherd/1-class",
                           "flowherd/spray", "flowherd/yield",
                          "flowherd/util-paths", "flowherd/drain-yield")},
            # MLTCP sets weights only, never a class: its jobs stay unmarked, at the background's
            # level, under `priority` as under `weighted` (`ControlHook`)
            "mltcp": {"weighted": ("weighted", "priority"), "priority": ("priority", "weighted")}}

# Controllers that under a grant are no control by construction: they decide nothing without
# their lever (Sincronia and Varys order coflows by classes, MLTCP by weights). Their run there
# is no control's run on the same seed, and is not repeated: the table lists them with no
# control's figures and "lever" in the refused column (tests/control/test_levers.py checks it on
# the two-job case). Crux acts under every grant: its paths need only the paths lever.
NO_OP = {"sincronia": ("buffer", "weighted"), "varys": ("buffer", "weighted"), "mltcp": ("buffer",)}


def scenario_network(path: Path) -> str | dict:
    """The ``network:`` a scenario file gives (a name or a mapping; omitted: ideal), as a row
    records it."""
    from flowherd.experiments.scenario import read_scenario_mapping

    return read_scenario_mapping(str(path)).get("network") or "ideal"


def network_arg(text: str | None) -> str | dict | None:
    """--network as a run records it: a model's name, or a ``network:`` mapping written inline in
    YAML (``{model: roce, default_queue: 7, lossless: [0, 1, 2, 3, 4, 5, 6, 7]}``)."""
    if text is None or not text.lstrip().startswith("{"):
        return text
    import yaml

    return yaml.safe_load(text)


def _row_network(row: dict) -> str | dict:
    # rows written before 2026-12-02 say "scenario" for the scenarios' own network, then ideal
    net = row.get("network", "scenario")
    return "ideal" if net == "scenario" else net


def no_op_rows(tasks: list[tuple], rows: list[dict]) -> list[dict]:
    """For each task of a controller that is no control under its grant (`NO_OP`), no control's
    row of the same scenario and seed from ``rows``, relabelled (``same_run_as``: "none")."""
    none_of = {(r["scenario"], r["seed"]): r for r in rows if r["controller"] == "none"}
    out = []
    for t in tasks:
        n = none_of.get((t[0], t[5]))
        if n is not None:
            out.append({**n, "controller": t[2], "grant": t[6], "same_run_as": "none", "refused": None})
    return out


def policy_code(name: str) -> str:
    """A fingerprint of the code a registered controller decides with: the SHA-256 (12 hex digits)
    of its module's source and of every `flowherd.control` module it imports, transitively (a
    model file: its bytes). A run is reused only under the same fingerprint (`reusable`), so a
    changed policy is re-run and the baselines it does not import are not."""
    import importlib.util

    from flowherd.control import CONTROLLERS

    if name.endswith(".zip"):
        return hashlib.sha256(Path(name).read_bytes()).hexdigest()[:12]
    factory = CONTROLLERS[name]
    mod = getattr(factory, "__module__", "flowherd.control")
    if mod == "flowherd.control":  # a factory of the package's __init__: the class it builds
        mod = type(factory()).__module__
    seen: dict[str, str] = {}
    todo = [mod]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        src = Path(importlib.util.find_spec(m).origin).read_text()
        seen[m] = src
        todo += [n.module for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)
                 and n.module and n.module.startswith("flowherd.control.")]
    h = hashlib.sha256()
    for m in sorted(seen):
        h.update(m.encode() + b"\0" + seen[m].encode() + b"\0")
    return h.hexdigest()[:12]


def reusable(rows: list[dict], network: str | dict, background: bool,
             codes: dict[str, str] | None = None, fidelity: str | None = None) -> dict[tuple, dict]:
    """The runs of an earlier --json-out that a benchmark on ``network`` (a model's name for every
    scenario, or {scenario level: its network}) with or without the background can take, by
    (scenario, controller, seed, grant): a row written before 2026-12-02 that says "scenario" ran
    ideal (`_row_network`); a run without the background is marked ``background: off``, one
    without the mark had it; a run at another fidelity than the scenario's (--fidelity) names
    it (``fidelity``) and is taken only at that fidelity. With ``codes`` ({label: `policy_code`}),
    a row whose ``policy_code`` differs from its label's is not taken (its policy changed since); a
    row without one (written before the fingerprints) is."""
    def wanted(r: dict) -> bool:
        net = network.get(r["scenario"]) if isinstance(network, dict) else network
        return net is not None and _row_network(r) == net

    def same_code(r: dict) -> bool:
        want = (codes or {}).get(r["controller"])
        return want is None or r.get("policy_code", want) == want
    return {(r["scenario"], r["controller"], r["seed"], r.get("grant", "buffer")): r for r in rows
            if wanted(r) and (r.get("background", "on") == "on") == background and same_code(r)
            and r.get("fidelity") == fidelity}


def task_scenario(task: tuple):
    """The scenario of a run of `run_one`: its file with the task's seed, controller, grant, network,
    background and fidelity."""
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping

    _level, path, _label, name, params, seed, grant, network, *rest = task
    background = rest[0] if rest else True
    fidelity = rest[1] if len(rest) > 1 else None  # --fidelity: None keeps the scenario's
    base = read_scenario_mapping(str(path))
    source = {**base, "seed": int(seed), "controller": {"name": name, "params": params, "levers": grant}}
    if network is not None:
        source["network"] = network
    if fidelity is not None:
        source["simulation"] = {**(base.get("simulation") or {}), "fidelity": fidelity}
    if not background:  # --no-background: the decomposition's runs (what the background costs)
        source["workload"] = {k: v for k, v in base["workload"].items() if k != "background"}
    return scenario_from_mapping(source)


def check_memory(tasks: list[tuple], workers: int) -> None:
    """Refuse, before any run, a benchmark whose ``workers`` runs at once would not fit: the largest
    run's estimate (`flowherd.experiments.cost.run_cost`, one per scenario and seed) times the runs
    at once, against the memory limit (`flowherd.experiments.budget`; --max-memory replaces it).
    Each run checks its own estimate again when it starts, against what is free then.

    Raises:
        ConfigError: One line naming the run of the largest estimate, the figure and the limit.
    """
    from flowherd.errors import ConfigError
    from flowherd.experiments import budget, cost
    from flowherd.units import format_size

    seen, most = set(), None
    for t in tasks:
        if (t[0], t[5]) in seen:
            continue
        seen.add((t[0], t[5]))
        c = cost.run_cost(task_scenario(t))
        if most is None or c.memory_bytes > most[0].memory_bytes:
            most = (c, t)
    if most is None:
        return
    at_once = min(max(workers, 1), len(tasks))
    limit = budget.memory_limit()
    if at_once * most[0].memory_bytes > limit.limit_bytes:
        raise ConfigError(f"{at_once} runs at once x about {format_size(most[0].memory_bytes)} each (the "
                          f"largest estimate: {run_name(most[1])}) would exceed the memory limit; "
                          f"{limit.source} (--workers, --max-memory)")


def run_one(task: tuple) -> dict:
    """One simulation: (scenario level, path, label, controller, params, seed) -> its figures."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping

    level, path, label, name, _params, seed, grant, network, *rest = task
    background = rest[0] if rest else True
    fidelity = rest[1] if len(rest) > 1 else None  # --fidelity: None keeps the scenario's
    base = read_scenario_mapping(str(path))
    t0, c0 = time.perf_counter(), time.process_time()
    run = run_scenario(task_scenario(task), solo=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    jct = run.cluster.censored_jct_s()
    finished = sum(r.finish_s is not None for r in run.cluster.jobs)
    c = run.cluster
    bg = run.summary["background"]
    alone = [j["iterations_planned"] * j["solo_iteration_s"] for j in run.jobs
             if j["solo_iteration_s"] is not None and j["iterations_planned"]]
    detail = [{"name": r.name, "submit_s": r.submit_s, "start_s": r.start_s, "finish_s": r.finish_s,
               "gpus": len(r.gpus), "gpu_ids": [int(g) for g in r.gpus],
               "iterations": int(r.iterations_planned),
               "solo_iteration_s": j["solo_iteration_s"]}
              for r, j in zip(c.jobs, run.jobs, strict=True)]
    return {"scenario": level, "controller": label, "seed": int(seed), "grant": grant,
            "policy_code": policy_code(name),
            "network": network if network is not None else (base.get("network") or "ideal"),
            **({} if background else {"background": "off"}),
            **({} if fidelity is None else {"fidelity": fidelity}),
            "isolated_jct_s": float(np.mean(alone)) if alone else math.nan,
            "queue_bound_jct_s": queue_bound_jct_s(detail, c.horizon_s, int(run.scenario.fabric.num_gpus)),
            "mean_wait_s": float(np.mean([min(d["start_s"] if d["start_s"] is not None else c.horizon_s,
                                              c.horizon_s) - d["submit_s"] for d in detail
                                          if d["submit_s"] < c.horizon_s])),
            "job_detail": detail,
            "refused": sum(i.refused for i in c.controller_issues),
            "mean_jct_s": float(jct.mean()) if jct.size else math.nan,
            "p99_jct_s": float(np.percentile(jct, 99)) if jct.size else math.nan,
            "mean_iteration_slowdown": float(run.summary.get("mean_iteration_slowdown") or math.nan),
            "jobs": int(jct.size), "finished": int(finished),
            "decision_us": 1e6 * c.decision_wall_s / c.num_decisions if c.num_decisions else 0.0,
            "decisions": int(c.num_decisions), "issues": len(c.controller_issues), "wall_s": wall,
            "cpu_s": cpu,
            "bg_mean_fct_s": bg["mean_fct_s"] if bg["mean_fct_s"] is not None else math.nan,
            "bg_p99_fct_s": bg["p99_fct_s"] if bg["p99_fct_s"] is not None else math.nan,
            "tenant_jain": run.summary["tenant_jain"] if run.summary["tenant_jain"] is not None else math.nan,
            "tenant_slowdown": {t["tenant"]: t["mean_slowdown"] for t in run.tenants
                                if t["mean_slowdown"] is not None},
            **service_figures(run)}


def queue_bound_jct_s(detail: list[dict], horizon_s: float, num_gpus: int) -> float:
    """Mean JCT (censored at the horizon, as the runs') if every job that ran took exactly its
    iterations times its solo iteration time, waiting for GPUs in the cluster's strict FIFO queue
    (`flowherd.control.bound.queue_bound_jct_s`). Jobs that never started in the run (no solo
    time) keep their censored JCT there (they count as waiting to the horizon), which makes the
    bound a little loose, never wrong by more than those jobs' waits."""
    from flowherd.control.bound import queue_bound_jct_s as fifo_mean_jct_s

    live = [d for d in detail if d["submit_s"] < horizon_s]
    ran = [{**d, "iteration_s": d["solo_iteration_s"]} for d in live
           if d["solo_iteration_s"] is not None and d["iterations"]]
    waited = [horizon_s - d["submit_s"] for d in live if d["solo_iteration_s"] is None or not d["iterations"]]
    if not live:
        return math.nan
    total = (fifo_mean_jct_s(ran, horizon_s, num_gpus) * len(ran) if ran else 0.0) + sum(waited)
    return total / len(live)


def ci95(x: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (Student t over the samples)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return float(x.mean()), math.nan
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def _paired_change(rs: list[dict], none_of: dict[int, dict], key: str) -> str:
    """Mean +- 95% CI over seeds of the per-seed change of `key` against no control, percent."""
    ch = [100 * (r[key] / none_of[r["seed"]][key] - 1) for r in rs
          if r["seed"] in none_of and math.isfinite(r.get(key, math.nan))
          and math.isfinite(none_of[r["seed"]].get(key, math.nan)) and none_of[r["seed"]][key] > 0]
    if not ch:
        return "n/a"
    m, h = ci95(np.array(ch))
    return f"{m:+.1f}%" if not math.isfinite(h) else f"{m:+.1f}+-{h:.1f}%"


def _pm(g: np.ndarray) -> str:
    """Mean +- 95% CI of per-seed percentages ("n/a" for none)."""
    if not len(g):
        return "n/a"
    m, h = ci95(np.asarray(g))
    return f"{m:+.1f}%" if not math.isfinite(h) else f"{m:+.1f}+-{h:.1f}%"


def run_name(task: tuple) -> str:
    """A run of `run_one` in words: ``rail, seed 4, flowherd``."""
    return f"{task[0]}, seed {task[5]}, {task[2]}"


def complete_seeds(rows: list[dict], labels: list[str], seeds) -> tuple[list[int], list[int]]:
    """The seeds of ``seeds`` where every label of ``labels`` has a row (the paired figures are
    over these), and the others."""
    have = {(r["controller"], r["seed"]) for r in rows}
    whole = [sd for sd in seeds if all((lab, sd) in have for lab in labels)]
    return whole, [sd for sd in seeds if sd not in whole]


def incomplete_note(level: str, partial: list[int], rows: list[dict], labels: list[str],
                    failed: dict[tuple, str]) -> str:
    """One line: the seeds left out of a scenario's table and why (each missing run, what ended it
    where it was run and ended here)."""
    have = {(r["controller"], r["seed"]) for r in rows if r["scenario"] == level}
    why = []
    for sd in partial:
        for lab in labels:
            if (lab, sd) not in have:
                what = failed.get((level, sd, lab))
                if what is None and lab in NO_OP and (level, sd, "none") in failed:
                    what = "no control's run, which it takes, ended without a result"
                why.append(f"seed {sd}, {lab}: {what or 'not run'}")
    return (f"incomplete: seed{'s' if len(partial) > 1 else ''} {partial} left out of the table and the "
            f"paired figures ({'; '.join(why)}); their finished runs are kept (--json-out)")


def main(argv: list[str] | None = None, run: Callable[[tuple], dict] = run_one) -> int:
    """The benchmark (module docstring); ``run`` makes one run (`run_one`; another module-level
    function to test the failure paths). Exit code 0, 2 on bad input, `EXIT_INCOMPLETE` when some
    run ended without a result (killed, out of memory, an error: one line each, the others kept)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS),
                    help="light medium heavy, a family (mixed contended kalos4 kalos8 rail seren "
                    "inference lingjun15 lingjun1) or YAML paths")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (each another trace window)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--controllers", nargs="+", default=None, help="labels to run (default: all)")
    ap.add_argument("--model", nargs="*", default=[], help="trained RL models (.zip) to evaluate too")
    ap.add_argument("--grant", default="buffer", choices=["buffer", "weighted", "priority"],
                    help="the levers every controller may use (flowherd.cluster.control_api.GRANTS)")
    ap.add_argument("--network", default=None, help="network model of every run: ideal, roce, tcp, or "
                    "an inline YAML mapping of the network: section, '{model: roce, default_queue: 7}' "
                    "(default: the scenario's)")
    ap.add_argument("--no-background", action="store_true",
                    help="run without the scenarios' background traffic (rows marked background: off; "
                    "the isolated bound has none either way): what the background's share of the links costs")
    ap.add_argument("--fidelity", default=None, choices=["step", "collective", "phase"],
                    help="simulation fidelity of every run (default: the scenario's). At phase fidelity a "
                    "job whose links carry no other job fast-forwards whole iterations without the "
                    "controller (docs/scale.md); collective shows the controllers every collective")
    ap.add_argument("--max-memory", default=None, help="memory the runs at once may use, e.g. 16GB "
                    "(default: what the machine has free; docs/hardening.md)")
    ap.add_argument("--max-rss", default=None, help="stop a run whose process grows past this resident "
                    "memory, e.g. 8GB (one line names it; the other runs go on; default: no limit)")
    ap.add_argument("--workers", type=int, default=2, help="parallel simulations")
    ap.add_argument("--json-out", type=Path, default=None, help="write every run's figures here")
    ap.add_argument("--record", default=None, help="save the headline figures and tables with "
                    "benchmarks/record.py under this name (benchmarks/results/NAME.json)")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="a --json-out file of an earlier run: its runs are not repeated")
    args = ap.parse_args(argv)
    from flowherd.errors import ConfigError
    from flowherd.units import parse_size

    try:
        max_rss = None if args.max_rss is None else parse_size(args.max_rss, field="--max-rss")
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2

    ctrls = [c for c in CONTROLLERS if args.controllers is None or c[0] in args.controllers]
    for m in args.model:
        p = Path(m).resolve()
        if not p.is_file():
            print(f"no model file {p} (--model)", file=sys.stderr)
            return 2
        ctrls.append((f"rl:{p.stem}", str(p), {}))
    try:
        levels = {s: scenario_path(s) for s in args.scenarios}
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2
    nets = {lvl: network_arg(args.network) or scenario_network(path) for lvl, path in levels.items()}
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    # seed by seed: a benchmark stopped early (--json-out keeps every run) has whole paired seeds
    bg = not args.no_background
    tasks = [(lvl, path, label, name, params, sd, args.grant, nets[lvl], bg, args.fidelity)
             for lvl, path in levels.items() for sd in seeds for label, name, params in ctrls]
    print(f"{len(tasks)} runs: {len(levels)} scenarios x {len(ctrls)} controllers x {args.seeds} seeds, "
          f"grant {args.grant!r}, network {', '.join(sorted({str(n) for n in nets.values()}))}, "
          f"{args.workers} workers" + (f", fidelity {args.fidelity}" if args.fidelity else ""),
          flush=True)
    t0 = time.perf_counter()
    rows = []
    if args.reuse is not None:
        codes = {lab: policy_code(name) for lab, name, _ in ctrls}
        old = json.loads(args.reuse.read_text())
        done = reusable(old, nets, bg, codes, args.fidelity)
        stale = len(reusable(old, nets, bg, fidelity=args.fidelity)) - len(done)
        if stale:
            print(f"  {stale} runs of {args.reuse} were made with another policy code: re-run", flush=True)

        def earlier(t: tuple) -> dict | None:
            """The same run under this grant, or under another grant it cannot tell apart."""
            for g in SAME_RUN.get(t[2], {}).get(args.grant, (args.grant,)):
                if (t[0], t[2], t[5], g) in done:
                    return {**done[(t[0], t[2], t[5], g)], "grant": args.grant}
            return None

        rows = [r for r in map(earlier, tasks) if r is not None]
        bounds.remember(old, levels)  # a job on the GPUs of a stored run has that run's bound
        tasks = [t for t in tasks if earlier(t) is None]
        print(f"  {len(rows)} runs reused from {args.reuse}, {len(tasks)} to run", flush=True)
    noop = [t for t in tasks if args.grant in NO_OP.get(t[2], ())]
    tasks = [t for t in tasks if t not in noop]
    have = {(r["scenario"], r["seed"]) for r in rows if r["controller"] == "none"}
    missing = {(t[0], t[5]) for t in noop} - have
    tasks += [t for t in ((lvl, levels[lvl], "none", "none", {}, sd, args.grant, nets[lvl], bg, args.fidelity)
                          for lvl, sd in sorted(missing)) if t not in tasks]
    if noop:
        print(f"  {len(noop)} runs are no control's by construction under {args.grant!r} (NO_OP)", flush=True)
    try:
        from flowherd.experiments import budget

        budget.set_limits(args.max_memory, None)  # reaches each run's process through the environment
        check_memory(tasks, args.workers)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2
    failed: dict[tuple, str] = {}  # (scenario, seed, label) -> what ended the run without a result
    for i, out in enumerate(runpool.run_all(run, tasks, args.workers, max_rss_bytes=max_rss), 1):
        t = out.task
        if out.failure is not None:
            failed[(t[0], t[5], t[2])] = out.failure
            print(f"  run {run_name(t)}: {out.failure}", file=sys.stderr, flush=True)
        else:
            # its bounds now (an LP per job, while the next run runs), kept in --json-out for --reuse
            rows.append(bounds.run_bounds({**out.result, "peak_rss_bytes": out.peak_rss_bytes,
                                           "process_cpu_s": out.cpu_s}, t[1]))
            if args.json_out:  # after every run: a long benchmark killed keeps what it did
                args.json_out.write_text(json.dumps(rows, indent=1))
        if i % 10 == 0 or i == len(tasks):
            print(f"  {i}/{len(tasks)} runs, {time.perf_counter() - t0:.0f} s", flush=True)

    rows += no_op_rows(noop, rows)
    if args.json_out and noop:
        args.json_out.write_text(json.dumps(rows, indent=1))
    record_figures: dict = {}
    record_tables: list = []
    service_tables: list = []  # (title, rows) of print_services, where a scenario serves inference
    for lvl in levels:
        sub = [r for r in rows if r["scenario"] == lvl]
        whole, partial = complete_seeds(sub, [c[0] for c in ctrls], seeds)
        if partial:
            print(f"\n{lvl}: {incomplete_note(lvl, partial, sub, [c[0] for c in ctrls], failed)}")
            if not whole:
                continue
            seeds_shown = whole
            sub = [r for r in sub if r["seed"] in whole]
        else:
            seeds_shown = list(seeds)
        base = np.array([r["mean_jct_s"] for r in sorted(sub, key=lambda r: r["seed"])
                         if r["controller"] == "none"])
        print(f"\n== {lvl} ({levels[lvl].name}), seeds {seeds_shown}, grant {args.grant!r}, network "
              f"{nets[lvl]}{'' if bg else ', no background'}"
              f"{f', fidelity {args.fidelity}' if args.fidelity else ''}: mean +- 95% CI over seeds ==")
        sub = [bounds.run_bounds(r, levels[lvl]) for r in sub]
        seeds_run = sorted({r["seed"] for r in sub if r["controller"] == "none"})
        iso = [bounds.seed_bound(sub, sd, "bound_jct_s") for sd in seeds_run]
        qb = [bounds.seed_bound(sub, sd, "bound_queue_jct_s") for sd in seeds_run]
        gap_ok, gap_s, spread_s = bounds.gap_exceeds_spread(sub)
        if iso:
            im, ih = ci95(iso)
            bad = bounds.beaten(sub) + [(r["controller"], r["seed"], j) for r in sub
                                        for j in bounds.beaten_jobs(r)]
            em, eh = ci95([r["isolated_jct_s"] for r in sub if r["controller"] == "none"])
            print(f"isolated bound (each job alone, every collective at the least time any routing gives "
                  f"its bytes, LP; no queue, no background): mean JCT {im:.2f} +-{ih:.2f} s; "
                  + (f"BEATEN by {bad[:4]}" if bad else "no run nor job beats it"))
            print(f"each job alone on its default routes (its solo time; ECMP, not a bound): mean JCT "
                  f"{em:.2f} +-{eh:.2f} s")
            qm, qh = ci95(qb)
            most = bounds.gap_shares([r for r in sub if r["controller"] == "none"], sub)
            q_share = [100 * (n["mean_jct_s"] - q) / (n["mean_jct_s"] - i) for n, q, i in
                       zip(sorted((r for r in sub if r["controller"] == "none"), key=lambda r: r["seed"]),
                           qb, iso, strict=True) if n["mean_jct_s"] > i] if most.size else []
            cm, ch = ci95(q_share) if q_share else (math.nan, math.nan)
            print(f"queue-aware bound (the same, waiting in the FIFO queue for GPUs): mean JCT {qm:.2f} "
                  f"+-{qh:.2f} s; the most of the isolated gap any network controller closes: {cm:+.1f} "
                  f"+-{ch:.1f}%; no control waits "
                  f"{np.mean([r['mean_wait_s'] for r in sub if r['controller'] == 'none']):.2f} s per job")
            print(f"gap between no control and the isolated bound {gap_s:.2f} s (mean over seeds), seed "
                  f"spread (std of no control's mean JCT) {spread_s:.2f} s: gap closed "
                  + ("printed" if gap_ok else "not printed (the gap is within the seed spread)"))
        print(f"{'controller':<18} {'mean JCT s':>16} {'vs none':>8} {'gap closed':>14} {'gap (queue)':>14} "
              f"{'p99 JCT s':>16} "
              f"{'iter slowdown':>16} {'finished':>9} {'decision us':>11} {'refused':>8} "
              f"{'bg FCT vs none':>15} {'bg p99 vs none':>15} {'worst tenant':>12} {'Jain':>6}")
        none_of = {r["seed"]: r for r in sub if r["controller"] == "none"}
        for label, *_ in ctrls:
            rs = sorted((r for r in sub if r["controller"] == label), key=lambda r: r["seed"])
            m, h = ci95([r["mean_jct_s"] for r in rs])
            p, ph = ci95([r["p99_jct_s"] for r in rs])
            s, sh = ci95([r["mean_iteration_slowdown"] for r in rs])
            vs = (f"{100 * (np.mean([r['mean_jct_s'] for r in rs]) / base.mean() - 1):+7.1f}%"
                  if base.size else "")
            fin = f"{sum(r['finished'] for r in rs)}/{sum(r['jobs'] for r in rs)}"
            dec = np.mean([r["decision_us"] for r in rs])
            bgm, bgp = (_paired_change(rs, none_of, key) for key in ("bg_mean_fct_s", "bg_p99_fct_s"))
            jain = np.nanmean([r.get("tenant_jain", math.nan) for r in rs]) if rs else math.nan
            gap = _pm(bounds.gap_shares(rs, sub)) if gap_ok else "n/a"
            gapq = _pm(bounds.gap_shares(rs, sub, "bound_queue_jct_s")) if gap_ok else "n/a"
            refused = ("no lever" if any(r.get("same_run_as") for r in rs)
                       else sum(r.get("refused", 0) for r in rs))
            worst = np.nanmean([max(r["tenant_slowdown"].values(), default=math.nan) for r in rs
                                if r.get("tenant_slowdown")] or [math.nan])
            print(f"{label:<18} {m:>9.2f} +-{h:>5.2f} {vs:>8} {gap:>14} {gapq:>14} {p:>9.2f} +-{ph:>5.2f} "
                  f"{s:>9.3f} +-{sh:>5.3f} {fin:>9} {dec:>11.0f} {refused:>8} {bgm:>15} {bgp:>15} "
                  f"{worst:>12.3f} {jain:>6.3f}")
        print_breakdown(sub, [c[0] for c in ctrls], horizon_s(levels[lvl]))
        print_tenants(sub, [c[0] for c in ctrls])
        svc = print_services(sub, [c[0] for c in ctrls], ci95)
        # paired comparison on the same seeds: each flowherd policy against each baseline
        ours = [c[0] for c in ctrls if c[0] in OURS or c[0].startswith("rl:")]
        mean_of = {lab: np.array([r["mean_jct_s"] for r in sorted(sub, key=lambda r: r["seed"])
                                  if r["controller"] == lab]) for lab, *_ in ctrls}
        for mine in ours:
            if not mean_of[mine].size:
                continue
            print(f"{mine}: paired difference of mean JCT on the same seeds (baseline - {mine}), 95% CI "
                  "(a CI that holds 0 is a tie):")
            for lab in ("none", *LITERATURE):
                if lab in mean_of and mean_of[lab].size == mean_of[mine].size and mean_of[lab].size:
                    d, dh = ci95(mean_of[lab] - mean_of[mine])
                    pct = 100 * d / mean_of[lab].mean()
                    tie = " tie" if math.isfinite(dh) and abs(d) <= dh else ""
                    print(f"  {lab:<10} {d:+8.2f} +-{dh:.2f} s ({pct:+.1f}% of its JCT){tie}")
            base_labs = [lab for lab in ("none", *LITERATURE, *OURS) if lab != mine and lab in mean_of
                         and mean_of[lab].size == mean_of[mine].size and mean_of[lab].size]
            if base_labs:  # the other controller of the lowest mean JCT, ours included
                best = min(base_labs, key=lambda lab: (mean_of[lab].mean(), lab))
                d, dh = ci95(mean_of[best] - mean_of[mine])
                tie = " tie" if math.isfinite(dh) and abs(d) <= dh else ""
                print(f"  best other: {best} ({mean_of[best].mean():.2f} s): {d:+.2f} +-{dh:.2f} s{tie}")
        figs, trows = bounds.headline(sub, [c[0] for c in ctrls], lvl, ci95)
        record_figures.update(figs)
        record_tables.append((f"{lvl}, grant {args.grant}, seeds {seeds_shown}"
                              + (f", fidelity {args.fidelity}" if args.fidelity else "")
                              + (f"; {incomplete_note(lvl, partial, rows, [c[0] for c in ctrls], failed)}"
                                 if partial else ""), trows))
        if svc:
            service_tables.append((f"{lvl}, grant {args.grant}, seeds {seeds_shown}"
                                   + (f", fidelity {args.fidelity}" if args.fidelity else "")
                                   + ": services and training jobs", svc))
    for m in args.model:
        print_curve(Path(m).resolve())
    if args.record:
        import record

        record.save(args.record, record_figures,
                    tables=[record.table(t, bounds.HEADLINE_COLUMNS, r) for t, r in record_tables]
                    + [record.table(t, SERVICE_COLUMNS, r) for t, r in service_tables],
                    notes=f"benchmarks/control.py, grant {args.grant}"
                          + (f", fidelity {args.fidelity} (not the scenario's)" if args.fidelity else "")
                          + ": mean JCT per controller, paired 95% "
                          "CIs over the seeds; the isolated bound is control_bounds.py's (an LP, no "
                          "controller beats it); gap closed only where the gap exceeds the seed spread.")
    print(f"\nwall {time.perf_counter() - t0:.0f} s")
    if failed:
        print(f"{len(failed)} of {len(tasks)} runs ended without a result (above); exit code "
              f"{EXIT_INCOMPLETE}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


if __name__ == "__main__":
    sys.exit(main())
