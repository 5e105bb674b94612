"""Job migration: MonkeyTree's defragmentation ILP, and migration as a lever of the plan.

MonkeyTree (Zabreyko, Wang, Ghobadi, arXiv 2602.08296; its code `hipersys-team/MonkeyTree`,
``src/monkeytree/ilp.rs`` and ``fragmentation.rs``) removes congestion on oversubscribed leaf
uplinks by moving workers, not flows: a ring collective sends one flow out of every leaf (ToR)
its group spans, so a leaf stays congestion-free while the rings that cross it fit its uplinks.

* A **segment** is a job's unit of fragmentation: each pipeline stage of a pipelined job (its
  DP/EP rings), the whole job otherwise; here the blocks of `flowherd.planning.groups.job_groups`
  (``stage_servers`` consecutive servers of the job in server order, which is how the simulator
  lays Megatron's ranks, `flowherd.workload.training.rank_to_gpu`). A segment is *fragmented*
  when its servers span more than one leaf.
* A leaf's **fragmentation** is the ring-weighted count of the fragmented segments present on
  it; a segment weighs its rings: one per NIC of a server (NCCL's rings on servers of one NIC per
  GPU run a channel through every NIC), so `gpus_per_server` here.
* The **bound** of a leaf, ``lambda``, is the rings its uplinks carry at line rate: its uplink
  capacity over one NIC's (4:1 with 16 servers of 8 NICs: 32 rings, four fragmented segments).
* **Trigger**: at every job start and end (MonkeyTree's ``on_reconfigure``), when some leaf's
  fragmentation exceeds its bound, the ILP below is solved over the fragmented segments; the
  others stay where they are.
* **ILP** (the paper's formulation 5.1-5.5 with 6.6, in whole servers as its ``block_size`` 8;
  HiGHS): for each fragmented segment s and leaf t, ``w[s,t]`` servers (integer), ``x[s,t]``
  present (binary), ``y[s,t]`` s lies in t alone (binary), ``d[s,t] >= |w - w0|``; minimize
  ``sum d`` (twice the servers moved) subject to every segment keeping its size (5.1), every
  leaf's room (its servers less those of the segments that stay, 5.2), ``w <= U x`` (5.3),
  ``sum_s ring_s (x - y) <= lambda_t`` (5.4 / 6.6: a segment alone in one leaf is not
  fragmented), ``y[s,t] = 1`` only if s is nowhere else (6.6b).
* The new servers: a segment that loses servers in a leaf frees those of its servers (highest id
  first); one that gains takes free whole servers of the leaf (lowest id first).

A migrated job stops, checkpoints, moves its moved workers and restores (MonkeyTree: in-memory
checkpoint-and-restore over RDMA, 9.02 s of system overhead end to end per worker, all workers
in parallel). Here each moved worker is down ``cost_per_worker_s`` and the job, synchronous,
stalls that long; it resumes at the next iteration boundary on its new GPUs. The plan of such a
job has parts (`split_parts`): its iterations before the move on the old GPUs, the rest on the
new ones from the move plus the stall; the simulator runs the parts as jobs in the plan's order
and a job's JCT is its last part's end less its submission (`merged_jct_s`).

Two uses, under the same timeline and scheduler (`flowherd.planning.timeline`):

* ``monkeytree`` (`flowherd.planning.placers`): the topology placement, then MonkeyTree's rule:
  migrate whenever a leaf is over its bound, whatever the cost (``cost_aware=False``);
* the plan's lever (``bilevel`` with ``migration_cost_per_worker_s``): the same ILP proposes the
  moves; they are made only when the planner's model predicts that the running jobs' remaining
  run time drops by more than the migrated jobs' stalls (``cost_aware=True``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import scipy.sparse as sp

from flowherd.errors import ConfigError
from flowherd.planning.groups import job_groups
from flowherd.planning.predict import FabricView, JobProfile, _server_of, evaluate

__all__ = ["MONKEYTREE_COST_PER_WORKER_S", "Migration", "Move", "Segment", "check_migration_cost",
           "defragment", "leaf_bounds", "leaf_fragmentation", "merged_jct_s", "segments", "split_parts"]

# MonkeyTree (arXiv 2602.08296, abstract): end-to-end system overhead per migrated worker, seconds
MONKEYTREE_COST_PER_WORKER_S = 9.02
_ILP_TIME_LIMIT_S = 5.0


def check_migration_cost(value: Any, field: str = "planner.migration_cost_per_worker_s") -> float:
    """``value`` as a cost per moved worker, seconds; a `ConfigError` naming ``field`` unless it is
    a finite number >= 0."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and value >= 0
    if not ok:
        raise ConfigError(f"migration cost per moved worker must be a number of seconds >= 0, got {value!r} "
                          f"({field})")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """Settings of migration in a planning timeline.

    Attributes:
        cost_per_worker_s: Seconds each moved worker is down (the migrated job stalls that long).
        cost_aware: Migrate only when the model predicts a gain over the stalls (the plan's
            lever); False: whenever a leaf is over its bound (MonkeyTree's rule).
    """

    cost_per_worker_s: float = MONKEYTREE_COST_PER_WORKER_S
    cost_aware: bool = True

    def __post_init__(self) -> None:
        check_migration_cost(self.cost_per_worker_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """A job's unit of fragmentation (module docstring).

    Attributes:
        job: Index of the job (the timeline's).
        servers: Its servers, ascending.
        rings: Rings it sends across a leaf boundary when it spans leaves.
    """

    job: int
    servers: np.ndarray
    rings: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """One job moved at one time.

    Attributes:
        job: Index of the job.
        time_s: When it stops, seconds.
        old_gpus, new_gpus: Its GPUs before and after, ascending.
        moved_gpus: Workers moved (GPUs of the new placement it did not hold).
        iterations_before: Iterations it ran before the move (0: it had not started: a
            re-placement, no stall).
        stall_s: Time it is down, seconds.
    """

    job: int
    time_s: float
    old_gpus: np.ndarray
    new_gpus: np.ndarray
    moved_gpus: int
    iterations_before: int
    stall_s: float


def leaf_bounds(view: FabricView) -> np.ndarray:
    """``int64[L]``: rings each leaf's uplinks carry at line rate (its uplink capacity over one
    NIC's; a leaf of unbounded uplinks: no bound)."""
    up = np.asarray(view.leaf_uplink_bytes_per_s, dtype=np.float64)
    big = np.iinfo(np.int64).max // 4
    rings = np.floor(up / max(view.nic_bytes_per_s, 1e-9) + 1e-9)
    return np.where(np.isfinite(up), rings, big).astype(np.int64)


def segments(view: FabricView, profiles: Sequence[JobProfile], placed: Sequence[tuple[int, np.ndarray]]
             ) -> tuple[list[Segment], np.ndarray]:
    """(the segments of the placed jobs in whole servers, ``bool[S]`` the servers no segment can
    leave: those of jobs in part of a server)."""
    server = _server_of(view)
    gps = view.gpus_per_server
    segs: list[Segment] = []
    pinned = np.zeros(view.num_servers, bool)
    for k, g in placed:
        srv = np.unique(server[np.asarray(g, dtype=np.int64)])
        grp = job_groups(profiles[k], gps)
        if grp.servers == 0 or srv.size != grp.servers:
            pinned[srv] = True
            continue
        for q in range(grp.stages):
            block = srv[q * grp.stage_servers:(q + 1) * grp.stage_servers]
            segs.append(Segment(job=k, servers=block, rings=gps))
    return segs, pinned


def leaf_fragmentation(view: FabricView, segs: Sequence[Segment]) -> np.ndarray:
    """``int64[L]``: the ring-weighted count of fragmented segments present on each leaf."""
    out = np.zeros(view.num_leaves, np.int64)
    for s in segs:
        leaves = np.unique(view.server_leaf[s.servers])
        if leaves.size > 1:
            out[leaves] += s.rings
    return out


def _ilp(w0: np.ndarray, rings: np.ndarray, room: np.ndarray, lam: np.ndarray) -> np.ndarray | None:
    """MonkeyTree's minimum-move ILP (module docstring); ``w0[s, t]`` servers of fragmented
    segment s in leaf t now. The new ``w`` or None (infeasible, or not solved in time)."""
    ns, nt = w0.shape
    size = w0.sum(axis=1)
    n = ns * nt

    def ix(block: int) -> np.ndarray:
        return block * n + np.arange(n).reshape(ns, nt)

    w, x, y, d = ix(0), ix(1), ix(2), ix(3)
    upper = np.minimum(size[:, None], np.maximum(room[None, :], 0)).astype(np.float64)
    lo = np.zeros(4 * n)
    hi = np.concatenate([upper.ravel(), np.ones(n), np.ones(n), np.full(n, np.inf)])
    cost = np.zeros(4 * n)
    cost[d.ravel()] = 1.0
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rlo: list[float] = []
    rhi: list[float] = []

    def row(cs: Sequence[int], vs: Sequence[float], a: float, b: float) -> None:
        r = len(rlo)
        rows.extend([r] * len(cs))
        cols.extend(int(c) for c in cs)
        vals.extend(float(v) for v in vs)
        rlo.append(a)
        rhi.append(b)

    for s in range(ns):
        row(w[s], [1.0] * nt, float(size[s]), float(size[s]))  # 5.1: the segment keeps its size
    for t in range(nt):
        row(w[:, t], [1.0] * ns, -math.inf, float(room[t]))  # 5.2: the leaf's room
        # 5.4 / 6.6: ring-weighted fragmented segments present <= lambda
        row(np.concatenate([x[:, t], y[:, t]]), np.concatenate([rings, -rings]), -math.inf, float(lam[t]))
    for s in range(ns):
        for t in range(nt):
            row([w[s, t], x[s, t]], [1.0, -upper[s, t]], -math.inf, 0.0)  # 5.3: w <= U x
            row([d[s, t], w[s, t]], [1.0, -1.0], -float(w0[s, t]), math.inf)  # 5.5: d >= w - w0
            row([d[s, t], w[s, t]], [1.0, 1.0], float(w0[s, t]), math.inf)  # d >= w0 - w
            row([y[s, t], x[s, t]], [1.0, -1.0], -math.inf, 0.0)  # 6.6a: y <= x
            others = [x[s, u] for u in range(nt) if u != t]  # 6.6b: y = 1 only if alone in t
            row([*others, y[s, t]], [1.0] * len(others) + [float(nt - 1)], -math.inf, float(nt - 1))
    a = sp.csc_matrix((vals, (rows, cols)), shape=(len(rlo), 4 * n))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = 4 * n, len(rlo)
    lp.col_cost_ = cost
    lp.col_lower_, lp.col_upper_ = lo, hi
    lp.row_lower_, lp.row_upper_ = np.asarray(rlo), np.asarray(rhi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * (4 * n)
    h = getattr(getattr(highspy, "_core", None), "_Highs", highspy.Highs)()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("threads", 1)
    h.setOptionValue("time_limit", _ILP_TIME_LIMIT_S)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:  # MonkeyTree acts on optimal solves only
        return None
    return np.rint(np.asarray(h.getSolution().col_value)[w.ravel()]).reshape(ns, nt).astype(np.int64)


def defragment(view: FabricView, profiles: Sequence[JobProfile], placed: Sequence[tuple[int, np.ndarray]],
               free: np.ndarray) -> dict[int, np.ndarray]:
    """MonkeyTree's defragmentation of the ``placed`` jobs (index, GPUs) with ``free`` GPUs
    (module docstring): {job index: its new GPUs} for the jobs it moves; empty when no leaf is
    over its bound or the ILP has no optimal solution."""
    segs, pinned = segments(view, profiles, placed)
    lam = leaf_bounds(view)
    if not segs or np.all(leaf_fragmentation(view, segs) <= lam):
        return {}
    leaf = view.server_leaf
    frag = [s for s in segs if np.unique(leaf[s.servers]).size > 1]
    stay = np.zeros(view.num_servers, bool)
    for s in segs:
        if np.unique(leaf[s.servers]).size == 1:
            stay[s.servers] = True
    server = _server_of(view)
    busy = np.bincount(server[~free], minlength=view.num_servers) > 0
    whole_free = ~busy
    held_by_frag = np.zeros(view.num_servers, bool)
    for s in frag:
        held_by_frag[s.servers] = True
    # a leaf's room for the fragmented segments: their own servers and the leaf's free whole servers
    room = np.bincount(leaf[held_by_frag | (whole_free & ~stay & ~pinned)], minlength=view.num_leaves)
    w0 = np.stack([np.bincount(leaf[s.servers], minlength=view.num_leaves) for s in frag])
    # the bound left for the moved segments: lambda less what fragmented segments cannot change
    w = _ilp(w0, np.array([s.rings for s in frag], np.int64), room, lam)
    if w is None or np.array_equal(w, w0):
        return {}
    pool = [list(np.flatnonzero(whole_free & ~pinned & (leaf == t))) for t in range(view.num_leaves)]
    new_servers: list[list[int]] = [list(s.servers) for s in frag]
    for i in range(len(frag)):  # first every loss: the servers it frees join the leaf's pool
        for t in np.flatnonzero(w[i] < w0[i]).tolist():
            mine = sorted((x for x in new_servers[i] if leaf[x] == t), reverse=True)[:int(w0[i, t] - w[i, t])]
            for x in mine:
                new_servers[i].remove(x)
                pool[t].append(x)
    for t in range(view.num_leaves):
        pool[t].sort(reverse=True)
    for i in range(len(frag)):  # then every gain, lowest free ids first
        for t in np.flatnonzero(w[i] > w0[i]).tolist():
            for _ in range(int(w[i, t] - w0[i, t])):
                new_servers[i].append(pool[t].pop())
    by_job: dict[int, list[int]] = {}
    for s in segs:
        if not any(s is f for f in frag):
            by_job.setdefault(s.job, []).extend(int(x) for x in s.servers)
    for i, s in enumerate(frag):
        by_job.setdefault(s.job, []).extend(new_servers[i])
    old = dict((k, np.asarray(g, dtype=np.int64)) for k, g in placed)
    out: dict[int, np.ndarray] = {}
    for k, srv in by_job.items():
        g = np.sort(np.concatenate([view.gpus_of(x) for x in srv]))
        if not np.array_equal(g, np.sort(old[k])):
            out[k] = g
    return out


def propose(view: FabricView, profiles: Sequence[JobProfile], running: Sequence[int], gpus: Sequence[Any],
            free: np.ndarray, left: np.ndarray, started_now: np.ndarray, t: float, settings: Migration
            ) -> list[Move]:
    """The moves of the running jobs now (module docstring, "Trigger"); ``left[k]`` the share of
    job k's work left, ``started_now[k]`` whether it starts at ``t`` (moving it is a re-placement,
    no stall). Cost-aware: all the moves, or none, by the model's predicted remaining run times."""
    placed = [(k, np.asarray(gpus[k], dtype=np.int64)) for k in running]
    new = defragment(view, profiles, placed, free)
    moves: list[Move] = []
    for k, g in new.items():
        p = profiles[k]
        if started_now[k]:
            done = 0
        else:
            if p.fixed_duration_s is not None or p.iterations < 2:
                continue  # a service or a one-iteration job is not migrated
            done = round(p.iterations * (1.0 - left[k]))
            if done < 1 or done > p.iterations - 1:
                continue  # it has not run an iteration yet, or is in its last one
        old = np.asarray(gpus[k], dtype=np.int64)
        moved = int(np.setdiff1d(g, old).size)
        moves.append(Move(job=k, time_s=t, old_gpus=old, new_gpus=g, moved_gpus=moved, iterations_before=done,
                          stall_s=settings.cost_per_worker_s if done else 0.0))
    if not moves or not settings.cost_aware:
        return moves
    # the model's remaining run time of every running job, before and after, against the stalls
    now = list(running)
    before = evaluate(view, [profiles[k] for k in now], [gpus[k] for k in now]).duration_s
    after_g = {m.job: m.new_gpus for m in moves}
    after = evaluate(view, [profiles[k] for k in now], [after_g.get(k, gpus[k]) for k in now]).duration_s
    gain = float(sum(left[k] * (b - a) for k, b, a in zip(now, before, after, strict=True)))
    return moves if gain > sum(m.stall_s for m in moves) else []


def split_parts(jobs: Sequence[Any], starts: Sequence[float], gpus: Sequence[Any], moves: Sequence[Move]
                ) -> list[tuple[int, Any, np.ndarray, float]]:
    """The parts a plan runs (module docstring): (job index, the part's spec, its GPUs, its start),
    in job order. A job that never moved is one part; a moved one runs ``iterations_before`` on
    its old GPUs, then the rest on its new ones from the move plus the stall, named
    ``<name>~1``, ``<name>~2`` ... (submitted then)."""
    import dataclasses

    by: dict[int, list[Move]] = {}
    for m in moves:
        by.setdefault(m.job, []).append(m)
    out = []
    for k, j in enumerate(jobs):
        ms = sorted(by.get(k, []), key=lambda m: m.time_s)
        if not ms:
            out.append((k, j, np.asarray(gpus[k], dtype=np.int64), float(starts[k])))
            continue
        done, start, part = 0, float(starts[k]), 0
        g = np.asarray(ms[0].old_gpus, dtype=np.int64)
        for m in ms:
            n = m.iterations_before - done
            if n > 0:
                name = j.name if part == 0 else f"{j.name}~{part}"
                spec = dataclasses.replace(j, name=name, iterations=n,
                                           submit_s=j.submit_s if part == 0 else start)
                out.append((k, spec, g, start))
                part += 1
            done = m.iterations_before
            g = np.asarray(m.new_gpus, dtype=np.int64)
            start = m.time_s + m.stall_s
        name = j.name if part == 0 else f"{j.name}~{part}"
        out.append((k, dataclasses.replace(j, name=name, iterations=int(j.iterations) - done,
                                           submit_s=j.submit_s if part == 0 else start), g, start))
    return out


def merged_jct_s(jobs: Sequence[Any], records: Sequence[Any], horizon_s: float) -> np.ndarray:
    """``float64[n]``: each job's JCT from the simulated records of its parts (`split_parts`): its
    last part's end (the horizon if unfinished) less its submission."""
    by: dict[str, list[Any]] = {}
    for r in records:
        by.setdefault(r.name.split("~", 1)[0], []).append(r)
    out = []
    for j in jobs:
        if j.submit_s >= horizon_s:
            continue
        parts = by.get(j.name, [])
        ends = [horizon_s if r.finish_s is None else min(r.finish_s, horizon_s) for r in parts]
        out.append((max(ends) if ends else horizon_s) - j.submit_s)
    return np.asarray(out, dtype=np.float64)
