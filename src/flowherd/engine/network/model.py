"""The congestion model an `Engine` consults: what queues, marks, pauses and drops cost flows.

The engine keeps sharing links max-min (`flowherd.engine.fairshare`); this model sits beside it
and, through three marked hooks in `flowherd.engine.core`, turns the ideal allocation into what
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
* **ACKs behind the receiver's own data** (same hook, ``tcp`` with a receive window
  ``rwnd_bytes``): a flow whose receiver's NIC queues its own flows' window excess waits that
  queue on every ACK (`flowherd.engine.network.ack_path`).
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

from flowherd.engine.network import fluid, packed
from flowherd.engine.network.ack_path import AckPath
from flowherd.engine.network.burst_kernels import burst_apply, burst_members
from flowherd.engine.network.config import NetworkConfig
from flowherd.engine.network.kernels import link_update
from flowherd.engine.network.packed import done_step, rates_step
from flowherd.fabric.core import Fabric, LinkKind, NodeKind

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState

__all__ = ["NetworkModel", "NetworkStats"]

_SAT_RTOL = 1e-6  # a link loaded to within this of its capacity holds a standing queue
_SERIES_MAX = packed.SERIES_MAX  # queue samples kept (the rest of a long run is dropped, counted)
_PFC_DEPTH = packed.PFC_DEPTH  # hops a pause may spread upstream
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
        # the per-link state in three flat arrays (`packed`: a compiled call takes three arguments,
        # not twenty-five); each attribute is a view of its row
        self._lf = np.zeros(len(packed.LF) * num_links)
        self._li = np.zeros(len(packed.LI) * num_links, np.int64)
        self._lb = np.zeros(len(packed.LB) * num_links, np.bool_)
        row = {**{k: self._lf[i * num_links:(i + 1) * num_links] for i, k in enumerate(packed.LF)},
               **{k: self._li[i * num_links:(i + 1) * num_links] for i, k in enumerate(packed.LI)},
               **{k: self._lb[i * num_links:(i + 1) * num_links] for i, k in enumerate(packed.LB)}}
        self.rtt_part = row["rtt_part"]
        self.rtt_part[:] = 2.0 * lat + np.where(self.is_net, self.pkt_wire / self.cap_wire, 0.0)
        row["is_net"][:] = self.is_net
        row["cap_wire"][:] = self.cap_wire
        row["cap"][:] = self.cap
        self.is_net, self.cap_wire, self.cap = row["is_net"], row["cap_wire"], row["cap"]
        self.link_src, self.link_dst = row["link_src"], row["link_dst"]
        self.link_src[:] = fabric.link_src
        self.link_dst[:] = fabric.link_dst
        self.src_is_switch = row["src_is_switch"]
        self.src_is_switch[:] = np.asarray(fabric.node_kind)[self.link_src] == NodeKind.SWITCH
        self.q, self.q_t, self.q_int, self.q_max = row["q"], row["q_t"], row["q_int"], row["q_max"]
        self.mark, self.load, self.marked = row["mark"], row["load"], row["marked"]
        self.arrive = row["arrive"]  # arrival potential (below), bytes per second
        self._mark = row["scratch"]
        self._s_dload, self._s_rtt, self._s_cnt = row["s_dload"], row["s_rtt"], row["s_cnt"]
        self.drops, self.pause = row["drops"], row["pause"]
        self._lossless_q = np.array([cfg.queue_is_lossless(q) for q in range(cfg.queues)], bool)
        self._default_mask = np.zeros(cfg.queues, np.bool_)
        self._default_mask[cfg.default_queue] = True
        self._ms = np.zeros(len(packed.MS), np.int64)  # counters and flags (`packed.MS`)
        self._series: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (times, links, queues)
        # the queue changes the event loop records (`packed.record_series`), emptied into
        # `_series` before Python records one and when full; _ser_n: (in the buffer, kept in all)
        room = max(4 * num_links, 1 << 14)
        self._ser_t, self._ser_l, self._ser_q = np.zeros(room), np.zeros(room, np.int64), np.zeros(room)
        self._ser_n = np.zeros(2, np.int64)
        # what `packed.loop_rates` hands over (`loop_rates_rest`)
        self._ho_i = np.zeros(4 + 4 * num_links, np.int64)
        self._ho_f = np.zeros(3 * num_links)
        self._pauses: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (starts, links, durations)
        # likewise the pause episodes the event loop records (counts in `_ms`)
        self._pz_t, self._pz_l, self._pz_d = np.zeros(room), np.zeros(room, np.int64), np.zeros(room)
        # `_start_loss`'s memo (`packed.start_loss_memo`), 1024 slots to begin with
        self._mk_i, self._mk_f = np.zeros(5 * 1024, np.int64), np.zeros(2 * 1024)
        self._fpos = np.full(0, -1, np.int64)  # per-flow scratch of `burst_kernels.burst_apply`
        self._fmark = np.zeros(0, np.int64)
        self._pos = row["pos"]  # scratch of `kernels.burst_peaks`, -1 between calls
        self._pos[:] = -1
        # DCQCN's fixed point by capacity class and flow count (`_dcqcn_fill`)
        self._dq_caps, cls = np.unique(self.cap_wire[self.is_net], return_inverse=True)
        self._dq_cls = row["dq_cls"]  # only network links ever hold a queue
        self._dq_cls[self.is_net] = cls
        self._dq_p = np.full((self._dq_caps.size, 64), np.nan)
        self._dq_q = np.full((self._dq_caps.size, 64), np.nan)
        self._now = 0.0
        self._dq_args = self._dq_views()
        # the constants of `packed.rates_step` / `done_step`, in the order of `packed.CF`, `packed.CI`
        tcp = cfg.model == "tcp"
        self._tcp = tcp
        k_bytes = float(cfg.ecn_kmin_bytes)
        q_cap = float(cfg.port_buffer_bytes if tcp else cfg.pfc_xoff_bytes)
        cf = dict(iw=cfg.init_cwnd_packets * cfg.payload_bytes, growth=cfg.slow_start_growth,
                  mss=cfg.payload_bytes, ramp_gain=cfg.ramp_gain, dcqcn_timer=cfg.dcqcn_timer_s,
                  dcqcn_rai=cfg.dcqcn_rai_bytes_per_s, wire_eff=self._wire_eff,
                  iw_wire=cfg.init_cwnd_packets * self.pkt_wire, cnp_interval=cfg.dcqcn_cnp_interval_s,
                  pfc_xoff=cfg.pfc_xoff_bytes, port_buffer=cfg.port_buffer_bytes, sat_rtol=_SAT_RTOL,
                  k_bytes=k_bytes, pkt_bytes=self.pkt_wire, q_cap_bytes=q_cap)
        self._cf = np.array([float(cf[k]) for k in packed.CF])
        self._cf_named = cf
        self._buffer, self._xoff = float(cfg.port_buffer_bytes), float(cfg.pfc_xoff_bytes)
        ci = dict(tcp=int(tcp), setup_rtts=cfg.setup_rtts, dcqcn_steps=cfg.dcqcn_fast_recovery_steps)
        self._ci = np.array([int(ci[k]) for k in packed.CI], np.int64)
        # the bursts' constants (`packed.BF`): what `dcqcn.start_loss_stepped_s` takes besides
        # the port, start_loss_s's step and horizon last
        bf = dict(xon=cfg.pfc_xon_bytes, min_rto=cfg.min_rto_s, xoff=cfg.pfc_xoff_bytes,
                  kmin=cfg.ecn_kmin_bytes, kmax=cfg.ecn_kmax_bytes, pmax=cfg.ecn_pmax, pkt=self.pkt_wire,
                  cnp_interval=cfg.dcqcn_cnp_interval_s, alpha_interval=cfg.dcqcn_alpha_interval_s,
                  timer=cfg.dcqcn_timer_s, rai=cfg.dcqcn_rai_bytes_per_s,
                  rhai=10.0 * cfg.dcqcn_rai_bytes_per_s,
                  g=cfg.dcqcn_g, min_rate=_DCQCN_MIN_RATE, dt=1e-6, t_max=0.05)
        self._bf = np.array([float(bf[k]) for k in packed.BF])
        # `kernels.link_update`'s per-link state and constants (`_link_args`)
        self._lu_args = (self.q, self.q_t, self.q_int, self.q_max, self.mark, self.load, self.marked,
                         self.src_is_switch, self.arrive, self.cap, self.cap_wire, _SAT_RTOL, tcp, k_bytes,
                         float(self.pkt_wire), q_cap, self._dq_cls)
        # ACKs behind the receiver's own data (tcp with a receive window only)
        self._ack = None if not (tcp and cfg.rwnd_bytes) else AckPath(
            fabric, rwnd_bytes=cfg.rwnd_bytes, init_window_bytes=cf["iw"], growth=cfg.slow_start_growth,
            setup_rtts=cfg.setup_rtts, is_net=self.is_net, cap=self.cap, cap_wire=self.cap_wire,
            rtt_part=self.rtt_part, q=self.q)

    num_timeouts = property(lambda self: int(self._ms[packed.MS.index("timeouts")]),
                            lambda self, v: self._ms.__setitem__(packed.MS.index("timeouts"), v),
                            doc="Retransmission timeouts taken so far.")
    num_pauses = property(lambda self: int(self._ms[packed.MS.index("pauses")]),
                          lambda self, v: self._ms.__setitem__(packed.MS.index("pauses"), v),
                          doc="PFC pause episodes so far.")
    # some flow is outside the default queue (`port_class`): pauses look at each flow's class
    _multi_class = property(lambda self: bool(self._ms[packed.MS.index("multi_class")]),
                            lambda self, v: self._ms.__setitem__(packed.MS.index("multi_class"), int(v)))

    @property
    def in_loop(self) -> bool:
        """Whether the engine's event loop runs the hooks itself (`packed.loop_done`,
        `packed.loop_rates`): ``roce`` with this class's hooks (a subclass, as the tests'
        reference, and ``tcp`` take the Python hooks)."""
        return type(self) is NetworkModel and not self._tcp

    def loop_args(self, eng: EngineState) -> tuple:
        """The state and constants `flowherd.engine.event_loop.run_events` takes for the hooks of
        engine ``eng`` (the per-flow scratch made as long as its flow columns)."""
        self._flow_room(eng._f.rem.size)
        return (self._lossless_q, self._default_mask, self._lf, self._li, self._lb, self._cf, self._ci,
                self._bf, self._ms, *self._dq_args, self._ser_t, self._ser_l, self._ser_q, self._ser_n,
                self._mk_i, self._mk_f, self._pz_t, self._pz_l, self._pz_d, self._fpos, self._fmark,
                self._ho_i, self._ho_f)

    def _flow_room(self, n: int) -> None:
        if self._fpos.size < n:
            self._fpos = np.full(n, -1, np.int64)
            self._fmark = np.zeros(n, np.int64)

    def loop_rates_rest(self, eng: EngineState, comp: np.ndarray, now: float) -> None:
        """The rest of `on_rates` after the event loop's `packed.loop_rates` handed it over:
        the bursts, the links' update where DCQCN's table lacked an entry."""
        self._now = now
        h, hf = self._ho_i, self._ho_f
        nf, nh, nt, need = (int(x) for x in h[:4])
        if nh:
            self._memo_room(nh)  # what the loop's bursts ask next time
            self._bursts(eng, comp[eng._fi_buf[:nf]], h[4:4 + nh].copy(), hf[:nh].copy(),
                         h[4 + nh:4 + 2 * nh] != 0)
        if need >= 0:
            k = 4 + 2 * nh
            self._set_links(h[k:k + nt].copy(), h[k + nt:k + 2 * nt].copy(), hf[nh:nh + nt].copy(),
                            hf[nh + nt:nh + 2 * nt].copy(), now)

    def flush_records(self) -> None:
        """The event loop's queue changes and pause episodes into the records."""
        k = int(self._ser_n[0])
        if k:
            self._series.append((self._ser_t[:k].copy(), self._ser_l[:k].copy(), self._ser_q[:k].copy()))
            self._ser_n[0] = 0
        ms = packed.MS.index("pz_buf")
        k = int(self._ms[ms])
        if k:
            self._pauses.append((self._pz_t[:k].copy(), self._pz_l[:k].copy(), self._pz_d[:k].copy()))
            self._ms[ms] = 0

    def _dq_views(self) -> tuple[np.ndarray, np.ndarray, int]:
        # DCQCN's table as the kernels take it: flat rows of one width
        return self._dq_p.reshape(-1), self._dq_q.reshape(-1), int(self._dq_q.shape[1])

    # ---- hooks (called by the engine) ------------------------------------------------------
    def port_class(self, priority: int) -> int:
        """The port queue of a controller priority class (`NetworkConfig.queue_of`)."""
        q = self.cfg.queue_of(priority)
        if q != self.cfg.default_queue:
            self._multi_class = True  # from now on pauses look at each flow's class
        return q

    def on_rates(self, eng: EngineState, comp: np.ndarray, now: float) -> None:
        """The engine re-allocated ``comp`` (old rates in ``rate``, new in ``rate_new``)."""
        f, lk = eng._f, eng._links
        self._now = now
        tcp = self._tcp
        # per flow: base RTT, RTT with the standing queues on its path (what a starting flow's
        # round trips take), line rate; setup, slow start and convergence costs onto the flows'
        # latency; per link: load change, RTT, arrival potential; the first-window bursts
        fi, touched, nflows, new_load, rtt_l, hot, peak, ll, sat, ch_l, ch_q, need = rates_step(
            comp, f.lo, f.hi, lk.link, lk.frac, f.rate, f.rate_new, f.rem, f.size, f.start, f.prio, f.lat,
            now, eng._ls.load, eng._b_len, self._lossless_q, self._lf, self._li, self._lb, self._cf, self._ci,
            *self._dq_args)
        if not touched.size:
            return  # flows inside servers only: no network link, nothing to model
        if hot.size:  # a port fills: drops (lossy) or pauses (lossless)
            self._bursts(eng, comp[fi], hot, peak, ll)
        # per-link state after this update (done in the pass unless DCQCN's table lacks an entry)
        if need >= 0:
            sat = self._set_links(touched, nflows, new_load, rtt_l, now)
        else:
            self._record(now, ch_l, ch_q)
        if tcp and fi.size and sat.any():
            sub = comp[fi]
            inc, own = _incidences(f.lo[sub], f.hi[sub])
            self._slow_start_exit(f, sub, lk.link[inc], own, touched[sat], nflows[sat], rtt_l[sat])
        if self._ack is not None and fi.size:
            self._ack.on_start(eng, comp, comp[fi], now)

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

    def on_done(self, eng: EngineState, done: np.ndarray, now: float) -> None:
        """Flows ``done`` sent their last byte at ``now``; their links' queues follow the flows
        left. (A flow's finish gets no queueing delay here: the fluid engine already delivers
        a bottlenecked flow's bytes at the bottleneck's drain rate, the queue only moves when
        the source sent them; a short flow pays the queues on its path in its round trips,
        `on_rates`.)"""
        f, lk = eng._f, eng._links
        touched, _, ch_l, ch_q, need = done_step(done, f.lo, f.hi, lk.link, eng._b_len, eng._ls.load, now,
                                                 self._lf, self._li, self._lb, self._cf, self._ci,
                                                 *self._dq_args)
        if need >= 0:  # DCQCN's table needs an entry first: nothing was touched
            self._set_links(touched, eng._b_len[touched], eng._ls.load[touched], self._rtt_of(touched), now)
        else:
            self._record(now, ch_l, ch_q)

    # ---- state ---------------------------------------------------------------------------
    def _rtt_of(self, links: np.ndarray) -> np.ndarray:
        # without the flows at hand: a three-hop round trip through the link (host-leaf-host)
        return 3.0 * self.rtt_part[links]

    def _link_args(self) -> tuple:
        """The per-link state and constants `kernels.link_update` takes after ``now``."""
        return (*self._lu_args, *self._dq_args)

    def _record(self, now: float, ch_l: np.ndarray, ch_q: np.ndarray) -> None:
        self.flush_records()  # in the order they happened
        if ch_l.size and self._ser_n[1] < _SERIES_MAX:
            self._series.append((np.full(ch_l.size, now), ch_l, ch_q))
            self._ser_n[1] += ch_l.size

    def _set_links(self, links: np.ndarray, nflows: np.ndarray, load: np.ndarray, rtt: np.ndarray,
                   now: float) -> np.ndarray:
        """Update the queues of ``links`` (`kernels.link_update`); returns which of them are
        congested (hold a queue)."""
        while True:
            a = self._link_args()
            sat, ch_l, ch_q, need = link_update(links, nflows, load, rtt, now, *a[:7], self.is_net, *a[7:])
            if need < 0:
                break
            self._dcqcn_fill(links[need:need + 1], nflows[need:need + 1])
        self._record(now, ch_l, ch_q)
        return sat

    def _dcqcn_fill(self, links: np.ndarray, nflows: np.ndarray) -> None:
        """DCQCN's fixed point (`fluid.dcqcn_fixed_point`) for ``nflows`` flows on each of
        ``links``, into the table `kernels.link_update` looks it up in (per capacity class and
        flow count; an entry is solved the first time a port needs it, NaN until then)."""
        for lnk, n in zip(links.tolist(), nflows.tolist(), strict=True):
            have = self._dq_q.shape[1]
            if n >= have:
                width = max(2 * have, n + 1)
                p = np.full((self._dq_caps.size, width), np.nan)
                qq = p.copy()
                p[:, :have], qq[:, :have] = self._dq_p, self._dq_q
                self._dq_p, self._dq_q = p, qq
                self._dq_args = self._dq_views()
            c = self._dq_cls[lnk]
            if np.isnan(self._dq_q[c, n]):
                self._dq_p[c, n], self._dq_q[c, n] = self._dcqcn(n, float(self._dq_caps[c]))

    def _dcqcn(self, n: int, cap_wire: float) -> tuple[float, float]:
        c = self.cfg
        return _dcqcn_point(n, cap_wire, self.pkt_wire, c.ecn_kmin_bytes, c.ecn_kmax_bytes, c.ecn_pmax,
                            c.dcqcn_timer_s, c.dcqcn_byte_counter_bytes, c.dcqcn_fast_recovery_steps,
                            c.dcqcn_rai_bytes_per_s, c.dcqcn_cnp_interval_s, c.dcqcn_alpha_interval_s)

    def _bursts(self, eng: EngineState, comp: np.ndarray, hot: np.ndarray, peak: np.ndarray,
                ll: np.ndarray) -> None:
        """The first-window bursts of the fresh flows ``comp`` fill the ports ``hot`` to ``peak``
        (`kernels.burst_peaks`; ``ll``: a lossless flow is among them): lossy ports above the
        buffer drop (the flows whose first windows were lost wait a retransmission timeout,
        module docstring), lossless ones above PFC Xoff pause their upstream links
        (`burst_kernels.burst_apply`), and where the fresh flows are all the flows of a switch
        port they pay DCQCN's start transient (`_start_loss`). The extra time goes onto the
        flows' latency (victims of a pause get theirs directly)."""
        cfg, f, lk, cf = self.cfg, eng._f, eng._links, self._cf_named
        while True:
            drop, pausing, ptr, idx, ok, n, size_wire, line, n_in, need = burst_members(
                comp, f.lo, f.hi, lk.link, self.is_net, hot, peak, ll, cfg.model == "roce", self._buffer,
                self._xoff, self._pos, eng._b_len, f.rem, self.cap_wire, self._wire_eff, self.link_src,
                self.link_dst, self.src_is_switch, self._mark, self._dq_cls, *self._dq_args[1:])
            if need < 0:
                break
            # a pausing port may be PFC-bound (`burst_kernels.burst_apply`): DCQCN's queue for its
            # flows, solved once
            ports = hot[pausing & (eng._b_len[hot] >= 2) & self.src_is_switch[hot]]
            self._dcqcn_fill(ports, eng._b_len[ports])
        start_loss = np.full(hot.size, np.nan)
        if ok.any():
            for j in np.flatnonzero(ok).tolist():
                start_loss[j] = self._start_loss(int(n[j]), float(size_wire[j]), float(line[j]),
                                                 float(self.cap_wire[hot[j]]), int(n_in[j]))
        elif not (drop.any() or pausing.any()):
            return
        self._flow_room(f.rem.size)
        n_to, n_rec, rec_u, rec_t = burst_apply(
            comp, f.lo, f.hi, lk.link, self.is_net, f.prio, f.rate_new, f.rem, f.lat, eng._b_start,
            eng._b_len, eng._b_flow, self.link_src, self.link_dst, self.src_is_switch, self.cap,
            self.cap_wire, eng._ls.load, self._lossless_q, self._default_mask, self._multi_class, hot, peak,
            drop, pausing, start_loss, ptr, idx, self.drops, self.pause, self._dq_cls, *self._dq_args[1:],
            self._buffer, self._xoff, float(cfg.pfc_xon_bytes), float(cfg.min_rto_s), float(cf["iw_wire"]),
            _PFC_DEPTH, self._fpos, self._fmark, self._mark)
        self.num_timeouts += n_to
        self.num_pauses += n_rec
        self._add_pauses(rec_u, rec_t)

    def _add_pauses(self, links: np.ndarray, dur_s: np.ndarray) -> None:
        # the pause episodes' records, at most _SERIES_MAX in all (the rest only counted)
        self.flush_records()  # in the order they happened
        kept = packed.MS.index("pz_kept")
        k = min(links.size, _SERIES_MAX - int(self._ms[kept]))
        if k > 0:
            self._pauses.append((np.full(k, self._now), links[:k].copy(), dur_s[:k].copy()))
            self._ms[kept] += k

    def _start_loss(self, n: int, size_wire: float, line: float, cap: float, n_in: int) -> float:
        # memoized on a grid of 1% in size and line share (`packed.start_loss_memo`, which the
        # event loop's bursts share); the table kept at most half full
        self._memo_room(1)
        return packed.start_loss_memo(int(n), float(size_wire), float(line), float(cap), int(n_in),
                                      self._mk_i, self._mk_f, self._ms, self._bf,
                                      int(self.cfg.dcqcn_fast_recovery_steps))

    def _memo_room(self, k: int) -> None:
        # room in the memo for k more entries, at most half full (doubled and rehashed)
        while 2 * (int(self._ms[packed.MS.index("memo_n")]) + k) > self._mk_f.size // 2:
            slots = self._mk_f.size // 2
            mk_i, mk_f = np.zeros(10 * slots, np.int64), np.zeros(4 * slots)
            packed.memo_rehash(self._mk_i, self._mk_f, mk_i, mk_f)
            self._mk_i, self._mk_f = mk_i, mk_f

    # ---- output --------------------------------------------------------------------------
    def stats(self, now: float) -> NetworkStats:
        """A snapshot of the per-link records up to ``now``."""
        dt = now - self.q_t
        q_int = self.q_int + self.q * dt
        marked = self.marked + self.load * self.mark * dt
        self.flush_records()
        if self._series:
            t = np.concatenate([s[0] for s in self._series])
            lnk = np.concatenate([s[1] for s in self._series])
            qb = np.concatenate([s[2] for s in self._series])
        else:
            t, lnk, qb = np.zeros(0), np.zeros(0, np.int64), np.zeros(0)
        z = np.zeros(0)
        return NetworkStats(model=self.cfg.model, now_s=now,
                            queue_mean_bytes=q_int / now if now > 0 else np.zeros_like(q_int),
                            queue_max_bytes=self.q_max.copy(), pause_s=self.pause.copy(),
                            ecn_marked_bytes=marked, drop_bytes=self.drops.copy(), series_t_s=t,
                            series_link=lnk, series_queue_bytes=qb,
                            pause_t_s=np.concatenate([p[0] for p in self._pauses] + [z]),
                            pause_link=np.concatenate([p[1] for p in self._pauses] + [z.astype(np.int64)]),
                            pause_dur_s=np.concatenate([p[2] for p in self._pauses] + [z]),
                            num_timeouts=self.num_timeouts,
                            num_pauses=self.num_pauses)
