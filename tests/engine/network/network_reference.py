"""The congestion model's burst handling as it was in Python (numpy per port), kept as the
reference the compiled path (`flowherd.engine.network.burst_kernels`) is checked against
(tests/engine/network/test_network_compiled.py). Methods of `NetworkModel` verbatim but for the
pause records, which the model now keeps in arrays."""

import numpy as np

from flowherd.engine.network.kernels import pause_victims, upstream_links
from flowherd.engine.network.model import _PFC_DEPTH, NetworkModel, _incidences


class ReferenceModel(NetworkModel):
    """`NetworkModel` with its bursts handled by the numpy reference below."""

    def _bursts(self, eng, comp: np.ndarray, hot: np.ndarray, peak: np.ndarray,
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

    def _dcqcn_start(self, eng, comp: np.ndarray, links: np.ndarray, own: np.ndarray,
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

    def _tree_ingress(self, eng, fl: np.ndarray) -> int:
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

    def _pfc_hold(self, eng, lnk: int) -> tuple[float, float] | None:
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

    def _pause_upstream(self, eng, lnk: int, t_pause: float, comp: np.ndarray,
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
            self._add_pauses(np.array([u]), np.array([t_pause]))
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

