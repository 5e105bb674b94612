"""Baseline online controllers from the literature, as pure functions of (point, view).

Each ``decide_*`` function maps a `DecisionPoint` and a `NetworkView` to a `Decision` or None
and keeps no state; `FunctionController` wraps one into a `Controller`. The ordering and shift
algorithms are public functions (`sincronia_order`, `varys_order`, `cassini_shifts`) so that they
can be checked on hand-built cases.

Priority classes: lower is served first (the engine's strict priority). An order of ``n``
coflows or jobs is mapped onto `NUM_PRIORITY_CLASSES` classes by `rank_to_class` (as switches
have few queues: Sincronia and Crux both quantize their orders onto 8 hardware priorities).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, JobState, NetworkView
from flowherd.errors import ConfigError

__all__ = ["NUM_PRIORITY_CLASSES", "CassiniController", "FunctionController", "cassini_shifts",
           "crux_order", "decide_adaptive", "decide_cassini", "decide_crux", "decide_none",
           "decide_sincronia", "decide_varys", "rank_to_class", "sincronia_order", "varys_order"]

NUM_PRIORITY_CLASSES = 8


def rank_to_class(rank: int, n: int, num_classes: int = NUM_PRIORITY_CLASSES) -> int:
    """Class of the ``rank``-th of ``n`` items (0 first) on ``num_classes`` classes, order-preserving.

    >>> [rank_to_class(r, 4) for r in range(4)], [rank_to_class(r, 16, 4) for r in (0, 3, 4, 15)]
    ([0, 1, 2, 3], [0, 0, 1, 3])
    """
    if n <= num_classes:
        return int(rank)
    return int(rank * num_classes // n)


@dataclass(slots=True)
class FunctionController:
    """A stateless `Controller` around a pure ``decide(point, view)`` function."""

    name: str
    fn: Callable[[DecisionPoint, NetworkView], Decision | None]

    def reset(self, seed: int) -> None:
        """Nothing to forget: the policy is a pure function."""

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        return self.fn(point, view)


# ---- none ---------------------------------------------------------------------------------------
def decide_none(point: DecisionPoint, view: NetworkView) -> Decision | None:
    """No control: every collective starts at once on its default (ECMP) routes."""
    return None


# ---- adaptive -----------------------------------------------------------------------------------
def _least_loaded(point: DecisionPoint, load: np.ndarray) -> tuple[int, ...] | None:
    """Per pair, the candidate path of smallest max load, this collective's earlier pairs counted.

    Each pair already placed adds 1 to its links' load (one more flow splits the link), as a
    flowlet switch sees its own earlier choices in its congestion table.
    """
    if point.kind != "collective" or not point.candidate_paths:
        return None
    load = load.astype(np.float64, copy=True)
    choice = []
    for cands in point.candidate_paths:
        costs = [float(load[p].max()) if p.size else 0.0 for p in cands]
        k = int(np.argmin(costs))  # first of the least loaded: deterministic ties
        choice.append(k)
        load[cands[k]] += 1.0
    return tuple(choice)


def decide_adaptive(point: DecisionPoint, view: NetworkView) -> Decision | None:
    """Least-loaded path choice among the candidates (no delay, no priorities).

    CONGA (Alizadeh et al., "CONGA: Distributed Congestion-Aware Load Balancing for
    Datacenters", SIGCOMM 2014) sends each flowlet on the path whose most loaded link is least
    loaded; LetFlow (Vanini et al., "Let It Flow: Resilient Asymmetric Load Balancing with
    Flowlet Switching", NSDI 2017) shows flowlet-granularity choice gets most of that gain.
    Here a collective's pairs are its flowlets and the congestion metric is the view's link
    utilization.
    """
    choice = _least_loaded(point, view.link_utilization)
    return None if choice is None else Decision(path_choice=choice)


# ---- cassini ------------------------------------------------------------------------------------
def _profile(job: JobState) -> JobState:
    """The job with its solo profile as its pattern when it has one (CASSINI works from profiled
    iteration times and communication windows, not from ones dilated by the current contention)."""
    if job.solo_period_s is None or job.solo_comm_offsets_s.size == 0:
        return job
    return replace(job, period_s=job.solo_period_s, comm_offsets_s=job.solo_comm_offsets_s,
                   comm_durations_s=job.solo_comm_durations_s)


def _periodic(job: JobState) -> bool:
    return job.period_s is not None and job.comm_offsets_s.size > 0 and job.link_idx.size > 0


def _horizon_s(periods: Sequence[float], max_periods: int = 8) -> float:
    """Common perimeter of the jobs' circles: LCM of the periods rounded to 1/64 of the shortest
    (CASSINI Sec. 4: the unit circle's perimeter is the LCM of the iteration times), capped."""
    q = min(periods) / 64
    units = [max(1, round(p / q)) for p in periods]
    lcm = 1
    for u in units:
        lcm = lcm * u // math.gcd(lcm, u)
        if lcm * q > max_periods * max(periods):
            return max_periods * max(periods)
    return lcm * q


def _indicator(t: np.ndarray, job: JobState, anchor_s: float, shift_s: float) -> np.ndarray:
    """True at times ``t`` when the job communicates, its iterations starting at anchor + shift."""
    period = float(job.period_s)
    ph = np.mod(t[None, :] - anchor_s - shift_s - job.comm_offsets_s[:, None], period)
    return np.any(ph < job.comm_durations_s[:, None], axis=0)


def _circular_distance(occupied: np.ndarray) -> np.ndarray:
    """Per bin, the distance in bins to the nearest occupied bin on a circle (M if none)."""
    m = occupied.size
    if not occupied.any():
        return np.full(m, m, dtype=np.float64)
    idx = np.arange(3 * m)
    occ3 = np.tile(occupied, 3)
    left = np.maximum.accumulate(np.where(occ3, idx, -10 * m))
    right = np.minimum.accumulate(np.where(occ3, idx, 20 * m)[::-1])[::-1]
    mid = idx[m:2 * m]
    return np.minimum(mid - left[m:2 * m], right[m:2 * m] - mid).astype(np.float64)


def cassini_shifts(jobs: Sequence[JobState], capacity_bytes_per_s: np.ndarray, *,
                   anchors_s: dict[str, float] | None = None, num_shifts: int = 24,
                   num_bins: int = 720, passes: int = 2) -> dict[str, float]:
    """Per-job time shifts that keep periodic communication windows apart on shared links.

    CASSINI (Rajasekaran et al., "CASSINI: Network-Aware Job Scheduling in Machine Learning
    Clusters", NSDI 2024) puts each job's communication pattern on a circle whose perimeter is
    the LCM of the iteration times, scores a rotation of the jobs sharing a link by the bandwidth
    demand in excess of the link's capacity over the circle, and, over the affinity graph (jobs
    linked when they share a link), fixes one job and gives every other a shift by traversing the
    graph. Here the rotation of each job is searched on ``num_shifts`` points of its period, in
    breadth-first order from the job sending most (it keeps shift 0), then improved by
    ``passes - 1`` rounds of coordinate descent; in these, ties in excess go to the earliest
    shift (packing the windows leaves room for the jobs placed later). A last round moves each
    job, at no more excess, to the shift that keeps its windows farthest from its neighbours'
    (the most robust one: for two identical jobs of period T and window w <= T/2 that is T/2
    apart).

    Args:
        jobs: Jobs with a period, communication windows and a footprint (others are ignored).
        capacity_bytes_per_s: ``float64[L]``: link capacities.
        anchors_s: Time at which each job's current iteration (phase 0 of its pattern) started,
            seconds (default: its ``iteration_start_s``).
        num_shifts: Candidate shifts per period.
        num_bins: Time bins on the common circle.
        passes: Search rounds (1: the traversal alone).

    Returns:
        Shift of each job that shares a link with another, in ``[0, period_s)``, seconds.
    """
    if num_shifts < 1 or num_bins < 2 or passes < 1:
        raise ConfigError(f"cassini needs num_shifts >= 1, num_bins >= 2, passes >= 1, got {num_shifts}, "
                          f"{num_bins}, {passes} (cassini parameters)")
    js = sorted((p for p in map(_profile, jobs) if _periodic(p)),
                key=lambda j: (-j.comm_bytes_per_iteration, j.name))
    if len(js) < 2:
        return {}
    anchors = {j.name: (anchors_s or {}).get(j.name, j.iteration_start_s) for j in js}
    cap = np.asarray(capacity_bytes_per_s, dtype=np.float64)
    # links shared by at least two jobs, and the affinity graph over them
    all_links = np.concatenate([np.unique(j.link_idx) for j in js])
    uniq, counts = np.unique(all_links, return_counts=True)
    shared = uniq[counts > 1]
    if shared.size == 0:
        return {}
    on = {j.name: np.intersect1d(j.link_idx, shared) for j in js}
    by_name = {j.name: j for j in js}
    nbrs = {a.name: [b.name for b in js if b is not a and np.intersect1d(on[a.name], on[b.name]).size]
            for a in js}
    horizon = _horizon_s([float(j.period_s) for j in js])
    t = (np.arange(num_bins) + 0.5) * (horizon / num_bins)
    dt = horizon / num_bins
    # per job: the rate it puts on each of its shared links while communicating
    rate = {}
    for j in js:
        lk = on[j.name]
        r = cap[lk] if j.comm_rate_bytes_per_s is None else np.minimum(j.comm_rate_bytes_per_s, cap[lk])
        rate[j.name] = dict(zip(lk.tolist(), r.tolist(), strict=True))
    shift: dict[str, float] = {}
    ind: dict[str, np.ndarray] = {}

    def score(name: str, occ: np.ndarray) -> float:
        """Demand in excess of capacity on the job's shared links over the circle, in link-seconds."""
        excess = 0.0
        for lk in on[name].tolist():
            demand = occ * rate[name][lk]
            for other in nbrs[name]:
                if other in ind and lk in rate[other]:
                    demand = demand + ind[other] * rate[other][lk]
            excess += float(np.maximum(demand - cap[lk], 0.0).sum()) * dt / cap[lk]
        return excess

    def best_shift(name: str, spread: bool) -> float:
        j = by_name[name]
        period = float(j.period_s)
        near = np.zeros(num_bins, dtype=bool)
        for other in nbrs[name]:
            if other in ind:
                near |= ind[other]
        dist = _circular_distance(near)
        best = None
        for k in range(num_shifts):
            s = k * period / num_shifts
            occ = _indicator(t, j, anchors[name], s)
            excess = score(name, occ)
            gap = float(dist[occ].min()) if occ.any() else float(num_bins)
            key = (round(excess / horizon, 9), -gap if spread else 0.0, k)
            if best is None or key < best[0]:
                best = (key, s, occ)
        shift[name], ind[name] = best[1], best[2]
        return best[1]

    done: set[str] = set()
    for root in js:  # breadth-first over each connected component of the affinity graph
        if root.name in done or not nbrs[root.name]:
            continue
        shift[root.name] = 0.0
        ind[root.name] = _indicator(t, root, anchors[root.name], 0.0)
        done.add(root.name)
        queue = deque(nbrs[root.name])
        order = []
        while queue:
            n = queue.popleft()
            if n in done:
                continue
            done.add(n)
            order.append(n)
            best_shift(n, spread=False)
            queue.extend(nbrs[n])
        for _ in range(passes - 1):
            for n in order:
                best_shift(n, spread=False)
        for n in order:
            best_shift(n, spread=True)
    return shift


def _anchor_for_point(point: DecisionPoint, job: JobState) -> float:
    """Start of the pending collective's iteration in the job's undisturbed frame: ``now`` minus the
    offset of the window it opens (the last window starting at or before its phase)."""
    if point.phase_s is None or job.comm_offsets_s.size == 0:
        return job.iteration_start_s
    offs = np.sort(job.comm_offsets_s)
    k = int(np.searchsorted(offs, point.phase_s + 1e-12, side="right")) - 1
    return point.now_s - float(offs[max(k, 0)])


def decide_cassini(point: DecisionPoint, view: NetworkView) -> Decision | None:
    """Delay the collective so that its job's windows follow the CASSINI time shift.

    The shifts come from `cassini_shifts` over the running jobs; the pending collective of job
    ``j`` is held back by its shift, so that its windows (this one and, by periodicity, the next
    ones) move to the rotation chosen on the circle (Rajasekaran et al., NSDI 2024, Sec. 4.3: the
    scheduler delays a job's start of an iteration once, then the periodic pattern keeps the
    interleaving).
    """
    if point.kind != "collective" or point.job not in view.jobs:
        return None
    me = _profile(view.jobs[point.job])
    if not _periodic(me):
        return None
    anchors = {n: j.iteration_start_s for n, j in view.jobs.items()}
    anchors[point.job] = _anchor_for_point(point, me)
    shifts = cassini_shifts(list(view.jobs.values()), view.link_capacity_bytes_per_s, anchors_s=anchors)
    s = shifts.get(point.job, 0.0)
    if s <= 1e-9 * float(me.period_s):
        return None
    return Decision(delay_s=float(s))


@dataclass(slots=True)
class CassiniController:
    """CASSINI as its scheduler runs it: shifts computed when the set of running jobs changes, and
    each job's shift applied once, to its next collective (`decide_cassini` is the same decision
    as a pure function of one point; asked at every collective of a job whose iterations are
    dilated by contention, it would shift it again and again).

    Rajasekaran et al., NSDI 2024, Sec. 4.3: the time shifts are computed at job arrival and
    departure, and each job's iteration start is delayed once; the periodic pattern then keeps the
    interleaving.
    """

    name: str = "cassini"
    _key: tuple = ()
    _shifts: dict = field(default_factory=dict)
    _pending: set = field(default_factory=set)

    def reset(self, seed: int) -> None:
        """Forget the shifts."""
        self._key, self._shifts, self._pending = (), {}, set()

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        if point.kind != "collective" or point.job not in view.jobs:
            return None
        periodic = {n: _profile(j) for n, j in view.jobs.items()}
        key = tuple(sorted(n for n, j in periodic.items() if _periodic(j)))
        if key != self._key:
            self._key = key
            anchors = {n: j.iteration_start_s for n, j in view.jobs.items()}
            if _periodic(periodic[point.job]):
                anchors[point.job] = _anchor_for_point(point, periodic[point.job])
            self._shifts = cassini_shifts(list(view.jobs.values()), view.link_capacity_bytes_per_s,
                                          anchors_s=anchors)
            self._pending = set(self._shifts)
        if point.job not in self._pending:
            return None
        self._pending.discard(point.job)
        me = periodic[point.job]
        s = self._shifts.get(point.job, 0.0)
        if not _periodic(me) or s <= 1e-9 * float(me.period_s):
            return None
        return Decision(delay_s=float(s))


# ---- crux ---------------------------------------------------------------------------------------
def crux_order(jobs: Sequence[JobState]) -> list[str]:
    """Job names, most GPU-intense first (`JobState.gpu_intensity_flops_per_s`, Crux's
    ``I_j = W_j / t_j``; ties by name).

    >>> a = JobState(name="a", num_gpus=8, compute_flops_per_iteration=4e15, busiest_link_s=2.0)
    >>> b = JobState(name="b", num_gpus=8, compute_flops_per_iteration=3e15, busiest_link_s=1.0)
    >>> crux_order([a, b])   # b: 3e15 / 1 s beats a: 4e15 / 2 s
    ['b', 'a']
    """
    return [j.name for j in sorted(jobs, key=lambda j: (-j.gpu_intensity_flops_per_s, j.name))]


def decide_crux(point: DecisionPoint, view: NetworkView) -> Decision | None:
    """Priority by GPU intensity, and intensity-aware path choice.

    Crux (Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
    SIGCOMM 2024) ranks jobs by GPU intensity ``I_j = W_j / t_j`` (Definition 2: a job's compute
    per iteration over the time its iteration's traffic takes on its busiest link, ``t_j = max_e
    M_je / B_e``; Theorem 1: serving the most intense jobs' flows first maximizes the GPU
    utilization), gives the most intense jobs the highest priority (Sec. 4.2), compressed onto
    the switches' few classes order-preservingly (Sec. 4.3; `rank_to_class`), and routes each
    job, most intense first, on the paths least loaded by the traffic of jobs at least as intense
    (Sec. 4.1). The paper's correction factor ``k_j`` of Eq. 3 (``P_j = k_j I_j``, tuning the
    priority to a job's iteration pattern) is 1 here: the order is the intensity's.
    """
    if point.kind != "collective" or point.job not in view.jobs:
        return None
    order = crux_order(list(view.jobs.values()))
    inten = {n: j.gpu_intensity_flops_per_s for n, j in view.jobs.items()}
    prio = rank_to_class(order.index(point.job), len(order))
    choice = None
    if point.candidate_paths:
        mine = inten[point.job]
        load = np.zeros(view.num_links)
        for c in view.coflows:  # bytes of at-least-as-intense jobs, over capacity: seconds to drain
            if c.job is not None and c.job != point.job and inten.get(c.job, -math.inf) >= mine:
                np.add.at(load, c.link_idx, c.link_remaining_bytes)
        load /= view.link_capacity_bytes_per_s
        # seconds to drain first; the utilization breaks ties between equally free paths
        choice = _least_loaded(point, load + 1e-6 * view.link_utilization)
    return Decision(priority=prio if view.levers.priority_classes else None,
                    path_choice=choice if view.levers.paths else None)


# ---- sincronia ----------------------------------------------------------------------------------
def sincronia_order(link_bytes: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Bottleneck-Select-Scale-Iterate ordering of coflows (Sincronia, Algorithm 1).

    Agarwal et al., "Sincronia: Near-Optimal Network Design for Coflows", SIGCOMM 2018: find the
    most loaded link over the unordered coflows; among the coflows on it, the one of smallest
    weight per byte there goes *last*; scale the others' weights down by what it "paid"; repeat.
    A 4-approximation of the weighted coflow completion time.

    Args:
        link_bytes: ``float64[n, L]``: bytes of each coflow on each link (L may be the union of
            the links they use).
        weights: ``float64[n]``: coflow weights (default all 1).

    Returns:
        ``int64[n]``: coflow indices, first to be served first.

    >>> sincronia_order(np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 1.0]])).tolist()
    [0, 2, 1]
    """
    p = np.asarray(link_bytes, dtype=np.float64)
    n = p.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64).copy()
    left = list(range(n))
    order = np.zeros(n, np.int64)
    for k in range(n - 1, -1, -1):
        sub = p[left]
        b = int(np.argmax(sub.sum(axis=0))) if sub.size else 0
        on_b = [c for c in left if p[c, b] > 0] if sub.size else []
        if not on_b:  # nothing left on any link: the rest in index order
            for c in reversed(left):
                order[k] = c
                k -= 1
            break
        last = min(on_b, key=lambda c: (w[c] / p[c, b], -c))
        order[k] = last
        for c in on_b:
            if c != last:
                w[c] -= w[last] * p[c, b] / p[last, b]
        left.remove(last)
    return order


def _pending_matrix(point: DecisionPoint, view: NetworkView) -> tuple[np.ndarray, np.ndarray]:
    """Bytes of [active coflows..., the pending one] on the union of their links, and capacities."""
    rows = [(c.link_idx, c.link_remaining_bytes) for c in view.coflows] + [(point.link_idx, point.link_bytes)]
    links = np.unique(np.concatenate([r[0] for r in rows]))
    m = np.zeros((len(rows), links.size))
    for i, (lk, b) in enumerate(rows):
        np.add.at(m[i], np.searchsorted(links, lk), b)
    return m, view.link_capacity_bytes_per_s[links]


def decide_sincronia(point: DecisionPoint, view: NetworkView) -> Decision | None:
    """Priority class of the pending collective from its Sincronia (BSSI) rank among the active
    coflows (Agarwal et al., SIGCOMM 2018; any per-flow priority scheduler that respects the order
    keeps the approximation, Sec. 4)."""
    if point.kind != "collective" or point.link_idx.size == 0 or not view.levers.priority_classes:
        return None
    m, _ = _pending_matrix(point, view)
    order = sincronia_order(m)
    rank = int(np.flatnonzero(order == m.shape[0] - 1)[0])
    return Decision(priority=rank_to_class(rank, m.shape[0]))


# ---- varys --------------------------------------------------------------------------------------
def varys_order(link_bytes: np.ndarray, capacity_bytes_per_s: np.ndarray) -> np.ndarray:
    """Smallest-Effective-Bottleneck-First order (Varys, Sec. 5.1).

    Chowdhury et al., "Efficient Coflow Scheduling with Varys", SIGCOMM 2014: a coflow's
    effective bottleneck is ``Gamma = max over links of bytes / capacity``, the time it needs
    alone; coflows are served in increasing Gamma (ties: index).

    Args:
        link_bytes: ``float64[n, L]``: bytes of each coflow on each link.
        capacity_bytes_per_s: ``float64[L]``: the links' capacities.

    Returns:
        ``int64[n]``: coflow indices, first to be served first.
    """
    p = np.asarray(link_bytes, dtype=np.float64)
    gamma = (p / np.asarray(capacity_bytes_per_s, dtype=np.float64)[None, :]).max(axis=1, initial=0.0)
    return np.lexsort((np.arange(p.shape[0]), gamma))


def decide_varys(point: DecisionPoint, view: NetworkView) -> Decision | None:
    """Priority class of the pending collective from its SEBF rank among the active coflows
    (Chowdhury et al., SIGCOMM 2014). MADD's per-flow rates (every flow of a coflow finishing at
    Gamma) are not reproduced: the engine's priority classes carry the order, max-min shares the
    rest."""
    if point.kind != "collective" or point.link_idx.size == 0 or not view.levers.priority_classes:
        return None
    m, cap = _pending_matrix(point, view)
    order = varys_order(m, cap)
    rank = int(np.flatnonzero(order == m.shape[0] - 1)[0])
    return Decision(priority=rank_to_class(rank, m.shape[0]), weight=1.0 if view.levers.weights else None)
