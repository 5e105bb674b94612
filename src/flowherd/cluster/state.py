"""What a job run and a quiet window see of their cluster run, as a protocol.

A cluster run (`flowherd.cluster.simulate`) holds its job runs (`flowherd.cluster.job_run`),
and a job run reads the run's engine, fabric and per-link counters and tells it when it
finished or fast-forwarded (`finish`, `credit_ff`). The job runs and the quiet windows
(`flowherd.cluster.quiet`) name the run by this protocol, which the run satisfies, so the
imports point one way: `simulate` -> `job_run` -> `quiet` -> `state`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from flowherd.cluster.background import Background
    from flowherd.cluster.control_api import ControlHook
    from flowherd.cluster.executor import CollectiveCache
    from flowherd.cluster.records import BackgroundSpec
    from flowherd.engine.core import Engine
    from flowherd.fabric.core import Fabric

__all__ = ["ClusterState"]


class ClusterState(Protocol):
    """The part of a cluster run its job runs and quiet windows use."""

    fabric: Fabric
    engine: Engine  # the one engine every job's flows and the background run on
    router: Any  # a `flowherd.routing.base.Router`
    cache: CollectiveCache  # collective schedules, shared by the jobs
    fidelity: str  # "step", "collective" or "phase"
    hook: ControlHook | None  # the online controller's hook, None without one
    bg: Background | None  # the background flows, drawn ahead
    bg_spec: BackgroundSpec | None
    sampled: bool  # the "sampled" background rule
    mean_rule: bool  # the "mean" background rule
    spread_rule: bool  # the "spread" background rule
    quiet: bool  # quiet windows (exact fast-forward among background flows) are on
    gpus_per_server: int
    owners: np.ndarray  # per link: how many running jobs' footprints hold it
    link_stamp: np.ndarray  # per link: the last time a job started or ended on it
    quiet_mark: np.ndarray  # per link: scratch marks of a quiet window's component
    held_load: np.ndarray  # per link: the rates of the flows quiet windows hold
    held_count: np.ndarray  # per link: how many flows quiet windows hold
    ff_bytes: np.ndarray  # per link: bytes credited to fast-forwarded iterations

    def job_rng(self, index: int) -> np.random.Generator:
        """The random generator of job ``index`` (its inference requests)."""
        ...

    def background_load(self) -> np.ndarray:
        """Every link's mean background load over the horizon, bytes/s."""
        ...

    def finish(self, run: Any, now: float) -> None:
        """Job run ``run`` ended at ``now``: free its GPUs and serve the queue."""
        ...

    def credit_ff(self, run: Any, a: float, b: float, k: int) -> None:
        """Job run ``run`` fast-forwarded ``k`` iterations over ``[a, b]``: credit their bytes."""
        ...
