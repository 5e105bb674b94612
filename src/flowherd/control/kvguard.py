"""`kv-guard`: hold training collectives back and route them around KV-cache transfers, so that
disaggregated inference keeps its time to first token.

A KV-cache transfer sits inside a request's time to first token; a training collective does not
mind a few milliseconds (its iteration has slack, or loses a little). Under the ``buffer`` grant a
controller cannot give the transfer a higher class (no priority classes); it can only move the
training job's own traffic in time (delay) and in space (paths). At a training collective about
to start (`flowherd.cluster.control_api.NetworkView.transfers` lists the KV transfers in flight
and those whose prefill is running, with when they are expected to start):

* **Paths** (``paths``): each GPU pair of the collective takes the candidate path that carries the
  fewest KV bytes still to come (within ``lookahead_s``), ties broken by the largest rate a new
  flow gets on the path (`flowherd.control.herd`'s widest-share rule): where the fabric has a
  path the transfers do not use, the collective leaves them their links whole.
* **Hold** (``hold``): on the shared link where the most KV bytes wait (``W`` of them, capacity
  ``C``), where the collective puts ``B`` bytes and may wait ``s`` (its slack) without lengthening
  its iteration, it waits until the transfers are expected to end (each at its link's max-min
  share with the flows on it now), at most ``max_hold_s``, if and only if

      W <= max(B, s C) + alpha B,

  the optimal rule of `hold_threshold` (docs/rl-structure.md, Theorem 1: with one bottleneck and
  a cost of ``alpha`` training seconds per second of KV delay, holding is optimal exactly below
  that threshold: a transfer that ends before the collective would costs the collective nothing
  to wait for, work conservation; a long one costs it more than it saves). ``alpha`` is the
  operator's exchange rate between the two; sweeping it moves the threshold and traces the
  trade-off between the service's SLO attainment and the training jobs' completion time
  (`benchmarks/serve_protect.py`); ``alpha = inf`` always holds.

Every other decision point gets no decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView, TransferState
from flowherd.errors import ConfigError

__all__ = ["KvGuardController", "KvGuardParams", "hold_threshold", "kv_bytes_by_link", "kv_hold_s"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KvGuardParams:
    """Parameters of `KvGuardController`.

    Attributes:
        alpha: Training seconds one second of KV delay is worth: the hold threshold's weight
            (`hold_threshold`; ``math.inf``: always hold).
        hold: Hold collectives at all (False: paths only).
        max_hold_s: Longest hold of one collective, seconds.
        lookahead_s: KV transfers expected to start within this much time count, seconds.
        paths: Route each pair around the KV transfers (False: default routes).
    """

    alpha: float = 1.0
    hold: bool = True
    max_hold_s: float = 0.05
    lookahead_s: float = 0.05
    paths: bool = True

    def __post_init__(self) -> None:
        for f in ("alpha", "max_hold_s", "lookahead_s"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) or v < 0:
                raise ConfigError(f"kv-guard {f} must be a number >= 0, got {v!r} (controller.params.{f})")
        if not math.isfinite(self.max_hold_s) or not math.isfinite(self.lookahead_s):
            raise ConfigError("kv-guard max_hold_s and lookahead_s must be finite (controller.params)")
        for f in ("paths", "hold"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"kv-guard {f} must be true or false, got {getattr(self, f)!r} "
                                  f"(controller.params.{f})")


def hold_threshold(collective_bytes: float, slack_s: float, capacity_bytes_per_s: float,
                   alpha: float) -> float:
    """The largest waiting KV bytes ``W`` for which holding the collective is optimal:
    ``max(B, s C) + alpha B`` (docs/rl-structure.md, Theorem 1).

    >>> hold_threshold(100.0, 0.0, 10.0, 0.0), hold_threshold(100.0, 20.0, 10.0, 0.5)
    (100.0, 250.0)
    """
    b = float(collective_bytes)
    return max(b, float(slack_s) * float(capacity_bytes_per_s)) + (float(alpha) * b if b > 0 else 0.0)


def _upcoming(view: NetworkView, lookahead_s: float) -> list[TransferState]:
    return [x for x in view.transfers if x.started or x.start_s <= view.now_s + lookahead_s]


def kv_bytes_by_link(view: NetworkView, lookahead_s: float) -> np.ndarray:
    """``float64[L]``: KV bytes still to cross each link, of the transfers in flight or expected
    within ``lookahead_s``."""
    out = np.zeros(view.num_links)
    for x in _upcoming(view, lookahead_s):
        np.add.at(out, x.link_idx, x.link_remaining_bytes)
    return out


def kv_hold_s(links: np.ndarray, view: NetworkView, lookahead_s: float) -> float:
    """How long until the KV transfers that share ``links`` are expected to be done: per transfer,
    its expected start (now if in flight) plus its slowest shared link's remaining bytes at that
    link's max-min share with the flows on it now, the latest of them, seconds from now."""
    on = np.zeros(view.num_links, bool)
    on[np.asarray(links, dtype=np.int64)] = True
    cap = view.link_capacity_bytes_per_s
    flows = view.link_flows if view.link_flows is not None else np.zeros(view.num_links, np.int64)
    end = 0.0
    for x in _upcoming(view, lookahead_s):
        shared = on[x.link_idx]
        if not shared.any():
            continue
        lk = x.link_idx[shared]
        # the transfer's own flows are among those counted once it runs; one share per flow
        rate = cap[lk] / np.maximum(flows[lk], 1)
        t = float(np.max(x.link_remaining_bytes[shared] / rate))
        end = max(end, max(x.start_s - view.now_s, 0.0) + t)
    return end


class KvGuardController:
    """The policy of the module docstring."""

    def __init__(self, params: KvGuardParams | None = None):
        self.params = params if params is not None else KvGuardParams()
        self.name = "kv-guard"
        self.holds = 0  # collectives held since the last reset
        self.held_s = 0.0  # their holds, summed, seconds

    def reset(self, seed: int) -> None:
        """Clear the hold counters (the policy itself is stateless)."""
        self.holds, self.held_s = 0, 0.0

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        if point.kind != "collective" or point.link_idx.size == 0 or not view.transfers:
            return None
        p, lv = self.params, view.levers
        kv = kv_bytes_by_link(view, p.lookahead_s)
        if not kv.any():
            return None
        choice = None
        links = point.link_idx
        if p.paths and lv.paths and point.candidate_paths:
            choice = _around(point, view, kv)
            chosen = [c[k] for c, k in zip(point.candidate_paths, choice, strict=True)]
            links = np.unique(np.concatenate(chosen))
        delay = 0.0
        if lv.delay and p.hold:
            on = kv[links]
            k = int(np.argmax(on))
            w, link = float(on[k]), int(links[k])
            b = float(point.link_bytes[point.link_idx == link].sum()) if choice is None else \
                _bytes_on(point, choice, link)
            job = view.jobs.get(point.job) if point.job is not None else None
            slack = job.slack_s if job is not None else 0.0
            if w > 0 and w <= hold_threshold(b, slack, float(view.link_capacity_bytes_per_s[link]), p.alpha):
                delay = min(kv_hold_s(links, view, p.lookahead_s), p.max_hold_s)
        if delay <= 0 and choice is None:
            return None
        if delay > 0:
            self.holds += 1
            self.held_s += float(delay)
        return Decision(delay_s=float(delay), path_choice=choice)


def _bytes_on(point: DecisionPoint, choice: tuple[int, ...], link: int) -> float:
    """Bytes the collective puts on ``link`` with its pairs on their chosen paths (its bytes spread
    evenly over its pairs, as its default routes' per-link bytes are)."""
    per_pair = point.size_bytes / max(point.num_pairs, 1)
    pairs = zip(point.candidate_paths, choice, strict=True)
    return per_pair * sum(int(np.any(c[k] == link)) for c, k in pairs)


def _around(point: DecisionPoint, view: NetworkView, kv: np.ndarray) -> tuple[int, ...]:
    """Per pair, the candidate path with the fewest KV bytes to come, then the widest share (a new
    flow's rate on its slowest link, this collective's earlier pairs counted)."""
    cap = view.link_capacity_bytes_per_s
    flows = (view.link_flows.astype(np.float64) if view.link_flows is not None
             else np.zeros(view.num_links))
    free = np.maximum(cap * (1.0 - view.link_utilization), 0.0)
    n = flows.copy()
    choice = []
    for cands in point.candidate_paths:
        best, key = 0, None
        for k, path in enumerate(cands):
            if path.size == 0:
                rate, load = math.inf, 0.0
            else:
                rate = float(np.min(np.maximum(free[path], cap[path] / (n[path] + 1.0))))
                load = float(kv[path].sum())
            kk = (load, -rate)
            if key is None or kk < key:
                best, key = k, kk
        choice.append(best)
        path = cands[best]
        if path.size:
            r = float(np.min(np.maximum(free[path], cap[path] / (n[path] + 1.0))))
            free[path] = np.maximum(free[path] - r, 0.0)
            n[path] += 1.0
    return tuple(choice)
