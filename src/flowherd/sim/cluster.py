"""Multi-tenant cluster simulation: jobs arrive, wait for GPUs, run on a shared fabric, leave.

`simulate_cluster` runs training and inference jobs of several tenants, and optionally
background traffic, on one `Engine` over a horizon, and returns a `ClusterResult` of raw records
(per job, per link tier over time, per background flow). Metrics (JCT, percentiles, slowdown,
per-tenant aggregates) are computed from it by the experiments layer, not here.

Scheduling. Jobs are queued in submission order (ties: the order given) and placed strictly
FIFO, **without backfilling**: while the head of the queue does not fit, later jobs wait too. A
job pinned by ``placements`` waits until its GPUs are free. A job holds its GPUs from its start
to its end and releases them then; a job that ends lets the queue be served at that instant.

Executing a plan (``planned_start``, every job pinned). A plan fixes where each job runs and when
it starts; its start order may differ from submission order (the planner backfills,
`flowherd.planning.plan`). The simulator then keeps, on every GPU, the order of the jobs the plan
puts on it (by planned start, ties by submission): a job starts as soon as it is submitted, its
GPUs are free, and every job planned before it on any of its GPUs has started. Jobs on disjoint
GPUs never wait for each other, so a job that runs longer than planned delays only the jobs
that follow it on its own GPUs, and a job never starts on GPUs a job planned before it still
needs. The planned start times themselves are not waited for: a job whose GPUs free up early
starts early.

Execution (`flowherd.sim.executor`). A training job runs ``iterations`` iterations of its
``stage``-granularity op graph; iteration ``i + 1`` starts when every task of iteration ``i`` has
finished. An inference job receives Poisson requests for ``duration_s`` from its start, batches
them (`InferenceJob.batch_requests`), and runs each batch as a prefill step on prefill replica
``b mod instances``, a KV-cache transfer (disaggregated), and ``output_tokens`` decode steps on
decode replica ``b mod decode replicas``; a replica serves its batches one at a time, in order.
Its "iterations" are the batches: their end times and their latencies (close of the batch to
the end of its decode). It ends when its window is over and its last batch is done.

Fidelities: ``step`` and ``collective`` as in `flowherd.sim.collective`; ``phase`` runs like
``collective`` except that a training job whose links carry nothing else is fast-forwarded:

* at an iteration boundary, a job is *isolated* when no other running job's flows can cross any
  of its links (job footprints: the links of all its collectives' routes; NVLink and a server's
  own links are never shared between jobs, whose GPUs are disjoint), no background flow is on
  them now, and none arrives on them before the window ends (background flows are drawn in
  advance, so the next arrival on the footprint is known);
* an isolated job then advances ``k`` iterations as one pure delay of ``k * T``, ``T`` the
  iteration time of the job alone on the fabric (one iteration simulated once, at ``collective``
  fidelity, on a private engine; with its links to itself the job's max-min rates are exactly
  those it has alone, so this is exact), ``k`` as many as remain or fit before the next
  background arrival on its links;
* a job that starts on links of a fast-forwarded job cuts the window short: the fast-forwarded
  job completes the iteration it is in at its solo pace (the one approximation: for less than
  one iteration the newcomer does not see its traffic) and runs at ``collective`` fidelity from
  there until it is isolated again. Single-server jobs (NVLink only) are never interrupted.

With background traffic, ``BackgroundSpec.fast_forward`` chooses between the exact rule above
(network jobs then hardly ever fast-forward: background flows cross their links every few
milliseconds) and ``"sampled"``, a documented approximation: a job alone among background
flows simulates one iteration with them, fast-forwards about ``sample_every_s`` at that
iteration's duration, simulates one again, and so on (other jobs on its links still stop it).
Background flows then do not see the traffic of fast-forwarded iterations.

In ``phase`` fidelity an iteration is also simulated in its phase form (`contract_graph`): the
tasks that only use the job's own links (compute, NVLink-only collectives) become pure delays of
their solo durations, chains of them merge, and only the network collectives are coflows.

Inference jobs run at ``collective`` fidelity under ``phase``.

Background traffic (`BackgroundSpec`, `flowherd.workload.BackgroundTraffic`): flows between
random distinct servers (from a random GPU of one to a random GPU of the other, over that GPU's
NIC), Poisson arrivals at ``load`` of the servers' aggregate scale-out bandwidth, sizes from a
datacenter CDF. At realistic loads on large fabrics that is millions of flows per second, so
flows are **aggregated**: with ``k = ceil(rate / max_flows_per_s)``, a flow stands for ``k``
consecutive flows: arrivals are Poisson at ``rate / k`` and each size is the sum of ``k`` draws
from the CDF (exact for ``k <= 64``; above, the normal law of the sum: mean ``k * mu``, variance
``k * sigma^2``, clipped at one byte). The offered load is unchanged; bursts are coarser. The
result gives every simulated (aggregated) flow's size, start and completion, and ``k``.

Link utilization is kept per link tier (NVLink, PCIe, host-leaf, leaf-spine, spine-core ...) in
time bins: bytes carried in the bin over the tier's capacity times the bin width;
fast-forwarded iterations are credited with their solo per-link bytes spread evenly over their
window.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.registry import Registry
from flowherd.routing.base import Routes
from flowherd.routing.policies import make_router
from flowherd.sim.control_api import ON_CONTROLLER_ERROR, ControlHook, ControllerIssue
from flowherd.sim.engine import Engine
from flowherd.sim.executor import CollectiveCache, PreparedGraph, add_graph, contract_graph, prepare_graph
from flowherd.sim.placement import Placer, make_placer
from flowherd.workload.background import BackgroundTraffic, FlowSizeCDF
from flowherd.workload.inference import InferenceJob
from flowherd.workload.training import Granularity, TrainingJob, rank_to_gpu

__all__ = ["CLUSTER_FIDELITIES", "BackgroundSpec", "ClusterResult", "JobRecord", "JobRequest",
           "simulate_cluster"]

log = logging.getLogger(__name__)

CLUSTER_FIDELITIES = Registry("fidelity", {"step": "step", "collective": "collective", "phase": "phase"})
_EXACT_SUM_MAX = 64
_NO = np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """One job to run.

    Attributes:
        name: Unique name.
        tenant: Tenant label.
        spec: What runs.
        submit_s: Submission time, seconds.
    """

    name: str
    tenant: str
    spec: TrainingJob | InferenceJob
    submit_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"job name must be a non-empty string, got {self.name!r} (jobs[].name)")
        if not isinstance(self.spec, TrainingJob | InferenceJob):
            raise ConfigError(f"job {self.name!r}: spec must be a TrainingJob or InferenceJob, got "
                              f"{type(self.spec).__name__} (jobs[].spec)")
        if not (isinstance(self.submit_s, int | float) and math.isfinite(self.submit_s)
                and self.submit_s >= 0):
            raise ConfigError(f"job {self.name!r}: submit_s must be a finite time >= 0, got "
                              f"{self.submit_s!r} (jobs[].submit_s)")


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundSpec:
    """Background traffic of a cluster run (module docstring).

    Attributes:
        load: Offered load, a fraction of the servers' aggregate scale-out bandwidth, in [0, 1].
        cdf: Flow-size distribution name (``web_search``, ``data_mining`` ...) or a `FlowSizeCDF`.
        max_flows_per_s: Cap on simulated flows per second over the whole fabric; above it
            consecutive flows are merged (module docstring).
        fast_forward: How ``phase`` fidelity treats background on a job's links: "exact" (a
            background flow on them ends or forbids a fast-forward window, so with background
            ``phase`` equals ``collective`` for network jobs) or "sampled" (an approximation:
            background does not stop fast-forward; a job simulates one iteration among the
            background, fast-forwards ``sample_every_s`` at that iteration's duration, simulates
            one again, and so on; background flows do not see the traffic of fast-forwarded
            iterations). Other jobs on a job's links always stop fast-forward.
        sample_every_s: Longest fast-forward window under "sampled", seconds.
    """

    load: float
    cdf: str | FlowSizeCDF = "web_search"
    max_flows_per_s: float = 500.0
    fast_forward: str = "exact"
    sample_every_s: float = 10.0

    def __post_init__(self) -> None:
        if not (isinstance(self.load, int | float) and 0 <= self.load <= 1):
            raise ConfigError(f"background load must be in [0, 1], got {self.load!r} (background.load)")
        if not (isinstance(self.max_flows_per_s, int | float) and self.max_flows_per_s > 0
                and math.isfinite(self.max_flows_per_s)):
            raise ConfigError(f"max_flows_per_s must be a positive number, got {self.max_flows_per_s!r} "
                              "(background.max_flows_per_s)")
        if self.fast_forward not in ("exact", "sampled"):
            raise ConfigError(f"fast_forward must be 'exact' or 'sampled', got {self.fast_forward!r} "
                              "(background.fast_forward)")
        if not (isinstance(self.sample_every_s, int | float) and self.sample_every_s > 0
                and math.isfinite(self.sample_every_s)):
            raise ConfigError(f"sample_every_s must be a positive time, got {self.sample_every_s!r} "
                              "(background.sample_every_s)")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobRecord:
    """What one job did.

    Attributes:
        name, tenant: Labels.
        kind: "training" or "inference".
        submit_s: Submission, seconds.
        start_s: Start (placement), seconds; None if it never started before the horizon.
        finish_s: End, seconds; None if unfinished at the horizon.
        gpus: GPU ids it ran on (empty if it never started).
        iterations_planned: Iterations (training) or request batches (inference, known at start;
            0 if it never started).
        iteration_end_s: ``float64[i]``: end of each completed iteration / batch, seconds.
        iteration_s: ``float64[i]``: duration of each completed iteration (from the previous end,
            or the start), or latency of each batch (close of the batch to its end), seconds.
        compute_only_iteration_s: Critical path of one iteration with communication taking no time
            (inference: mean over its batches of prefill + decode compute), seconds.
        solo_iteration_s: Iteration time alone on the idle fabric at ``collective`` fidelity
            (measured only at ``phase`` fidelity for training jobs; None otherwise), seconds.
        gpu_busy_s: GPU-seconds spent computing in the completed iterations / batches.
        fast_forwarded_iterations: Iterations advanced by fast-forward (``phase`` fidelity).
    """

    name: str
    tenant: str
    kind: str
    submit_s: float
    start_s: float | None
    finish_s: float | None
    gpus: tuple[int, ...]
    iterations_planned: int
    iteration_end_s: np.ndarray
    iteration_s: np.ndarray
    compute_only_iteration_s: float
    solo_iteration_s: float | None
    gpu_busy_s: float
    fast_forwarded_iterations: int


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ClusterResult:
    """Raw records of a cluster run.

    Attributes:
        jobs: One record per job, in the order given.
        horizon_s: The horizon, seconds.
        fidelity, placer, router: What ran.
        seed: The seed.
        link_bytes: ``float64[L]``: bytes each directed link carried up to the horizon.
        util_tiers: Names of the link tiers.
        util_tier_capacity_bytes_per_s: ``float64[T]``: total capacity of each tier.
        util_bin_edges_s: ``float64[B + 1]``: time bins of the utilization series, seconds.
        util_by_tier: ``float64[T, B]``: bytes carried by each tier in each bin over its capacity
            times the bin width (0..1).
        background_aggregation: ``k``: real flows each background flow stands for.
        background_start_s, background_size_bytes, background_finish_s: ``float64[F]`` per
            background flow (finish ``nan`` if unfinished at the horizon).
        background_src_server, background_dst_server: ``int32[F]``.
        num_events: Engine events (flow ends, coflow starts and ends).
        num_coflows: Coflows added to the engine.
        num_rate_updates: Rate recomputations of the engine.
        wall_s: Wall-clock time of the run, seconds.
        controller: Name of the online controller ("none" without one).
        controller_issues: Decisions that failed (the controller raised or returned an invalid
            decision), each with its decision point and what the run did.
        stopped_at_s: When a failed decision stopped the run (``on_controller_error="stop"``;
            the records then end with the utilization bin it fell in), else None.
        num_decisions: Decision points the controller was asked at.
        decision_wall_s: Wall-clock time spent in the controller, seconds.
    """

    jobs: tuple[JobRecord, ...]
    horizon_s: float
    fidelity: str
    placer: str
    router: str
    seed: int
    link_bytes: np.ndarray
    util_tiers: tuple[str, ...]
    util_tier_capacity_bytes_per_s: np.ndarray
    util_bin_edges_s: np.ndarray
    util_by_tier: np.ndarray
    background_aggregation: int
    background_start_s: np.ndarray
    background_size_bytes: np.ndarray
    background_finish_s: np.ndarray
    background_src_server: np.ndarray
    background_dst_server: np.ndarray
    num_events: int
    num_coflows: int
    num_rate_updates: int
    wall_s: float
    controller: str = "none"
    controller_issues: tuple[ControllerIssue, ...] = ()
    stopped_at_s: float | None = None
    num_decisions: int = 0
    decision_wall_s: float = 0.0

    def censored_jct_s(self) -> np.ndarray:
        """``float64[n]``: completion time of each job submitted before the horizon, one still
        unfinished then counted up to it (``min(finish, horizon) - submit``: a lower bound, so that
        leaving jobs unfinished never looks faster), seconds."""
        h = self.horizon_s
        return np.array([min(h if j.finish_s is None else j.finish_s, h) - j.submit_s
                         for j in self.jobs if j.submit_s < h], dtype=np.float64)

    def job(self, name: str) -> JobRecord:
        """The record of job ``name``."""
        for j in self.jobs:
            if j.name == name:
                return j
        raise ConfigError(f"no job named {name!r} in the result (name)")


# ---- link tiers ---------------------------------------------------------------------------------
_TIER_NAMES = {1: "host-leaf", 2: "leaf-spine", 3: "spine-core", 4: "core-up"}


def _link_tiers(fabric: Fabric) -> tuple[tuple[str, ...], np.ndarray]:
    """Names of the tiers present and the tier index of every directed link."""
    kind = np.asarray(fabric.link_kind)
    lo = np.minimum(fabric.node_tier[fabric.link_src], fabric.node_tier[fabric.link_dst]).astype(np.int64)
    label = np.where(kind == LinkKind.NVLINK, -2, np.where(kind == LinkKind.PCIE, -1, lo))
    names = []
    codes = np.unique(label)
    for c in codes.tolist():
        names.append("nvlink" if c == -2 else "pcie" if c == -1 else _TIER_NAMES.get(c, f"tier{c}"))
    return tuple(names), np.searchsorted(codes, label)


# ---- background ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Background:
    start_s: np.ndarray
    src_server: np.ndarray
    dst_server: np.ndarray
    size_bytes: np.ndarray
    src_gpu: np.ndarray
    dst_gpu: np.ndarray
    routes: Routes
    k: int
    link_ptr: np.ndarray  # CSR link -> arrival times (sorted)
    link_times: np.ndarray


def _server_bytes_per_s(fabric: Fabric) -> float:
    """Mean scale-out bandwidth of a server: NIC network capacity out of the NICs behind its GPUs."""
    nic_link = (fabric.link_kind == LinkKind.NETWORK) & (fabric.node_tier[fabric.link_src] == 1)
    total = float(fabric.link_capacity_bytes_per_s[nic_link].sum())
    return total / max(fabric.num_servers, 1)


def _make_background(spec: BackgroundSpec, fabric: Fabric, router, horizon_s: float,
                     rng: np.random.Generator) -> _Background | None:
    num_servers = fabric.num_servers
    bw = _server_bytes_per_s(fabric)
    if spec.load == 0 or bw <= 0:
        return None
    if num_servers < 2:
        raise ConfigError(f"background traffic needs >= 2 servers, the fabric has {num_servers} "
                          "(background.load)")
    proc = BackgroundTraffic(load=float(spec.load), num_servers=num_servers, server_bytes_per_s=bw,
                             until_s=horizon_s, cdf=spec.cdf)
    rate = proc.arrival_rate_per_s
    k = max(1, math.ceil(rate / spec.max_flows_per_s))
    if k == 1:
        fl = proc.generate(rng)
        t, src, dst, size = fl.start_s, fl.src_server, fl.dst_server, fl.size_bytes.astype(np.float64)
    else:
        from flowherd.workload.arrivals import poisson_times

        t = poisson_times(rng, rate / k, horizon_s, start_s=0.0)
        n = len(t)
        src = rng.integers(0, num_servers, size=n)
        dst = (src + rng.integers(1, num_servers, size=n)) % num_servers
        dist = proc.distribution
        if k <= _EXACT_SUM_MAX:
            size = dist.sample(rng, n * k).reshape(n, k).sum(axis=1)
        else:
            mu, var = _cdf_moments(dist)
            size = k * mu + math.sqrt(k * var) * rng.standard_normal(n)
        size = np.maximum(1.0, np.rint(size))
    n = len(t)
    gps = np.bincount(fabric.gpu_server, minlength=num_servers)
    first = np.concatenate(([0], np.cumsum(gps)[:-1]))
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    sg = first[src] + (rng.random(n) * gps[src]).astype(np.int64)
    dg = first[dst] + (rng.random(n) * gps[dst]).astype(np.int64)
    routes = (router.route(sg.astype(np.int32), dg.astype(np.int32), np.arange(n, dtype=np.int64))
              if n else Routes.concat([]))
    lens = np.diff(routes.ptr)
    flow_of = np.repeat(np.arange(n), lens)
    lnk = np.asarray(routes.link, dtype=np.int64)
    order = np.lexsort((t[flow_of], lnk))
    link_ptr = np.zeros(fabric.num_directed_links + 1, np.int64)
    np.cumsum(np.bincount(lnk, minlength=fabric.num_directed_links), out=link_ptr[1:])
    return _Background(start_s=np.asarray(t, dtype=np.float64), src_server=src.astype(np.int32),
                       dst_server=dst.astype(np.int32), size_bytes=np.asarray(size, dtype=np.float64),
                       src_gpu=sg, dst_gpu=dg, routes=routes, k=k, link_ptr=link_ptr,
                       link_times=t[flow_of][order])


def _cdf_moments(dist: FlowSizeCDF) -> tuple[float, float]:
    """Mean and variance of the piecewise-linear law (uniform on each segment), bytes and bytes^2."""
    x, f = dist.size_bytes, dist.cdf
    p = np.diff(f)
    a, b = x[:-1], x[1:]
    m1 = float(np.sum(p * (a + b) / 2) + x[0] * f[0])
    m2 = float(np.sum(p * (a * a + a * b + b * b) / 3) + x[0] ** 2 * f[0])
    return m1, max(0.0, m2 - m1 * m1)


# ---- job runs ------------------------------------------------------------------------------------
class _Run:
    """A job's mutable state during the run."""

    def __init__(self, sim: _Cluster, index: int, req: JobRequest):
        self.sim = sim
        self.index = index
        self.req = req
        self.spec = req.spec
        self.kind = "training" if isinstance(req.spec, TrainingJob) else "inference"
        self.gpus = _NO
        self.start_s: float | None = None
        self.finish_s: float | None = None
        self.ends: list[np.ndarray] = []
        self.durations: list[np.ndarray] = []
        self.done_iters = 0
        self.planned = 0
        self.compute_only_s = 0.0
        self.busy_per_iter = 0.0
        self.busy_s = 0.0
        self.solo_s: float | None = None
        self.ff_iters = 0
        self.footprint = _NO
        self.pinned: np.ndarray | None = None
        # fast-forward window: (t0, T, k, generation)
        self.ff: tuple[float, float, int] | None = None
        self.ff_gen = 0
        self.solo_link_idx = _NO
        self.solo_link_bytes = np.zeros(0)
        self.delay_link_idx = _NO
        self.delay_link_bytes = np.zeros(0)
        self.bg_times = np.zeros(0)
        self.graph: PreparedGraph | None = None
        self.groups: tuple[str, ...] | None = None
        self.last_end = 0.0
        self.last_sim_s: float | None = None  # duration of the last simulated iteration
        self.sample_due = True

    # -- training --------------------------------------------------------------------------------
    def start_training(self, now: float) -> None:
        sim = self.sim
        spec: TrainingJob = self.spec
        mapping = rank_to_gpu(spec, self.gpus, sim.gpus_per_server, gpu_server=sim.fabric.gpu_server)
        graph = spec.iteration_graph(Granularity.STAGE)
        self.graph = prepare_graph(graph, mapping, sim.cache)
        self.groups = tuple(t.group for t in graph.tasks)
        self.compute_only_s = self.graph.compute_only_s
        self.busy_per_iter = self.graph.gpu_busy_s
        self.planned = spec.iterations
        self.footprint = self.graph.footprint_links
        self.last_end = now
        if sim.fidelity == "phase":
            self._probe_solo()
            if sim.bg is not None and self.footprint.size:
                b = sim.bg
                parts = [b.link_times[b.link_ptr[lnk]:b.link_ptr[lnk + 1]] for lnk in self.footprint.tolist()]
                self.bg_times = np.unique(np.concatenate(parts)) if parts else np.zeros(0)

    def begin_training(self, now: float) -> None:
        self._next_iteration(now)

    def _probe_solo(self) -> None:
        sim = self.sim
        eng = Engine(sim.fabric, sim.router, record_flows=False)
        ids: list[int] = []
        add_graph(eng, self.graph, fidelity="collective", at_s=0.0, task_ids=ids)
        eng.run()
        self.solo_s = float(eng.now_s)
        lb = eng.link_bytes_now()
        idx = np.flatnonzero(lb)
        self.solo_link_idx, self.solo_link_bytes = idx, lb[idx]
        # the phase form: NVLink-only and compute tasks as delays of their solo durations
        fin = eng.result().coflow_finish_s[ids]
        tasks = self.graph.tasks
        ready = np.array([max((fin[d] for d in t.deps), default=0.0) for t in tasks])
        nvlink = sim.fabric.link_kind == LinkKind.NVLINK
        exclusive = np.array([t.routes is None or bool(np.all(nvlink[t.routes.link])) for t in tasks])
        self.graph = contract_graph(self.graph, fin - ready, exclusive)
        self.groups = None  # contracted: task indices no longer those of the op graph
        # bytes the delays stand for, credited to their links at the end of each simulated iteration
        lb = np.zeros(sim.fabric.num_directed_links)
        for t, ex in zip(tasks, exclusive.tolist(), strict=True):
            if ex and t.routes is not None:
                lens = np.diff(t.routes.ptr)
                np.add.at(lb, t.routes.link, np.repeat(t.size_bytes, lens) * t.routes.frac)
        idx = np.flatnonzero(lb)
        self.delay_link_idx, self.delay_link_bytes = idx, lb[idx]

    def _next_iteration(self, now: float) -> None:
        sim = self.sim
        left = self.planned - self.done_iters
        if left <= 0:
            sim.finish(self, now)
            return
        if sim.fidelity == "phase" and self.solo_s is not None and self.solo_s > 0:
            period = self.solo_s
            if sim.sampled and np.any(sim.fabric.link_kind[self.footprint] != LinkKind.NVLINK):
                k = 0 if self.sample_due or self.last_sim_s is None else self._ff_sampled(left)
                period = self.last_sim_s or self.solo_s
            else:
                k = self._ff_window(now, left)
            if k >= 1:
                self.ff = (now, period, k)
                self.sample_due = True
                gen = self.ff_gen
                sim.engine.add_coflow(_NO, _NO, _NO, delay_s=k * period, name=f"{self.req.name}/ff",
                                      on_done=lambda _c, t, g=gen: self._ff_done(t, g))
                return
        fid = "collective" if sim.fidelity == "phase" else sim.fidelity
        if sim.hook is not None:  # tasks launched as their dependencies end, the controller asked
            sim.hook.add_graph(self.graph, job=self.req.name, fidelity=fid,
                               name=f"{self.req.name}/it{self.done_iters}", on_done=self._iteration_done,
                               groups=self.groups)
            return
        add_graph(sim.engine, self.graph, fidelity=fid, name=f"{self.req.name}/it{self.done_iters}",
                  on_done=self._iteration_done)

    def _ff_window(self, now: float, left: int) -> int:
        sim = self.sim
        fp = self.footprint
        if fp.size:
            if np.any(sim.owners[fp] > 1) or sim.engine.active_flows_on(fp):
                return 0
            if self.bg_times.size:
                i = int(np.searchsorted(self.bg_times, now, side="left"))
                if i < self.bg_times.size:
                    return min(left, math.floor((self.bg_times[i] - now) / self.solo_s))
        return left

    def _ff_sampled(self, left: int) -> int:
        if np.any(self.sim.owners[self.footprint] > 1):
            return 0
        return min(left, max(1, math.floor(self.sim.bg_spec.sample_every_s / self.last_sim_s)))

    def _ff_done(self, t: float, gen: int) -> None:
        if gen != self.ff_gen or self.ff is None:
            return  # a window cut short: its replacement calls back
        self._close_ff(t)
        self._next_iteration(t)

    def _close_ff(self, t: float) -> None:
        t0, T, k = self.ff
        ends = t0 + T * np.arange(1, k + 1)
        ends[-1] = t
        self._record(ends, np.full(k, T))
        self.ff_iters += k
        self.sim.credit_ff(self, t0, t0 + k * T, k)
        self.ff = None

    def interrupt(self, now: float) -> None:
        """Another job starts on this job's links: end the window with the current iteration."""
        if self.ff is None:
            return
        t0, T, k = self.ff
        cur = math.floor((now - t0) / T) + 1  # the iteration in progress
        if cur >= k:
            return  # the window ends with this iteration anyway
        self.ff = (t0, T, cur)
        self.ff_gen += 1
        gen = self.ff_gen
        self.sim.engine.add_coflow(_NO, _NO, _NO, delay_s=max(0.0, t0 + cur * T - now),
                                   name=f"{self.req.name}/ff-cut",
                                   on_done=lambda _c, t, g=gen: self._ff_done(t, g))

    def _iteration_done(self, _cid: int, t: float) -> None:
        self.last_sim_s = t - self.last_end
        self.sample_due = False
        if self.delay_link_idx.size:
            self.sim.ff_bytes[self.delay_link_idx] += self.delay_link_bytes
        self._record(np.array([t]), np.array([t - self.last_end]))
        self._next_iteration(t)

    def _record(self, ends: np.ndarray, durations: np.ndarray) -> None:
        self.ends.append(ends)
        self.durations.append(durations)
        self.done_iters += len(ends)
        self.busy_s += self.busy_per_iter * len(ends)
        self.last_end = float(ends[-1])

    # -- inference -------------------------------------------------------------------------------
    def start_inference(self, now: float) -> None:
        sim = self.sim
        spec: InferenceJob = self.spec
        mapping = rank_to_gpu(spec, self.gpus, sim.gpus_per_server, gpu_server=sim.fabric.gpu_server)
        arr = spec.request_arrivals(sim.job_rng(self.index)) - spec.submit_s + now
        closes, sizes = spec.batch_requests(arr)
        self.planned = len(closes)
        self.window_end = now + spec.duration_s
        self.batches_left = len(closes)
        self.batch_close = closes
        self.busy_of: dict[int, float] = {}
        n_dec = spec.decode_instances if spec.disaggregated else spec.instances
        graphs: dict[tuple, PreparedGraph] = {}
        fp: list[np.ndarray] = []

        def prep(key, make, *args, **kw):
            if key not in graphs:
                graphs[key] = prepare_graph(make(*args, **kw), mapping, sim.cache)
                fp.append(graphs[key].footprint_links)
            return graphs[key]

        last_prefill: dict[int, int] = {}
        last_decode: dict[int, int] = {}
        co = []
        fid = "collective" if sim.fidelity == "phase" else sim.fidelity
        for b, (close, size) in enumerate(zip(closes.tolist(), sizes.tolist(), strict=True)):
            size = int(size)
            p, d = b % spec.instances, b % n_dec
            pg = prep(("p", size, p), spec.prefill_graph, size, replica=p)
            dg = prep(("d", size, d), spec.decode_graph, size, replica=d, steps=spec.output_tokens)
            after = (last_prefill[p],) if p in last_prefill else ()
            end = add_graph(sim.engine, pg, fidelity=fid, at_s=close, after=after,
                            name=f"{self.req.name}/b{b}/prefill")
            last_prefill[p] = end
            if spec.disaggregated:
                kg = prep(("k", size, p, d), spec.kv_transfer_graph, size, src=p, dst=d)
                end = add_graph(sim.engine, kg, fidelity=fid, after=(end,), name=f"{self.req.name}/b{b}/kv")
            after = (end,) + ((last_decode[d],) if d in last_decode else ())
            end = add_graph(sim.engine, dg, fidelity=fid, after=after, name=f"{self.req.name}/b{b}/decode",
                            on_done=lambda _c, t, b=b: self._batch_done(b, t))
            last_decode[d] = end
            co.append(pg.compute_only_s + dg.compute_only_s)
            self.busy_of[b] = pg.gpu_busy_s + dg.gpu_busy_s
        self.compute_only_s = float(np.mean(co)) if co else 0.0
        self.footprint = np.unique(np.concatenate(fp)) if fp else _NO
        # the service ends when its window is over (and its last batch is done)
        sim.engine.add_coflow(_NO, _NO, _NO, at_s=self.window_end, name=f"{self.req.name}/window",
                              on_done=lambda _c, t: self._maybe_end(t))

    def _batch_done(self, b: int, t: float) -> None:
        self.ends.append(np.array([t]))
        self.durations.append(np.array([t - self.batch_close[b]]))
        self.done_iters += 1
        self.busy_s += self.busy_of[b]
        self.batches_left -= 1
        self._maybe_end(t)

    def _maybe_end(self, t: float) -> None:
        if self.finish_s is None and self.batches_left == 0 and t >= self.window_end - 1e-12:
            self.sim.finish(self, t)

    # -- result ----------------------------------------------------------------------------------
    def record(self, horizon_s: float) -> JobRecord:
        ends = np.concatenate(self.ends) if self.ends else np.zeros(0)
        durs = np.concatenate(self.durations) if self.durations else np.zeros(0)
        busy = self.busy_s
        ff_iters = self.ff_iters
        if self.ff is not None:  # a window still open at the horizon: its iterations so far
            t0, T, k = self.ff
            m = min(k, math.floor((horizon_s - t0) / T + 1e-9))
            if m > 0:
                ends = np.concatenate([ends, t0 + T * np.arange(1, m + 1)])
                durs = np.concatenate([durs, np.full(m, T)])
                busy += self.busy_per_iter * m
                ff_iters += m
        if self.kind == "inference" and ends.size:
            order = np.argsort(ends, kind="stable")
            ends, durs = ends[order], durs[order]
        return JobRecord(name=self.req.name, tenant=self.req.tenant, kind=self.kind,
                         submit_s=float(self.req.submit_s), start_s=self.start_s, finish_s=self.finish_s,
                         gpus=tuple(int(g) for g in self.gpus), iterations_planned=int(self.planned),
                         iteration_end_s=ends, iteration_s=durs,
                         compute_only_iteration_s=float(self.compute_only_s), solo_iteration_s=self.solo_s,
                         gpu_busy_s=float(busy), fast_forwarded_iterations=int(ff_iters))


class _Cluster:
    """The run: engine, GPUs, queue, footprints, background."""

    def __init__(self, fabric: Fabric, jobs: Sequence[JobRequest], *, placer: Placer, fidelity: str,
                 router, bg: _Background | None, seed: int, placements: Mapping[str, np.ndarray],
                 bg_spec: BackgroundSpec | None = None, planned_start: Mapping[str, float] | None = None):
        self.fabric = fabric
        self.router = router
        self.engine = Engine(fabric, router, record_flows=False)
        self.cache = CollectiveCache(fabric, router)
        self.placer = placer
        self.fidelity = fidelity
        self.bg = bg
        self.bg_spec = bg_spec
        self.sampled = bg is not None and bg_spec is not None and bg_spec.fast_forward == "sampled"
        self.seed = seed
        gps = np.bincount(fabric.gpu_server)
        self.gpus_per_server = int(gps.max()) if gps.size else 1
        self.free = np.ones(fabric.num_gpus, dtype=bool)
        self.owners = np.zeros(fabric.num_directed_links, np.int64)
        self.queue: deque[_Run] = deque()
        self.runs = [_Run(self, i, r) for i, r in enumerate(jobs)]
        for r in self.runs:
            if r.req.name in placements:
                r.pinned = placements[r.req.name]
        # a plan's order on every GPU (module docstring): self.gpu_seq[g] holds the indices of the
        # jobs GPU g still has to run, by planned start
        self.planned = planned_start is not None
        if self.planned:
            ranked = sorted(self.runs, key=lambda r: (float(planned_start[r.req.name]), r.req.submit_s,
                                                      r.index))
            self.gpu_seq: list[deque[int]] = [deque() for _ in range(fabric.num_gpus)]
            for r in ranked:
                for g in r.pinned.tolist():
                    self.gpu_seq[g].append(r.index)
        self.running: list[_Run] = []
        self.ff_bytes = np.zeros(fabric.num_directed_links)
        self._seeds = np.random.SeedSequence(seed).spawn(len(jobs))
        self.hook: ControlHook | None = None

    def job_rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng(self._seeds[index])

    def submit(self, run: _Run, now: float) -> None:
        self.queue.append(run)
        self.serve(now)

    def serve(self, now: float) -> None:
        if self.planned:  # a plan: every GPU keeps its planned order (module docstring)
            for run in list(self.queue):
                g = run.pinned.tolist()
                if all(self.free[x] and self.gpu_seq[x][0] == run.index for x in g):
                    self.queue.remove(run)
                    for x in g:
                        self.gpu_seq[x].popleft()
                    self._start(run, run.pinned, now)
            return
        while self.queue:
            run = self.queue[0]
            if run.pinned is not None:
                gpus = run.pinned if bool(np.all(self.free[run.pinned])) else None
            else:
                gpus = self.placer.place(run.spec, self.free.copy(), self.fabric)
            if gpus is None:
                return
            self.queue.popleft()
            self._start(run, np.asarray(gpus, dtype=np.int64), now)

    def _start(self, run: _Run, gpus: np.ndarray, now: float) -> None:
        self._check_placement(run, gpus)
        self.free[gpus] = False
        run.gpus = gpus
        run.start_s = now
        self.running.append(run)
        if run.kind == "training":
            run.start_training(now)
        else:
            run.start_inference(now)
        if run.footprint.size:
            self.owners[run.footprint] += 1
            shared = run.footprint[self.owners[run.footprint] > 1]
            if shared.size:
                for other in self.running:
                    if other is not run and other.ff is not None and other.footprint.size \
                            and np.intersect1d(other.footprint, shared, assume_unique=True).size:
                        other.interrupt(now)
        if run.kind == "training":
            if self.hook is not None:
                g = run.graph
                tot = sum(float(t.size_bytes.sum()) for t in g.tasks if t.routes is not None)
                self.hook.job_started(run.req.name, now_s=now, num_gpus=len(gpus),
                                      compute_flops_per_iteration=float(run.spec.iteration_flops()),
                                      comm_bytes_per_iteration=tot, link_idx=run.footprint,
                                      iterations_total=int(run.planned))
            run.begin_training(now)

    def _check_placement(self, run: _Run, gpus: np.ndarray) -> None:
        n = run.spec.world_size
        if gpus.shape != (n,) or np.unique(gpus).size != n or gpus.min() < 0 \
                or gpus.max() >= self.fabric.num_gpus or not np.all(self.free[gpus]):
            raise ConfigError(f"placer {getattr(self.placer, 'name', self.placer)!r} returned "
                              f"{gpus.tolist()[:16]} for job {run.req.name!r}; expected {n} distinct free "
                              f"GPU ids (placement)")

    def finish(self, run: _Run, now: float) -> None:
        run.finish_s = now
        if self.hook is not None:
            self.hook.job_finished(run.req.name, now_s=now)
        if run in self.running:
            self.running.remove(run)
            if run.footprint.size and run.start_s is not None:
                self.owners[run.footprint] -= 1
        self.free[run.gpus] = True
        self.serve(now)

    def credit_ff(self, run: _Run, a: float, b: float, k: int) -> None:
        if self.hook is not None:
            self.hook.iterations_advanced(run.req.name, k)
        if run.solo_link_idx.size:
            self.ff_bytes[run.solo_link_idx] += run.solo_link_bytes * k

    def link_bytes_now(self, now: float) -> np.ndarray:
        out = self.engine.link_bytes_now() + self.ff_bytes
        for r in self.running:
            if r.ff is not None and r.solo_link_idx.size:
                t0, T, k = r.ff
                frac = min(k, max(0.0, (now - t0) / T))
                out[r.solo_link_idx] += r.solo_link_bytes * frac
        return out


def simulate_cluster(fabric: Fabric, jobs: Sequence[JobRequest], *, placer: str | Placer = "first-fit",
                     fidelity: str = "collective", horizon_s: float, router: str | Any = "ecmp",
                     background: BackgroundSpec | None = None, seed: int = 0,
                     progress: Callable[[float], None] | None = None,
                     placements: Mapping[str, Sequence[int]] | None = None,
                     utilization_bin_s: float | None = None, controller=None,
                     on_controller_error: str = "skip",
                     planned_start: Mapping[str, float] | None = None) -> ClusterResult:
    """Run ``jobs`` on ``fabric`` up to ``horizon_s`` (module docstring for the model).

    Args:
        fabric: The network; GPUs are nodes ``0 .. num_gpus - 1``.
        jobs: The jobs; names must be unique.
        placer: A `flowherd.sim.placement.PLACERS` name or a `Placer`.
        fidelity: "step", "collective" or "phase".
        horizon_s: End of the simulation, seconds (jobs unfinished then get ``finish_s`` None).
        router: A routing policy name (`flowherd.routing.policies.ROUTERS`), or a Router object
            (e.g. an `ExplicitRouter` with a plan's routes).
        background: Background traffic, or None.
        seed: Seeds the router's hashing, the background flows and the inference requests.
        progress: Called with the simulated time after each utilization bin.
        placements: GPUs to pin jobs to, by job name (e.g. the same job alone, for slowdowns).
        utilization_bin_s: Width of the utilization bins, seconds (default ``horizon_s / 100``).
        controller: An online controller (`flowherd.sim.control_api.Controller`; names are
            resolved by `flowherd.control.make_controller`), asked before every communication
            task of a training iteration starts (delay, weight, priority, route choice) and when a
            training job starts or ends; None: no control. Inference jobs and fast-forwarded
            iterations are not controlled.
        on_controller_error: What a controller that raises or returns an invalid decision does
            to the run: "skip" (go on without that decision) or "stop" (end the run cleanly at the
            end of that utilization bin); either way it is reported in ``controller_issues``.
        planned_start: A plan's start time of every job, seconds, by job name (every job must
            then be pinned by ``placements``): the jobs keep the plan's order on every GPU
            instead of the FIFO queue (module docstring). None: FIFO.

    Returns:
        The raw records.

    Raises:
        ConfigError: duplicate job names, a job larger than the cluster, a bad placement, an
            unknown placer / router / fidelity, a non-positive horizon.
    """
    wall0 = time.perf_counter()
    fid = CLUSTER_FIDELITIES[fidelity]
    if not (isinstance(horizon_s, int | float) and math.isfinite(horizon_s) and horizon_s > 0):
        raise ConfigError(f"horizon_s must be a positive finite time, got {horizon_s!r} (simulation.horizon)")
    bin_s = horizon_s / 100 if utilization_bin_s is None else utilization_bin_s
    if not (isinstance(bin_s, int | float) and math.isfinite(bin_s) and bin_s > 0):
        raise ConfigError(f"utilization_bin_s must be a positive time, got {bin_s!r} (utilization_bin_s)")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ConfigError(f"seed must be an integer, got {seed!r} (seed)")
    jobs = list(jobs)
    names: set[str] = set()
    for i, j in enumerate(jobs):
        if not isinstance(j, JobRequest):
            raise ConfigError(f"jobs[{i}] must be a JobRequest, got {type(j).__name__} (jobs[{i}])")
        if j.name in names:
            raise ConfigError(f"job names must be unique, got {j.name!r} twice (jobs[{i}].name)")
        names.add(j.name)
        if j.spec.world_size > fabric.num_gpus:
            raise ConfigError(f"job {j.name!r} needs {j.spec.world_size} GPUs but the fabric has "
                              f"{fabric.num_gpus} (jobs[{i}].gpus)")
    pins: dict[str, np.ndarray] = {}
    for name, gpus in (placements or {}).items():
        if name not in names:
            raise ConfigError(f"placements names unknown job {name!r}; expected one of "
                              f"{sorted(names)[:8]} (placements)")
        g = np.asarray(gpus, dtype=np.int64).ravel()
        n = next(j.spec.world_size for j in jobs if j.name == name)
        if g.size != n or np.unique(g).size != n or g.min() < 0 or g.max() >= fabric.num_gpus:
            raise ConfigError(f"placement of job {name!r} must be {n} distinct GPU ids in "
                              f"0..{fabric.num_gpus - 1}, got {g.tolist()[:16]} (placements.{name})")
        pins[name] = g
    if planned_start is not None:
        missing = sorted(names - set(pins))
        if missing:
            raise ConfigError(f"a plan's order needs every job pinned; no placement for {missing[:8]} "
                              "(placements)")
        for name, v in planned_start.items():
            if name not in names:
                raise ConfigError(f"planned_start names unknown job {name!r}; expected one of "
                                  f"{sorted(names)[:8]} (planned_start)")
            if isinstance(v, bool) or not isinstance(v, int | float | np.floating) or not math.isfinite(v):
                raise ConfigError(f"planned start of job {name!r} must be a finite time in seconds, "
                                  f"got {v!r} (planned_start.{name})")
        missing = sorted(names - set(planned_start))
        if missing:
            raise ConfigError(f"planned_start lacks jobs {missing[:8]}; expected a start for every job "
                              "(planned_start)")
    plc = make_placer(placer)
    # a Router object (e.g. the planner's ExplicitRouter) is used as given
    rtr = make_router(router, fabric, seed=int(seed)) if isinstance(router, str) else router
    seq = np.random.SeedSequence(int(seed))
    bg_rng = np.random.default_rng(seq.spawn(1)[0])
    bg = _make_background(background, fabric, rtr, float(horizon_s), bg_rng) if background else None

    sim = _Cluster(fabric, jobs, placer=plc, fidelity=fid, router=rtr, bg=bg, seed=int(seed),
                   placements=pins, bg_spec=background, planned_start=planned_start)
    eng = sim.engine
    if on_controller_error not in ON_CONTROLLER_ERROR:
        raise ConfigError(f"on_controller_error must be one of {ON_CONTROLLER_ERROR}, got "
                          f"{on_controller_error!r} (controller.on_error)")
    if controller is not None:
        sim.hook = ControlHook(controller, fabric, eng, on_error=on_controller_error, seed=int(seed))
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
    for i in order:
        run = sim.runs[i]
        if run.req.submit_s <= horizon_s:
            eng.add_coflow(_NO, _NO, _NO, at_s=float(run.req.submit_s), name=f"{run.req.name}/submit",
                           on_done=lambda _c, t, r=run: sim.submit(r, t))
    tiers, link_tier = _link_tiers(fabric)
    cap = np.bincount(link_tier, weights=fabric.link_capacity_bytes_per_s, minlength=len(tiers))
    nbins = max(1, math.ceil(horizon_s / bin_s - 1e-9))
    edges = np.minimum(np.arange(nbins + 1) * bin_s, horizon_s)
    edges[-1] = horizon_s
    cum = np.zeros((len(tiers), nbins + 1))
    bg_ids = np.zeros(len(bg.start_s) if bg else 0, np.int64)
    bg_next = 0
    for b in range(nbins):
        t_end = float(edges[b + 1])
        if bg is not None:  # add the background flows of this bin
            stop = int(np.searchsorted(bg.start_s, t_end, side="right" if b == nbins - 1 else "left"))
            if stop > bg_next:  # one batch per bin: one check, one copy
                ptr, r = bg.routes.ptr, bg.routes
                lo, hi = int(ptr[bg_next]), int(ptr[stop])
                rows = Routes(ptr=ptr[bg_next:stop + 1] - lo, link=r.link[lo:hi], frac=r.frac[lo:hi],
                              latency_s=r.latency_s[bg_next:stop])
                sl = slice(bg_next, stop)
                bg_ids[sl] = eng.add_flows(bg.src_gpu[sl], bg.dst_gpu[sl], bg.size_bytes[sl],
                                           at_s=bg.start_s[sl], routes=rows, name="bg")
            bg_next = stop
        eng.run(until_s=t_end)
        cum[:, b + 1] = np.bincount(link_tier, weights=sim.link_bytes_now(t_end), minlength=len(tiers))
        if progress is not None:
            progress(t_end)
        if sim.hook is not None and sim.hook.stopped_at_s is not None:
            edges, cum = edges[:b + 2], cum[:, :b + 2]
            break
    width = np.diff(edges)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.diff(cum, axis=1) / (cap[:, None] * width[None, :])
    util = np.nan_to_num(util)
    res = eng.result()
    if bg is not None:
        fin = res.coflow_finish_s[bg_ids[:bg_next]]
        bg_fin = np.concatenate([fin, np.full(len(bg.start_s) - bg_next, np.nan)])
    else:
        bg_fin = np.zeros(0)
    end_s = float(edges[-1])
    records = tuple(r.record(end_s) for r in sim.runs)
    return ClusterResult(
        jobs=records, horizon_s=float(horizon_s), fidelity=fid,
        placer=getattr(plc, "name", type(plc).__name__),
        router=router if isinstance(router, str) else getattr(router, "name", "custom"), seed=int(seed),
        link_bytes=sim.link_bytes_now(end_s), util_tiers=tiers,
        util_tier_capacity_bytes_per_s=cap, util_bin_edges_s=edges, util_by_tier=util,
        background_aggregation=bg.k if bg else 1,
        background_start_s=bg.start_s if bg else np.zeros(0),
        background_size_bytes=bg.size_bytes if bg else np.zeros(0),
        background_finish_s=bg_fin,
        background_src_server=bg.src_server if bg else np.zeros(0, np.int32),
        background_dst_server=bg.dst_server if bg else np.zeros(0, np.int32),
        num_events=eng.num_events, num_coflows=eng.num_coflows, num_rate_updates=eng.num_rate_updates,
        wall_s=time.perf_counter() - wall0,
        controller=str(getattr(controller, "name", "none")) if controller is not None else "none",
        controller_issues=tuple(sim.hook.issues) if sim.hook else (),
        stopped_at_s=sim.hook.stopped_at_s if sim.hook else None,
        num_decisions=sim.hook.num_decisions if sim.hook else 0,
        decision_wall_s=sim.hook.decide_wall_s if sim.hook else 0.0)
