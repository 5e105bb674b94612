"""One run drawn in detail: its Gantt chart, its jobs on the fabric and its congested links, as
plain series (no plotting library here).

A report draws these for each method's representative run (`flowherd.report.data.ReportData`
``detail``); they sit apart from `flowherd.report.data`, which reads the store and groups runs by
method, because they look at one run only. `flowherd.report.data` re-exports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["NETWORK_PICKS", "ROW_STEP", "FabricLayout", "GanttRow", "JobLabel", "NetworkPanels", "RunView",
           "fabric_layout", "gantt", "job_labels", "network_panels"]


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
