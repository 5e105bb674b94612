"""A lower bound on a job's iteration time that no online controller can beat.

The *isolated bound* of a control benchmark compares what controllers reach with what each job
would take alone. Timing each job alone in the simulator on its default routes (ECMP) gives no
bound: hash collisions inside the job make that run slower than the job can be, and a controller
that chooses paths beats it. This module computes a bound instead, from the job's op graph on its
GPUs:

* every communication task (a coflow: flows between GPU pairs that start together and end with
  their last byte) takes at least its pure delay (the collective's latency term) plus the larger of
  its least duration (NCCL's channel rate, `flowherd.cluster.executor.PreparedTask.min_duration_s`)
  and ``z*``, the least over every fractional routing of its pairs' bytes over their shortest
  paths (every equal-cost path: the paths ECMP, spraying and every controller of flowherd choose
  among) of ``max over links of (bytes on the link) / capacity``: a linear program (the
  multi-commodity-flow LP of `flowherd.planning.mcf.route_min_max_utilization`, solved with
  HiGHS);
* every compute task takes its duration;
* an iteration takes at least the longest dependency chain of these (the critical path), and a
  job at least its iterations times that (iteration ``i + 1`` starts when iteration ``i`` ends).

Why nothing beats it: whatever a controller decides (delays, one path or a split per pair,
weights, priority classes) and whatever else shares the links (other jobs, background), the bytes
of a coflow on a link cannot cross it faster than its capacity, and the routing the controller
picks is one of those the LP minimizes over. The bound leaves out the latency of the paths and
every loss of the network model (PFC pauses, DCQCN's rate cuts, max-min's stranded capacity), so
it is below the best run, never above it.

What it does not hold: the background. Under max-min sharing a background flow's share on a link
is not a fixed capacity taken away (adding flows elsewhere can raise it or lower it), so a time
"alone with the background" is an estimate a controller may beat, not a bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flowherd.cluster.executor import CollectiveCache, PreparedGraph, prepare_graph
from flowherd.fabric.core import Fabric
from flowherd.planning.mcf import route_min_max_utilization
from flowherd.planning.traffic import TrafficMatrix
from flowherd.routing.policies import make_router
from flowherd.workload import TrainingJob
from flowherd.workload.training import Granularity, rank_to_gpu

__all__ = ["IterationBound", "coflow_bound_s", "isolated_jct_s", "iteration_bound_s", "queue_bound_jct_s"]


@dataclass(slots=True)
class IterationBound:
    """Bounds of jobs' iterations on one fabric, with the LP solutions shared between them (a
    coflow whose pairs and byte shares were seen before scales the earlier solution).

    Args:
        fabric: The fabric.
    """

    fabric: Fabric
    _unit: dict = field(default_factory=dict)  # (pairs, shares) -> z* per byte of the coflow
    _cache: CollectiveCache | None = None
    _graphs: dict = field(default_factory=dict)

    def coflow_s(self, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray) -> float:
        """``z*`` of one coflow (module docstring), seconds."""
        return coflow_bound_s(self.fabric, src, dst, size_bytes, memo=self._unit)

    def graph_s(self, graph: PreparedGraph) -> float:
        """The critical path of ``graph`` with every task at its bound, seconds."""
        fin = np.zeros(len(graph.tasks))
        for i, t in enumerate(graph.tasks):
            d = float(t.delay_s)
            if t.routes is not None and t.size_bytes.size:
                d += max(float(t.min_duration_s), self.coflow_s(t.src, t.dst, t.size_bytes))
            fin[i] = max((fin[k] for k in t.deps), default=0.0) + d
        return float(fin.max(initial=0.0))

    def job_s(self, spec: TrainingJob, gpus=None) -> float:
        """The bound of one iteration of ``spec`` on ``gpus`` (its GPU node ids, as placed),
        seconds; with ``gpus`` None (a job that never started, whose GPUs are not known) its
        critical path with communication taking no time, which holds on any GPUs."""
        if gpus is None or len(gpus) == 0:
            return float(spec.iteration_graph(Granularity.STAGE).critical_path_s())
        key = (repr(_neutral(spec)), tuple(int(g) for g in gpus))
        if key not in self._graphs:
            if self._cache is None:
                # the router only gives the default routes, which the bound does not use
                self._cache = CollectiveCache(self.fabric, make_router("shortest", self.fabric))
            fab = self.fabric
            gps = np.bincount(fab.gpu_server)
            mapping = rank_to_gpu(spec, np.asarray(key[1], dtype=np.int64), int(gps.max()) if gps.size else 1,
                                  gpu_server=fab.gpu_server)
            graph = prepare_graph(spec.iteration_graph(Granularity.STAGE), mapping, self._cache)
            self._graphs[key] = self.graph_s(graph)
        return self._graphs[key]


def _neutral(spec: TrainingJob) -> TrainingJob:
    import dataclasses

    return dataclasses.replace(spec, name="bound", tenant="bound", submit_s=0.0, iterations=1)


def coflow_bound_s(fabric: Fabric, src, dst, size_bytes, *, memo: dict | None = None) -> float:
    """The least time the bytes of a coflow need on ``fabric`` over any routing on shortest paths,
    seconds: the optimum ``z*`` of ``min z`` s.t. every pair's bytes split over its equal-cost
    shortest paths and every link carries at most ``z`` times its capacity (HiGHS).

    Args:
        fabric: The fabric.
        src, dst: ``int64[k]``: GPU pairs.
        size_bytes: ``float64[k]``: bytes of each pair.
        memo: Solutions by (pairs, byte shares): a coflow of the same pairs in the same
            proportions scales the remembered ``z*`` by its bytes.

    >>> from flowherd.fabric import leaf_spine
    >>> fab = leaf_spine(servers=2, gpus_per_server=1, leaves=2, spines=2, nic_bandwidth_bytes_per_s=1e9,
    ...                  oversubscription=1.0)
    >>> round(coflow_bound_s(fab, [0], [1], [2e9]), 6)   # 2 GB over a 1 GB/s NIC
    2.0
    """
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    size = np.asarray(size_bytes, dtype=np.float64).ravel()
    keep = (size > 0) & (src != dst)
    src, dst, size = src[keep], dst[keep], size[keep]
    total = float(size.sum())
    if total <= 0:
        return 0.0
    key = (src.tobytes(), dst.tobytes(), np.round(size / total, 12).tobytes())
    if memo is not None and key in memo:
        return memo[key] * total
    sol = route_min_max_utilization(fabric, TrafficMatrix(src=src, dst=dst, size_bytes=size), period_s=1.0,
                                    column_generation=False)
    unit = float(sol.max_utilization if sol.status == "restricted" else sol.lower_bound) / total
    if memo is not None:
        memo[key] = unit
    return unit * total


def iteration_bound_s(fabric: Fabric, spec: TrainingJob, gpus) -> float:
    """The bound of one iteration of ``spec`` on ``gpus`` (module docstring), seconds."""
    return IterationBound(fabric).job_s(spec, gpus)


def isolated_jct_s(jobs: list[dict], horizon_s: float) -> float:
    """Mean JCT (censored at the horizon, as a run's) if every job started when submitted and ran
    its ``iterations`` at ``iteration_s`` each: with each job's `IterationBound` as
    ``iteration_s``, a job's censored JCT in any run is at least its term here.

    Args:
        jobs: Per job ``submit_s``, ``iterations`` and ``iteration_s``.
        horizon_s: The run's horizon, seconds.
    """
    jct = [min(d["iterations"] * d["iteration_s"], horizon_s - d["submit_s"]) for d in jobs
           if d["submit_s"] < horizon_s]
    return float(np.mean(jct)) if jct else float("nan")


def queue_bound_jct_s(jobs: list[dict], horizon_s: float, num_gpus: int) -> float:
    """Mean JCT (censored at the horizon) if every job ran its ``iterations`` at ``iteration_s``
    each, waiting for GPUs in the cluster's strict FIFO queue (`flowherd.cluster.simulate`: no
    backfilling; a job fits when enough GPUs are free). With each job's `IterationBound` as
    ``iteration_s`` no network controller does better: it can only lengthen a job's run, and in a
    strict FIFO queue a later end never starts a job sooner.

    Args:
        jobs: Per job ``submit_s``, ``gpus`` (a count), ``iterations`` and ``iteration_s``.
        horizon_s: The run's horizon, seconds.
        num_gpus: GPUs of the cluster.
    """
    events: list[tuple[float, int]] = []  # (end time, gpus) of the jobs started in the replay
    free, now, jct = num_gpus, 0.0, []
    for d in sorted(jobs, key=lambda d: d["submit_s"]):  # submission order: the FIFO order
        if d["submit_s"] >= horizon_s:
            continue
        now = max(now, d["submit_s"])
        events.sort()
        while free < d["gpus"]:
            end, g = events.pop(0)
            now, free = max(now, end), free + g
        free -= d["gpus"]
        end = now + d["iterations"] * d["iteration_s"]
        events.append((end, d["gpus"]))
        jct.append(min(end, horizon_s) - d["submit_s"])
    return float(np.mean(jct)) if jct else float("nan")
