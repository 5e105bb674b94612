"""Job executors: op graphs of training iterations and inference steps walked on the engine.

An op graph (`flowherd.workload.OpGraph`) is over ranks; `prepare_graph` maps it to GPUs with
`flowherd.workload.rank_to_gpu` (done by the caller) and turns every task into what the engine
runs:

* a compute task is a pure delay of ``duration_s`` (a coflow without flows);
* a communication task is ``count`` back-to-back calls of its concurrent collectives, each
  collective turned into a `Schedule` by the algorithm the NCCL-like selector picks
  (`flowherd.cluster.collective.choose`). At ``collective`` fidelity the task is one coflow: the
  concurrent collectives' aggregate bytes per GPU pair times ``count`` (protocol overhead
  included), flows weighted by their bytes, after a delay of ``count`` times the schedule's
  critical-path latency minus the last hop's path latency, which the engine adds, lasting at
  least ``count`` times the slowest collective's `Schedule.min_transfer_s` (NCCL's channel
  rate); exactly what `flowherd.cluster.collective.add_schedule` does for one call. At ``step`` fidelity every
  step of every call is a coflow (`add_schedule` with ``fidelity="step"``), the ``count`` calls
  chained, and a pure delay joins the concurrent collectives.

A task's coflow waits for its dependencies' coflows; one more pure delay after the graph's sinks
marks the end of the iteration (or step) and calls back.

Schedules, their aggregate flows and their routes are built once per distinct collective (GPUs,
op, size) and reused: the selector, the schedule builder and the router are off the per-iteration
path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from flowherd.cluster.collective import add_schedule, choose, nccl_channels
from flowherd.cluster.step_launch import Countdown, StepPlan, launch_schedule, step_plan
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective
from flowherd.collectives.schedule import Schedule
from flowherd.engine.coflow_batch import BatchCoflow, CoflowBatch, make_batch
from flowherd.engine.core import Engine
from flowherd.fabric.core import Fabric
from flowherd.routing.base import Router, Routes
from flowherd.workload.opgraph import OpGraph, TaskKind

__all__ = ["CollectiveCache", "PreparedGraph", "PreparedTask", "add_graph", "contract_graph", "launch_graph",
           "prepare_graph"]

_NO = np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _CollPlan:
    """One call of one collective on GPUs, at collective fidelity."""

    schedule: Schedule
    src: np.ndarray
    dst: np.ndarray
    wire_bytes: np.ndarray  # per pair, one call, protocol overhead included
    crit_latency_s: float  # critical path of step + path latencies of one call
    last_latency_s: float  # largest path latency of the pairs (the engine adds it)
    routes: Routes
    min_transfer_s: float = 0.0  # NCCL's channel rate as a least duration (Schedule)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PreparedTask:
    """A task ready for the engine.

    Attributes:
        deps: Indices of the tasks it waits for.
        delay_s: Pure delay (compute time, or the latency term of a collective-fidelity coflow).
        src, dst, size_bytes, weight: The coflow's flows (empty for compute tasks).
        routes: Routes of the flows.
        schedules: The collectives' schedules (for ``step`` fidelity).
        count: Back-to-back calls.
        min_duration_s: Least time of the coflow from its start, seconds (``count`` calls at
            NCCL's channel rate, `flowherd.collectives.schedule.Schedule.min_transfer_s`).
    """

    deps: tuple[int, ...]
    delay_s: float
    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    weight: np.ndarray
    routes: Routes | None
    schedules: tuple[Schedule, ...] = ()
    count: int = 1
    min_duration_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PreparedGraph:
    """An op graph mapped to GPUs, ready to be added to an engine any number of times.

    Attributes:
        tasks: One `PreparedTask` per graph task, same order.
        sinks: Tasks no other task waits for.
        footprint_links: Sorted directed link ids any of its flows crosses.
        compute_only_s: Critical path with communication taking no time, seconds.
        gpu_busy_s: GPU-seconds of compute: sum over compute tasks of duration times the ranks of
            its stage.
        batch: Its ``collective``-fidelity coflows (the tasks, then the end marker) as one
            `CoflowBatch`, checked once (`add_graph` adds them in one call).
    """

    tasks: tuple[PreparedTask, ...]
    sinks: tuple[int, ...]
    footprint_links: np.ndarray
    compute_only_s: float
    gpu_busy_s: float
    batch: CoflowBatch | None = None


def _graph_batch(tasks: Sequence[PreparedTask], sinks: tuple[int, ...]) -> CoflowBatch:
    """The coflows `add_graph` adds at ``collective`` fidelity, as one batch."""
    cos = [BatchCoflow(deps=t.deps, delay_s=t.delay_s, suffix=f"/t{i}",
                       min_duration_s=t.min_duration_s) if t.routes is None else
           BatchCoflow(deps=t.deps, delay_s=t.delay_s, src=t.src, dst=t.dst, size_bytes=t.size_bytes,
                       weight=t.weight, routes=t.routes, suffix=f"/t{i}", min_duration_s=t.min_duration_s)
           for i, t in enumerate(tasks)]
    cos.append(BatchCoflow(deps=sinks if tasks else (), suffix="/end"))
    return make_batch(cos)


class CollectiveCache:
    """Schedules, aggregate flows and routes per distinct collective on GPUs (one per run).

    ``algorithm`` is the collective algorithm of every call: "auto" (the default) lets the
    NCCL-like selector pick per call (`flowherd.cluster.collective.choose`), a name of
    `flowherd.collectives.algorithms.ALGORITHMS` fixes it (e.g. "ring", as a simulator that only
    runs rings would). ``latency_model`` is `flowherd.collectives.algorithms.build_schedule`'s:
    "nccl" (the default, NCCL's step latencies) or "fabric" (the paths' latencies only).
    """

    def __init__(self, fabric: Fabric, router: Router, algorithm: str = "auto",
                 latency_model: str = "nccl"):
        self.fabric = fabric
        self.router = router
        self.algorithm = algorithm
        self.latency_model = latency_model
        self._plans: dict[tuple, _CollPlan | None] = {}
        self._choice: dict[tuple, tuple[str, str, int]] = {}

    def plan(self, coll: Collective) -> _CollPlan | None:
        """The plan of one call, or None if it moves no bytes between distinct GPUs."""
        key = (coll.op, coll.gpus, float(coll.size_bytes), coll.root,
               None if coll.matrix_bytes is None else np.asarray(coll.matrix_bytes).tobytes())
        if key in self._plans:
            return self._plans[key]
        plan = self._build(coll)
        self._plans[key] = plan
        return plan

    def _build(self, coll: Collective) -> _CollPlan | None:
        if coll.n < 2 or coll.size_bytes <= 0:
            return None
        fab = self.fabric
        nodes = len(np.unique(fab.gpu_server[np.asarray(coll.gpus)]))
        ckey = (coll.op, coll.n, float(coll.size_bytes), nodes, fab.gpu_type[fab.gpu_server[coll.gpus[0]]])
        if ckey not in self._choice:
            self._choice[ckey] = (*choose(fab, coll, self.algorithm), nccl_channels(fab, coll))
        algo, proto, channels = self._choice[ckey]
        sched = build_schedule(coll, algo, fabric=fab, protocol=proto, channels=channels,
                               latency_model=self.latency_model)
        if not sched.steps:
            return None
        src, dst, size = sched.pair_bytes()
        if not src.size:
            return None
        routes = self.router.route(src.astype(np.int32), dst.astype(np.int32), np.zeros(src.size, np.int64))
        if not sched.adds_path_latency:  # NCCL's step latencies hold the wire's (Schedule)
            routes = replace(routes, latency_s=np.zeros(routes.num_flows))
        lat = np.asarray(routes.latency_s, dtype=np.float64)
        # path latency of a step: its slowest pair's (every router uses fewest-hop paths)
        width = np.int64(fab.num_gpus)
        key = src.astype(np.int64) * width + dst
        order = np.argsort(key)
        skey, slat = key[order], lat[order]
        of, first = sched.patterns()  # the steps of one pattern have one path latency
        pat_lat = np.zeros(len(first))
        for i, st in enumerate(first):
            k = st.src_gpu.astype(np.int64) * width + st.dst_gpu
            if k.size:
                pat_lat[i] = float(slat[np.searchsorted(skey, k)].max())
        step_cost = np.array([st.latency_s for st in sched.steps]) + pat_lat[of]
        crit, _ = sched.critical_path(step_cost)
        return _CollPlan(schedule=sched, src=src.astype(np.int64), dst=dst.astype(np.int64),
                         wire_bytes=size / sched.wire_fraction, crit_latency_s=float(crit),
                         last_latency_s=float(lat.max()), routes=routes,
                         min_transfer_s=sched.min_transfer_s)


def prepare_graph(graph: OpGraph, rank_gpu: np.ndarray, cache: CollectiveCache) -> PreparedGraph:
    """Map ``graph`` (over ranks) to GPUs (``rank_gpu[rank]``) and build its tasks' coflows."""
    rank_gpu = np.asarray(rank_gpu, dtype=np.int64)
    tasks: list[PreparedTask] = []
    links: list[np.ndarray] = []
    waited: set[int] = set()
    busy = 0.0
    for t in graph.tasks:
        waited.update(t.deps)
        if t.kind == TaskKind.COMPUTE:
            busy += t.duration_s * len(graph.stage_ranks[t.stage])
            tasks.append(PreparedTask(deps=t.deps, delay_s=t.duration_s, src=_NO, dst=_NO,
                                      size_bytes=np.zeros(0), weight=np.zeros(0), routes=None))
            continue
        plans = []
        for c in t.collectives:
            gpus = tuple(int(g) for g in rank_gpu[list(c.gpus)])
            coll = Collective(op=c.op, gpus=gpus, size_bytes=c.size_bytes, root=c.root,
                              matrix_bytes=c.matrix_bytes)
            p = cache.plan(coll)
            if p is not None:
                plans.append(p)
        if not plans:
            tasks.append(PreparedTask(deps=t.deps, delay_s=0.0, src=_NO, dst=_NO,
                                      size_bytes=np.zeros(0), weight=np.zeros(0), routes=None))
            continue
        size = np.concatenate([p.wire_bytes for p in plans]) * t.count
        mean = float(size.mean())
        routes = Routes.concat([p.routes for p in plans]) if len(plans) > 1 else plans[0].routes
        links.append(np.asarray(routes.link, dtype=np.int64))
        delay = max(max(0.0, t.count * p.crit_latency_s - p.last_latency_s) for p in plans)
        tasks.append(PreparedTask(
            deps=t.deps, delay_s=delay, src=np.concatenate([p.src for p in plans]),
            dst=np.concatenate([p.dst for p in plans]), size_bytes=size,
            weight=size / mean if mean > 0 else np.ones_like(size), routes=routes,
            schedules=tuple(p.schedule for p in plans), count=t.count,
            min_duration_s=t.count * max(p.min_transfer_s for p in plans)))
    sinks = tuple(i for i in range(len(tasks)) if i not in waited)
    fp = np.unique(np.concatenate(links)) if links else _NO
    return PreparedGraph(tasks=tuple(tasks), sinks=sinks, footprint_links=fp,
                         compute_only_s=graph.critical_path_s(), gpu_busy_s=busy,
                         batch=_graph_batch(tasks, sinks))


def add_graph(engine: Engine, graph: PreparedGraph, *, fidelity: str, at_s: float | None = None,
              after: Sequence[int] = (), name: str = "",
              on_done: Callable[[int, float], None] | None = None,
              task_ids: list[int] | None = None) -> int:
    """Add one run of ``graph`` to ``engine``; returns the id of the pure delay that marks its end.

    Args:
        engine: The engine.
        graph: From `prepare_graph`.
        fidelity: "step" or "collective" (module docstring).
        at_s: Earliest start, seconds (default now).
        after: Coflows every task waits for.
        name: Prefix of the coflows' names.
        on_done: Called as ``on_done(end_coflow, finish_s)`` at the end.
        task_ids: If given, receives the coflow id of every task (its last one in ``step``).
    """
    after = tuple(after)
    if fidelity != "step" and graph.batch is not None and engine._batched:
        c0 = engine.add_coflows(graph.batch, at_s=at_s, after=after, name=name, on_done=on_done)
        if task_ids is not None:
            task_ids.extend(range(c0, c0 + graph.batch.num - 1))
        return c0 + graph.batch.num - 1
    ids: list[int] = []
    for i, t in enumerate(graph.tasks):
        deps = tuple(ids[d] for d in t.deps) if t.deps else after
        if t.routes is None:
            ids.append(engine.add_coflow(_NO, _NO, _NO, at_s=at_s, after=deps, delay_s=t.delay_s,
                                         name=f"{name}/t{i}"))
        elif fidelity == "step":
            ends = []
            for s in t.schedules:
                prev = deps
                for _ in range(t.count):
                    prev = (add_schedule(engine, s, fidelity="step", after=prev, at_s=at_s,
                                         name=f"{name}/t{i}"),)
                ends.extend(prev)
            ids.append(engine.add_coflow(_NO, _NO, _NO, after=tuple(ends), name=f"{name}/t{i}/done"))
        else:
            ids.append(engine.add_coflow(t.src, t.dst, t.size_bytes, at_s=at_s, after=deps,
                                         delay_s=t.delay_s, weight=t.weight, routes=t.routes,
                                         name=f"{name}/t{i}", min_duration_s=t.min_duration_s))
    if task_ids is not None:
        task_ids.extend(ids)
    sinks = tuple(ids[s] for s in graph.sinks) if ids else after
    return engine.add_coflow(_NO, _NO, _NO, at_s=at_s, after=sinks, name=f"{name}/end",
                             on_done=on_done)


def launch_graph(engine: Engine, graph: PreparedGraph, *, fidelity: str, at_s: float | None = None,
                 after: Sequence[int] = (), name: str = "",
                 on_done: Callable[[int, float], None] | None = None) -> None:
    """Walk one run of ``graph`` on ``engine``, adding each task's coflows when its dependencies
    have finished (from their ``on_done``) instead of all at once as `add_graph` does.

    The times are `add_graph`'s (a task, and at ``step`` fidelity a step of a collective, starts
    at its last dependency's end either way), but the engine holds only the coflows that have
    started: at ``step`` fidelity each step is added when the steps it waits for have ended, so
    a graph of many large collectives (54 ring AllReduces on 1,024 GPUs are 113 M flows) never
    holds more than the steps in flight. Arguments as `add_graph`'s; ``on_done(end_coflow,
    finish_s)`` is called at the end, from a pure delay added after the last task.
    """
    tasks = graph.tasks
    plans: dict[int, tuple[Schedule, StepPlan]] = {}  # a schedule's routes and merged flows, once

    def call(s: Schedule, label: str, then: Callable[[float], None]) -> None:
        """One call of `s`, step by step; ``then(finish_s)`` after its last step."""
        got = plans.get(id(s))
        if got is None or got[0] is not s:
            got = plans[id(s)] = (s, step_plan(s, engine.router, merge=engine.network is None))
        launch_schedule(engine, got[1], then=then, name=label)

    def finish(t_s: float) -> None:
        engine.add_coflow(_NO, _NO, _NO, name=f"{name}/end", on_done=on_done)

    def launch(i: int) -> None:
        t = tasks[i]
        done = lambda _c, t_s, i=i: graph_count.done(i, t_s)  # noqa: E731
        if t.routes is None:
            engine.add_coflow(_NO, _NO, _NO, delay_s=t.delay_s, name=f"{name}/t{i}", on_done=done)
        elif fidelity == "step":  # the collectives side by side, each `count` calls in a row
            running = [len(t.schedules)]

            def chain(s: Schedule, calls_left: int, t_s: float) -> None:
                if calls_left:
                    call(s, f"{name}/t{i}", lambda t2, s=s: chain(s, calls_left - 1, t2))
                    return
                running[0] -= 1
                if running[0] == 0:  # a pure delay joins them, as add_graph's
                    engine.add_coflow(_NO, _NO, _NO, name=f"{name}/t{i}/done", on_done=done)

            for s in t.schedules:
                chain(s, t.count, engine.now_s)
        else:
            engine.add_coflow(t.src, t.dst, t.size_bytes, delay_s=t.delay_s, weight=t.weight,
                              routes=t.routes, name=f"{name}/t{i}", min_duration_s=t.min_duration_s,
                              on_done=done)

    graph_count = Countdown([t.deps for t in tasks], launch, finish)

    def begin(_c: int, t_s: float) -> None:
        if not tasks:
            finish(t_s)
        graph_count.begin()

    engine.add_coflow(_NO, _NO, _NO, at_s=at_s, after=tuple(after), name=f"{name}/start", on_done=begin)


def contract_graph(graph: PreparedGraph, task_s: np.ndarray, exclusive: np.ndarray) -> PreparedGraph:
    """The ``phase`` form of a prepared graph: tasks that only use links nobody else can use
    become pure delays of their measured duration, and chains of such delays merge into one.

    Args:
        graph: From `prepare_graph`.
        task_s: ``float64[n]``: each task's duration from its last dependency's end to its own
            end, seconds (measured on a run of the job alone).
        exclusive: ``bool[n]``: tasks whose coflows only cross the job's own links (compute
            tasks, NVLink-only collectives); the others are kept as they are.

    A delay absorbs the next one when that is its only dependent and has no other dependency,
    so no task waits longer than in ``graph`` for the ones it depends on.
    """
    n = len(graph.tasks)
    dependents = np.zeros(n, np.int64)
    for t in graph.tasks:
        for d in t.deps:
            dependents[d] += 1
    new: list[PreparedTask] = []
    where = np.empty(n, np.int64)
    for i, t in enumerate(graph.tasks):
        deps = tuple(sorted({int(where[d]) for d in t.deps}))
        if exclusive[i]:
            if len(t.deps) == 1 and dependents[t.deps[0]] == 1 and exclusive[t.deps[0]]:
                j = int(where[t.deps[0]])
                prev = new[j]
                new[j] = PreparedTask(deps=prev.deps, delay_s=prev.delay_s + float(task_s[i]), src=_NO,
                                      dst=_NO, size_bytes=np.zeros(0), weight=np.zeros(0), routes=None)
                where[i] = j
                continue
            new.append(PreparedTask(deps=deps, delay_s=float(task_s[i]), src=_NO, dst=_NO,
                                    size_bytes=np.zeros(0), weight=np.zeros(0), routes=None))
        else:
            new.append(PreparedTask(deps=deps, delay_s=t.delay_s, src=t.src, dst=t.dst,
                                    size_bytes=t.size_bytes, weight=t.weight, routes=t.routes,
                                    schedules=t.schedules, count=t.count,
                                    min_duration_s=t.min_duration_s))
        where[i] = len(new) - 1
    waited = {d for t in new for d in t.deps}
    sinks = tuple(i for i in range(len(new)) if i not in waited)
    return PreparedGraph(tasks=tuple(new), sinks=sinks, footprint_links=graph.footprint_links,
                         compute_only_s=graph.compute_only_s, gpu_busy_s=graph.gpu_busy_s,
                         batch=_graph_batch(new, sinks))
