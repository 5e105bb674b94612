"""A gate per collective: each job's burst on a shared bottleneck waits for its turn, every iteration.

The one-time shift (`flowherd.control.periodic.InterleaveController`) makes jobs of one period take
turns once and for all; jobs whose periods differ drift back into each other after it. `BurstGate`
decides again at every collective instead, from what it learns of the traffic it sees cross links
another job uses too (`flowherd.control.periodic.PatternLearner`; no job profile): each job's burst
origins and period, and, per shared link, the *pattern* of its fastest recent burst (the bytes of
each collective and when it started after the origin) with its *span* (origin to the last byte at
the link's capacity) and its *solo burst* ``W`` (its bytes there over the capacity).

From the pattern, at any moment, a job ``k`` in a burst on link ``l`` has ``rem_k`` seconds of
bytes left there (the pattern's bytes after the collectives it started) and a *learnt slack*
``slack_k = origin_k + span_k - now - rem_k``: how long its remaining bytes can wait and still end
by the time its fastest burst ended (its gradient buckets are released by its backward pass; the
iteration waits only for the last one).

Two rules, both for the collective of job ``j`` about to start on its most contended shared link:

* **Turns** (at a burst origin). The other jobs' bursts on the link have ``r_k`` seconds of work
  left (their bytes in flight plus ``rem_k``); let ``R = sum r_k`` and ``S = sum min(r_k, W_j)``.
  The burst waits ``R`` when ``R <= 2 S`` and every burst waited for *saturates* the link (its
  ``W`` over its span is at least ``saturation``). Where the jobs waited for have ``j``'s period
  (a common frame of one period), the turn adds a margin, ``guard_fraction`` of the free time
  ``T - W_j - sum W_k``: the bursts then stay apart in the following iterations (CASSINI's
  interleaving on the unified circle, found online); where the periods differ there is no
  frame short enough to keep (the LCM of the periods), and each burst takes its turn anew.
* **Deadline order** (at every other collective, and at an origin that does not take turns): the
  collective waits while a job with less learnt slack than its own has bytes in flight on the
  link, for at most those bytes' drain time at the link's capacity and at most its own slack.

The properties they rely on (`docs/control-buffering.md` has the argument and the measurement):

1. *Turns.* On a link each burst saturates alone, serving two bursts in turns or sharing the link
   moves the same bytes in the same time (max-min sharing of a saturated link is
   work-conserving); only the order of completions differs. A burst arriving while another has
   ``r`` left: sharing delays both by ``min(r, W_j)`` (the overlap is served at half rate), a
   total of ``2 min(r, W_j)``; taking turns delays only the arrival, by ``r``. Waiting never adds
   delay when ``r <= 2 min(r, W_j)``, the rule's condition (``R`` and ``S`` for several bursts).
2. *Deadline order.* A collective that waits within its slack does not end its burst later than
   its fastest burst did (its later buckets are released by its own compute, not by the link),
   while the job with less slack, whose iteration waits for those bytes, gets the link's capacity
   rather than a share of it: earliest deadline first, which never makes a deadline that was met
   under sharing missed when the slacks are right (Liu and Layland's exchange argument on one
   preemptive resource: moving a later-deadline unit behind an earlier-deadline one keeps both
   deadlines).

So neither can lose when: (a) the bursts taking turns saturate the link alone (measured:
``saturation``), (b) the learnt slacks are right, i.e. a burst's pattern repeats (it does for a
training job whose bucket sizes and compute do not change), and (c) no waiting job is waited for
by a third. The guard measures the loss directly: per job, its iteration time (origin to origin)
in iterations where it waited against those where it did not; a job whose waiting iterations are
longer by more than ``tolerance``, over ``trial`` of each, stops waiting.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.periodic import JobPattern, PatternLearner
from flowherd.errors import ConfigError

__all__ = ["BurstGate", "GateParams", "burst_pattern", "periods_agree"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GateParams:
    """Parameters of the gate (module docstring).

    Attributes:
        turns: Take turns at burst origins (the first rule).
        deadlines: Order collectives by learnt slack (the second rule).
        saturation: Least ``W / span`` of a burst waited for in turns.
        max_wait_fraction: Longest wait of a collective, as a fraction of its job's period.
        tolerance: The guard's margin: waiting iterations longer than ``1 + tolerance`` times the
            others stop a job's waits.
        trial: Iterations of each kind the guard measures before it judges.
        wait_rest: In deadline order, wait for the rest of the more urgent burst too (its
            unstarted bytes), not only for its bytes in flight.
        guard_fraction: Part of the free time a turn adds when the periods agree (`_guard_s`).
        period_tolerance: Relative difference of periods taken as one.
    """

    turns: bool = True
    deadlines: bool = True
    saturation: float = 0.9
    max_wait_fraction: float = 0.5
    tolerance: float = 0.02
    trial: int = 4
    wait_rest: bool = False
    guard_fraction: float = 0.25
    period_tolerance: float = 0.02

    def __post_init__(self) -> None:
        for f in ("turns", "deadlines", "wait_rest"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"gate {f} must be true or false, got {getattr(self, f)!r} "
                                  f"(controller.params.{f})")
        if not (isinstance(self.saturation, int | float) and 0 < self.saturation <= 1):
            raise ConfigError(f"gate saturation must be in (0, 1], got {self.saturation!r} "
                              "(controller.params.saturation)")
        if not (isinstance(self.max_wait_fraction, int | float) and 0 < self.max_wait_fraction <= 2):
            raise ConfigError(f"gate max_wait_fraction must be in (0, 2], got {self.max_wait_fraction!r} "
                              "(controller.params.max_wait_fraction)")
        for f in ("guard_fraction", "period_tolerance"):
            v = getattr(self, f)
            if not (isinstance(v, int | float) and 0 <= v <= 1):
                raise ConfigError(f"gate {f} must be in [0, 1], got {v!r} (controller.params.{f})")
        if not (isinstance(self.tolerance, int | float) and self.tolerance >= 0):
            raise ConfigError(f"gate tolerance must be >= 0, got {self.tolerance!r} "
                              "(controller.params.tolerance)")
        if isinstance(self.trial, bool) or not isinstance(self.trial, int) or self.trial < 1:
            raise ConfigError(f"gate trial must be an int >= 1, got {self.trial!r} (controller.params.trial)")


def periods_agree(period_s: float, other_s: float, tolerance: float) -> bool:
    """Whether two learnt periods are taken as one: they differ by at most ``tolerance`` of the
    first. Bursts of jobs whose periods agree repeat in one common frame of that period (a
    separation made once lasts); where they differ the offset between two bursts moves by the
    difference every iteration."""
    return abs(other_s - period_s) <= tolerance * period_s


def burst_pattern(p: JobPattern, link: int, capacity_bytes_per_s: float) -> tuple[float, np.ndarray] | None:
    """The job's fastest complete burst among those kept on ``link``: its span (origin to its last
    byte at the link's capacity), seconds, and its cumulative bytes there collective by
    collective; None before a burst was complete."""
    if len(p.origins) < 2:
        return None
    t = np.fromiter((o[0] for o in p.onsets), dtype=np.float64, count=len(p.onsets))
    b = np.fromiter((o[1].get(link, 0.0) for o in p.onsets), dtype=np.float64, count=len(p.onsets))
    best = None
    for a, z in zip(p.origins[:-1], p.origins[1:], strict=False):
        sel = np.flatnonzero((t >= a) & (t < z))
        if sel.size == 0 or b[sel].sum() <= 0:
            continue
        span = float(t[sel[-1]] - a + b[sel[-1]] / capacity_bytes_per_s)
        if best is None or span < best[0]:
            best = (span, np.cumsum(b[sel]))
    return best


def _state(learner: PatternLearner, job: str, link: int, cap: float, now_s: float,
           pending: bool) -> tuple[float, float, float, float] | None:
    """(learnt slack, rem, W, W / span) of ``job`` on ``link`` now (module docstring); with
    ``pending`` the job's last recorded collective has not started yet (its bytes are left)."""
    p = learner.jobs.get(job)
    if p is None or not p.origins:
        return None
    pat = burst_pattern(p, link, cap)
    if pat is None:
        return None
    span, cum = pat
    o = p.origins[-1]
    started = sum(1 for x, _ in p.onsets if x >= o) - (1 if pending else 0)
    done = float(cum[min(started, cum.size) - 1]) if started > 0 else 0.0
    rem = max(float(cum[-1]) - done, 0.0) / cap
    w = float(cum[-1]) / cap
    return max(o + span - now_s - rem, 0.0), rem, w, (w / span if span > 0 else 1.0)


@dataclass(slots=True)
class _Guard:
    """One job's measured iterations: with a wait and without."""

    waited: deque = field(default_factory=lambda: deque(maxlen=16))
    free: deque = field(default_factory=lambda: deque(maxlen=16))
    this_waited: bool = False
    stopped: bool = False


@dataclass(slots=True)
class BurstGate:
    """The gate as a `Controller` (module docstring): delays only, under any grant with the delay
    lever.

    Args:
        params: Its parameters.
    """

    params: GateParams = GateParams()
    name: str = "gate"
    learner: PatternLearner = field(default_factory=PatternLearner)
    guards: dict = field(default_factory=dict)
    waits: int = 0  # collectives held back in this run

    def reset(self, seed: int) -> None:
        """Forget every pattern and measurement."""
        self.learner.reset()
        self.guards.clear()
        self.waits = 0

    def _measure(self, job: str) -> None:
        """At a burst origin: file the iteration that just ended, and judge (the guard)."""
        p, g = self.learner.jobs.get(job), self.guards.setdefault(job, _Guard())
        if p is not None and len(p.origins) >= 2:
            (g.waited if g.this_waited else g.free).append(p.origins[-1] - p.origins[-2])
        g.this_waited = False
        n = self.params.trial
        if not g.stopped and len(g.waited) >= n and len(g.free) >= n:
            g.stopped = float(np.mean(g.waited)) > (1 + self.params.tolerance) * float(np.mean(g.free))

    def file(self, job: str, *, origin: bool, held: bool) -> bool:
        """File a decision another rule made for ``job`` under this guard, as the gate files its
        own: at a burst ``origin`` the iteration that ended is measured, a ``held`` collective marks
        the iteration waited. Returns whether the guard has stopped the job."""
        if origin:
            self._measure(job)
        g = self.guards.setdefault(job, _Guard())
        if held:
            g.this_waited = True
        return g.stopped

    def _guard_s(self, job: str, others: list[str], link: int, cap: float, my_w: float) -> float:
        """The turn's margin: with every job waited for at the period of ``job`` (within
        ``period_tolerance``) the bursts repeat in one common frame of that period, and the turn
        lands ``guard_fraction`` into the free time ``T - W_j - sum W_k`` after them, so that a
        small drift does not bring them back together; 0 otherwise (no common frame)."""
        t, tol = self.learner.jobs[job].period_s, self.params.period_tolerance
        ws = []
        for k in others:
            q = self.learner.jobs.get(k)
            if q is None or q.period_s is None or not periods_agree(t, q.period_s, tol):
                return 0.0
            ws.append(q.solo_burst_s.get(link, 0.0))
        return self.params.guard_fraction * max(t - my_w - sum(ws), 0.0)

    def wait_s(self, point: DecisionPoint, view: NetworkView, origin: bool) -> float:
        """The wait of the collective ``point`` (after `PatternLearner.observe` recorded it)."""
        job = point.job
        p = self.learner.jobs.get(job)
        if p is None or p.period_s is None:
            return 0.0
        shared = self.learner.shared_links(job, point.link_idx)
        if shared.size == 0:
            return 0.0
        cap = view.link_capacity_bytes_per_s
        inflight: dict[int, dict[str, float]] = {}
        for c in view.coflows:
            if c.job is None or c.job == job:
                continue
            on = np.isin(c.link_idx, shared) & (c.link_remaining_bytes > 0)
            for lk, b in zip(c.link_idx[on].tolist(), c.link_remaining_bytes[on].tolist(), strict=True):
                d = inflight.setdefault(lk, {})
                d[c.job] = d.get(c.job, 0.0) + b
        wait = 0.0
        for lk, others in inflight.items():
            c_l = float(cap[lk])
            me = _state(self.learner, job, lk, c_l, point.now_s, pending=True)
            if me is None:
                continue
            my_slack, _, my_w, _ = me
            theirs = {k: _state(self.learner, k, lk, c_l, point.now_s, pending=False) for k in others}
            if origin and self.params.turns and my_w > 0:
                r = {k: b / c_l + (s[1] if s is not None else 0.0) for k, (b, s) in
                     zip(others, ((others[k], theirs[k]) for k in others), strict=True)}
                big_r, s_sum = sum(r.values()), sum(min(v, my_w) for v in r.values())
                saturating = all(s is not None and s[3] >= self.params.saturation for s in theirs.values())
                if saturating and big_r <= 2.0 * s_sum:
                    wait = max(wait, big_r + self._guard_s(job, list(others), lk, c_l, my_w))
                    continue
            if self.params.deadlines and my_slack > 0:
                urgent = [others[k] / c_l + (s[1] if self.params.wait_rest else 0.0)
                          for k, s in theirs.items() if s is not None and s[0] < my_slack]
                if urgent:
                    wait = max(wait, min(max(urgent), my_slack))
        if wait <= 1e-9 or wait > self.params.max_wait_fraction * p.period_s:
            return 0.0
        return float(wait)

    def delay_s(self, point: DecisionPoint, view: NetworkView) -> float:
        """The wait at a decision point (0 if none), recording the point."""
        if point.kind == "departure" and point.job is not None:
            self.learner.forget(point.job)
            self.guards.pop(point.job, None)
            return 0.0
        if point.kind != "collective" or point.job is None or point.link_idx.size == 0:
            return 0.0
        job = point.job
        origin = self.learner.observe(point, view, point.now_s)
        if job not in self.learner.jobs:
            return 0.0
        if origin:
            self._measure(job)
        g = self.guards.setdefault(job, _Guard())
        if g.stopped or not view.levers.delay:
            return 0.0
        d = self.wait_s(point, view, origin)
        if d <= 0:
            return 0.0
        p = self.learner.jobs[job]
        p.onsets[-1] = (point.now_s + d, p.onsets[-1][1])  # the collective starts later
        if origin:
            p.origins[-1] = point.now_s + d
        if len(p.onsets) >= 2:
            p.max_gap_s = max(p.max_gap_s, p.onsets[-1][0] - p.onsets[-2][0])
        g.this_waited = True
        self.waits += 1
        return d

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        d = self.delay_s(point, view)
        return Decision(delay_s=d) if d > 0 else None
