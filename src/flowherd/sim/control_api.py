"""What the simulator and an online controller exchange (DESIGN.md: the simulator knows only this).

At a *decision point* (a communication task about to start, a job arriving or leaving, a periodic
tick) the simulator hands a controller the point and a read-only `NetworkView` of the state, and
gets back a `Decision` or None (no change). `validate` checks a decision against its point before
the simulator applies it, so that a faulty controller is caught at the edge and never corrupts a run.

The values are plain frozen dataclasses over numpy arrays; they hold no reference to the engine.
Controllers live in `flowherd.control`; this module imports nothing from there.

>>> import numpy as np
>>> p = DecisionPoint(kind="collective", now_s=1.0, job="a", group="dp", size_bytes=8.0,
...                   link_idx=np.array([3]), link_bytes=np.array([8.0]),
...                   src_gpu=np.array([0]), dst_gpu=np.array([1]),
...                   candidate_paths=((np.array([3]), np.array([4])),))
>>> validate(Decision(delay_s=0.5, path_choice=(1,)), p)
>>> validate(Decision(delay_s=-1.0), p)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
flowherd.errors.SimulationError: decision.delay_s must be a finite time >= 0, got -1.0 ...
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from flowherd.errors import ConfigError, SimulationError

__all__ = ["DECISION_KINDS", "ON_CONTROLLER_ERROR", "CoflowState", "Controller", "ControllerIssue",
           "Decision", "DecisionPoint", "JobState", "NetworkView", "validate"]

DECISION_KINDS = ("collective", "arrival", "departure", "tick")
ON_CONTROLLER_ERROR = ("stop", "skip")
_EMPTY_I = np.zeros(0, np.int64)
_EMPTY_F = np.zeros(0, np.float64)


def _i64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.int64).ravel()


def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).ravel()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DecisionPoint:
    """A moment at which the simulator asks the controller.

    Attributes:
        kind: One of `DECISION_KINDS`: "collective" (a communication task about to start),
            "arrival", "departure" (a job starting / leaving), "tick" (periodic).
        now_s: Simulation time, seconds.
        job: The job concerned (None for a tick).
        group: Task group of the collective ("tp", "pp", "dp", "ep" ...; None if unknown).
        task: Name of the communication task (for reports).
        size_bytes: Bytes the collective sends in total.
        link_idx: ``int64[k]``: directed links the collective will load, as routed by default.
        link_bytes: ``float64[k]``: bytes it will add on each of them.
        src_gpu, dst_gpu: ``int64[P]``: its GPU pairs (the flows a route choice is about).
        candidate_paths: Per pair, its candidate paths, each an ``int64`` array of directed links
            (empty: routing is not the controller's to choose).
        phase_s: Time since the job's current iteration started, seconds (None if unknown).
    """

    kind: str
    now_s: float
    job: str | None = None
    group: str | None = None
    task: str = ""
    size_bytes: float = 0.0
    link_idx: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    link_bytes: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    src_gpu: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    dst_gpu: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    candidate_paths: tuple[tuple[np.ndarray, ...], ...] = ()
    phase_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in DECISION_KINDS:
            raise ConfigError(f"decision point kind must be one of {DECISION_KINDS}, got {self.kind!r} "
                              "(DecisionPoint.kind)")
        if not (isinstance(self.now_s, int | float) and math.isfinite(self.now_s)):
            raise ConfigError(f"decision point now_s must be a finite time, got {self.now_s!r} "
                              "(DecisionPoint.now_s)")
        for name, conv in (("link_idx", _i64), ("link_bytes", _f64), ("src_gpu", _i64), ("dst_gpu", _i64)):
            object.__setattr__(self, name, conv(getattr(self, name)))
        if self.link_idx.shape != self.link_bytes.shape:
            raise ConfigError(f"link_idx and link_bytes must have one length, got {self.link_idx.size} "
                              f"and {self.link_bytes.size} (DecisionPoint.link_bytes)")
        if self.src_gpu.shape != self.dst_gpu.shape:
            raise ConfigError(f"src_gpu and dst_gpu must have one length, got {self.src_gpu.size} and "
                              f"{self.dst_gpu.size} (DecisionPoint.dst_gpu)")
        paths = tuple(tuple(_i64(p) for p in cands) for cands in self.candidate_paths)
        if paths and len(paths) != self.src_gpu.size:
            raise ConfigError(f"candidate_paths must list one entry per pair ({self.src_gpu.size}), got "
                              f"{len(paths)} (DecisionPoint.candidate_paths)")
        object.__setattr__(self, "candidate_paths", paths)

    @property
    def num_pairs(self) -> int:
        return int(self.src_gpu.size)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CoflowState:
    """An active (started, unfinished) coflow.

    Attributes:
        name: Its name.
        job: Owning job (None for background traffic).
        remaining_bytes: Bytes left to send.
        link_idx: ``int64[k]``: directed links it crosses.
        link_remaining_bytes: ``float64[k]``: bytes it still has to put on each of them.
        priority: Its priority class (lower served first).
    """

    name: str
    job: str | None
    remaining_bytes: float
    link_idx: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    link_remaining_bytes: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    priority: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "link_idx", _i64(self.link_idx))
        object.__setattr__(self, "link_remaining_bytes", _f64(self.link_remaining_bytes))
        if self.link_idx.shape != self.link_remaining_bytes.shape:
            raise ConfigError(f"coflow {self.name!r}: link_idx and link_remaining_bytes must have one "
                              f"length, got {self.link_idx.size} and {self.link_remaining_bytes.size} "
                              "(CoflowState.link_remaining_bytes)")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobState:
    """What the controller knows of one running job.

    Attributes:
        name: The job.
        num_gpus: GPUs it holds.
        period_s: Estimated iteration period, seconds (None before its first iteration).
        iteration_start_s: Start of its current iteration, seconds.
        comm_offsets_s: ``float64[w]``: start of each communication window inside an iteration,
            from the iteration start, seconds (from its recent iterations).
        comm_durations_s: ``float64[w]``: duration of each window, seconds.
        slack_s: How long its pending communication may wait without lengthening the iteration
            (time until its compute needs the result), seconds; 0 if on the critical path.
            `ControlHook` gives the critical-path slack of the job's latest communication task
            on its solo schedule (the pending one, for the job of a "collective" point).
        recent_iteration_s: ``float64[r]``: durations of its last iterations, seconds.
        compute_flops_per_iteration: Compute of one iteration over all its GPUs, FLOPs.
        comm_bytes_per_iteration: Bytes it sends over the network per iteration.
        link_idx: ``int64[k]``: directed network links its collectives use (its footprint).
        comm_rate_bytes_per_s: Rate its communication reaches on its footprint when alone, bytes
            per second (None: assume it saturates the links).
        solo_period_s: Iteration time alone on the fabric (its profile), seconds; None if unknown.
        solo_comm_offsets_s, solo_comm_durations_s: ``float64[w]``: its communication windows
            alone on the fabric (earliest starts and durations of its communication tasks), seconds.
        iterations_total: Iterations the job will run (its size, as a cluster scheduler knows it
            from the job's submission); None if unknown.
        iterations_done: Iterations it has completed.
    """

    name: str
    num_gpus: int
    period_s: float | None = None
    iteration_start_s: float = 0.0
    comm_offsets_s: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    comm_durations_s: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    slack_s: float = 0.0
    recent_iteration_s: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    compute_flops_per_iteration: float = 0.0
    comm_bytes_per_iteration: float = 0.0
    link_idx: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    comm_rate_bytes_per_s: float | None = None
    solo_period_s: float | None = None
    solo_comm_offsets_s: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    solo_comm_durations_s: np.ndarray = field(default_factory=lambda: _EMPTY_F)
    iterations_total: int | None = None
    iterations_done: int = 0

    def __post_init__(self) -> None:
        for name, conv in (("comm_offsets_s", _f64), ("comm_durations_s", _f64),
                           ("recent_iteration_s", _f64), ("link_idx", _i64),
                           ("solo_comm_offsets_s", _f64), ("solo_comm_durations_s", _f64)):
            object.__setattr__(self, name, conv(getattr(self, name)))
        if self.comm_offsets_s.shape != self.comm_durations_s.shape:
            raise ConfigError(f"job {self.name!r}: comm_offsets_s and comm_durations_s must have one "
                              f"length, got {self.comm_offsets_s.size} and {self.comm_durations_s.size} "
                              "(JobState.comm_durations_s)")
        if self.solo_comm_offsets_s.shape != self.solo_comm_durations_s.shape:
            raise ConfigError(f"job {self.name!r}: solo_comm_offsets_s and solo_comm_durations_s must have "
                              f"one length, got {self.solo_comm_offsets_s.size} and "
                              f"{self.solo_comm_durations_s.size} (JobState.solo_comm_durations_s)")
        for fld in ("period_s", "solo_period_s"):
            v = getattr(self, fld)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ConfigError(f"job {self.name!r}: {fld} must be a positive time or None, got {v!r} "
                                  f"(JobState.{fld})")

    @property
    def remaining_s(self) -> float | None:
        """Predicted time to finish alone: iterations left times the solo period (else the current
        period), seconds; None when the size or the period is unknown."""
        period = self.solo_period_s if self.solo_period_s is not None else self.period_s
        if self.iterations_total is None or period is None:
            return None
        return max(self.iterations_total - self.iterations_done, 0) * float(period)

    @property
    def intensity_flops_per_byte(self) -> float:
        """GPU intensity (Crux, SIGCOMM'24): compute per communicated byte; inf with no traffic."""
        if self.comm_bytes_per_iteration <= 0:
            return math.inf
        return self.compute_flops_per_iteration / self.comm_bytes_per_iteration


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class NetworkView:
    """Read-only snapshot of the network and the jobs at a decision point.

    Attributes:
        now_s: Simulation time, seconds.
        link_capacity_bytes_per_s: ``float64[L]``: capacity of each directed link.
        link_utilization: ``float64[L]``: current load over capacity, in [0, 1].
        coflows: The active coflows.
        jobs: The running jobs, by name.
        history_window_s: How far back the per-job estimates look, seconds.
    """

    now_s: float
    link_capacity_bytes_per_s: np.ndarray
    link_utilization: np.ndarray
    coflows: tuple[CoflowState, ...] = ()
    jobs: Mapping[str, JobState] = field(default_factory=dict)
    history_window_s: float = 0.0

    def __post_init__(self) -> None:
        cap = _f64(self.link_capacity_bytes_per_s)
        util = _f64(self.link_utilization)
        if cap.shape != util.shape:
            raise ConfigError(f"link_capacity_bytes_per_s and link_utilization must have one length, got "
                              f"{cap.size} and {util.size} (NetworkView.link_utilization)")
        cap.flags.writeable = False
        util.flags.writeable = False
        object.__setattr__(self, "link_capacity_bytes_per_s", cap)
        object.__setattr__(self, "link_utilization", util)
        object.__setattr__(self, "coflows", tuple(self.coflows))
        object.__setattr__(self, "jobs", dict(self.jobs))

    @property
    def num_links(self) -> int:
        return int(self.link_capacity_bytes_per_s.size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What a controller asks for at a decision point (all fields optional: no change).

    Attributes:
        delay_s: Hold the pending collective back this long, seconds (>= 0).
        path_choice: Per pair of the point, an index into its candidate paths.
        path_splits: Per pair, fractions over its candidate paths (>= 0, summing to 1).
        weight: Weighted max-min share of the job's flows (> 0); None: unchanged.
        priority: Strict priority class of the job's flows (int >= 0, lower served first); None:
            unchanged.
    """

    delay_s: float = 0.0
    path_choice: tuple[int, ...] | None = None
    path_splits: tuple[tuple[float, ...], ...] | None = None
    weight: float | None = None
    priority: int | None = None


def _bad(what: str, point: DecisionPoint) -> SimulationError:
    return SimulationError(f"{what} ({point.kind} point at {point.now_s:.6g} s, job {point.job!r}, "
                           f"task {point.task!r})")


def validate(decision: Decision | None, point: DecisionPoint) -> None:
    """Check ``decision`` against ``point``; None (no decision) is always valid.

    Raises:
        SimulationError: naming the bad field, what came and what was expected, and the point.
    """
    if decision is None:
        return
    if not isinstance(decision, Decision):
        raise _bad(f"a controller must return a Decision or None, got {type(decision).__name__}", point)
    d = decision.delay_s
    if isinstance(d, bool) or not isinstance(d, int | float | np.floating | np.integer) \
            or not math.isfinite(d) or d < 0:
        raise _bad(f"decision.delay_s must be a finite time >= 0, got {d!r}", point)
    if d > 0 and point.kind != "collective":
        raise _bad(f"decision.delay_s must be 0 at a {point.kind!r} point (only a pending collective "
                   f"can be delayed), got {d!r}", point)
    w = decision.weight
    if w is not None and (isinstance(w, bool) or not isinstance(w, int | float | np.floating | np.integer)
                          or not math.isfinite(w) or w <= 0):
        raise _bad(f"decision.weight must be a finite number > 0 or None, got {w!r}", point)
    p = decision.priority
    if p is not None and (isinstance(p, bool) or not isinstance(p, int | np.integer) or p < 0):
        raise _bad(f"decision.priority must be an int >= 0 or None, got {p!r}", point)
    if decision.path_choice is not None and decision.path_splits is not None:
        raise _bad("decision.path_choice and decision.path_splits are exclusive; got both", point)
    for fld in ("path_choice", "path_splits"):
        val = getattr(decision, fld)
        if val is None:
            continue
        if point.kind != "collective" or not point.candidate_paths:
            raise _bad(f"decision.{fld} given but the point offers no candidate paths", point)
        if len(val) != point.num_pairs:
            raise _bad(f"decision.{fld} must have one entry per pair ({point.num_pairs}), got "
                       f"{len(val)}", point)
        for i, (v, cands) in enumerate(zip(val, point.candidate_paths, strict=True)):
            n = len(cands)
            if fld == "path_choice":
                if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 0 <= v < n:
                    raise _bad(f"decision.path_choice[{i}] must be a path index in 0..{n - 1}, got {v!r}",
                               point)
            else:
                s = np.asarray(v, dtype=np.float64)
                if s.shape != (n,) or not np.all(np.isfinite(s)) or np.any(s < 0) \
                        or abs(float(s.sum()) - 1.0) > 1e-6:
                    raise _bad(f"decision.path_splits[{i}] must be {n} fractions >= 0 summing to 1, got "
                               f"{list(np.atleast_1d(s))}", point)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerIssue:
    """A controller that raised or returned an invalid decision, with where it happened.

    Attributes:
        controller: Its name.
        kind: Kind of the decision point.
        now_s: When, seconds.
        job: Job of the point.
        task: Task of the point.
        message: The error.
        action: What the run did: "stop" (ended cleanly with what it had) or "skip" (went on
            without that decision).
    """

    controller: str
    kind: str
    now_s: float
    job: str | None
    task: str
    message: str
    action: str


@runtime_checkable
class Controller(Protocol):
    """An online controller (flowherd.control holds the implementations)."""

    name: str

    def reset(self, seed: int) -> None:
        """Forget all state; randomness, if any, from a Generator made from ``seed``."""
        ...

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        """The decision at ``point`` given ``view``, or None for no change."""
        ...


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

    Priority classes follow DiffServ: a job whose traffic a decision has given a class is
    *marked*, and marked traffic is served before unmarked traffic (background flows and jobs
    without a class, at the engine's default priority 0), marked classes among themselves in
    order: class ``p`` is engine priority ``job_priority_base + p`` (below 0). Otherwise a job
    demoted to a class below the default would be starved by elastic background flows under
    strict priority, which none of the ordering papers (they order all the traffic) intend. A
    controller that sets no priority ("none", "cassini", "threshold", "adaptive") leaves the
    jobs sharing links with background traffic as in an uncontrolled run.

    Args:
        controller: The controller (any object with ``name``, ``reset``, ``decide``).
        fabric: The fabric (`flowherd.fabric.Fabric`).
        engine: The run's engine (`flowherd.sim.engine.Engine`).
        on_error: "skip" or "stop" (`ON_CONTROLLER_ERROR`).
        seed: Passed to ``controller.reset``.
        max_pairs_for_paths: Collectives with more GPU pairs get no candidate paths (the
            controller cannot choose routes for them; this bounds the cost of a decision).
        max_paths: Candidate paths per pair (the first of the fabric's shortest paths).
        history_iterations: Recent iterations a job's period estimate averages.
    """

    def __init__(self, controller, fabric, engine, *, on_error: str = "skip", seed: int = 0,
                 max_pairs_for_paths: int = 64, max_paths: int = 8, history_iterations: int = 3):
        if on_error not in ON_CONTROLLER_ERROR:
            raise ConfigError(f"on_controller_error must be one of {ON_CONTROLLER_ERROR}, got {on_error!r} "
                              "(controller.on_error)")
        for attr in ("name", "reset", "decide"):
            if not hasattr(controller, attr):
                raise ConfigError(f"controller must have name, reset and decide; "
                                  f"{type(controller).__name__} has no {attr!r} (controller)")
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
        self.job_priority_base = -(1 << 20)
        self._jobs: dict[str, _JobTrack] = {}
        # coflow id -> (job, name, routes, priority, flow bytes, route entries per flow, links, link
        # of each route entry among them)
        self._active: dict[int, tuple] = {}
        self._paths: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
        self._index = None
        self._cpm: dict[int, tuple] = {}
        self._cap = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)
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
        try:
            d = self.controller.decide(point, view)
            validate(d, point)
        except Exception as e:  # a faulty controller must not take the run down with it
            msg = f"{type(e).__name__}: {e}"
            self.issues.append(ControllerIssue(controller=str(getattr(self.controller, "name", "?")),
                                               kind=point.kind, now_s=point.now_s, job=point.job,
                                               task=point.task, message=msg, action=self.on_error))
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
                iterations_total=tr.iterations_total, iterations_done=tr.iterations_done)
        hist = max((sum(tr.iterations_s[-self.history_iterations:]) for tr in self._jobs.values()),
                   default=0.0)
        return NetworkView(now_s=float(now_s), link_capacity_bytes_per_s=self._cap, link_utilization=util,
                           coflows=tuple(coflows), jobs=jobs, history_window_s=float(hist))

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

    def _routes_for(self, d: Decision, cands) -> object:
        from flowherd.routing.base import Routes

        lat = np.asarray(self.fabric.link_latency_s, dtype=np.float64)
        links, fracs, ptr, lats = [], [], [0], []
        for i, paths in enumerate(cands):
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
            links.extend(acc)
            fracs.extend(min(1.0, v) for v in acc.values())
            ptr.append(ptr[-1] + len(acc))
            lats.append(worst)
        return Routes(ptr=np.asarray(ptr, np.int64), link=np.asarray(links, np.int32),
                      frac=np.asarray(fracs, np.float64), latency_s=np.asarray(lats, np.float64))

    # -- walking a graph --------------------------------------------------------------------------
    def _critical(self, graph) -> tuple[np.ndarray, np.ndarray, tuple]:
        """Per task: solo duration estimate and slack (latest minus earliest finish), seconds; and
        the solo profile (iteration time, communication windows' earliest starts and durations).

        The solo duration of a communication task is its latency term plus its most loaded link's
        bytes over that link's capacity (its time alone when that link is its bottleneck).
        """
        key = id(graph)
        if key in self._cpm and self._cpm[key][0] is graph:
            return self._cpm[key][1:]
        n = len(graph.tasks)
        dur = np.zeros(n)
        for i, t in enumerate(graph.tasks):
            dur[i] = t.delay_s
            if t.routes is not None and t.size_bytes.size:
                lens = np.diff(t.routes.ptr)
                lb = np.bincount(t.routes.link, weights=np.repeat(t.size_bytes, lens) * t.routes.frac,
                                 minlength=self._cap.size)
                dur[i] += float((lb / self._cap).max())
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
        self._cpm[key] = (graph, dur, slack, profile)
        return dur, slack, profile

    def add_graph(self, graph, *, job: str, fidelity: str, name: str = "", at_s: float | None = None,
                  after=(), on_done=None, groups=None) -> None:
        """Walk one run of a `PreparedGraph` on the engine under control (class docstring).

        Args:
            graph: The prepared graph (`flowherd.sim.executor.PreparedGraph`).
            job: The job it belongs to (`job_started` first).
            fidelity: "collective" or "step".
            name: Prefix of the coflow names.
            at_s, after: When the graph may start (as `flowherd.sim.executor.add_graph`).
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
        self.dur, self.slack, profile = hook._critical(graph)
        if job in hook._jobs:
            hook._jobs[job].solo = profile
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
        engine_prio = 0 if prio is None else hook.job_priority_base + prio
        delay = 0.0 if d is None else float(d.delay_s)
        routes = t.routes
        if d is not None and (d.path_choice is not None or d.path_splits is not None):
            routes = hook._routes_for(d, cands)
        if tr is not None:
            tr.windows[i] = [now + delay - self.start_s, math.nan]
        if self.fid == "step":
            from flowherd.sim.collective import add_schedule

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
                             priority=engine_prio, routes=routes, name=f"{self.name}/t{i}", on_done=done)
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
