"""Running a collective's `Schedule` in the flow-level engine, at two fidelities.

* ``step``: every step of the schedule is a coflow that waits for the coflows of the steps
  it depends on, then for the step's latency (``delay_s``); the engine adds each flow's path
  latency to its last byte. Time on an idle non-blocking fabric =
  ``sum over the steps of (latency + path latency + most loaded NIC's bytes / B)``.
* ``collective``: one coflow whose flows carry the schedule's aggregate bytes per (src, dst)
  pair, weighted by their bytes (so that the coflow ends when its most loaded NIC has sent
  all its bytes, as a coflow-aware allocation would), delayed by the latency of the
  schedule's critical path (step latencies plus the path latency of every step on it but
  the last, which the engine adds). Time on an idle non-blocking fabric =
  ``critical-path latency + most loaded NIC's total bytes / B``.

The two agree on an idle fabric for algorithms whose every step loads every NIC alike (ring,
power-of-two halving-doubling, direct, pairwise): there the sum of per-step maxima equals
the maximum of the sums. They differ for pipelined schedules (tree, chain broadcast: the
`collective` fidelity has no fill and drain), for hierarchical ones (the intra- and inter-server
phases overlap in one coflow), and under contention (a step's slowest flow gates the next step
in `step` fidelity, while one coflow's flows drift apart). `studies/fidelity.py` prints
the difference on contended scenarios; at 256 MiB, collective vs step: idle ring 0 %, idle
tree -3.5 %, two AllReduces on a 2:1 oversubscribed leaf-spine -4 % and -15 %, a ring hit by
two staggered outside flows -10.5 %, AllReduce + AllToAll sharing NICs -1.3 % and -0.5 %,
ECMP collisions (the same on every step) 0 %. The `collective` fidelity is never slower here:
it lets a collective's flows run ahead where the steps would have waited.

The protocol applies here: a flow of ``size_bytes`` payload sends ``size_bytes /
wire_fraction`` bytes (LL 2x, LL128 128/120x). NCCL's channel rate is a least duration of each
step's coflow (`Step.min_transfer_s`; at ``collective`` fidelity the schedule's
`Schedule.min_transfer_s`), not more bytes: alone a step takes NCCL's time, on a shared link its
fair share of the link.

Latency is counted once. Under ``latency_model="nccl"`` (the default) the steps carry NCCL's
latencies, which are end to end and hold the wire's (`Schedule.adds_path_latency` False): the
flows go to the engine with routes of no propagation delay, and the path latencies above are
0. Under ``"fabric"`` the steps carry none and the paths' are the only latency.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from flowherd.collectives.algorithms import ALGORITHMS, build_schedule
from flowherd.collectives.nccl import LATENCY_MODELS, PROTOCOLS
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule
from flowherd.collectives.selector import predicted_time_s, select
from flowherd.engine.coflow_batch import CoflowBatch, make_flat_batch
from flowherd.engine.core import Engine
from flowherd.engine.pages import small_pages
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.registry import Registry
from flowherd.routing.base import Routes

FIDELITIES = Registry("fidelity", {"step": "step", "collective": "collective"})
_MODEL_OPS = (Op.ALLREDUCE, Op.ALLGATHER, Op.REDUCESCATTER, Op.BROADCAST, Op.REDUCE)
_NCCL_ALGOS = ("ring", "tree", "nvls", "nvlstree", "pat")


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveResult:
    """One simulated collective.

    Attributes:
        time_s: From the collective's start to its last byte's arrival.
        algbw_bytes_per_s: ``size_bytes / time_s`` (nccl-tests).
        busbw_bytes_per_s: ``algbw * busbw_factor(op, n)`` (nccl-tests).
        algorithm: The algorithm run (the selector's choice for "auto").
        protocol: The protocol run.
        num_gpus: Ranks.
        size_bytes: nccl-tests size.
        op: The operation.
        fidelity: "step" or "collective".
        router: Routing policy name.
        num_steps: Steps of the schedule.
        num_flows: Flows simulated.
        wire_bytes: Bytes sent over the wire (payload / protocol wire fraction).
        channels: NCCL channels the schedule was built on.
        predicted_time_s: NCCL 2.30's tuning model's time for this algorithm and protocol
            (None where the model has none: algorithms NCCL lacks).
        latency_model: "nccl" or "fabric".
    """

    time_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    algorithm: str
    protocol: str
    num_gpus: int
    size_bytes: float
    op: str
    fidelity: str
    router: str
    num_steps: int
    num_flows: int
    wire_bytes: float
    channels: int = 1
    predicted_time_s: float | None = None
    latency_model: str = "nccl"

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__slots__}


def pair_latency_s(fabric: Fabric, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Propagation latency of a fewest-hop path for each (src, dst) node pair, seconds.

    Every router of flowherd uses fewest-hop paths, and in the fabrics flowherd builds all
    fewest-hop paths between two GPUs have the same latency.
    """
    from scipy.sparse import csr_matrix  # scipy's import is a third of a second: here only
    from scipy.sparse.csgraph import shortest_path

    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size == 0:
        return np.zeros(0)
    n = fabric.num_nodes
    # hop count dominates (weight 1 per link), latency breaks no ties but rides along: all
    # latencies are far below one second, so dist = hops + latency with hops = round(dist)
    w = 1.0 + np.asarray(fabric.link_latency_s, dtype=np.float64)
    # parallel links would be summed by csr_matrix: keep the lightest of each node pair
    order = np.lexsort((w, fabric.link_dst, fabric.link_src))
    a, b, w = fabric.link_src[order], fabric.link_dst[order], w[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    g = csr_matrix((w[first], (a[first], b[first])), shape=(n, n))
    uniq, inv = np.unique(src, return_inverse=True)
    dist = shortest_path(g, method="D", directed=True, indices=uniq)
    d = dist[inv, dst]
    if not np.all(np.isfinite(d)):
        i = int(np.flatnonzero(~np.isfinite(d))[0])
        raise ConfigError(f"GPU {src[i]} cannot reach GPU {dst[i]} in fabric {fabric.name!r} "
                          "(collective.gpus)")
    return d - np.round(d)


def _pairs(schedule: Schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (src, dst) pairs of all flows, their total bytes, and each flow's pair index
    (one entry per flow of every step: for the step batch, which holds them all anyway)."""
    uniq, width, total, of, idx = schedule.pair_totals()
    inv = np.concatenate([idx[p] for p in of.tolist()]) if len(of) else np.zeros(0, np.int64)
    return uniq // width, uniq % width, total, inv


def _without_latency(routes: Routes) -> Routes:
    """`routes` with no propagation delay (`Schedule.adds_path_latency` False)."""
    return replace(routes, latency_s=np.zeros(routes.num_flows))


def _take(routes: Routes, rows: np.ndarray) -> Routes:
    """The routes of flows `rows` of `routes`, in that order (CSR rows gathered)."""
    k = int(routes.ptr[1]) if routes.num_flows else 0
    if (k > 0 and routes.ptr[0] == 0 and routes.link.size == k * routes.num_flows
            and np.all(np.diff(routes.ptr) == k)):
        # every route of k links (a switch's, a fat tree's between servers): rows of a 2-d view,
        # the same arrays without the per-entry index (a 1,024-GPU ring's 4 million entries)
        return Routes(ptr=np.arange(0, k * (rows.size + 1), k, dtype=np.int64),
                      link=routes.link.reshape(-1, k)[rows].reshape(-1),
                      frac=routes.frac.reshape(-1, k)[rows].reshape(-1),
                      latency_s=routes.latency_s[rows])
    lo, hi = routes.ptr[rows], routes.ptr[rows + 1]
    count = hi - lo
    ptr = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(count, out=ptr[1:])
    at = np.repeat(lo - ptr[:-1], count) + np.arange(int(ptr[-1]))
    return Routes(ptr=ptr, link=routes.link[at], frac=routes.frac[at],
                  latency_s=routes.latency_s[rows])


class _Same:
    """Hashes and compares by identity (schedules and routers as cache keys)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


@functools.lru_cache(maxsize=256)
def _flow_routes_of(router: _Same, schedule: _Same, path_latency: bool) -> Routes:
    sched: Schedule = schedule.obj
    src, dst, _, inv = _pairs(sched)
    if src.size == 0:
        return Routes(ptr=np.zeros(1, np.int64), link=np.zeros(0, np.int32), frac=np.zeros(0),
                      latency_s=np.zeros(0))
    routes = router.obj.route(src.astype(np.int32), dst.astype(np.int32), np.zeros(src.size, np.int64))
    return _take(routes if path_latency else _without_latency(routes), inv)


def _flow_routes(router, schedule: Schedule) -> Routes:
    """The routes of every flow of the schedule, step by step (the routes of its steps one after
    the other), the distinct pairs routed once; without propagation delay unless
    `Schedule.adds_path_latency` (the same object for the same schedule and router)."""
    return _flow_routes_of(_Same(router), _Same(schedule), schedule.adds_path_latency)


@functools.lru_cache(maxsize=256)
def _step_routes_of(router: _Same, schedule: _Same) -> tuple[Routes, ...]:
    sched: Schedule = schedule.obj
    routes = _flow_routes(router.obj, sched)
    bounds = np.cumsum([0] + [st.num_flows for st in sched.steps])
    return tuple(_take(routes, np.arange(bounds[i], bounds[i + 1])) for i in range(sched.num_steps))


def _step_routes(router, schedule: Schedule) -> tuple[Routes, ...]:
    """Each step's routes with no propagation delay, the schedule's distinct pairs routed once
    (the same objects for the same schedule and router, which the engine checks once)."""
    return _step_routes_of(_Same(router), _Same(schedule))


@functools.lru_cache(maxsize=256)
def _step_batch_of(router: _Same, schedule: _Same, weight: float) -> CoflowBatch:
    sched: Schedule = schedule.obj
    steps = sched.steps
    return make_flat_batch(
        f_ptr=np.cumsum([0] + [st.num_flows for st in steps]),
        src=np.concatenate([st.src_gpu for st in steps]),
        dst=np.concatenate([st.dst_gpu for st in steps]),
        size_bytes=np.concatenate([st.size_bytes for st in steps]) / sched.wire_fraction,
        routes=_flow_routes(router.obj, sched), delay_s=np.array([st.latency_s for st in steps]),
        min_duration_s=np.array([st.min_transfer_s for st in steps], dtype=np.float64),
        deps=[st.deps for st in steps], weight=weight, suffix=[f"/step{i}" for i in range(len(steps))])


def _step_batch(router, schedule: Schedule, weight: float) -> CoflowBatch:
    """The schedule's steps as one engine batch, a coflow per step (`add_schedule` at ``step``
    fidelity): checked and laid out once per schedule, router and weight."""
    return _step_batch_of(_Same(router), _Same(schedule), weight)


def add_schedule(engine: Engine, schedule: Schedule, *, fidelity: str = "step",
                 after: Sequence[int] = (), at_s: float | None = None, name: str = "",
                 weight: float = 1.0, priority: int = 0) -> int:
    """Add a schedule's coflows to `engine`; returns the id of the coflow that marks completion.

    Args:
        engine: The engine (its router routes the flows).
        schedule: From `build_schedule`.
        fidelity: "step" (a coflow per step) or "collective" (one coflow).
        after: Coflows that must finish before the collective starts.
        at_s: Earliest start, seconds (default: now).
        name: Prefix of the coflows' names.
        weight, priority: Passed to every coflow (weighted / prioritized sharing).
    """
    fid = FIDELITIES[fidelity]
    wf = schedule.wire_fraction
    kw = dict(weight=weight, priority=priority)
    label = name or f"{schedule.collective.op.value}/{schedule.algorithm}"
    if not schedule.steps:
        return engine.add_coflow([], [], [], at_s=at_s, after=tuple(after), name=label, **kw)
    if fid == "collective":
        uniq, width, size, of, idx = schedule.pair_totals()
        src, dst = uniq // width, uniq % width
        # route the pairs here (the engine would anyway): their latencies give the steps'
        routes = None
        if engine.router is not None and src.size:
            routes = engine.router.route(src.astype(np.int32), dst.astype(np.int32),
                                         np.zeros(src.size, np.int64))
            if not schedule.adds_path_latency:
                routes = _without_latency(routes)
            pair_lat = np.asarray(routes.latency_s, dtype=np.float64)
        elif schedule.adds_path_latency:
            pair_lat = pair_latency_s(engine.fabric, src, dst)
        else:
            pair_lat = np.zeros(src.size)
        # a step's path latency: its slowest pair's (once per pattern of steps)
        pat_lat = np.array([float(pair_lat[ix].max()) if ix.size else 0.0 for ix in idx])
        path_lat = np.maximum(pat_lat[of], 0.0)
        step_lat = np.array([st.latency_s for st in schedule.steps])
        crit, _ = schedule.critical_path(step_lat + path_lat)
        delay = max(0.0, crit - (float(pair_lat.max()) if pair_lat.size else 0.0))
        # Flows share in proportion to their bytes (weights averaging `weight`): under plain
        # max-min a pair with more bytes would finish last and leave its NICs idle before
        # (7% over the bound for the double binary tree, whose pairs carry S/2 or S); so
        # weighted, every NIC stays busy and the coflow ends at its most loaded NIC's bytes / B.
        mean = float(size.mean()) if size.size else 1.0
        flow_w = weight * size / mean if mean > 0 else weight
        return engine.add_coflow(src, dst, size / wf, at_s=at_s, after=tuple(after), delay_s=delay,
                                 routes=routes, name=label, weight=flow_w, priority=priority,
                                 min_duration_s=schedule.min_transfer_s)
    if (engine._batched and engine.router is not None and priority == 0
            and isinstance(weight, float | int)):
        # one batch: the same coflows, ids and events as one add_coflow per step (below), 512
        # steps checked and added in one call (70 ms less of a 64-GPU collective's start-up)
        c0 = engine.add_coflows(_step_batch(engine.router, schedule, weight), at_s=at_s,
                                after=tuple(after), name=label)
        ids = list(range(c0, c0 + schedule.num_steps))
    else:
        ids = _add_steps(engine, schedule, after=after, at_s=at_s, label=label, **kw)
    sinks = schedule.sinks()
    if len(sinks) == 1:
        return ids[sinks[0]]
    return engine.add_coflow([], [], [], after=tuple(ids[s] for s in sinks), name=f"{label}/done",
                             **kw)


def _add_steps(engine: Engine, schedule: Schedule, *, after: Sequence[int], at_s: float | None,
               label: str, weight: float, priority: int) -> list[int]:
    """One `Engine.add_coflow` per step of the schedule; returns their ids."""
    wf = schedule.wire_fraction
    kw = dict(weight=weight, priority=priority)
    ids: list[int] = []
    step_routes = (_step_routes(engine.router, schedule)
                   if not schedule.adds_path_latency and engine.router is not None else None)
    for i, st in enumerate(schedule.steps):
        deps = tuple(ids[d] for d in st.deps) if st.deps else tuple(after)
        ids.append(engine.add_coflow(st.src_gpu, st.dst_gpu, st.size_bytes / wf,
                                     at_s=None if st.deps else at_s, after=deps,
                                     delay_s=st.latency_s, name=f"{label}/step{i}",
                                     routes=None if step_routes is None else step_routes[i],
                                     min_duration_s=st.min_transfer_s, **kw))
    return ids


def nic_bandwidth_bytes_per_s(fabric: Fabric, gpu: int = 0) -> float:
    """Scale-out bandwidth of one GPU: its NIC's network capacity over the GPUs sharing the NIC
    (the NVLink bandwidth on a fabric with no network)."""
    out = fabric.out_links(gpu)
    pcie = out[fabric.link_kind[out] == LinkKind.PCIE]
    if pcie.size:
        nic = int(fabric.link_dst[pcie[0]])
        nic_out = fabric.out_links(nic)
        net = nic_out[fabric.link_kind[nic_out] == LinkKind.NETWORK]
        sharing = int(np.count_nonzero(fabric.link_kind[nic_out] == LinkKind.PCIE))
        if net.size:
            return float(fabric.link_capacity_bytes_per_s[net].sum()) / max(sharing, 1)
    return float(fabric.link_capacity_bytes_per_s[out].max())


def choose(fabric: Fabric, collective: Collective, algorithm: str = "auto",
           protocol: str | None = None) -> tuple[str, str]:
    """Resolve "auto" with NCCL 2.30's selector (`flowherd.collectives.select`) and default the
    protocol (Simple for a named algorithm); validates both names.

    NCCL runs AllToAll as point-to-point sends with PXN, which puts every share on its
    destination's rail: across servers with several GPUs each, "auto" runs it as
    ``hierarchical`` (intra-server, then rail-aligned), else ``direct``.
    """
    if algorithm == "auto":
        sel = select(fabric, collective.gpus, collective.op, collective.size_bytes)
        algo = sel.algorithm
        if algo == "direct" and collective.op == Op.ALLTOALL:
            servers, counts = np.unique(fabric.gpu_server[np.asarray(collective.gpus)],
                                        return_counts=True)
            if len(servers) > 1 and counts[0] > 1 and np.all(counts == counts[0]):
                algo = "hierarchical"
        return algo, (sel.protocol if protocol is None else PROTOCOLS[protocol.lower()].value)
    ALGORITHMS[algorithm]  # raises UnknownNameError with the closest name
    return algorithm, PROTOCOLS["simple" if protocol is None else protocol.lower()].value


def nccl_channels(fabric: Fabric, collective: Collective) -> int:
    """Channels NCCL would run `collective` on (the selector's count for its size)."""
    return select(fabric, collective.gpus, collective.op, collective.size_bytes).channels


def simulate_collective(fabric: Fabric, collective: Collective, *, algorithm: str = "auto",
                        protocol: str | None = None, router: str = "spray", fidelity: str = "step",
                        seed: int = 0, chunks: int | None = None, channels: int | None = None,
                        latency_model: str = "nccl") -> CollectiveResult:
    """Simulate one collective alone on `fabric`.

    Args:
        fabric: The network; the collective's GPUs are its node ids.
        collective: What to run.
        algorithm: A name of `ALGORITHMS`, or "auto" for the NCCL-like selector.
        protocol: "simple", "ll" or "ll128"; default: the selector's (auto) or Simple.
        router: Routing policy ("ecmp", "spray", "shortest").
        fidelity: "step" or "collective".
        seed: Seed of the router (ECMP hashing).
        chunks: Pipelining chunks of tree / chain algorithms (default: by size).
        channels: NCCL channels of the algorithms that build one ring per channel; default
            NCCL's count for the collective (`nccl_channels`).
        latency_model: "nccl" (NCCL 2.30's latencies, which hold the paths'; run as NCCL runs
            it, the schedule takes the tuning model's bandwidth and latency on an idle fabric,
            `flowherd.collectives.calibrate`) or "fabric" (the paths' latencies only and full
            link rates, for closed-form checks).

    Returns:
        The time and the nccl-tests bandwidths.
    """
    with small_pages():  # 4 KiB pages for the run's arrays (`flowherd.engine.pages`)
        return _simulate_collective(fabric, collective, algorithm=algorithm, protocol=protocol,
                                    router=router, fidelity=fidelity, seed=seed, chunks=chunks,
                                    channels=channels, latency_model=latency_model)


def _simulate_collective(fabric: Fabric, collective: Collective, *, algorithm: str,
                         protocol: str | None, router: str, fidelity: str, seed: int,
                         chunks: int | None, channels: int | None,
                         latency_model: str) -> CollectiveResult:
    from flowherd.routing.policies import make_router

    fid = FIDELITIES[fidelity]
    if max(collective.gpus) >= fabric.num_gpus:
        raise ConfigError(f"the collective uses GPU {max(collective.gpus)} but fabric "
                          f"{fabric.name!r} has {fabric.num_gpus} GPUs (collective.gpus)")
    model = LATENCY_MODELS[latency_model]
    algo, proto = choose(fabric, collective, algorithm, protocol)
    n_ch = nccl_channels(fabric, collective) if channels is None else int(channels)
    sched = build_schedule(collective, algo, fabric=fabric, protocol=proto, chunks=chunks,
                           channels=n_ch, latency_model=model)
    predicted = (predicted_time_s(fabric, collective.gpus, collective.op, collective.size_bytes,
                                  algo, proto)
                 if collective.op in _MODEL_OPS and algo in _NCCL_ALGOS else None)
    engine = Engine(fabric, make_router(router, fabric, seed=seed), record_flows=False)
    if fid == "step":  # steps added as they become ready: memory in the steps in flight
        from flowherd.cluster.step_launch import launch_schedule, step_plan

        end: list[float] = []
        plan = step_plan(sched, engine.router, merge=engine.network is None)
        launch_schedule(engine, plan, then=end.append, at_s=0.0)
        engine.run()
        t = end[0] if end else None
    else:
        done = add_schedule(engine, sched, fidelity=fid, at_s=0.0)
        engine.run()
        t = engine.coflow_finish_s(done)
    size = float(collective.size_bytes)
    algbw = size / t if t and t > 0 else math.inf
    n_flows = len(sched.pair_bytes()[0]) if fid == "collective" else sched.num_flows
    return CollectiveResult(time_s=float(t or 0.0), algbw_bytes_per_s=algbw,
                            busbw_bytes_per_s=algbw * collective.busbw_factor(), algorithm=algo,
                            protocol=proto, num_gpus=collective.n, size_bytes=size,
                            op=collective.op.value, fidelity=fid, router=router,
                            num_steps=sched.num_steps, num_flows=n_flows,
                            wire_bytes=sched.total_bytes() / sched.wire_fraction, channels=n_ch,
                            predicted_time_s=predicted, latency_model=model)
