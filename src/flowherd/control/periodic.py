"""Online learning of each job's periodic traffic, and the one-time shift that interleaves jobs.

A cloud sees flows, not models: `PatternLearner` learns each job's iteration period and its
communication bursts from the collectives it sees cross links that another job uses too (the
decision points' links and bytes: what a switch's counters and a CCL's flow starts show), with
no job profile (`JobState`'s profile fields are not read). `InterleaveController` uses it to
delay a job's burst once so that jobs sharing a bottleneck take turns on it (CASSINI's geometric
idea, Rajasekaran et al., NSDI 2024, done online by the CCL: the shift is paid once, in one
iteration, and gained in every later one).

What is learnt, per job ``j`` (times in seconds):

* **Bursts.** The onsets of ``j``'s collectives that cross a *shared* link (one that another job's
  collectives cross too). A *burst origin* is an onset that follows a gap longer than half the
  longest gap seen between onsets over the last iterations (the compute phase between two
  iterations' communication is the longest silence of a periodic job: the forward pass and the
  start of the backward pass before the first gradient bucket is ready).
* **Period** ``T_j``: the median time between its last burst origins.
* **Solo burst length** ``W_j``: per shared link, the bytes its last complete burst put there over
  the link's capacity, the largest over its links: how long the burst needs with the bottleneck
  to itself.
* **Burst span** ``S_j``: from the origin of its last complete burst seen alone (no other job's
  collective on its links during it) to the end of its last collective at the capacity. A burst
  paced by compute (DDP/Megatron gradient buckets overlapping the backward pass) holds the link
  longer than its bytes need: on the two-job case (`control_two_jobs.yaml`) 0.103 s against
  ``W`` = 0.080 s. ``L_j = max(S_j, W_j)`` once a span was seen, ``W_j`` before.
  The first burst's onsets are kept until a compute gap tells the bursts apart (under contention
  its buckets are evenly spaced and each gap looks like an iteration's).

The rule (`InterleaveController`). At a burst origin of ``j`` (its first collective across a
shared link after its compute gap), find the other jobs whose current burst, started at ``o_k``,
holds a link ``j`` needs now: bytes left there, or predicted to end after now at
``o_k + L_k`` (the link is idle between the buckets of a burst paced by compute). If there is one,
shift ``j`` until the last of those bursts ends, plus a guard of ``guard_fraction`` of the free
time ``T_j - L_k - L_j`` (centering ``j``'s burst in the others' silence when it is 0.5). Then
its later collectives, chained behind this one, follow; and since both jobs repeat with their
periods, the next bursts do not meet again (``L_k + L_j <= T``). Where the shift is applied:

* holding the collective that opens the burst moves the job's iteration by less than the hold:
  its later buckets, ready by the end of the hold, run back to back (``W_j`` instead of ``S_j``).
  With ``S_j`` known, the hold is the shift plus ``S_j - W_j``; the first shift, in lock step, holds
  by the shift alone (no span was seen alone yet), which ends the overlap at once;
* a later correction without ``S_j`` is applied whole to the job's first collective after that
  burst (its next iteration's start, where nothing is compressed; CASSINI's point), if the job
  has collectives between its bursts, else at the origin.

A job shifts at most ``max_shifts`` times between two changes of the set of running jobs, and not
again before ``cooldown_iterations`` of its own iterations have shown whether the last shift held.

**Pay-back.** A shift is paid once and gained later, so it is judged on what it measurably
returns: over the ``payback_iterations`` iterations after a job's shift (it does not shift again
before they are measured), the gain is the sum of the job's iteration times (origin to origin)
below the mean of its iterations just before the shift; where the gain falls short of the hold
the job stops shifting (for the rest of its run). A
shift that leaves the job's iterations no shorter cannot pay back at any horizon; one that gains
less than its hold in the window may pay back later, but no measurement says so, and a shift that
separates two saturating bursts of one period gains a burst's overlap at every iteration.

Why it helps (the property relied on): two bursts that must cross one bottleneck of capacity
``C`` take ``W_k + W_j`` together whether they share it or take turns; in turns, the first ends
``W_j`` sooner and the second no later (max-min sharing of a saturated link is work-conserving
either way). With periodic jobs whose bursts fit into the period together, the turn order, once
set, repeats at no further cost: each job then runs as if alone. It fails when a burst does not
saturate the link alone (taking turns then leaves capacity idle), which the rule does not detect,
and when the periods differ (the jobs drift back into each other): the shift is then repeated,
at most ``max_shifts`` times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.errors import ConfigError

__all__ = ["InterleaveController", "InterleaveParams", "JobPattern", "PatternLearner", "yield_delay_s"]


@dataclass(slots=True)
class JobPattern:
    """What `PatternLearner` knows of one job (times in seconds).

    Attributes:
        onsets: Recent onsets of its collectives across shared links, each with its bytes per
            shared link.
        origins: Recent burst origins (recomputed from the onsets at each new origin).
        period_s: Median time between burst origins (None before one period was seen).
        solo_burst_s: Per link, its last complete burst's bytes there over the capacity.
        span_s: Length of its last complete burst seen alone (no other job's collective on its
            links during it, its origin not held back): from its origin to the end of its last
            collective at the links' capacity; None before one was seen.
        shifts: Shifts made since the set of running jobs last changed.
        iterations_since_shift: Burst origins since its last shift.
        pending_shift_s: A shift decided at a burst origin and not yet applied (`InterleaveController`
            applies it to the job's first collective after that burst).
        between_bursts: Whether a collective of the job was seen after a burst had started all its
            bytes and before the next origin (one the shift can be applied to).
    """

    onsets: deque = field(default_factory=lambda: deque(maxlen=8192))
    origins: list = field(default_factory=list)
    period_s: float | None = None
    solo_burst_s: dict = field(default_factory=dict)
    span_s: float | None = None
    shifts: int = 0
    iterations_since_shift: int = 1 << 30
    pending_shift_s: float = 0.0
    between_bursts: bool = False
    max_gap_s: float = 0.0  # longest gap between consecutive onsets kept
    held_origin_s: float | None = None  # the origin of a burst held back at its origin
    payback_left: int = 0  # iterations of the pay-back window still to measure (module docstring)
    payback_before_s: float | None = None  # mean iteration time before the shift (None: unknown)
    payback_cost_s: float = 0.0  # the holds of the shifts being judged
    payback_gain_s: float = 0.0  # the iteration time gained so far in the window
    shifts_stopped: bool = False  # its shifts did not pay back: no more shifts
    delimited: bool = False  # some onset kept is inside a burst (the bursts are told apart)

    def burst_length_on(self, links) -> float:
        """How long its burst holds ``links`` alone: its span seen alone if known, else its solo
        burst length there (bytes over capacity: a burst paced by compute is longer), seconds."""
        w = self.solo_burst_on(links)
        return max(self.span_s, w) if self.span_s is not None and w > 0 else w

    @property
    def current_origin_s(self) -> float | None:
        return self.origins[-1] if self.origins else None

    def solo_burst_on(self, links) -> float:
        """Its solo burst length, the largest over ``links`` (0 if it was not seen there), seconds."""
        return max((self.solo_burst_s.get(int(lk), 0.0) for lk in links), default=0.0)

    @property
    def burst_s(self) -> float:
        """Its solo burst length over all its shared links, seconds."""
        return max(self.solo_burst_s.values(), default=0.0)

    def gap_threshold_s(self) -> float:
        """Half the longest gap between the onsets kept (0 with fewer than two)."""
        return 0.5 * self.max_gap_s


class PatternLearner:
    """Learns every job's period and bursts online (module docstring); one per run.

    Args:
        history_iterations: Burst origins the period and the gap threshold look back on.
    """

    def __init__(self, history_iterations: int = 4):
        self.history_iterations = history_iterations
        self.jobs: dict[str, JobPattern] = {}
        self.link_jobs: dict[int, set[str]] = {}

    def reset(self) -> None:
        self.jobs.clear()
        self.link_jobs.clear()

    def shared_links(self, job: str, links: np.ndarray) -> np.ndarray:
        """The links of ``links`` that another job's collectives were seen on."""
        lj = self.link_jobs
        return np.array([lk for lk in links.tolist() if lk in lj and (lj[lk] - {job})], dtype=np.int64)

    def is_origin(self, job: str, now_s: float) -> bool:
        """Whether a shared-link collective of ``job`` starting at ``now_s`` opens a burst: its gap
        since the job's last onset is above `JobPattern.gap_threshold_s` (the first onset does)."""
        p = self.jobs.get(job)
        if p is None or not p.onsets:
            return True
        return now_s - p.onsets[-1][0] > p.gap_threshold_s()

    def _alone(self, job: str, start_s: float, end_s: float, links: set, cap: np.ndarray) -> bool:
        """Whether no other job's collective was on ``links`` between ``start_s`` and ``end_s``
        (each taken from its onset for its bytes there at the capacity)."""
        for other, q in self.jobs.items():
            if other == job:
                continue
            for t, b in q.onsets:
                on = [v / float(cap[lk]) for lk, v in b.items() if lk in links]
                if on and t < end_s and t + max(on) > start_s:
                    return False
        return True

    def _relearn(self, job: str, p: JobPattern, cap: np.ndarray) -> None:
        """Origins, period and the last complete burst from the onsets kept, with today's gap
        threshold (the first burst's onsets, seen before any compute gap, are no origins then)."""
        t = np.fromiter((o[0] for o in p.onsets), dtype=np.float64, count=len(p.onsets))
        thr = p.gap_threshold_s()
        idx = [0, *(np.flatnonzero(np.diff(t) > thr) + 1).tolist()]
        p.origins = [float(t[i]) for i in idx]
        o = np.asarray(p.origins[-(self.history_iterations + 1):])
        p.period_s = float(np.median(np.diff(o))) if o.size >= 2 else None
        p.solo_burst_s = {}
        if len(idx) >= 2:
            acc: dict[int, float] = {}
            end = t[idx[-2]]
            for k in range(idx[-2], idx[-1]):
                for lk, b in p.onsets[k][1].items():
                    acc[lk] = acc.get(lk, 0.0) + b
                end = max(end, t[k] + max(b / float(cap[lk]) for lk, b in p.onsets[k][1].items()))
            p.solo_burst_s = {lk: b / float(cap[lk]) for lk, b in acc.items()}
            o = float(t[idx[-2]])
            if len(idx) < t.size and p.held_origin_s != o and self._alone(job, o, float(end), set(acc), cap):
                p.span_s = float(end) - o
        # forget onsets before the origins kept, once bursts are told apart (some onset inside a
        # burst): before that every gap is above the threshold and the onsets of the first burst
        # would be forgotten as if each were an iteration
        p.delimited = len(idx) < t.size
        if len(idx) > self.history_iterations + 2 and p.delimited:
            k = idx[-(self.history_iterations + 2)]
            for _ in range(k):
                p.onsets.popleft()
            p.max_gap_s = float(np.diff(t[k:]).max()) if t.size - k >= 2 else 0.0

    def burst_progress(self, job: str, view: NetworkView) -> float | None:
        """Part of its burst the job has started so far, in [0, 1]: the bytes its collectives since
        its current origin put on its busiest shared link over what its last complete burst put
        there (MLTCP's bytes ratio, `flowherd.control.mltcp`); None before a burst was complete."""
        p = self.jobs.get(job)
        if p is None or not p.solo_burst_s or not p.origins:
            return None
        lk = max(p.solo_burst_s, key=p.solo_burst_s.get)
        total = p.solo_burst_s[lk] * float(view.link_capacity_bytes_per_s[lk])
        o = p.origins[-1]
        sent = sum(b.get(lk, 0.0) for t, b in reversed(p.onsets) if t >= o)
        return min(sent / total, 1.0) if total > 0 else None

    def observe(self, point: DecisionPoint, view: NetworkView, start_s: float) -> bool:
        """Record a collective of ``point.job`` that starts at ``start_s`` (its decision time plus
        any delay); returns whether it opened a burst."""
        job = point.job
        for lk in point.link_idx.tolist():
            self.link_jobs.setdefault(lk, set()).add(job)
        shared = self.shared_links(job, point.link_idx)
        if shared.size == 0:
            return False
        p = self.jobs.setdefault(job, JobPattern())
        origin = self.is_origin(job, start_s)
        bytes_on = dict(zip(point.link_idx.tolist(), point.link_bytes.tolist(), strict=True))
        if p.onsets:
            p.max_gap_s = max(p.max_gap_s, start_s - p.onsets[-1][0])
        p.onsets.append((start_s, {lk: bytes_on[lk] for lk in shared.tolist()}))
        if origin:
            p.iterations_since_shift += 1
            self._relearn(job, p, view.link_capacity_bytes_per_s)
            if p.payback_left > 0 and len(p.origins) >= 2:
                judge(p, p.origins[-1] - p.origins[-2])
        return origin

    def forget(self, job: str) -> None:
        """A job left: drop it, and restart every other job's shift budget (a new set of jobs)."""
        self.jobs.pop(job, None)
        for s in self.link_jobs.values():
            s.discard(job)
        for p in self.jobs.values():
            p.shifts, p.pending_shift_s = 0, 0.0


def book_shift(p: JobPattern, hold_s: float, window: int) -> None:
    """Open (or extend) the pay-back window of a shift of ``p`` that holds its burst ``hold_s``
    (module docstring): the mean of its last ``window`` iterations before it is the reference."""
    if window <= 0:
        return
    if p.payback_left == 0:
        o = np.asarray(p.origins[-(window + 1):], dtype=np.float64)
        p.payback_before_s = float(np.diff(o).mean()) if o.size >= 2 else None
        p.payback_cost_s, p.payback_gain_s = 0.0, 0.0
    p.payback_cost_s += hold_s
    p.payback_left = window


def judge(p: JobPattern, iteration_s: float) -> None:
    """File one iteration of ``p`` (origin to origin) in its open pay-back window; at the window's
    end a shift whose gain fell short of its holds stops the job's shifts."""
    p.payback_left -= 1
    if p.payback_before_s is None:
        return
    p.payback_gain_s += p.payback_before_s - iteration_s
    if p.payback_left == 0 and p.payback_gain_s < p.payback_cost_s:
        p.shifts_stopped = True


@dataclass(frozen=True, slots=True, kw_only=True)
class InterleaveParams:
    """Parameters of the interleaving rule (module docstring).

    Attributes:
        guard_fraction: Part of the free time ``T - W_k - W_j`` added to a shift (0: back to
            back; 0.5: centered in the others' silence).
        max_shift_fraction: Longest shift as a fraction of the job's period.
        max_shifts: Shifts per job between two changes of the set of jobs.
        cooldown_iterations: Iterations a job waits after a shift before it may shift again.
        payback_iterations: Iterations after a shift over which its gain is measured against its
            hold (module docstring, "Pay-back"; 0: shifts are never judged).
    """

    guard_fraction: float = 0.25
    max_shift_fraction: float = 0.6
    max_shifts: int = 3
    cooldown_iterations: int = 2
    payback_iterations: int = 4

    def __post_init__(self) -> None:
        if not (isinstance(self.guard_fraction, int | float) and 0 <= self.guard_fraction <= 1):
            raise ConfigError(f"interleave guard_fraction must be in [0, 1], got {self.guard_fraction!r} "
                              "(controller.params.guard_fraction)")
        if not (isinstance(self.max_shift_fraction, int | float) and 0 < self.max_shift_fraction <= 1):
            raise ConfigError(f"interleave max_shift_fraction must be in (0, 1], got "
                              f"{self.max_shift_fraction!r} (controller.params.max_shift_fraction)")
        for f in ("max_shifts", "cooldown_iterations", "payback_iterations"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"interleave {f} must be an int >= 0, got {v!r} (controller.params.{f})")


def interleave_delay_s(point: DecisionPoint, view: NetworkView, learner: PatternLearner,
                       params: InterleaveParams) -> float:
    """The shift the rule gives the burst ``point`` opens (module docstring), seconds; 0: none.

    Call it right after `PatternLearner.observe` recorded ``point`` as a burst origin."""
    job = point.job
    p = learner.jobs.get(job)
    if p is None or p.period_s is None or not p.solo_burst_s or not p.delimited:
        return 0.0
    if p.shifts >= params.max_shifts or p.iterations_since_shift < params.cooldown_iterations \
            or p.shifts_stopped or p.payback_left > 0:
        return 0.0
    shared = learner.shared_links(job, point.link_idx)
    if shared.size == 0:
        return 0.0
    mine = p.burst_length_on(shared)
    # the other jobs in a burst on a link this one needs: with bytes left there now, or whose
    # current burst (learnt to hold those links) is predicted to last past now (a burst paced by
    # the backward pass leaves the link idle between its buckets)
    busy: dict[str, set[int]] = {}
    for c in view.coflows:
        if c.job is None or c.job == job:
            continue
        on = np.intersect1d(c.link_idx[c.link_remaining_bytes > 0], shared)
        if on.size:
            busy.setdefault(c.job, set()).update(on.tolist())
    for other, q in learner.jobs.items():
        if other != job and q.current_origin_s is not None and q.current_origin_s <= point.now_s:
            on = [lk for lk in shared.tolist() if q.solo_burst_s.get(lk, 0.0) > 0]
            if on and q.current_origin_s + q.burst_length_on(on) > point.now_s:
                busy.setdefault(other, set()).update(on)
    end = point.now_s
    for other, links in busy.items():
        q = learner.jobs.get(other)
        if q is None or q.current_origin_s is None or not q.solo_burst_s:
            continue
        theirs = q.burst_length_on(links)
        e = q.current_origin_s + theirs
        if e <= point.now_s:
            continue
        free = max(p.period_s - theirs - mine, 0.0)
        end = max(end, e + params.guard_fraction * free)
    delay = end - point.now_s
    if delay <= 0 or delay > params.max_shift_fraction * p.period_s:
        return 0.0
    return float(delay)


def yield_delay_s(point: DecisionPoint, view: NetworkView, learner: PatternLearner,
                  max_fraction: float = 1.0, rest: bool = True) -> float:
    """How long a collective of ``point.job`` yields to the bursts of jobs with less work left,
    seconds (0: none): strict priority among jobs, shortest remaining first, with delays only.

    The jobs yielded to are the running jobs whose predicted remaining time alone per GPU held
    (`JobState.remaining_s` over `JobState.num_gpus`, Smith's ratio rule with the GPUs as the
    weights: the queue behind a job waits for its GPUs; ties by name) is shorter than this job's
    and whose collectives have bytes left now on a link this one needs. For each, its burst is
    predicted to end when its in-flight bytes there have drained at the link's capacity plus the
    unstarted part of its burst, ``(1 - progress) x W`` (`PatternLearner.burst_progress`; ``W`` its solo burst
    length there; with ``rest`` False only the bytes in flight count): with this job waiting, it
    has the link alone. The collective waits for the
    last of those ends, capped at ``max_fraction`` of its job's period (learnt, else the view's).

    Why (module docstring of `flowherd.control.herd`): on a shared bottleneck, serving the job
    with the least remaining work first minimizes the mean completion time; holding the other
    jobs' collectives back while its burst is on the link is that order, preemptive at the
    granularity of a collective, enforced at the senders (the CCL) rather than by switch
    queues. It gives nothing up where the bursts do not overlap (nothing to yield to) and keeps
    the link busy as long as the favoured burst saturates it alone. Where it does not (the
    favoured job's ring is limited elsewhere, or its collectives leave gaps), the yielding job's
    GPUs idle for nothing: on the heavy control scenario (seed 5, roce) yielding lengthened the
    mean JCT by 8% against the same policy without it, which is why `HerdParams.yield_fraction`
    is 0 by default.
    """
    job = point.job
    me = view.jobs.get(job) if job is not None else None
    if me is None or me.remaining_s is None or point.kind != "collective" or point.link_idx.size == 0:
        return 0.0
    rank = (me.remaining_s / me.num_gpus, job)
    cap = view.link_capacity_bytes_per_s
    end = point.now_s
    for c in view.coflows:
        k = view.jobs.get(c.job) if c.job is not None and c.job != job else None
        if k is None or k.remaining_s is None or (k.remaining_s / k.num_gpus, c.job) >= rank:
            continue
        on = np.isin(c.link_idx, point.link_idx) & (c.link_remaining_bytes > 0)
        if not on.any():
            continue
        links = c.link_idx[on]
        drain = float(np.max(c.link_remaining_bytes[on] / cap[links]))
        q = learner.jobs.get(c.job)
        prog = learner.burst_progress(c.job, view)
        more = 0.0 if not rest or q is None or prog is None else (1.0 - prog) * q.solo_burst_on(links)
        end = max(end, point.now_s + drain + more)
    p = learner.jobs.get(job)
    period = p.period_s if p is not None and p.period_s is not None else me.period_s
    if end <= point.now_s or period is None:
        return 0.0
    return float(min(end - point.now_s, max_fraction * period))


@dataclass(slots=True)
class InterleaveController:
    """The interleaving rule as a `Controller` (module docstring): delays only, under any grant
    that has the delay lever.

    Args:
        params: Its parameters.
    """

    params: InterleaveParams = InterleaveParams()
    name: str = "interleave"
    learner: PatternLearner = field(default_factory=PatternLearner)

    def reset(self, seed: int) -> None:
        """Forget every pattern."""
        self.learner.reset()

    def delay_s(self, point: DecisionPoint, view: NetworkView) -> float:
        """The shift at a collective point (0 if none), recording the point; other points update
        the set of jobs."""
        if point.kind == "departure" and point.job is not None:
            self.learner.forget(point.job)
            return 0.0
        if point.kind == "arrival":
            for q in self.learner.jobs.values():
                q.shifts, q.pending_shift_s = 0, 0.0
            return 0.0
        if point.kind != "collective" or point.job is None or point.link_idx.size == 0:
            return 0.0
        origin = self.learner.observe(point, view, point.now_s)
        p = self.learner.jobs.get(point.job)
        if p is None:
            return 0.0
        if origin:
            if p.pending_shift_s > 0:  # no collective came between the bursts: shift this one
                return self._hold_origin(p, point, p.pending_shift_s)
            d = interleave_delay_s(point, view, self.learner, self.params) if view.levers.delay else 0.0
            if d <= 0:
                return 0.0
            first = p.shifts == 0
            p.shifts += 1
            p.iterations_since_shift = 0
            w = p.solo_burst_on(self.learner.shared_links(point.job, point.link_idx))
            if p.span_s is not None and p.span_s > w:  # its held buckets run back to back
                book_shift(p, d + p.span_s - w, self.params.payback_iterations)
                return self._hold_origin(p, point, d + p.span_s - w)
            book_shift(p, d, self.params.payback_iterations)
            if first or not p.between_bursts:
                return self._hold_origin(p, point, d)
            p.pending_shift_s = d  # applied to the first collective after this burst
            return 0.0
        if self.learner.shared_links(point.job, point.link_idx).size and p.onsets \
                and p.onsets[-1][0] == point.now_s:
            return 0.0  # inside the burst
        prog = self.learner.burst_progress(point.job, view)
        if prog is None or prog < 1.0 - 1e-9:
            return 0.0
        p.between_bursts = True
        d, p.pending_shift_s = p.pending_shift_s, 0.0
        return d if view.levers.delay else 0.0

    def _hold_origin(self, p: JobPattern, point: DecisionPoint, d: float) -> float:
        """Hold back the collective that opens a burst by ``d``: its onset and origin move."""
        p.pending_shift_s = 0.0
        p.onsets[-1] = (point.now_s + d, p.onsets[-1][1])
        if len(p.onsets) >= 2:
            p.max_gap_s = max(p.max_gap_s, point.now_s + d - p.onsets[-2][0])
        p.origins[-1] = point.now_s + d
        p.held_origin_s = point.now_s + d
        return d

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        d = self.delay_s(point, view)
        return Decision(delay_s=d) if d > 0 else None
