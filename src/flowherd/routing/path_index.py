"""`PathIndex`: the per-fabric index of shortest-path sets (`flowherd.routing.paths` explains
the three kinds of GPU pairs) and the vectorized Clos tables the routers use."""


from __future__ import annotations

import functools
import logging
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from flowherd.errors import ConfigError, InfeasibleError
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.sparse_rows import bfs_hops, hop, out_links
from flowherd.routing.clos_tables import ClosTables
from flowherd.routing.pathsets import PathDag, _empty_dag, _finish_dag, splitmix64

if TYPE_CHECKING:
    import networkx as nx

log = logging.getLogger(__name__)

__all__ = ["PathIndex", "path_index"]


class PathIndex(ClosTables):
    """Path sets of one fabric: mode detection, per-pair `PathDag` cache, Clos tables.

    Build it through `path_index(fabric)` (cached per fabric object).

    Attributes:
        mode: ``"clos"`` (up-down over tiers is exact) or ``"graph"`` (breadth-first search).
        mode_reason: Why the mode was chosen (for logs and reports).
    """

    _DAG_CACHE_SIZE = 200_000

    def __init__(self, fabric: Fabric):
        self.fabric = f = fabric
        n = f.num_nodes
        self._n = n
        self.salt = splitmix64(np.arange(n, dtype=np.uint64) + np.uint64(0x5EED))
        src = f.link_src.astype(np.int64)
        dst = f.link_dst.astype(np.int64)
        kind = np.asarray(f.link_kind)
        tier = np.asarray(f.node_tier).astype(np.int64)
        self._tier = tier
        self._nvlink = kind == LinkKind.NVLINK
        self._net = ~self._nvlink
        # in-links CSR by destination node (for backward searches)
        order = np.argsort(dst, kind="stable")
        self._in_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=n), out=self._in_ptr[1:])
        self._in_link = order.astype(np.int32)
        self._switch = np.asarray(f.node_kind) == NodeKind.SWITCH
        self._dag_cache: dict[tuple[int, int], PathDag] = {}
        self._nx_graphs: dict[str, nx.DiGraph] = {}
        self.rev = self._reverse_links(src, dst)
        self._build_star(src, dst)
        self._build_net_star(src, dst)
        self.mode, self.mode_reason = self._detect_mode(src, dst, tier)
        if self.mode == "clos":
            self._build_clos_tables(src, dst, tier)
        log.debug("fabric %s: routing mode %s (%s)", f.name, self.mode, self.mode_reason)

    # ---- construction helpers ----------------------------------------------------------
    def _reverse_links(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
        """Link w->u paired with each link u->w (parallel links paired in id order), or None."""
        n = self._n
        fwd = src * n + dst
        bwd = dst * n + src
        of = np.lexsort((np.arange(len(fwd)), fwd))
        ob = np.lexsort((np.arange(len(bwd)), bwd))
        if not np.array_equal(fwd[of], bwd[ob]):
            return None
        rev = np.empty(len(fwd), dtype=np.int32)
        rev[ob] = of
        return rev

    def _detect_mode(self, src: np.ndarray, dst: np.ndarray, tier: np.ndarray) -> tuple[str, str]:
        f = self.fabric
        kind = np.asarray(f.node_kind)
        if self.rev is None:
            return "graph", "some link has no link in the opposite direction"
        net = self._net
        s, d = src[net], dst[net]
        if np.any(np.abs(tier[s] - tier[d]) != 1):
            return "graph", "a network link does not join adjacent tiers"
        if np.any(tier[: f.num_gpus] != 0):
            return "graph", "a GPU is not at tier 0"
        tier1 = tier == 1
        if np.any(tier1 & (kind != NodeKind.NIC)):
            return "graph", "a tier-1 node is not a NIC"
        if np.any((tier >= 2) & (kind != NodeKind.SWITCH)):
            return "graph", "a node above tier 1 is not a switch"
        if np.any(kind[s] == NodeKind.NVSWITCH) or np.any(kind[d] == NodeKind.NVSWITCH):
            return "graph", "an NVSwitch has a network link"
        if np.any((kind[s] == NodeKind.GPU) & (kind[d] != NodeKind.NIC)):
            return "graph", "a GPU has a network link to something other than a NIC"
        # a NIC serves the GPUs of one server only
        pcie = (kind[s] == NodeKind.NIC) & (kind[d] == NodeKind.GPU)
        srv = np.asarray(f.gpu_server)[d[pcie]]
        nic = s[pcie]
        if nic.size:
            lo = np.full(self._n, np.iinfo(np.int64).max)
            hi = np.full(self._n, -1)
            np.minimum.at(lo, nic, srv)
            np.maximum.at(hi, nic, srv)
            if np.any(lo[nic] != hi[nic]):
                return "graph", "a NIC is shared by GPUs of different servers"
        # up-down must be as short as any valley path between leaves (checked by BFS)
        sw = np.flatnonzero(self._switch)
        if sw.size == 0:
            return "clos", "no switches"
        pos = np.full(self._n, -1)
        pos[sw] = np.arange(sw.size)
        m = self._switch[s] & self._switch[d]
        # node ids in order (np.unique would import numpy.ma: 0.02 s of a collective's start-up)
        leaves = np.flatnonzero(np.bincount(d[(kind[s] == NodeKind.NIC) & self._switch[d]],
                                            minlength=self._n))
        if leaves.size == 0:
            return "clos", "no leaves"
        sample = leaves
        if leaves.size > 128:
            sample = np.sort(np.random.default_rng(0).choice(leaves, 64, replace=False))
        # fewest hops between leaves over every switch-to-switch link, by breadth-first search
        true = bfs_hops(pos[s[m]], pos[d[m]], sw.size, pos[sample])[:, pos[leaves]]
        # the up-down ones: a leaf meets a sampled leaf after t hops up from both when it is t
        # hops down from the sample's up-set at t
        updown = np.full(true.shape, np.inf)
        up_mask = m & (tier[d] > tier[s])
        up = out_links(pos[s[up_mask]], pos[d[up_mask]], sw.size)
        down = out_links(pos[d[up_mask]], pos[s[up_mask]], sw.size)
        leaf_col = np.full(sw.size, -1)
        leaf_col[pos[leaves]] = np.arange(leaves.size)
        above = (np.arange(sample.size), pos[sample])  # (sample, switch) pairs
        t = 0
        while above[0].size:
            below = above
            for _ in range(t):
                below = hop(*below, down, sw.size)
            row, col = below[0], leaf_col[below[1]]
            meet = np.zeros(true.shape, dtype=bool)
            meet[row[col >= 0], col[col >= 0]] = True
            updown[meet & np.isinf(updown)] = 2 * t
            above = hop(*above, up, sw.size)
            t += 1
        if not np.array_equal(true, updown):
            return "graph", "a valley path between leaves is shorter than the up-down paths"
        checked = "all" if sample.size == leaves.size else f"{sample.size} sampled"
        return "clos", f"tiers consistent; up-down distances exact ({checked} leaves)"

    def _single_hub(self, mask: np.ndarray, src: np.ndarray, dst: np.ndarray,
                    hub_kind: NodeKind) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per GPU, of the links in ``mask``: its one link out and in (ids), the node the link
        out reaches, and whether that is all it has (one out, one in, from and to the same node
        of ``hub_kind``)."""
        g, kind = self.fabric.num_gpus, np.asarray(self.fabric.node_kind)
        links = np.flatnonzero(mask)
        outs = links[src[links] < g]
        ins = links[dst[links] < g]
        out_deg = np.bincount(src[outs], minlength=g)
        in_deg = np.bincount(dst[ins], minlength=g)
        up = np.zeros(g, dtype=np.int32)
        down = np.zeros(g, dtype=np.int32)
        up[src[outs]] = outs
        down[dst[ins]] = ins
        hub = dst[up]
        ok = (out_deg == 1) & (in_deg == 1) & (kind[hub] == hub_kind) & (src[down] == hub)
        return up, down, hub, ok

    def _build_star(self, src: np.ndarray, dst: np.ndarray) -> None:
        """GPUs whose only NVLink is one cable to an NVSwitch: a same-server pair on the same
        NVSwitch has the single shortest path GPU -> NVSwitch -> GPU (vectorized)."""
        self.star_up, self.star_down, hub, self.star_ok = self._single_hub(
            self._nvlink, src, dst, NodeKind.NVSWITCH)
        self.star_hub = np.where(self.star_ok, hub, -1)

    def _build_net_star(self, src: np.ndarray, dst: np.ndarray) -> None:
        """GPUs whose only non-NVLink link out and in is one cable to and from the same switch (a
        GPU straight on a switch, as ASTRA-sim's ``Switch`` topology): a pair of them on one
        switch in different servers has the single network path GPU -> switch -> GPU, which the
        breadth-first search of `dag` would find pair by pair (vectorized here)."""
        self.net_star_up, self.net_star_down, hub, ok = self._single_hub(
            self._net, src, dst, NodeKind.SWITCH)
        self.net_star_hub = np.where(ok, hub, -1)

    def net_star_pairs(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Mask of pairs (src != dst, different servers) joined by the single network path
        GPU -> switch -> GPU."""
        hub = self.net_star_hub
        return ((hub[src] >= 0) & (hub[src] == hub[dst])
                & (self.fabric.gpu_server[src] != self.fabric.gpu_server[dst]))

    def star_pairs(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Mask of pairs (src != dst) joined by the single path GPU -> NVSwitch -> GPU."""
        server = self.fabric.gpu_server
        return (self.star_ok[src] & self.star_ok[dst] & (self.star_hub[src] == self.star_hub[dst])
                & (server[src] == server[dst]))

    def nx_graph(self, scope: str) -> nx.DiGraph:
        """Simple digraph of the "nvlink", "network" or "all" links (lowest id per node pair),
        edge attribute ``link``; cached."""
        cache = self._nx_graphs
        if scope not in cache:
            import networkx as nx

            f = self.fabric
            mask = {"nvlink": self._nvlink, "network": self._net,
                    "all": np.ones(len(self._net), dtype=bool)}[scope]
            g = nx.DiGraph()
            for lk in np.flatnonzero(mask)[::-1]:
                g.add_edge(int(f.link_src[lk]), int(f.link_dst[lk]), link=int(lk))
            cache[scope] = g
        return cache[scope]

    # ---- validation --------------------------------------------------------------------
    def check_gpu(self, value: object, what: str) -> int:
        g = self.fabric.num_gpus
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value < g:
            raise ConfigError(f"{what} must be a GPU id in 0..{g - 1}, got {value!r}")
        return int(value)

    # ---- per-pair DAGs -----------------------------------------------------------------
    def dag(self, src: int, dst: int) -> PathDag:
        """All shortest paths from GPU `src` to GPU `dst` (cached)."""
        key = (src, dst)
        hit = self._dag_cache.get(key)
        if hit is not None:
            return hit
        if src == dst:
            d = _empty_dag(src)
        else:
            d = None
            if self.fabric.gpu_server[src] == self.fabric.gpu_server[dst]:
                d = self._bfs_dag(src, dst, self._nvlink, scale_up=True)
            if d is None:
                d = self._clos_dag(src, dst) if self.mode == "clos" else self._net_bfs_dag(src, dst)
            if d is None:
                # no network path (a GPU without a NIC, as NDv2's GPUs 2-7): any link, any
                # node forwarding, e.g. NVLink to a GPU that has a NIC
                d = self._bfs_dag(src, dst, np.ones(len(self._net), dtype=bool), scale_up=False,
                                  forward_all=True)
            if d is None:
                raise InfeasibleError(f"no path from GPU {src} to GPU {dst} in fabric "
                                      f"{self.fabric.name!r}: expected a connected fabric")
        if len(self._dag_cache) >= self._DAG_CACHE_SIZE:
            self._dag_cache.clear()
        self._dag_cache[key] = d
        return d

    def _bfs_dag(self, src: int, dst: int, link_ok: np.ndarray, *, scale_up: bool,
                 forward_all: bool = False,
                 extra_transit: frozenset[int] = frozenset()) -> PathDag | None:
        """Shortest-path DAG by BFS over `link_ok` links. Scale-up (or `forward_all`): every
        node forwards; network: switches forward, and so do `extra_transit` nodes (the pair's
        own NICs)."""
        f = self.fabric
        ldst, lsrc = f.link_dst, f.link_src
        switch = self._switch

        everyone = scale_up or forward_all

        def forwards(v: int) -> bool:
            return everyone or switch[v] or v in extra_transit

        dist_s = {src: 0}
        frontier = [src]
        while frontier and dst not in dist_s:
            nxt = []
            for u in frontier:
                if u != src and not forwards(u):
                    continue
                for lk in f.out_links(u):
                    if link_ok[lk]:
                        w = int(ldst[lk])
                        if w not in dist_s:
                            dist_s[w] = dist_s[u] + 1
                            nxt.append(w)
            frontier = nxt
        if dst not in dist_s:
            return None
        hops = dist_s[dst]
        dist_d = {dst: 0}
        queue = deque([dst])
        while queue:
            w = queue.popleft()
            if dist_d[w] >= hops or (w != dst and not forwards(w)):
                continue
            for lk in self._in_link[self._in_ptr[w]: self._in_ptr[w + 1]]:
                if link_ok[lk]:
                    u = int(lsrc[lk])
                    if u not in dist_d:
                        dist_d[u] = dist_d[w] + 1
                        queue.append(u)
        # forward counts in BFS order, then backward counts
        layers: list[list[tuple[int, int, int]]] = [[] for _ in range(hops)]
        for u, du in dist_s.items():
            if du >= hops or (u != src and not forwards(u)):
                continue
            for lk in f.out_links(u):
                if not link_ok[lk]:
                    continue
                w = int(ldst[lk])
                if dist_d.get(w, -1) == hops - du - 1 and (w == dst or forwards(w)):
                    layers[du].append((int(lk), u, w))
        fwd: dict[int, float] = {src: 1.0}
        for layer in layers:
            for _lk, u, w in layer:
                if u in fwd:
                    fwd[w] = fwd.get(w, 0.0) + fwd[u]
        bwd: dict[int, float] = {dst: 1.0}
        for layer in reversed(layers):
            for _lk, u, w in layer:
                if w in bwd:
                    bwd[u] = bwd.get(u, 0.0) + bwd[w]
        links, depth, tail, head = [], [], [], []
        for du, layer in enumerate(layers):
            for lk, u, w in layer:
                if u in fwd and w in bwd:
                    links.append(lk)
                    depth.append(du)
                    tail.append(fwd[u])
                    head.append(bwd[w])
        return _finish_dag(f, src, dst, links, depth, tail, head, fwd[dst], hops, scale_up)

    def _net_bfs_dag(self, src: int, dst: int) -> PathDag | None:
        f = self.fabric
        own = set()
        for gpu in (src, dst):
            for lk in f.out_links(gpu):
                if self._net[lk]:
                    own.add(int(f.link_dst[lk]))
            for lk in self._in_link[self._in_ptr[gpu]: self._in_ptr[gpu + 1]]:
                if self._net[lk]:
                    own.add(int(f.link_src[lk]))
        own -= set(range(f.num_gpus))
        return self._bfs_dag(src, dst, self._net, scale_up=False, extra_transit=frozenset(own))

    def _clos_dag(self, src: int, dst: int) -> PathDag | None:
        """Up-down path-count DP over tiers: meet at the lowest common tier."""
        f = self.fabric
        ldst = f.link_dst
        ptr, lk_all = self._upc[1] if self.max_tier >= 1 else (None, None)
        if ptr is None:
            return None
        # all up links (top >= tier of head is always true), CSR by tail
        cs: list[dict[int, float]] = [{src: 1.0}]
        cd: list[dict[int, float]] = [{dst: 1.0}]
        big_t = None
        for t in range(self.max_tier + 1):
            if cs[t].keys() & cd[t].keys():
                big_t = t
                break
            if t == self.max_tier:
                break
            cs.append(self._expand(cs[t], ptr, lk_all, ldst))
            cd.append(self._expand(cd[t], ptr, lk_all, ldst))
        if big_t is None:
            return None
        meet = cs[big_t].keys() & cd[big_t].keys()
        links, depth, tail, head = [], [], [], []
        # source side: g[w] = shortest paths from w (tier t) to dst through the meeting tier
        g_up = {m: cd[big_t][m] for m in meet}
        for t in range(big_t - 1, -1, -1):
            g_t: dict[int, float] = {}
            for u, cu in cs[t].items():
                for lk in lk_all[ptr[u]: ptr[u + 1]]:
                    w = int(ldst[lk])
                    gw = g_up.get(w)
                    if gw:
                        g_t[u] = g_t.get(u, 0.0) + gw
                        links.append(int(lk))
                        depth.append(t)
                        tail.append(cu)
                        head.append(gw)
            g_up = g_t
        # destination side: h[x] = shortest paths from src to x (tier t) through the meeting tier
        h_down = {m: cs[big_t][m] for m in meet}
        for t in range(big_t - 1, -1, -1):
            h_t: dict[int, float] = {}
            for y, cy in cd[t].items():
                for lk in lk_all[ptr[y]: ptr[y + 1]]:
                    x = int(ldst[lk])
                    hx = h_down.get(x)
                    if hx:
                        h_t[y] = h_t.get(y, 0.0) + hx
                        links.append(int(self.rev[lk]))
                        depth.append(2 * big_t - 1 - t)
                        tail.append(hx)
                        head.append(cy)
            h_down = h_t
        num = sum(cs[big_t][m] * cd[big_t][m] for m in meet)
        return _finish_dag(f, src, dst, links, depth, tail, head, num, 2 * big_t, False)

    @staticmethod
    def _expand(counts: dict[int, float], ptr: np.ndarray, lk_all: np.ndarray,
                ldst: np.ndarray) -> dict[int, float]:
        nxt: dict[int, float] = {}
        for u, c in counts.items():
            for lk in lk_all[ptr[u]: ptr[u + 1]]:
                w = int(ldst[lk])
                nxt[w] = nxt.get(w, 0.0) + c
        return nxt

@functools.lru_cache(maxsize=8)
def path_index(fabric: Fabric) -> PathIndex:
    """The `PathIndex` of a fabric, built once per fabric object."""
    return PathIndex(fabric)


