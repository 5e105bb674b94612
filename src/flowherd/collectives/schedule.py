"""`Schedule`: one collective turned into a DAG of transfer steps.

A step is a set of flows (GPU -> GPU, bytes) that start together once every step it waits
for has finished. Steps that repeat the same flows (a ring's ``2(n-1)`` steps all send ``S/n``
over the same ``n`` edges) share one set of read-only arrays, so a schedule holds each distinct
set of flows once (`Schedule.patterns`): a 4,096-GPU ring AllReduce is 8,190 steps over one
pattern of 4,096 flows, not 33.5 million flows. Chunked pipelining is expressed as more,
smaller steps with finer dependencies. A step also carries its own fixed latency (the
protocol's per-step latency, plus the collective's base latency on the steps that start it);
the simulator adds it as a delay before the step's flows start, and the network's propagation
delay on top.

Where NCCL's channels move bytes slower than the links could (their copy loops' rate,
`flowherd.collectives.calibrate`), a step also has a least duration (`Step.min_transfer_s`):
its flows send the bytes they send, at the rates the links give them, and the step does not
end before that time after it starts. Alone on the fabric the step takes that time; sharing a
link it takes its fair share of the link, as a rate-capped channel would, never more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowherd.collectives.ops import Collective
from flowherd.errors import ConfigError


def pair_index(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The distinct (src, dst) pairs as keys ``src * width + dst`` in increasing order, each
    flow's index among them, and ``width`` (one more than the largest GPU id): what
    ``np.unique(key, return_inverse=True)`` gives, without its sort where the keys are few
    enough to mark in an array (a 1,024-GPU ring's 2 million flows on 1,024 pairs: 0.3 s
    of sort for what a pass does)."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    width = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    key = src * width + dst
    if width * width <= min(max(4 * key.size, 1 << 16), 1 << 24):
        seen = np.zeros(width * width, dtype=bool)
        seen[key] = True
        rank = np.cumsum(seen, dtype=np.int64) - 1
        return np.flatnonzero(seen).astype(np.int64, copy=False), rank[key], width
    uniq, inv = np.unique(key, return_inverse=True)
    return uniq, inv.reshape(-1), width


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Step:
    """Flows that start together.

    Attributes:
        src_gpu: ``int32[k]`` sending GPU (fabric node id) of each flow.
        dst_gpu: ``int32[k]`` receiving GPU of each flow.
        size_bytes: ``float64[k]`` payload bytes of each flow (before the protocol's overhead).
        deps: Indices of earlier steps this one waits for.
        latency_s: Fixed delay before the flows start (protocol per-step latency, plus the
            base latency of the collective on its first steps).
        intra_server: Whether every flow stays inside one server (scale-up domain).
        min_transfer_s: Least time from the step's start (after `latency_s`) to its last
            byte, seconds: NCCL's channel rate over the step's busiest port
            (`flowherd.collectives.calibrate`); 0 where the links' rate is the only limit.
    """

    src_gpu: np.ndarray
    dst_gpu: np.ndarray
    size_bytes: np.ndarray
    deps: tuple[int, ...] = ()
    latency_s: float = 0.0
    intra_server: bool = False
    min_transfer_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.min_transfer_s >= 0:
            raise ConfigError(f"a step's min_transfer_s must be >= 0 seconds, got "
                              f"{self.min_transfer_s!r} (step.min_transfer_s)")
        src = np.asarray(self.src_gpu, dtype=np.int32).ravel()
        dst = np.asarray(self.dst_gpu, dtype=np.int32).ravel()
        size = np.asarray(self.size_bytes, dtype=np.float64).ravel()
        if not (len(src) == len(dst) == len(size)):
            raise ConfigError(f"a step's src_gpu, dst_gpu and size_bytes must have equal length, "
                              f"got {len(src)}, {len(dst)}, {len(size)} (step)")
        if np.any(src == dst):
            raise ConfigError("a step's flow goes from a GPU to itself (step.src_gpu == dst_gpu)")
        for name, arr in (("src_gpu", src), ("dst_gpu", dst), ("size_bytes", size)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "deps", tuple(int(d) for d in self.deps))

    def retimed(self, *, latency_s: float, min_transfer_s: float = 0.0) -> Step:
        """This step with another latency and least duration: its flows and dependencies, checked
        when it was made (read-only arrays), are shared, not checked again as
        `dataclasses.replace` would (a 512-step schedule's calibration)."""
        if not min_transfer_s >= 0:
            raise ConfigError(f"a step's min_transfer_s must be >= 0 seconds, got "
                              f"{min_transfer_s!r} (step.min_transfer_s)")
        new = object.__new__(Step)
        for name in Step.__slots__:
            object.__setattr__(new, name, getattr(self, name))
        object.__setattr__(new, "latency_s", latency_s)
        object.__setattr__(new, "min_transfer_s", min_transfer_s)
        return new

    @property
    def num_flows(self) -> int:
        return len(self.src_gpu)

    @property
    def total_bytes(self) -> float:
        return float(self.size_bytes.sum())


def steps_of(*, f_ptr: np.ndarray, src_gpu: np.ndarray, dst_gpu: np.ndarray, size_bytes: np.ndarray,
             deps: Sequence[tuple[int, ...]], latency_s: Sequence[float],
             intra_server: Sequence[bool]) -> tuple[Step, ...]:
    """Steps whose flows come as one set of arrays: step ``i`` has flows ``f_ptr[i]:f_ptr[i + 1]``,
    dependencies ``deps[i]``, latency ``latency_s[i]``. The same steps as one `Step` each,
    checked once for all flows, not once per step (a 512-step schedule: 10 ms less); each
    step's arrays are read-only views of one array.

    Raises:
        ConfigError: as `Step` (a flow from a GPU to itself, lengths that differ).
    """
    src = np.array(src_gpu, dtype=np.int32).ravel()
    dst = np.array(dst_gpu, dtype=np.int32).ravel()
    size = np.array(size_bytes, dtype=np.float64).ravel()
    ptr = np.asarray(f_ptr, dtype=np.int64)
    n = ptr.size - 1
    if not (len(src) == len(dst) == len(size)):
        raise ConfigError(f"a step's src_gpu, dst_gpu and size_bytes must have equal length, "
                          f"got {len(src)}, {len(dst)}, {len(size)} (step)")
    if (n < 0 or ptr[0] != 0 or ptr[-1] != len(src) or np.any(np.diff(ptr) < 0)
            or not len(deps) == len(latency_s) == len(intra_server) == n):
        raise ConfigError(f"f_ptr must rise from 0 to the {len(src)} flows, with deps, latency_s "
                          f"and intra_server one per step, got {ptr[:8]!r} (steps)")
    if np.any(src == dst):
        raise ConfigError("a step's flow goes from a GPU to itself (step.src_gpu == dst_gpu)")
    for arr in (src, dst, size):
        arr.setflags(write=False)
    steps = []
    bounds = ptr.tolist()
    for i in range(n):
        lo, hi = bounds[i], bounds[i + 1]
        steps.append(_checked_step(src[lo:hi], dst[lo:hi], size[lo:hi], deps[i], latency_s[i],
                                   intra_server[i]))
    return tuple(steps)


def _checked_step(src: np.ndarray, dst: np.ndarray, size: np.ndarray, deps: Sequence[int],
                  latency_s: float, intra_server: bool) -> Step:
    """A `Step` of flows its caller has checked (as `Step.__post_init__` would), without
    checking or copying them again."""
    fields = {"src_gpu": src, "dst_gpu": dst, "size_bytes": size, "deps": tuple(int(d) for d in deps),
              "latency_s": latency_s, "intra_server": intra_server, "min_transfer_s": 0.0}
    st = object.__new__(Step)
    for name in Step.__slots__:  # a field added to Step and not here: KeyError
        object.__setattr__(st, name, fields[name])
    return st


def steps_shared(*, patterns: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                 step_pattern: Sequence[int], deps: Sequence[tuple[int, ...]],
                 latency_s: Sequence[float], intra_server: Sequence[bool]) -> tuple[Step, ...]:
    """Steps whose flows are one of a few distinct sets: step ``i`` has the flows
    ``patterns[step_pattern[i]]`` (``(src_gpu, dst_gpu, size_bytes)``), dependencies ``deps[i]``,
    latency ``latency_s[i]``. Every step of a pattern holds the same read-only arrays (checked
    once per pattern), which `Schedule.patterns` finds again by identity.

    Raises:
        ConfigError: as `Step` (a flow from a GPU to itself, lengths that differ).
    """
    checked = []
    for src_gpu, dst_gpu, size_bytes in patterns:
        src = np.array(src_gpu, dtype=np.int32).ravel()
        dst = np.array(dst_gpu, dtype=np.int32).ravel()
        size = np.array(size_bytes, dtype=np.float64).ravel()
        if not (len(src) == len(dst) == len(size)):
            raise ConfigError(f"a step's src_gpu, dst_gpu and size_bytes must have equal length, "
                              f"got {len(src)}, {len(dst)}, {len(size)} (step)")
        if np.any(src == dst):
            raise ConfigError("a step's flow goes from a GPU to itself (step.src_gpu == dst_gpu)")
        for arr in (src, dst, size):
            arr.setflags(write=False)
        checked.append((src, dst, size))
    n = len(step_pattern)
    if not len(deps) == len(latency_s) == len(intra_server) == n:
        raise ConfigError(f"deps, latency_s and intra_server must have one entry per step ({n}), got "
                          f"{len(deps)}, {len(latency_s)}, {len(intra_server)} (steps)")
    steps = []
    for i in range(n):
        src, dst, size = checked[step_pattern[i]]
        steps.append(_checked_step(src, dst, size, deps[i], latency_s[i], intra_server[i]))
    return tuple(steps)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Schedule:
    """A collective's algorithm as a DAG of `Step` s (steps only wait for earlier ones).

    Attributes:
        collective: The collective this schedule implements.
        algorithm: Registry name of the algorithm.
        protocol: NCCL protocol name ("simple", "ll", "ll128"); its wire overhead is
            applied when the schedule is simulated (`wire_fraction`).
        steps: The steps, in a topological order.
        wire_fraction: Payload bytes per wire byte of the protocol (1 for Simple, 1/2 for LL,
            120/128 for LL128); the simulator sends ``size_bytes / wire_fraction``.
        rate_fraction: Payload bytes per second per byte per second of port capacity at which
            the schedule moves its bytes alone on an idle fabric: the wire fraction (None, the
            default) or, where it runs as NCCL runs it, the lower fraction of NCCL's channel
            rate (`flowherd.collectives.calibrate`). Not more bytes: a rate limit, applied as
            the steps' `Step.min_transfer_s` and the schedule's `min_transfer_s`; an estimate
            of the schedule's time alone divides its bytes by it.
        min_transfer_s: Least time of the whole schedule's bytes as one coflow (the
            ``collective`` fidelity), seconds, after its critical-path latency: its busiest
            port's payload over ``rate_fraction`` of its capacity; 0: none.
        adds_path_latency: Whether the simulator adds the network's propagation delay of each
            flow's path on top of the steps' own latencies. False when the steps carry NCCL's
            latencies (``latency_model="nccl"`` of `build_schedule`): NCCL's hop latencies
            (tuning.cc ``hwLatencies``) are measured end to end and hold the wire's delay, so
            adding the path's would count it twice. True for ``latency_model="fabric"``
            (the steps carry none: the paths' are the only latency).
    """

    collective: Collective
    algorithm: str
    protocol: str
    steps: tuple[Step, ...]
    wire_fraction: float = 1.0
    adds_path_latency: bool = True
    rate_fraction: float | None = None
    min_transfer_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        if self.rate_fraction is None:
            object.__setattr__(self, "rate_fraction", self.wire_fraction)
        for i, st in enumerate(self.steps):
            bad = [d for d in st.deps if not 0 <= d < i]
            if bad:
                raise ConfigError(f"step {i} waits for step(s) {bad}; expected earlier steps 0..{i - 1} "
                                  "(schedule.steps[i].deps)")
        if not 0 < self.wire_fraction <= 1:
            raise ConfigError(f"wire_fraction must be in (0, 1], got {self.wire_fraction} "
                              "(schedule.wire_fraction)")
        if not 0 < self.rate_fraction <= self.wire_fraction:
            raise ConfigError(f"rate_fraction must be in (0, wire_fraction = {self.wire_fraction}], "
                              f"got {self.rate_fraction} (schedule.rate_fraction)")
        if not self.min_transfer_s >= 0:
            raise ConfigError(f"min_transfer_s must be >= 0 seconds, got {self.min_transfer_s!r} "
                              "(schedule.min_transfer_s)")

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def num_flows(self) -> int:
        return sum(st.num_flows for st in self.steps)

    def patterns(self) -> tuple[np.ndarray, tuple[Step, ...]]:
        """The distinct sets of flows of the steps: ``int64[steps]`` the pattern of each step, and
        one step of each pattern (its first). Steps share a pattern when they hold the same
        arrays (`steps_shared`, and the algorithms' builder for steps that repeat their flows);
        steps with equal flows in arrays of their own are patterns of their own."""
        index: dict[tuple[int, int, int], int] = {}
        of = np.empty(len(self.steps), np.int64)
        first: list[Step] = []
        for i, st in enumerate(self.steps):
            key = (id(st.src_gpu), id(st.dst_gpu), id(st.size_bytes))
            p = index.get(key)
            if p is None:
                p = index[key] = len(first)
                first.append(st)
            of[i] = p
        return of, tuple(first)

    def total_bytes(self) -> float:
        """Payload bytes over all flows of all steps."""
        of, first = self.patterns()
        per = [st.total_bytes for st in first]  # a pattern's sum once, added step by step
        return float(sum(per[p] for p in of.tolist()))

    def sinks(self) -> list[int]:
        """Steps no other step waits for (the collective is done when all of them are)."""
        waited = {d for st in self.steps for d in st.deps}
        return [i for i in range(len(self.steps)) if i not in waited]

    def critical_path(self, step_cost_s: np.ndarray | None = None) -> tuple[float, list[int]]:
        """Longest path through the DAG.

        Args:
            step_cost_s: Cost of each step in seconds; defaults to each step's `latency_s`.

        Returns:
            The path's total cost (seconds) and its step indices, first to last.
        """
        m = len(self.steps)
        if m == 0:
            return 0.0, []
        cost = (np.array([st.latency_s for st in self.steps]) if step_cost_s is None
                else np.asarray(step_cost_s, dtype=np.float64))
        best = np.zeros(m)
        prev = np.full(m, -1, dtype=np.int64)
        for i, st in enumerate(self.steps):
            if st.deps:
                j = max(st.deps, key=lambda d: best[d])
                best[i] = best[j] + cost[i]
                prev[i] = j
            else:
                best[i] = cost[i]
        last = int(np.argmax(best))
        path = [last]
        while prev[path[-1]] >= 0:
            path.append(int(prev[path[-1]]))
        return float(best[last]), path[::-1]

    def pair_bytes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Aggregate payload per (src, dst) GPU pair over all steps (the `collective` fidelity)."""
        if not self.steps:
            z = np.zeros(0, np.int32)
            return z, z, np.zeros(0)
        uniq, width, total, _, _ = self.pair_totals()
        return (uniq // width).astype(np.int32), (uniq % width).astype(np.int32), total

    def pair_totals(self) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """The distinct pairs as keys ``src * width + dst`` (increasing), ``width``, the payload of
        each pair summed over the steps in step order (the sums ``np.bincount`` of every flow
        gives, to the last bit), the pattern of each step and, per pattern, its flows' pair
        indices (`patterns`). Memory in the patterns' flows, not the steps'."""
        of, first = self.patterns()
        p_ptr = np.cumsum([0] + [st.num_flows for st in first])
        uniq, inv, width = pair_index(np.concatenate([st.src_gpu for st in first]),
                                      np.concatenate([st.dst_gpu for st in first]))
        idx = tuple(inv[p_ptr[k]:p_ptr[k + 1]] for k in range(len(first)))
        total = np.zeros(len(uniq))
        if len(first) == len(self.steps):  # no step repeats another's flows: one pass
            return uniq, width, np.bincount(inv, weights=np.concatenate([st.size_bytes for st in first]),
                                            minlength=len(uniq)), of, idx
        distinct = [not np.any(np.diff(np.sort(ix)) == 0) for ix in idx]  # not np.unique: it imports numpy.ma
        for p in of.tolist():  # in step order, as np.bincount of all flows adds them
            if distinct[p]:
                total[idx[p]] += first[p].size_bytes
            else:
                np.add.at(total, idx[p], first[p].size_bytes)
        return uniq, width, total, of, idx
