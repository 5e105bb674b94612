"""Op graphs: the DAG of compute and communication tasks of one training iteration or inference step.

An `OpGraph` is over *ranks* (``0 .. world_size - 1``), not GPUs: the collectives' ``gpus`` field holds
rank ids, and the simulator maps them to GPUs with the array from `flowherd.workload.rank_to_gpu`
(``gpu = mapping[rank]``). The workload package never sees links.

A task is either

* compute: ``duration_s`` on every rank of ``stage_ranks[task.stage]`` at once (ranks of a pipeline
  stage, or of an inference pool, run the same kernels in lock step), or
* communication: a tuple of *concurrent* `Collective` calls (e.g. one TP AllReduce per TP group of the
  stage), repeated ``count`` times back to back. ``count`` lets per-layer calls be merged per stage and
  micro-batch without changing their total bytes: the bandwidth term scales with
  ``count * size_bytes``, the latency term with ``count``.

Tasks are stored in a topological order: every dependency has a smaller id. A task starts when all its
dependencies have finished.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from flowherd.collectives.ops import Collective, Op
from flowherd.errors import ConfigError

GROUPS = ("tp", "pp", "dp", "ep", "cp", "zero", "kv")


class TaskKind(StrEnum):
    COMPUTE = "compute"
    COMM = "comm"


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One node of an `OpGraph`.

    Attributes:
        id: Index in `OpGraph.tasks`.
        kind: Compute or communication.
        name: Human label ("s0/mb3/fwd/L4-7", "s1/dp/bucket2").
        deps: Ids of the tasks that must finish first (all smaller than ``id``).
        stage: Pipeline stage (or inference pool) whose ranks run a compute task; for a comm task the
            stage that issues it.
        duration_s: Compute time on each rank, seconds (0 for comm tasks).
        collectives: Concurrent collectives over rank ids (empty for compute tasks).
        count: Back-to-back repetitions of ``collectives``.
        group: Parallelism the traffic belongs to: "tp", "pp", "dp", "ep", "cp", "zero" or "kv"
            (disaggregated-inference KV-cache transfer); "" for compute.
        micro_batch: Micro-batch index, or None for per-iteration tasks.
        phase: "fwd", "bwd", "step" (optimizer), "sync" or an inference phase.
    """

    id: int
    kind: TaskKind
    name: str
    deps: tuple[int, ...] = ()
    stage: int = 0
    duration_s: float = 0.0
    collectives: tuple[Collective, ...] = ()
    count: int = 1
    group: str = ""
    micro_batch: int | None = None
    phase: str = ""

    @property
    def bytes_per_call(self) -> float:
        """Sum of ``size_bytes`` over the concurrent collectives of one call."""
        return float(sum(c.size_bytes for c in self.collectives))

    @property
    def total_bytes(self) -> float:
        """``count * bytes_per_call`` (nccl-tests size convention, see `flowherd.collectives.ops`)."""
        return self.count * self.bytes_per_call


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class OpGraph:
    """A DAG of tasks over ranks.

    Attributes:
        name: Label ("job-a/iteration").
        world_size: Number of ranks.
        stage_ranks: For each stage, the ranks that execute its compute tasks.
        tasks: The tasks, in topological order (``tasks[i].id == i``).
    """

    name: str
    world_size: int
    stage_ranks: tuple[tuple[int, ...], ...]
    tasks: tuple[Task, ...]

    def __post_init__(self) -> None:
        checked: set[int] = set()  # builders share collective tuples between tasks
        for i, t in enumerate(self.tasks):
            if t.id != i:
                raise ConfigError(f"task ids must be 0..n-1 in order, got id {t.id} at {i} (tasks[{i}].id)")
            if any(d >= i or d < 0 for d in t.deps):
                raise ConfigError(
                    f"dependencies must point to earlier tasks, got {t.deps} (tasks[{i}].deps)"
                )
            if not 0 <= t.stage < len(self.stage_ranks):
                raise ConfigError(f"stage {t.stage} out of range (tasks[{i}].stage)")
            if t.count < 1:
                raise ConfigError(f"count must be >= 1, got {t.count} (tasks[{i}].count)")
            if id(t.collectives) in checked:
                continue
            checked.add(id(t.collectives))
            for c in t.collectives:
                if max(c.gpus) >= self.world_size:
                    raise ConfigError(
                        f"collective rank {max(c.gpus)} >= world_size {self.world_size} (tasks[{i}])"
                    )

    def __len__(self) -> int:
        return len(self.tasks)

    def bytes_by_group(self) -> dict[str, float]:
        """Total bytes (nccl-tests sizes, summed over concurrent calls and ``count``) per group."""
        out: dict[str, float] = defaultdict(float)
        for t in self.tasks:
            if t.kind == TaskKind.COMM:
                out[t.group] += t.total_bytes
        return dict(out)

    def bytes_by_group_op(self) -> dict[tuple[str, Op], float]:
        """Total bytes per (group, collective op)."""
        out: dict[tuple[str, Op], float] = defaultdict(float)
        for t in self.tasks:
            for c in t.collectives:
                out[(t.group, c.op)] += t.count * c.size_bytes
        return dict(out)

    def calls_by_group(self) -> dict[str, int]:
        """Number of collective calls per group (concurrent calls and ``count`` included)."""
        out: dict[str, int] = defaultdict(int)
        for t in self.tasks:
            if t.kind == TaskKind.COMM:
                out[t.group] += t.count * len(t.collectives)
        return dict(out)

    def compute_s_by_stage(self) -> np.ndarray:
        """Total compute seconds per stage (sum over its compute tasks)."""
        out = np.zeros(len(self.stage_ranks))
        for t in self.tasks:
            if t.kind == TaskKind.COMPUTE:
                out[t.stage] += t.duration_s
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """Flat arrays for the simulator: ``kind`` (0 compute, 1 comm), ``stage``, ``duration_s``,
        ``count``, and the dependencies in CSR form (``dep_indptr``, ``dep_indices``)."""
        n = len(self.tasks)
        indptr = np.zeros(n + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(t.deps) for t in self.tasks])
        indices = np.fromiter((d for t in self.tasks for d in t.deps), dtype=np.int64, count=indptr[-1])
        return {
            "kind": np.array([t.kind == TaskKind.COMM for t in self.tasks], dtype=np.int8),
            "stage": np.array([t.stage for t in self.tasks], dtype=np.int32),
            "duration_s": np.array([t.duration_s for t in self.tasks], dtype=np.float64),
            "count": np.array([t.count for t in self.tasks], dtype=np.int64),
            "dep_indptr": indptr,
            "dep_indices": indices,
        }

    def critical_path_s(self, comm_time_s: Callable[[Task], float] | None = None) -> float:
        """Length of the longest path, seconds, with compute at ``duration_s`` and each comm task at
        ``comm_time_s(task)`` (0 if not given: the compute-only lower bound of the step time)."""
        finish = np.zeros(len(self.tasks))
        for t in self.tasks:
            start = max((finish[d] for d in t.deps), default=0.0)
            dur = t.duration_s if t.kind == TaskKind.COMPUTE else (comm_time_s(t) if comm_time_s else 0.0)
            finish[t.id] = start + dur
        return float(finish.max(initial=0.0))


class GraphBuilder:
    """Appends tasks with fresh ids; `build` freezes them into an `OpGraph`."""

    def __init__(self, name: str, world_size: int, stage_ranks: Iterable[Iterable[int]]):
        self.name = name
        self.world_size = world_size
        self.stage_ranks = tuple(tuple(int(r) for r in s) for s in stage_ranks)
        self.tasks: list[Task] = []

    def compute(self, name: str, duration_s: float, deps: Iterable[int | None], *, stage: int,
                micro_batch: int | None = None, phase: str = "") -> int:
        return self._add(Task(id=len(self.tasks), kind=TaskKind.COMPUTE, name=name, deps=_deps(deps),
                              stage=stage, duration_s=float(duration_s), micro_batch=micro_batch,
                              phase=phase))

    def comm(self, name: str, collectives: tuple[Collective, ...], deps: Iterable[int | None], *,
             group: str, stage: int, count: int = 1, micro_batch: int | None = None,
             phase: str = "") -> int:
        return self._add(Task(id=len(self.tasks), kind=TaskKind.COMM, name=name, deps=_deps(deps),
                              stage=stage, collectives=collectives, count=int(count), group=group,
                              micro_batch=micro_batch, phase=phase))

    def _add(self, task: Task) -> int:
        self.tasks.append(task)
        return task.id

    def build(self) -> OpGraph:
        return OpGraph(name=self.name, world_size=self.world_size, stage_ranks=self.stage_ranks,
                       tasks=tuple(self.tasks))


def _deps(deps: Iterable[int | None]) -> tuple[int, ...]:
    return tuple(sorted({int(d) for d in deps if d is not None}))
