"""What the simulator and an online controller exchange (DESIGN.md: the simulator knows only this).

The values and the protocol; `flowherd.cluster.control_api` holds the simulator's side (`ControlHook`)
and re-exports these names.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from flowherd.engine.network.config import MARKED_PRIORITY_BASE  # defined beside the queue map
from flowherd.errors import ConfigError, SimulationError, check_fields

__all__ = ["DECISION_KINDS", "GRANTS", "MARKED_PRIORITY_BASE", "ON_CONTROLLER_ERROR", "CoflowState",
           "Controller", "ControllerIssue", "Decision", "DecisionPoint", "JobState", "Levers", "NetworkView",
           "TransferState", "check_levers", "levers_from", "validate"]

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
class TransferState:
    """A latency-critical transfer of an inference service (a KV-cache transfer from a prefill
    to a decode replica), in flight or about to start: what a controller protects.

    Attributes:
        name: Its name.
        job: The service.
        started: In flight (True), or waiting for its prefill to end (False).
        start_s: When it started, or when it is expected to (its prefill's start plus the time that
            prefill takes alone), seconds.
        remaining_bytes: Bytes left to send.
        link_idx: ``int64[k]``: directed links it crosses (its routes, fixed).
        link_remaining_bytes: ``float64[k]``: bytes it still has to put on each of them.
    """

    name: str
    job: str
    started: bool
    start_s: float
    remaining_bytes: float
    link_idx: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    link_remaining_bytes: np.ndarray = field(default_factory=lambda: _EMPTY_F)

    def __post_init__(self) -> None:
        object.__setattr__(self, "link_idx", _i64(self.link_idx))
        object.__setattr__(self, "link_remaining_bytes", _f64(self.link_remaining_bytes))
        if self.link_idx.shape != self.link_remaining_bytes.shape:
            raise ConfigError(f"transfer {self.name!r}: link_idx and link_remaining_bytes must have one "
                              f"length, got {self.link_idx.size} and {self.link_remaining_bytes.size} "
                              "(TransferState.link_remaining_bytes)")


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
        busiest_link_s: The time one iteration's bytes take on its busiest scale-out link at that
            link's capacity (on its default routes), seconds: Crux's ``t_j``; None if unknown.
        link_bytes_per_iteration: ``float64[k]``: bytes one iteration puts on each link of
            ``link_idx`` (on its default routes; empty if unknown).
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
    busiest_link_s: float | None = None
    link_bytes_per_iteration: np.ndarray = field(default_factory=lambda: _EMPTY_F)

    def __post_init__(self) -> None:
        for name, conv in (("comm_offsets_s", _f64), ("comm_durations_s", _f64),
                           ("link_bytes_per_iteration", _f64),
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
        if self.link_bytes_per_iteration.size not in (0, self.link_idx.size):
            raise ConfigError(f"job {self.name!r}: link_bytes_per_iteration must have one entry per link "
                              f"of link_idx ({self.link_idx.size}) or none, got "
                              f"{self.link_bytes_per_iteration.size} (JobState.link_bytes_per_iteration)")
        b = self.busiest_link_s
        if b is not None and not (isinstance(b, int | float) and math.isfinite(b) and b >= 0):
            raise ConfigError(f"job {self.name!r}: busiest_link_s must be a time >= 0 or None, got {b!r} "
                              "(JobState.busiest_link_s)")
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
    def gpu_intensity_flops_per_s(self) -> float:
        """GPU intensity as Crux defines it (Cao et al., SIGCOMM 2024, Definition 2, Eq. 2:
        ``I_j = W_j / t_j``): its compute per iteration over the time its iteration's traffic takes
        on its busiest link, ``t_j = max_e M_je / B_e`` (`busiest_link_s`); inf when it sends
        nothing over the network, 0 when the time is unknown."""
        if self.busiest_link_s is None:
            return 0.0
        if self.busiest_link_s <= 0:
            return math.inf
        return self.compute_flops_per_iteration / self.busiest_link_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Levers:
    """What the operator lets a controller decide (the scenario's ``controller.levers``).

    A multi-tenant cloud grants few levers: holding a job's own collectives back (CCL buffering)
    and choosing among its paths touch only that job's traffic; weighted shares and strict
    priority classes take bandwidth from the other tenants, and classes above the background
    traffic take it from everyone. `GRANTS` names the three grants of the benchmarks.

    Attributes:
        name: The grant's name ("custom" for an explicit mapping).
        delay: ``Decision.delay_s > 0`` allowed.
        paths: ``Decision.path_choice`` / ``path_splits`` allowed.
        weights: ``Decision.weight`` allowed.
        priority_classes: ``K``: ``Decision.priority`` must be in ``0..K-1`` (0: no priorities).
        above_background: Marked job classes are served before background traffic (else class
            0 shares the background's level and the other classes come after it).
    """

    name: str = "custom"
    delay: bool = True
    paths: bool = True
    weights: bool = False
    priority_classes: int = 0
    above_background: bool = False

    def __post_init__(self) -> None:
        for f in ("delay", "paths", "weights", "above_background"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"controller.levers.{f} must be true or false, got {getattr(self, f)!r} "
                                  f"(controller.levers.{f})")
        k = self.priority_classes
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
            raise ConfigError(f"controller.levers.priority_classes must be an int in 0..64, got {k!r} "
                              "(controller.levers.priority_classes)")
        if self.above_background and k == 0:
            raise ConfigError("controller.levers.above_background needs priority_classes >= 1, got 0 "
                              "(controller.levers.above_background)")



#: The named grants: ``buffer`` (the default) lets a controller touch only its job's own timing
#: and paths; ``weighted`` adds weighted fair shares; ``priority`` adds 8 strict classes above the
#: background traffic (what switch queues give: Sincronia and Crux quantize onto 8).
GRANTS: dict[str, Levers] = {
    "buffer": Levers(name="buffer"),
    "weighted": Levers(name="weighted", weights=True),
    "priority": Levers(name="priority", weights=True, priority_classes=8, above_background=True),
}


def levers_from(spec: str | Mapping | Levers | None, field: str = "controller.levers") -> Levers:
    """`Levers` of a grant name, a mapping of `Levers` fields (unnamed fields as ``buffer``) or
    None (the default, ``buffer``).

    >>> levers_from("weighted").weights, levers_from({"priority_classes": 4}).paths
    (True, True)

    Raises:
        ConfigError: an unknown grant name (with the closest one) or field, or a bad value.
    """
    if spec is None:
        return GRANTS["buffer"]
    if isinstance(spec, Levers):
        return spec
    if isinstance(spec, str):
        if spec not in GRANTS:
            import difflib

            close = difflib.get_close_matches(spec, list(GRANTS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown grant {spec!r} ({field}){hint}; expected one of {', '.join(GRANTS)} "
                              "or a mapping of delay, paths, weights, priority_classes, above_background")
        return GRANTS[spec]
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{field} must be a grant name ({', '.join(GRANTS)}) or a mapping, got "
                          f"{type(spec).__name__} ({field})")
    check_fields(field, spec, [f for f in Levers.__dataclass_fields__ if f != "name"])
    return Levers(name="custom", **dict(spec))


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
        levers: What the controller is granted (a decision outside it is refused).
        link_flows: ``int64[L]``: active flows on each directed link now, background flows
            included (what a switch's flow table shows); None when not known.
        transfers: The inference services' KV-cache transfers in flight or about to start (their
            prefill running), which the controller may protect by holding its own collectives
            back or routing them elsewhere (`TransferState`).
    """

    now_s: float
    link_capacity_bytes_per_s: np.ndarray
    link_utilization: np.ndarray
    coflows: tuple[CoflowState, ...] = ()
    jobs: Mapping[str, JobState] = field(default_factory=dict)
    history_window_s: float = 0.0
    levers: Levers = field(default_factory=lambda: GRANTS["buffer"])
    link_flows: np.ndarray | None = None
    transfers: tuple[TransferState, ...] = ()

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
        object.__setattr__(self, "transfers", tuple(self.transfers))
        object.__setattr__(self, "jobs", dict(self.jobs))
        if self.link_flows is not None:
            n = np.asarray(self.link_flows, dtype=np.int64).ravel()
            if n.shape != cap.shape:
                raise ConfigError(f"link_flows must have one entry per link ({cap.size}), got {n.size} "
                                  "(NetworkView.link_flows)")
            n.flags.writeable = False
            object.__setattr__(self, "link_flows", n)

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


def check_levers(decision: Decision | None, point: DecisionPoint, levers: Levers) -> None:
    """Check that a (valid) ``decision`` uses only what ``levers`` grants.

    Raises:
        SimulationError: naming the lever asked for and the grant that does not include it.
    """
    if decision is None:
        return
    g = f"the {levers.name!r} grant"
    if decision.delay_s > 0 and not levers.delay:
        raise _bad(f"refused: decision.delay_s={decision.delay_s!r} but {g} has no delay lever", point)
    if (decision.path_choice is not None or decision.path_splits is not None) and not levers.paths:
        raise _bad(f"refused: a path choice but {g} has no paths lever", point)
    if decision.weight is not None and not levers.weights:
        raise _bad(f"refused: decision.weight={decision.weight!r} but {g} has no weights lever", point)
    p = decision.priority
    if p is not None and not p < levers.priority_classes:
        raise _bad(f"refused: decision.priority={p!r} but {g} has {levers.priority_classes} priority "
                   f"classes (0..{levers.priority_classes - 1})" if levers.priority_classes else
                   f"refused: decision.priority={p!r} but {g} has no priority classes", point)


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
        refused: The decision was valid but used a lever the grant does not include
            (`check_levers`).
    """

    controller: str
    kind: str
    now_s: float
    job: str | None
    task: str
    message: str
    action: str
    refused: bool = False


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
