"""The structured policy `threshold`: hold a collective back while its bottleneck is contended.

Policy. At a collective about to start, take its bottleneck link ``b`` (the link where its bytes
take longest given the competition, `bottleneck_link`), the predicted contention there ``u_b`` (in [0, 1]: the
larger of the link's current utilization and ``n / (n + 1)``, the share that ``n`` competing
coflows with bytes left on ``b`` will take from it under max-min fairness, even in a gap between
their bursts) and the job's slack ``S`` (how long its result is not needed). If ``u_b > theta``
and ``S > 0``, delay the collective until the predicted end of the
competing burst, ``R_b / C_b`` (the competing coflows' remaining bytes on ``b`` over its capacity:
when the link drains them at full rate), capped by ``min(S, max_delay_fraction * period)``;
otherwise start it now. Two parameters, ``theta`` and ``max_delay_fraction``, are tuned by
search (`tune`).

Structural property relied on: **the optimal delay is monotone (nondecreasing) in the
contention**, so the optimal wait/send rule is a threshold rule on contention. A threshold (or
"control-limit") policy is optimal for a stopping problem in which the cost of waiting is linear
in time and the benefit of waiting has increasing differences in the state (Topkis, "Minimizing
a submodular function on a lattice", Operations Research 26(2), 1978: increasing differences
give a monotone optimal action; for stopping problems, Chow, Robbins and Siegmund, "Great
Expectations: The Theory of Optimal Stopping", 1971, Ch. 3, monotone case: the one-stage
look-ahead rule, a threshold, is optimal).

Why it holds here. Take one bottleneck link of capacity ``C`` shared max-min fairly with a
competing burst that still has ``R`` bytes, and a pending collective of ``B`` bytes.

* Benefit. Starting now slows the competitor down (it shares the link while both send);
  waiting for the burst to drain, ``R / C``, gives it the whole link. The competitor's gain
  from a wait ``d`` grows with the share of the link it holds, that is with the contention,
  and grows with ``d`` only up to the burst's end: past ``R / C`` more waiting gains nothing
  (the benefit's increment is decreasing in the gap to the burst's end, zero beyond it). With
  two flows (Sincronia's and Varys's SRPT argument), the sum of completion times is
  ``(2R + B) / C`` if we wait and ``(R + 3B) / C`` if we do not (for ``B <= R``), so waiting
  pays exactly when the burst is short relative to ours: more bytes of ours on the contended
  link make waiting pay more.
* Cost. A delay inside the job's slack costs the job nothing (its compute does not wait for the
  result); past the slack each second of delay lengthens its iteration by a second: the cost is
  piecewise linear in ``d`` and does not depend on the contention.

So the net benefit of waiting has increasing differences in (contention, delay), the optimal
delay is nondecreasing in contention, and within the slack the best delay is the end of the
burst: a threshold on contention with the delay capped by slack. The property breaks when new
bursts arrive during the wait (contention is then not monotone along the wait), which is why the
delay is capped (``max_delay_fraction``) and ``theta`` is tuned on the simulator rather than
derived.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.errors import ConfigError

__all__ = ["ThresholdController", "ThresholdParams", "TuneResult", "bottleneck_link", "competing_burst",
           "threshold_delay_s", "tune"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdParams:
    """Parameters of the threshold policy.

    Attributes:
        theta: Contention (bottleneck utilization, 0..1) above which a collective waits.
        max_delay_fraction: Longest delay as a fraction of the job's period (0..1]; the slack
            caps it too.
    """

    theta: float = 0.5
    max_delay_fraction: float = 0.5

    def __post_init__(self) -> None:
        if not (isinstance(self.theta, int | float) and 0 <= self.theta <= 1):
            raise ConfigError(f"threshold theta must be in [0, 1], got {self.theta!r} (controller.theta)")
        if not (isinstance(self.max_delay_fraction, int | float) and 0 < self.max_delay_fraction <= 1):
            raise ConfigError(f"threshold max_delay_fraction must be in (0, 1], got "
                              f"{self.max_delay_fraction!r} (controller.max_delay_fraction)")


def _competitors(point: DecisionPoint, view: NetworkView) -> np.ndarray:
    """Per link of ``point``: other jobs' (and background) coflows with bytes left on it."""
    n = np.zeros(point.link_idx.size)
    for c in view.coflows:
        if c.job == point.job:
            continue
        left = np.isin(point.link_idx, c.link_idx[c.link_remaining_bytes > 0])
        n += left
    return n


def bottleneck_link(point: DecisionPoint, view: NetworkView) -> int | None:
    """The link of ``point`` slowest to drain its bytes given the competition, or None.

    Its bytes over the link's capacity, times ``1 + n`` for the ``n`` competing coflows with
    bytes left on the link (its max-min share is then a ``1 / (1 + n)`` of it); ties go to the
    more utilized link.
    """
    if point.link_idx.size == 0:
        return None
    t = point.link_bytes / view.link_capacity_bytes_per_s[point.link_idx] * (1 + _competitors(point, view))
    util = view.link_utilization[point.link_idx]
    best = np.lexsort((-util, -t))[0]  # largest t, then largest utilization
    return int(point.link_idx[int(best)])


def competing_burst(point: DecisionPoint, view: NetworkView, link: int) -> tuple[int, float]:
    """Other jobs' (and background) coflows with bytes left on ``link``: their number and their
    remaining bytes there."""
    n, competing = 0, 0.0
    for c in view.coflows:
        if c.job == point.job:
            continue
        left = float(c.link_remaining_bytes[c.link_idx == link].sum())
        if left > 0:
            competing += left
            n += 1
    return n, competing


def threshold_delay_s(point: DecisionPoint, view: NetworkView, params: ThresholdParams) -> float:
    """The delay the policy gives ``point`` (module docstring), seconds; 0 means start now."""
    if point.kind != "collective" or point.job not in view.jobs:
        return 0.0
    b = bottleneck_link(point, view)
    if b is None:
        return 0.0
    job = view.jobs[point.job]
    n, competing = competing_burst(point, view, b)
    contention = max(float(view.link_utilization[b]), n / (n + 1))
    if contention <= params.theta or job.slack_s <= 0:
        return 0.0
    burst_s = competing / float(view.link_capacity_bytes_per_s[b])
    cap_s = job.slack_s
    if job.period_s is not None:
        cap_s = min(cap_s, params.max_delay_fraction * job.period_s)
    return max(0.0, min(burst_s, cap_s))


@dataclass(slots=True)
class ThresholdController:
    """The `threshold` policy as a `Controller` (stateless between decisions)."""

    params: ThresholdParams = ThresholdParams()
    name: str = "threshold"

    def reset(self, seed: int) -> None:
        """Nothing to forget."""

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        d = threshold_delay_s(point, view, self.params)
        return Decision(delay_s=d) if d > 0 else None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TuneResult:
    """Outcome of `tune`.

    Attributes:
        best: The parameters of lowest score (first in grid order on ties).
        best_score: Its score.
        params: Every parameter set tried, in grid order.
        scores: ``float64[n]``: their scores.
    """

    best: ThresholdParams
    best_score: float
    params: tuple[ThresholdParams, ...]
    scores: np.ndarray


def tune(evaluate: Callable[[ThresholdParams], float],
         grid: Mapping[str, Sequence[float]] | Sequence[ThresholdParams]) -> TuneResult:
    """Grid search of the threshold parameters.

    Args:
        evaluate: Score of a parameter set, lower is better (e.g. mean JCT over a few seeds of a
            scenario, seconds).
        grid: Values per parameter (``{"theta": [...], "max_delay_fraction": [...]}``, their
            product is tried) or an explicit list of `ThresholdParams`.

    Returns:
        The best parameters and every score.

    Raises:
        ConfigError: an empty grid, an unknown parameter name, or a score that is not a finite
            number.

    >>> r = tune(lambda p: (p.theta - 0.6) ** 2, {"theta": [0.2, 0.6, 0.9]})
    >>> r.best.theta
    0.6
    """
    if isinstance(grid, Mapping):
        known = {"theta", "max_delay_fraction"}
        bad = sorted(set(grid) - known)
        if bad:
            raise ConfigError(f"tune grid has unknown parameter {bad[0]!r}; expected some of "
                              f"{sorted(known)} (grid)")
        keys = sorted(grid)
        values = [list(grid[k]) for k in keys]
        cands = [ThresholdParams(**dict(zip(keys, combo, strict=True)))
                 for combo in itertools.product(*values)]
    else:
        cands = list(grid)
    if not cands:
        raise ConfigError("tune grid is empty; expected at least one parameter set (grid)")
    scores = np.zeros(len(cands))
    for i, p in enumerate(cands):
        s = evaluate(p)
        if isinstance(s, bool) or not isinstance(s, int | float | np.floating) or not math.isfinite(s):
            raise ConfigError(f"tune: evaluate({p}) must return a finite number, got {s!r} (evaluate)")
        scores[i] = float(s)
    i = int(np.argmin(scores))
    return TuneResult(best=cands[i], best_score=float(scores[i]), params=tuple(cands), scores=scores)
