"""ACKs queued behind the receiver's own data: the host-NIC queue on a TCP flow's ACK path.

A TCP receiver sends its ACKs out of its own NIC, in the same FIFO as the data of the flows the
host itself sends. A host NIC neither marks nor drops (validation/README.md: ns-3's host
queues; a Linux host without TCP small queues), so a flow whose only bottleneck is its
sender's NIC crosses no marking port: slow start never ends (RFC 5681 Sec. 3.1 leaves it only on
a loss or, with ECN, a mark) and its window grows until the receive window ``rwnd`` stops it
(RFC 7323 Sec. 2.2: the sender never has more than the advertised window in flight). The pipe
holds ``r RTT`` of it, the bandwidth-delay product at its rate ``r``; the rest, the window's
excess ``rwnd - r RTT``, waits in the sender's NIC queue. An ACK leaving that host waits
behind the queue, ``Q / C`` at the NIC's line rate ``C``: every flow *into* the host sees its
round trip grow by it. A flow whose window is capped at ``rwnd`` then moves at most at
``rwnd / (RTT + Q / C)`` (window-limited, Mathis et al.'s window bound), and its slow start
takes longer rounds.

Time-resolved, at flow level: each reverse flow ``g`` (on the receiver's NIC, NIC-bound, on no
marking port) adds a ramp to the queue: zero until its window reaches its bandwidth-delay
product (its setup round trips, then ``ceil(log_growth(r_g RTT_g / IW))`` slow-start rounds),
then rising at ``(growth - 1) r_g`` bytes per second (slow start grows the window by
``growth - 1`` of the bytes ACKed, RFC 3465; at its rate the ACKed bytes are ``r_g`` per
second), up to its excess ``rwnd - r_g RTT_g``, until ``g`` ends. The ACKs of ``g`` itself may
wait behind *its* receiver's NIC: the part of its window that delay holds is not queued here
(`ReverseQueue`, followed along the chain of hosts), so the queues along a chain alternate
full and empty, as ns-3's ring shows (validation/README.md). Where ``g`` goes back to the
affected flow's sender (two hosts sending to each other) the smooth split does not hold: the
windows leave as bursts and the ACKs bunch (`two_way_queue_bytes`). The affected flow's
delivery is integrated against that profile (`delivery_time_s`): slow-start rounds of ``RTT +
d(t)`` each, then ``min(r, rwnd / (RTT + d(t)))``; the time it loses is the difference from
the same integration with an idle ACK path, so a flow whose receiver sends nothing pays
nothing (and with ``rwnd`` 0, the default, the mechanism is off).

Where it comes from: ns-3's ring AllReduce on two leaves (validation/README.md): the
cross-leaf flows' round trips grow from 8.3 us to 14-22 us from their second RTT on, behind
the data their receiver sends to its own ring neighbour; 187.5 KB of window (1.5 BDP at 10 us
and 100 Gb/s) against an intra-leaf BDP of about 53 KB leaves about 134 KB queued, 10.8 us
(ns-3's host queue holds 115-134 KB there, its neighbour's 0-24 KB). Every input is a protocol
or configuration value (receive window, initial window, slow-start growth, line rate, base
RTT): nothing fitted.

Approximations, said where they matter: a chain that closes on a NIC already on it other than
the two-way case (a ring of equal flows) takes that NIC's queue at half its ramps (the
symmetric fixed point), a chain is followed `_DEPTH` NICs deep; an ECN-limited flow's window is
taken to follow its need up to ``rwnd`` at once (DCTCP's additive increase would take a few
round trips); switch queues on the ACK path are not added; a flow's loss is computed when it or
a reverse flow starts (and when a reverse flow's start adds to a running flow's), not again
when rates change later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from flowherd.fabric.core import NodeKind

if TYPE_CHECKING:
    from flowherd.engine.state import EngineState
    from flowherd.fabric.core import Fabric

__all__ = ["AckPath", "ReverseQueue", "ack_delay_loss_s", "delivery_time_s", "reverse_queue",
           "two_way_queue_bytes", "window_excess_bytes"]

_RTOL = 1e-6  # a NIC this close to its line rate is busy; a flow this close to its NIC's top rate, NIC-bound
_SUBSTEPS = 8  # midpoint steps across an interval where the queue ramps
_DEPTH = 8  # NICs followed along a chain of ACK paths (a ring of 8 hosts closes within it)


def window_excess_bytes(rwnd_bytes: float, rate_bytes_per_s: float, rtt_s: float) -> float:
    """What a window of ``rwnd`` holds beyond the bandwidth-delay product ``r RTT``: the bytes
    that wait in the sender's NIC queue (zero if the window does not fill the pipe)."""
    return max(rwnd_bytes - rate_bytes_per_s * rtt_s, 0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReverseQueue:
    """The receiver's NIC queue over time: one ramp per reverse flow, each less what its own
    ACK path absorbs.

    A reverse flow ``g`` whose own ACKs wait ``d_g`` behind the queue of *its* receiver's NIC
    needs ``r_g d_g`` more of its window in the pipe, so only ``ramp_g - r_g d_g`` of it queues
    here (never below zero): the queues along a chain of hosts that send to each other
    alternate (full, empty, full, ...) and a cross-leaf flow, whose longer RTT leaves it no
    excess once its ACKs wait, ends the chain. ``children[i]`` is ``g_i``'s own ACK-path
    queue (None: idle). Where the chain closes on a NIC already on it (a ring of equal flows),
    the closing queue is taken at ``scale`` 1/2 of its ramps: the symmetric fixed point
    ``Q = a - Q`` of equal queues. (Two hosts sending to each other are not a smooth chain:
    `two_way_queue_bytes`.)

    Attributes:
        t_bdp_s: When each reverse flow's window passes its BDP (its excess starts), seconds.
        slope_bytes_per_s: How fast its excess grows.
        cap_bytes: Its excess once its window is ``rwnd``.
        t_end_s: When it ends (its excess leaves the queue).
        rate_bytes_per_s: Its rate (what an ACK delay of ``d`` takes of its window: ``r d``).
        line_bytes_per_s: The NIC's drain rate; an ACK waits ``Q / line``.
        children: Per reverse flow, the queue its own ACKs wait behind.
        scale: 1, or 1/2 where a chain closes (children then empty).
    """

    t_bdp_s: np.ndarray
    slope_bytes_per_s: np.ndarray
    cap_bytes: np.ndarray
    t_end_s: np.ndarray
    rate_bytes_per_s: np.ndarray
    line_bytes_per_s: float
    children: tuple[ReverseQueue | None, ...] = ()
    scale: float = 1.0

    @staticmethod
    def idle() -> ReverseQueue:
        z = np.zeros(0)
        return ReverseQueue(t_bdp_s=z, slope_bytes_per_s=z, cap_bytes=z, t_end_s=z, rate_bytes_per_s=z,
                            line_bytes_per_s=1.0)

    def queue_bytes(self, t: float) -> float:
        """The queue at time ``t``."""
        total = 0.0
        for i in range(self.t_bdp_s.size):
            if t >= self.t_end_s[i] or t <= self.t_bdp_s[i]:
                continue
            grown = min(self.slope_bytes_per_s[i] * (t - self.t_bdp_s[i]), self.cap_bytes[i])
            child = self.children[i] if self.children else None
            if child is not None:
                grown -= self.rate_bytes_per_s[i] * child.delay_s(t)
            total += max(grown, 0.0)
        return self.scale * total

    def delay_s(self, t: float) -> float:
        """The wait of an ACK that reaches the NIC at ``t``."""
        return self.queue_bytes(t) / self.line_bytes_per_s

    def _ramps(self) -> list[ReverseQueue]:
        out, todo = [], [self]
        while todo:
            q = todo.pop()
            out.append(q)
            todo.extend(c for c in q.children if c is not None)
        return out

    def breaks_s(self) -> np.ndarray:
        """The times where a ramp of the queue or of the queues behind it starts, fills or ends
        (sorted)."""
        parts = [np.zeros(0)]
        for q in self._ramps():
            with np.errstate(divide="ignore"):
                fill_s = np.where(q.slope_bytes_per_s > 0, q.cap_bytes / q.slope_bytes_per_s, np.inf)
                full = q.t_bdp_s + fill_s
            parts += [q.t_bdp_s, full, q.t_end_s]
        b = np.concatenate(parts)
        return np.unique(b[np.isfinite(b)])

    def ramping(self, t: float) -> bool:
        """Whether some ramp here or behind is still rising at ``t``."""
        for q in self._ramps():
            if q.t_bdp_s.size and bool(((t >= q.t_bdp_s) & (t < q.t_end_s)
                                        & (q.slope_bytes_per_s * (t - q.t_bdp_s) < q.cap_bytes)).any()):
                return True
        return False


def two_way_queue_bytes(rwnd_bytes: float, rate_bytes_per_s, rtt_s):
    """What the ACKs of a flow wait behind when the receiver's own flow goes back to its
    sender (two-way traffic between two hosts, both windows at ``rwnd``).

    The smooth state (each queue half the excess) is not where two-way traffic settles: the
    ACKs of one direction queue behind the other's data, all the ACKs that arrive while a
    queue drains leave together when it empties (ACK compression; Zhang, Shenker and Clark,
    "Observations on the Dynamics of a Congestion Control Algorithm: The Effects of Two-Way
    Traffic", SIGCOMM 1991), and each sender answers a bunch with a burst of its window, so the
    two windows leave as bursts in phase. A cycle is the burst's drain, ``rwnd / C``, plus the
    one-way trip of the ACK bunch to the sender, half the base RTT: each flow moves ``rwnd`` per
    ``rwnd / C + RTT / 2``, as if its ACKs waited ``rwnd / C - RTT / 2`` at line rate, i.e.
    behind ``rwnd - r RTT / 2`` (ns-3's trace of validation/README.md's pair: the host queues
    fill to 138 KB of a 194 KB wire window within 0.2 us and drain in 15.5 us, every 19.5 us)."""
    return np.maximum(rwnd_bytes - 0.5 * np.asarray(rate_bytes_per_s) * np.asarray(rtt_s), 0.0)


def reverse_queue(start_s: np.ndarray, rate_bytes_per_s: np.ndarray, rtt_s: np.ndarray, end_s: np.ndarray,
                  size_bytes: np.ndarray, line_bytes_per_s: float, *, rwnd_bytes: float,
                  init_window_bytes: float, growth: float, setup_rtts: int,
                  children: tuple[ReverseQueue | None, ...] | None = None, scale: float = 1.0,
                  two_way: np.ndarray | None = None) -> ReverseQueue:
    """The ramps of the reverse flows ``g`` (module docstring): each starts at ``start_s``,
    moves at ``rate``, has base RTT ``rtt_s``, ends at ``end_s``; its excess is at most its size;
    ``children``: the queue each one's own ACKs wait behind (None: idle); ``two_way``: the
    flows that go back to the sender whose ACKs wait here (`two_way_queue_bytes`)."""
    r = np.asarray(rate_bytes_per_s, dtype=np.float64)
    rtt = np.asarray(rtt_s, dtype=np.float64)
    bdp = r * rtt
    rounds = np.ceil(np.log(np.maximum(bdp / init_window_bytes, 1.0)) / math.log(growth) - 1e-12)
    t_bdp = np.asarray(start_s, dtype=np.float64) + (setup_rtts + rounds) * rtt
    cap = np.maximum(rwnd_bytes - bdp, 0.0)
    if two_way is not None:
        cap = np.where(two_way, two_way_queue_bytes(rwnd_bytes, r, rtt), cap)
    cap = np.minimum(cap, np.asarray(size_bytes, dtype=np.float64))
    keep = cap > 0
    kids = tuple(c for c, k in zip(children, keep.tolist(), strict=True) if k) if children is not None else ()
    return ReverseQueue(t_bdp_s=t_bdp[keep], slope_bytes_per_s=((growth - 1.0) * r)[keep],
                        cap_bytes=cap[keep], t_end_s=np.asarray(end_s, dtype=np.float64)[keep],
                        rate_bytes_per_s=r[keep], line_bytes_per_s=line_bytes_per_s, children=kids,
                        scale=scale)


def delivery_time_s(size_bytes: float, rate_bytes_per_s: float, rtt_s: float, now_s: float,
                    queue: ReverseQueue, *, rwnd_bytes: float, fresh: bool, init_window_bytes: float,
                    growth: float, setup_rtts: int) -> float:
    """When a flow with ``size`` bytes left, fair rate ``r`` and base RTT ``rtt`` has delivered
    them, its ACKs delayed by ``queue.delay_s(t)``.

    A ``fresh`` flow first takes ``setup_rtts`` round trips, then slow-start rounds: a round
    leaving at ``t`` takes ``RTT + d(t)`` and carries the window, which grows ``growth`` per
    round up to ``rwnd``, until the window fills ``r (RTT + d)`` (the last partial round takes
    ``min(RTT + d, rest / r)``, as `fluid.slow_start_loss_s`). From then on (and from ``now``
    for a flow past its slow start) it moves at ``min(r, rwnd / (RTT + d(t)))``."""
    x = float(size_bytes)
    r = max(float(rate_bytes_per_s), 1e-300)
    t = float(now_s)
    if x <= 0:
        return t
    if fresh:
        for _ in range(setup_rtts):
            t += rtt_s + queue.delay_s(t)
        w = min(init_window_bytes, rwnd_bytes)
        while True:
            rnd = rtt_s + queue.delay_s(t)
            if w >= r * rnd or w >= rwnd_bytes:
                break
            if x <= w:
                return t + min(rnd, x / r)
            x -= w
            t += rnd
            w = min(w * growth, rwnd_bytes)
    breaks = queue.breaks_s()
    breaks = breaks[breaks > t]
    for b in breaks.tolist():  # the queue is linear between breaks: midpoint steps where it ramps
        n = _SUBSTEPS if queue.ramping(t) else 1
        step = (b - t) / n
        for i in range(n):
            v = min(r, rwnd_bytes / (rtt_s + queue.delay_s(t + (i + 0.5) * step)))
            if x <= v * step:
                return t + i * step + x / v
            x -= v * step
        t = b
    return t + x / min(r, rwnd_bytes / (rtt_s + queue.delay_s(t)))  # constant after the last break


def ack_delay_loss_s(size_bytes: float, rate_bytes_per_s: float, rtt_s: float, now_s: float,
                     queue: ReverseQueue, base: ReverseQueue | None = None, **kw) -> float:
    """Time the flow loses to ``queue`` on its ACK path against ``base`` (an idle one unless
    given): the difference of the two `delivery_time_s`; zero when ``queue`` is ``base``."""
    base = ReverseQueue.idle() if base is None else base
    return max(delivery_time_s(size_bytes, rate_bytes_per_s, rtt_s, now_s, queue, **kw)
               - delivery_time_s(size_bytes, rate_bytes_per_s, rtt_s, now_s, base, **kw), 0.0)


class AckPath:
    """The ACK-path delay of one engine run under ``tcp`` with a receive window (see the module
    docstring). `NetworkModel.on_rates` calls `on_start` with each update's fresh flows."""

    def __init__(self, fabric: Fabric, *, rwnd_bytes: float, init_window_bytes: float, growth: float,
                 setup_rtts: int, is_net: np.ndarray, cap: np.ndarray, cap_wire: np.ndarray,
                 rtt_part: np.ndarray, q: np.ndarray):
        """``cap`` (payload), ``cap_wire``, ``rtt_part`` and ``q`` are the model's per-link arrays,
        read live (the standing queues change)."""
        src = np.asarray(fabric.link_src, np.int64)
        dst = np.asarray(fabric.link_dst, np.int64)
        nn = fabric.num_nodes
        key = src * nn + dst
        order = np.argsort(key)
        pos = np.searchsorted(key[order], dst * nn + src)
        pos = np.minimum(pos, key.size - 1)
        self.rev = np.where(key[order][pos] == dst * nn + src, order[pos], -1)
        kind = np.asarray(fabric.node_kind)
        self.host_out = is_net & (kind[src] != NodeKind.SWITCH)  # a NIC's egress into the network
        self.host_in = is_net & (kind[dst] != NodeKind.SWITCH)
        self.lat = np.asarray(fabric.link_latency_s, np.float64)
        self.is_net, self.cap, self.cap_wire, self.rtt_part, self.q = is_net, cap, cap_wire, rtt_part, q
        self.kw = dict(rwnd_bytes=float(rwnd_bytes), init_window_bytes=float(init_window_bytes),
                       growth=float(growth), setup_rtts=int(setup_rtts))
        self.num_delayed = 0  # flows that lost time to it

    def on_start(self, eng: EngineState, comp: np.ndarray, fresh: np.ndarray, now: float) -> None:
        """The flows ``fresh`` (among the re-allocated ``comp``) start at ``now``: each pays the
        queue of its receiver's NIC; a flow already running into a fresh flow's sender pays
        what that flow adds."""
        f = eng._f
        comp_sorted = np.sort(comp)
        fresh_set = set(fresh.tolist())

        def rate(v: np.ndarray) -> np.ndarray:
            r = f.rate[v].copy()
            k = np.searchsorted(comp_sorted, v)
            k = np.minimum(k, max(comp_sorted.size - 1, 0))
            hit = comp_sorted[k] == v if comp_sorted.size else np.zeros(v.size, bool)
            r[hit] = f.rate_new[v[hit]]
            return r

        # the queue of each receiving NIC, before any loss of this update is added
        plans = []
        senders = set()
        for g in fresh.tolist():
            out_l, in_l = self._ends(eng, g)
            if in_l >= 0 and self.rev[in_l] >= 0:
                start = (out_l,) if out_l >= 0 else ()
                plans.append((g, True, self._queue(eng, int(self.rev[in_l]), rate, now, (), start)))
            if out_l >= 0 and self.rev[out_l] >= 0 and out_l not in senders:
                # flows already running into g's sender pay what this update's fresh flows add
                senders.add(out_l)
                back = self._bucket(eng, self.rev[out_l])
                running = [v for v in back.tolist() if v not in fresh_set and f.rem[v] > 0]
                for v in running:
                    v_out = self._ends(eng, v)[0]
                    start = (v_out,) if v_out >= 0 else ()
                    plans.append((v, False, (self._queue(eng, out_l, rate, now, (), start),
                                             self._queue(eng, out_l, rate, now, fresh_set, start))))
        for v, is_fresh, qs in plans:
            r = float(rate(np.array([v]))[0])
            if r <= 0:
                continue
            rtt = self._rtt(eng, v)
            if is_fresh:
                loss = ack_delay_loss_s(f.rem[v], r, rtt, now, qs, fresh=True, **self.kw)
            else:
                loss = ack_delay_loss_s(f.rem[v], r, rtt, now, qs[0], qs[1], fresh=False, **self.kw)
            if loss > 0:
                f.lat[v] += loss
                self.num_delayed += 1

    # ---- helpers ---------------------------------------------------------------------------
    def _ends(self, eng: EngineState, v: int) -> tuple[int, int]:
        # the flow's sender NIC egress and receiver NIC ingress (-1 if it has none)
        links = eng._links.link[eng._f.lo[v]:eng._f.hi[v]]
        outs = links[self.host_out[links]]
        ins = links[self.host_in[links]]
        return (int(outs[0]) if outs.size else -1), (int(ins[-1]) if ins.size else -1)

    def _bucket(self, eng: EngineState, lnk: int) -> np.ndarray:
        s = eng._b_start[lnk]
        return eng._b_flow[s:s + eng._b_len[lnk]]

    def _rtt(self, eng: EngineState, v: int) -> float:
        # as `kernels.flow_pass`'s RTT with the standing queues
        lo, hi = eng._f.lo[v], eng._f.hi[v]
        links, frac = eng._links.link[lo:hi], eng._links.frac[lo:hi]
        return float(((self.rtt_part[links] + self.q[links] / self.cap_wire[links]) * frac).sum())

    def _queue(self, eng: EngineState, nic: int, rate, now: float, exclude, stack: tuple[int, ...] = ()
               ) -> ReverseQueue:
        """The queue of NIC egress ``nic``: its NIC-bound flows on no marking port (module
        docstring), each less what its own ACK path absorbs (`ReverseQueue`, followed along the
        chain ``stack`` up to `_DEPTH` NICs; ``stack[-1]``: the sender NIC whose flows' ACKs wait
        here); none if the NIC is not busy."""
        f = eng._f
        flows = np.array([g for g in self._bucket(eng, nic).tolist() if g not in exclude and f.rem[g] > 0],
                         np.int64)
        if not flows.size:
            return ReverseQueue.idle()
        r = rate(flows)
        if r.sum() < self.cap[nic] * (1.0 - _RTOL):
            return ReverseQueue.idle()
        bound = r >= r.max() * (1.0 - _RTOL)
        for j, g in enumerate(flows.tolist()):
            links = eng._links.link[f.lo[g]:f.hi[g]]
            if bound[j] and (self.q[links[self.is_net[links]]] > 0).any():
                bound[j] = False  # its window is DCTCP's, set at a marking port
        flows, r = flows[bound], r[bound]
        if not flows.size:
            return ReverseQueue.idle()
        rtt = np.array([self._rtt(eng, g) for g in flows.tolist()])
        prop = np.array([float((self.lat[eng._links.link[f.lo[g]:f.hi[g]]]
                                * eng._links.frac[f.lo[g]:f.hi[g]]).sum()) for g in flows.tolist()])
        # its last byte leaves once the engine has moved its rest and the time it owes (its
        # latency beyond the path's propagation: setup, slow start, losses) has passed
        end = now + f.rem[flows] / np.maximum(r, 1e-300) + np.maximum(f.lat[flows] - prop, 0.0)
        closing = nic in stack or len(stack) > _DEPTH
        children = None
        two_way = np.zeros(flows.size, bool)
        if not closing:
            kids = []
            for j, g in enumerate(flows.tolist()):
                in_l = self._ends(eng, g)[1]
                nxt = int(self.rev[in_l]) if in_l >= 0 else -1
                # back to the sender whose ACKs wait here: two-way traffic (`two_way_queue_bytes`)
                two_way[j] = bool(stack) and nxt == stack[-1]
                kid = None
                if nxt >= 0 and not two_way[j]:
                    kid = self._queue(eng, nxt, rate, now, (), (*stack, nic))
                kids.append(kid if kid is not None and kid.t_bdp_s.size else None)
            children = tuple(kids)
        return reverse_queue(f.start[flows], r, rtt, end, f.rem[flows], float(self.cap[nic]), **self.kw,
                             children=children, scale=0.5 if closing else 1.0, two_way=two_way)
