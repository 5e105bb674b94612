"""The planner's JCT model: a job's iteration time under the concurrent traffic of the other jobs.

The upper level (placers, MILP, heuristic) scores a placement with this model, so it must be cheap
and, for the MILP, linear once the placement is fixed. It works at the level of servers and leaf
switches (the fabric's ``server_leaf``), which is where placement changes the traffic:

* A job's **profile** comes from its ``stage`` op graph (`JobProfile`, `profile_job`): the
  iteration time when all its GPUs share one server (``single_server_s``), and, when it spans
  servers, ``base_s + network_s + stretch_slope_s * (stretch - 1)``: the critical path with
  every collective timed alone by the simulator's own collective model on a canonical
  placement (NCCL-like algorithm choice and latencies; without a fabric, the nccl-tests bus-bandwidth time
  ``busbw_factor * size_bytes / bandwidth`` over NVLink or the NIC), the collectives across
  servers slowed by ``stretch >= 1``. ``base_s`` is the path with network
  collectives free, ``network_s`` the extra time at ``stretch = 1``, ``stretch_slope_s`` the
  network collectives' busy time: stretched, they take ``busy * stretch`` and compute hides no
  more of them than it did at ``stretch = 1`` (with collectives that overlap compute, slowing
  the network by ``stretch`` exposes all of their extra time, not only the exposed part's).
  Collectives are classified under the canonical rank mapping (`rank_to_gpu` on whole servers);
  a placement that splits TP groups across servers (baseline placers do) is timed on its own
  rank mapping instead (`_fragmented_times`).
* The **concurrent-traffic estimate**: a job spread over several leaves sends ``leaf_uplink_bytes``
  per iteration out of each leaf it uses: the wire bytes each collective's schedule sends across
  a canonical two-leaf split, the schedule being the one the simulator runs (NCCL's algorithm,
  protocol and channel count, the per-channel caps folded into its wire fraction;
  `flowherd.planning.collective_probe.schedule_cut`); without a fabric, a ring crosses a leaf
  boundary once per direction per
  ring and AllToAll sends ``|A| |B| size / n`` across a cut. They are sent at the rate
  ``leaf_uplink_bytes / network_busy_s`` while its network collectives run (its *peak* load), times the
  share of its time it is active alongside the job being predicted. A leaf's load ``rho`` is the
  sum of these loads over its uplink capacity; a job spread over several leaves runs at
  ``stretch = max(1, max over its leaves rho)``. Jobs inside one leaf see no contention (the leaf
  switch is non-blocking and NICs are per GPU).
* **The core tier**: on a fabric of several pods (`flowherd.planning.view.leaf_pods`: the leaves
  grouped by the aggregation switches they hang from, such as the Lingjun fabric's PSW groups)
  whose aggregation switches link up to a core, a job spread over several pods sends the same
  ``leaf_uplink_bytes`` per iteration out of each pod it uses (the canonical split is a cut
  between two contiguous halves; the leaves of a pod are contiguous in GPU order, so a ring in
  rank order leaves a pod as often as it leaves a leaf at a cut), at the same peak rate, times
  the same overlap shares. A pod's load ``rho`` is the sum over its uplink capacity to the core
  (`FabricView.pod_uplink_bytes_per_s`), and such a job runs at
  ``stretch = max(1, max over its leaves and its pods rho)``. On a fabric of one pod (a
  leaf-spine) there is no such tier and nothing changes. Peak rather than mean loads: jobs that share
  links fall into step (each one's communication waits for the other's), so their network phases
  overlap. Checked against `flowherd.cluster.simulate.simulate_cluster` (``collective`` fidelity,
  spraying routes, 1:1 and 8:1 leaf-spines): mean loads under-predicted contended iterations by
  26-35 %; peak loads are within 12 % (uncontended within 0.1 %; tests/planning/test_placers.py).
  Under ECMP, hash collisions slow spread jobs further (up to 2x here), which the model ignores:
  it assumes the even splits that spraying or the planner's routes give.
* **Background** (``profile_job(..., background, routing)``): a job across servers pays
  ``background_s`` more per iteration, the slowdown the simulator measures for the job alone
  among the scenario's background routed by the scenario's routing (`background_penalty_s`):
  a collective ends with its slowest flow, so a background flow on any of its NICs or uplinks
  holds it back far more than its share of the bytes. Measured once per job shape. With a
  congestion model (``profile_job(..., network=)``, `flowherd.engine.network.NetworkConfig`) the
  run among the background runs under it and the reference stays the ideal network alone: the
  term then carries the model's predicted cost too (queueing, ECN marks and DCQCN's cuts, PFC
  pauses of the job's own bursts and the background's), also where there is no background.
* JCT of a training job = queueing (``start_s - submit_s``) + ``iterations`` iteration times; an
  inference job occupies its GPUs for its serving window ``duration_s`` (its traffic is not
  modelled: a deliberate shortcut, serving replicas are placed inside servers) plus the backlog
  it has left at the end of it (`_serving_s`).

The loads do not depend on the stretch they cause, so the model is linear in the placement
indicators and `flowherd.planning.milp` optimizes exactly the quantity `evaluate` reports.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.collectives.ops import Op, busbw_factor
from flowherd.errors import ConfigError
from flowherd.planning.collective_probe import collective_timer, schedule_cut
from flowherd.planning.view import FabricView, fabric_view
from flowherd.workload.chakra_job import ChakraJob
from flowherd.workload.inference import InferenceJob
from flowherd.workload.opgraph import Task
from flowherd.workload.training import Granularity, TrainingJob, rank_to_gpu

__all__ = ["FabricView", "JobProfile", "ModelResult", "core_tier", "evaluate", "fabric_view", "profile_job"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobProfile:
    """What the planner needs to know about one job (module docstring).

    Attributes:
        name: Job name.
        kind: "training" or "inference".
        world_size: GPUs it needs.
        unit_gpus: Placement granularity: a server holds a multiple of it (the TP degree when it
            divides the server size, else 1) so that no TP group straddles servers.
        gpu_type: The GPU type it asks for.
        submit_s: Submission time, seconds.
        iterations: Iterations (1 for inference).
        compute_only_s: Iteration critical path with free communication, seconds.
        single_server_s: Iteration time inside one server, seconds (None if it cannot fit one).
        base_s: Iteration time across servers with free network collectives, seconds.
        network_s: Extra iteration time of the network collectives at stretch 1, seconds.
        leaf_uplink_bytes: Bytes per iteration out of each leaf it uses when spread over leaves.
        network_busy_s: Time its network collectives run per iteration at stretch 1 (their sum,
            overlapped with compute or not), seconds.
        background_s: Extra iteration time across servers among the scenario's background
            traffic (`background_penalty_s`; 0 without background), seconds.
        fixed_duration_s: Inference: the serving window, seconds (None for training).
        job: The spec it was made from (for placements that split TP groups).
    """

    name: str
    kind: str
    world_size: int
    unit_gpus: int
    gpu_type: str
    submit_s: float
    iterations: int
    compute_only_s: float
    single_server_s: float | None
    base_s: float
    network_s: float
    leaf_uplink_bytes: float
    network_busy_s: float = 0.0
    background_s: float = 0.0
    fixed_duration_s: float | None = None
    job: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def multi_server_s(self) -> float:
        """Iteration time across servers without contention from other jobs, seconds."""
        return self.base_s + self.network_s + self.background_s

    @property
    def stretch_slope_s(self) -> float:
        """Iteration seconds per unit of stretch above 1: the network collectives' busy time
        (compute hides no more of them than it hid at stretch 1), at least ``network_s``."""
        return max(self.network_busy_s, self.network_s)

    @property
    def offered_bytes_per_s(self) -> float:
        """Load on each leaf's uplinks it uses when spread over leaves, while its network
        collectives run (``leaf_uplink_bytes / network_busy_s``), bytes per second."""
        return self.leaf_uplink_bytes / self.network_busy_s if self.network_busy_s > 0 else 0.0


def _cut_bytes(op: Op, size_bytes: float, side: np.ndarray) -> float:
    """Bytes a collective sends from side A (``side`` True) to side B per call (ring model)."""
    n = len(side)
    a = int(side.sum())
    if a == 0 or a == n:
        return 0.0
    if op in (Op.ALLTOALL, Op.ALLTOALLV):
        return a * (n - a) * size_bytes / n
    if op == Op.SENDRECV:
        return size_bytes if side[0] and not side[1] else 0.0
    # a ring in rank order crosses A -> B as often as the sequence steps from A to B
    steps = int(np.sum(side & ~np.roll(side, -1)))
    return steps * busbw_factor(op, n) * size_bytes


# Profiles and serving times by job shape and fabric view: both time collectives on the fabric
# itself (`flowherd.planning.collective_probe.collective_timer`, `_serving_s`), so two fabrics
# with the same servers and link speeds may differ
_PROFILES: dict[tuple[Any, ...], tuple[FabricView, JobProfile]] = {}
_SERVING: dict[tuple[Any, ...], tuple[FabricView, float]] = {}


def _per_view(cache: dict[tuple[Any, ...], tuple[FabricView, Any]], shape: str, view: FabricView,
              make: Any) -> Any:
    """``make()`` cached by job ``shape`` and ``view``; an entry holds its view, so an id reused
    by another view never hits."""
    key = (shape, id(view))
    hit = cache.get(key)
    if hit is None or hit[0] is not view:
        hit = cache[key] = (view, make())
    return hit[1]


def profile_job(job: TrainingJob | InferenceJob, view: FabricView, background: Any = None,
                routing: str = "ecmp", network: Any = None) -> JobProfile:
    """The `JobProfile` of ``job`` on a fabric (cached by job shape, fabric view, background,
    its routing and the network model); with ``background`` (a `flowherd.cluster.simulate.
    BackgroundSpec`, routed by ``routing``) or a congestion model ``network`` (a
    `flowherd.engine.network.NetworkConfig` other than ideal), its ``background_s``
    (`background_penalty_s`)."""
    gps = view.gpus_per_server
    n = int(job.world_size)
    gpu = getattr(job.gpu, "name", str(job.gpu))
    tp = int(job.tp)
    unit = tp if gps % tp == 0 and tp <= gps else 1
    if isinstance(job, InferenceJob):
        dur = _per_view(_SERVING, repr(dataclasses.replace(job, name="p", tenant="p", submit_s=0.0)), view,
                        lambda: _serving_s(job, view))
        return JobProfile(name=job.name, kind="inference", world_size=n, unit_gpus=unit, gpu_type=gpu,
                          submit_s=float(job.submit_s), iterations=1, compute_only_s=0.0,
                          single_server_s=dur if n <= gps else None, base_s=dur, network_s=0.0,
                          leaf_uplink_bytes=0.0, fixed_duration_s=dur, job=job)
    if not isinstance(job, TrainingJob | ChakraJob):  # a ChakraJob: the same iteration interface
        raise ConfigError(f"a job must be a TrainingJob, InferenceJob or ChakraJob, got {type(job).__name__} "
                          "(jobs)")
    neutral = dataclasses.replace(job, name="p", tenant="p", submit_s=0.0, iterations=1)
    hit = _per_view(_PROFILES, repr(neutral), view, lambda: _profile_training(
        neutral, gps, view.nvlink_bytes_per_s, view.nic_bytes_per_s, view))
    congests = network is not None and getattr(network, "model", "ideal") != "ideal"
    if background is not None and getattr(background, "load", 0) <= 0:
        background = None
    if background is not None or congests:
        key = (neutral, background, routing) + ((network,) if congests else ())
        bg = _per_view(_BACKGROUND, repr(key), view, lambda: background_penalty_s(
            neutral, view, background, routing=routing, network=network if congests else None))
        hit = dataclasses.replace(hit, background_s=bg)
    return dataclasses.replace(hit, name=job.name, submit_s=float(job.submit_s),
                               iterations=int(job.iterations), job=job)


_BACKGROUND: dict[tuple[Any, ...], tuple[FabricView, float]] = {}
# iterations of the background probe (at least `_PROBE_S` of simulated time)
_PROBE_ITERATIONS = 8
_PROBE_S = 8.0


def background_penalty_s(job: TrainingJob, view: FabricView, background: Any, *, routing: str = "ecmp",
                         seed: int = 0, network: Any = None) -> float:
    """Extra iteration time of ``job`` across servers among ``background``, seconds.

    A job's collectives end with their slowest flow, so a background flow that meets any one of
    its NICs or uplinks holds the whole collective back: far more than the background's share
    of the bytes (on the embedded default, 5 % background slows a two-leaf job's iteration by
    13 % where its mean load on the uplinks would give 4 %). The loads model cannot see that, so
    the simulator measures it once per job shape: the job alone on the canonical servers (the
    first servers of the fabric, `flowherd.planning.collective_probe.collective_timer`'s
    layout) for at least `_PROBE_S` seconds,
    with and without the background (drawn from ``seed``, not a scenario's seed: the planner
    knows the background's statistics, not its flows), ``collective`` fidelity; the difference
    of the mean iteration times. The job's own pairs are split evenly over their shortest paths
    (the model's assumption: spraying or the planner's routes), the background goes by
    ``routing``, as in the scenario: a background flow hashed onto one uplink meets the job
    there at full size (on the default, ECMP's background slows the job 0.318 s per iteration
    where sprayed background gives 0.291 s). 0 for a job inside one server or on a fabric too
    small for the canonical layout. With ``network`` (a `flowherd.engine.network.NetworkConfig`) the
    run among ``background`` (None: none) runs under that network model and the reference on
    the ideal network: the difference then adds the model's cost of the job's own bursts.
    """
    if view.fabric is None or job.world_size <= view.gpus_per_server:
        return 0.0
    gps = view.gpus_per_server
    per = gps if gps % job.tp == 0 else job.tp
    servers = -(-job.world_size // per)
    if servers > view.num_servers or np.any(view.server_capacity[:servers] < per):
        return 0.0
    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.planning.traffic import network_pairs
    from flowherd.routing.paths import shortest_paths
    from flowherd.routing.policies import ExplicitRouter

    gpus = np.concatenate([view.gpus_of(k)[:per] for k in range(servers)])[:job.world_size]
    pairs = network_pairs(job, gpus, view.fabric)
    splits = {}
    for a, b in zip(pairs.src.tolist(), pairs.dst.tolist(), strict=True):
        paths = shortest_paths(view.fabric, a, b, limit=16)
        splits[(a, b)] = [(np.asarray(p, dtype=np.int64), 1.0 / len(paths)) for p in paths]
    router = ExplicitRouter(view.fabric, splits, fallback=routing, seed=seed)
    one = profile_job(job, view)
    iters = max(_PROBE_ITERATIONS, math.ceil(_PROBE_S / max(one.base_s + one.network_s, 1e-6)))
    probe = dataclasses.replace(job, iterations=iters)
    # the horizon bounds the background flows drawn; a probe slowed more than 4x is cut there
    horizon_s = 4.0 * iters * (one.base_s + one.network_s)
    out = []
    for bg, net in ((None, None), (background, network)):
        req = JobRequest(name="probe", tenant="probe", spec=probe, submit_s=0.0)
        with _network_context(net, network):
            res = simulate_cluster(view.fabric, [req],
                                   fidelity="collective", horizon_s=horizon_s, router=router, background=bg,
                                   seed=seed, placements={"probe": tuple(int(g) for g in gpus)})
        it = np.asarray(res.jobs[0].iteration_s, dtype=np.float64)
        out.append(float(it.mean()) if it.size else 0.0)
    return max(0.0, out[1] - out[0])


def _network_context(net: Any, network: Any) -> Any:
    """The probe's network: ``net`` where a model is asked for, the ideal one for the reference
    run beside it, and the caller's (none set: the ideal) without ``network``."""
    import contextlib

    if network is None:
        return contextlib.nullcontext()
    from flowherd.engine.network import load_network, use_network

    return use_network(net if net is not None else load_network("ideal"))


def _serving_s(job: InferenceJob, view: FabricView) -> float:
    """Start-to-end time of a serving job: its window plus the backlog left at its end.

    Replays the simulator's serving discipline on one draw of the request arrivals (seed 0):
    requests batched by `InferenceJob.batch_requests`; batch ``b`` prefills on replica
    ``b mod instances``, moves its KV cache over the NIC (disaggregated), and decodes on its
    decode replica; each replica runs its prefills in order and its decodes in order. A batch's
    prefill and decode times are the critical paths of their op graphs with each TP collective
    timed alone inside server 0 (`flowherd.cluster.collective.simulate_collective`, latency
    included: decode makes ``2 * layers`` of them per token). Without this, an overloaded
    service (decode of small batches is bound by reading the weights) would be predicted to end
    with its window.
    """
    rng = np.random.default_rng(0)
    starts, sizes = job.batch_requests(job.request_arrivals(rng) - job.submit_s)
    if not len(sizes):
        return float(job.duration_s)

    from flowherd.cluster.collective import simulate_collective
    from flowherd.collectives.ops import Collective

    local = view.gpus_of(0)
    timed: dict[tuple[Any, ...], float] = {}

    def coll_s(c: Collective) -> float:
        key = (c.op, c.n, float(c.size_bytes))
        if key not in timed:
            if view.fabric is not None and c.n <= local.size and c.n > 1:
                one = Collective(op=c.op, gpus=tuple(local[:c.n].tolist()), size_bytes=c.size_bytes)
                timed[key] = simulate_collective(view.fabric, one, fidelity="collective").time_s
            else:
                timed[key] = busbw_factor(c.op, c.n) * c.size_bytes / view.nvlink_bytes_per_s
        return timed[key]

    def cp(graph) -> float:
        return graph.critical_path_s(lambda t: t.count * max((coll_s(c) for c in t.collectives),
                                                             default=0.0))

    pre: dict[int, float] = {}
    dec: dict[int, float] = {}
    n_dec = job.decode_instances if job.disaggregated else job.instances
    pre_free = np.zeros(job.instances)
    dec_free = np.zeros(n_dec)
    end = float(job.duration_s)
    for k, (t, b) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
        if b not in pre:
            pre[b] = cp(job.prefill_graph(b))
            dec[b] = cp(job.decode_graph(b, steps=job.output_tokens))
        p, d = k % job.instances, k % n_dec
        s = max(t, pre_free[p])
        pre_free[p] = s + pre[b]
        # as in the simulator, a replica's prefills and decodes are two chains (a batch's prefill
        # may overlap the previous batch's decode), also when prefill and decode share GPUs
        ready = pre_free[p] + (job.kv_bytes(b) / view.nic_bytes_per_s if job.disaggregated else 0.0)
        dec_free[d] = max(ready, dec_free[d]) + dec[b]
        end = max(end, dec_free[d])
    return end


def _graph_times(graph, server_of_rank: np.ndarray, nvlink: float, nic: float,
                 timer: Any = None) -> tuple[float, float, float, float]:
    """(all in one server, network collectives free, network at stretch 1, network busy time) of
    an iteration whose rank r runs on server ``server_of_rank[r]``, seconds. ``timer(c, local)``,
    when given, times a collective (over ranks) alone: inside one server or across servers."""
    cache: dict[int, tuple[float, float, float]] = {}

    def parts(task: Task) -> tuple[float, float, float]:
        key = id(task.collectives)
        if key not in cache:
            loc_all = loc = net = 0.0
            for c in task.collectives:
                ranks = np.asarray(c.gpus, dtype=np.int64)  # graph collectives are over ranks
                t_nv = busbw_factor(c.op, c.n) * c.size_bytes / nvlink
                if timer is not None:
                    t_nv = timer(c, True)
                loc_all = max(loc_all, t_nv)
                srv = server_of_rank[ranks]
                if srv.min() == srv.max():
                    loc = max(loc, t_nv)
                else:
                    t_net = (timer(c, False) if timer is not None
                             else busbw_factor(c.op, c.n) * c.size_bytes / nic)
                    net = max(net, t_net)
            cache[key] = (loc_all, loc, net)
        return cache[key]

    single = graph.critical_path_s(lambda t: t.count * parts(t)[0])
    base = graph.critical_path_s(lambda t: t.count * parts(t)[1])
    full = graph.critical_path_s(lambda t: t.count * max(parts(t)[1], parts(t)[2]))
    busy = sum(t.count * parts(t)[2] for t in graph.tasks if t.collectives)
    return single, base, full, busy


_GRAPHS: dict[str, Any] = {}


def _graph(job: TrainingJob):
    key = repr(dataclasses.replace(job, name="p", tenant="p", submit_s=0.0, iterations=1))
    g = _GRAPHS.get(key)
    if g is None:
        g = _GRAPHS[key] = job.iteration_graph(Granularity.STAGE)
    return g


def _profile_training(job: TrainingJob, gps: int, nvlink: float, nic: float,
                      view: FabricView | None = None) -> JobProfile:
    n = job.world_size
    graph = _graph(job)
    # canonical multi-server layout: whole servers in order; a job that fits one server is
    # split over two (in whole TP groups) so that its multi-server profile means something
    per = gps if n > gps else max(job.tp, -(-n // 2 // job.tp) * job.tp) if gps % job.tp == 0 else -(-n // 2)
    servers = -(-n // per)
    mapping = rank_to_gpu(job, np.arange(n), per)
    server_of_rank = mapping // per
    leaf_a = server_of_rank < max(1, servers // 2)  # split over two leaves at the middle server
    compute = graph.critical_path_s()
    # ranks sit on canonical GPUs: virtual GPU v = mapping[r] is slot v % per of server v // per
    timer = collective_timer(view, servers, per)
    canon_rank = mapping if timer is not None else None
    single, base, full, busy = _graph_times(
        graph, server_of_rank, nvlink, nic,
        None if canon_rank is None else (lambda c, inside: timer(_on(c, canon_rank), inside)))
    cut = None if timer is None else schedule_cut(view, servers, per)
    cross = 0.0
    for t in graph.tasks:
        for c in t.collectives:
            if cut is not None:
                cross += t.count * cut(_on(c, mapping))
                continue
            side = leaf_a[np.asarray(c.gpus, dtype=np.int64)]
            out_a = _cut_bytes(c.op, c.size_bytes, side)
            out_b = _cut_bytes(c.op, c.size_bytes, ~side)
            cross += t.count * max(out_a, out_b)
    return JobProfile(name=job.name, kind="training", world_size=n,
                      unit_gpus=job.tp if gps % job.tp == 0 else 1,
                      gpu_type=getattr(job.gpu, "name", str(job.gpu)), submit_s=0.0, iterations=1,
                      compute_only_s=compute, single_server_s=single if n <= gps else None, base_s=base,
                      network_s=max(0.0, full - base), leaf_uplink_bytes=cross, network_busy_s=busy,
                      job=job)


def _on(c: Any, virtual: np.ndarray) -> Any:
    """The collective with its ranks replaced by their canonical virtual GPU ids."""
    return dataclasses.replace(c, gpus=tuple(virtual[np.asarray(c.gpus, dtype=np.int64)].tolist()))


_FRAG: dict[tuple[Any, ...], tuple[float, float]] = {}


def _fragmented_times(view: FabricView, p: JobProfile, gpus: np.ndarray) -> tuple[float, float] | None:
    """(base_s, network_s) of a placement that splits TP groups across servers (None if it does
    not: the profile's canonical figures hold). Baseline placers produce such placements; the
    typed methods never do."""
    if p.job is None or p.kind != "training":
        return None
    server = _server_of(view)
    counts = np.bincount(server[gpus])
    counts = counts[counts > 0]
    if counts.size <= 1 or not np.any(counts % p.job.tp):
        return None
    mapping = rank_to_gpu(p.job, gpus, view.gpus_per_server, gpu_server=server)
    sig = (repr(dataclasses.replace(p.job, name="p", tenant="p", submit_s=0.0, iterations=1)),
           tuple(server[mapping].tolist()), view.nvlink_bytes_per_s, view.nic_bytes_per_s)
    hit = _FRAG.get(sig)
    if hit is None:
        _, base, full, _ = _graph_times(_graph(p.job), server[mapping], view.nvlink_bytes_per_s,
                                        view.nic_bytes_per_s)
        hit = _FRAG[sig] = (base, max(0.0, full - base))
    return hit


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ModelResult:
    """The model's verdict on a set of placed jobs.

    Attributes:
        iteration_s: ``float64[J]`` predicted iteration time (inference: serving window), seconds.
        duration_s: ``float64[J]`` predicted run time from start to end, seconds.
        jct_s: ``float64[J]`` predicted JCT (queueing + run time), seconds.
        stretch: ``float64[J]`` slow-down factor of each job's network collectives (>= 1).
        leaf_load: ``float64[L]`` load of each leaf's uplinks with all jobs concurrent (0..).
        spread: ``int64[J]``: 0 one server, 1 one leaf, 2 several leaves.
        pod_load: ``float64[P]`` load of each pod's uplinks to the core with all jobs concurrent
            (empty without a core tier).
        pods: ``int64[J]`` pods each job spread over leaves touches (0 without a core tier).
    """

    iteration_s: np.ndarray
    duration_s: np.ndarray
    jct_s: np.ndarray
    stretch: np.ndarray
    leaf_load: np.ndarray
    spread: np.ndarray
    pod_load: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    pods: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def mean_jct_s(self) -> float:
        return float(self.jct_s.mean()) if self.jct_s.size else 0.0


def _layout(view: FabricView, gpus: np.ndarray) -> tuple[int, np.ndarray]:
    """(spread class, leaves used) of a placement."""
    srv = np.unique(_server_of(view)[gpus])
    leaves = np.unique(view.server_leaf[srv])
    return (0 if srv.size <= 1 else 1 if leaves.size <= 1 else 2), leaves


#: Each GPU's server per view, by identity; an entry holds its view, so that a view freed and
#: another made at its address (a `dataclasses.replace` of a view, a view of another fabric) never
#: hits; cleared when full.
_SERVER_OF: dict[int, tuple[FabricView, np.ndarray]] = {}
_SERVER_OF_MAX = 256


def _server_of(view: FabricView) -> np.ndarray:
    hit = _SERVER_OF.get(id(view))
    if hit is None or hit[0] is not view:
        server = np.empty(len(view.gpu_order), np.int64)
        server[view.gpu_order] = np.repeat(np.arange(view.num_servers), view.server_capacity)
        if len(_SERVER_OF) >= _SERVER_OF_MAX:
            _SERVER_OF.clear()
        hit = _SERVER_OF[id(view)] = (view, server)
    return hit[1]


def core_tier(view: FabricView) -> bool:
    """Whether ``view`` has a core tier the model charges: several pods, some of whose uplinks
    to the core are finite."""
    cap = view.pod_uplink_bytes_per_s
    return view.num_pods > 1 and cap is not None and bool(np.isfinite(cap).any())


def evaluate(view: FabricView, profiles: Sequence[JobProfile], placements: Sequence[np.ndarray], *,
             start_s: Sequence[float] | None = None, extra_leaf_bytes_per_s: np.ndarray | None = None,
             rounds: int = 6, extra_pod_bytes_per_s: np.ndarray | None = None) -> ModelResult:
    """Predict iteration times and JCTs of placed jobs (module docstring).

    Args:
        view: The fabric view.
        profiles: One profile per job.
        placements: GPU ids of each job.
        start_s: Start of each job, seconds; None: all start together at their submission and run
            concurrently the whole time (the static model the MILP optimizes).
        extra_leaf_bytes_per_s: ``float64[L]`` load already on the leaf uplinks (other jobs).
        rounds: Fixed-point rounds for the time overlaps when ``start_s`` is given.
        extra_pod_bytes_per_s: ``float64[P]`` load already on the pods' uplinks to the core.

    Returns:
        The `ModelResult`.
    """
    nj = len(profiles)
    if len(placements) != nj:
        raise ConfigError(f"placements has {len(placements)} entries, expected {nj} (placements)")
    nl = view.num_leaves
    spread = np.zeros(nj, np.int64)
    rows, cols = [], []
    for j, g in enumerate(placements):
        s, leaves = _layout(view, np.asarray(g, dtype=np.int64))
        spread[j] = s
        if s == 2:
            rows.extend([j] * leaves.size)
            cols.extend(leaves.tolist())
    use = np.zeros((nj, nl))
    if rows:
        use[rows, cols] = 1.0
    # the core tier (module docstring): a job's pods, where its leaves span several
    tiered = core_tier(view)
    npods = view.num_pods if tiered else 0
    use_pod = np.zeros((nj, npods))
    pods_of = np.zeros(nj, np.int64)
    if tiered and rows:
        use_pod[rows, view.leaf_pod[cols]] = 1.0
        pods_of = use_pod.sum(axis=1).astype(np.int64)
        use_pod[pods_of < 2] = 0.0
    offered = np.array([p.offered_bytes_per_s for p in profiles]) * (spread == 2)
    base = np.array([p.base_s for p in profiles])
    net = np.array([p.network_s for p in profiles])
    bg = np.array([p.background_s for p in profiles])
    busy = np.array([p.network_busy_s for p in profiles])
    for j, (p, g) in enumerate(zip(profiles, placements, strict=True)):
        if spread[j] > 0:
            frag = _fragmented_times(view, p, np.asarray(g, dtype=np.int64))
            if frag is not None:
                base[j], net[j] = frag
    single = np.array([p.single_server_s if p.single_server_s is not None else p.multi_server_s
                       for p in profiles])
    iters = np.array([p.iterations for p in profiles], dtype=np.float64)
    fixed = np.array([p.fixed_duration_s is not None for p in profiles])
    submit = np.array([p.submit_s for p in profiles])
    cap = view.leaf_uplink_bytes_per_s
    extra = np.zeros(nl) if extra_leaf_bytes_per_s is None else np.asarray(extra_leaf_bytes_per_s)
    if tiered:
        pod_cap = np.asarray(view.pod_uplink_bytes_per_s, dtype=np.float64)
        pod_extra = (np.zeros(npods) if extra_pod_bytes_per_s is None
                     else np.asarray(extra_pod_bytes_per_s, dtype=np.float64))
    start = submit if start_s is None else np.asarray(start_s, dtype=np.float64)
    overlap = np.ones((nj, nj))
    for _ in range(1 if start_s is None else rounds):
        # load seen by job j on leaf l: sum_k overlap[j, k] * offered_k * use[k, l]
        seen = (overlap * offered[None, :]) @ use + extra[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(np.isfinite(cap), seen / cap[None, :], 0.0)
        worst = np.where(use > 0, rho, 0.0).max(axis=1, initial=0.0)
        if tiered:
            seen_pod = (overlap * offered[None, :]) @ use_pod + pod_extra[None, :]
            with np.errstate(invalid="ignore", divide="ignore"):
                rho_pod = np.where(np.isfinite(pod_cap), seen_pod / pod_cap[None, :], 0.0)
            worst = np.maximum(worst, np.where(use_pod > 0, rho_pod, 0.0).max(axis=1, initial=0.0))
        stretch = np.where(spread == 2, np.maximum(1.0, worst), 1.0)
        # stretched collectives last busy * stretch; compute hides at most what it hid at
        # stretch 1 (busy - net), so the exposed part is net + busy (stretch - 1)
        exposed = net + np.maximum(busy, net) * (stretch - 1.0)
        it = np.where(spread == 0, single, base + exposed + bg)
        dur = np.where(fixed, base, iters * it)
        if start_s is None:
            break
        end = start + dur
        lo = np.maximum(start[:, None], start[None, :])
        hi = np.minimum(end[:, None], end[None, :])
        overlap = np.clip(hi - lo, 0.0, None) / np.maximum(dur[:, None], 1e-12)
    with np.errstate(invalid="ignore", divide="ignore"):
        leaf_load = np.where(np.isfinite(cap), (offered @ use + extra) / cap, 0.0)
    pod_load = np.zeros(npods)
    if tiered:
        with np.errstate(invalid="ignore", divide="ignore"):
            pod_load = np.where(np.isfinite(pod_cap), (offered @ use_pod + pod_extra) / pod_cap, 0.0)
    return ModelResult(iteration_s=it, duration_s=dur, jct_s=start - submit + dur, stretch=stretch,
                       leaf_load=leaf_load, spread=spread, pod_load=pod_load, pods=pods_of)
