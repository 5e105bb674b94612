"""The paths-and-delays action spaces of ``flowherd/PathsDelays-v0`` (`flowherd.rl.paths_env`).

At a collective that crosses the network (`flowherd.control.herd.asks_agent`) the agent picks a
path *option* for its GPU pairs and whether to *hold* it:

* options (`OPTIONS`): ``default`` (the routes the run's router gave it: ECMP), ``widest`` (each
  pair on its candidate path with the largest rate for a new flow, this collective's earlier
  pairs counted: `flowherd.control.herd`'s widest-share rule, Theorem 2 of docs/rl-structure.md),
  ``cand0`` .. ``cand3`` (every pair on its candidate path ``k``, modulo its number of
  candidates: on a leaf-spine, "all pairs over spine k");
* hold: wait for the *waiting bytes* on the chosen option's most shared link (KV-cache transfers
  in flight or about to start, `NetworkView.transfers`, and other jobs' coflows with bytes left
  there) to be expected done, at most half the job's period (0.05 s before it has one).

Two parameterizations of the same decisions (docs/rl-structure.md, "The learner that uses it"):

* ``paths-raw``: action ``2 * option + hold`` over `OPTIONS` in their fixed order; observation:
  per option in that order its features (`OPTION_FEATURES`), then the point's
  (`GLOBAL_FEATURES`).
* ``paths-index``: action ``2 * rank + hold`` over the options *sorted by the index of Theorem 2*
  (fewest waiting bytes, then the largest rate per pair with the collective's own pairs counted on
  each link, `own_rate`, then the largest rate for a new flow; rank 0 is the index policy's
  choice); observation: per option in rank order its features, the point's, and the raw position
  of the rank-0 option. The feature ``wait_over_threshold`` is ``W / theta`` of Theorem 1 (holding
  is optimal in the model below 1).

Per option, ``rate_over_capacity`` is the rate one new flow gets on the option's slowest link
(``max(U, C / (n + 1))``), ``own_rate_over_capacity`` the rate each of the collective's pairs gets
there with the option's own pairs on each link counted (`own_rate`): an option that puts every
pair over one spine shows the first as wide as the per-pair widest choice, the second divided by
its pairs on that spine.

Both: options that would make the same routes as an earlier one, or that do not exist (fewer
candidates), are masked; hold is masked when nothing waits. `prepare` returns the observation,
the mask, the *default* action (``warm``: ``none``, no control; or ``index``, the structure's
rule: rank 0, hold iff ``0 < W <= theta``) and a context; `decide` makes the `Decision`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.herd import _widest_share
from flowherd.control.kvguard import hold_threshold
from flowherd.errors import ConfigError

__all__ = ["GLOBAL_FEATURES", "NUM_ACTIONS", "OPTIONS", "OPTION_FEATURES", "PATH_SPACES", "WARM",
           "PathsContext", "PathsRuleController", "decide", "distinct", "obs_dim", "own_rate", "prepare"]

OPTIONS = ("default", "widest", "cand0", "cand1", "cand2", "cand3")
OPTION_FEATURES = ("valid", "rate_over_capacity", "utilization", "wait_over_bytes", "wait_over_threshold",
                   "own_rate_over_capacity")
GLOBAL_FEATURES = ("log_size", "slack_over_period", "log_period", "running_jobs", "pairs_per_option")
PATH_SPACES = ("paths-raw", "paths-index")
WARM = ("none", "index")
NUM_ACTIONS = 2 * len(OPTIONS)
OBS_BOUND = 10.0
_MAX_HOLD_FRACTION = 0.5
_NO_PERIOD_HOLD_S = 0.05


def obs_dim(space: str) -> int:
    """Length of the observation of ``space``.

    Raises:
        ConfigError: an unknown space.
    """
    if space not in PATH_SPACES:
        raise ConfigError(f"paths action space must be one of {PATH_SPACES}, got {space!r} (actions)")
    n = len(OPTIONS) * len(OPTION_FEATURES) + len(GLOBAL_FEATURES)
    return n + (1 if space == "paths-index" else 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class PathsContext:
    """What `prepare` computed at a point, for `decide`.

    Attributes:
        choices: Per option its path choice (None: the default routes), in `OPTIONS` order.
        valid: Per option whether it exists and differs from every earlier one.
        order: Option indices by rank (the index of Theorem 2); ``order[0]`` is rank 0.
        hold_s: Per option the hold a "hold" action gives, seconds (0: nothing waits).
    """

    choices: tuple[tuple[int, ...] | None, ...]
    valid: np.ndarray
    order: tuple[int, ...]
    hold_s: np.ndarray


def _option_choices(point: DecisionPoint, view: NetworkView) -> tuple[list, np.ndarray]:
    cands = point.candidate_paths
    choices: list[tuple[int, ...] | None] = [None] * len(OPTIONS)
    valid = np.zeros(len(OPTIONS), bool)
    valid[0] = True
    if not cands or not view.levers.paths:
        return choices, valid
    most = max(len(c) for c in cands)
    seen: set[tuple[int, ...]] = set()
    if view.link_flows is not None:
        choices[1] = _widest_share(point, view)
    for k in range(len(OPTIONS) - 2):
        if k < most:
            choices[2 + k] = tuple(k % len(c) for c in cands)
    for i in range(1, len(OPTIONS)):
        ch = choices[i]
        if ch is not None and ch not in seen:
            valid[i] = True
            seen.add(ch)
    return choices, valid


def _links(point: DecisionPoint, choice) -> tuple[np.ndarray, np.ndarray]:
    """The links an option loads and its bytes on each (default routes: the point's own)."""
    if choice is None:
        return point.link_idx, point.link_bytes
    per_pair = point.size_bytes / max(point.num_pairs, 1)
    paths = [c[k] for c, k in zip(point.candidate_paths, choice, strict=True)]
    allp = np.concatenate(paths) if paths else np.zeros(0, np.int64)
    lk, counts = np.unique(allp, return_counts=True)
    return lk, counts * per_pair


def own_rate(free: np.ndarray, cap: np.ndarray, flows: np.ndarray, own: np.ndarray) -> float:
    """The rate each of the collective's pairs gets on the most constraining of its links, its own
    pairs counted: on a link with ``n`` flows of others and ``m`` of the option's own pairs, the
    larger of an equal part of the unused capacity, ``U / m``, and the max-min share ``C / (n + m)``
    (docs/rl-structure.md, Theorem 2 under A8'). With one own pair per link it is the rate a new
    flow gets, ``max(U, C / (n + 1))``; ``m`` pairs on one link divide it ``m`` ways.

    >>> own_rate(np.array([0.0]), np.array([100.0]), np.array([1.0]), np.array([4.0]))
    20.0
    """
    m = np.maximum(own, 1.0)
    return float(np.min(np.maximum(free / m, cap / (flows + m))))


def _waiting(point: DecisionPoint, view: NetworkView) -> tuple[np.ndarray, list]:
    """Per link the bytes of others waiting to cross it (KV transfers and other jobs' coflows), and
    the items as (expected start, link_idx, link_remaining_bytes) for the hold time."""
    w = np.zeros(view.num_links)
    items = []
    for x in view.transfers:
        np.add.at(w, x.link_idx, x.link_remaining_bytes)
        items.append((x.start_s if not x.started else view.now_s, x.link_idx, x.link_remaining_bytes))
    for c in view.coflows:
        if c.job == point.job or c.job is None:
            continue
        np.add.at(w, c.link_idx, c.link_remaining_bytes)
        items.append((view.now_s, c.link_idx, c.link_remaining_bytes))
    return w, items


def _hold_s(links: np.ndarray, items: list, view: NetworkView) -> float:
    on = np.zeros(view.num_links, bool)
    on[links] = True
    cap = view.link_capacity_bytes_per_s
    flows = view.link_flows if view.link_flows is not None else np.zeros(view.num_links, np.int64)
    end = 0.0
    for start, lk, rem in items:
        shared = on[lk]
        if shared.any():
            rate = cap[lk[shared]] / np.maximum(flows[lk[shared]], 1)
            end = max(end, max(start - view.now_s, 0.0) + float(np.max(rem[shared] / rate)))
    return end


def prepare(space: str, point: DecisionPoint, view: NetworkView, *,
            warm: str = "none") -> tuple[np.ndarray, np.ndarray, int, PathsContext]:
    """Observation, action mask, default action (``warm``) and context at an agent point."""
    obs_dim(space)
    if warm not in WARM:
        raise ConfigError(f"warm must be one of {WARM}, got {warm!r} (warm)")
    choices, valid = _option_choices(point, view)
    wait, items = _waiting(point, view)
    job = view.jobs.get(point.job) if point.job is not None else None
    period = (job.period_s or job.solo_period_s) if job is not None else None
    slack = job.slack_s if job is not None else 0.0
    cap = view.link_capacity_bytes_per_s
    flows = view.link_flows.astype(np.float64) if view.link_flows is not None else np.zeros(view.num_links)
    free = np.maximum(cap * (1.0 - view.link_utilization), 0.0)
    feats = np.zeros((len(OPTIONS), len(OPTION_FEATURES)), np.float32)
    hold_s = np.zeros(len(OPTIONS))
    rate = np.zeros(len(OPTIONS))
    own = np.zeros(len(OPTIONS))
    per_pair = point.size_bytes / max(point.num_pairs, 1)
    wait_o = np.full(len(OPTIONS), np.inf)
    ratio = np.full(len(OPTIONS), np.inf)
    max_hold = _MAX_HOLD_FRACTION * period if period else _NO_PERIOD_HOLD_S
    for i in range(len(OPTIONS)):
        if not valid[i]:
            continue
        lk, b = _links(point, choices[i])
        if lk.size == 0:
            continue
        r = np.maximum(free[lk], cap[lk] / (flows[lk] + 1.0))
        rate[i] = float(r.min())
        own[i] = own_rate(free[lk], cap[lk], flows[lk], b / per_pair if per_pair > 0 else np.ones(lk.size))
        k = int(np.argmax(wait[lk]))
        wait_o[i] = float(wait[lk].sum())
        theta = hold_threshold(float(b[k]), slack, float(cap[lk[k]]), 1.0)
        ratio[i] = float(wait[lk[k]]) / theta if theta > 0 else 0.0
        if view.levers.delay and wait[lk[k]] > 0:
            hold_s[i] = min(_hold_s(lk, items, view), max_hold)
        feats[i] = (1.0, rate[i] / float(cap[lk].max()), float(view.link_utilization[lk].max()),
                    min(wait_o[i] / max(point.size_bytes, 1.0), OBS_BOUND), min(ratio[i], OBS_BOUND),
                    own[i] / float(cap[lk].max()))
    order = tuple(sorted(range(len(OPTIONS)), key=lambda i: (not valid[i], wait_o[i], -own[i], -rate[i], i)))
    glob = np.array([math.log10(max(point.size_bytes, 1.0)) / 10.0,
                     min(slack / period, 1.0) if period else 0.0,
                     math.log10(max(period, 1e-4)) / 4.0 + 1.0 if period else 0.0,
                     min(len(view.jobs) / 32.0, 2.0),
                     min(point.num_pairs / 64.0, 2.0)], np.float32)
    if space == "paths-raw":
        obs = np.concatenate([feats.ravel(), glob])
        pos = list(range(len(OPTIONS)))
    else:
        obs = np.concatenate([feats[list(order)].ravel(), glob, [order[0] / (len(OPTIONS) - 1)]])
        pos = list(order)
    mask = np.zeros(NUM_ACTIONS, bool)
    for slot, i in enumerate(pos):
        if valid[i]:
            mask[2 * slot] = True
            mask[2 * slot + 1] = hold_s[i] > 0
    if warm == "none":
        default = 2 * pos.index(0)
    else:
        best = order[0]
        hold = hold_s[best] > 0 and ratio[best] <= 1.0
        default = 2 * pos.index(best) + int(hold)
    ctx = PathsContext(choices=tuple(choices), valid=valid, order=order, hold_s=hold_s)
    return np.clip(obs, -OBS_BOUND, OBS_BOUND).astype(np.float32), mask, int(default), ctx


def distinct(mask: np.ndarray) -> int:
    """How many different decisions the allowed actions make (each action is one)."""
    return int(np.asarray(mask, bool).sum())


def decide(space: str, action: int, ctx: PathsContext) -> Decision | None:
    """The `Decision` of ``action`` in ``space`` (with `prepare`'s context).

    Raises:
        ConfigError: an action outside the space.
    """
    obs_dim(space)
    if isinstance(action, bool) or not isinstance(action, int | np.integer) or not 0 <= action < NUM_ACTIONS:
        raise ConfigError(f"action must be an int in 0..{NUM_ACTIONS - 1}, got {action!r} (action)")
    slot, hold = divmod(int(action), 2)
    i = slot if space == "paths-raw" else ctx.order[slot]
    if not ctx.valid[i]:
        i = 0
    delay = float(ctx.hold_s[i]) if hold else 0.0
    choice = ctx.choices[i]
    if choice is None and delay <= 0:
        return None
    return Decision(delay_s=delay, path_choice=choice)


class PathsRuleController:
    """The ``warm`` policy of a paths space as a `Controller`: at every agent point its default
    action (``none``: no control; ``index``: the rule of docs/rl-structure.md), else no decision.

    >>> PathsRuleController(warm="index").name
    'paths-index-rule'
    """

    def __init__(self, *, space: str = "paths-index", warm: str = "index"):
        obs_dim(space)
        if warm not in WARM:
            raise ConfigError(f"warm must be one of {WARM}, got {warm!r} (warm)")
        self.space, self.warm = space, warm
        self.name = f"paths-{warm}-rule"

    def reset(self, seed: int) -> None:
        """Stateless."""

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        from flowherd.control.herd import asks_agent

        if not asks_agent(point):
            return None
        _obs, _mask, default, ctx = prepare(self.space, point, view, warm=self.warm)
        return decide(self.space, default, ctx)
