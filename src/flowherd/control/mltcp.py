"""MLTCP: bandwidth shares that grow with the bytes a job has sent in its iteration (a baseline).

Rajasekaran, Narang, Zabreyko and Ghobadi, "MLTCP: Congestion Control for DNN Training"
(arXiv 2402.09589; NSDI 2025): each training job's flows scale their congestion-window increase
by an aggressiveness ``F(bytes_ratio)``, where ``bytes_ratio`` is the part of the iteration's
bytes the job has sent so far. A job further into its communication takes more of a shared
link, finishes its burst sooner, and the jobs slide apart until they interleave; the paper shows
the sum converges to the schedule CASSINI would compute. Here the window scaling is the weight
of the job's flows in the engine's weighted max-min shares (flows of weight ``w`` get ``w``
times the share of a weight-1 flow on a common bottleneck, as TCP flows whose window increase is
scaled by ``w`` do in the Reno fluid model: throughput proportional to the additive increase,
Mo and Walrand, "Fair end-to-end window-based congestion control", ToN 8(5), 2000), set at each
collective the job starts. ``F`` is linear, ``intercept + slope * bytes_ratio``; the bytes ratio
and the bytes per iteration are learnt from the job's observed collectives
(`flowherd.control.periodic.PatternLearner`), as MLTCP's sender counts bytes per iteration.

It needs the ``weights`` lever (grants ``weighted`` and ``priority``); under ``buffer`` it
decides nothing (its decisions would be refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.periodic import PatternLearner
from flowherd.errors import ConfigError

__all__ = ["MltcpController", "MltcpParams"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MltcpParams:
    """The aggressiveness function ``F(r) = intercept + slope * r`` (our defaults: from 0.25 at
    an iteration's first byte to 2 at its last).

    Attributes:
        intercept: ``F(0)`` (> 0).
        slope: ``F(1) - F(0)`` (>= 0).
    """

    intercept: float = 0.25
    slope: float = 1.75

    def __post_init__(self) -> None:
        if not (isinstance(self.intercept, int | float) and self.intercept > 0):
            raise ConfigError(f"mltcp intercept must be > 0, got {self.intercept!r} "
                              "(controller.params.intercept)")
        if not (isinstance(self.slope, int | float) and self.slope >= 0):
            raise ConfigError(f"mltcp slope must be >= 0, got {self.slope!r} (controller.params.slope)")


@dataclass(slots=True)
class MltcpController:
    """MLTCP as a `Controller` (module docstring)."""

    params: MltcpParams = MltcpParams()
    name: str = "mltcp"
    learner: PatternLearner = field(default_factory=PatternLearner)

    def reset(self, seed: int) -> None:
        """Forget every job's bytes."""
        self.learner.reset()

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        if point.kind == "departure" and point.job is not None:
            self.learner.forget(point.job)
            return None
        if point.kind != "collective" or point.job is None or point.link_idx.size == 0:
            return None
        self.learner.observe(point, view, point.now_s)
        if not view.levers.weights:
            return None
        r = self.learner.burst_progress(point.job, view)
        if r is None:
            return None
        return Decision(weight=float(self.params.intercept + self.params.slope * r))
