"""The building blocks of TE-CCL-style synthesis (`flowherd.planning.teccl`): the GPU graph whose
edges load the physical links with the router's split fractions (`gpu_graph`), the synthesized
schedule's record (`Synthesis`), finish-time lower bounds from GPU and server boundaries
(`alltoall_lower_bound_s`), a schedule's steps from per-epoch edge bytes (`_steps`) and the
triplet builder of the time-expanded programs' constraint matrices (`_Coefficients`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from flowherd.collectives.nccl import PROTOCOLS, base_latency_s, step_latency_s
from flowherd.collectives.ops import Collective
from flowherd.collectives.schedule import Schedule, Step
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.routing.policies import make_router

__all__ = ["GpuGraph", "Synthesis", "alltoall_lower_bound_s", "gpu_graph"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class GpuGraph:
    """The GPUs of a collective and the edges between them that cross no other GPU.

    Attributes:
        gpus: ``int64[n]`` fabric GPU id of each rank.
        edge_src, edge_dst: ``int64[E]`` rank indices of each edge's ends.
        load: ``[L, E]`` sparse: share of an edge's bytes on each directed link.
        link_capacity_bytes_per_s: ``float64[L]``.
        edge_capacity_bytes_per_s: ``float64[E]``: ``min over links of capacity / share``.
    """

    gpus: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    load: sp.csr_matrix
    link_capacity_bytes_per_s: np.ndarray
    edge_capacity_bytes_per_s: np.ndarray

    @property
    def num_edges(self) -> int:
        return len(self.edge_src)


def gpu_graph(fabric: Fabric, gpus: tuple[int, ...] | np.ndarray, router: str = "spray", *,
              edges: str = "all") -> GpuGraph:
    """The edges between the GPUs and the share of an edge's bytes on every link.

    Args:
        fabric: The fabric.
        gpus: The collective's GPUs.
        router: The routing whose paths (and split fractions) an edge's bytes take.
        edges: "all": every ordered GPU pair is an edge (a flow between two GPUs goes where the
            router sends it, through other GPUs' NVLinks too, as for every other algorithm);
            "adjacent": only pairs whose paths cross no other GPU (TE-CCL's graph: a GPU that
            relays stores the chunk and forwards it in a later epoch).
    """
    if edges not in ("all", "adjacent"):
        raise ConfigError(f"edges must be 'all' or 'adjacent', got {edges!r} (edges)")
    g = np.asarray(gpus, dtype=np.int64)
    n = g.size
    a, b = np.divmod(np.arange(n * n), n)
    off = a != b
    a, b = a[off], b[off]
    r = make_router(router, fabric).route(g[a].astype(np.int32), g[b].astype(np.int32),
                                          np.zeros(a.size, np.int64))
    lens = np.diff(r.ptr)
    owner = np.repeat(np.arange(a.size), lens)
    # a link that ends at a GPU other than the pair's destination means forwarding by a GPU
    head = fabric.link_dst[r.link]
    via_gpu = (fabric.node_kind[head] == NodeKind.GPU) & (head != g[b][owner])
    bad = np.zeros(a.size, bool)
    if edges == "adjacent":
        bad[owner[via_gpu]] = True
    bad |= lens == 0
    keep = np.flatnonzero(~bad)
    sel = np.isin(owner, keep)
    col = np.searchsorted(keep, owner[sel])
    load = sp.csr_matrix((r.frac[sel], (r.link[sel].astype(np.int64), col)),
                         shape=(fabric.num_directed_links, keep.size))
    cap = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)
    lc = load.tocsc()
    ecap = np.full(keep.size, np.inf)
    for e in range(keep.size):
        rows = lc.indices[lc.indptr[e]:lc.indptr[e + 1]]
        vals = lc.data[lc.indptr[e]:lc.indptr[e + 1]]
        ecap[e] = float(np.min(cap[rows] / vals))
    return GpuGraph(gpus=g, edge_src=a[keep], edge_dst=b[keep], load=load,
                    link_capacity_bytes_per_s=cap, edge_capacity_bytes_per_s=ecap)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Synthesis:
    """A synthesized schedule and what the solver said about it.

    Attributes:
        schedule: The `Schedule` (one step per epoch).
        epochs: Epochs of the horizon (the finish epoch).
        epoch_s: Length of an epoch, seconds.
        chunk_bytes: Bytes the slowest edge carries in one epoch (TE-CCL's chunk).
        finish_s: ``epochs * epoch_s``: the finish time the solver predicts (latency excluded).
        lower_bound_s: A lower bound on any schedule's finish time (latency excluded).
        solve_s: Wall-clock seconds of all solves.
        num_solves: LP/MILP solves of the horizon search.
        status: "optimal", or "time_limit" (best found) with ``mip_gap``.
        mip_gap: Relative MIP gap of the last solve (AllGather).
        simulated_s: The schedule's time in the simulator, when it was checked there.
    """

    schedule: Schedule
    epochs: int
    epoch_s: float
    chunk_bytes: float
    finish_s: float
    lower_bound_s: float
    solve_s: float
    num_solves: int
    status: str
    mip_gap: float = 0.0
    simulated_s: float = math.nan


def _node_server(fabric: Fabric) -> np.ndarray:
    """Server of every node: GPUs their own; a non-GPU node whose GPU neighbours are all on one
    server belongs to it; other nodes -1."""
    srv = np.full(fabric.num_nodes, -1, dtype=np.int64)
    srv[: fabric.num_gpus] = fabric.gpu_server
    src, dst = fabric.link_src.astype(np.int64), fabric.link_dst.astype(np.int64)
    for v in np.flatnonzero(fabric.node_kind != NodeKind.GPU):
        nb = np.concatenate([dst[src == v], src[dst == v]])
        nb = nb[nb < fabric.num_gpus]
        s = np.unique(fabric.gpu_server[nb])
        if s.size == 1:
            srv[v] = s[0]
    return srv


def alltoall_lower_bound_s(fabric: Fabric, gpus: np.ndarray, demand_bytes: np.ndarray) -> float:
    """Finish-time lower bound of an AllToAll(v): the most loaded GPU's egress or ingress over
    its link capacity, and the most loaded server's egress or ingress over its boundary links."""
    cap = np.asarray(fabric.link_capacity_bytes_per_s)
    src, dst = fabric.link_src.astype(np.int64), fabric.link_dst.astype(np.int64)
    out_cap = np.bincount(src, weights=cap, minlength=fabric.num_nodes)
    in_cap = np.bincount(dst, weights=cap, minlength=fabric.num_nodes)
    bound = max(float(np.max(demand_bytes.sum(axis=1) / out_cap[gpus])),
                float(np.max(demand_bytes.sum(axis=0) / in_cap[gpus])))
    srv = _node_server(fabric)
    gs = fabric.gpu_server[gpus]
    cross_link = (srv[src] != srv[dst])
    for s in np.unique(gs):
        mine = gs == s
        egress = float(demand_bytes[np.ix_(mine, ~mine)].sum())
        ingress = float(demand_bytes[np.ix_(~mine, mine)].sum())
        ecap = float(cap[cross_link & (srv[src] == s)].sum())
        icap = float(cap[cross_link & (srv[dst] == s)].sum())
        if egress > 0:
            bound = max(bound, egress / ecap if ecap > 0 else math.inf)
        if ingress > 0:
            bound = max(bound, ingress / icap if icap > 0 else math.inf)
    return bound


def _steps(coll: Collective, graph: GpuGraph, per_epoch: list[np.ndarray], protocol: str,
           fabric: Fabric) -> tuple[Step, ...]:
    proto = PROTOCOLS[str(protocol).lower()]
    base = base_latency_s(proto)
    steps: list[Step] = []
    for bytes_e in per_epoch:
        on = np.flatnonzero(bytes_e > 0)
        if not on.size:
            continue
        s = graph.gpus[graph.edge_src[on]]
        d = graph.gpus[graph.edge_dst[on]]
        intra = bool(np.all(fabric.gpu_server[s] == fabric.gpu_server[d]))
        hw = ("nvlink" if np.any(fabric.link_kind == LinkKind.NVLINK) else "pci") if intra else "net"
        lat = step_latency_s(proto, hw=hw) + (0.0 if steps else base)
        steps.append(Step(src_gpu=s, dst_gpu=d, size_bytes=bytes_e[on],
                          deps=() if not steps else (len(steps) - 1,), latency_s=lat,
                          intra_server=intra))
    return tuple(steps)


class _Coefficients:
    """The constraint matrix of a time-expanded program, built from blocks of (row, column, value)
    triplets (values broadcast to the rows' shape); duplicates add up."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []

    def put(self, r, c, v) -> None:
        r = np.asarray(r)
        self.rows.append(r.ravel())
        self.cols.append(np.asarray(c).ravel())
        self.vals.append(np.broadcast_to(np.asarray(v, dtype=float), r.shape).ravel())

    def matrix(self, shape: tuple[int, int]) -> sp.csc_matrix:
        ij = (np.concatenate(self.rows), np.concatenate(self.cols))
        return sp.csc_matrix((np.concatenate(self.vals), ij), shape=shape)
