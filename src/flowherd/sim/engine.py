"""The flow-level discrete-event engine.

Coflows (sets of flows that start together; the unit a collective step or a compute phase is
made of) are added with dependencies; flows share links at their max-min fair rates
(`flowherd.sim.fairshare`), recomputed whenever flows start or end. Between events rates are
constant, so nothing is simulated but the events themselves:

* a flow's remaining bytes are kept lazily (bytes left at the time its rate last changed), so
  an event touches only the flows whose rate it changes;
* an event recomputes the rates of the flows it can affect: those on the links of the flows
  that started or ended, and transitively those sharing a *saturated* link with them (a link
  with spare capacity does not couple its flows' rates); they are re-allocated max-min on what
  the other flows leave, and if that saturates a link they share with other flows, the
  recomputation widens to those and repeats. The result is exactly the max-min allocation of
  all active flows (tests compare it with a full recomputation at every event), at the cost
  of the part of the network that changes. Per-link buckets of the active flows, kept up to
  date as flows come and go, make finding that part cost only its size;
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
from typing import Any

import numpy as np
from numba import njit

from flowherd.errors import ConfigError, SimulationError
from flowherd.fabric.core import Fabric
from flowherd.routing.base import Router, Routes
from flowherd.sim.fairshare import Scratch, max_min_subset
from flowherd.sim.network import NetworkConfig, NetworkModel, current_network
from flowherd.sim.results import SimResult

__all__ = ["Engine"]

log = logging.getLogger(__name__)

_TIME_RTOL = 1e-12
# a link loaded to within this fraction of its capacity counts as saturated (a bottleneck)
_SAT_RTOL = 1e-9
_CHECKED_ROUTES_MAX = 4096  # Routes objects remembered as checked (cleared when full)
_RELEASE, _DONE = 0, 1


@njit(cache=True)
def _closure(seeds, forced, lo, hi, link_buf, load, cap, b_start, b_len, b_flow, link_mark,
             flow_mark):
    """The flows whose rates an event can change: active flows reached from the links of the
    ``seeds`` flows and the ``forced`` links, crossing from flow to flow over saturated links.

    A link with spare capacity does not couple the rates of its flows, so it is not crossed
    (the caller checks afterwards that none became saturated; see `Engine._rates`). The active
    flows of link ``l`` are ``b_flow[b_start[l]:b_start[l] + b_len[l]]``. ``link_mark`` and
    ``flow_mark`` are zero on entry and on return. Returns the flow ids, sorted.
    """
    queue = [np.int64(0) for _ in range(0)]
    for s in range(seeds.size):
        f = seeds[s]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if not link_mark[lnk]:
                link_mark[lnk] = True
                queue.append(lnk)
    for s in range(forced.size):
        lnk = forced[s]
        if not link_mark[lnk]:
            link_mark[lnk] = True
            queue.append(lnk)
    out = [np.int64(0) for _ in range(0)]
    qh = 0
    while qh < len(queue):
        j = queue[qh]
        qh += 1
        for e in range(b_start[j], b_start[j] + b_len[j]):
            f = b_flow[e]
            if flow_mark[f]:
                continue
            flow_mark[f] = True
            out.append(f)
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                if not link_mark[lnk] and load[lnk] >= cap[lnk] * (1.0 - _SAT_RTOL):
                    link_mark[lnk] = True
                    queue.append(lnk)
    for j in queue:
        link_mark[j] = False
    res = np.empty(len(out), np.int64)
    for i in range(len(out)):
        res[i] = out[i]
        flow_mark[out[i]] = False
    return np.sort(res)


@njit(cache=True)
def _adj_insert(flows, lo, hi, link_buf, inc_pos, b_start, b_len, b_cap, b_flow, b_inc, used):
    """Add the incidences of ``flows`` to the per-link buckets (a bucket that is full moves to
    the end of the pool with twice the room). Returns how many flows were added (fewer when
    the pool ran out: the caller compacts and calls again) and the pool's used length."""
    for i in range(flows.size):
        f = flows[i]
        need = 0
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if b_len[lnk] == b_cap[lnk]:
                need += max(4, 2 * b_cap[lnk])
        if used + need > b_flow.size:
            return i, used
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if b_len[lnk] == b_cap[lnk]:
                nc = max(4, 2 * b_cap[lnk])
                ns = used
                used += nc
                for q in range(b_len[lnk]):
                    b_flow[ns + q] = b_flow[b_start[lnk] + q]
                    b_inc[ns + q] = b_inc[b_start[lnk] + q]
                    inc_pos[b_inc[ns + q]] = ns + q
                b_start[lnk] = ns
                b_cap[lnk] = nc
            p = b_start[lnk] + b_len[lnk]
            b_flow[p] = f
            b_inc[p] = k
            inc_pos[k] = p
            b_len[lnk] += 1
    return flows.size, used


@njit(cache=True)
def _adj_remove(flows, lo, hi, link_buf, inc_pos, b_start, b_len, b_flow, b_inc):
    for i in range(flows.size):
        f = flows[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            p = inc_pos[k]
            last = b_start[lnk] + b_len[lnk] - 1
            b_flow[p] = b_flow[last]
            b_inc[p] = b_inc[last]
            inc_pos[b_inc[p]] = p
            b_len[lnk] -= 1


@njit(cache=True)
def _adj_rebuild(active, lo, hi, link_buf, inc_pos, b_start, b_len, b_cap, b_flow, b_inc):
    """Lay the buckets of the active flows out afresh, each with twice its length of room."""
    num_links = b_start.size
    for lnk in range(num_links):
        b_len[lnk] = 0
    for i in range(active.size):
        f = active[i]
        for k in range(lo[f], hi[f]):
            b_len[link_buf[k]] += 1
    used = 0
    for lnk in range(num_links):
        b_start[lnk] = used
        b_cap[lnk] = 2 * b_len[lnk]
        used += b_cap[lnk]
        b_len[lnk] = 0
    for i in range(active.size):
        f = active[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            p = b_start[lnk] + b_len[lnk]
            b_flow[p] = f
            b_inc[p] = k
            inc_pos[k] = p
            b_len[lnk] += 1
    return used


@njit(cache=True)
def _residual(comp, lo, hi, link_buf, frac_buf, rate, load, nflows, cap, cap_eff, s_cnt):
    """Set ``cap_eff`` on the links of ``comp`` to what the flows outside ``comp`` leave."""
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            s_cnt[link_buf[k]] += 1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if s_cnt[lnk] == nflows[lnk]:
                cap_eff[lnk] = cap[lnk]  # no flow outside: exact, no cancellation
            else:
                cap_eff[lnk] = cap[lnk] - load[lnk]
    for i in range(comp.size):
        f = comp[i]
        r = rate[f]
        if r > 0.0:
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                if s_cnt[lnk] != nflows[lnk]:
                    cap_eff[lnk] += r * frac_buf[k]
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if cap_eff[lnk] < _SAT_RTOL * cap[lnk] * 1e-3:
                cap_eff[lnk] = 0.0


@njit(cache=True)
def _newly_saturated(comp, lo, hi, link_buf, frac_buf, rate_new, nflows, cap, cap_eff, s_cnt,
                     s_pos):
    """Links of ``comp`` shared with outside flows that the new rates saturate. Restores
    ``cap_eff`` to ``cap`` and ``s_cnt`` to zero on the links of ``comp``; ``s_pos`` is per-link
    scratch, zero on entry and on return."""
    nnz = 0
    for i in range(comp.size):
        nnz += hi[comp[i]] - lo[comp[i]]
    use = np.zeros(nnz, np.float64)
    links = np.empty(nnz, np.int64)
    m = 0
    for i in range(comp.size):
        f = comp[i]
        r = rate_new[f]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            if s_cnt[lnk] == nflows[lnk]:
                continue
            if s_pos[lnk] == 0:
                links[m] = lnk
                m += 1
                s_pos[lnk] = m
            use[s_pos[lnk] - 1] += r * frac_buf[k]
    out = np.empty(m, np.int64)
    q = 0
    for j in range(m):
        lnk = links[j]
        s_pos[lnk] = 0
        outside = cap[lnk] - cap_eff[lnk]
        if outside + use[j] >= cap[lnk] * (1.0 - _SAT_RTOL):
            out[q] = lnk
            q += 1
    for i in range(comp.size):
        f = comp[i]
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            cap_eff[lnk] = cap[lnk]
            s_cnt[lnk] = 0
    return out[:q]


@njit(cache=True)
def _settle(flows, now, finish, rate, rem, t0, lo, hi, link_buf, frac_buf, link_bytes, link_nact,
            link_load, busy_since, busy_s):
    """Bring ``flows`` to time ``now`` at their current rates (all bytes if ``finish``): credit
    their links with the bytes sent, then take them off their links (rate 0)."""
    for i in range(flows.size):
        f = flows[i]
        r = rate[f]
        if finish:
            sent = rem[f]
        elif r > 0.0:
            sent = r * (now - t0[f])
            if sent > rem[f]:
                sent = rem[f]
        else:
            sent = 0.0
        rem[f] -= sent
        t0[f] = now
        for k in range(lo[f], hi[f]):
            lnk = link_buf[k]
            link_bytes[lnk] += sent * frac_buf[k]
            if r > 0.0:
                link_nact[lnk] -= 1
                if link_nact[lnk] == 0:
                    busy_s[lnk] += now - busy_since[lnk]
                    link_load[lnk] = 0.0  # exact when empty, whatever rounding did before
                else:
                    link_load[lnk] -= r * frac_buf[k]
        rate[f] = 0.0


@njit(cache=True)
def _activate(flows, now, rate, rate_new, rem, txend, lo, hi, link_buf, frac_buf, link_nact,
              link_load, busy_since):
    """Give ``flows`` their new rates, put them on their links, set their transmission ends."""
    for i in range(flows.size):
        f = flows[i]
        r = rate_new[f]
        rate[f] = r
        if r > 0.0:
            txend[f] = now + rem[f] / r
            for k in range(lo[f], hi[f]):
                lnk = link_buf[k]
                if link_nact[lnk] == 0:
                    busy_since[lnk] = now
                link_nact[lnk] += 1
                link_load[lnk] += r * frac_buf[k]
        else:
            txend[f] = np.inf


class _Grow:
    """Named numpy columns that grow by doubling."""

    def __init__(self, spec: dict[str, tuple[Any, Any]]):
        self._spec = spec
        self.count = 0
        self._cap = 16
        for name, (dtype, fill) in spec.items():
            setattr(self, name, np.full(self._cap, fill, dtype=dtype))

    def extend(self, n: int) -> slice:
        need = self.count + n
        if need > self._cap:
            cap = max(need, 2 * self._cap)
            for name, (dtype, fill) in self._spec.items():
                new = np.full(cap, fill, dtype=dtype)
                new[: self.count] = getattr(self, name)[: self.count]
                setattr(self, name, new)
            self._cap = cap
        sl = slice(self.count, need)
        self.count = need
        return sl


_FLOW_COLUMNS = {
    "coflow": (np.int64, 0), "src": (np.int32, 0), "dst": (np.int32, 0),
    "size": (np.float64, 0.0), "lat": (np.float64, 0.0), "weight": (np.float64, 1.0),
    "prio": (np.int64, 0), "lo": (np.int64, 0), "hi": (np.int64, 0),
    "start": (np.float64, np.nan), "txend": (np.float64, np.inf), "finish": (np.float64, np.nan),
    "rem": (np.float64, 0.0), "t0": (np.float64, 0.0), "rate": (np.float64, 0.0),
    "rate_new": (np.float64, 0.0), "mark": (np.bool_, False),
}


def _as_1d(name: str, value: Any, dtype: Any) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(value))
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be a scalar or a 1-d array, got shape {arr.shape} ({name})")
    if np.issubdtype(np.dtype(dtype), np.integer):
        if (arr.size and not np.issubdtype(arr.dtype, np.integer)
                and not (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)))):
            raise ConfigError(f"{name} must hold integers, got {arr[:4]!r} ({name})")
    elif not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ConfigError(f"{name} must be real numbers, got {arr.dtype} ({name})")
    return arr.astype(dtype)


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

    def __init__(self, fabric: Fabric, router: Router | None, *, record_flows: bool = True,
                 network: NetworkConfig | None = None):
        """Args:
        fabric: The network.
        router: Routes flows of coflows added without ``routes=``.
        record_flows: Keep per-flow records in `result` (per-coflow and per-link ones are
            always kept).
        network: The congestion model (`flowherd.sim.network`); default: the one set by
            `flowherd.sim.network.use_network`, else ``ideal`` (no model at all).
        """
        self.fabric = fabric
        self.router = router
        self.record_flows = record_flows
        num_links = fabric.num_directed_links
        self._cap = np.ascontiguousarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)
        # NETWORK HOOK 1/4: a congestion model other than ideal gives the links' payload capacity
        net = network if network is not None else current_network()
        self.network = None if net is None or net.ideal else NetworkModel(net, fabric)
        if self.network is not None:
            self._cap = self.network.cap
        self._now = 0.0
        self._f = _Grow(_FLOW_COLUMNS)
        self._links = _Grow({"link": (np.int64, 0), "frac": (np.float64, 0.0),
                             "pos": (np.int64, 0)})
        self._active = np.zeros(0, np.int64)
        # Routes objects already checked, by identity (held, so an id is never reused): job
        # executors hand the same cached Routes every iteration, and checking them each time
        # was ~14% of a cluster run (profile of the default scenario).
        self._checked_routes: dict[int, tuple[Routes, tuple[np.ndarray, ...]]] = {}
        # per coflow (python lists: touched once or twice per coflow, never per flow)
        self._c_name: list[str] = []
        self._c_flow_lo: list[int] = []
        self._c_flow_hi: list[int] = []
        self._c_base: list[float] = []
        self._c_delay: list[float] = []
        self._c_after: list[tuple[int, ...]] = []
        self._c_waiting: list[int] = []
        self._c_dependents: list[list[int]] = []
        self._c_start: list[float] = []
        self._c_finish: list[float] = []
        self._c_left: list[int] = []
        self._c_last: list[float] = []
        self._c_on_done: list[Callable[[int, float], None] | None] = []
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._link_bytes = np.zeros(num_links)
        self._link_busy = np.zeros(num_links)
        self._busy_since = np.zeros(num_links)
        self._link_nact = np.zeros(num_links, np.int64)  # flows with a positive rate
        # per-link buckets of the active flows (their incidences), in one pool
        self._b_start = np.zeros(num_links, np.int64)
        self._b_len = np.zeros(num_links, np.int64)  # also: active flows on the link, any rate
        self._b_cap = np.zeros(num_links, np.int64)
        self._b_flow = np.zeros(1024, np.int64)
        self._b_inc = np.zeros(1024, np.int64)
        self._b_used = 0
        self._link_mark = np.zeros(num_links, np.bool_)
        self._link_load = np.zeros(num_links)  # sum of rate * frac, bytes per second
        self._cap_eff = self._cap.copy()
        self._scratch = Scratch(num_links)
        self._pos = np.zeros(num_links, np.int64)
        self._cnt = np.zeros(num_links, np.int64)
        self._running = False
        self.num_events = 0
        self.num_rate_updates = 0
        self.num_flows_reallocated = 0  # sum over rate updates of the flows re-allocated
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
                   on_done: Callable[[int, float], None] | None = None) -> int:
        """Add a coflow: flows ``src[i] -> dst[i]`` of ``size_bytes[i]`` that start together.

        It starts at ``max(at_s (default: now), finish of every coflow in after) + delay_s``
        (never before now) and finishes when the last byte of its last flow arrives; with no
        flows it is a pure delay.

        Args:
            src, dst: GPU node ids (arrays or scalars, broadcast to one length).
            size_bytes: Bytes of each flow (array or scalar), >= 0.
            at_s: Earliest start, absolute seconds.
            after: Ids of coflows that must finish first.
            delay_s: Added after the later of ``at_s`` and the dependencies, seconds.
            weight: Weighted max-min share of every flow of the coflow, > 0 (or one per flow).
            priority: Strict priority class, lower served first.
            routes: The flows' routes as given (one row per flow); default ``router.route``.
            key: ECMP hash input of each flow (default 0: one connection per GPU pair).
            name: For reports.
            on_done: Called as ``on_done(coflow_id, finish_s)`` when the coflow finishes; may
                add coflows.

        Returns:
            The coflow id (0, 1, 2, ... in add order).

        Raises:
            ConfigError: a negative or non-finite size, time or weight, lengths that do not
                match, an unknown ``after`` id, a GPU id out of range, malformed routes.
        """
        cid = len(self._c_name)
        src_a = _as_1d("src", src, np.int64)
        dst_a = _as_1d("dst", dst, np.int64)
        size_a = _as_1d("size_bytes", size_bytes, np.float64)
        try:
            src_a, dst_a, size_a = (np.array(a) for a in np.broadcast_arrays(src_a, dst_a, size_a))
        except ValueError:
            raise ConfigError(
                f"src, dst and size_bytes must have equal lengths, got {src_a.size}, {dst_a.size} "
                f"and {size_a.size} (src, dst, size_bytes of coflow {cid})") from None
        n = src_a.size
        ng = self.fabric.num_gpus
        for nm, arr in (("src", src_a), ("dst", dst_a)):
            bad = np.flatnonzero((arr < 0) | (arr >= ng))
            if bad.size:
                raise ConfigError(f"{nm} must be GPU ids in 0..{ng - 1}, got {arr[bad[0]]} "
                                  f"({nm}[{bad[0]}] of coflow {cid})")
        bad = np.flatnonzero(~(size_a >= 0) | ~np.isfinite(size_a))
        if bad.size:
            raise ConfigError(f"size_bytes must be finite and >= 0, got {size_a[bad[0]]!r} "
                              f"(size_bytes[{bad[0]}] of coflow {cid})")
        if at_s is not None and not (math.isfinite(at_s) and at_s >= 0):
            raise ConfigError(f"at_s must be a finite time >= 0 or None, got {at_s!r} (at_s of "
                              f"coflow {cid})")
        if not (math.isfinite(delay_s) and delay_s >= 0):
            raise ConfigError(f"delay_s must be finite and >= 0, got {delay_s!r} (delay_s of "
                              f"coflow {cid})")
        if not np.all(np.isfinite(np.asarray(weight, dtype=np.float64))
                      & (np.asarray(weight, dtype=np.float64) > 0)):
            raise ConfigError(f"weight must be finite and > 0, got {weight!r} (weight of coflow "
                              f"{cid})")
        if np.ndim(weight) and np.shape(weight) != (n,):  # per-flow weights (sim.collective)
            raise ConfigError(f"weight must be a number or one per flow ({n}), got shape "
                              f"{np.shape(weight)} (weight of coflow {cid})")
        if isinstance(priority, bool) or not isinstance(priority, int | np.integer):
            raise ConfigError(f"priority must be an int, got {priority!r} (priority of coflow {cid})")
        if self.network is not None:  # NETWORK HOOK 2/4: controller classes -> port queues
            priority = self.network.port_class(priority)
        after_t = tuple(int(a) for a in np.atleast_1d(np.asarray(after, dtype=np.int64)))
        for a in after_t:
            if not 0 <= a < cid:
                raise ConfigError(f"after names unknown coflow {a}, expected ids in 0..{cid - 1} "
                                  f"(after of coflow {cid})")
        given = routes is not None
        if routes is None:
            if n and self.router is None:
                raise ConfigError(f"coflow {cid} has flows but no routes and the engine has no "
                                  "router (routes)")
            key_a = (np.zeros(n, np.int64) if key is None
                     else np.broadcast_to(_as_1d("key", key, np.int64), (n,)).copy())
            routes = (self.router.route(src_a.astype(np.int32), dst_a.astype(np.int32), key_a)
                      if n else Routes.concat([]))
        lnk, frc, ptr, lat = self._check_routes(routes, n, cid, remember=given)

        # store the flows
        fs = self._f.extend(n)
        ls = self._links.extend(lnk.size)
        f = self._f
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
        self._c_after.append(after_t)
        self._c_dependents.append([])
        self._c_start.append(math.nan)
        self._c_finish.append(math.nan)
        self._c_left.append(0)
        self._c_last.append(math.nan)
        self._c_on_done.append(on_done)
        self._pending.add(cid)
        waiting = 0
        for a in set(after_t):
            if math.isnan(self._c_finish[a]):
                waiting += 1
                self._c_dependents[a].append(cid)
        self._c_waiting.append(waiting)
        if waiting == 0:
            self._schedule_release(cid)
        return cid

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
        return np.maximum(self._link_load, 0.0)

    def link_bytes_now(self) -> np.ndarray:
        """``float64[L]``: bytes each directed link has carried up to now, active flows included
        (the ``link_bytes`` of `result`, without its per-flow copies)."""
        f = self._f
        link_bytes = self._link_bytes.copy()
        act = self._active
        if act.size:  # bytes sent since the active flows' last settle
            sent = np.minimum(f.rate[act] * (self._now - f.t0[act]), f.rem[act])
            lens = f.hi[act] - f.lo[act]
            idx = np.repeat(f.lo[act] - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
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
        busy = self._link_busy.copy()
        on = self._link_nact > 0
        busy[on] += self._now - self._busy_since[on]
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
    def _check_routes(self, routes: Routes, n: int, cid: int, *, remember: bool):
        hit = self._checked_routes.get(id(routes))
        if hit is not None and hit[0] is routes and hit[1][2].size == n + 1:
            return hit[1]
        out = self._check_routes_once(routes, n, cid)
        if not remember:  # fresh from the router: not handed again
            return out
        if len(self._checked_routes) >= _CHECKED_ROUTES_MAX:
            self._checked_routes.clear()
        self._checked_routes[id(routes)] = (routes, out)
        return out

    def _check_routes_once(self, routes: Routes, n: int, cid: int):
        ptr = np.asarray(routes.ptr, dtype=np.int64)
        if ptr.shape != (n + 1,):
            raise ConfigError(f"routes must have one row per flow ({n}), got {ptr.size - 1} "
                              f"(routes of coflow {cid})")
        if ptr[0] != 0 or np.any(np.diff(ptr) < 0):
            raise ConfigError(f"routes.ptr must start at 0 and not decrease, got {ptr[:8]!r} "
                              f"(routes of coflow {cid})")
        nnz = int(ptr[-1])
        lnk = np.asarray(routes.link, dtype=np.int64)
        frc = np.asarray(routes.frac, dtype=np.float64)
        lat = np.asarray(routes.latency_s, dtype=np.float64)
        if lnk.shape != (nnz,) or frc.shape != (nnz,) or lat.shape != (n,):
            raise ConfigError(f"routes.link/frac must have {nnz} entries and latency_s {n}, got "
                              f"{lnk.shape}, {frc.shape}, {lat.shape} (routes of coflow {cid})")
        num_links = self.fabric.num_directed_links
        bad = np.flatnonzero((lnk < 0) | (lnk >= num_links))
        if bad.size:
            raise ConfigError(f"routes.link must be link ids in 0..{num_links - 1}, got "
                              f"{lnk[bad[0]]} (routes.link[{bad[0]}] of coflow {cid})")
        bad = np.flatnonzero(~(frc > 0) | ~(frc <= 1))
        if bad.size:
            raise ConfigError(f"routes.frac must lie in (0, 1], got {frc[bad[0]]!r} "
                              f"(routes.frac[{bad[0]}] of coflow {cid})")
        bad = np.flatnonzero(~(lat >= 0) | ~np.isfinite(lat))
        if bad.size:
            raise ConfigError(f"routes.latency_s must be finite and >= 0, got {lat[bad[0]]!r} "
                              f"(routes.latency_s[{bad[0]}] of coflow {cid})")
        return lnk, frc, ptr, lat

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
        if not self._active.size:
            return math.inf
        return float(self._f.txend[self._active].min())

    def _step(self, now: float) -> None:
        """Process every event at ``now`` as one batch, then update rates once."""
        self._now = now
        f = self._f
        links = self._links
        changed: list[np.ndarray] = []
        act = self._active
        if act.size:
            te = f.txend[act]
            done_mask = te <= now + _TIME_RTOL * abs(now)
            if done_mask.any():
                done = act[done_mask]
                self._active = act[~done_mask]
                _settle(done, now, True, f.rate, f.rem, f.t0, f.lo, f.hi, links.link, links.frac,
                        self._link_bytes, self._link_nact, self._link_load, self._busy_since,
                        self._link_busy)
                _adj_remove(done, f.lo, f.hi, links.link, links.pos, self._b_start, self._b_len,
                            self._b_flow, self._b_inc)
                f.txend[done] = now
                f.finish[done] = now + f.lat[done]
                if self.network is not None:  # NETWORK HOOK 3/4: link state after departures
                    self.network.on_done(self, done, now)
                changed.append(done)
                self._dead += done.size
                self.num_events += done.size
                self._flows_done(done)
        started: list[np.ndarray] = []
        while self._heap and self._heap[0][0] <= now:
            t, _, kind, cid = heapq.heappop(self._heap)
            self.num_events += 1
            if kind == _RELEASE:
                s = self._start_coflow(cid, now)
                if s.size:
                    started.append(s)
            else:
                self._finish_coflow(cid, t)
        if started:
            s = np.concatenate(started)
            self._active = np.concatenate([self._active, s])
            self._adj_add(s)
            changed.append(s)
        if changed and self._active.size:
            self._rates(np.concatenate(changed), now)
            if self.num_rate_updates >= self._load_refresh_at:
                self._refresh_load()
        if not self.record_flows and self._dead > max(self._compact_min,
                                                      2 * (self._f.count - self._dead)):
            self._compact()

    def _refresh_load(self) -> None:
        """Recompute the per-link load from the rates: the running sums drift by rounding."""
        f, links, act = self._f, self._links, self._active
        lens = f.hi[act] - f.lo[act]
        inc = np.repeat(f.lo[act] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        self._link_load = np.bincount(links.link[inc], weights=links.frac[inc] *
                                      np.repeat(f.rate[act], lens),
                                      minlength=self.fabric.num_directed_links)
        self._load_refresh_at = self.num_rate_updates + (1 << 14)

    def _compact(self) -> None:
        """Drop the flows that are over (no flow records are kept) and renumber the rest."""
        f, links = self._f, self._links
        n = f.count
        keep = np.zeros(n, bool)
        keep[self._active] = True
        for c in self._pending:
            keep[self._c_flow_lo[c]:self._c_flow_hi[c]] = True
        ids = np.flatnonzero(keep)
        new_id = np.full(n, -1, np.int64)
        new_id[ids] = np.arange(ids.size)
        lens = f.hi[ids] - f.lo[ids]
        inc = np.repeat(f.lo[ids] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        for name in links._spec:
            col = getattr(links, name)
            col[:inc.size] = col[inc]
        links.count = inc.size
        for name in f._spec:
            col = getattr(f, name)
            col[:ids.size] = col[ids]
        f.count = ids.size
        f.lo[:ids.size] = np.cumsum(lens) - lens
        f.hi[:ids.size] = np.cumsum(lens)
        for c in self._pending:
            lo, hi = self._c_flow_lo[c], self._c_flow_hi[c]
            if hi > lo:
                self._c_flow_lo[c] = int(new_id[lo])
                self._c_flow_hi[c] = int(new_id[lo]) + hi - lo
        self._active = new_id[self._active]
        nnz = int((f.hi[self._active] - f.lo[self._active]).sum())
        if self._b_flow.size < 2 * nnz:
            self._b_flow = np.zeros(8 * nnz + 8 * self.fabric.num_directed_links, np.int64)
            self._b_inc = np.zeros(self._b_flow.size, np.int64)
        self._b_used = _adj_rebuild(self._active, f.lo, f.hi, links.link, links.pos, self._b_start,
                                    self._b_len, self._b_cap, self._b_flow, self._b_inc)
        self._dead = 0

    def _rates(self, seeds: np.ndarray, now: float) -> None:
        """Recompute the rates the flows ``seeds`` (just started or ended) can change.

        The flows coupled to them over saturated links are re-allocated on what the other
        flows leave; if that saturates a link shared with other flows, those join and it is
        done again. The result is the max-min allocation of all active flows: every flow left
        out keeps its bottleneck (a saturated link no re-allocated flow uses) and every
        re-allocated flow's bottleneck is saturated and carries no flow left out.
        """
        f = self._f
        links = self._links
        forced = np.zeros(0, np.int64)
        while True:
            comp = _closure(seeds, forced, f.lo, f.hi, links.link, self._link_load, self._cap,
                            self._b_start, self._b_len, self._b_flow, self._link_mark, f.mark)
            if not comp.size:
                return
            _residual(comp, f.lo, f.hi, links.link, links.frac, f.rate, self._link_load,
                      self._b_len, self._cap, self._cap_eff, self._cnt)
            max_min_subset(comp, f.lo, f.hi, links.link, links.frac, f.weight, f.prio,
                           self._cap_eff, f.rate_new, self._scratch)
            more = _newly_saturated(comp, f.lo, f.hi, links.link, links.frac, f.rate_new,
                                    self._b_len, self._cap, self._cap_eff, self._cnt,
                                    self._pos)
            self.num_rate_updates += 1
            self.num_flows_reallocated += comp.size
            if not more.size:
                break
            forced = np.union1d(forced, more)
        if self.network is not None:  # NETWORK HOOK 4/4: start, burst, convergence costs
            self.network.on_rates(self, comp, now)
        _settle(comp, now, False, f.rate, f.rem, f.t0, f.lo, f.hi, links.link, links.frac,
                self._link_bytes, self._link_nact, self._link_load, self._busy_since,
                self._link_busy)
        _activate(comp, now, f.rate, f.rate_new, f.rem, f.txend, f.lo, f.hi, links.link,
                  links.frac, self._link_nact, self._link_load, self._busy_since)

    def _adj_add(self, flows: np.ndarray) -> None:
        f, links = self._f, self._links
        done = 0
        while True:
            k, self._b_used = _adj_insert(flows[done:], f.lo, f.hi, links.link, links.pos,
                                          self._b_start, self._b_len, self._b_cap, self._b_flow,
                                          self._b_inc, self._b_used)
            done += k
            if done == flows.size:
                return
            # pool full: lay the active flows out afresh in a pool twice their size
            act = self._active
            nnz = int((f.hi[act] - f.lo[act]).sum())
            size = max(1024, 8 * nnz + 8 * self.fabric.num_directed_links)  # room enough
            if size > self._b_flow.size:
                self._b_flow = np.zeros(size, np.int64)
                self._b_inc = np.zeros(size, np.int64)
            # flows[done:] are in `act` but not yet in the buckets: rebuild from the rest
            pending = flows[done:]
            keep = act[~np.isin(act, pending)]
            self._b_used = _adj_rebuild(keep, f.lo, f.hi, links.link, links.pos, self._b_start,
                                        self._b_len, self._b_cap, self._b_flow, self._b_inc)

    def _flows_done(self, done: np.ndarray) -> None:
        f = self._f
        cof = f.coflow[done]
        order = np.argsort(cof, kind="stable")
        cof = cof[order]
        fin = f.finish[done][order]
        uniq, first, counts = np.unique(cof, return_index=True, return_counts=True)
        last = np.maximum.reduceat(fin, first)
        for c, k, t in zip(uniq.tolist(), counts.tolist(), last.tolist(), strict=True):
            self._c_left[c] -= k
            self._c_last[c] = max(self._c_last[c], t)
            if self._c_left[c] == 0:
                self._push(self._c_last[c], _DONE, c)

    def _start_coflow(self, cid: int, now: float) -> np.ndarray:
        f = self._f
        lo, hi = self._c_flow_lo[cid], self._c_flow_hi[cid]
        self._c_start[cid] = now
        self._pending.discard(cid)
        ids = np.arange(lo, hi, dtype=np.int64)
        f.start[lo:hi] = now
        # zero-byte and link-less (same-GPU) flows are over at once: no rate, only latency
        instant = (f.size[lo:hi] == 0) | (f.hi[lo:hi] == f.lo[lo:hi])
        inst = ids[instant]
        f.txend[inst] = now
        f.finish[inst] = now + f.lat[inst]
        last = float(f.finish[inst].max()) if inst.size else now
        real = ids[~instant]
        f.rem[real] = f.size[real]
        f.t0[real] = now
        f.rate[real] = 0.0
        f.txend[real] = np.inf
        self._c_left[cid] = real.size
        self._c_last[cid] = last
        self._dead += inst.size
        if real.size == 0:
            self._push(last, _DONE, cid)
        return real

    def _finish_coflow(self, cid: int, t: float) -> None:
        self._c_finish[cid] = t
        for d in self._c_dependents[cid]:
            self._c_waiting[d] -= 1
            if self._c_waiting[d] == 0:
                self._schedule_release(d)
        cb = self._c_on_done[cid]
        if cb is not None:
            cb(cid, t)
