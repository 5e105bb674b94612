"""Concurrent-traffic estimation: what a placed job sends over the network, and when.

The planner's two levels meet here. The upper level decides where a job runs; from the placement
the job's per-iteration traffic is known exactly, because every collective of its op graph
(`flowherd.workload.OpGraph`) becomes a `Schedule` by the algorithm the NCCL-like selector picks
(`flowherd.cluster.collective.choose`, the same choice the simulator makes), and the schedule's
``pair_bytes()`` are the bytes between GPU pairs. The lower level routes these bytes
(`flowherd.planning.mcf`) and `link_profile` turns a routing into bytes per link.

The time profile says during which share of an iteration each phase's (parallelism group's)
traffic is on the wire: the iteration's op graph is timed on its critical path with compute at
its duration and each communication task at its alone-on-the-fabric time (the busiest link's
bytes over its capacity under spraying, plus the schedule's critical-path latency), and each
group's active share is the length of the union of its tasks' intervals over the iteration
time. Two jobs' traffic can then be added on a link weighted by their active shares (the
planner's "concurrent-traffic estimate").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowherd.cluster.collective import choose, nccl_channels
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.routing.base import Router
from flowherd.routing.policies import ExplicitRouter, make_router
from flowherd.workload.opgraph import TaskKind
from flowherd.workload.training import rank_to_gpu

__all__ = ["JobTraffic", "TrafficMatrix", "job_traffic", "link_profile", "network_pairs"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TrafficMatrix:
    """Bytes between GPU pairs (per iteration, or per whatever period the caller means).

    Attributes:
        src: ``int64[k]`` sending GPU ids.
        dst: ``int64[k]`` receiving GPU ids.
        size_bytes: ``float64[k]`` bytes of each pair, >= 0. A pair may appear more than once;
            `aggregated` merges duplicates.
    """

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray

    def __post_init__(self) -> None:
        arrays = []
        for name in ("src", "dst"):
            a = np.asarray(getattr(self, name)).ravel()
            if a.size and a.dtype.kind not in "iu":
                raise ConfigError(f"traffic {name} must hold integer GPU ids, got dtype {a.dtype} "
                                  f"(TrafficMatrix.{name})")
            arrays.append(a.astype(np.int64))
        size = np.asarray(self.size_bytes, dtype=np.float64).ravel()
        src, dst = arrays
        if not len(src) == len(dst) == len(size):
            raise ConfigError(f"traffic src, dst and size_bytes must have equal lengths, got "
                              f"{len(src)}, {len(dst)}, {len(size)} (TrafficMatrix)")
        bad = np.flatnonzero(~np.isfinite(size) | (size < 0))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(f"traffic size_bytes must be finite and >= 0, got {size[i]!r} "
                              f"(TrafficMatrix.size_bytes[{i}])")
        bad = np.flatnonzero((src < 0) | (dst < 0))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(f"traffic GPU ids must be >= 0, got {src[i]} -> {dst[i]} "
                              f"(TrafficMatrix[{i}])")
        for name, arr in (("src", src), ("dst", dst), ("size_bytes", size)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @staticmethod
    def empty() -> TrafficMatrix:
        z = np.zeros(0, np.int64)
        return TrafficMatrix(src=z, dst=z, size_bytes=np.zeros(0))

    @property
    def num_pairs(self) -> int:
        return len(self.src)

    def total_bytes(self) -> float:
        return float(self.size_bytes.sum())

    def aggregated(self) -> TrafficMatrix:
        """One entry per distinct (src, dst) pair with ``src != dst`` and positive bytes, sorted."""
        keep = (self.src != self.dst) & (self.size_bytes > 0)
        s, d, b = self.src[keep], self.dst[keep], self.size_bytes[keep]
        if not s.size:
            return TrafficMatrix.empty()
        width = int(max(s.max(), d.max())) + 1
        uniq, inv = np.unique(s * width + d, return_inverse=True)
        return TrafficMatrix(src=uniq // width, dst=uniq % width,
                             size_bytes=np.bincount(inv, weights=b, minlength=uniq.size))

    def scaled(self, factor: float) -> TrafficMatrix:
        """Every pair's bytes times `factor` (>= 0)."""
        if not (np.isfinite(factor) and factor >= 0):
            raise ConfigError(f"scale factor must be finite and >= 0, got {factor!r} (factor)")
        return TrafficMatrix(src=self.src, dst=self.dst, size_bytes=self.size_bytes * factor)

    @staticmethod
    def concat(parts: Sequence[TrafficMatrix]) -> TrafficMatrix:
        """All pairs of `parts` (not aggregated)."""
        if not parts:
            return TrafficMatrix.empty()
        return TrafficMatrix(src=np.concatenate([p.src for p in parts]),
                             dst=np.concatenate([p.dst for p in parts]),
                             size_bytes=np.concatenate([p.size_bytes for p in parts]))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobTraffic:
    """The per-iteration network traffic of one placed job.

    Attributes:
        name: The job's name.
        rank_gpu: ``int64[world_size]``, the GPU of each rank (`flowherd.workload.rank_to_gpu`).
        phases: Per parallelism group ("tp", "pp", "dp", "ep", ...), the GPU-pair bytes of one
            iteration (aggregated; pairs inside a server included).
        compute_only_s: The iteration's critical path with communication taking no time, seconds.
        iteration_s: The iteration's critical path with every communication task at its
            alone-on-the-fabric time, seconds (an estimate without contention).
        comm_busy_s: Per group, the length of the union of its tasks' intervals, seconds.
        active_fraction: Per group, ``comm_busy_s / iteration_s`` in [0, 1]: the share of the
            iteration during which the group's traffic is on the wire.
        wire_phases: Per group, the bytes the simulator sends for ``phases`` (payload over the
            protocol's wire fraction: LL sends twice the payload, `Schedule.wire_fraction`).
    """

    name: str
    rank_gpu: np.ndarray
    phases: Mapping[str, TrafficMatrix]
    compute_only_s: float
    iteration_s: float
    comm_busy_s: Mapping[str, float] = field(default_factory=dict)
    active_fraction: Mapping[str, float] = field(default_factory=dict)
    wire_phases: Mapping[str, TrafficMatrix] = field(default_factory=dict)

    def total(self) -> TrafficMatrix:
        """All phases' bytes of one iteration, aggregated per pair."""
        return TrafficMatrix.concat(list(self.phases.values())).aggregated()

    def network(self, fabric: Fabric, *, wire: bool = False) -> TrafficMatrix:
        """The pairs of `total` whose GPUs are on different servers (scale-out traffic); with
        ``wire``, the bytes on the wire (`wire_phases`)."""
        t = (TrafficMatrix.concat(list(self.wire_phases.values())).aggregated()
             if wire and self.wire_phases else self.total())
        cross = fabric.gpu_server[t.src] != fabric.gpu_server[t.dst]
        return TrafficMatrix(src=t.src[cross], dst=t.dst[cross], size_bytes=t.size_bytes[cross])

    def link_profile(self, fabric: Fabric,
                     router_or_splits: Any = None) -> dict[str, tuple[np.ndarray, float]]:
        """The time profile on every link: per group, ``(bytes per second on each directed link
        while the group is active, active fraction of the iteration)``.

        A link's load averaged over an iteration is ``rate * fraction`` summed over the groups;
        two jobs' groups collide on a link only while both are active.
        """
        out: dict[str, tuple[np.ndarray, float]] = {}
        for grp, t in self.phases.items():
            busy = float(self.comm_busy_s.get(grp, 0.0))
            if busy <= 0:
                continue
            out[grp] = (link_profile(fabric, t, router_or_splits) / busy,
                        float(self.active_fraction.get(grp, 0.0)))
        return out

    def mean_rate(self) -> TrafficMatrix:
        """`total` divided by the iteration time: bytes per second averaged over an iteration."""
        return self.total().scaled(1.0 / self.iteration_s if self.iteration_s > 0 else 0.0)


def _router_of(fabric: Fabric, router_or_splits: Any) -> Router:
    if router_or_splits is None:
        return make_router("spray", fabric)
    if isinstance(router_or_splits, str):
        return make_router(router_or_splits, fabric)
    if hasattr(router_or_splits, "route"):
        return router_or_splits
    if hasattr(router_or_splits, "splits"):  # an McfSolution
        return ExplicitRouter(fabric, router_or_splits.splits())
    if isinstance(router_or_splits, Mapping):
        return ExplicitRouter(fabric, router_or_splits)
    raise ConfigError(f"router_or_splits must be a Router, a router name, an McfSolution or a "
                      f"splits mapping, got {type(router_or_splits).__name__} (router_or_splits)")


def link_profile(fabric: Fabric, traffic: TrafficMatrix, router_or_splits: Any = None) -> np.ndarray:
    """Bytes each directed link carries when `traffic` is routed.

    Args:
        fabric: The fabric.
        traffic: GPU-pair bytes.
        router_or_splits: A `Router`, a router name ("spray", "ecmp", ...), an `McfSolution`
            (its splits, ECMP for pairs it does not cover), or a splits mapping for
            `ExplicitRouter`. Default: spraying.

    Returns:
        ``float64[L]`` bytes per directed link (same unit and period as ``traffic``).

    >>> from flowherd.fabric.generators import leaf_spine
    >>> f = leaf_spine(servers=4, leaves=2, spines=2)
    >>> t = TrafficMatrix(src=np.array([0]), dst=np.array([3]), size_bytes=np.array([8.0]))
    >>> sorted(set(link_profile(f, t).tolist()))
    [0.0, 4.0, 8.0]
    """
    t = traffic.aggregated()
    out = np.zeros(fabric.num_directed_links)
    if not t.num_pairs:
        return out
    r = _router_of(fabric, router_or_splits).route(t.src.astype(np.int32), t.dst.astype(np.int32),
                                                   np.zeros(t.num_pairs, np.int64))
    owner = np.repeat(np.arange(t.num_pairs), np.diff(r.ptr))
    out += np.bincount(r.link, weights=r.frac * t.size_bytes[owner], minlength=out.size)
    return out


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -np.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def job_traffic(job: Any, gpus: Sequence[int] | np.ndarray, fabric: Fabric, *,
                granularity: str = "stage", router: Router | str | None = None) -> JobTraffic:
    """Per-iteration network traffic and time profile of a job placed on `gpus`.

    Args:
        job: A `TrainingJob` (anything with ``iteration_graph()``, ``tp``, ``world_size``).
        gpus: The job's GPUs (``world_size`` fabric GPU ids); ranks are mapped onto them by
            `flowherd.workload.rank_to_gpu` with the fabric's servers.
        fabric: The fabric.
        granularity: Op-graph granularity ("stage" or "layer").
        router: Routing that times the communication tasks (default spraying).

    Returns:
        The `JobTraffic`: per group GPU-pair bytes, compute-only and estimated iteration
        times, and each group's active share of the iteration.

    Raises:
        ConfigError: GPUs not in the fabric, or not as many as the job's ranks.
    """
    g = np.asarray(gpus, dtype=np.int64).ravel()
    if g.size and (g.min() < 0 or g.max() >= fabric.num_gpus):
        bad = int(g[(g < 0) | (g >= fabric.num_gpus)][0])
        raise ConfigError(f"job {getattr(job, 'name', '?')!r}: GPU {bad} is not in fabric "
                          f"{fabric.name!r} with {fabric.num_gpus} GPUs (gpus)")
    rank_gpu = rank_to_gpu(job, g, 1, gpu_server=fabric.gpu_server)
    graph = job.iteration_graph(granularity)
    rt = _router_of(fabric, router)
    cap = np.asarray(fabric.link_capacity_bytes_per_s)
    calls: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]] = {}

    def call(c: Collective) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]:
        on = tuple(int(x) for x in rank_gpu[list(c.gpus)])
        key = (c.op, on, float(c.size_bytes), c.root,
               None if c.matrix_bytes is None else np.asarray(c.matrix_bytes).tobytes())
        hit = calls.get(key)
        if hit is None:
            coll = Collective(op=c.op, gpus=on, size_bytes=c.size_bytes, root=c.root,
                              matrix_bytes=c.matrix_bytes)
            if coll.n < 2 or coll.size_bytes <= 0:
                z = np.zeros(0, np.int64)
                hit = (z, z, np.zeros(0), np.zeros(cap.size), 0.0, np.zeros(0))
            else:
                algo, proto = choose(fabric, coll)
                sched = build_schedule(coll, algo, fabric=fabric, protocol=proto,
                                       channels=nccl_channels(fabric, coll))
                s, d, b = sched.pair_bytes()
                wire = b / sched.wire_fraction
                # the time alone at NCCL's channel rate (a rate limit, not more bytes: Schedule)
                lb = link_profile(fabric, TrafficMatrix(src=s.astype(np.int64), dst=d.astype(np.int64),
                                                        size_bytes=b / sched.rate_fraction), rt)
                hit = (s.astype(np.int64), d.astype(np.int64), b, lb, sched.critical_path()[0], wire)
            calls[key] = hit
        return hit

    parts: dict[str, list[TrafficMatrix]] = {}
    wires: dict[str, list[TrafficMatrix]] = {}
    finish = np.zeros(len(graph.tasks))
    spans: dict[str, list[tuple[float, float]]] = {}
    for t in graph.tasks:
        start = max((finish[d] for d in t.deps), default=0.0)
        if t.kind == TaskKind.COMPUTE:
            finish[t.id] = start + t.duration_s
            continue
        loads = np.zeros(cap.size)
        lat = 0.0
        for c in t.collectives:
            s, d, b, lb, crit, wire = call(c)
            if s.size:
                parts.setdefault(t.group, []).append(
                    TrafficMatrix(src=s, dst=d, size_bytes=b * t.count))
                wires.setdefault(t.group, []).append(
                    TrafficMatrix(src=s, dst=d, size_bytes=wire * t.count))
            loads += lb
            lat = max(lat, crit)
        dur = t.count * (float(np.max(loads / cap)) + lat) if loads.any() else 0.0
        finish[t.id] = start + dur
        if dur > 0:
            spans.setdefault(t.group, []).append((start, start + dur))
    iteration_s = float(finish.max()) if finish.size else 0.0
    busy = {grp: float(_union_length(iv)) for grp, iv in spans.items()}
    return JobTraffic(
        name=str(getattr(job, "name", "job")), rank_gpu=rank_gpu,
        phases={grp: TrafficMatrix.concat(p).aggregated() for grp, p in parts.items()},
        compute_only_s=float(graph.critical_path_s()), iteration_s=iteration_s,
        comm_busy_s=busy,
        active_fraction={grp: (v / iteration_s if iteration_s > 0 else 0.0) for grp, v in busy.items()},
        wire_phases={grp: TrafficMatrix.concat(p).aggregated() for grp, p in wires.items()},
    )


def _aggregate(src: np.ndarray, dst: np.ndarray,
               size: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`TrafficMatrix.aggregated` on raw arrays (the same sums, in the same order)."""
    keep = (src != dst) & (size > 0)
    s, d, b = src[keep], dst[keep], size[keep]
    if not s.size:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    width = int(max(s.max(), d.max())) + 1
    uniq, inv = np.unique(s * width + d, return_inverse=True)
    return uniq // width, uniq % width, np.bincount(inv, weights=b, minlength=uniq.size)


def network_pairs(job: Any, gpus: Sequence[int] | np.ndarray, fabric: Fabric, *, wire: bool = False,
                  granularity: str = "stage") -> TrafficMatrix:
    """``job_traffic(job, gpus, fabric).network(fabric, wire=wire)`` without the time profile:
    the per-iteration bytes between the job's GPUs on different servers, the same numbers.

    The routing LP needs these bytes for every candidate placement it scores, and the time
    profile (each communication task's link loads under spraying) is most of `job_traffic`'s
    cost on a large fabric. A collective whose GPUs are all in one server sends nothing between
    servers and is skipped before its schedule is built; the others' pairs are summed per group
    and then over the groups, as `JobTraffic.network` sums them (each pair's sum in the same
    order, so bit for bit the same).
    """
    from flowherd.workload.training import TrainingJob

    if not isinstance(job, TrainingJob):
        return job_traffic(job, gpus, fabric, granularity=granularity).network(fabric, wire=wire)
    g = np.asarray(gpus, dtype=np.int64).ravel()
    if g.size and (g.min() < 0 or g.max() >= fabric.num_gpus):
        bad = int(g[(g < 0) | (g >= fabric.num_gpus)][0])
        raise ConfigError(f"job {getattr(job, 'name', '?')!r}: GPU {bad} is not in fabric "
                          f"{fabric.name!r} with {fabric.num_gpus} GPUs (gpus)")
    server = np.asarray(fabric.gpu_server)
    rank_gpu = rank_to_gpu(job, g, 1, gpu_server=server)
    rank_server = server[rank_gpu]
    graph = job.iteration_graph(granularity)
    calls: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}
    parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for t in graph.tasks:
        if t.kind == TaskKind.COMPUTE:
            continue
        for c in t.collectives:
            key = (c.op, tuple(c.gpus), float(c.size_bytes), c.root,
                   None if c.matrix_bytes is None else np.asarray(c.matrix_bytes).tobytes())
            if key in calls:
                hit = calls[key]
            else:
                ranks = np.asarray(c.gpus, dtype=np.int64)
                hit = None
                if (ranks.size >= 2 and c.size_bytes > 0
                        and bool((rank_server[ranks] != rank_server[ranks[0]]).any())):
                    coll = Collective(op=c.op, gpus=tuple(int(x) for x in rank_gpu[ranks]),
                                      size_bytes=c.size_bytes, root=c.root, matrix_bytes=c.matrix_bytes)
                    if coll.n >= 2:
                        algo, proto = choose(fabric, coll)
                        sched = build_schedule(coll, algo, fabric=fabric, protocol=proto,
                                               channels=nccl_channels(fabric, coll))
                        s, d, b = sched.pair_bytes()
                        if s.size:
                            hit = (s.astype(np.int64), d.astype(np.int64),
                                   b / sched.wire_fraction if wire else b)
                calls[key] = hit
            if hit is not None:
                parts.setdefault(t.group, []).append((hit[0], hit[1], hit[2] * t.count))
    if not parts:
        return TrafficMatrix.empty()
    groups = [_aggregate(np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps]),
                         np.concatenate([p[2] for p in ps])) for ps in parts.values()]
    s, d, b = _aggregate(np.concatenate([x[0] for x in groups]), np.concatenate([x[1] for x in groups]),
                         np.concatenate([x[2] for x in groups]))
    cross = server[s] != server[d]
    return TrafficMatrix(src=s[cross], dst=d[cross], size_bytes=b[cross])
