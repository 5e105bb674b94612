"""A schedule's steps added to the engine as the steps they wait for end (``step`` fidelity in
memory linear in the GPUs).

Added all at once, a ring AllReduce over ``n`` GPUs is ``2(n-1)`` coflows of ``n`` flows: at
2,048 GPUs 8.4 million flows and 4.3 GB, at 4,096 a MemoryError. Here a step's coflow is added
when the last step it waits for ends (its ``on_done``), so the engine holds the steps in flight
and the finished ones' coflow records only (the engine drops finished flows,
``record_flows=False``). What a step needs is prepared once per distinct set of flows
(`flowherd.collectives.schedule.Schedule.patterns`: a ring's steps repeat one set), not per step:

* its flows' routes (the router called once per pattern);
* on the ideal network, its flows merged where that is exact: flows of one step between the
  same GPUs with the same bytes take the same route, start together and, under weighted max-min
  sharing, get the same rate; ``k`` of them are one flow of ``k`` times the bytes and ``k`` times
  the weight, which gets ``k`` times the rate on the same links and ends at the same time (to
  rounding). NCCL's channels make such flows: every ring of a server crosses the same NVLink
  pairs (`flowherd.collectives.channels`), 7 of the 8 rings on each, so an 8-GPU server's
  ring step has 24 flows instead of 72. A congestion model (`flowherd.engine.network`) sees
  flows one by one (its queues, incast, DCQCN state), so there nothing is merged;
* the coflow as a checked `CoflowBatch` of one coflow per (pattern, latency, least duration),
  added with `Engine.add_coflows` without checking it again.

The times are those of `flowherd.cluster.collective.add_schedule` at ``step`` fidelity: a step
starts at its last dependency's end plus its latency either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from flowherd.collectives.schedule import Schedule
from flowherd.engine.coflow_batch import CoflowBatch, make_flat_batch
from flowherd.engine.core import Engine
from flowherd.routing.base import Router, Routes

__all__ = ["Countdown", "StepPlan", "launch_schedule", "step_plan"]

_NO = np.zeros(0, np.int64)


class Countdown:
    """Items with dependencies (``deps[k]``: the items item ``k`` waits for) started as the
    last of them is done: `begin` starts those that wait for none, `done(k, t_s)` marks item
    ``k`` done and starts the ones it was the last wait of; ``then(t_s)`` after the last item."""

    def __init__(self, deps: Sequence[Sequence[int]], start: Callable[[int], None],
                 then: Callable[[float], None]):
        self.wait = [len(d) for d in deps]
        self.after: list[list[int]] = [[] for _ in deps]
        for k, d in enumerate(deps):
            for j in d:
                self.after[j].append(k)
        self.left = len(deps)
        self.start, self.then = start, then

    def begin(self) -> None:
        for k, w in enumerate(self.wait):
            if w == 0:
                self.start(k)

    def done(self, k: int, t_s: float) -> None:
        self.left -= 1
        for j in self.after[k]:
            self.wait[j] -= 1
            if self.wait[j] == 0:
                self.start(j)
        if self.left == 0:
            self.then(t_s)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Pattern:
    """The flows of the steps of one pattern as the engine takes them."""

    src: np.ndarray
    dst: np.ndarray
    wire_bytes: np.ndarray  # per flow, protocol overhead included (merged: the sum)
    share: np.ndarray  # per flow: how many of the schedule's flows it stands for
    routes: Routes


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StepPlan:
    """A schedule prepared for `launch_schedule` on one router.

    Attributes:
        schedule: The schedule.
        step_pattern: ``int64[steps]``: the pattern of each step.
        patterns: Per pattern, its flows (merged where exact) and their routes.
        merged: Whether identical flows were merged.
    """

    schedule: Schedule
    step_pattern: np.ndarray
    patterns: tuple[_Pattern, ...]
    merged: bool
    batches: dict[tuple, CoflowBatch] = field(default_factory=dict, repr=False)  # `_batch`'s

    @property
    def num_engine_flows(self) -> int:
        """Flows the engine runs over all steps (after merging)."""
        sizes = np.array([p.src.size for p in self.patterns], np.int64)
        return int(sizes[self.step_pattern].sum()) if sizes.size else 0


def _merge(src: np.ndarray, dst: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, ...]:
    """Flows of equal (src, dst, bytes) as one: their src, dst, bytes summed, and how many."""
    if src.size < 2:
        return src, dst, size, np.ones(src.size)
    order = np.lexsort((size, dst, src))
    s, d, z = src[order], dst[order], size[order]
    new = np.ones(s.size, bool)
    new[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1]) | (z[1:] != z[:-1])
    if new.all():
        return src, dst, size, np.ones(src.size)
    first = np.flatnonzero(new)
    count = np.diff(np.append(first, s.size)).astype(np.float64)
    keep = np.sort(order[first])  # the merged flows in the order of their first member
    rank = np.argsort(order[first])
    return src[keep], dst[keep], size[keep] * count[rank], count[rank]


def step_plan(schedule: Schedule, router: Router, *, merge: bool) -> StepPlan:
    """Routes (and, with ``merge``, merged flows) of every pattern of ``schedule`` (module
    docstring); a step's routes carry no propagation delay unless
    `Schedule.adds_path_latency`."""
    of, first = schedule.patterns()
    pats = []
    for st in first:
        src = st.src_gpu.astype(np.int64)
        dst = st.dst_gpu.astype(np.int64)
        wire = st.size_bytes / schedule.wire_fraction
        share = np.ones(src.size)
        if merge:
            src, dst, wire, share = _merge(src, dst, wire)
        if src.size:
            r = router.route(src.astype(np.int32), dst.astype(np.int32), np.zeros(src.size, np.int64))
            if not schedule.adds_path_latency:  # NCCL's step latencies hold the wire's
                r = replace(r, latency_s=np.zeros(r.num_flows))
        else:
            r = Routes.concat([])
        pats.append(_Pattern(src=src, dst=dst, wire_bytes=wire, share=share, routes=r))
    return StepPlan(schedule=schedule, step_pattern=of, patterns=tuple(pats), merged=merge)


def _batch(plan: StepPlan, p: int, latency_s: float, min_s: float, weight: float) -> CoflowBatch:
    """One step of pattern ``p`` as a checked batch of one coflow (made once per key)."""
    key = (p, latency_s, min_s, weight)
    got = plan.batches.get(key)
    if got is None:
        pat = plan.patterns[p]
        got = make_flat_batch(f_ptr=np.array([0, pat.src.size]), src=pat.src, dst=pat.dst,
                              size_bytes=pat.wire_bytes, routes=pat.routes,
                              delay_s=np.array([latency_s]), min_duration_s=np.array([min_s]),
                              deps=[()], weight=1.0, suffix=[""])
        if not np.all(pat.share == 1.0) or weight != 1.0:
            got = replace(got, weight=weight * pat.share)
        plan.batches[key] = got
    return got


def launch_schedule(engine: Engine, plan: StepPlan, *, then: Callable[[float], None],
                    at_s: float | None = None, after: Sequence[int] = (), name: str = "",
                    weight: float = 1.0, priority: int = 0) -> None:
    """Run one call of ``plan.schedule`` on ``engine`` step by step (module docstring);
    ``then(finish_s)`` is called when its last step ends.

    Args:
        engine: The engine.
        plan: From `step_plan` (for the engine's router).
        then: Called with the finish time of the call's last step.
        at_s: Earliest start, seconds (default now).
        after: Coflows that must end before its first steps start.
        name: Prefix of the steps' coflow names (``name/step{k}``).
        weight, priority: Of every flow (weighted / prioritized sharing).
    """
    steps = plan.schedule.steps
    if not steps:
        if at_s is None and not after:
            then(engine.now_s)
        else:
            engine.add_coflow(_NO, _NO, _NO, at_s=at_s, after=tuple(after), name=f"{name}/start",
                              on_done=lambda _c, t_s: then(t_s))
        return
    batched = engine._batched and priority == 0 and isinstance(weight, float | int)
    of = plan.step_pattern

    def add(k: int) -> None:
        st = steps[k]
        done = lambda _c, t_s, k=k: count.done(k, t_s)  # noqa: E731
        p = int(of[k])
        if batched:
            engine.add_coflows(_batch(plan, p, st.latency_s, st.min_transfer_s, float(weight)),
                               name=f"{name}/step{k}", on_done=done)
            return
        pat = plan.patterns[p]
        engine.add_coflow(pat.src, pat.dst, pat.wire_bytes, delay_s=st.latency_s,
                          weight=weight * pat.share, priority=priority, routes=pat.routes,
                          min_duration_s=st.min_transfer_s, name=f"{name}/step{k}", on_done=done)

    count = Countdown([st.deps for st in steps], add, then)
    if at_s is None and not after:
        count.begin()
    else:
        engine.add_coflow(_NO, _NO, _NO, at_s=at_s, after=tuple(after), name=f"{name}/start",
                          on_done=lambda _c, _t: count.begin())
