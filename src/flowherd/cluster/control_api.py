"""The simulator's side of the controller protocol (`ControlHook`): decision points asked at
the right moments, decisions validated and applied (`flowherd.cluster.control_types` holds the values
exchanged and the `Controller` protocol; they are re-exported here)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from flowherd.cluster.control_types import (
    DECISION_KINDS,
    GRANTS,
    MARKED_PRIORITY_BASE,
    ON_CONTROLLER_ERROR,
    CoflowState,
    Controller,
    ControllerIssue,
    Decision,
    DecisionPoint,
    JobState,
    Levers,
    NetworkView,
    TransferState,
    _i64,
    check_levers,
    levers_from,
    validate,
)
from flowherd.errors import ConfigError

__all__ = ["DECISION_KINDS", "GRANTS", "ON_CONTROLLER_ERROR", "CoflowState", "ControlHook", "Controller",
           "ControllerIssue", "Decision", "DecisionPoint", "JobState", "Levers", "NetworkView",
           "TransferState", "check_levers", "levers_from", "validate"]

_EMPTY_I = np.zeros(0, np.int64)
_EMPTY_F = np.zeros(0, np.float64)


# ---- the simulator side ---------------------------------------------------------------------------
@dataclass(slots=True)
class _JobTrack:
    num_gpus: int
    compute_flops_per_iteration: float
    comm_bytes_per_iteration: float
    link_idx: np.ndarray
    iteration_start_s: float = 0.0
    iterations_s: list = field(default_factory=list)
    windows: dict = field(default_factory=dict)  # task -> [offset_s, duration_s] this iteration
    last_windows: tuple = (_EMPTY_F, _EMPTY_F)
    slack_s: float = 0.0
    weight: float = 1.0
    priority: int | None = None  # None: unmarked (engine priority 0, with background traffic)
    solo: tuple = (None, _EMPTY_F, _EMPTY_F)  # solo period, window offsets, window durations
    iterations_total: int | None = None
    iterations_done: int = 0
    busiest_link_s: float | None = None  # per iteration, on its busiest scale-out link
    link_bytes: np.ndarray = field(default_factory=lambda: _EMPTY_F)  # per iteration, on link_idx


class ControlHook:
    """The simulator's side of the protocol: asks a controller at decision points and applies its
    decisions, so that a simulator needs only a few calls (`job_started`, `add_graph`,
    `job_finished`).

    It builds the `NetworkView` from the engine (link loads; the coflows it launched itself, with
    their remaining bytes; per-job timing learnt from the iterations it walked), validates every
    decision, and turns a controller that raises or returns an invalid decision into a
    `ControllerIssue`: with ``on_error="skip"`` the run goes on without that decision; with
    ``"stop"`` no task is launched any more (`stopped_at_s` is set; the simulator ends the run
    with what it has).

    Communication tasks of a graph walked by `add_graph` are launched when their dependencies
    end (not added in advance), so that the controller decides with the state of that moment;
    delays, weights, priorities and route choices apply to the task's coflow. At ``step``
    fidelity only delays, weights and priorities apply.

    The controller decides only with the levers the operator grants (``levers``, a `Levers` or
    a grant name of `GRANTS`; default ``buffer``: delays and paths). A valid decision that uses
    another lever is refused: recorded as a `ControllerIssue` with ``refused=True`` and handled as
    an invalid one (``on_error``). The view tells the controller its grant (`NetworkView.levers`).

    Priority classes follow DiffServ: a job whose traffic a decision has given a class is
    *marked*. Under a grant with ``above_background``, marked traffic is served before unmarked
    traffic (background flows and jobs without a class, at the engine's default priority 0),
    marked classes among themselves in order: class ``p`` is engine priority
    ``job_priority_base + p`` (below 0). Otherwise a job demoted to a class below the default
    would be starved by elastic background flows under strict priority, which none of the
    ordering papers (they order all the traffic) intend. Without ``above_background``, class
    ``p`` is engine priority ``p``: class 0 shares the background's level, later classes come
    after it. A controller that sets no priority ("none", "cassini", "threshold", "adaptive")
    leaves the jobs sharing links with background traffic as in an uncontrolled run.

    Args:
        controller: The controller (any object with ``name``, ``reset``, ``decide``).
        fabric: The fabric (`flowherd.fabric.Fabric`).
        engine: The run's engine (`flowherd.engine.core.Engine`).
        on_error: "skip" or "stop" (`ON_CONTROLLER_ERROR`).
        seed: Passed to ``controller.reset``.
        max_pairs_for_paths: Collectives with more GPU pairs get no candidate paths (the
            controller cannot choose routes for them; this bounds the cost of a decision).
        max_paths: Candidate paths per pair (the first of the fabric's shortest paths).
        history_iterations: Recent iterations a job's period estimate averages.
        levers: The grant (`Levers`, a name of `GRANTS`, a mapping of `Levers` fields; None:
            ``buffer``).
        pacers: ``(src GPU, dst GPU)`` -> the link id of the pair's host pacer
            (`flowherd.cluster.pacing.Pacing.pacer_of`), or None: a route the controller chooses
            keeps the pair's pacer (a plan's rate cap is the host's, not the path's).
    """

    def __init__(self, controller, fabric, engine, *, on_error: str = "skip", seed: int = 0,
                 max_pairs_for_paths: int = 64, max_paths: int = 8, history_iterations: int = 3,
                 levers: Levers | str | None = None, pacers=None):
        if on_error not in ON_CONTROLLER_ERROR:
            raise ConfigError(f"on_controller_error must be one of {ON_CONTROLLER_ERROR}, got {on_error!r} "
                              "(controller.on_error)")
        for attr in ("name", "reset", "decide"):
            if not hasattr(controller, attr):
                raise ConfigError(f"controller must have name, reset and decide; "
                                  f"{type(controller).__name__} has no {attr!r} (controller)")
        self.levers = levers_from(levers)
        self.num_refused = 0
        self.controller = controller
        self.fabric = fabric
        self.engine = engine
        self.on_error = on_error
        self.max_pairs_for_paths = max_pairs_for_paths
        self.max_paths = max_paths
        self.history_iterations = history_iterations
        self.issues: list[ControllerIssue] = []
        self.stopped_at_s: float | None = None
        self.num_decisions = 0
        self.decide_wall_s = 0.0
        self.job_priority_base = MARKED_PRIORITY_BASE
        self._jobs: dict[str, _JobTrack] = {}
        # coflow id -> (job, name, routes, priority, flow bytes, route entries per flow, links, link
        # of each route entry among them)
        self._active: dict[int, tuple] = {}
        self._paths: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
        self._index = None
        self._cpm: dict[int, tuple] = {}
        self._cap = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)
        self._pacers = dict(pacers or {})
        # latency-critical transfers (watch_transfer), per job in the order of their earliest start:
        # [entries, index of the first one not known to be finished]
        self._watched: dict[str, list] = {}
        self._watch_of: dict[int, list] = {}
        controller.reset(int(seed))

    # -- job life ---------------------------------------------------------------------------------
    def job_started(self, name: str, *, now_s: float, num_gpus: int, compute_flops_per_iteration: float,
                    comm_bytes_per_iteration: float, link_idx: np.ndarray,
                    iterations_total: int | None = None) -> None:
        """A job starts (an "arrival" decision point; its weight / priority become the job's)."""
        self._jobs[name] = _JobTrack(num_gpus=int(num_gpus),
                                     compute_flops_per_iteration=float(compute_flops_per_iteration),
                                     comm_bytes_per_iteration=float(comm_bytes_per_iteration),
                                     link_idx=_i64(link_idx), iteration_start_s=float(now_s),
                                     iterations_total=(None if iterations_total is None
                                                       else int(iterations_total)))
        self._job_point("arrival", name, now_s)

    def iterations_advanced(self, name: str, k: int) -> None:
        """``k`` iterations of a job ran without the controller (fast-forwarded): counted as done."""
        if name in self._jobs:
            self._jobs[name].iterations_done += int(k)

    def watch_transfer(self, coflow: int, *, job: str, name: str, routes, size_bytes: np.ndarray,
                       not_before_s: float = 0.0, expected_start_s: float | None = None) -> None:
        """List coflow ``coflow`` (an inference service's KV-cache transfer, added to the engine
        ahead) in every view's ``transfers`` once its start is expected (``expected_start_s``, or
        later `expect_transfer`) and until it ends. A job's transfers must be watched in the order
        of ``not_before_s`` (a time before which it cannot be expected: its batch's close), so that
        a view looks only at the ones that may have begun."""
        lens = np.diff(routes.ptr)
        lk, inv = np.unique(np.asarray(routes.link, dtype=np.int64), return_inverse=True)
        size = np.asarray(size_bytes, dtype=np.float64)
        entry = [float(not_before_s), int(coflow), name, routes, size, lens, lk, inv, expected_start_s]
        self._watched.setdefault(job, [[], 0])[0].append(entry)
        self._watch_of[int(coflow)] = entry

    def expect_transfer(self, coflow: int, start_s: float) -> None:
        """A watched transfer is now expected to start at ``start_s`` (its prefill has begun)."""
        entry = self._watch_of.get(int(coflow))
        if entry is not None:
            entry[8] = float(start_s)

    def _transfers(self, now_s: float) -> tuple[TransferState, ...]:
        eng = self.engine
        out = []
        for job, entries in self._watched.items():
            items, head = entries
            while head < len(items) and eng.coflow_finish_s(items[head][1]) is not None:
                self._watch_of.pop(items[head][1], None)
                head += 1
            entries[1] = head
            for k in range(head, len(items)):
                nb, cid, name, routes, size, lens, lk, inv, expected = items[k]
                if nb > now_s:
                    break
                if eng.coflow_finish_s(cid) is not None:
                    continue
                start = eng.coflow_start_s(cid)
                if start is None:
                    if expected is None:
                        continue
                    rem, started, when = size, False, expected
                else:
                    rem, started, when = self._remaining(cid), True, start
                per_link = np.repeat(rem, lens) * routes.frac
                out.append(TransferState(name=name, job=job, started=started, start_s=float(when),
                                         remaining_bytes=float(rem.sum()), link_idx=lk,
                                         link_remaining_bytes=np.bincount(inv, weights=per_link,
                                                                          minlength=lk.size)))
        return tuple(out)

    def job_finished(self, name: str, *, now_s: float) -> None:
        """A job leaves (a "departure" decision point)."""
        if name in self._jobs:
            self._job_point("departure", name, now_s)
            del self._jobs[name]

    def _job_point(self, kind: str, name: str, now_s: float) -> None:
        d = self.ask(DecisionPoint(kind=kind, now_s=float(now_s), job=name, task=f"{name}/{kind}"))
        if d is not None and name in self._jobs:
            tr = self._jobs[name]
            tr.weight = tr.weight if d.weight is None else float(d.weight)
            tr.priority = tr.priority if d.priority is None else int(d.priority)

    # -- asking -----------------------------------------------------------------------------------
    def ask(self, point: DecisionPoint) -> Decision | None:
        """The controller's validated decision at ``point``; None after a fault (recorded)."""
        if self.stopped_at_s is not None:
            return None
        view = self.view(point.now_s)
        t0 = time.perf_counter()
        refused = False
        try:
            d = self.controller.decide(point, view)
            validate(d, point)
            refused = True
            check_levers(d, point, self.levers)
        except Exception as e:  # a faulty controller must not take the run down with it
            msg = f"{type(e).__name__}: {e}"
            self.num_refused += refused
            self.issues.append(ControllerIssue(controller=str(getattr(self.controller, "name", "?")),
                                               kind=point.kind, now_s=point.now_s, job=point.job,
                                               task=point.task, message=msg, action=self.on_error,
                                               refused=refused))
            if self.on_error == "stop":
                self.stopped_at_s = point.now_s
            return None
        finally:
            self.decide_wall_s += time.perf_counter() - t0
            self.num_decisions += 1
        return d

    def view(self, now_s: float) -> NetworkView:
        """The read-only view of the state now."""
        eng = self.engine
        util = np.clip(eng.link_load_bytes_per_s() / self._cap, 0.0, 1.0)
        coflows = []
        for cid in list(self._active):
            if eng.coflow_finish_s(cid) is not None:
                del self._active[cid]
                continue
            job, name, routes, prio, size, lens, lk, inv = self._active[cid]
            # launched, not started yet (its latency term): all its bytes are still to come
            rem = size if eng.coflow_start_s(cid) is None else self._remaining(cid)
            per_link = np.repeat(rem, lens) * routes.frac
            coflows.append(CoflowState(name=name, job=job, remaining_bytes=float(rem.sum()), link_idx=lk,
                                       link_remaining_bytes=np.bincount(inv, weights=per_link,
                                                                        minlength=lk.size),
                                       priority=prio))
        jobs = {}
        for name, tr in self._jobs.items():
            recent = np.asarray(tr.iterations_s[-self.history_iterations:], dtype=np.float64)
            jobs[name] = JobState(
                name=name, num_gpus=tr.num_gpus, period_s=float(recent.mean()) if recent.size else None,
                iteration_start_s=tr.iteration_start_s, comm_offsets_s=tr.last_windows[0],
                comm_durations_s=tr.last_windows[1], slack_s=tr.slack_s, recent_iteration_s=recent,
                compute_flops_per_iteration=tr.compute_flops_per_iteration,
                comm_bytes_per_iteration=tr.comm_bytes_per_iteration, link_idx=tr.link_idx,
                solo_period_s=tr.solo[0], solo_comm_offsets_s=tr.solo[1], solo_comm_durations_s=tr.solo[2],
                iterations_total=tr.iterations_total, iterations_done=tr.iterations_done,
                busiest_link_s=tr.busiest_link_s, link_bytes_per_iteration=tr.link_bytes)
        hist = max((sum(tr.iterations_s[-self.history_iterations:]) for tr in self._jobs.values()),
                   default=0.0)
        # Deliberate shortcut: the engine keeps each link's active flow count (its per-link flow
        # lists' lengths) without a public accessor for the whole array.
        flows = np.asarray(eng._b_len, dtype=np.int64).copy() if hasattr(eng, "_b_len") else None
        return NetworkView(now_s=float(now_s), link_capacity_bytes_per_s=self._cap, link_utilization=util,
                           coflows=tuple(coflows), jobs=jobs, history_window_s=float(hist),
                           levers=self.levers, link_flows=flows,
                           transfers=self._transfers(now_s) if self._watched else ())

    def engine_priority(self, cls: int | None) -> int:
        """The engine priority of a job's class (None: unmarked, the background's level 0)."""
        if cls is None:
            return 0
        return self.job_priority_base + cls if self.levers.above_background else cls

    def _remaining(self, cid: int) -> np.ndarray:
        # Deliberate shortcut: the engine has no public per-coflow progress; its flow columns are
        # read here (rem at the last settle minus what the current rate sent since).
        eng = self.engine
        f = eng._f
        lo, hi = eng._c_flow_lo[cid], eng._c_flow_hi[cid]
        rem = np.asarray(f.rem[lo:hi], dtype=np.float64)
        since = np.maximum(eng.now_s - np.asarray(f.t0[lo:hi]), 0.0)
        sent = np.minimum(np.asarray(f.rate[lo:hi]) * since, rem)
        return np.maximum(rem - sent, 0.0)

    # -- candidate paths --------------------------------------------------------------------------
    def _candidates(self, src: np.ndarray, dst: np.ndarray) -> tuple[tuple[np.ndarray, ...], ...]:
        if src.size == 0 or src.size > self.max_pairs_for_paths:
            return ()
        if self._index is None:
            from flowherd.routing.path_index import PathIndex

            self._index = PathIndex(self.fabric)
        out = []
        for s, d in zip(src.tolist(), dst.tolist(), strict=True):
            key = (s, d)
            if key not in self._paths:
                ps = self._index.dag(s, d).paths(self.fabric, self.max_paths)
                self._paths[key] = tuple(np.asarray(p, dtype=np.int64) for p in ps)
            out.append(self._paths[key])
        if any(len(c) == 0 for c in out):
            return ()
        return tuple(out)

    def _routes_for(self, d: Decision, cands, src=None, dst=None) -> object:
        """The routes of ``d``'s path choice over ``cands``; a pair with a host pacer (``pacers``)
        keeps it (fraction 1, after the path's links, as `flowherd.cluster.pacing.PacedRouter` puts it)."""
        from flowherd.routing.base import Routes

        lat = np.asarray(self.fabric.link_latency_s, dtype=np.float64)
        links, fracs, ptr, lats = [], [], [0], []
        pacer = ([self._pacers.get((int(a), int(b))) for a, b in zip(src, dst, strict=True)]
                 if self._pacers and src is not None else [None] * len(cands))
        for i, paths in enumerate(cands):
            if d.path_choice is not None:  # one path: its links, whole (the one-hot row below, faster)
                p = paths[d.path_choice[i]]
                ls = p.tolist()
                if pacer[i] is not None:
                    ls = [*ls, pacer[i]]
                links.extend(ls)
                fracs.extend([1.0] * len(ls))
                ptr.append(ptr[-1] + len(ls))
                lats.append(float(lat[p].sum()) if len(p) else 0.0)
                continue
            share = (np.eye(len(paths))[d.path_choice[i]] if d.path_choice is not None
                     else np.asarray(d.path_splits[i], dtype=np.float64))
            acc: dict[int, float] = {}
            worst = 0.0
            for p, s in zip(paths, share.tolist(), strict=True):
                if s <= 0:
                    continue
                for lk in p.tolist():
                    acc[lk] = acc.get(lk, 0.0) + s
                worst = max(worst, float(lat[p].sum()))
            if pacer[i] is not None:
                acc[pacer[i]] = 1.0
            links.extend(acc)
            fracs.extend(min(1.0, v) for v in acc.values())
            ptr.append(ptr[-1] + len(acc))
            lats.append(worst)
        return Routes(ptr=np.asarray(ptr, np.int64), link=np.asarray(links, np.int32),
                      frac=np.asarray(fracs, np.float64), latency_s=np.asarray(lats, np.float64))

    # -- walking a graph --------------------------------------------------------------------------
    def _critical(self, graph) -> tuple[np.ndarray, np.ndarray, tuple, float]:
        """Per task: solo duration estimate and slack (latest minus earliest finish), seconds; the
        solo profile (iteration time, communication windows' earliest starts and durations); and
        the time an iteration's bytes take on its busiest scale-out link (`JobState.busiest_link_s`).

        The solo duration of a communication task is its latency term plus its most loaded link's
        bytes over that link's capacity (its time alone when that link is its bottleneck).
        """
        key = id(graph)
        if key in self._cpm and self._cpm[key][0] is graph:
            return self._cpm[key][1:]
        n = len(graph.tasks)
        dur = np.zeros(n)
        per_link = np.zeros(self._cap.size)
        for i, t in enumerate(graph.tasks):
            dur[i] = t.delay_s
            if t.routes is not None and t.size_bytes.size:
                lens = np.diff(t.routes.ptr)
                lb = np.bincount(t.routes.link, weights=np.repeat(t.size_bytes, lens) * t.routes.frac,
                                 minlength=self._cap.size)
                per_link += lb
                dur[i] += max(float((lb / self._cap).max()), t.min_duration_s)
        ef = np.zeros(n)
        for i, t in enumerate(graph.tasks):
            ef[i] = max((ef[d] for d in t.deps), default=0.0) + dur[i]
        span = float(ef.max()) if n else 0.0
        lf = np.full(n, span)
        for i in range(n - 1, -1, -1):
            for d in graph.tasks[i].deps:
                lf[d] = min(lf[d], lf[i] - dur[i])
        slack = np.maximum(lf - ef, 0.0)
        comm = np.array([t.routes is not None for t in graph.tasks], dtype=bool)
        order = np.argsort(ef[comm] - dur[comm], kind="stable")
        profile = (span if span > 0 else None, (ef[comm] - dur[comm])[order], dur[comm][order])
        from flowherd.fabric.core import LinkKind

        out = np.asarray(self.fabric.link_kind) == LinkKind.NETWORK
        busiest = float((per_link[out] / self._cap[out]).max(initial=0.0))
        self._cpm[key] = (graph, dur, slack, profile, busiest, per_link)
        return dur, slack, profile, busiest, per_link

    def add_graph(self, graph, *, job: str, fidelity: str, name: str = "", at_s: float | None = None,
                  after=(), on_done=None, groups=None) -> None:
        """Walk one run of a `PreparedGraph` on the engine under control (class docstring).

        Args:
            graph: The prepared graph (`flowherd.cluster.executor.PreparedGraph`).
            job: The job it belongs to (`job_started` first).
            fidelity: "collective" or "step".
            name: Prefix of the coflow names.
            at_s, after: When the graph may start (as `flowherd.cluster.executor.add_graph`).
            on_done: Called as ``on_done(end_coflow, finish_s)`` when every task is done.
            groups: Task group of each task ("tp", "dp" ...), for the decision points.
        """
        _Walk(self, graph, job=job, fidelity=fidelity, name=name, at_s=at_s, after=tuple(after),
              on_done=on_done, groups=groups)


class _Walk:
    """One run of a prepared graph whose tasks are launched as their dependencies end."""

    def __init__(self, hook: ControlHook, graph, *, job, fidelity, name, at_s, after, on_done, groups):
        self.hook, self.graph, self.job, self.fid, self.name = hook, graph, job, fidelity, name
        self.on_done, self.groups = on_done, groups
        n = len(graph.tasks)
        self.waiting = [len(set(t.deps)) for t in graph.tasks]
        self.dependents: list[list[int]] = [[] for _ in range(n)]
        for i, t in enumerate(graph.tasks):
            for d in set(t.deps):
                self.dependents[d].append(i)
        self.left = n
        self.dur, self.slack, profile, busiest, per_link = hook._critical(graph)
        if job in hook._jobs:
            tr = hook._jobs[job]
            tr.solo = profile
            tr.busiest_link_s = busiest
            tr.link_bytes = per_link[tr.link_idx] if tr.link_idx.size else _EMPTY_F
        self.start_s = 0.0
        hook.engine.add_coflow(_EMPTY_I, _EMPTY_I, _EMPTY_F, at_s=at_s, after=after, name=f"{name}/start",
                               on_done=lambda _c, t: self._begin(t))

    def _begin(self, t: float) -> None:
        self.start_s = t
        tr = self.hook._jobs.get(self.job)
        if tr is not None:
            tr.iteration_start_s = t
            tr.windows = {}
        if not self.graph.tasks:
            self._end(t)
            return
        for i, w in enumerate(self.waiting):
            if w == 0:
                self._launch(i, t)

    def _launch(self, i: int, now: float) -> None:
        hook = self.hook
        if hook.stopped_at_s is not None:
            return  # a stopped run launches nothing more
        eng = hook.engine
        t = self.graph.tasks[i]
        done = lambda _c, tt, i=i: self._task_done(i, tt)  # noqa: E731
        if t.routes is None:
            eng.add_coflow(_EMPTY_I, _EMPTY_I, _EMPTY_F, delay_s=t.delay_s, name=f"{self.name}/t{i}",
                           on_done=done)
            return
        tr = hook._jobs.get(self.job)
        if tr is not None:
            tr.slack_s = float(self.slack[i])
        lens = np.diff(t.routes.ptr)
        lb = np.bincount(t.routes.link, weights=np.repeat(t.size_bytes, lens) * t.routes.frac,
                         minlength=hook._cap.size)
        lk = np.flatnonzero(lb)
        cands = hook._candidates(t.src, t.dst) if self.fid != "step" else ()
        point = DecisionPoint(kind="collective", now_s=now, job=self.job,
                              group=None if self.groups is None else self.groups[i],
                              task=f"{self.name}/t{i}", size_bytes=float(t.size_bytes.sum()),
                              link_idx=lk, link_bytes=lb[lk], src_gpu=t.src, dst_gpu=t.dst,
                              candidate_paths=cands, phase_s=now - self.start_s)
        d = hook.ask(point)
        if hook.stopped_at_s is not None:
            return
        if tr is not None and d is not None:
            tr.weight = tr.weight if d.weight is None else float(d.weight)
            tr.priority = tr.priority if d.priority is None else int(d.priority)
        weight = tr.weight if tr is not None else 1.0
        prio = tr.priority if tr is not None else None
        engine_prio = hook.engine_priority(prio)
        delay = 0.0 if d is None else float(d.delay_s)
        routes = t.routes
        if d is not None and (d.path_choice is not None or d.path_splits is not None):
            routes = hook._routes_for(d, cands, t.src, t.dst)
        if tr is not None:
            tr.windows[i] = [now + delay - self.start_s, math.nan]
        if self.fid == "step":
            from flowherd.cluster.collective import add_schedule

            gate = eng.add_coflow(_EMPTY_I, _EMPTY_I, _EMPTY_F, delay_s=delay, name=f"{self.name}/t{i}/gate")
            ends = []
            for s in t.schedules:
                prev = (gate,)
                for _ in range(t.count):
                    prev = (add_schedule(eng, s, fidelity="step", after=prev, name=f"{self.name}/t{i}",
                                         weight=weight, priority=engine_prio),)
                ends.extend(prev)
            eng.add_coflow(_EMPTY_I, _EMPTY_I, _EMPTY_F, after=tuple(ends), name=f"{self.name}/t{i}/done",
                           on_done=done)
            return
        cid = eng.add_coflow(t.src, t.dst, t.size_bytes, delay_s=t.delay_s + delay, weight=t.weight * weight,
                             priority=engine_prio, routes=routes, name=f"{self.name}/t{i}", on_done=done,
                             min_duration_s=t.min_duration_s)
        # the coflow's links and each route entry's link among them, computed once for every view
        lk_all, inv = np.unique(np.asarray(routes.link, dtype=np.int64), return_inverse=True)
        hook._active[cid] = (self.job, f"{self.name}/t{i}", routes, 0 if prio is None else prio, t.size_bytes,
                             np.diff(routes.ptr), lk_all, inv)

    def _task_done(self, i: int, t: float) -> None:
        tr = self.hook._jobs.get(self.job)
        if tr is not None and i in tr.windows:
            tr.windows[i][1] = t - self.start_s - tr.windows[i][0]
        self.left -= 1
        for j in self.dependents[i]:
            self.waiting[j] -= 1
            if self.waiting[j] == 0:
                self._launch(j, t)
        if self.left == 0:
            self._end(t)

    def _end(self, t: float) -> None:
        tr = self.hook._jobs.get(self.job)
        if tr is not None:
            tr.iterations_done += 1
            tr.iterations_s.append(t - self.start_s)
            del tr.iterations_s[:-max(self.hook.history_iterations, 1)]
            win = sorted(tuple(w) for w in tr.windows.values() if not math.isnan(w[1]))
            if win:
                arr = np.asarray(win, dtype=np.float64)
                tr.last_windows = (arr[:, 0], np.maximum(arr[:, 1], 0.0))
        self.hook.engine.add_coflow(_EMPTY_I, _EMPTY_I, _EMPTY_F, name=f"{self.name}/end",
                                    on_done=self.on_done)
