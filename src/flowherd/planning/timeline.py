"""The planning timeline (`flowherd.planning.plan` explains it): the queue, the free GPUs and
the predicted ends of the running jobs, advanced batch by batch (FIFO or EASY backfilling) with
one planner method."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.errors import ConfigError, InfeasibleError
from flowherd.planning.batch import LeafCongestion, leaf_excess
from flowherd.planning.heuristic import OVERRUN_SLACK
from flowherd.planning.predict import JobProfile, _server_of, evaluate

__all__ = ["LOOKAHEAD_SHARE", "ORDERS", "Congestion", "KnownBackground", "Timeline", "run_timeline"]

# Queue orders of the timeline (`_Planning.reorder`): submission order, or least work first.
ORDERS = ("fifo", "work")

# The heuristic (an offline planner: it knows the arrivals) places a batch together with the jobs
# submitted within this share of the batch's shortest predicted run: jobs that arrive a moment
# apart are placed as one batch, so the first ones do not take the room the next ones need (on
# the embedded default, two trainings submitted at 0 s and two at 1 s: placed apart, the service
# takes a whole leaf and two trainings must share a leaf's uplinks).
LOOKAHEAD_SHARE = 0.1


@dataclass(slots=True, kw_only=True)
class Timeline:
    """The outcome of one planning timeline: placements, predicted starts and ends, and what the
    method reported."""

    gpus: list[np.ndarray | None]
    start: np.ndarray
    end: np.ndarray
    bounds: list[float]
    statuses: list[str]
    risk: float  # jobs placed on GPUs at risk of an overrun (`heuristic.OVERRUN_SLACK`)
    held: int = 0  # starts the congestion guard shifted (a job held back while a leaf was full)
    notes: tuple[str, ...] = ()  # the method's notes on the placements it committed
    # the jobs migrated while running (`flowherd.planning.migration.Move`); ``gpus`` holds each
    # job's last placement, ``end`` its end after every move
    moves: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class KnownBackground:
    """Known background flows: start, end (on the idle fabric), bytes, end servers."""

    start_s: np.ndarray
    end_s: np.ndarray
    size_bytes: np.ndarray
    src: np.ndarray
    dst: np.ndarray

    def bytes_at(self, t0_s: float, t1_s: float, num_servers: int) -> np.ndarray:
        """``float64[S]``: background bytes at each server (either end) during [t0_s, t1_s]."""
        dur = np.maximum(self.end_s - self.start_s, 1e-12)
        w = np.clip(np.minimum(self.end_s, t1_s) - np.maximum(self.start_s, t0_s), 0.0, None) / dur
        b = w * self.size_bytes
        return (np.bincount(self.src, weights=b, minlength=num_servers)
                + np.bincount(self.dst, weights=b, minlength=num_servers))


class _Planning:
    """The state of one timeline: the queue, the free GPUs, the running jobs and the clock."""

    def __init__(self, planner: Any, method: str, view: Any, profiles: Sequence[JobProfile],
                 num_gpus: int, rng: np.random.Generator, deadline: float | None, slack_aware: bool,
                 shuffle: bool, background: KnownBackground | None,
                 congestion: Congestion | None = None, order: str = "fifo", migration: Any = None):
        self.planner, self.method, self.view, self.profiles = planner, method, view, profiles
        self.migration = migration
        self.moves: list[Any] = []
        self.rng, self.deadline, self.slack_aware, self.shuffle = rng, deadline, slack_aware, shuffle
        self.background = background
        self.congestion = congestion
        self.order = order
        self.held = 0
        self.server = _server_of(view)
        nj = len(profiles)
        self.nj = nj
        self.submit = np.array([p.submit_s for p in profiles])
        self.waiting = sorted(range(nj), key=lambda i: (profiles[i].submit_s, i))  # the queue, FIFO
        self.work = np.array([p.world_size * (p.fixed_duration_s if p.fixed_duration_s is not None
                                              else p.iterations * min(p.multi_server_s, p.single_server_s
                                                                      or math.inf))
                              for p in profiles])  # GPU-seconds at the least run time
        self.free = np.ones(num_gpus, dtype=bool)
        self.freed_at = np.full(num_gpus, -math.inf)  # predicted end of each GPU's last holder
        self.held_s = np.zeros(num_gpus)  # predicted run time of that holder
        self.gpus: list[np.ndarray | None] = [None] * nj
        self.start = np.zeros(nj)
        self.resume = np.zeros(nj)  # when its progress (re)starts: its start, or a migration's end
        self.end = np.full(nj, math.inf)
        self.running: list[int] = []
        self.t = 0.0
        # progress of the running jobs (`_advance`): the share of each job's work left at
        # ``t_done`` and its run time at the current rate (with the jobs running now)
        self.left = np.ones(nj)
        self.rate_s = np.zeros(nj)
        self.t_done = 0.0
        self.bounds: list[float] = []
        self.statuses: list[str] = []
        self.risk = 0.0
        self.notes: dict[str, str] = {}  # job name -> the method's note on its last placement

    def reorder(self) -> None:
        """Queue order now (``order``): "fifo" keeps submission order; "work" puts the jobs
        submitted by now first, least predicted work (GPUs x least run time) first, then the
        jobs not yet submitted in submission order (`ORDERS`)."""
        if self.order == "fifo":
            return
        t, profiles = self.t, self.profiles
        now = [i for i in self.waiting if profiles[i].submit_s <= t]
        later = [i for i in self.waiting if profiles[i].submit_s > t]
        self.waiting = sorted(now, key=lambda i: (self.work[i], profiles[i].submit_s, i)) + later

    def slack_now(self) -> np.ndarray:
        """Each GPU's slack now: the overrun of its last holder, as a fraction of its predicted
        run, that would delay a job placed on it now."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.held_s > 0, (self.t - self.freed_at) / self.held_s, math.inf)

    def place(self, batch: list[int]) -> list[np.ndarray | None]:
        """The method's placements of ``batch`` into the free GPUs now (None: not placed)."""
        view, profiles, free, t = self.view, self.profiles, self.free, self.t
        gpu_slack = self.slack_now()
        srv_slack = np.full(view.num_servers, math.inf)
        np.minimum.at(srv_slack, self.server[free], gpu_slack[free])
        left = None if self.deadline is None else max(0.05, self.deadline - time.perf_counter())
        kw: dict[str, Any] = {}
        if self.slack_aware:
            kw["server_slack"] = srv_slack
        if self.shuffle:
            kw["shuffle"] = True
        if self.congestion is not None:
            kw["congestion"] = self.congestion.for_batch(self, batch)
        if self.background is not None:
            kw["background_bytes"] = np.stack([
                self.background.bytes_at(t, t + (profiles[i].fixed_duration_s
                                                 if profiles[i].fixed_duration_s is not None
                                                 else profiles[i].iterations * profiles[i].multi_server_s),
                                         view.num_servers)
                for i in batch])
        res = self.planner.place_batch(view, [profiles[i] for i in batch], free.copy(),
                                       [(profiles[k], self.gpus[k]) for k in self.running], rng=self.rng,
                                       time_limit_s=left, **kw)
        if res.lower_bound is not None and len(batch) == self.nj:
            self.bounds.append(res.lower_bound)
        self.statuses.append(res.status)
        for note in res.notes:
            self.notes[note.split(":", 1)[0]] = note
        out: list[np.ndarray | None] = []
        for i, g in zip(batch, res.placements, strict=False):
            if g is None:
                break
            g = np.sort(np.asarray(g, dtype=np.int64))
            if g.size != profiles[i].world_size or not free[g].all():
                raise ConfigError(f"planner {self.method!r} returned an invalid placement for job "
                                  f"{profiles[i].name!r} (placement)")
            out.append(g)
        out += [None] * (len(batch) - len(out))
        return out

    def commit(self, took: list[int], placed: Sequence[np.ndarray]) -> None:
        """Start ``took`` on ``placed`` now; their run times are predicted with the jobs running."""
        running = self.running
        gpu_slack = self.slack_now()
        for i, g in zip(took, placed, strict=True):
            self.free[g] = False
            self.gpus[i] = g
            self.start[i] = max(self.t, self.profiles[i].submit_s)  # a looked-ahead job: its submission
            self.resume[i] = self.start[i]
            self.risk += float(np.min(gpu_slack[g]) < OVERRUN_SLACK)
        self._advance(self.t)
        running.extend(took)
        self._repredict()
        for i in took:
            self.waiting.remove(i)
        self.migrate(started=took)

    def migrate(self, started: Sequence[int] = ()) -> None:
        """Job migration at a job's start or end (`flowherd.planning.migration`): the moves it
        proposes now; a job that starts now is placed again (no stall), one that runs stops, is
        down the stall and resumes on its new GPUs at an iteration boundary."""
        if self.migration is None or not self.running:
            return
        from flowherd.planning.migration import propose

        now = np.zeros(self.nj, bool)
        now[list(started)] = True
        moves = propose(self.view, self.profiles, self.running, self.gpus, self.free, self.left, now, self.t,
                        self.migration)
        if not moves:
            return
        for m in moves:
            self.free[m.old_gpus] = True
        for m in moves:
            k = m.job
            self.free[m.new_gpus] = False
            self.gpus[k] = m.new_gpus
            if m.iterations_before:
                its = self.profiles[k].iterations
                self.left[k] = (its - m.iterations_before) / its  # it resumes at an iteration boundary
                self.resume[k] = self.t + m.stall_s
                self.moves.append(m)
        self._repredict()

    def _advance(self, t: float) -> None:
        """Move the running jobs' progress to ``t`` at their current rates."""
        for k in self.running:
            if self.rate_s[k] > 0:
                dt = max(0.0, t - max(self.t_done, self.resume[k]))
                self.left[k] = max(0.0, self.left[k] - dt / self.rate_s[k])
        self.t_done = max(self.t_done, t)

    def _repredict(self) -> None:
        """The running jobs' run times with the jobs running now, and their ends from the work
        they have left: a job started or ended changes the others' contention, so their ends
        move (a fluid progress model; a job's end predicted once at its start would hold the
        GPUs of a job slowed by later neighbours for too short a time)."""
        if not self.running:
            return
        now = self.running
        res = evaluate(self.view, [self.profiles[k] for k in now], [self.gpus[k] for k in now])
        for k, d in zip(now, res.duration_s, strict=True):
            self.rate_s[k] = float(d)
            self.end[k] = max(self.t_done, self.resume[k]) + self.left[k] * float(d)

    def backfill_now(self) -> bool:
        """EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001) now: the queue's head does
        not fit; it is promised the earliest time at which enough GPUs will be free by the
        predicted ends of the running jobs (its *shadow* time). A later submitted job starts now
        if it fits in the free GPUs and either ends before the shadow time, with `OVERRUN_SLACK`
        of margin on its predicted run, or uses only GPUs the head will not need then (the
        *extra* GPUs). So no backfilled job delays the head's promised start unless it overruns
        its prediction by more than the margin. Returns whether any job started."""
        profiles, running, end, t = self.profiles, self.running, self.end, self.t
        head = self.waiting[0]
        if profiles[head].submit_s > t:
            return False
        need = profiles[head].world_size
        count = int(self.free.sum())
        shadow, extra = math.inf, 0
        for k in sorted(running, key=lambda k: end[k]):
            count += len(self.gpus[k])
            if count >= need:
                shadow, extra = float(end[k]), count - need
                break
        started = False
        for i in list(self.waiting[1:]):
            p = profiles[i]
            if p.submit_s > t:
                break
            if p.world_size > int(self.free.sum()):
                continue
            g = self.place([i])[0]
            if g is None:
                continue
            # its run time started now, predicted with the jobs running
            d = float(evaluate(self.view, [profiles[k] for k in [*running, i]],
                               [*(self.gpus[k] for k in running), g]).duration_s[-1])
            if self.hold_back([i], [g]):
                continue
            if t + d * (1.0 + OVERRUN_SLACK) <= shadow:
                self.commit([i], [g])
                started = True
            elif p.world_size <= extra:
                self.commit([i], [g])
                extra -= p.world_size
                started = True
        return started

    def hold_back(self, took: list[int], placed: Sequence[np.ndarray]) -> bool:
        """Whether the congestion guard shifts the start of ``took`` (placed on ``placed``): they
        would raise a leaf's mean uplink load over the target while running jobs will free room."""
        if self.congestion is None or not self.running:
            return False
        guard = self.congestion.leaf
        now = [(self.profiles[k], self.gpus[k]) for k in self.running]
        before = leaf_excess(self.view, now, guard)
        new = [(self.profiles[i], g) for i, g in zip(took, placed, strict=True)]
        after = leaf_excess(self.view, now + new, guard)
        # hold only when the running jobs share the overload (their ends will relieve it); a job
        # over the target on its own (or with the background alone) would wait for nothing
        alone = leaf_excess(self.view, new, guard)
        if after > before + 1e-9 and alone < after - 1e-9:
            self.held += 1
            return True
        return False

    def release_ended(self) -> None:
        """Free the GPUs of the running jobs predicted to have ended by now."""
        while self.running:
            k = min(self.running, key=lambda i: (self.end[i], i))
            if self.end[k] > self.t:
                break
            self._advance(float(self.end[k]))
            g = self.gpus[k]
            self.free[g] = True
            self.freed_at[g] = self.end[k]
            self.held_s[g] = self.end[k] - self.start[k]
            self.running.remove(k)
            self.left[k] = 0.0
            self._repredict()  # the others run faster without it
            self.migrate()
        self._advance(self.t)

    def fifo_batch(self) -> list[int]:
        """The longest run of queued jobs, in submission order, that fits in the free GPUs now;
        for the heuristic, also the jobs submitted within `LOOKAHEAD_SHARE` of the batch's
        shortest predicted run from now (placed with it, started at their submission)."""
        batch: list[int] = []
        count = int(self.free.sum())
        look = self.method == "heuristic"
        reach = math.inf  # the lookahead's end
        for i in self.waiting:
            p = self.profiles[i]
            if p.world_size > count or (p.submit_s > self.t and not (look and p.submit_s <= reach)):
                break
            batch.append(i)
            count -= p.world_size
            if look:
                run = p.iterations * p.multi_server_s if p.fixed_duration_s is None else p.fixed_duration_s
                reach = min(reach, self.t + LOOKAHEAD_SHARE * run)
        return batch

    def next_time(self, backfill: bool) -> float:
        """When the head can next start: the next predicted end or (if it was not submitted
        yet) its submission; with backfilling, also the next submission of a job behind it."""
        profiles, t = self.profiles, self.t
        head = self.waiting[0]
        nxt = min((self.end[k] for k in self.running), default=math.inf)
        if profiles[head].submit_s > t:
            nxt = min(nxt, profiles[head].submit_s)
        if backfill:
            later = self.submit[self.waiting][self.submit[self.waiting] > t]
            if later.size:
                nxt = min(nxt, float(later.min()))
        if not math.isfinite(nxt):
            raise InfeasibleError(f"job {profiles[head].name!r} ({profiles[head].world_size} GPUs of type "
                                  f"{profiles[head].gpu_type}) fits nowhere on the idle fabric for "
                                  f"planner {self.method!r}")
        return nxt


def run_timeline(planner: Any, method: str, view: Any, profiles: Sequence[JobProfile], num_gpus: int,
                 rng: np.random.Generator, deadline: float | None, slack_aware: bool,
                 shuffle: bool = False, background: KnownBackground | None = None,
                 backfill: bool = False, congestion: Congestion | None = None,
                 order: str = "fifo", migration: Any = None) -> Timeline:
    """The planning timeline of `flowherd.planning.plan` with one method (``backfill``: EASY).

    Args:
        planner: A `flowherd.planning.placers.Planner`.
        method: Its name (for messages).
        view: The fabric view.
        profiles: The jobs' profiles.
        num_gpus: GPUs of the fabric.
        rng: Random choices of the method.
        deadline: ``time.perf_counter()`` value by which the method must be done; None: none.
        slack_aware: Hand the method each server's slack (the heuristic's overrun tie-break).
        shuffle: Break exact ties at random (diversified candidates).
        background: Known background flows handed to the method; None: none.
        backfill: EASY backfilling instead of FIFO.
        congestion: `planner.max_utilization` for the upper level (`Congestion`): the method
            keeps leaves under the target, and a start that would overload a leaf is shifted
            until running jobs end; None: no guard.
        order: The queue's order (`ORDERS`).
        migration: `flowherd.planning.migration.Migration` settings: migrate running jobs at job
            starts and ends; None: no migration.
    """
    run = _Planning(planner, method, view, profiles, num_gpus, rng, deadline, slack_aware, shuffle,
                    background, congestion, order, migration)
    while run.waiting:
        run.t = max(run.t, min(profiles[i].submit_s for i in run.waiting))
        run.release_ended()
        run.reorder()
        batch = run.fifo_batch()
        if batch:
            placed = run.place(batch)
            n = next((k for k, g in enumerate(placed) if g is None), len(batch))
            n = next((k for k in range(n) if run.hold_back(batch[:k + 1], placed[:k + 1])), n)
            if n:  # FIFO: nothing behind an unplaced (or held) job starts
                run.commit(batch[:n], placed[:n])
                continue
        if backfill and run.backfill_now():
            continue
        run.t = run.next_time(backfill)
    while migration is not None and run.running:  # the queue is empty: the ends still migrate jobs
        run.t = max(run.t, min(float(run.end[k]) for k in run.running))
        run.release_ended()
    started = {profiles[i].name for i in range(len(profiles)) if run.gpus[i] is not None}
    notes = tuple(v for k, v in run.notes.items() if k in started)
    return Timeline(gpus=run.gpus, start=run.start, end=run.end, bounds=run.bounds,
                    statuses=run.statuses, risk=run.risk, held=run.held, notes=notes, moves=tuple(run.moves))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Congestion:
    """`planner.max_utilization` for the timeline: the leaf guard and, for the joint placement,
    the fabric and background the routing LP scores candidate placements with.

    Attributes:
        leaf: The leaf-level guard (`flowherd.planning.batch.LeafCongestion`; its target may be
            tighter than ``target``, or off, in the restore rounds).
        fabric: The fabric (None: no routing LP in the placement, the sequential ablation).
        background: `flowherd.cluster.simulate.BackgroundSpec` or None.
        target: The links' target utilization the routing LP scores with (`planner.max_utilization`).
        scores: The routing LP's scores computed so far, by the jobs routed (the running jobs and
            the batch placed so far, in order, with their GPUs). A score depends on nothing else
            (the fabric, background and target are this object's), and the timeline scores the
            same jobs on the same GPUs again and again: at every event while the queue's head
            waits, in every backfilling pass, in every restore round (`dataclasses.replace`
            keeps this mapping). Shared by the copies of one plan; None: no memo.
    """

    leaf: LeafCongestion
    fabric: Any = None
    background: Any = None
    target: float = 0.9
    scores: dict | None = None

    def for_batch(self, run: _Planning, batch: list[int]) -> LeafCongestion:
        """The guard handed to the method for ``batch`` now, with the routing LP's score of a
        candidate placement when joint: the LP routes the running jobs and the batch together
        (one window, each at its uncontended iteration rate) and scores ``100 x`` the summed
        excess over the target plus the largest link load (`flowherd.planning.congestion`)."""
        if self.fabric is None:
            return self.leaf
        import dataclasses

        from flowherd.planning.congestion import PlannedJob, route_windows

        profiles = run.profiles
        running = [(profiles[k], run.gpus[k]) for k in run.running]
        target = self.target

        memo = self.scores
        held = tuple((k, np.asarray(run.gpus[k]).tobytes()) for k in run.running)

        def score(gpus: Sequence[np.ndarray | None]) -> float:
            key = None
            if memo is not None:
                key = (held, tuple((i, np.asarray(g, dtype=np.int64).tobytes())
                                   for i, g in zip(batch, gpus, strict=False) if g is not None))
                if key in memo:
                    return memo[key]
            jobs = [PlannedJob(job=p.job, gpus=tuple(int(x) for x in g), start_s=0.0,
                               iteration_s=max(p.multi_server_s, 1e-9))
                    for p, g in [*running, *((profiles[i], g) for i, g in zip(batch, gpus, strict=False)
                                             if g is not None)] if p.job is not None]
            if not jobs:
                return 0.0
            end = min(j.end_s for j in jobs)
            _, ll = route_windows(self.fabric, jobs, target=target, background=self.background,
                                  edges_s=np.array([0.0, end]))
            load = ll.load[:, 0]
            out = float(100.0 * np.clip(load - target, 0.0, None).sum() + load.max(initial=0.0))
            if memo is not None:
                memo[key] = out
            return out

        return dataclasses.replace(self.leaf, route_score=score)
