"""The vectorized Clos tables of a `flowherd.routing.path_index.PathIndex` (its ``"clos"``
mode): up-set classes per tier, next-hop candidates up and down, per-GPU halves, and the
walks the routers take over them (one numpy pass per hop for a whole batch of flows)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowherd.errors import InfeasibleError
from flowherd.fabric.sparse_rows import Csr
from flowherd.routing.pathsets import _ranges, splitmix64

__all__ = ["ClosTables"]


class ClosTables:
    """The Clos part of `PathIndex` (a base class: it reads the index's fabric, tiers, network
    mask, reverse links and salt)."""

    def _build_clos_tables(self, src: np.ndarray, dst: np.ndarray, tier: np.ndarray) -> None:
        f = self.fabric
        n, g = self._n, f.num_gpus
        net = self._net
        up_mask = net & (tier[dst] == tier[src] + 1)
        down_mask = net & (tier[dst] == tier[src] - 1)
        self._up_links = np.flatnonzero(up_mask).astype(np.int32)
        up_s, up_d = src[up_mask], dst[up_mask]
        tmax = int(max(tier[src[net]].max(), tier[dst[net]].max())) if net.any() else 0
        self.max_tier = tmax
        # top[v]: the highest tier reachable from v going up
        top = tier.copy()
        for t in range(tmax - 1, -1, -1):
            sel = tier[up_s] == t
            np.maximum.at(top, up_s[sel], top[up_d[sel]])
        self._top = top
        # up candidates that can still reach tier T, CSR by tail, ascending link id
        self._upc: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for big_t in range(1, tmax + 1):
            keep = top[up_d] >= big_t
            lk = self._up_links[keep]
            tails = up_s[keep]
            o = np.lexsort((lk, tails))
            ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(tails, minlength=n), out=ptr[1:])
            self._upc[big_t] = (ptr, lk[o])
        # up-set classes per tier: label of each GPU's up-set, node -> class when a partition
        upm = Csr.from_coo(up_s, up_d, np.ones(up_s.size), (n, n))
        rng = np.random.default_rng(12345)
        self._gpu_label: list[np.ndarray] = [np.arange(g, dtype=np.int64)]
        self._node_label: list[np.ndarray] = [np.concatenate([np.arange(g), np.full(n - g, -1)])]
        self._num_classes: list[int] = [g]
        self._partition: list[bool] = [True]
        a1 = upm.take(np.arange(g))
        self._nonempty: list[np.ndarray] = [np.ones(g, dtype=bool), a1.row_nnz() > 0]
        lab, nl, ncl, part = _classes(a1, rng, n)
        self._gpu_label.append(lab)
        self._node_label.append(nl)
        self._num_classes.append(ncl)
        self._partition.append(part)
        if tmax >= 2:
            r2 = a1.matmul(upm)
            r1, r2v = rng.random(n), rng.random(n)
            h = np.stack([r2.matvec(r1), r2.matvec(r2v)], axis=1)
            _, first, attach = np.unique(h, axis=0, return_index=True, return_inverse=True)
            attach = attach.ravel()
            reach = r2.take(first)
            for _t in range(2, tmax + 1):
                alab, nl, ncl, part = _classes(reach, rng, n)
                self._gpu_label.append(alab[attach])
                self._nonempty.append((reach.row_nnz() > 0)[attach])
                self._node_label.append(nl)
                self._num_classes.append(ncl)
                self._partition.append(part)
                reach = reach.matmul(upm)
        # down candidates keyed by (node, class of the next node at tier t)
        self._downc: list[tuple[np.ndarray, np.ndarray, int]] = []
        dl = np.flatnonzero(down_mask)
        for t in range(tmax):
            sel = dl[tier[dst[dl]] == t]
            cls = self._node_label[t][dst[sel]]
            sel, cls = sel[cls >= 0], cls[cls >= 0]
            ncl = self._num_classes[t]
            keys = src[sel] * ncl + cls
            o = np.lexsort((sel, keys))
            self._downc.append((keys[o], sel[o].astype(np.int32), ncl))
        # stubs: a GPU with exactly one up path to its leaf reuses the leaf's half
        upd = np.bincount(up_s, minlength=n)
        first_up = np.full(n, 0, dtype=np.int64)
        o = np.lexsort((self._up_links, up_s))
        first_up[up_s[o][::-1]] = self._up_links[o][::-1]
        gpus = np.arange(g)
        nic = dst[first_up[gpus]]
        simple = (upd[gpus] == 1) & (upd[nic] == 1) & (tier[nic] == 1)
        self._stub_simple = simple
        self._stub_links = np.stack([first_up[gpus], first_up[nic]], axis=1).astype(np.int32)
        self._stub_leaf = dst[self._stub_links[:, 1]]
        lat = f.link_latency_s
        self._stub_lat_up = lat[self._stub_links].sum(axis=1)
        self._stub_lat_down = lat[self.rev[self._stub_links]].sum(axis=1)
        self._halves: dict[tuple[int, int], _Half] = {}

    # ---- vectorized Clos fast path -----------------------------------------------------
    def clos_meet_tier(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Meeting tier of each network pair and whether the vectorized tables apply.

        A pair is fast when its up-sets meet at tier T with equal up-sets there, and every
        tier below T partitions the GPUs (up-sets equal or disjoint), so that the next hops
        down are the links into the destination's class.
        """
        nflow = len(src)
        big_t = np.zeros(nflow, dtype=np.int64)
        open_ = np.ones(nflow, dtype=bool)
        fast = np.ones(nflow, dtype=bool)
        for t in range(1, self.max_tier + 1):
            lab = self._gpu_label[t]
            eq = open_ & (lab[src] == lab[dst]) & self._nonempty[t][src]
            big_t[eq] = t
            open_ &= ~eq
            if not self._partition[t]:
                fast &= ~open_
        fast &= ~open_
        return big_t, fast

    def clos_walk(self, src: np.ndarray, dst: np.ndarray, big_t: np.ndarray,
                  hash64: np.ndarray | None) -> np.ndarray:
        """One up-down path per flow (all flows share `big_t`), as ``int32[F, 2T]`` link ids.

        Per-hop choice among the next hops that stay on a shortest path: index
        ``splitmix64(hash64 ^ salt[node]) % count``, or the lowest link id when `hash64` is None.
        """
        nflow = len(src)
        out = np.empty((nflow, 2 * big_t), dtype=np.int32)
        cur = src.astype(np.int64)
        ldst = self.fabric.link_dst
        ptr, lk = self._upc[big_t]
        for step in range(big_t):
            st = ptr[cur]
            cnt = ptr[cur + 1] - st
            chosen = lk[st + self._pick(hash64, cur, cnt)]
            out[:, step] = chosen
            cur = ldst[chosen].astype(np.int64)
        for step in range(big_t):
            t = big_t - 1 - step
            keys, links, ncl = self._downc[t]
            q = cur * ncl + self._gpu_label[t][dst]
            lo = np.searchsorted(keys, q, "left")
            cnt = np.searchsorted(keys, q, "right") - lo
            chosen = links[lo + self._pick(hash64, cur, cnt)]
            out[:, big_t + step] = chosen
            cur = ldst[chosen].astype(np.int64)
        return out

    def _pick(self, hash64: np.ndarray | None, node: np.ndarray, cnt: np.ndarray) -> np.ndarray:
        if np.any(cnt < 1):
            raise InfeasibleError("a Clos up-down walk found no next hop; the fabric tables are "
                                  "inconsistent (expected a next hop on a shortest path)")
        if hash64 is None:
            return np.zeros(len(node), dtype=np.int64)
        h = splitmix64(hash64 ^ self.salt[node])
        return (h % cnt.astype(np.uint64)).astype(np.int64)

    def half(self, gpu: int, big_t: int) -> tuple[_Half, bool]:
        """Up-half of GPU `gpu` to tier `big_t`: (half, True) when the half starts at the
        GPU's leaf and the GPU's two stub links must be prepended, else (half, False)."""
        simple = bool(self._stub_simple[gpu]) and big_t >= 2
        start = int(self._stub_leaf[gpu]) if simple else gpu
        key = (start, big_t)
        h = self._halves.get(key)
        if h is None:
            h = self._halves[key] = self._make_half(start, big_t)
        return h, simple

    def _make_half(self, start: int, big_t: int) -> _Half:
        f = self.fabric
        ptr, lk_all = self._upc[big_t]
        nodes = np.asarray([start], dtype=np.int64)
        cnt = np.ones(1)
        lat_up = np.zeros(1)
        lat_dn = np.zeros(1)
        layers = []
        for _t in range(int(self._tier[start]), big_t):
            st = ptr[nodes]
            lens = ptr[nodes + 1] - st
            links = lk_all[_ranges(st, lens)]
            tail = np.repeat(np.arange(len(nodes)), lens)
            heads, inv = np.unique(f.link_dst[links], return_inverse=True)
            layers.append((links, tail, inv, cnt))
            new_cnt = np.bincount(inv, weights=cnt[tail], minlength=len(heads))
            nu = np.full(len(heads), -np.inf)
            nd = np.full(len(heads), -np.inf)
            np.maximum.at(nu, inv, lat_up[tail] + f.link_latency_s[links])
            np.maximum.at(nd, inv, lat_dn[tail] + f.link_latency_s[self.rev[links]])
            nodes, cnt, lat_up, lat_dn = heads, new_cnt, nu, nd
        total = cnt.sum()
        bwd = np.ones(len(nodes))
        all_links, all_frac = [], []
        for links, tail, inv, tail_cnt in reversed(layers):
            hb = bwd[inv]
            all_links.append(links)
            all_frac.append(tail_cnt[tail] * hb / total)
            bwd = np.bincount(tail, weights=hb, minlength=len(tail_cnt))
        all_links.reverse()
        all_frac.reverse()
        return _Half(
            link=np.concatenate(all_links).astype(np.int32) if all_links else np.zeros(0, np.int32),
            frac=np.concatenate(all_frac) if all_frac else np.zeros(0),
            meet=nodes, lat_up_s=lat_up, lat_down_s=lat_dn,
            symmetric=bool(cnt.min() == cnt.max()),
        )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Half:
    link: np.ndarray  # up links from the start to the meeting tier
    frac: np.ndarray  # share of the flow on each, assuming a uniform count on the other side
    meet: np.ndarray  # meeting-tier nodes, ascending
    lat_up_s: np.ndarray  # largest latency start -> meet[i]
    lat_down_s: np.ndarray  # largest latency meet[i] -> start over the reverse links
    symmetric: bool  # equal path counts to every meeting node


def _classes(mat: Csr, rng: np.random.Generator,
             n: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Rows grouped by support: (class per row, class per node or -1, classes, partition?)."""
    b = mat.binary()
    r1, r2 = rng.random(n), rng.random(n)
    h = np.stack([b.matvec(r1), b.matvec(r2)], axis=1)
    _, first, inv = np.unique(h, axis=0, return_index=True, return_inverse=True)
    rep = b.take(first)
    colsum = rep.col_sums()
    partition = bool(colsum.max(initial=0) <= 1)
    node_label = np.full(n, -1, dtype=np.int64)
    if partition:
        node_label[rep.col] = rep.rows_of_entries()
    return inv.ravel().astype(np.int64), node_label, len(first), partition
