"""The flow-level discrete-event engine.

Coflows (sets of flows that start together; the unit a collective step or a compute phase is
made of) are added with dependencies; flows share links at their max-min fair rates
(`flowherd.engine.fairshare`), recomputed whenever flows start or end. Between events rates are
constant, so nothing is simulated but the events themselves:

* a flow's remaining bytes are kept lazily (bytes left at the time its rate last changed), so
  an event touches only the flows whose rate it changes;
* an event recomputes only the rates it can change: every active flow keeps a pointer to a
  bottleneck link of its own, and the flows re-allocated grow from the ones that started, by
  the flows whose bottleneck the change broke, until every flow has one again
  (`flowherd.engine.bottleneck`); by the bottleneck characterization of max-min fairness the result
  is the max-min allocation of all active flows (tests compare it with a full recomputation at
  every event, to a rounding of the link capacity), at the cost of the part of the network that
  changes. Per-link buckets of the active flows make finding that part cost only its size. The
  closure rule (every flow coupled over saturated links, above the event's threshold level,
  `flowherd.engine.allocation.reallocate`) stays selectable as ``_rule = "closure"``;
* events that fall at the same instant (a collective step starts many flows at once; equal
  flows end together) are processed as one batch with one rate update;
* per-link bytes are credited when a flow's rate changes or it ends, and per-link busy time
  is kept by counting flows with a positive rate on each link.

Flow completions closer together than a relative ``1e-12`` of the clock are taken as
simultaneous (the later ones end up to that much early).

The loop itself runs in compiled code (`flowherd.engine.event_loop`): it returns to Python only for
a coflow that has an ``on_done`` listener, a congestion model's hooks, the closure rule, and
bookkeeping now and then, so a callback costs only where a consumer listens. Coflows can be
added one at a time (`add_coflow`), as single-flow batches (`add_flows`,
`flowherd.engine.flow_batch`) or as a prepared graph of many coflows checked once
(`add_coflows`, `flowherd.engine.coflow_batch`); `result` (`flowherd.engine.snapshot`) copies
the records out.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from flowherd.engine import event_loop as ev
from flowherd.engine.allocation import (
    NO_CLASS,
    NO_THRESHOLD,
    LinkState,
    arrival_threshold,
    reallocate,
    threshold,
)
from flowherd.engine.bottleneck import _Scratch, reallocate_local
from flowherd.engine.coflow_batch import CoflowBatch, add_batch
from flowherd.engine.coflow_input import as_1d, check_timing, check_weight
from flowherd.engine.event_loop import RELEASE, drive, heap_push
from flowherd.engine.flow_batch import add_flows
from flowherd.engine.incidence import COFLOW_COLUMNS, FLOW_COLUMNS, Grow, compact_flows, ranges
from flowherd.engine.input_memo import InputMemo
from flowherd.engine.network import NetworkConfig, current_network
from flowherd.engine.results import SimResult
from flowherd.engine.snapshot import link_bytes_now, snapshot
from flowherd.errors import ConfigError, SimulationError
from flowherd.fabric.core import Fabric
from flowherd.routing.base import Router, Routes

__all__ = ["Engine"]

log = logging.getLogger(__name__)

_NO_I = np.zeros(0, np.int64)


def _slot(i: int, kind=int, doc: str = "") -> property:
    """An attribute kept in the event loop's state array (``_st_i``, or ``_st_f`` for floats)."""
    arr = "_st_f" if kind is float else "_st_i"

    def get(self):
        return kind(getattr(self, arr)[i])

    def put(self, v):
        getattr(self, arr)[i] = v

    return property(get, put, doc=doc)


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

    # the rate update: "bottleneck" (`flowherd.engine.bottleneck`) or the "closure" rule
    _rule = "bottleneck"
    # job executors add an iteration as one batch (`add_coflows`); False: one add_coflow per
    # coflow (the same run, bit for bit; kept to compare with)
    _batched = True

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
        network: The congestion model (`flowherd.engine.network`); default: the one set by
            `flowherd.engine.network.use_network`, else ``ideal`` (no model at all).
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
        self.network = None
        if net is not None and not net.ideal:
            from flowherd.engine.network.model import NetworkModel  # an ideal run loads no model

            self.network = NetworkModel(net, fabric)
        self._ls = LinkState(fabric.link_capacity_bytes_per_s if self.network is None else self.network.cap)
        self._ls.local = _Scratch(num_links)
        self._st_i = np.zeros(ev.NUM_I, np.int64)  # the event loop's state (`event_loop` slots)
        self._st_f = np.zeros(ev.NUM_F)
        self._st_i[ev.REFRESH_AT] = 1 << 14
        self._st_i[ev.COMPACT_MIN] = 1 << 16
        self._st_i[ev.RECORD] = int(record_flows)
        self._st_f[ev.RTOL] = self.completion_rtol
        self._f = Grow(FLOW_COLUMNS)
        self._links = Grow({"link": (np.int64, 0), "frac": (np.float64, 0.0), "pos": (np.int64, 0)})
        self._act_buf = np.zeros(16, np.int64)  # the active flows are _act_buf[:N_ACT]
        self._started_buf = np.zeros(16, np.int64)
        self._done_buf = np.zeros(16, np.int64)
        self._comp_buf = np.zeros(16, np.int64)  # a step's re-allocated flows (a congestion model's hook)
        self._fi_buf = np.zeros(16, np.int64)
        self._loop_work = None  # the event loop's work arrays (`event_loop.work_sizes`), kept
        # flow arrays, Routes and routed pairs already checked (`flowherd.engine.input_memo`)
        self._memo = InputMemo(fabric.num_gpus, num_links)
        # per coflow: columns (`COFLOW_COLUMNS`), its `after` ids in one pool, its dependents as
        # linked edges, names, and the listeners of the coflows that have one
        self._c = Grow(COFLOW_COLUMNS)
        self._after = Grow({"cid": (np.int64, 0)})
        self._edges = Grow({"to": (np.int64, 0), "next": (np.int64, -1)})
        self._c_name: list[str] = []
        self._cbs: dict[int, Callable[[int, float], None]] = {}
        self._hp = Grow({"t": (np.float64, 0.0), "seq": (np.int64, 0), "kind": (np.int64, 0),
                         "cid": (np.int64, 0)})  # the event heap, room for two events per coflow
        # per-link buckets of the active flows (their incidences), in one pool
        self._b_start = np.zeros(num_links, np.int64)
        self._b_len = np.zeros(num_links, np.int64)  # also: active flows on the link, any rate
        self._b_cap = np.zeros(num_links, np.int64)
        self._b_flow = np.zeros(1024, np.int64)
        self._b_inc = np.zeros(1024, np.int64)
        self._running = False

    _now = _slot(ev.NOW, float)
    num_events = _slot(ev.EVENTS)
    num_rate_updates = _slot(ev.UPDATES)
    num_allocation_passes = _slot(ev.PASSES, doc="max-min computations (an update may take several)")
    num_flows_reallocated = _slot(ev.MOVED, doc="sum over the passes of the flows re-allocated")
    _dead = _slot(ev.DEAD, doc="flows over (finished or instant) still in the arrays")
    _b_used = _slot(ev.B_USED)
    _compact_min = _slot(ev.COMPACT_MIN)
    _load_refresh_at = _slot(ev.REFRESH_AT)

    @property
    def _active(self) -> np.ndarray:
        return self._act_buf[:self._st_i[ev.N_ACT]]

    @_active.setter
    def _active(self, flows: np.ndarray) -> None:
        if flows.size > self._act_buf.size:
            self._act_buf = np.zeros(2 * flows.size, np.int64)
        self._act_buf[:flows.size] = flows
        self._st_i[ev.N_ACT] = flows.size

    @property
    def _c_flow_lo(self) -> np.ndarray:
        return self._c.flo

    @property
    def _c_flow_hi(self) -> np.ndarray:
        return self._c.fhi

    # ---- public API ----------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        """The simulation clock, in seconds."""
        return self._now

    @property
    def num_coflows(self) -> int:
        return self._c.count

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
        cid = self._c.count
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
        c = self._c
        c.extend(1)
        c.flo[cid] = fs.start
        c.fhi[cid] = fs.stop
        c.base[cid] = self._now if at_s is None else float(at_s)
        c.delay[cid] = float(delay_s)
        c.cmin[cid] = float(min_duration_s)
        al = self._after.extend(len(after_t))
        if after_t:
            self._after.cid[al] = after_t
        c.alo[cid] = al.start
        c.ahi[cid] = al.stop
        if on_done is not None:
            c.cb[cid] = True
            self._cbs[cid] = on_done
        waiting = 0
        for a in set(after_t) if len(after_t) > 1 else after_t:
            if math.isnan(c.finish[a]):
                waiting += 1
                self._add_edge(a, cid)
        c.waiting[cid] = waiting
        self._heap_room()
        if waiting == 0:
            start = float(c.base[cid])
            for a in after_t:
                start = max(start, float(c.finish[a]))
            self._push(max(start + float(delay_s), self._now), RELEASE, cid)
        return cid

    def add_flows(self, src, dst, size_bytes, *, at_s, routes: Routes, name: str = "",
                  reuse: np.ndarray | None = None) -> np.ndarray:
        """Add F coflows of one flow each at once (e.g. background traffic): flow ``i`` is its
        own coflow, starting at ``at_s[i]``; one check and one copy for the batch.

        The same as F calls of ``add_coflow(src[i], dst[i], size_bytes[i], at_s=at_s[i],
        routes=<row i of routes>, name=name)``, with the same ids and results.

        With ``reuse``, the first ``len(reuse)`` flows take the ids (the records) of those
        coflows instead of new ones: coflows that have finished, that no listener and no other
        coflow waits for, and that the caller will not name again (what it needed of them it has
        read). A run of millions of background flows then holds the records of the flows in
        flight, not of every flow it ran; the events, rates and times are the same (the
        engine orders events by time and by the order they were added, never by id).

        Args:
            src, dst: ``int[F]`` GPU node ids.
            size_bytes: ``float[F]`` bytes, >= 0.
            at_s: ``float[F]`` start times, seconds, finite and >= 0.
            routes: One row per flow.
            name: Name of every coflow.
            reuse: ``int[R]`` ids of finished coflows to reuse (``R <= F``), or None.

        Returns:
            ``int64[F]``: the coflow ids (``reuse``, then consecutive new ones).

        Raises:
            ConfigError: as `add_coflow`; a coflow in ``reuse`` that has not finished, has a
                listener or dependents, or is named twice.
        """
        return add_flows(self, src, dst, size_bytes, at_s=at_s, routes=routes, name=name, reuse=reuse)

    def add_coflows(self, batch: CoflowBatch, *, at_s: float | None = None, after: Sequence[int] = (),
                    name: str = "", on_done: Callable[[int, float], None] | None = None) -> int:
        """Add the coflows of ``batch`` (`flowherd.engine.coflow_batch.make_batch`, checked when it
        was made) in one call: the same as one `add_coflow` per coflow in batch order.

        Coflow ``i`` of the batch gets id ``first + i``; it starts at ``max(at_s (default:
        now), finish of its dependencies in the batch, or of every coflow in ``after`` if it has
        none) + its delay``. Its name is ``name`` plus its suffix; ``on_done`` listens to the
        batch's last coflow.

        Returns:
            ``first``, the id of the batch's first coflow.

        Raises:
            ConfigError: a bad ``at_s``, an unknown ``after`` id, GPUs or links the fabric
                does not have.
        """
        return add_batch(self, batch, at_s=at_s, after=after, name=name, on_done=on_done)

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
            # the rate update is Python's for a congestion model whose hooks are not in the event
            # loop, the closure rule, or a subclass's _rates (tests check every update there)
            py = ((self.network is not None and not self.network.in_loop) or self._rule == "closure"
                  or type(self)._rates is not Engine._rates)
            drive(self, math.inf if until_s is None else float(until_s), py)
        finally:
            self._running = False
        if until_s is not None:
            self._now = max(self._now, until_s)

    def coflow_finish_s(self, coflow: int) -> float | None:
        """When coflow ``coflow`` finished (seconds), or None if it has not (yet)."""
        if not 0 <= coflow < self._c.count:
            raise ConfigError(f"unknown coflow {coflow}, expected 0..{self._c.count - 1} "
                              "(coflow)")
        t = float(self._c.finish[coflow])
        return None if math.isnan(t) else t

    def coflows_finish_s(self, coflows: np.ndarray) -> np.ndarray:
        """``float64[k]``: when each of ``coflows`` finished (seconds; nan if it has not)."""
        ids = np.asarray(coflows, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self._c.count):
            raise ConfigError(f"unknown coflow in {ids[:8].tolist()}, expected 0..{self._c.count - 1} "
                              "(coflows)")
        return self._c.finish[ids]

    def coflow_start_s(self, coflow: int) -> float | None:
        """When coflow ``coflow`` started (seconds), or None if it has not (yet)."""
        if not 0 <= coflow < self._c.count:
            raise ConfigError(f"unknown coflow {coflow}, expected 0..{self._c.count - 1} "
                              "(coflow)")
        t = float(self._c.start[coflow])
        return None if math.isnan(t) else t

    def link_load_bytes_per_s(self) -> np.ndarray:
        """``float64[L]``: the current total rate on each directed link (a copy)."""
        return np.maximum(self._ls.load, 0.0)

    def link_bytes_now(self) -> np.ndarray:
        """``float64[L]``: bytes each directed link has carried up to now, active flows included
        (the ``link_bytes`` of `result`, without its per-flow copies)."""
        return link_bytes_now(self)

    def active_flows_on(self, links: np.ndarray) -> int:
        """How many active flows cross the directed links ``links`` (a flow counts once per link)."""
        return int(self._b_len[np.asarray(links, dtype=np.int64)].sum())

    def result(self) -> SimResult:
        """A snapshot of the records so far (safe to call mid-run; the engine keeps running)."""
        return snapshot(self)
    # ---- internals -----------------------------------------------------------------------
    def _push(self, t: float, kind: int, cid: int) -> None:
        h = self._hp
        heap_push(h.t, h.seq, h.kind, h.cid, self._st_i, t, kind, cid)

    def _heap_room(self) -> None:
        """Room in the heap for two events per coflow (a release and a finish)."""
        need = 2 * self._c.count + 16 - self._hp.count
        if need > 0:
            self._hp.extend(max(need, self._hp.count))

    def _add_edge(self, a: int, cid: int) -> None:
        """Coflow ``cid`` becomes the last dependent of coflow ``a``."""
        ed = self._edges
        e = ed.extend(1).start
        ed.to[e] = cid
        c = self._c
        if c.dhead[a] < 0:
            c.dhead[a] = e
        else:
            ed.next[c.dtail[a]] = e
        c.dtail[a] = e

    def _py_rates(self) -> None:
        """The step's rate update in Python: the closure rule, a congestion model, or a
        subclass's `_rates` (tests check every update there)."""
        st, now = self._st_i, self._now
        s = self._started_buf[:st[ev.N_STARTED]].copy()
        done = self._done_buf[:st[ev.N_DONE]].copy()
        if self._rule == "closure":
            f, links, ls = self._f, self._links, self._ls
            p_done, t_done = int(st[ev.P_DONE]), float(self._st_f[ev.T_DONE])
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

    def _on_rates(self, now: float):
        # NETWORK HOOK 4/4: start, burst, convergence costs, on the new rates before they apply
        return None if self.network is None else (lambda comp: self.network.on_rates(self, comp, now))

    def _rates(self, started: np.ndarray, ended: np.ndarray, now: float) -> None:
        """Bring the rates to the max-min allocation after ``started`` joined and ``ended``
        left (`flowherd.engine.bottleneck.reallocate_local`: only the flows whose bottleneck the
        event can break are looked at)."""
        passes, moved = reallocate_local(started, ended, now, self._f, self._links.link,
                                         self._links.frac, self._ls, self._b_start, self._b_len,
                                         self._b_flow, self._b_inc, self._on_rates(now))
        self.num_rate_updates += 1
        self.num_allocation_passes += passes
        self.num_flows_reallocated += moved

    def _rates_closure(self, seeds: np.ndarray, now: float, thr: tuple[int, float]) -> None:
        """The closure rule (``_rule = "closure"``): every flow coupled to ``seeds`` over
        saturated links, those below the threshold ``thr`` kept
        (`flowherd.engine.allocation.reallocate`); kept to compare with."""
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
