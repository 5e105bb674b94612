"""The `flowherd` policy: interleaving shifts, threshold buffering, least-loaded paths, and (where
granted) shortest-remaining-job-first classes.

A structured policy for the objective the benchmarks score, the mean job completion time. It
decides only with the levers its grant has (`NetworkView.levers`; the default grant ``buffer``
has delays and paths). At a collective about to start it decides:

* **Buffering** (whether to hold the collective back), two rules. The *interleaving shift*
  (`flowherd.control.periodic`): the job's period and bursts are learnt from its observed
  collectives, and a burst that would meet another job's on a shared bottleneck is delayed once
  so that the two take turns in every later iteration. Where the learnt periods of the jobs met
  on its links differ, a separation made once does not last, and the per-iteration gate
  (`flowherd.control.gate`) decides instead (``buffering: auto``, the default). Where neither
  holds it back, the `threshold`
  rule (`flowherd.control.threshold`): wait for the competing burst on the bottleneck to drain
  while the contention there exceeds ``theta`` and the job's slack allows, capped.
* **Priority** (only under a grant with priority classes: which transfer goes first on a shared
  link). Jobs are ranked by their predicted remaining time alone, ``(iterations left) x (solo
  iteration time)`` (`JobState.remaining_s`), and the rank is compressed onto the granted
  classes (at most `NUM_CLASSES`), shortest first, on links the running jobs overload: a
  collective whose links all carry, summed over the jobs that use them, less than one link-second
  of bytes per second (each job's bytes per iteration there over the capacity and its iteration
  time, `_offered_load`) gets the first class whatever its job's rank. There the link carries
  every job's bytes in time, and strict classes only reorder collisions: a collective of the
  second job, hidden behind its backward pass under fair sharing, waits for the first job's whole
  burst at every collision, past its slack, and its iterations lengthen for no gain of the first
  job's worth it (two overlapping DDP jobs on 4:1 uplinks, roce: ranked second, 21% slower than
  without control; `tests/control/test_priority_overlap.py`).
* **Load balancing** (which path each of its GPU pairs takes). The candidate path whose most
  utilized link is least utilized, its earlier pairs counted (CONGA/LetFlow's choice, as the
  `adaptive` baseline).

Structural property relied on for the priority: **on a shared bottleneck, serving the job with
the least remaining work first minimizes the mean completion time** (SRPT is optimal for the sum
of completion times on one server with preemption, Schrage, "A proof of the optimality of the
shortest remaining processing time discipline", Operations Research 16(3), 1968; for many jobs
over many links the order remains a 2-approximation of the sum of weighted completion times for
concurrent open shop, Mastrolilli et al., "Minimizing the sum of weighted completion times in a
concurrent open shop", Oper. Res. Lett. 38(5), 2010, which is what coflow ordering reduces to,
Sincronia Sec. 3). Why it holds here: every byte a job sends on the contended link delays the
others by the time the link spends on it, and a job that finishes leaves for good (its GPUs go to
the queue): an exchange argument on two adjacent transfers in the order shows that putting the
shorter remaining job first lowers the sum of the two completion times and changes no other.
The literature baselines order by what is local to the transfer (Varys: the coflow's own
bottleneck time; Sincronia: its bytes on the most loaded link) or by GPU intensity (Crux,
which maximizes utilization rather than completion time); a job's remaining size is what the
completion-time objective depends on, and a cluster scheduler knows it (the job's iteration
count is part of its submission, as in Tiresias/Gandiva's profiles, and the iteration time is
measured once alone).

The property fails when the remaining-time estimate is wrong (a job slowed down more than its
solo profile says); the rank then is only as good as the estimate, which is why the buffering and
path parts are kept independent of it. With one class per job rank the order is exact; with
fewer classes than jobs it is quantized (`rank_to_class`).

The same pieces define the action space the reinforcement-learning agent acts in
(`flowherd.rl`): at an *agent point* (`asks_agent`: a collective that crosses the network) the
agent picks one of `ACTIONS` (a priority class and whether to buffer), `features` describes the
point, `action_mask` says which actions change anything, `decision_for` turns an action into a
`Decision` (paths are always the least-loaded ones), and `structured_action` is this policy's
choice, which a learned policy is warm-started from.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.baselines import _least_loaded, rank_to_class
from flowherd.control.gate import BurstGate, GateParams, periods_agree
from flowherd.control.periodic import InterleaveController, InterleaveParams, yield_delay_s
from flowherd.control.threshold import ThresholdParams, bottleneck_link, competing_burst, threshold_delay_s
from flowherd.errors import ConfigError

__all__ = ["ACTIONS", "FEATURE_NAMES", "NUM_CLASSES", "NUM_FEATURES", "HerdController", "HerdParams",
           "action_mask", "asks_agent", "decision_for", "features", "share_splits", "spray_splits",
           "srpt_class", "structured_action"]

NUM_CLASSES = 8
BUFFERING = ("auto", "shift", "gate")  # `HerdParams.buffering`
WEIGHT_RATIO = 4.0  # share of a job over the next one's in the weighted order (`_srpt_weight`)
ACTIONS: tuple[tuple[int, bool], ...] = tuple((c, d) for d in (False, True) for c in range(NUM_CLASSES))
GROUPS = ("tp", "pp", "dp", "ep")
FEATURE_NAMES = ("log_size", "bottleneck_contention", "bottleneck_competitors", "burst_over_period",
                 "slack_over_period", "srpt_rank", "srpt_class", "log_remaining", "running_jobs",
                 "progress", "slowdown", "mean_link_utilization", "can_buffer",
                 *(f"group_{g}" for g in GROUPS), "group_other")
NUM_FEATURES = len(FEATURE_NAMES)
# Observations are clipped to [-OBS_BOUND, OBS_BOUND] (features are documented to stay in about
# [-1, 10]; the clip only keeps the Box honest).
OBS_BOUND = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HerdParams:
    """Parameters of the `flowherd` policy.

    Attributes:
        theta: Bottleneck contention above which a collective with slack is buffered (1: never).
        max_delay_fraction: Longest buffering as a fraction of the job's period.
        balance: Choose least-loaded paths (False: the default routes).
        spray: Under a grant without priority classes, split each GPU pair's bytes evenly over
            its candidate paths (packet spraying: `spray_splits`) rather than choose the
            least-utilized one (the `adaptive` baseline's choice, the default: a floor by
            construction; on the heavy control scenario, seed 5, roce, spraying is slower:
            148.05 s against 111.95 s mean JCT, `benchmarks/control.py` label ``flowherd/spray``).
        path_metric: Without classes, how the least-loaded path is told: ``share`` (the rate a
            new flow would get on the path's slowest link, from the links' flow counts:
            `_widest_share`; the default), ``utilization`` (the `adaptive` baseline's) or
            ``split`` (each pair's bytes over all its candidates in proportion to those rates:
            `share_splits`, an ablation). On the heavy scenario's first two jobs with its
            background (seed 5, roce, 30 s; `studies/control_probe.py --controllers flowherd
            split-paths spray --no-bare`) the two jobs' iterations took 2.03/2.06 s with
            ``share``, 2.40/2.36 s with ``split`` and 2.68/2.73 s spraying.
        prioritize: Set shortest-remaining-first classes (False: no priorities).
        num_classes: Classes the ranks are compressed onto (1: every job in one class ahead of
            unmarked traffic, no order among jobs: an ablation of the order); never more than
            the grant has.
        interleave: Shift bursts so that jobs sharing a bottleneck take turns
            (`flowherd.control.periodic`).
        guard_fraction: The interleaving shift's guard (`InterleaveParams.guard_fraction`).
        yield_fraction: Under a grant without priority classes, a collective yields to the
            bursts of jobs with less work left on its links, for at most this fraction of its
            job's period (`flowherd.control.periodic.yield_delay_s`; 0: never).
        yield_burst: A yielding collective waits for the rest of the favoured job's burst too
            (its unstarted part, predicted from its last burst), not only for the bytes it has
            in flight on the shared links (False).
        order_overloaded_only: Rank jobs by classes only on links they overload (module
            docstring; False: on every link, an ablation).
        buffering: How bursts are held back (with ``interleave``): ``shift``, the
            one-time interleaving shift (`flowherd.control.periodic`); ``gate``, a decision at
            every collective (`flowherd.control.gate`: turns where bursts saturate the link,
            deadline order by learnt slack); or ``auto``, per collective from the periods learnt
            online: the shift where the learnt periods of every job met on the collective's
            shared links agree with its job's within ``period_tolerance``
            (`flowherd.control.gate.periods_agree`, the gate's test for one common frame), the
            gate where one differs (the default; a separation made once lasts only where the bursts repeat in
            one frame; where periods differ the offset between two bursts moves by the difference
            every iteration). Measured (roce, `benchmarks/control.py`, mean JCT, paired 95% CIs,
            seeds 0-4; `docs/control-buffering.md`): on the mixed-period family ``shift`` ties no
            control (+0.01 +-0.03 s), ``gate`` is 0.18 +-0.21 s faster (a tie), ``auto`` 0.22
            +-0.18 s faster; on heavy ``gate`` is 1.11 +-0.48 s and ``auto`` 0.69 +-0.64 s
            slower than ``shift``; on the two-job case of one period ``auto`` is the shift
            (11.97 s, 1.013x the bound; the gate 12.10 s). ``auto`` is the default: it is the
            one setting that gains on the mixed family, at 0.6% of the heavy scenario's mean JCT
            against ``shift``.
        period_tolerance: With ``buffering: auto``, the relative difference of two learnt periods
            still taken as one. Wider than the gate's own margin (2%): a period is learnt from
            the first iterations, under contention, and two jobs of one period sharing a link in
            lock step learn periods 5.5% apart there (two-job case, roce: 0.312 and 0.329 s
            after one iteration, both 0.2364 s once apart); the mixed-period family's closest
            periods are 27% apart. Wider still does not help the heavy scenario: at 0.2, auto is
            slower there than at 0.1 (seeds 0-4: 112.76 s against 112.26 s mean JCT).
    """

    theta: float = 1.0
    max_delay_fraction: float = 0.5
    balance: bool = True
    prioritize: bool = True
    num_classes: int = NUM_CLASSES
    interleave: bool = True
    guard_fraction: float = 0.25
    yield_fraction: float = 0.0
    spray: bool = False
    path_metric: str = "share"
    yield_burst: bool = True
    order_overloaded_only: bool = True
    buffering: str = "auto"
    period_tolerance: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.num_classes, bool) or not isinstance(self.num_classes, int) \
                or not 1 <= self.num_classes <= NUM_CLASSES:
            raise ConfigError(f"flowherd num_classes must be an int in 1..{NUM_CLASSES}, got "
                              f"{self.num_classes!r} (controller.num_classes)")
        ThresholdParams(theta=self.theta, max_delay_fraction=self.max_delay_fraction)  # same checks
        InterleaveParams(guard_fraction=self.guard_fraction)  # same checks
        if isinstance(self.yield_fraction, bool) or not isinstance(self.yield_fraction, int | float) \
                or not 0 <= self.yield_fraction <= 4:
            raise ConfigError(f"flowherd yield_fraction must be in [0, 4], got {self.yield_fraction!r} "
                              "(controller.params.yield_fraction)")
        if self.buffering not in BUFFERING:
            raise ConfigError(f"flowherd buffering must be 'auto', 'gate' or 'shift', got {self.buffering!r} "
                              "(controller.params.buffering)")
        if isinstance(self.period_tolerance, bool) or not isinstance(self.period_tolerance, int | float) \
                or not 0 <= self.period_tolerance <= 1:
            raise ConfigError(f"flowherd period_tolerance must be in [0, 1], got {self.period_tolerance!r} "
                              "(controller.params.period_tolerance)")
        if self.path_metric not in ("utilization", "share", "split"):
            raise ConfigError(f"flowherd path_metric must be 'utilization', 'share' or 'split', got "
                              f"{self.path_metric!r} (controller.params.path_metric)")
        for f in ("balance", "prioritize", "interleave", "spray", "yield_burst", "order_overloaded_only"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"flowherd {f} must be true or false, got {getattr(self, f)!r} "
                                  f"(controller.{f})")

    @property
    def threshold(self) -> ThresholdParams:
        return ThresholdParams(theta=self.theta, max_delay_fraction=self.max_delay_fraction)


_DEFAULT = HerdParams()


def asks_agent(point: DecisionPoint) -> bool:
    """True at a point an agent decides: a collective that crosses the network."""
    return point.kind == "collective" and point.link_idx.size > 0


def _ranking(view: NetworkView) -> list[str]:
    """Running jobs, shortest predicted remaining time first (unknown sizes last, by name)."""
    def key(name: str) -> tuple:
        r = view.jobs[name].remaining_s
        return (r is None, math.inf if r is None else r, name)

    return sorted(view.jobs, key=key)


def srpt_class(job: str, view: NetworkView, num_classes: int = NUM_CLASSES) -> int:
    """Priority class of ``job``: its rank by remaining time among the running jobs, on
    ``num_classes`` classes (0 first)."""
    order = _ranking(view)
    if job not in order:
        return num_classes - 1
    return rank_to_class(order.index(job), len(order), num_classes)


def _offered_load(point: DecisionPoint, view: NetworkView) -> float:
    """The largest offered load over the pending collective's links: per link, the sum over the
    running jobs that use it of their bytes per iteration there over the link's capacity and
    their iteration time (solo, else the learnt one): 1 is a link busy all the time. A job whose
    bytes per link or period are unknown counts as keeping the link busy (inf), and so does a
    collective that no job's footprint covers (nothing known of its links)."""
    cap = view.link_capacity_bytes_per_s
    load = np.zeros(point.link_idx.size)
    seen = False
    for j in view.jobs.values():
        on = np.isin(j.link_idx, point.link_idx)
        if not on.any():
            continue
        seen = True
        period = j.solo_period_s if j.solo_period_s is not None else j.period_s
        if period is None or j.link_bytes_per_iteration.size != j.link_idx.size:
            return math.inf
        where = np.searchsorted(point.link_idx, j.link_idx[on]) if np.all(np.diff(point.link_idx) > 0) \
            else np.array([int(np.flatnonzero(point.link_idx == lk)[0]) for lk in j.link_idx[on]])
        np.add.at(load, where, j.link_bytes_per_iteration[on] / cap[j.link_idx[on]] / period)
    return float(load.max(initial=0.0)) if seen else math.inf


def _srpt_weight(point: DecisionPoint, view: NetworkView, params: HerdParams) -> float:
    """Under a grant with weights and no classes, the shortest-remaining-first order as weighted
    shares: the job of class ``c`` (of ``K``, `srpt_class`) weighs ``WEIGHT_RATIO ** (K - 1 - c)``,
    on links the jobs overload; 1 elsewhere (the rule of the classes, module docstring). A large
    ratio brings max-min sharing near strict priority without starving the later jobs."""
    k = min(params.num_classes, NUM_CLASSES, max(len(view.jobs), 1))
    if params.order_overloaded_only and _offered_load(point, view) <= 1.0:
        return 1.0
    return float(WEIGHT_RATIO ** (k - 1 - srpt_class(point.job, view, k)))


def _delay(point: DecisionPoint, view: NetworkView, params: HerdParams) -> float:
    if params.theta >= 1.0:
        return 0.0
    return threshold_delay_s(point, view, params.threshold)


def _buffer_delay(point: DecisionPoint, view: NetworkView, params: HerdParams) -> float:
    """The delay a "buffer" action gives: the threshold rule's at theta = 0 (wait for the burst on
    the bottleneck, capped by slack and period), whatever the policy's own theta."""
    return threshold_delay_s(point, view, ThresholdParams(theta=0.0,
                                                          max_delay_fraction=params.max_delay_fraction))


def features(point: DecisionPoint, view: NetworkView) -> np.ndarray:
    """``float32[NUM_FEATURES]`` describing an agent point (`FEATURE_NAMES`), each in about [0, 4]."""
    x = np.zeros(NUM_FEATURES, dtype=np.float32)
    job = view.jobs.get(point.job) if point.job is not None else None
    x[0] = math.log10(max(point.size_bytes, 1.0)) / 10.0
    b = bottleneck_link(point, view)
    n, competing = 0, 0.0
    if b is not None:
        n, competing = competing_burst(point, view, b)
        x[1] = max(float(view.link_utilization[b]), n / (n + 1))
        x[2] = n / (n + 1)
    period = None
    if job is not None:
        period = job.solo_period_s or job.period_s
    if b is not None and period:
        x[3] = min(competing / float(view.link_capacity_bytes_per_s[b]) / period, 4.0)
    if job is not None and period:
        x[4] = min(job.slack_s / period, 1.0)
    order = _ranking(view)
    if job is not None and point.job in order:
        x[5] = order.index(point.job) / max(len(order) - 1, 1)
        x[6] = srpt_class(point.job, view) / (NUM_CLASSES - 1)
        rem = job.remaining_s
        x[7] = 0.0 if rem is None else math.log1p(rem) / 10.0
        if job.iterations_total:
            x[9] = min(job.iterations_done / job.iterations_total, 1.0)
        if job.solo_period_s and job.period_s:
            x[10] = min(max(job.period_s / job.solo_period_s - 1.0, 0.0), 4.0)
    x[8] = min(len(view.jobs) / 32.0, 2.0)
    if point.link_idx.size:
        x[11] = float(view.link_utilization[point.link_idx].mean())
    x[12] = float(_buffer_delay(point, view, _DEFAULT) > 0) if job is not None else 0.0
    g = point.group if point.group in GROUPS else None
    x[13 + (GROUPS.index(g) if g is not None else len(GROUPS))] = 1.0
    return x


def action_mask(point: DecisionPoint, view: NetworkView, params: HerdParams | None = None) -> np.ndarray:
    """``bool[len(ACTIONS)]``: every class without buffering; with buffering only when it would
    delay (the grant has delays, the job has slack and a competing burst is on its bottleneck)."""
    params = params or _DEFAULT
    can = view.levers.delay and point.job in view.jobs and _buffer_delay(point, view, params) > 0
    return np.array([(not d) or can for _c, d in ACTIONS], dtype=bool)


def _paths(point: DecisionPoint, view: NetworkView, params: HerdParams,
           cls: int | None = None) -> tuple[int, ...] | None:
    """Least-loaded paths. Without a class (``cls`` None: a grant without priority classes) the
    candidate whose most utilized link is least utilized (`flowherd.control.baselines.
    decide_adaptive`'s choice, CONGA's). With one, the load of a link is the seconds its capacity
    needs to drain the bytes that will be served before or with ours there: other jobs' coflows
    of a class at most ``cls``, the utilization breaking ties (under strict priority a transfer
    gets nothing on a link busy with higher classes, whatever that link's utilization)."""
    if not params.balance or point.kind != "collective" or not point.candidate_paths:
        return None
    if cls is None and params.path_metric == "share" and view.link_flows is not None:
        return _widest_share(point, view)
    if cls is None:  # no classes: the adaptive baseline's choice, the floor this part never loses to
        return _least_loaded(point, view.link_utilization)
    load = np.zeros(view.num_links)
    for c in view.coflows:
        if c.job != point.job and (cls is None or c.job is None or c.priority <= cls):
            np.add.at(load, c.link_idx, c.link_remaining_bytes)
    load /= view.link_capacity_bytes_per_s
    return _least_loaded(point, load + 1e-6 * view.link_utilization)


def _link_lists(view: NetworkView, point: DecisionPoint
                ) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
    """Per link of the point's candidate paths, its unused capacity, its capacity and its flows as
    plain floats keyed by link id: a few links per path, where numpy's per-call cost would
    dominate, and only those links, where copying the whole fabric's arrays would (same values)."""
    touched = [p for cands in point.candidate_paths for p in cands if len(p)]
    ids = np.unique(np.concatenate(touched)) if touched else np.zeros(0, dtype=np.int64)
    cap = view.link_capacity_bytes_per_s[ids]
    keys = ids.tolist()
    return (dict(zip(keys, (cap * (1.0 - view.link_utilization[ids])).tolist(), strict=True)),
            dict(zip(keys, cap.tolist(), strict=True)),
            dict(zip(keys, view.link_flows[ids].astype(np.float64).tolist(), strict=True)))


def _path_rates(paths: list[list[int]], free: dict[int, float], capl: dict[int, float],
                n: dict[int, float], empty: float) -> list[float]:
    """Per path the rate a new flow gets on its slowest link (per link the larger of its unused
    capacity and ``C / (n + 1)``); ``empty`` for a path of no link."""
    return [min(max(free[lk], capl[lk] / (n[lk] + 1.0)) for lk in p) if p else empty for p in paths]


def _widest_share(point: DecisionPoint, view: NetworkView) -> tuple[int, ...]:
    """Per pair, the candidate path whose slowest link gives a new flow the largest rate: on each
    link the larger of its unused capacity and its max-min share ``C / (n + 1)`` with the ``n``
    flows on it now (background included), this collective's earlier pairs counted (each takes
    its rate off the link's unused capacity and adds a flow). A ring or tree collective runs at
    the pace of its slowest flow, and a link fully used by one elastic flow (utilization 1, which
    is all the `adaptive` baseline sees) still gives a newcomer half of it, while a link shared by
    five gives a sixth."""
    free, capl, n = _link_lists(view, point)
    choice = []
    for cands in point.candidate_paths:
        paths = [p.tolist() for p in cands]
        rates = _path_rates(paths, free, capl, n, math.inf)
        k = max(range(len(rates)), key=rates.__getitem__)  # first of the widest: deterministic ties
        choice.append(k)
        for lk in paths[k]:
            free[lk] = max(free[lk] - rates[k], 0.0)
            n[lk] += 1.0
    return tuple(choice)


def share_splits(point: DecisionPoint, view: NetworkView) -> tuple[tuple[float, ...], ...] | None:
    """Per GPU pair, its bytes split over its candidate paths in proportion to the rate a new flow
    gets on each (`_widest_share`'s rate: per link the larger of its unused capacity and
    ``C / (n + 1)``, the slowest link of the path), this collective's earlier pairs counted (each
    adds its fraction of a flow and takes its fraction of the rate off each link of a path).

    An ablation (`HerdParams.path_metric` ``split``), measured slower than one widest path per
    pair: a split pair is one flow at one rate (`flowherd.routing.base.Routes`), so every path it
    touches must carry its fraction at that rate and the most contended one holds the whole pair
    back, where choosing puts the pair on the widest path alone."""
    if point.kind != "collective" or not point.candidate_paths or view.link_flows is None:
        return None
    free, capl, n = _link_lists(view, point)
    out = []
    for cands in point.candidate_paths:
        paths = [p.tolist() for p in cands]
        rates = _path_rates(paths, free, capl, n, 1.0)
        tot = sum(rates)
        fr = [r / tot for r in rates] if tot > 0 else [1.0 / len(paths)] * len(paths)
        out.append(tuple(fr))
        for p, f, r in zip(paths, fr, rates, strict=True):
            for lk in p:
                free[lk] = max(free[lk] - f * r, 0.0)
                n[lk] += f
    return tuple(out)


def spray_splits(point: DecisionPoint) -> tuple[tuple[float, ...], ...] | None:
    """Per GPU pair of a collective, equal fractions over its candidate paths (None without any).

    The candidates are the fabric's shortest paths (`ControlHook`), so in a leaf-spine a
    cross-leaf pair's bytes go over every spine alike: each uplink of a leaf carries the same
    share of every job's traffic, and no two flows collide on one uplink while another idles, the
    imbalance that hashing (ECMP) and any one-path-per-pair choice (CONGA-like, the `adaptive`
    baseline) leave (Dixit et al., "On the impact of packet spraying in data center networks",
    INFOCOM 2013; NVIDIA Spectrum-X's adaptive routing sprays a flow's packets over the spine).
    Fluid shares: the simulator carries no reordering cost (the RoCE NICs that spray reorder in
    hardware).
    """
    if point.kind != "collective" or not point.candidate_paths:
        return None
    return tuple(tuple(1.0 / len(c) for _ in c) for c in point.candidate_paths)


def decision_for(action: int, point: DecisionPoint, view: NetworkView,
                 params: HerdParams | None = None) -> Decision | None:
    """The `Decision` for ``ACTIONS[action]`` at ``point``: that class, buffered or not, on the
    least-loaded paths. A buffering action where buffering cannot delay starts at once.

    Raises:
        ConfigError: an action outside ``0..len(ACTIONS) - 1``.
    """
    params = params or _DEFAULT
    if isinstance(action, bool) or not isinstance(action, int | np.integer) or not 0 <= action < len(ACTIONS):
        raise ConfigError(f"action must be an int in 0..{len(ACTIONS) - 1}, got {action!r} (action)")
    cls, buffer = ACTIONS[int(action)]
    lv = view.levers
    cls = min(cls, lv.priority_classes - 1) if lv.priority_classes else None
    delay = _buffer_delay(point, view, params) if buffer and lv.delay and point.job in view.jobs else 0.0
    paths = _paths(point, view, params, cls) if lv.paths else None
    return Decision(delay_s=delay, priority=cls, path_choice=paths)


def structured_action(point: DecisionPoint, view: NetworkView, params: HerdParams | None = None) -> int:
    """The index in `ACTIONS` of this policy's choice at an agent point."""
    params = params or _DEFAULT
    cls = srpt_class(point.job, view, params.num_classes) if params.prioritize else NUM_CLASSES - 1
    if params.prioritize and params.order_overloaded_only and _offered_load(point, view) <= 1.0:
        cls = 0
    buffer = point.job in view.jobs and _delay(point, view, params) > 0
    return ACTIONS.index((cls, bool(buffer)))


@dataclass(slots=True)
class HerdController:
    """The `flowherd` policy as a `Controller` (module docstring); its interleaving part learns
    the jobs' patterns over a run (`reset` forgets them)."""

    params: HerdParams = _DEFAULT
    name: str = "flowherd"
    shifter: InterleaveController = dataclasses.field(init=False, repr=False)
    gate: BurstGate = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.shifter = InterleaveController(InterleaveParams(guard_fraction=self.params.guard_fraction))
        self.gate = BurstGate(GateParams())
        if self.params.buffering == "auto":  # one record of the traffic, whichever rule acts
            self.gate.learner = self.shifter.learner

    def reset(self, seed: int) -> None:
        """Forget the learnt patterns."""
        self.shifter.reset(seed)
        self.gate.reset(seed)

    def periods_agree(self, point: DecisionPoint) -> bool:
        """Whether the learnt period of ``point.job`` agrees with that of every job met on the
        collective's shared links whose period is learnt (once its bursts are told apart:
        `JobPattern.delimited`), within `HerdParams.period_tolerance`
        (`flowherd.control.gate.periods_agree`);
        True while its own period is not learnt (neither rule acts before it is)."""
        lr = self.shifter.learner
        p = lr.jobs.get(point.job)
        if p is None or p.period_s is None or not p.delimited:
            return True
        tol = self.params.period_tolerance
        for lk in lr.shared_links(point.job, point.link_idx).tolist():
            for other in lr.link_jobs.get(lk, ()):
                q = lr.jobs.get(other)
                if other != point.job and q is not None and q.period_s is not None and q.delimited \
                        and not periods_agree(p.period_s, q.period_s, tol):
                    return False
        return True

    def _hold_s(self, point: DecisionPoint, view: NetworkView) -> float:
        """The buffering rule's delay (`HerdParams.buffering`), recording the point."""
        mode = self.params.buffering
        if mode == "auto":
            if point.kind == "collective" and point.job is not None and point.link_idx.size > 0:
                mode = "shift" if self.periods_agree(point) else "gate"
                if mode == "shift":
                    return self._shift_measured(point, view)
            else:  # arrivals and departures: both rules' bookkeeping (one shared learner)
                if point.kind == "departure" and point.job is not None:
                    self.gate.guards.pop(point.job, None)
                return self.shifter.delay_s(point, view)
        return (self.gate if mode == "gate" else self.shifter).delay_s(point, view)

    def _shift_measured(self, point: DecisionPoint, view: NetworkView) -> float:
        """The shift rule's hold of a collective under ``auto``, filed with the gate's guard as
        the gate's own holds are: an iteration opened here is measured, a hold marks it waited,
        and a job the guard stopped shifts no more."""
        lr = self.shifter.learner
        before = lr.jobs[point.job].iterations_since_shift if point.job in lr.jobs else None
        d = self.shifter.delay_s(point, view)
        p = lr.jobs.get(point.job)
        if p is None:
            return d
        origin = before is None or p.iterations_since_shift != before  # one iteration ended
        if self.gate.file(point.job, origin=origin, held=d > 0):
            p.shifts_stopped = True
        return d

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        lv = view.levers
        shift = 0.0
        if self.params.interleave:
            shift = self._hold_s(point, view)
        classes = min(self.params.num_classes, lv.priority_classes)
        prioritize = self.params.prioritize and classes > 0
        if asks_agent(point):
            if point.job not in view.jobs:
                return Decision(delay_s=shift) if shift > 0 else None
            cls = srpt_class(point.job, view, classes) if prioritize else None
            if cls is not None and self.params.order_overloaded_only and _offered_load(point, view) <= 1.0:
                cls = 0  # the link carries every job's bytes in time: no job need wait for another
            delay = shift if shift > 0 else (_delay(point, view, self.params) if lv.delay else 0.0)
            if lv.delay and cls is None and self.params.yield_fraction > 0:  # the order, by delays
                delay = max(delay, yield_delay_s(point, view, self.shifter.learner,
                                                 self.params.yield_fraction, self.params.yield_burst))
            splits = None
            if lv.paths and cls is None and self.params.balance:
                if self.params.spray:
                    splits = spray_splits(point)
                elif self.params.path_metric == "split":
                    splits = share_splits(point, view)
            paths = _paths(point, view, self.params, cls) if lv.paths and splits is None else None
            weight = None
            if lv.weights and not lv.priority_classes and self.params.prioritize:
                weight = _srpt_weight(point, view, self.params)
            if delay <= 0 and cls is None and paths is None and splits is None and weight is None:
                return None
            return Decision(delay_s=delay, priority=cls, path_choice=paths, path_splits=splits, weight=weight)
        if point.kind == "arrival" and prioritize and point.job in view.jobs:
            return Decision(priority=srpt_class(point.job, view, classes))
        return None
