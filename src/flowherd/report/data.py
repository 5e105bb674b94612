"""What a report shows, read from a result store into plain series (no plotting library here).

The figures (`flowherd.report.figures`, matplotlib) and the HTML page (`flowherd.report.html`,
plotly) draw the same series, so the PNGs and the page agree. Nothing here computes a metric:
the values are the store's; grouping runs by method and averaging a metric over seeds is all the
arithmetic done. What one run shows in detail (Gantt chart, fabric, congested links) is
`flowherd.report.run_detail`'s, re-exported here.

A *method* is what a user compares: the placement method, the routing and the online controller,
named as users know them ("first-fit", "packed", "ECMP"). When other axes vary too (say the
oversubscription), their values join the label ("packed, 2:1 oversubscribed"); the background load
is the x axis of the slowdown figure and never part of a label. A run stored with a ``role``
parameter (`ROLE_PARAM`; `flowherd demo` stores "no control", "best baseline" and "flowherd")
names its controller by that role where the name does not say it already: "flowherd planner +
best baseline (Crux)", but "flowherd planner + flowherd threshold". Methods are listed
baselines first: no control before the literature's controllers before flowherd's, and within
each the baseline placers before flowherd's planner.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.report.run_detail import (
    NETWORK_PICKS,
    ROW_STEP,
    FabricLayout,
    GanttRow,
    JobLabel,
    NetworkPanels,
    RunView,
    fabric_layout,
    gantt,
    job_labels,
    network_panels,
)

__all__ = [
    "CONTROLLER_LABELS", "LINEAR_SPREAD_MAX", "LOAD_PATH", "MAX_REPRESENTATIVE", "NETWORK_PICKS",
    "PLACEMENT_LABELS", "ROLE_PARAM", "ROUTING_LABELS", "ROW_STEP", "TIED_PARAM", "TIER_LABELS",
    "Comparison", "FabricLayout", "GanttRow", "JobLabel", "NetworkPanels", "ReportData", "RunView",
    "controller_label", "fabric_layout", "gantt", "jain_index", "jct_cdf", "job_labels",
    "load_report_data", "loads_measured", "method_label", "method_rank", "network_panels",
    "paired_comparisons", "seeds_phrase", "service_tradeoff", "slowdown_vs_load",
    "tenant_axis_scale", "tenant_slowdowns", "utilization",
]

PLACEMENT_LABELS = {"first-fit": "first-fit", "packed": "packed", "heuristic": "flowherd planner",
                    "milp": "flowherd MILP", "random": "random"}
ROUTING_LABELS = {"ecmp": "ECMP", "spray": "packet spraying", "shortest": "shortest path",
                  "explicit": "LP-split routing", "ksp": "k-shortest paths"}
CONTROLLER_LABELS = {"none": "no control", "adaptive": "adaptive routing", "cassini": "CASSINI",
                     "crux": "Crux", "sincronia": "Sincronia", "varys": "Varys",
                     "threshold": "flowherd threshold", "flowherd": "flowherd policy", "rl": "flowherd RL"}
TIER_LABELS = {"nvlink": "NVLink", "pcie": "PCIe", "host-leaf": "host-leaf", "leaf-spine": "leaf-spine",
               "spine-core": "spine-core", "core-up": "core-up"}
LOAD_PATH = "workload.background.load"
ROLE_PARAM = "role"
#: Run parameter listing the controllers whose result equals this run's (`flowherd demo`): the
#: label names them, so that a choice among equals does not read as a win.
TIED_PARAM = "tied"
_METHOD_PATHS = {"placement.method", "simulation.routing", "controller.name", ROLE_PARAM, TIED_PARAM}
MAX_REPRESENTATIVE = 4


def _axis_label(path: str, value: Any) -> str:
    last = path.rsplit(".", 1)[-1]
    if last == "oversubscription":
        if isinstance(value, int | float):
            return f"{value:g}:1 oversubscribed"
        return f"oversubscription {value}"
    return f"{last.replace('_', ' ')} {value}"


def controller_label(controller: str | None, role: str | None = None,
                     tied: list[str] | tuple[str, ...] = ()) -> str:
    """A controller's name as users know it, with its role in a comparison if that adds to it,
    and the controllers it tied with (equal results: "best" among them means nothing).

    >>> controller_label("crux", "best baseline"), controller_label("threshold", "flowherd")
    ('best baseline (Crux)', 'flowherd threshold')
    >>> controller_label("crux", "best baseline", ["sincronia", "varys"])
    'best baseline (tie: Crux = Sincronia = Varys)'
    >>> controller_label(None), controller_label("none", "no control")
    ('no control', 'no control')
    """
    ctrl = controller or "none"
    label = CONTROLLER_LABELS.get(ctrl, ctrl)
    if tied:
        label = "tie: " + " = ".join([label, *(CONTROLLER_LABELS.get(t, t) for t in tied)])
    if not role or label == role or label.startswith(role + " "):
        return label
    return f"{role} ({label})"


def _controller_label(run: dict[str, Any]) -> str:
    return controller_label(run.get("controller"), run["params"].get(ROLE_PARAM),
                            run["params"].get(TIED_PARAM) or ())


def method_label(run: dict[str, Any], vary: set[str], other_axes: list[str]) -> str:
    """The user-facing name of a run's method (module docstring)."""
    parts: list[str] = []
    place = PLACEMENT_LABELS.get(run["placement"], run["placement"])
    route = ROUTING_LABELS.get(run["routing"], run["routing"])
    ctrl = run.get("controller")
    role = run["params"].get(ROLE_PARAM)
    if not vary:
        parts = [place, route] + ([_controller_label(run)] if ctrl or role else [])
    else:
        if "placement" in vary:
            parts.append(place)
        if "routing" in vary:
            parts.append(route)
        if "controller" in vary or role:
            parts.append(_controller_label(run))
    axes = [_axis_label(p, run["params"][p]) for p in other_axes if p in run["params"]]
    label = " + ".join(parts)
    if axes:
        label += (", " if label else "") + ", ".join(axes)
    return label or "all runs"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportData:
    """Everything a report draws (module docstring).

    Attributes:
        source: The result store file.
        runs: Every stored run (``runs`` rows with ``params`` decoded and a ``method`` label).
        methods: Method labels in first-seen order.
        jobs: ``jobs`` rows of the finished (ok) runs.
        tenants: ``tenants`` rows of the ok runs, each with the run's ``method``.
        detail: One representative run per method (at most `MAX_REPRESENTATIVE`): the ok run at the
            highest background load, lowest seed.
        services: ``services`` rows (inference services: time to first token and per output token,
            SLO attainment) of the ok runs, each with the run's ``method``.
    """

    source: Path
    runs: list[dict[str, Any]]
    methods: list[str]
    jobs: list[dict[str, Any]]
    tenants: list[dict[str, Any]]
    detail: list[RunView] = field(default_factory=list)
    services: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["status"] != "ok"]


def method_rank(run: dict[str, Any]) -> tuple[int, int]:
    """Where a run's method is listed: (controller, placement), each 0 for a baseline and 1 for
    flowherd's (no control is -1), so that the baselines come first and flowherd's methods last."""
    ctrl = run.get("controller") or "none"
    c = -1 if ctrl == "none" else int(CONTROLLER_LABELS.get(ctrl, "").startswith("flowherd"))
    return c, int(PLACEMENT_LABELS.get(run["placement"], "").startswith("flowherd"))


def load_report_data(results: str | Path, *, run_id: str | None = None,
                     sweeps: list[str] | tuple[str, ...] | None = None) -> ReportData:
    """Read a result store (the DuckDB file or a sweep directory).

    Args:
        results: The store.
        run_id: Draw this run in detail instead of one per method.
        sweeps: Only the runs stored under these sweep names (default: every run).

    Raises:
        ConfigError: No store there, no run in it (of `sweeps`), or an unknown `run_id`.
    """
    from flowherd.experiments.store import ResultStore

    with ResultStore(results, read_only=True) as store:
        runs = store.runs()
        if sweeps is not None:
            known = sorted({r["sweep"] for r in runs})
            runs = [r for r in runs if r["sweep"] in sweeps]
            if not runs:
                raise ConfigError(f"the result store {str(store.path)!r} holds no runs of sweeps "
                                  f"{list(sweeps)}; expected some of {known} (sweeps)")
        if not runs:
            raise ConfigError(f"the result store {str(store.path)!r} holds no runs (results)")
        # stable: runs of equal rank keep the store's order (sweep, parameters, seed)
        runs.sort(key=method_rank)
        ok = [r for r in runs if r["status"] == "ok"]
        vary = {k for k in ("placement", "routing", "controller")
                if len({r[k] or ("none" if k == "controller" else None) for r in ok}) > 1}
        other = sorted({p for r in ok for p in r["params"]
                        if p != LOAD_PATH and p not in _METHOD_PATHS
                        and len({json.dumps(x["params"].get(p), default=str) for x in ok}) > 1})
        methods: list[str] = []
        for r in runs:
            r["method"] = method_label(r, vary, other)
            if r["status"] == "ok" and r["method"] not in methods:
                methods.append(r["method"])
        by_id = {r["run_id"]: r for r in runs}
        jobs = store.jobs([r["run_id"] for r in ok]) if ok else []
        for j in jobs:
            j["method"] = by_id[j["run_id"]]["method"]
        tenants = [t for t in store.tenants()
                   if t["run_id"] in by_id and by_id[t["run_id"]]["status"] == "ok"]
        for t in tenants:
            t["method"] = by_id[t["run_id"]]["method"]
        services = [s for s in store.services()
                    if s["run_id"] in by_id and by_id[s["run_id"]]["status"] == "ok"]
        for s in services:
            s["method"] = by_id[s["run_id"]]["method"]
        if run_id is not None:
            if run_id not in by_id or by_id[run_id]["status"] != "ok":
                known = [r["run_id"] for r in ok][:5]
                raise ConfigError(f"no finished run {run_id!r} in the store; expected one of {known} "
                                  "... (run)")
            chosen = [by_id[run_id]]
        else:
            chosen = []
            for m in methods[:MAX_REPRESENTATIVE]:
                cands = [r for r in ok if r["method"] == m]
                chosen.append(min(cands, key=lambda r: (-(r["background_load"] or 0.0), r["seed"])))
        detail = []
        jobs_by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for j in jobs:
            jobs_by_run[j["run_id"]].append(j)
        for r in chosen:
            detail.append(RunView(run=r, method=r["method"], jobs=jobs_by_run[r["run_id"]],
                                  links=store.links(r["run_id"]), scenario=json.loads(r["scenario_json"]),
                                  network=store.network_links(r["run_id"])))
        return ReportData(source=store.path, runs=runs, methods=methods, jobs=jobs, tenants=tenants,
                          detail=detail, services=services)


def service_tradeoff(data: ReportData) -> list[tuple[str, float, float, float]]:
    """Per method with inference services: (method, mean TTFT attainment of its services, mean SLO
    attainment, mean JCT of its training jobs in seconds), each a mean over the method's runs; NaN
    where undefined. The points of the trade-off between the services and the training jobs."""
    out = []
    for m in data.methods:
        sv = [s for s in data.services if s["method"] == m]
        if not sv:
            continue
        att = [s["ttft_attainment"] for s in sv if s["ttft_attainment"] is not None]
        slo = [s["slo_attainment"] for s in sv if s["slo_attainment"] is not None]
        jct = [j["jct_s"] for j in data.jobs if j["method"] == m and j["kind"] == "training"
               and j["jct_s"] is not None]
        out.append((m, float(np.mean(att)) if att else math.nan, float(np.mean(slo)) if slo else math.nan,
                    float(np.mean(jct)) if jct else math.nan))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One paired comparison of the report's headline: `method` against `reference`.

    Attributes:
        method, reference: Method labels.
        paired: The per-seed difference of mean JCT, method - reference, seconds
            (`flowherd.experiments.stats.Paired`).
        grant: The grant of levers the compared controllers ran under (`controller.levers` of the
            method's runs), or None where the runs did not name one.
    """

    method: str
    reference: str
    paired: Any
    grant: str | None


def _grant_of(run: dict[str, Any]) -> str | None:
    ctrl = json.loads(run["scenario_json"]).get("controller") or {}
    levers = ctrl.get("levers") if isinstance(ctrl, dict) else None
    if levers is None or isinstance(levers, str):
        return levers
    return json.dumps(levers, sort_keys=True)


def paired_comparisons(data: ReportData) -> list[Comparison]:
    """The comparisons a stored demo makes, each paired over the seeds both methods ran.

    Runs stored with a role (`ROLE_PARAM`): every controlled method against no control on the same
    placement; the flowherd policy against the best baseline; the planner's placement without
    control against each other placement without control. Pairs with no seed in common are left
    out; so is everything when no run has a role.
    """
    from flowherd.experiments.stats import paired

    ok = [r for r in data.runs if r["status"] == "ok" and r["mean_jct_s"] is not None]
    by: dict[str, dict[int, float]] = defaultdict(dict)
    info: dict[str, tuple[str | None, str, str | None]] = {}
    for r in ok:
        role = r["params"].get(ROLE_PARAM)
        if role is None:
            continue
        by[r["method"]][int(r["seed"])] = float(r["mean_jct_s"])
        info[r["method"]] = (role, r["placement"], _grant_of(r))
    pairs: list[tuple[str, str]] = []
    none_of = {place: m for m, (role, place, _) in info.items() if role == "no control"}
    for m, (role, place, _) in info.items():
        if role != "no control" and place in none_of:
            pairs.append((m, none_of[place]))
    best = [m for m, (role, _, _) in info.items() if role == "best baseline"]
    mine = [m for m, (role, _, _) in info.items() if role == "flowherd"]
    pairs += [(a, b) for a in mine for b in best]
    if "heuristic" in none_of:
        pairs += [(none_of["heuristic"], m) for place, m in none_of.items() if place != "heuristic"]
    out = []
    for a, b in pairs:
        if set(by[a]) & set(by[b]):
            grant = info[a][2] if info[a][0] != "no control" else None
            out.append(Comparison(method=a, reference=b, paired=paired(by[a], by[b]), grant=grant))
    return out


# ---- series ---------------------------------------------------------------------------------------------
def jct_cdf(data: ReportData) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Per method: sorted JCTs of the finished jobs (all runs), seconds, the fraction of all the
    method's jobs finished by then (jobs unfinished at the horizon keep the curve below 1), and
    the number of jobs."""
    out = {}
    for m in data.methods:
        mine = [j for j in data.jobs if j["method"] == m]
        x = np.sort([j["jct_s"] for j in mine if j["finished"] and j["jct_s"] is not None])
        if x.size:
            out[m] = (x, np.arange(1, x.size + 1) / len(mine), len(mine))
    return out


def slowdown_vs_load(data: ReportData) -> dict[str, dict[str, np.ndarray]]:
    """Per method: background load, and mean/min/max over seeds of the run's mean slowdown."""
    out = {}
    for m in data.methods:
        by_load: dict[float, list[float]] = defaultdict(list)
        for r in data.runs:
            if r["method"] == m and r["status"] == "ok" and r["mean_slowdown"] is not None:
                by_load[float(r["background_load"] or 0.0)].append(float(r["mean_slowdown"]))
        if by_load:
            loads = sorted(by_load)
            out[m] = {"load": np.array(loads),
                      "mean": np.array([np.mean(by_load[x]) for x in loads]),
                      "min": np.array([np.min(by_load[x]) for x in loads]),
                      "max": np.array([np.max(by_load[x]) for x in loads]),
                      "n": np.array([len(by_load[x]) for x in loads])}
    return out


def loads_measured(series: dict[str, dict[str, np.ndarray]]) -> list[float]:
    """The distinct background loads of a `slowdown_vs_load` series: with one, the figure compares
    methods at that load (dots on a load axis would stack at one x)."""
    return sorted({float(x) for s in series.values() for x in s["load"]})


def seeds_phrase(n: int) -> str:
    """``"1 seed"``, ``"5 seeds"``: how many runs a mean is over.

    >>> seeds_phrase(1), seeds_phrase(3)
    ('1 seed', '3 seeds')
    """
    return f"{n} seed{'' if n == 1 else 's'}"


#: Largest ratio of the tallest to the shortest tenant bar drawn on a linear axis; beyond it one
#: outlier (a 34x tenant) flattens the others, so the axis turns logarithmic.
LINEAR_SPREAD_MAX = 8.0


def tenant_axis_scale(series: dict[str, np.ndarray]) -> str:
    """``"log"`` when the tenant slowdowns span more than `LINEAR_SPREAD_MAX`, else ``"linear"``."""
    vals = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in series.values()]) if series else np.zeros(0)
    if vals.size and vals.max() / vals.min() > LINEAR_SPREAD_MAX:
        return "log"
    return "linear"


def tenant_slowdowns(data: ReportData) -> tuple[list[str], dict[str, np.ndarray]]:
    """Tenants, and per method the mean over runs of each tenant's mean slowdown (nan if none)."""
    tenants = sorted({t["tenant"] for t in data.tenants})
    out = {}
    for m in data.methods:
        vals = []
        for tn in tenants:
            xs = [t["mean_slowdown"] for t in data.tenants if t["method"] == m and t["tenant"] == tn
                  and t["mean_slowdown"] is not None]
            vals.append(float(np.mean(xs)) if xs else math.nan)
        out[m] = np.array(vals)
    return tenants, out


def jain_index(x: np.ndarray) -> float:
    """Jain's fairness index (Jain, Chiu, Hawe 1984) of the finite values of `x`: 1 is equal."""
    x = x[np.isfinite(x)]
    if not x.size or not np.any(x):
        return math.nan
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


def utilization(view: RunView) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Tier labels, the bin edges (seconds) and the utilization (tiers x bins, 0..1) of a run."""
    tiers = [TIER_LABELS.get(li["tier"], li["tier"]) for li in view.links]
    if not view.links:
        return [], np.zeros(1), np.zeros((0, 0))
    edges = np.asarray(view.links[0]["bin_edges_s"], dtype=float)
    return tiers, edges, np.array([li["utilization"] for li in view.links], dtype=float)
