"""The congestion model an `Engine` consults: what queues, marks, pauses and drops cost flows.

The engine keeps sharing links max-min (`flowherd.sim.fairshare`); this model sits beside it
and, through three marked hooks in `flowherd.sim.engine`, turns the ideal allocation into what
a real fabric delivers, at flow level:

* **Wire efficiency** (at attach): a network link carries payload at
  ``capacity * payload / (payload + headers)`` (`NetworkConfig.wire_efficiency`).
* **Start of a flow** (hook ``on_rates``, when the engine has just computed new rates):
  connection setup (``setup_rtts`` round trips), TCP slow start (`fluid.slow_start_loss_s`,
  growing ``slow_start_growth`` per RTT;
  RoCE starts at line rate), and the first-window burst of the flows that start together
  (`fluid.incast_burst_bytes`): on a lossy port a peak above the port buffer drops the excess
  and the flows whose first windows were lost wait a retransmission timeout (with drop-tail,
  the last windows to arrive are the ones lost; a flow that loses its whole first window
  has no duplicate ACKs to recover by, RFC 5681 Sec. 3.2); on a lossless port a peak above
  PFC Xoff pauses the port's upstream links until the queue falls to Xon, which stops every
  flow on those links, the victims that never cross the congested port included, and a pause
  long enough to fill the upstream switch's queue past Xoff pauses the links before it
  (congestion spreading, IEEE 802.1Qbb; Guo et al., "RDMA over Commodity Ethernet at Scale",
  SIGCOMM 2016, Sec. 4).
* **DCTCP's first cut** (same hook, ``tcp``): flows that start together and are all the flows of
  a port that congests leave slow start together and halve their windows (``alpha`` starts at
  1); where that leaves the port below its bandwidth-delay product it idles until additive
  increase closes the gap (`fluid.dctcp_exit_loss_s`).
* **Convergence** (same hook): a flow whose share grows takes time to use it (DCTCP's
  additive increase, DCQCN's timer-driven recovery; `fluid.tcp_ramp_loss_s`,
  `fluid.dcqcn_ramp_loss_s`); the time lost is added to its finish.
* **Queueing delay** (hooks ``on_rates`` and ``on_done`` keep it per port): a port whose
  flows can arrive faster than it drains holds the fluid-model queue of its flows' congestion
  control (DCTCP, `fluid.dctcp_queue`; DCQCN, `fluid.dcqcn_fixed_point`), capped by the port
  buffer (lossy) or PFC Xoff (lossless); a starting flow's round trips (its setup and slow
  start) include the queues on its path, which is where short flows pay them.
* **Priority classes** (hook at ``add_coflow``): a controller's classes land in the port's
  `NetworkConfig.queues` queues as a switch's DSCP map puts them (`NetworkConfig.queue_of`:
  unmarked traffic in the default queue, marked classes above it, demoted ones below, classes
  merging only where the queues run out); the engine serves the queues in strict priority.
  A queue is lossless (PFC) or lossy by `NetworkConfig.lossless`, and a PFC pause stops only
  the paused classes on the upstream links.

Per network link it records queue occupancy over time, pause time, ECN-marked bytes (marking
fraction of the fluid model times the bytes carried) and dropped bytes (`NetworkStats`).
Bytes are conserved: every flow delivers its size (drops are re-sent, at flow level the
bytes a link carries are its flows' bytes); only times change.

What it does not model (said so where it matters): per-packet dynamics, reordering, the
persistent incast collapse of many flows with windows of one or two packets (a window cut under
the receiver's delayed-ACK count waits for the sender's timeout with no loss: ns-3's stalls,
validation/README.md), PFC deadlock, shared-buffer coupling between ports of a switch (each
port has its dynamic-threshold share), a queue per priority class (a port has one fluid queue
and marking state over all its flows: a higher class's round trips include the standing queue
of the classes below it; its share of the link is the engine's strict priority), schedulers
other than strict priority between the queues (no DWRR).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.sim.network import dcqcn, fluid
from flowherd.sim.network.config import NetworkConfig
from flowherd.sim.network.kernels import (
    done_pass,
    link_update,
    pause_victims,
    rates_pass,
    upstream_links,
)

if TYPE_CHECKING:
    from flowherd.sim.engine import Engine

__all__ = ["NetworkModel", "NetworkStats"]

_SAT_RTOL = 1e-6  # a link loaded to within this of its capacity holds a standing queue
_SERIES_MAX = 1_000_000  # queue samples kept (the rest of a long run is dropped, counted)
_PFC_DEPTH = 3  # hops a pause may spread upstream
_DCQCN_MIN_RATE = 100e6 / 8  # DCQCN's rate floor, 100 Mb/s (Mellanox's default; the HPCC fork's MIN_RATE)


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkStats:
    """Per directed link (indexed as the fabric's links) over ``[0, now_s]``.

    Attributes:
        queue_mean_bytes, queue_max_bytes: Time-average and peak of the standing queue.
        pause_s: Time the link was paused by PFC from downstream.
        ecn_marked_bytes: Bytes carried with an ECN mark.
        drop_bytes: Bytes dropped at the link's port (re-sent by the transport).
        series_t_s, series_link, series_queue_bytes: Queue changes (time, link, new queue).
        pause_t_s, pause_link, pause_dur_s: PFC pause episodes (start, paused link, duration).
        num_timeouts, num_pauses: Retransmission timeouts taken, PFC pause episodes.
    """

    model: str
    now_s: float
    queue_mean_bytes: np.ndarray
    queue_max_bytes: np.ndarray
    pause_s: np.ndarray
    ecn_marked_bytes: np.ndarray
    drop_bytes: np.ndarray
    series_t_s: np.ndarray
    series_link: np.ndarray
    series_queue_bytes: np.ndarray
    pause_t_s: np.ndarray
    pause_link: np.ndarray
    pause_dur_s: np.ndarray
    num_timeouts: int
    num_pauses: int


@functools.lru_cache(maxsize=65536)
def _dcqcn_point(*args) -> tuple[float, float]:
    # DCQCN's fixed point is a root solve; a cluster run makes many engines (probes) with one
    # configuration, so the points are solved once per process
    return fluid.dcqcn_fixed_point(*args)


def _incidences(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lens = hi - lo
    idx = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    return idx, np.repeat(np.arange(lo.size), lens)


class NetworkModel:
    """The mutable congestion state of one engine run (see the module docstring).

    It reads the engine's flow columns (``rate``, ``rate_new``, ``size``, ``rem``, ``start``,
    ``lat``, ``prio``, ``lo``, ``hi``), incidences (``link``, ``frac``), per-link load and
    active-flow buckets, and writes only the flows' ``lat`` and ``finish`` (extra time).
    """

    def __init__(self, cfg: NetworkConfig, fabric: Fabric):
        """``cap`` is what the engine shares: the fabric's capacities, on network links scaled
        by the wire efficiency."""
        self.cfg = cfg
        self.fabric = fabric
        num_links = fabric.num_directed_links
        self.is_net = np.asarray(fabric.link_kind) == LinkKind.NETWORK
        self.cap_wire = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64).copy()
        self.cap = self.cap_wire.copy()  # the engine's (payload) capacities
        self.cap[self.is_net] *= cfg.wire_efficiency
        self.pkt_wire = cfg.payload_bytes + cfg.overhead_bytes
        self._wire_eff = cfg.wire_efficiency
        # round trip of a packet over a link and back: propagation both ways plus the
        # store-and-forward serialization of a full packet
        lat = np.asarray(fabric.link_latency_s, dtype=np.float64)
        self.rtt_part = 2.0 * lat + np.where(self.is_net, self.pkt_wire / self.cap_wire, 0.0)
        src = np.asarray(fabric.link_src)
        self.link_src = src
        self.link_dst = np.asarray(fabric.link_dst)
        self.src_is_switch = np.asarray(fabric.node_kind)[src] == NodeKind.SWITCH
        self.q = np.zeros(num_links)
        self.q_t = np.zeros(num_links)
        self.q_int = np.zeros(num_links)
        self.q_max = np.zeros(num_links)
        self.mark = np.zeros(num_links)
        self.load = np.zeros(num_links)
        self.arrive = np.zeros(num_links)  # arrival potential (below), bytes per second
        self._mark = np.zeros(num_links, np.bool_)
        self._s_dload = np.zeros(num_links)
        self._s_rtt = np.zeros(num_links)
        self._s_cnt = np.zeros(num_links, np.int64)
        self.marked = np.zeros(num_links)
        self.drops = np.zeros(num_links)
        self.pause = np.zeros(num_links)
        self._lossless_q = np.array([cfg.queue_is_lossless(q) for q in range(cfg.queues)], bool)
        self._default_mask = np.zeros(cfg.queues, np.bool_)
        self._default_mask[cfg.default_queue] = True
        self._multi_class = False  # some flow is outside the default queue (`port_class`)
        self.num_timeouts = 0
        self.num_pauses = 0
        self._series: list[tuple[float, np.ndarray, np.ndarray]] = []
        self._series_n = 0
        self._pauses: list[tuple[float, int, float]] = []
        self._pos = np.full(num_links, -1, np.int64)  # scratch of `kernels.burst_peaks`
        # DCQCN's fixed point by capacity class and flow count (`_dcqcn_table`)
        self._dq_caps, cls = np.unique(self.cap_wire[self.is_net], return_inverse=True)
        self._dq_cls = np.zeros(num_links, np.int64)  # only network links ever hold a queue
        self._dq_cls[self.is_net] = cls
        self._dq_p = np.zeros((self._dq_caps.size, 1))
        self._dq_q = np.zeros((self._dq_caps.size, 1))
        self._now = 0.0
        self._start_cache: dict[tuple, float] = {}  # `_start_loss`

    # ---- hooks (called by the engine) ------------------------------------------------------
    def port_class(self, priority: int) -> int:
        """The port queue of a controller priority class (`NetworkConfig.queue_of`)."""
        q = self.cfg.queue_of(priority)
        if q != self.cfg.default_queue:
            self._multi_class = True  # from now on pauses look at each flow's class
        return q

    def on_rates(self, eng: Engine, comp: np.ndarray, now: float) -> None:
        """The engine re-allocated ``comp`` (old rates in ``rate``, new in ``rate_new``)."""
        f, lk = eng._f, eng._links
        self._now = now
        cfg = self.cfg
        tcp = cfg.model == "tcp"
        # per flow: base RTT, RTT with the standing queues on its path (what a starting flow's
        # round trips take), line rate; setup, slow start and convergence costs onto the flows'
        # latency; per link: load change, RTT, arrival potential; the first-window bursts
        fi, touched, nflows, new_load, rtt_l, hot, peak, ll, sat, ch_l, ch_q, need = rates_pass(
            comp, f.lo, f.hi, lk.link, lk.frac, f.rate, f.rate_new, f.rem, f.size, f.start, f.prio, f.lat,
            now, self.rtt_part, self.q, self.q_max, self.cap_wire, self.link_src, self.link_dst, self.is_net,
            eng._ls.load, eng._b_len, self.arrive, self._lossless_q, self._mark, self._s_dload, self._s_rtt,
            self._s_cnt, self._pos, tcp, cfg.setup_rtts, cfg.init_cwnd_packets * cfg.payload_bytes,
            cfg.slow_start_growth, cfg.payload_bytes, cfg.ramp_gain, cfg.dcqcn_timer_s,
            cfg.dcqcn_fast_recovery_steps, cfg.dcqcn_rai_bytes_per_s, self._wire_eff,
            cfg.init_cwnd_packets * self.pkt_wire, cfg.dcqcn_cnp_interval_s, cfg.pfc_xoff_bytes,
            cfg.port_buffer_bytes, self.q_t, self.q_int, self.mark, self.load, self.marked,
            self.src_is_switch, self.cap, _SAT_RTOL, cfg.ecn_kmin_bytes, self.pkt_wire,
            cfg.port_buffer_bytes if tcp else cfg.pfc_xoff_bytes, self._dq_cls, self._dq_p, self._dq_q)
        if not touched.size:
            return  # flows inside servers only: no network link, nothing to model
        if hot.size:  # a port fills: drops (lossy) or pauses (lossless)
            self._bursts(eng, comp[fi], hot, peak, ll)
        # per-link state after this update (done in the pass unless DCQCN's table must grow)
        if need >= 0:
            sat = self._set_links(touched, nflows, new_load, rtt_l, now)
        else:
            self._record(now, ch_l, ch_q)
        if tcp and fi.size and sat.any():
            sub = comp[fi]
            inc, own = _incidences(f.lo[sub], f.hi[sub])
            self._slow_start_exit(f, sub, lk.link[inc], own, touched[sat], nflows[sat], rtt_l[sat])

    def _slow_start_exit(self, f, sub: np.ndarray, links: np.ndarray, own: np.ndarray,
                         sat_links: np.ndarray, sat_n: np.ndarray, sat_rtt: np.ndarray) -> None:
        """The fresh flows ``sub`` that are all the flows of a congested port left slow start
        together there: each loses `fluid.dctcp_exit_loss_s` (DCTCP's first cut, ``alpha``
        from ``dctcp_alpha_init``). A port where steady flows are joined by new ones is left
        to the convergence ramp (the steady flows take up the new ones' cut)."""
        order = np.argsort(sat_links)
        pos = np.searchsorted(sat_links[order], links)
        pos = np.minimum(pos, sat_links.size - 1)
        on_sat = sat_links[order][pos] == links
        if not on_sat.any():
            return
        j = order[pos[on_sat]]
        cnt = np.bincount(j, minlength=sat_links.size)
        whole = cnt >= sat_n  # every flow of the port is a fresh one
        if not whole.any():
            return
        cfg = self.cfg
        lnk = sat_links
        loss_l = fluid.dctcp_exit_loss_s(sat_n.astype(np.float64), self.cap_wire[lnk] * sat_rtt,
                                         cfg.ecn_kmin_bytes, self.pkt_wire, self.cap_wire[lnk],
                                         cfg.dctcp_alpha_init)
        loss_l = np.where(whole, loss_l, 0.0)
        per_flow = np.zeros(sub.size)
        np.maximum.at(per_flow, own[on_sat], loss_l[j])
        f.lat[sub] += per_flow

    # The arrival potential of a link (`kernels.flow_pass`): the fastest its flows can arrive,
    # summed over the links they enter it by, each ingress at most its capacity and at most the
    # line rates (narrowest link of the path) of its flows. A port whose flows cannot arrive
    # faster than it drains builds no queue: a flow alone, or flows paced by one slower ingress.

    def on_done(self, eng: Engine, done: np.ndarray, now: float) -> None:
        """Flows ``done`` sent their last byte at ``now``; their links' queues follow the flows
        left. (A flow's finish gets no queueing delay here: the fluid engine already delivers
        a bottlenecked flow's bytes at the bottleneck's drain rate, the queue only moves when
        the source sent them; a short flow pays the queues on its path in its round trips,
        `on_rates`.)"""
        f, lk = eng._f, eng._links
        touched, _, ch_l, ch_q, need = done_pass(done, f.lo, f.hi, lk.link, self._mark, self.is_net,
                                                 eng._b_len, eng._ls.load, self.rtt_part, now,
                                                 *self._link_args())
        if need >= 0:  # DCQCN's table must grow first: nothing was touched
            self._set_links(touched, eng._b_len[touched], eng._ls.load[touched], self._rtt_of(touched), now)
        else:
            self._record(now, ch_l, ch_q)

    # ---- state ---------------------------------------------------------------------------
    def _rtt_of(self, links: np.ndarray) -> np.ndarray:
        # without the flows at hand: a three-hop round trip through the link (host-leaf-host)
        return 3.0 * self.rtt_part[links]

    def _link_args(self) -> tuple:
        """The per-link state and constants `kernels.link_update` takes after ``now``."""
        cfg = self.cfg
        tcp = cfg.model == "tcp"
        return (self.q, self.q_t, self.q_int, self.q_max, self.mark, self.load, self.marked,
                self.src_is_switch, self.arrive, self.cap, self.cap_wire, _SAT_RTOL, tcp, cfg.ecn_kmin_bytes,
                self.pkt_wire,
                cfg.port_buffer_bytes if tcp else cfg.pfc_xoff_bytes, self._dq_cls, self._dq_p, self._dq_q)

    def _record(self, now: float, ch_l: np.ndarray, ch_q: np.ndarray) -> None:
        if ch_l.size and self._series_n < _SERIES_MAX:
            self._series.append((now, ch_l, ch_q))
            self._series_n += ch_l.size

    def _set_links(self, links: np.ndarray, nflows: np.ndarray, load: np.ndarray, rtt: np.ndarray,
                   now: float) -> np.ndarray:
        """Update the queues of ``links`` (`kernels.link_update`); returns which of them are
        congested (hold a queue)."""
        while True:
            a = self._link_args()
            sat, ch_l, ch_q, need = link_update(links, nflows, load, rtt, now, *a[:7], self.is_net, *a[7:])
            if need < 0:
                break
            self._dcqcn_table(int(need))
        self._record(now, ch_l, ch_q)
        return sat

    def _dcqcn_table(self, n_max: int) -> None:
        """DCQCN's fixed point (`fluid.dcqcn_fixed_point`) for 0..``n_max`` flows per capacity
        class, grown on demand (doubling) so that `kernels.link_update` only looks it up."""
        have = self._dq_p.shape[1]
        if n_max < have:
            return
        width = max(2 * have, n_max + 1, 64)
        caps = self._dq_caps
        p = np.zeros((caps.size, width))
        qq = np.zeros((caps.size, width))
        p[:, :have], qq[:, :have] = self._dq_p, self._dq_q
        for c, cw in enumerate(caps.tolist()):
            for n in range(max(have, 1), width):
                p[c, n], qq[c, n] = self._dcqcn(n, cw)
        self._dq_p, self._dq_q = p, qq

    def _dcqcn(self, n: int, cap_wire: float) -> tuple[float, float]:
        c = self.cfg
        return _dcqcn_point(n, cap_wire, self.pkt_wire, c.ecn_kmin_bytes, c.ecn_kmax_bytes, c.ecn_pmax,
                            c.dcqcn_timer_s, c.dcqcn_byte_counter_bytes, c.dcqcn_fast_recovery_steps,
                            c.dcqcn_rai_bytes_per_s, c.dcqcn_cnp_interval_s, c.dcqcn_alpha_interval_s)

    def _bursts(self, eng: Engine, comp: np.ndarray, hot: np.ndarray, peak: np.ndarray,
                ll: np.ndarray) -> None:
        """The first-window bursts of the fresh flows ``comp`` fill the ports ``hot`` to ``peak``
        (`kernels.burst_peaks`; ``ll``: a lossless flow is among them): lossy ports above the
        buffer drop, lossless ones above PFC Xoff pause their upstream links. The extra time
        goes onto the flows' latency (victims of a pause get theirs directly)."""
        cfg, f, lk = self.cfg, eng._f, eng._links
        extra = np.zeros(comp.size)
        drop = ~ll & (peak > cfg.port_buffer_bytes)
        pausing = np.flatnonzero(ll & (peak > cfg.pfc_xoff_bytes))
        # the start transient needs every flow of the port among the fresh ones: at most comp.size
        n_port = eng._b_len[hot]
        start = (ll & (peak > 0) & self.src_is_switch[hot] & (n_port >= 2) & (n_port <= comp.size)
                 if cfg.model == "roce" else ll[:0])
        if drop.any() or (pausing.size and self._multi_class) or start.any():
            inc, own = _incidences(f.lo[comp], f.hi[comp])
            links = lk.link[inc]
        if drop.any():
            self._drop(f, comp, links, own, hot, peak, drop, extra)
        if start.any():
            self._dcqcn_start(eng, comp, links, own, hot[start], extra)
        if pausing.size and self._multi_class:
            # PFC pauses per priority (IEEE 802.1Qbb): the lossless classes of the burst's flows
            prio_inc = f.prio[comp[own]]
            lossless_inc = self.is_net[links] & self._lossless_q[prio_inc]
        for j in pausing.tolist():
            lnk = int(hot[j])
            t_pause = float(peak[j] - cfg.pfc_xon_bytes) / self.cap_wire[lnk]
            if self._multi_class:
                cls_mask = np.zeros(cfg.queues, np.bool_)
                cls_mask[prio_inc[lossless_inc & (links == lnk)]] = True
            else:  # every flow in the default queue (a lossless one: a flow of it paused the port)
                cls_mask = self._default_mask
            self._pause_upstream(eng, lnk, t_pause, comp, extra, 0, cls_mask, hold=lnk)
        f.lat[comp] += extra

    def _dcqcn_start(self, eng: Engine, comp: np.ndarray, links: np.ndarray, own: np.ndarray,
                     ports: np.ndarray, extra: np.ndarray) -> None:
        """The fresh flows ``comp`` that are all the flows of a switch port among ``ports`` start
        there together at their line rates: each loses DCQCN's start transient
        (`dcqcn.start_loss_s`: rates cut below the port's share while the queue, held at PFC's
        Xoff per ingress, stays marked), for ``n`` flows of the port's mean size and line share
        and the port's ingress queues. A port where steady flows are joined by new ones is left
        to the convergence ramp. A flow on several such ports takes the largest loss."""
        f = eng._f
        first = np.full(comp.size, -1, np.int64)  # each flow's first network link: its NIC's
        net_inc = self.is_net[links]
        rev = np.flatnonzero(net_inc)[::-1]
        first[own[rev]] = links[rev]  # the last write per flow is its first network incidence
        k_first = np.bincount(first[first >= 0], minlength=self.cap_wire.size)
        per_flow = np.zeros(comp.size)
        for lnk in ports.tolist():
            sel = np.unique(own[links == lnk])
            n = sel.size
            if n < 2 or n < eng._b_len[lnk]:
                continue
            fl = comp[sel]
            size_wire = float(f.rem[fl].mean()) / self._wire_eff
            ok = first[sel] >= 0
            line = float(np.mean(self.cap_wire[first[sel][ok]] / k_first[first[sel][ok]])) if ok.any() \
                else float(self.cap_wire[lnk])
            loss = self._start_loss(n, size_wire, line, float(self.cap_wire[lnk]),
                                    self._tree_ingress(eng, fl))
            np.maximum.at(per_flow, sel, loss)
        extra += per_flow

    def _tree_ingress(self, eng: Engine, fl: np.ndarray) -> int:
        """The most ingress links the flows ``fl`` enter one switch port of their paths by. A
        port held at PFC's Xoff per ingress queue pauses the links into it, their queues fill in
        turn (congestion spreading), and the queue that DCQCN's marks come from is the largest
        of the tree: the port where the most ingress queues, each at Xoff, converge."""
        f, lk = eng._f, eng._links
        inc, own = _incidences(f.lo[fl], f.hi[fl])
        links = lk.link[inc]
        same = own[1:] == own[:-1]  # consecutive incidences of one flow: (upstream, link)
        up, dn = links[:-1][same], links[1:][same]
        keep = self.is_net[dn] & self.src_is_switch[dn] & (self.link_dst[up] == self.link_src[dn])
        if not keep.any():
            return 1
        pairs = np.unique(dn[keep] * self.cap_wire.size + up[keep])
        return int(np.bincount(pairs // self.cap_wire.size).max())

    def _start_loss(self, n: int, size_wire: float, line: float, cap: float, n_in: int) -> float:
        # memoized on a grid of 1% in size and line share (a cluster run repeats the same starts)
        key = (n, round(float(np.log(max(size_wire, 1.0))) * 100), round(float(np.log(line)) * 100), cap,
               n_in)
        hit = self._start_cache.get(key)
        if hit is None:
            c = self.cfg
            hit = self._start_cache[key] = dcqcn.start_loss_s(
                n, size_wire, line, cap, n_in, c.pfc_xoff_bytes, c.ecn_kmin_bytes, c.ecn_kmax_bytes,
                c.ecn_pmax, self.pkt_wire, c.dcqcn_cnp_interval_s, c.dcqcn_alpha_interval_s, c.dcqcn_timer_s,
                c.dcqcn_fast_recovery_steps, c.dcqcn_rai_bytes_per_s, 10.0 * c.dcqcn_rai_bytes_per_s,
                c.dcqcn_g, _DCQCN_MIN_RATE)
        return hit

    def _drop(self, f, comp: np.ndarray, links: np.ndarray, own: np.ndarray, hot: np.ndarray,
              peak: np.ndarray, drop: np.ndarray, extra: np.ndarray) -> None:
        """Lossy ports ``hot[drop]`` overflow: the excess is dropped and the flows whose first
        windows were lost wait a retransmission timeout (module docstring)."""
        cfg = self.cfg
        sel = self.is_net[links]
        li, fi = links[sel], own[sel]
        lossless_f = self._lossless_q[np.clip(f.prio[comp], 0, cfg.queues - 1)]
        timed_out = np.zeros(comp.size, bool)  # a flow waits one timeout for its lost window
        for j in np.flatnonzero(drop).tolist():
            lnk = int(hot[j])
            over = float(peak[j] - cfg.port_buffer_bytes)
            self.drops[lnk] += over
            on = np.unique(fi[li == lnk])  # fresh flows on the port, in id order: the last lose
            on = on[~lossless_f[on]]
            k = min(on.size, int(np.ceil(over / (cfg.init_cwnd_packets * self.pkt_wire))))
            hit = on[on.size - k:] if k else on[:0]
            hit = hit[~timed_out[hit]]
            extra[hit] += cfg.min_rto_s
            timed_out[hit] = True
            self.num_timeouts += hit.size

    def _pfc_hold(self, eng: Engine, lnk: int) -> tuple[float, float] | None:
        """Whether lossless port ``lnk`` stays PFC-bound after its first burst: DCQCN's fixed-point
        queue for its flows (`fluid.dcqcn_fixed_point`) above Xoff times its ingress queues (PFC
        counts per ingress queue), so the links into it keep being paused for as long as its
        flows last. Then (the share of one of its flows, that time), else None."""
        n = int(eng._b_len[lnk])
        if n < 2 or not self.src_is_switch[lnk]:
            return None
        f, lk = eng._f, eng._links
        b0 = eng._b_start[lnk]
        on_port = eng._b_flow[b0:b0 + n]
        n_in = upstream_links(on_port, f.lo, f.hi, lk.link, self.link_dst, self.link_src[lnk],
                              self._mark).size
        if self._dcqcn(n, float(self.cap_wire[lnk]))[1] <= self.cfg.pfc_xoff_bytes * max(n_in, 1):
            return None
        cap = float(self.cap[lnk])
        return cap / n, float(f.rem[on_port].sum()) / cap

    def _pause_upstream(self, eng: Engine, lnk: int, t_pause: float, comp: np.ndarray,
                        extra: np.ndarray, depth: int, cls_mask: np.ndarray,
                        order: tuple[np.ndarray, np.ndarray] | None = None,
                        hold: tuple[float, float] | int | None = None) -> None:
        """Port ``lnk`` pauses, for ``t_pause``, the priority classes ``cls_mask`` (per queue) of the
        links into its switch that feed it: a victim is a flow of one of those classes (PFC
        stops one priority of a link, IEEE 802.1Qbb; the other classes keep moving). What piles
        up before a paused link is its load times the pause, scaled by the paused classes'
        share of its flows.

        A port that stays PFC-bound (``hold``: `_pfc_hold`, or the port to ask it of, asked once
        a paused class has flows on a paused link) keeps pausing the links into it for
        as long as its flows last (``t_c``): a paused link's FIFO then moves the victims' bytes
        at the pace of the congested flows', and the switches upstream serve their ingress
        queues in turn, so a victim moves at about the share ``r_c`` of one congested flow
        (the congestion tree's head-of-line blocking; Guo et al., SIGCOMM 2016, Sec. 4). A
        victim with ``rem`` bytes at rate ``r`` then loses ``rem / r_c - rem / r`` if it ends
        within ``t_c``, else ``t_c (1 - r_c / r)`` (at least ``t_pause``)."""
        if depth >= _PFC_DEPTH or not self.src_is_switch[lnk]:
            return  # a NIC's own queue: the host just waits (its flows are the congested ones)
        f, lk = eng._f, eng._links
        if order is None:
            o = np.argsort(comp, kind="stable")
            order = (comp[o], o)
        b0, bn = eng._b_start[lnk], eng._b_len[lnk]
        on_port = eng._b_flow[b0:b0 + bn]
        ups = upstream_links(on_port, f.lo, f.hi, lk.link, self.link_dst, self.link_src[lnk], self._mark)
        on_sorted = np.sort(on_port)
        for u in ups.tolist():
            self.pause[u] += t_pause
            self.num_pauses += 1
            if len(self._pauses) < _SERIES_MAX:
                self._pauses.append((self._now, u, t_pause))
            u0, un = eng._b_start[u], eng._b_len[u]
            # a paused class moves nothing on the link: each of its victims loses t_pause
            n_cls = pause_victims(eng._b_flow[u0:u0 + un], f.prio, cls_mask, on_sorted, order[0], order[1],
                                  t_pause, extra, f.lat)
            if isinstance(hold, int) and n_cls:
                hold = self._pfc_hold(eng, hold)
            if hold is not None and not isinstance(hold, int) and n_cls:
                self._held_victims(f, eng._b_flow[u0:u0 + un], cls_mask, on_sorted, order, t_pause, hold,
                                   extra)
            share = 1.0 if n_cls == un else n_cls / un
            backlog = float(eng._ls.load[u]) * t_pause * share  # what piles up before the paused link
            if backlog > self.cfg.pfc_xoff_bytes:
                self._pause_upstream(eng, u, (backlog - self.cfg.pfc_xon_bytes) / self.cap_wire[u], comp,
                                     extra, depth + 1, cls_mask, order, hold)

    @staticmethod
    def _held_victims(f, flows_u: np.ndarray, cls_mask: np.ndarray, on_sorted: np.ndarray,
                      order: tuple[np.ndarray, np.ndarray], t_pause: float, hold: tuple[float, float],
                      extra: np.ndarray) -> None:
        """The victims of a link a PFC-bound port keeps pausing (`_pause_upstream`, ``hold``) lose
        what moving at the congested flows' share costs them beyond the ``t_pause`` they got."""
        r_c, t_c = hold
        v = flows_u[cls_mask[f.prio[flows_u]]]
        v = v[~np.isin(v, on_sorted)]
        r = np.maximum(f.rate_new[v], 1e-300)
        v, r = v[r > r_c], r[r > r_c]
        if not v.size:
            return
        rem = f.rem[v]
        loss = np.where(rem <= r_c * t_c, rem / r_c - rem / r, t_c * (1.0 - r_c / r))
        more = np.maximum(loss - t_pause, 0.0)
        j = np.minimum(np.searchsorted(order[0], v), order[0].size - 1)
        fresh = order[0][j] == v
        np.add.at(extra, order[1][j[fresh]], more[fresh])
        f.lat[v[~fresh]] += more[~fresh]

    # ---- output --------------------------------------------------------------------------
    def stats(self, now: float) -> NetworkStats:
        """A snapshot of the per-link records up to ``now``."""
        dt = now - self.q_t
        q_int = self.q_int + self.q * dt
        marked = self.marked + self.load * self.mark * dt
        if self._series:
            t = np.concatenate([np.full(s[1].size, s[0]) for s in self._series])
            lnk = np.concatenate([s[1] for s in self._series])
            qb = np.concatenate([s[2] for s in self._series])
        else:
            t, lnk, qb = np.zeros(0), np.zeros(0, np.int64), np.zeros(0)
        return NetworkStats(model=self.cfg.model, now_s=now,
                            queue_mean_bytes=q_int / now if now > 0 else np.zeros_like(q_int),
                            queue_max_bytes=self.q_max.copy(), pause_s=self.pause.copy(),
                            ecn_marked_bytes=marked, drop_bytes=self.drops.copy(), series_t_s=t,
                            series_link=lnk, series_queue_bytes=qb,
                            pause_t_s=np.array([p[0] for p in self._pauses], dtype=np.float64),
                            pause_link=np.array([p[1] for p in self._pauses], dtype=np.int64),
                            pause_dur_s=np.array([p[2] for p in self._pauses], dtype=np.float64),
                            num_timeouts=self.num_timeouts,
                            num_pauses=self.num_pauses)
