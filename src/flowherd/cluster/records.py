"""What goes into and comes out of `flowherd.cluster.simulate.simulate_cluster`: job requests, the
background specification, per-job records and the run's result (frozen values)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from flowherd.cluster.bg_stats import BackgroundSummary
from flowherd.cluster.control_api import ControllerIssue
from flowherd.errors import ConfigError
from flowherd.workload.background import FlowSizeCDF
from flowherd.workload.chakra_job import ChakraJob
from flowherd.workload.inference import InferenceJob
from flowherd.workload.training import TrainingJob

__all__ = ["BackgroundSpec", "ClusterResult", "JobRecord", "JobRequest", "ServiceRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """One job to run.

    Attributes:
        name: Unique name.
        tenant: Tenant label.
        spec: What runs.
        submit_s: Submission time, seconds.
    """

    name: str
    tenant: str
    spec: TrainingJob | InferenceJob | ChakraJob
    submit_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"job name must be a non-empty string, got {self.name!r} (jobs[].name)")
        if not isinstance(self.spec, TrainingJob | InferenceJob | ChakraJob):
            raise ConfigError(f"job {self.name!r}: spec must be a TrainingJob, InferenceJob or ChakraJob, "
                              "got "
                              f"{type(self.spec).__name__} (jobs[].spec)")
        if not (isinstance(self.submit_s, int | float) and math.isfinite(self.submit_s)
                and self.submit_s >= 0):
            raise ConfigError(f"job {self.name!r}: submit_s must be a finite time >= 0, got "
                              f"{self.submit_s!r} (jobs[].submit_s)")


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundSpec:
    """Background traffic of a cluster run (module docstring).

    Attributes:
        load: Offered load, a fraction of the servers' aggregate scale-out bandwidth, in [0, 1].
        cdf: Flow-size distribution name (``web_search``, ``data_mining`` ...) or a `FlowSizeCDF`.
        max_flows_per_s: Cap on simulated flows per second over the whole fabric; above it
            consecutive flows are merged (module docstring).
        fast_forward: How ``phase`` fidelity treats background on a job's links: "exact" (a
            background flow on them ends or forbids an ordinary fast-forward window; with
            ``quiet_windows`` a job whose links carry only background that stays the same
            fast-forwards exactly, `flowherd.cluster.quiet`) or "sampled" (an approximation:
            background does not stop fast-forward; a job simulates one iteration among the
            background, fast-forwards ``sample_every_s`` at that iteration's duration, simulates
            one again, and so on; background flows do not see the traffic of fast-forwarded
            iterations) or "mean" (an approximation for stationary background: a job whose links
            carry no other job fast-forwards at its mean iteration time among the background,
            measured once per job on a private engine over ``sample_every_s`` of iterations
            with the background flows that cross its links from a warm-up before its start on
            (the stretch it meets, in flight); background flows do not see fast-forwarded
            traffic either) or "spread" (the large-cluster rule: "mean" measured at 16
            stretches spread over the job's predicted run, on probes whose links keep what the
            other jobs and the background leave, their mean;
            `flowherd.cluster.job_run.JobRun._probe_mean`).
            Other jobs on a job's links always stop fast-forward.
        sample_every_s: Longest fast-forward window under "sampled", and the probe's length
            under "mean" (of each stretch under "spread"), seconds.
        quiet_windows: Under "exact" on the ideal network without a controller: fast-forward a
            job among background flows while the set of flows sharing its links' component
            stays the same (exact to rounding, `flowherd.cluster.quiet`); False: every
            iteration of such a job is simulated (the rule before quiet windows, to compare).
    """

    load: float
    cdf: str | FlowSizeCDF = "web_search"
    max_flows_per_s: float = 500.0
    fast_forward: str = "exact"
    sample_every_s: float = 10.0
    quiet_windows: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.load, int | float) and 0 <= self.load <= 1):
            raise ConfigError(f"background load must be in [0, 1], got {self.load!r} (background.load)")
        if not (isinstance(self.max_flows_per_s, int | float) and self.max_flows_per_s > 0
                and math.isfinite(self.max_flows_per_s)):
            raise ConfigError(f"max_flows_per_s must be a positive number, got {self.max_flows_per_s!r} "
                              "(background.max_flows_per_s)")
        if self.fast_forward not in ("exact", "sampled", "mean", "spread"):
            raise ConfigError(f"fast_forward must be 'exact', 'sampled', 'mean' or 'spread', got "
                              f"{self.fast_forward!r} (background.fast_forward)")
        if not isinstance(self.quiet_windows, bool):
            raise ConfigError(f"quiet_windows must be true or false, got {self.quiet_windows!r} "
                              "(background.quiet_windows)")
        if not (isinstance(self.sample_every_s, int | float) and self.sample_every_s > 0
                and math.isfinite(self.sample_every_s)):
            raise ConfigError(f"sample_every_s must be a positive time, got {self.sample_every_s!r} "
                              "(background.sample_every_s)")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ServiceRecord:
    """What one inference service did, request by request (`flowherd.cluster.service`).

    Attributes:
        arrival_s: ``float64[R]``: arrival of each request, in order, seconds.
        batch: ``int64[R]``: the prefill batch of each request.
        first_token_s: ``float64[R]``: when its first token reached the client (disaggregated: its
            KV cache landed on its decode replica; colocated: its prefill ended), seconds; NaN if
            not by the horizon.
        last_token_s: ``float64[R]``: when its last token was generated, seconds; NaN if not by
            the horizon.
        output_tokens: Tokens generated per request (the first one by the prefill).
        batch_close_s: ``float64[B]``: when each prefill batch closed, seconds.
        prefill_start_s, prefill_end_s: ``float64[B]``: its prefill's start and end (NaN if not
            by the horizon), seconds.
        kv_end_s: ``float64[B]``: the end of its KV-cache transfer (NaN colocated or not yet),
            seconds.
        exec_s: Seconds the service's steps ran (each prefill, KV transfer and decode step from
            its start to its end, waiting for a replica not counted), summed.
        compute_s: Of them, the seconds of compute alone (the steps' critical paths with
            communication taking no time).
        request_rate_per_s: Offered request rate, per second.
        capacity_per_s: Requests per second the service sustains at most (its slowest pool with
            full batches, each step at its time alone on the fabric); see `capacity_note`.
        capacity_note: Which pool limits it and why, in words.
    """

    arrival_s: np.ndarray
    batch: np.ndarray
    first_token_s: np.ndarray
    last_token_s: np.ndarray
    output_tokens: int
    batch_close_s: np.ndarray
    prefill_start_s: np.ndarray
    prefill_end_s: np.ndarray
    kv_end_s: np.ndarray
    exec_s: float
    compute_s: float
    request_rate_per_s: float
    capacity_per_s: float
    capacity_note: str

    @property
    def overloaded(self) -> bool:
        """True when requests arrive faster than the service can serve them."""
        return self.request_rate_per_s > self.capacity_per_s


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobRecord:
    """What one job did.

    Attributes:
        name, tenant: Labels.
        kind: "training" or "inference".
        submit_s: Submission, seconds.
        start_s: Start (placement), seconds; None if it never started before the horizon.
        finish_s: End, seconds; None if unfinished at the horizon.
        gpus: GPU ids it ran on (empty if it never started).
        iterations_planned: Iterations (training) or request batches (inference, known at start;
            0 if it never started).
        iteration_end_s: ``float64[i]``: end of each completed iteration / batch, seconds.
        iteration_s: ``float64[i]``: duration of each completed iteration (from the previous end,
            or the start), or latency of each batch (close of the batch to its end), seconds.
        compute_only_iteration_s: Critical path of one iteration with communication taking no time
            (inference: mean over its batches of prefill + decode compute), seconds.
        solo_iteration_s: Iteration time alone on the idle fabric at ``collective`` fidelity
            (measured only at ``phase`` fidelity for training jobs; None otherwise), seconds.
        gpu_busy_s: GPU-seconds spent computing in the completed iterations / batches.
        fast_forwarded_iterations: Iterations advanced by fast-forward (``phase`` fidelity).
        footprint_links: ``int64[k]``: the directed links its collectives' routes cross (as placed,
            before any controller's path choice; empty if it never started or moves nothing).
        service: An inference service's requests (time to first token, per output token ...);
            None for a training job or a service that never started.
    """

    name: str
    tenant: str
    kind: str
    submit_s: float
    start_s: float | None
    finish_s: float | None
    gpus: tuple[int, ...]
    iterations_planned: int
    iteration_end_s: np.ndarray
    iteration_s: np.ndarray
    compute_only_iteration_s: float
    solo_iteration_s: float | None
    gpu_busy_s: float
    fast_forwarded_iterations: int
    footprint_links: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    service: ServiceRecord | None = None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ClusterResult:
    """Raw records of a cluster run.

    Attributes:
        jobs: One record per job, in the order given.
        horizon_s: The horizon, seconds.
        fidelity, placer, router: What ran.
        seed: The seed.
        link_bytes: ``float64[L]``: bytes each directed link carried up to the horizon.
        util_tiers: Names of the link tiers.
        util_tier_capacity_bytes_per_s: ``float64[T]``: total capacity of each tier.
        util_bin_edges_s: ``float64[B + 1]``: time bins of the utilization series, seconds.
        util_by_tier: ``float64[T, B]``: bytes carried by each tier in each bin over its capacity
            times the bin width (0..1).
        background_aggregation: ``k``: real flows each background flow stands for.
        background_start_s, background_size_bytes: ``float64[F]`` per background flow (the
            flows drawn for the horizon).
        background_finish_s: ``float64[F]`` per background flow (``nan`` if unfinished at the
            horizon), only with ``background_records=True`` (`simulate_cluster`), else None:
            `background` summarizes them.
        background_src_server, background_dst_server: ``int32[F]``.
        background: The background flows' FCTs and bytes as a streaming summary
            (`flowherd.cluster.bg_stats.BackgroundSummary`), None without background.
        num_events: Engine events (flow ends, coflow starts and ends).
        num_coflows: Coflows added to the engine.
        num_rate_updates: Rate recomputations of the engine.
        num_flows_reallocated: Flows whose rate the recomputations re-allocated, summed over them
            (per update: how far a change spreads through the flows sharing links).
        wall_s: Wall-clock time of the run, seconds.
        controller: Name of the online controller ("none" without one).
        controller_issues: Decisions that failed (the controller raised or returned an invalid
            decision), each with its decision point and what the run did.
        stopped_at_s: When a failed decision stopped the run (``on_controller_error="stop"``;
            the records then end with the utilization bin it fell in), else None.
        num_decisions: Decision points the controller was asked at.
        decision_wall_s: Wall-clock time spent in the controller, seconds.
        network: The congestion model's per-link record (`flowherd.engine.network.network_record`),
            None on ``ideal``.
        link_bin_bytes: ``float64[L, B]`` bytes each directed link carried in each utilization
            bin (``link_series=True`` only, else None).
        link_bin_marked_bytes, link_bin_pause_s, link_bin_drop_bytes: ``float64[L, B]`` ECN-marked
            bytes, PFC pause time (seconds) and dropped bytes of each link in each bin, from the
            congestion model (`flowherd.engine.network`; ``link_series=True`` and a model other
            than ``ideal``, else None).
        link_bin_queue_byte_s: ``float64[L, B]`` the time integral of each link's queue over each
            bin, byte-seconds (over the bin width: the mean queue; ``link_series=True`` and a
            congestion model, else None).
        coflow_name, coflow_start_s, coflow_finish_s: Every coflow of the run (a job's task of an
            iteration, ``"<job>/it<k>/t<i>"``, a background flow ``"bg"``, pure delays), its start
            and finish (``nan`` if unfinished) (``coflow_records=True`` only, else empty / None).
    """

    jobs: tuple[JobRecord, ...]
    horizon_s: float
    fidelity: str
    placer: str
    router: str
    seed: int
    link_bytes: np.ndarray
    util_tiers: tuple[str, ...]
    util_tier_capacity_bytes_per_s: np.ndarray
    util_bin_edges_s: np.ndarray
    util_by_tier: np.ndarray
    background_aggregation: int
    background_start_s: np.ndarray
    background_size_bytes: np.ndarray
    background_finish_s: np.ndarray | None
    background_src_server: np.ndarray
    background_dst_server: np.ndarray
    num_events: int
    num_coflows: int
    num_rate_updates: int
    wall_s: float
    num_flows_reallocated: int = 0
    controller: str = "none"
    controller_issues: tuple[ControllerIssue, ...] = ()
    stopped_at_s: float | None = None
    num_decisions: int = 0
    decision_wall_s: float = 0.0
    network: dict | None = None
    link_bin_bytes: np.ndarray | None = None
    link_bin_marked_bytes: np.ndarray | None = None
    link_bin_pause_s: np.ndarray | None = None
    link_bin_drop_bytes: np.ndarray | None = None
    link_bin_queue_byte_s: np.ndarray | None = None
    coflow_name: tuple[str, ...] = ()
    coflow_start_s: np.ndarray | None = None
    coflow_finish_s: np.ndarray | None = None
    background: BackgroundSummary | None = None

    def censored_jct_s(self) -> np.ndarray:
        """``float64[n]``: completion time of each job submitted before the horizon, one still
        unfinished then counted up to it (``min(finish, horizon) - submit``: a lower bound, so that
        leaving jobs unfinished never looks faster), seconds."""
        h = self.horizon_s
        return np.array([min(h if j.finish_s is None else j.finish_s, h) - j.submit_s
                         for j in self.jobs if j.submit_s < h], dtype=np.float64)

    def job(self, name: str) -> JobRecord:
        """The record of job ``name``."""
        for j in self.jobs:
            if j.name == name:
                return j
        raise ConfigError(f"no job named {name!r} in the result (name)")

