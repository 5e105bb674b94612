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

Execution (`flowherd.cluster.executor`). A training job runs ``iterations`` iterations of its
``stage``-granularity op graph; iteration ``i + 1`` starts when every task of iteration ``i`` has
finished. An inference job receives Poisson requests for ``duration_s`` from its start, batches
them (`InferenceJob.batch_requests`), and runs each batch as a prefill step on prefill replica
``b mod instances``, a KV-cache transfer (disaggregated), and ``output_tokens`` decode steps on
decode replica ``b mod decode replicas``; a replica serves its batches one at a time, in order.
Its "iterations" are the batches: their end times and their latencies (close of the batch to
the end of its decode). It ends when its window is over and its last batch is done.

Fidelities: ``step`` and ``collective`` as in `flowherd.cluster.collective`; ``phase`` runs like
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
(network jobs then hardly ever fast-forward by it: background flows cross their links every
few milliseconds; with ``quiet_windows``, the default, such a job still fast-forwards exactly
while the background flows coupled to its links stay the same, `flowherd.cluster.quiet`)
and two documented approximations: ``"sampled"``, where a job alone among
background flows simulates one iteration with them, fast-forwards about ``sample_every_s`` at
that iteration's duration, simulates one again, and so on; and ``"mean"`` (stationary
background: Poisson arrivals at a constant load), where such a job fast-forwards at its mean
iteration time among the background, measured once when it starts: ``sample_every_s`` of its
iterations on a private engine with the background flows that cross its links; and ``"spread"``,
the mean rule measured at 16 stretches spread over the job's run instead of one at its start
(heavy-tailed background varies over a run more than within seconds), each on a private engine
whose links keep what the other running jobs and the background leave (the large-cluster rule,
docs/scale.md). In all three, other
jobs on its links still stop it, and background flows do not see the traffic of fast-forwarded
iterations. `benchmarks/cluster.py --bg-mode` prints their error against the exact rule.

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
result gives every simulated (aggregated) flow's size and start, ``k``, and their completion
times as a streaming summary (`flowherd.cluster.bg_stats`: FCT mean and percentiles by size
class, bytes), or, with ``background_records=True``, each flow's completion time. The engine
holds the flows in flight only: a flow that has finished gives its record to a later one
(`Engine.add_flows` ``reuse``), so millions of background flows cost the memory of their drawn
sizes and starts, not of their records.

Link utilization is kept per link tier (NVLink, PCIe, host-leaf, leaf-spine, spine-core ...) in
time bins: bytes carried in the bin over the tier's capacity times the bin width;
fast-forwarded iterations are credited with their solo per-link bytes spread evenly over their
window.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from flowherd.cluster.background import Background, link_tiers, make_background
from flowherd.cluster.bg_stats import BackgroundStats, BackgroundSummary
from flowherd.cluster.control_api import ON_CONTROLLER_ERROR, ControlHook
from flowherd.cluster.executor import CollectiveCache
from flowherd.cluster.job_run import JobRun
from flowherd.cluster.placement import Placer, make_placer
from flowherd.cluster.records import BackgroundSpec, ClusterResult, JobRecord, JobRequest
from flowherd.engine.core import Engine
from flowherd.engine.network import network_record
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.registry import Registry
from flowherd.routing.policies import make_router

__all__ = ["CLUSTER_FIDELITIES", "BackgroundSpec", "ClusterResult", "JobRecord", "JobRequest",
           "simulate_cluster"]


CLUSTER_FIDELITIES = Registry("fidelity", {"step": "step", "collective": "collective", "phase": "phase"})
_NO = np.zeros(0, np.int64)

class _Cluster:
    """The run: engine, GPUs, queue, footprints, background."""

    def __init__(self, fabric: Fabric, jobs: Sequence[JobRequest], *, placer: Placer, fidelity: str,
                 router, bg: Background | None, seed: int, placements: Mapping[str, np.ndarray],
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
        self.mean_rule = bg is not None and bg_spec is not None and bg_spec.fast_forward == "mean"
        self.spread_rule = bg is not None and bg_spec is not None and bg_spec.fast_forward == "spread"
        # quiet windows: exact fast-forward among unchanged background (`flowherd.cluster.quiet`)
        self.quiet = (bg is not None and bg_spec is not None and bg_spec.fast_forward == "exact"
                      and bg_spec.quiet_windows and self.engine.network is None)
        self.quiet_mark = np.zeros(fabric.num_directed_links, bool)
        self.held_load = np.zeros(fabric.num_directed_links)  # of flows quiet windows hold
        self.held_count = np.zeros(fabric.num_directed_links, np.int64)
        self.link_stamp = np.full(fabric.num_directed_links, -np.inf)  # last job start/end per link
        self.seed = seed
        gps = np.bincount(fabric.gpu_server)
        self.gpus_per_server = int(gps.max()) if gps.size else 1
        self.free = np.ones(fabric.num_gpus, dtype=bool)
        self.owners = np.zeros(fabric.num_directed_links, np.int64)
        self.queue: deque[JobRun] = deque()
        self.runs = [JobRun(self, i, r) for i, r in enumerate(jobs)]
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
        self.running: list[JobRun] = []
        self.ff_bytes = np.zeros(fabric.num_directed_links)
        self._seeds = np.random.SeedSequence(seed).spawn(len(jobs))
        self.hook: ControlHook | None = None
        self._bg_load: np.ndarray | None = None

    def background_load(self) -> np.ndarray:
        """``float64[L]``: every link's mean background load over the horizon, bytes/s (made once;
        the "spread" rule's probes leave it to the background they do not simulate)."""
        if self._bg_load is None:
            bg, n = self.bg, self.fabric.num_directed_links
            if bg is None or bg.routes is None or not bg.start_s.size:
                self._bg_load = np.zeros(n)
            else:
                lens = np.diff(bg.routes.ptr)
                w = np.repeat(bg.size_bytes, lens) * bg.routes.frac
                span = max(float(bg.start_s[-1]), 1e-9)
                self._bg_load = np.bincount(bg.routes.link, weights=w, minlength=n) / span
        return self._bg_load

    def job_rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng(self._seeds[index])

    def submit(self, run: JobRun, now: float) -> None:
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

    def _start(self, run: JobRun, gpus: np.ndarray, now: float) -> None:
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
            self.link_stamp[run.footprint] = now
            for other in self.running:  # a window on these links ends with its iteration
                if other is not run and other.ff is not None and other.watch.size \
                        and np.intersect1d(other.watch, run.footprint, assume_unique=True).size:
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

    def _check_placement(self, run: JobRun, gpus: np.ndarray) -> None:
        n = run.spec.world_size
        if gpus.shape != (n,) or np.unique(gpus).size != n or gpus.min() < 0 \
                or gpus.max() >= self.fabric.num_gpus or not np.all(self.free[gpus]):
            raise ConfigError(f"placer {getattr(self.placer, 'name', self.placer)!r} returned "
                              f"{gpus.tolist()[:16]} for job {run.req.name!r}; expected {n} distinct free "
                              f"GPU ids (placement)")

    def finish(self, run: JobRun, now: float) -> None:
        run.finish_s = now
        if self.hook is not None:
            self.hook.job_finished(run.req.name, now_s=now)
        if run in self.running:
            self.running.remove(run)
            if run.footprint.size and run.start_s is not None:
                self.owners[run.footprint] -= 1
                self.link_stamp[run.footprint] = now
        self.free[run.gpus] = True
        self.serve(now)

    def credit_ff(self, run: JobRun, a: float, b: float, k: int) -> None:
        if self.hook is not None:
            self.hook.iterations_advanced(run.req.name, k)
        if run.ff_link_idx.size:
            self.ff_bytes[run.ff_link_idx] += run.ff_link_bytes * k

    def link_bytes_now(self, now: float) -> np.ndarray:
        out = self.engine.link_bytes_now() + self.ff_bytes
        for r in self.running:
            if r.ff is not None and r.ff_link_idx.size:
                t0, T, k = r.ff
                frac = min(k, max(0.0, (now - t0) / T))
                out[r.ff_link_idx] += r.ff_link_bytes * frac
        return out


def simulate_cluster(fabric: Fabric, jobs: Sequence[JobRequest], *, placer: str | Placer = "first-fit",
                     fidelity: str = "collective", horizon_s: float, router: str | Any = "ecmp",
                     background: BackgroundSpec | None = None, seed: int = 0,
                     progress: Callable[[float], None] | None = None,
                     placements: Mapping[str, Sequence[int]] | None = None,
                     utilization_bin_s: float | None = None, controller=None,
                     on_controller_error: str = "skip",
                     planned_start: Mapping[str, float] | None = None,
                     link_series: bool = False, levers=None, pacing=None,
                     coflow_records: bool = False, background_records: bool = False) -> ClusterResult:
    """Run ``jobs`` on ``fabric`` up to ``horizon_s`` (module docstring for the model).

    Args:
        fabric: The network; GPUs are nodes ``0 .. num_gpus - 1``.
        jobs: The jobs; names must be unique.
        placer: A `flowherd.cluster.placement.PLACERS` name or a `Placer`.
        fidelity: "step", "collective" or "phase".
        horizon_s: End of the simulation, seconds (jobs unfinished then get ``finish_s`` None).
        router: A routing policy name (`flowherd.routing.policies.ROUTERS`), or a Router object
            (e.g. an `ExplicitRouter` with a plan's routes).
        background: Background traffic, or None.
        seed: Seeds the router's hashing, the background flows and the inference requests.
        progress: Called with the simulated time after each utilization bin.
        placements: GPUs to pin jobs to, by job name (e.g. the same job alone, for slowdowns).
        utilization_bin_s: Width of the utilization bins, seconds (default ``horizon_s / 100``).
        controller: An online controller (`flowherd.cluster.control_api.Controller`; names are
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
        link_series: Also record every link's bytes (and, under a congestion model, its ECN
            marks, pauses and drops) per utilization bin (``ClusterResult.link_bin_bytes``).
        levers: What the controller may decide (`flowherd.cluster.control_api.Levers`, a grant name
            of ``GRANTS``, or None: ``buffer``); decisions outside it are refused and reported
            in ``controller_issues`` (``refused=True``).
        pacing: Rate caps of GPU pairs (`flowherd.cluster.pacing.Pacing`, made from ``fabric``):
            the run uses its fabric (the pacers appended) and paces the jobs' flows; the
            background is not paced. None: no pacing.
        coflow_records: Also return every coflow's name, start and finish (``ClusterResult.coflow_*``).
        background_records: Also keep every background flow's finish time
            (``ClusterResult.background_finish_s``; telemetry asks for them). Without, the run
            holds the flows in flight only and ``ClusterResult.background`` summarizes their FCTs
            (`flowherd.cluster.bg_stats`): memory bounded by the flows in flight, not by all.

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
    if pacing is not None:  # host pacers (flowherd.cluster.pacing): their links join the fabric
        if pacing.base_links != fabric.num_directed_links:
            raise ConfigError(f"pacing was made for a fabric of {pacing.base_links} links, got "
                              f"{fabric.num_directed_links} (pacing)")
        fabric = pacing.fabric
    # the per-link arrival tables (and so every flow's route up front) only where fast-forward reads them
    bg = (make_background(background, fabric, rtr, float(horizon_s), bg_rng, routes=fid == "phase")
          if background else None)
    if pacing is not None:
        rtr = pacing.router(rtr)

    sim = _Cluster(fabric, jobs, placer=plc, fidelity=fid, router=rtr, bg=bg, seed=int(seed),
                   placements=pins, bg_spec=background, planned_start=planned_start)
    eng = sim.engine
    if on_controller_error not in ON_CONTROLLER_ERROR:
        raise ConfigError(f"on_controller_error must be one of {ON_CONTROLLER_ERROR}, got "
                          f"{on_controller_error!r} (controller.on_error)")
    if controller is not None:
        sim.hook = ControlHook(controller, fabric, eng, on_error=on_controller_error, seed=int(seed),
                               levers=levers, pacers=pacing.pacer_of if pacing is not None else None)
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit_s, i))
    for i in order:
        run = sim.runs[i]
        if run.req.submit_s <= horizon_s:
            eng.add_coflow(_NO, _NO, _NO, at_s=float(run.req.submit_s), name=f"{run.req.name}/submit",
                           on_done=lambda _c, t, r=run: sim.submit(r, t))
    tiers, link_tier = link_tiers(fabric)
    cap = np.bincount(link_tier, weights=fabric.link_capacity_bytes_per_s, minlength=len(tiers))
    nbins = max(1, math.ceil(horizon_s / bin_s - 1e-9))
    edges = np.minimum(np.arange(nbins + 1) * bin_s, horizon_s)
    edges[-1] = horizon_s
    cum = np.zeros((len(tiers), nbins + 1))
    net = eng.network if link_series else None
    series = [np.zeros((fabric.num_directed_links, nbins + 1)) for _ in range(1 if net is None else 5)
              ] if link_series else []
    flow_bg = _BackgroundFlows(eng, bg, background_records) if bg is not None else None
    for b in range(nbins):
        t_end = float(edges[b + 1])
        if flow_bg is not None:  # add the background flows of this bin
            flow_bg.add_until(int(np.searchsorted(bg.start_s, t_end, side="right" if b == nbins - 1
                                                  else "left")))
        eng.run(until_s=t_end)
        if flow_bg is not None:
            flow_bg.harvest()
        now_bytes = sim.link_bytes_now(t_end)
        cum[:, b + 1] = np.bincount(link_tier, weights=now_bytes, minlength=len(tiers))
        if series:
            series[0][:, b + 1] = now_bytes
            if net is not None:  # the model's running totals (NetworkModel.stats, without its series)
                series[1][:, b + 1] = net.marked + net.load * net.mark * (t_end - net.q_t)
                series[2][:, b + 1] = net.pause
                series[3][:, b + 1] = net.drops
                series[4][:, b + 1] = net.q_int + net.q * (t_end - net.q_t)  # queue integral
        if progress is not None:
            progress(t_end)
        if sim.hook is not None and sim.hook.stopped_at_s is not None:
            edges, cum = edges[:b + 2], cum[:, :b + 2]
            series = [x[:, :b + 2] for x in series]
            break
    width = np.diff(edges)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.diff(cum, axis=1) / (cap[:, None] * width[None, :])
    util = np.nan_to_num(util)
    bg_fin = np.zeros(0) if flow_bg is None else flow_bg.finish_s
    end_s = float(edges[-1])
    records = tuple(r.record(end_s) for r in sim.runs)
    res = eng.result() if coflow_records else None
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
        num_events=eng.num_events,
        num_coflows=eng.num_coflows + (0 if flow_bg is None else flow_bg.reused),
        num_rate_updates=eng.num_rate_updates,
        num_flows_reallocated=eng.num_flows_reallocated,
        wall_s=time.perf_counter() - wall0,
        controller=str(getattr(controller, "name", "none")) if controller is not None else "none",
        controller_issues=tuple(sim.hook.issues) if sim.hook else (),
        stopped_at_s=sim.hook.stopped_at_s if sim.hook else None,
        num_decisions=sim.hook.num_decisions if sim.hook else 0,
        network=None if eng.network is None else network_record(eng.network.stats(eng.now_s), fabric),
        decision_wall_s=sim.hook.decide_wall_s if sim.hook else 0.0,
        **({"coflow_name": res.coflow_name, "coflow_start_s": res.coflow_start_s,
            "coflow_finish_s": res.coflow_finish_s} if coflow_records else {}),
        background=None if flow_bg is None else flow_bg.summary(end_s),
        **_bins(series))


class _BackgroundFlows:
    """The background flows on the engine: added bin by bin into the records of the ones that
    have finished (`Engine.add_flows` ``reuse``), their FCTs taken into `BackgroundStats` as they
    finish (and their finish times kept with ``records``)."""

    def __init__(self, eng: Engine, bg: Background, records: bool):
        self.eng, self.bg = eng, bg
        self.stats = BackgroundStats(bg.k)
        self.next = 0
        self.free = _NO  # coflow ids to reuse
        self.live = _NO  # coflow ids of the flows added and not finished
        self.live_flow = _NO  # their flow indices
        self.reused = 0
        self.finish_s = np.full(len(bg.start_s), np.nan) if records else None

    def add_until(self, stop: int) -> None:
        bg, lo = self.bg, self.next
        if stop <= lo:
            return
        sl = slice(lo, stop)  # one batch per bin: one check, one copy
        k = min(self.free.size, stop - lo)
        ids = self.eng.add_flows(bg.src_gpu[sl], bg.dst_gpu[sl], bg.size_bytes[sl], at_s=bg.start_s[sl],
                                 routes=bg.routes_of(lo, stop), name="bg", reuse=self.free[:k])
        self.reused += k
        self.free = self.free[k:]
        self.live = np.concatenate([self.live, ids])
        self.live_flow = np.concatenate([self.live_flow, np.arange(lo, stop, dtype=np.int64)])
        self.stats.added(bg.size_bytes[sl])
        self.next = stop

    def harvest(self) -> None:
        fin = self.eng.coflows_finish_s(self.live)
        done = ~np.isnan(fin)
        if not done.any():
            return
        idx = self.live_flow[done]
        self.stats.finished(fin[done] - self.bg.start_s[idx], self.bg.size_bytes[idx])
        if self.finish_s is not None:
            self.finish_s[idx] = fin[done]
        self.free = np.concatenate([self.free, self.live[done]])
        self.live, self.live_flow = self.live[~done], self.live_flow[~done]

    def summary(self, end_s: float) -> BackgroundSummary:
        self.stats.unfinished(self.bg.start_s[self.live_flow], end_s)
        return self.stats.summary()


def _bins(series: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-bin increments of the cumulative per-link series (``link_series=True``)."""
    names = ("link_bin_bytes", "link_bin_marked_bytes", "link_bin_pause_s", "link_bin_drop_bytes",
             "link_bin_queue_byte_s")
    return {n: np.diff(x, axis=1) for n, x in zip(names, series, strict=False)}

