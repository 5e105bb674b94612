"""What a report shows, read from a result store into plain series (no plotting library here).

The figures (`flowherd.report.figures`, matplotlib) and the HTML page (`flowherd.report.html`,
plotly) draw the same series, so the PNGs and the page agree. Nothing here computes a metric:
the values are the store's; grouping runs by method and averaging a metric over seeds is all the
arithmetic done.

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
class RunView:
    """One run drawn in detail (heatmap, Gantt, fabric).

    Attributes:
        run: Its ``runs`` row.
        method: Its method label.
        jobs: Its ``jobs`` rows, in submission order.
        links: Its ``links`` rows (tier series).
        scenario: Its scenario mapping.
        network: Its ``network_links`` rows (congested links; empty on ``ideal``).
    """

    run: dict[str, Any]
    method: str
    jobs: list[dict[str, Any]]
    links: list[dict[str, Any]]
    scenario: dict[str, Any]
    network: list[dict[str, Any]] = field(default_factory=list)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class GanttRow:
    """One job in the Gantt chart; times in seconds.

    Attributes:
        name, tenant, kind: Labels.
        submit_s, start_s, end_s: Submission, start (None if never started) and end (finish, or
            the horizon if unfinished).
        finished: Whether it finished before the horizon.
        compute: ``(start, width)`` of each iteration's compute part (training), seconds.
        comm: ``(start, width)`` of each iteration's communication part: what the iteration took
            beyond its compute critical path (training), or each request batch (inference).
    """

    name: str
    tenant: str
    kind: str
    submit_s: float
    start_s: float | None
    end_s: float
    finished: bool
    compute: list[tuple[float, float]]
    comm: list[tuple[float, float]]


def gantt(view: RunView) -> list[GanttRow]:
    """The Gantt rows of a run, in submission order."""
    horizon = float(view.run["horizon_s"] or 0.0)
    rows = []
    for j in view.jobs:
        start = j["start_s"]
        end = j["finish_s"] if j["finish_s"] is not None else horizon
        compute: list[tuple[float, float]] = []
        comm: list[tuple[float, float]] = []
        ends = list(j["iteration_end_s"] or [])
        if start is not None and j["kind"] == "training":
            prev = start
            c = float(j["compute_only_iteration_s"] or 0.0)
            for e in ends:
                span = e - prev
                cw = min(c, span)
                compute.append((prev, cw))
                if span - cw > 0:
                    comm.append((prev + cw, span - cw))
                prev = e
        elif start is not None:
            comm = [(e - lat, lat) for e, lat in zip(ends, j["iteration_s"] or [], strict=False)]
        rows.append(GanttRow(name=j["name"], tenant=j["tenant"], kind=j["kind"], submit_s=j["submit_s"],
                             start_s=start, end_s=end, finished=bool(j["finished"]), compute=compute,
                             comm=comm))
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricLayout:
    """The fabric as a layered drawing: GPUs at the bottom, then NICs, leaves, spines, cores.

    Attributes:
        title: The fabric's name.
        node_x, node_y: Position of every node (nan for nodes not drawn: NVSwitches).
        node_tier: Tier of every node.
        edges: ``int[E, 2]``: one row per drawn cable (PCIe and network links, both directions as one).
        server_box: ``(x0, x1)`` of each server's GPUs (its NVLink domain).
        occupants: Per GPU, the jobs that ran on it, in start order.
        job_number: Per job that ran, its number in the drawing (1, 2, ... in start order): the
            GPUs carry their tenant's colour and the number, and the legend maps each number to
            its job (tens of job colours cannot be told apart; a handful of tenant colours can).
        job_tenant: Per job that ran, its tenant.
        job_span: Per job that ran, the mean x of its GPUs (its labels are per server: `job_labels`).
    """

    title: str
    num_gpus: int
    node_x: np.ndarray
    node_y: np.ndarray
    node_tier: np.ndarray
    edges: np.ndarray
    server_box: list[tuple[float, float]]
    occupants: list[list[str]]
    job_number: dict[str, int] = field(default_factory=dict)
    job_tenant: dict[str, str] = field(default_factory=dict)
    job_span: dict[str, float] = field(default_factory=dict)


def fabric_layout(view: RunView) -> FabricLayout:
    """Rebuild the run's fabric from its stored scenario and lay it out (`FabricLayout`)."""
    from flowherd.fabric.core import LinkKind, NodeKind
    from flowherd.fabric.spec import fabric_from_mapping

    fab = fabric_from_mapping(view.scenario["fabric"], field="fabric")
    n, g = fab.num_nodes, fab.num_gpus
    tier = np.asarray(fab.node_tier, dtype=int)
    kind = np.asarray(fab.node_kind, dtype=int)
    server = np.asarray(fab.gpu_server, dtype=int)
    x = np.full(n, np.nan)
    y = np.full(n, np.nan)
    gap = 1.0
    x[:g] = np.arange(g) + server * gap
    y[:g] = 0.0
    src = np.asarray(fab.link_src)
    dst = np.asarray(fab.link_dst)
    lk = np.asarray(fab.link_kind)
    keep = (lk != LinkKind.NVLINK) & (src < dst)
    edges = np.stack([src[keep], dst[keep]], axis=1) if keep.any() else np.zeros((0, 2), dtype=int)
    # NICs sit above the GPUs they serve; switch tiers are spread evenly over the GPU row
    nic = np.flatnonzero(kind == NodeKind.NIC)
    for v in nic:
        nb = np.concatenate([dst[src == v], src[dst == v]])
        nb = nb[nb < g]
        x[v] = x[nb].mean() if nb.size else np.nan
        y[v] = 1.0
    lo, hi = float(x[:g].min()), float(x[:g].max())
    for t in sorted(set(tier[kind == NodeKind.SWITCH].tolist())):
        ids = np.flatnonzero((kind == NodeKind.SWITCH) & (tier == t))
        span = hi - lo
        x[ids] = lo + span * (np.arange(ids.size) + 0.5) / ids.size
        y[ids] = float(t)
    nan_nic = nic[np.isnan(x[nic])]
    if nan_nic.size:
        x[nan_nic] = lo + (hi - lo) * (np.arange(nan_nic.size) + 0.5) / nan_nic.size
    boxes = [(float(x[:g][server == s].min()), float(x[:g][server == s].max()))
             for s in range(server.max() + 1)]
    occ: list[list[str]] = [[] for _ in range(g)]
    number: dict[str, int] = {}
    tenant: dict[str, str] = {}
    span: dict[str, float] = {}
    for j in sorted(view.jobs, key=lambda j: (j["start_s"] if j["start_s"] is not None else math.inf)):
        mine = [int(gpu) for gpu in j["gpus"] or []]
        for gpu in mine:
            occ[gpu].append(j["name"])
        if mine and j["name"] not in number:
            number[j["name"]] = len(number) + 1
            tenant[j["name"]] = j["tenant"]
            span[j["name"]] = float(np.mean(x[mine]))
    return FabricLayout(title=fab.name, num_gpus=g, node_x=x, node_y=y, node_tier=tier, edges=edges,
                        server_box=boxes, occupants=occ, job_number=number, job_tenant=tenant, job_span=span)


#: Vertical distance between the rows of jobs stacked on a GPU in the fabric drawing.
ROW_STEP = 0.17


@dataclass(frozen=True, slots=True, kw_only=True)
class JobLabel:
    """Where a job's number is written in the fabric drawing: on its own row of GPUs, in the
    middle of one server's block of them (`job_labels`)."""

    job: str
    number: int
    x: float
    y: float


def job_labels(lay: FabricLayout) -> list[JobLabel]:
    """A label per job per server it ran in: at the middle of its GPUs there, on the row it
    takes on them (the first job on a GPU at row 0, the next below it ...). Two labels of one row
    closer than a label's width are set apart vertically, so that no number covers another."""
    g = lay.num_gpus
    server_of = np.full(g, -1)
    for s, (x0, x1) in enumerate(lay.server_box):
        server_of[(lay.node_x[:g] >= x0) & (lay.node_x[:g] <= x1)] = s
    blocks: dict[tuple[str, int, int], list[float]] = {}
    for i in range(g):
        for depth, job in enumerate(lay.occupants[i]):
            blocks.setdefault((job, depth, int(server_of[i])), []).append(float(lay.node_x[i]))
    out: list[JobLabel] = []
    last_x: dict[int, float] = {}
    nudged: dict[int, bool] = {}
    for (job, depth, _), xs in sorted(blocks.items(), key=lambda kv: (kv[0][1], float(np.mean(kv[1])))):
        x = float(np.mean(xs))
        y = -ROW_STEP * depth
        if depth in last_x and x - last_x[depth] < 2.5:  # about two digits wide at the drawing's scale
            nudged[depth] = not nudged.get(depth, False)
            if nudged[depth]:
                y += 0.45 * ROW_STEP
        else:
            nudged[depth] = False
        last_x[depth] = x
        out.append(JobLabel(job=job, number=lay.job_number[job], x=x, y=y))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPanels:
    """What the network figure of one run draws (`network_panels`): the same links in every panel.

    Attributes:
        links: The links drawn, by name: the most queued, then the most paused, marked and dropping
            ones (each link once).
        queue: Per link of `links`: name and the step series ``(t_s, queue_bytes)``, starting at 0
            bytes at time 0 (a link without a standing queue stays at 0).
        pause_s, ecn_marked_bytes, drop_bytes: Per link of `links` (name -> total, 0 included).
        pause_series: Per paused link: its pause episodes ``(start_s, duration_s)``.
        lossless: Nothing was dropped on any link of the run (PFC pauses instead of dropping).
    """

    links: list[str]
    queue: list[tuple[str, np.ndarray, np.ndarray]]
    pause_s: dict[str, float]
    ecn_marked_bytes: dict[str, float]
    drop_bytes: dict[str, float]
    pause_series: dict[str, tuple[np.ndarray, np.ndarray]]
    lossless: bool


#: Of the links a network figure draws, how many are chosen by each measure, in this order.
NETWORK_PICKS = (("queue_max_bytes", 3), ("pause_s", 3), ("ecn_marked_bytes", 2), ("drop_bytes", 2))


def network_panels(view: RunView, *, top: int = 8) -> NetworkPanels | None:
    """The congestion of one run on at most ``top`` links (`NETWORK_PICKS`: the highest peak queues,
    then PFC pause time, ECN-marked and dropped bytes), every panel over the same links; None when
    the run stored no congested link (``ideal``, or nothing congested)."""
    rows = view.network
    if not rows:
        return None
    by_name = {r["name"]: r for r in rows}
    links: list[str] = []
    for key, quota in NETWORK_PICKS:
        ranked = sorted((r for r in rows if r[key] > 0 and r["name"] not in links), key=lambda r: -r[key])
        links += [r["name"] for r in ranked[:quota]][:max(0, top - len(links))]
    queue = []
    for name in links:
        r = by_name[name]
        t = np.concatenate([[0.0], np.asarray(r["series_t_s"] or [], dtype=float)])
        q = np.concatenate([[0.0], np.asarray(r["series_queue_bytes"] or [], dtype=float)])
        queue.append((name, t, q))

    def totals(key: str) -> dict[str, float]:
        return {n: float(by_name[n][key]) for n in links}

    pauses = {r["name"]: (np.asarray(r["pause_t_s"] or [], dtype=float),
                          np.asarray(r["pause_dur_s"] or [], dtype=float)) for r in rows if r["pause_s"] > 0}
    return NetworkPanels(links=links, queue=queue, pause_s=totals("pause_s"),
                         ecn_marked_bytes=totals("ecn_marked_bytes"), drop_bytes=totals("drop_bytes"),
                         pause_series=pauses, lossless=all(r["drop_bytes"] == 0 for r in rows))
