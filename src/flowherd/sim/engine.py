"""The flow-level discrete-event engine.

Coflows (sets of flows that start together; the unit a collective step or a compute phase is
made of) are added with dependencies; flows share links at their max-min fair rates
(`flowherd.sim.fairshare`), recomputed whenever flows start or end. Between events rates are
constant, so nothing is simulated but the events themselves:

* a flow's remaining bytes are kept lazily (bytes left at the time its rate last changed), so
  an event touches only the flows whose rate it changes;
* an event recomputes only the rates it can change: every active flow keeps a pointer to a
  bottleneck link of its own, and the flows re-allocated grow from the ones that started, by
  the flows whose bottleneck the change broke, until every flow has one again
  (`flowherd.sim.bottleneck`); by the bottleneck characterization of max-min fairness the result
  is the max-min allocation of all active flows (tests compare it with a full recomputation at
  every event, to a rounding of the link capacity), at the cost of the part of the network that
  changes. Per-link buckets of the active flows make finding that part cost only its size. The
  earlier rule (every flow coupled over saturated links, above the event's threshold level,
  `flowherd.sim.allocation.reallocate`) stays selectable as ``_rule = "closure"``;
* events that fall at the same instant (a collective step starts many flows at once; equal
  flows end together) are processed as one batch with one rate update;
* per-link bytes are credited when a flow's rate changes or it ends, and per-link busy time
  is kept by counting flows with a positive rate on each link.

Flow completions closer together than a relative ``1e-12`` of the clock are taken as
simultaneous (the later ones end up to that much early).
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from flowherd.errors import ConfigError, SimulationError
from flowherd.fabric.core import Fabric
from flowherd.routing.base import Router, Routes
from flowherd.sim.allocation import (
    NO_CLASS,
    NO_THRESHOLD,
    LinkState,
    arrival_threshold,
    reallocate,
    threshold,
)
from flowherd.sim.bottleneck import reallocate_local
from flowherd.sim.coflow_input import as_1d, check_flows, check_routes, check_timing, check_weight
from flowherd.sim.incidence import FLOW_COLUMNS, Grow, buckets_add, compact_flows, ranges
from flowherd.sim.input_memo import InputMemo
from flowherd.sim.network import NetworkConfig, NetworkModel, current_network
from flowherd.sim.results import SimResult
from flowherd.sim.step_kernels import count_off, end_flows, soonest, split_done, start_flows

__all__ = ["Engine"]

log = logging.getLogger(__name__)

_TIME_RTOL = 1e-12
_RELEASE, _DONE = 0, 1
_NO_I = np.zeros(0, np.int64)


class Engine:
    """Flow-level discrete-event simulator of coflows sharing a fabric at max-min fair rates.

    One mutable object per run. Add coflows (before or during `run`, e.g. from an ``on_done``
    callback), run to a time or to the end, take a `SimResult` snapshot. With
    ``record_flows=False`` the flows that are over are dropped from memory now and then, so
    a long run holds only its active and not-yet-started flows.

    >>> from flowherd.fabric.generators import leaf_spine
    >>> from flowherd.routing.base import Routes
    >>> fab = leaf_spine(servers=2, leaves=1, spines=1)
    >>> eng = Engine(fab, router=None)
    >>> one_link = Routes(ptr=np.array([0, 1]), link=np.array([0]), frac=np.array([1.0]),
    ...                   latency_s=np.array([0.0]))
    >>> c = eng.add_coflow(0, 1, 64e9, routes=one_link)  # link 0 is GPU 0's PCIe, 64 GB/s
    >>> eng.run()
    >>> eng.coflow_finish_s(c)
    1.0
    """

    # the rate update: "bottleneck" (`flowherd.sim.bottleneck`) or the earlier "closure" rule
    _rule = "bottleneck"

    def __init__(self, fabric: Fabric, router: Router | None, *, record_flows: bool = True,
                 completion_rtol: float = 0.0, network: NetworkConfig | None = None):
        """Args:
        fabric: The network.
        router: Routes flows of coflows added without ``routes=``.
        record_flows: Keep per-flow records in `result` (per-coflow and per-link ones are
            always kept).
        completion_rtol: 0 (default) is exact. Otherwise the approximate mode: at every event,
            the flows whose remaining transmission time is at most ``completion_rtol`` times
            the time since they started end too, in the same batch and rate update. A flow's
            own end is then early by at most ``completion_rtol`` of its duration (coflow starts
            are never moved); the flows sharing links with it follow the capacity it frees.
            `benchmarks/engine.py` measures the error in completion times against exact.
        network: The congestion model (`flowherd.sim.network`); default: the one set by
            `flowherd.sim.network.use_network`, else ``ideal`` (no model at all).
        """
        if not (0 <= completion_rtol < 1):
            raise ConfigError(f"completion_rtol must lie in [0, 1), got {completion_rtol!r} "
                              "(completion_rtol)")
        self.fabric = fabric
        self.router = router
        self.record_flows = record_flows
        self.completion_rtol = float(completion_rtol)
        num_links = fabric.num_directed_links
        # NETWORK HOOK 1/4: a congestion model other than ideal gives the links' payload capacity
        net = network if network is not None else current_network()
        self.network = None if net is None or net.ideal else NetworkModel(net, fabric)
        self._ls = LinkState(fabric.link_capacity_bytes_per_s if self.network is None else self.network.cap)
        self._now = 0.0
        self._f = Grow(FLOW_COLUMNS)
        self._links = Grow({"link": (np.int64, 0), "frac": (np.float64, 0.0), "pos": (np.int64, 0)})
        self._active = np.zeros(0, np.int64)
        # flow arrays, Routes and routed pairs already checked (`flowherd.sim.input_memo`)
        self._memo = InputMemo(fabric.num_gpus, num_links)
        # per coflow (python lists: touched once or twice per coflow, never per flow)
        self._c_name: list[str] = []
        self._c_flow_lo: list[int] = []
        self._c_flow_hi: list[int] = []
        self._c_base: list[float] = []
        self._c_delay: list[float] = []
        self._c_min: list[float] = []  # least duration (start to finish), seconds
        self._c_after: list[tuple[int, ...]] = []
        self._c_waiting: list[int] = []
        self._c_dependents: list[list[int] | None] = []  # None: no dependents (yet)
        self._c_start: list[float] = []
        self._c_finish: list[float] = []
        # flows left and latest flow finish, as arrays: counted off in compiled code
        self._c = Grow({"left": (np.int64, 0), "last": (np.float64, math.nan)})
        self._c_on_done: list[Callable[[int, float], None] | None] = []
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        # per-link buckets of the active flows (their incidences), in one pool
        self._b_start = np.zeros(num_links, np.int64)
        self._b_len = np.zeros(num_links, np.int64)  # also: active flows on the link, any rate
        self._b_cap = np.zeros(num_links, np.int64)
        self._b_flow = np.zeros(1024, np.int64)
        self._b_inc = np.zeros(1024, np.int64)
        self._b_used = 0
        self._running = False
        self.num_events = 0
        self.num_rate_updates = 0
        self.num_allocation_passes = 0  # max-min computations (a rate update may take several)
        self.num_flows_reallocated = 0  # sum over the passes of the flows re-allocated
        # without flow records, finished flows are dropped from the arrays now and then
        self._pending: set[int] = set()  # coflows added, not yet started
        self._dead = 0  # flows over (finished or instant) still in the arrays
        self._compact_min = 1 << 16
        self._load_refresh_at = 1 << 14

    # ---- public API ----------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        """The simulation clock, in seconds."""
        return self._now

    @property
    def num_coflows(self) -> int:
        return len(self._c_name)

    @property
    def num_active_flows(self) -> int:
        """Flows transmitting now."""
        return int(self._active.size)

    def add_coflow(self, src, dst, size_bytes, *, at_s: float | None = None, after: Sequence[int] = (),
                   delay_s: float = 0.0, weight: float = 1.0, priority: int = 0,
                   routes: Routes | None = None, key=None, name: str = "",
                   on_done: Callable[[int, float], None] | None = None,
                   min_duration_s: float = 0.0) -> int:
        """Add a coflow: flows ``src[i] -> dst[i]`` of ``size_bytes[i]`` that start together.

        It starts at ``max(at_s (default: now), finish of every coflow in after) + delay_s``
        (never before now) and finishes when the last byte of its last flow arrives, but not
        before ``min_duration_s`` after its start; with no flows it is a pure delay.

        Args:
            src, dst: GPU node ids (arrays or scalars, broadcast to one length).
            size_bytes: Bytes of each flow (array or scalar), >= 0.
            at_s: Earliest start, absolute seconds.
            after: Ids of coflows that must finish first.
            delay_s: Added after the later of ``at_s`` and the dependencies, seconds.
            weight: Weighted max-min share of every flow of the coflow, > 0 (or one per flow).
            priority: Strict priority class, lower served first.
            routes: The flows' routes as given (one row per flow); default ``router.route``
                (remembered by the pairs and keys: the same pairs are not routed twice).
            key: ECMP hash input of each flow (default 0: one connection per GPU pair).
            name: For reports.
            on_done: Called as ``on_done(coflow_id, finish_s)`` when the coflow finishes; may
                add coflows.
            min_duration_s: Least time from start to finish, seconds (a rate-limited sender's
                pace, `flowherd.collectives.schedule.Step.min_transfer_s`); its flows keep the
                rates the links give them.

        Returns:
            The coflow id (0, 1, 2, ... in add order).

        Raises:
            ConfigError: a negative or non-finite size, time or weight, lengths that do not
                match, an unknown ``after`` id, a GPU id out of range, malformed routes.
        """
        cid = len(self._c_name)
        what = f"coflow {cid}"
        if (type(src) is np.ndarray and type(dst) is np.ndarray and type(size_bytes) is np.ndarray
                and src.size == 0 and dst.size == 0 and size_bytes.size == 0 and src.ndim == 1
                and dst.ndim == 1 and size_bytes.ndim == 1):
            # a pure delay (compute phases, markers: most coflows of a cluster run)
            src_a = dst_a = _NO_I
            size_a = np.zeros(0)
            if not (type(weight) is float and weight == 1.0):
                check_weight(weight, 0, what)
        else:
            src_a, dst_a, size_a = self._memo.flows(src, dst, size_bytes, weight, what)
        n = src_a.size
        check_timing(at_s, delay_s, priority, what)
        if min_duration_s != 0.0 and not (math.isfinite(min_duration_s) and min_duration_s >= 0):
            raise ConfigError(f"min_duration_s must be finite and >= 0, got {min_duration_s!r} "
                              f"(min_duration_s of {what})")
        if self.network is not None:  # NETWORK HOOK 2/4: controller classes -> port queues
            priority = self.network.port_class(priority)
        after_t = (() if type(after) is tuple and not after
                   else tuple(int(a) for a in np.atleast_1d(np.asarray(after, dtype=np.int64))))
        for a in after_t:
            if not 0 <= a < cid:
                raise ConfigError(f"after names unknown coflow {a}, expected ids in 0..{cid - 1} "
                                  f"(after of coflow {cid})")
        if routes is not None:
            lnk, frc, ptr, lat = self._memo.routes(routes, n, what)
        elif n == 0:
            lnk, frc, ptr, lat = _NO_I, np.zeros(0), np.zeros(1, np.int64), np.zeros(0)
        else:
            if self.router is None:
                raise ConfigError(f"coflow {cid} has flows but no routes and the engine has no "
                                  "router (routes)")
            key_a = (np.zeros(n, np.int64) if key is None
                     else np.broadcast_to(as_1d("key", key, np.int64), (n,)).copy())
            lnk, frc, ptr, lat = self._memo.route(self.router, src_a, dst_a, key_a, what)

        # store the flows
        fs = self._f.extend(n)
        f = self._f
        if n:
            ls = self._links.extend(lnk.size)
            f.coflow[fs] = cid
            f.src[fs] = src_a
            f.dst[fs] = dst_a
            f.size[fs] = size_a
            f.lat[fs] = lat
            f.weight[fs] = weight
            f.prio[fs] = int(priority)
            f.lo[fs] = ptr[:-1] + ls.start
            f.hi[fs] = ptr[1:] + ls.start
            self._links.link[ls] = lnk
            self._links.frac[ls] = frc

        self._c_name.append(name)
        self._c_flow_lo.append(fs.start)
        self._c_flow_hi.append(fs.stop)
        self._c_base.append(self._now if at_s is None else float(at_s))
        self._c_delay.append(float(delay_s))
        self._c_min.append(float(min_duration_s))
        self._c_after.append(after_t)
        self._c_dependents.append(None)
        self._c_start.append(math.nan)
        self._c_finish.append(math.nan)
        self._c.extend(1)
        self._c_on_done.append(on_done)
        self._pending.add(cid)
        waiting = 0
        for a in set(after_t) if len(after_t) > 1 else after_t:
            if math.isnan(self._c_finish[a]):
                waiting += 1
                deps = self._c_dependents[a]
                if deps is None:
                    self._c_dependents[a] = [cid]
                else:
                    deps.append(cid)
        self._c_waiting.append(waiting)
        if waiting == 0:
            self._schedule_release(cid)
        return cid

    def add_flows(self, src, dst, size_bytes, *, at_s, routes: Routes, name: str = "") -> np.ndarray:
        """Add F coflows of one flow each at once (e.g. background traffic): flow ``i`` is its
        own coflow, starting at ``at_s[i]``; one check and one copy for the batch.

        The same as F calls of ``add_coflow(src[i], dst[i], size_bytes[i], at_s=at_s[i],
        routes=<row i of routes>, name=name)``, with the same ids and results.

        Args:
            src, dst: ``int[F]`` GPU node ids.
            size_bytes: ``float[F]`` bytes, >= 0.
            at_s: ``float[F]`` start times, seconds, finite and >= 0.
            routes: One row per flow.
            name: Name of every coflow.

        Returns:
            ``int64[F]``: the coflow ids (consecutive).
        """
        c0 = len(self._c_name)
        what = f"coflows {c0}.. (add_flows)"
        src_a, dst_a, size_a = check_flows(src, dst, size_bytes, self.fabric.num_gpus, what)
        n = src_a.size
        at_a = np.broadcast_to(as_1d("at_s", at_s, np.float64), (n,))
        bad = np.flatnonzero(~np.isfinite(at_a) | ~(at_a >= 0))
        if bad.size:
            raise ConfigError(f"at_s must be finite times >= 0, got {float(at_a[bad[0]])!r} "
                              f"(at_s[{bad[0]}] of {what})")
        lnk, frc, ptr, lat = check_routes(routes, n, self.fabric.num_directed_links, what)
        ids = np.arange(c0, c0 + n, dtype=np.int64)
        fs = self._f.extend(n)
        ls = self._links.extend(lnk.size)
        f = self._f
        f.coflow[fs] = ids
        f.src[fs] = src_a
        f.dst[fs] = dst_a
        f.size[fs] = size_a
        f.lat[fs] = lat
        f.weight[fs] = 1.0
        f.prio[fs] = 0 if self.network is None else self.network.port_class(0)
        f.lo[fs] = ptr[:-1] + ls.start
        f.hi[fs] = ptr[1:] + ls.start
        self._links.link[ls] = lnk
        self._links.frac[ls] = frc
        flow_ids = range(fs.start, fs.stop)
        self._c_name.extend([name] * n)
        self._c_flow_lo.extend(flow_ids)
        self._c_flow_hi.extend(range(fs.start + 1, fs.stop + 1))
        base = at_a.tolist()
        self._c_base.extend(base)
        self._c_delay.extend([0.0] * n)
        self._c_min.extend([0.0] * n)
        self._c_after.extend([()] * n)
        self._c_dependents.extend([None] * n)
        self._c_start.extend([math.nan] * n)
        self._c_finish.extend([math.nan] * n)
        self._c.extend(n)
        self._c_on_done.extend([None] * n)
        self._c_waiting.extend([0] * n)
        self._pending.update(ids.tolist())
        now = self._now
        for cid, t in zip(ids.tolist(), base, strict=True):
            self._push(max(t + 0.0, now), _RELEASE, cid)
        return ids

    def run(self, until_s: float | None = None) -> None:
        """Process events up to ``until_s`` (inclusive) or, if None, until none are left.

        Raises:
            SimulationError: flows are left that can never finish, or `run` was called from
                inside a callback.
        """
        if self._running:
            raise SimulationError("Engine.run called from inside an on_done callback; add "
                                  "coflows there instead")
        if until_s is not None and not (until_s >= self._now and math.isfinite(until_s)):
            raise ConfigError(f"until_s must be a finite time >= now ({self._now}), got {until_s!r} "
                              "(until_s)")
        self._running = True
        try:
            while True:
                t_flow = self._next_flow_end()
                t_heap = self._heap[0][0] if self._heap else math.inf
                t = min(t_flow, t_heap)
                if t == math.inf:
                    if self._active.size:
                        raise SimulationError(
                            f"{self._active.size} flows have rate 0 and nothing is left that could "
                            f"free capacity for them at t={self._now} s (e.g. flow "
                            f"{int(self._active[0])}); check link capacities and priorities")
                    break
                if until_s is not None and t > until_s:
                    break
                self._step(max(t, self._now))
        finally:
            self._running = False
        if until_s is not None:
            self._now = max(self._now, until_s)

    def coflow_finish_s(self, coflow: int) -> float | None:
        """When coflow ``coflow`` finished (seconds), or None if it has not (yet)."""
        if not 0 <= coflow < len(self._c_finish):
            raise ConfigError(f"unknown coflow {coflow}, expected 0..{len(self._c_finish) - 1} "
                              "(coflow)")
        t = self._c_finish[coflow]
        return None if math.isnan(t) else t

    def coflow_start_s(self, coflow: int) -> float | None:
        """When coflow ``coflow`` started (seconds), or None if it has not (yet)."""
        if not 0 <= coflow < len(self._c_start):
            raise ConfigError(f"unknown coflow {coflow}, expected 0..{len(self._c_start) - 1} "
                              "(coflow)")
        t = self._c_start[coflow]
        return None if math.isnan(t) else t

    def link_load_bytes_per_s(self) -> np.ndarray:
        """``float64[L]``: the current total rate on each directed link (a copy)."""
        return np.maximum(self._ls.load, 0.0)

    def link_bytes_now(self) -> np.ndarray:
        """``float64[L]``: bytes each directed link has carried up to now, active flows included
        (the ``link_bytes`` of `result`, without its per-flow copies)."""
        f = self._f
        link_bytes = self._ls.bytes.copy()
        act = self._active
        if act.size:  # bytes sent since the active flows' last settle
            sent = np.minimum(f.rate[act] * (self._now - f.t0[act]), f.rem[act])
            lens = f.hi[act] - f.lo[act]
            idx = ranges(f.lo[act], f.hi[act])
            link_bytes += np.bincount(self._links.link[idx], weights=self._links.frac[idx] *
                                      np.repeat(sent, lens), minlength=link_bytes.size)
        return link_bytes

    def active_flows_on(self, links: np.ndarray) -> int:
        """How many active flows cross the directed links ``links`` (a flow counts once per link)."""
        return int(self._b_len[np.asarray(links, dtype=np.int64)].sum())

    def result(self) -> SimResult:
        """A snapshot of the records so far (safe to call mid-run; the engine keeps running)."""
        f = self._f
        n = f.count
        busy = self._ls.busy_s.copy()
        on = self._ls.nact > 0
        busy[on] += self._now - self._ls.busy_since[on]
        link_bytes = self.link_bytes_now()
        finish = np.array(self._c_finish, dtype=np.float64)
        rec = self.record_flows
        return SimResult(
            now_s=self._now,
            flow_coflow=f.coflow[:n].copy() if rec else None,
            flow_src=f.src[:n].copy() if rec else None,
            flow_dst=f.dst[:n].copy() if rec else None,
            flow_size_bytes=f.size[:n].copy() if rec else None,
            flow_start_s=f.start[:n].copy() if rec else None,
            flow_finish_s=f.finish[:n].copy() if rec else None,
            coflow_name=tuple(self._c_name),
            coflow_start_s=np.array(self._c_start, dtype=np.float64),
            coflow_finish_s=finish,
            link_bytes=link_bytes,
            link_busy_s=busy,
            makespan_s=float(np.nanmax(finish)) if np.any(~np.isnan(finish)) else 0.0,
            num_events=self.num_events,
            num_rate_updates=self.num_rate_updates,
        )

    # ---- internals -----------------------------------------------------------------------
    def _push(self, t: float, kind: int, cid: int) -> None:
        heapq.heappush(self._heap, (t, self._seq, kind, cid))
        self._seq += 1

    def _schedule_release(self, cid: int) -> None:
        start = self._c_base[cid]
        for a in self._c_after[cid]:
            start = max(start, self._c_finish[a])
        start = max(start + self._c_delay[cid], self._now)
        self._push(start, _RELEASE, cid)

    def _next_flow_end(self) -> float:
        return soonest(self._active, self._f.txend) if self._active.size else math.inf

    def _step(self, now: float) -> None:
        """Process every event at ``now`` as one batch, then update rates once."""
        self._now = now
        f = self._f
        links = self._links
        ls = self._ls
        done = _NO_I
        p_done, t_done = NO_CLASS, math.inf
        act = self._active
        if act.size:
            done, keep = split_done(act, f.txend, f.start, now, _TIME_RTOL * abs(now),
                                    self.completion_rtol)
            if done.size:
                self._active = keep
                # their lowest (class, level) before they end (the closure rule's threshold)
                p_done, t_done = end_flows(
                    done, now, f.rate, f.weight, f.prio, f.rem, f.t0, f.lo, f.hi, links.link,
                    links.frac, ls.bytes, ls.nact, ls.load, ls.busy_since, ls.busy_s, links.pos,
                    self._b_start, self._b_len, self._b_flow, self._b_inc, f.txend, f.finish, f.lat)
                if self.network is not None:  # NETWORK HOOK 3/4: link state after departures
                    self.network.on_done(self, done, now)
                self._dead += done.size
                self.num_events += done.size
                self._flows_done(done)
        started: list[np.ndarray] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            t, _, kind, cid = heapq.heappop(heap)
            self.num_events += 1
            if kind == _RELEASE:
                s = self._start_coflow(cid, now)
                if s.size:
                    started.append(s)
            else:
                self._finish_coflow(cid, t)
        s = _NO_I
        if started:
            s = np.concatenate(started) if len(started) > 1 else started[0]
            self._active = np.concatenate([self._active, s])
            self._adj_add(s)
        if (s.size or done.size) and self._active.size:
            if self._rule == "closure":
                thr = NO_THRESHOLD
                if s.size:
                    p_new, t_new = arrival_threshold(s, f.lo, f.hi, links.link, links.frac, f.weight,
                                                     f.prio, ls.cap, self._b_start, self._b_len,
                                                     self._b_flow, self._b_inc)
                    thr = threshold(p_done, t_done, p_new, t_new)
                elif p_done != NO_CLASS:
                    thr = threshold(p_done, t_done, NO_CLASS, math.inf)
                self._rates_closure(np.concatenate([done, s]), now, thr)
            else:
                self._rates(s, done, now)
            if self.num_rate_updates >= self._load_refresh_at:
                self._refresh_load()
        if not self.record_flows and self._dead > max(self._compact_min,
                                                      2 * (self._f.count - self._dead)):
            self._compact()

    def _on_rates(self, now: float):
        # NETWORK HOOK 4/4: start, burst, convergence costs, on the new rates before they apply
        return None if self.network is None else (lambda comp: self.network.on_rates(self, comp, now))

    def _rates(self, started: np.ndarray, ended: np.ndarray, now: float) -> None:
        """Bring the rates to the max-min allocation after ``started`` joined and ``ended``
        left (`flowherd.sim.bottleneck.reallocate_local`: only the flows whose bottleneck the
        event can break are looked at)."""
        passes, moved = reallocate_local(started, ended, now, self._f, self._links.link,
                                         self._links.frac, self._ls, self._b_start, self._b_len,
                                         self._b_flow, self._b_inc, self._on_rates(now))
        self.num_rate_updates += 1
        self.num_allocation_passes += passes
        self.num_flows_reallocated += moved

    def _rates_closure(self, seeds: np.ndarray, now: float, thr: tuple[int, float]) -> None:
        """The earlier rule (``_rule = "closure"``): every flow coupled to ``seeds`` over
        saturated links, those below the threshold ``thr`` kept
        (`flowherd.sim.allocation.reallocate`); kept to compare with."""
        passes, moved = reallocate(seeds, now, self._f, self._links.link, self._links.frac, self._ls,
                                   self._b_start, self._b_len, self._b_flow,
                                   on_rates=self._on_rates(now), threshold=thr, b_inc=self._b_inc)
        self.num_rate_updates += 1
        self.num_allocation_passes += passes
        self.num_flows_reallocated += moved

    def _refresh_load(self) -> None:
        """Recompute the per-link load from the rates: the running sums drift by rounding."""
        f, links, act = self._f, self._links, self._active
        lens = f.hi[act] - f.lo[act]
        inc = ranges(f.lo[act], f.hi[act])
        self._ls.load = np.bincount(links.link[inc], weights=links.frac[inc] *
                                    np.repeat(f.rate[act], lens),
                                    minlength=self.fabric.num_directed_links)
        self._load_refresh_at = self.num_rate_updates + (1 << 14)

    def _compact(self) -> None:
        """Drop the flows that are over (no flow records are kept) and renumber the rest."""
        compact_flows(self)

    def _adj_add(self, flows: np.ndarray) -> None:
        buckets_add(self, flows)

    def _flows_done(self, done: np.ndarray) -> None:
        c = self._c
        for cid in count_off(done, self._f.coflow, self._f.finish, c.left, c.last).tolist():
            self._push(max(float(c.last[cid]), self._c_start[cid] + self._c_min[cid]), _DONE, cid)

    def _start_coflow(self, cid: int, now: float) -> np.ndarray:
        f = self._f
        lo, hi = self._c_flow_lo[cid], self._c_flow_hi[cid]
        self._c_start[cid] = now
        self._pending.discard(cid)
        if lo == hi:  # a pure delay
            self._c.left[cid] = 0
            self._c.last[cid] = now
            self._push(now + self._c_min[cid], _DONE, cid)
            return _NO_I
        real, last, n_inst = start_flows(lo, hi, now, f.size, f.lo, f.hi, f.lat, f.start, f.txend,
                                         f.finish, f.rem, f.t0, f.rate)
        self._dead += n_inst
        self._c.left[cid] = real.size
        self._c.last[cid] = last
        if real.size == 0:
            self._push(max(last, now + self._c_min[cid]), _DONE, cid)
        return real

    def _finish_coflow(self, cid: int, t: float) -> None:
        self._c_finish[cid] = t
        deps = self._c_dependents[cid]
        if deps is not None:
            for d in deps:
                self._c_waiting[d] -= 1
                if self._c_waiting[d] == 0:
                    self._schedule_release(d)
        cb = self._c_on_done[cid]
        if cb is not None:
            cb(cid, t)
