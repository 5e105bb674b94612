"""Collective schedule synthesis as a time-expanded multi-commodity flow, in the style of TE-CCL.

TE-CCL (Liu et al., "Rethinking Machine Learning Collective Communication as a Multi-Commodity
Flow Problem", SIGCOMM 2024) cuts time into epochs and lets chunks move over the links epoch by
epoch; GPUs store what they receive and may forward it later. Here:

* **The graph.** Nodes are the collective's GPUs. An edge ``a -> b`` carries bytes along the
  router's paths from ``a`` to ``b`` (spraying by default), so an edge's flow loads the physical
  links with the router's split fractions and the capacity rows are exactly the loads the
  simulator will see. ``edges="adjacent"`` (TE-CCL's graph, the AllGather default) keeps only
  the pairs whose paths cross no other GPU (a direct NVLink, NVSwitches, NICs, network
  switches): a GPU that relays stores the chunk and forwards it in a later epoch.
  ``edges="all"`` (the AllToAll default) also keeps the pairs the router connects through other
  GPUs' NVLinks, as every built-in algorithm's flows go; so the LP's choices include the direct
  schedule, and it never plans worse than it. Non-GPU nodes relay within an epoch and store
  nothing.
* **Epochs.** TE-CCL's convention: epoch = chunk / slowest link. AllToAll: the chunk is chosen
  so that a reference time (the larger of a lower bound -- per-GPU and per-server ingress and
  egress over capacity -- and the fluid optimum of the routing LP) spans ``e`` epochs; ``e`` is
  tried in 1, 2, 4, 8 and the schedule with the smallest predicted time (finish plus its
  steps' latencies) is kept: few epochs cost little latency, more epochs lose less to
  discretization (at most about ``1/e`` of the reference). AllGather: the chunk is the shard
  (``S/n``, or ``S/(n c)`` with ``chunks=c``), epoch = chunk over the slowest edge.
* **AllToAll: an LP.** One commodity per source GPU (its data for all destinations; with
  store-and-forward and no copies a single-source flow decomposes into per-destination paths,
  so aggregating by source loses nothing). Variables: flow per (source, edge, epoch), holdings
  per (source, GPU, epoch), deliveries per (source, GPU, epoch). What a GPU sends in an epoch
  must be held at the epoch's start (store-and-forward). Maximize delivered bytes by a horizon of
  T epochs; the smallest T that delivers everything (searched upward from the lower bound) is
  the finish epoch.
* **AllGather: a MILP with copies.** Binary "chunk c crosses edge e in epoch t"; a GPU may send
  a chunk it holds to several neighbours (a copy) and keeps it; every GPU must hold every chunk
  at the horizon; fewest transfers at the smallest feasible horizon.
* **Latency.** The link alphas are left out of the LP (they are far below an epoch for chunks of
  MiBs); the simulator adds them, and each epoch's step carries NCCL's per-step latency like the
  other algorithms.

The output is a `flowherd.collectives.schedule.Schedule`: one step per epoch (its flows are the
edges' bytes in that epoch), each waiting for the previous one, so the simulator runs it like
any algorithm (``flowherd collective --algo mcf``).

**Limit of scale** (measured on this 2-core machine, ``benchmarks/synthesis.py --scale``,
AllToAll of 256 MiB, all-pairs GPU graph). One horizon search at 8 epochs, the expensive case
(fabrics where relaying pays): leaf-spine with 2 GPUs per server, 8 GPUs 0.1 s, 12 GPUs 0.7 s,
16 GPUs 3.9 s, 24 GPUs 67 s; two DGX-1 chassis (16 GPUs) 3.2 s. The default epoch search stops
as soon as a schedule meets the reference time, so where one epoch suffices (leaf-spine, NDv2,
DGX-2) it costs one small LP (0.05 s at 16 GPUs, 0.2 s at 24). The LP has ``n * E * T`` flow
columns with up to ``E = n (n - 1)`` edges, so it grows like ``n^4`` to ``n^5``. The ``mcf``
algorithm therefore synthesizes AllToAll up to `MAX_SYNTHESIS_GPUS` = 16
GPUs and falls back to the FLASH-style scheduler (`flowherd.planning.bvn`) beyond. The AllGather
MILP solves DGX-1 (8 GPUs) to optimality in 0.02 s but needs about a minute on two NDv2 chassis
(16 GPUs, under its 20 s per-horizon time limit it returns the best schedule found, status
"time_limit" with its gap); ``mcf`` uses it up to `MAX_ALLGATHER_GPUS` = 8 GPUs and the ring
beyond (call `synthesize_allgather` directly for more).
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from flowherd.collectives.algorithms import ALGORITHMS
from flowherd.collectives.nccl import PROTOCOLS, WIRE_FRACTION
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule
from flowherd.errors import ConfigError, InfeasibleError, SolverError
from flowherd.fabric.core import Fabric
from flowherd.planning.bvn import bvn
from flowherd.planning.mcf import solve_lp
from flowherd.planning.teccl_graph import (
    GpuGraph,
    Synthesis,
    _Coefficients,
    _node_server,
    _steps,
    alltoall_lower_bound_s,
    gpu_graph,
)
from flowherd.registry import Registry
from flowherd.routing.policies import make_router

log = logging.getLogger(__name__)

__all__ = ["MAX_ALLGATHER_GPUS", "MAX_LP_COLUMNS", "MAX_SYNTHESIS_GPUS", "SYNTHESIZERS", "GpuGraph",
           "Synthesis", "gpu_graph", "mcf", "register_collective_algorithms", "simulate_schedule_s",
           "synthesize_allgather", "synthesize_alltoall"]

MAX_SYNTHESIS_GPUS = 16
MAX_LP_COLUMNS = 64_000
MAX_ALLGATHER_GPUS = 8


def _alltoall_lp(graph: GpuGraph, d_chunks: np.ndarray, cap_chunks: np.ndarray, horizon: int,
                 time_limit_s: float | None):
    """The max-delivery LP over ``horizon`` epochs (in chunk units); returns (LpResult, shapes)."""
    n, e_num, t_num = d_chunks.shape[0], graph.num_edges, horizon
    es, ed = graph.edge_src, graph.edge_dst
    nf, nh = n * e_num * t_num, n * n * t_num
    # column blocks: f[s, e, t], h[s, v, t], r[s, v, t]
    f_id = np.arange(nf).reshape(n, e_num, t_num)
    h_id = nf + np.arange(nh).reshape(n, n, t_num)
    r_id = nf + nh + np.arange(nh).reshape(n, n, t_num)
    # row blocks: conservation (n, n, T), store-and-forward (n, n, T), demand (n, n), capacity (L', T)
    cons = np.arange(nh).reshape(n, n, t_num)
    sf = nh + np.arange(nh).reshape(n, n, t_num)
    dem = 2 * nh + np.arange(n * n).reshape(n, n)
    used_links = np.unique(graph.load.nonzero()[0])
    lpos = np.full(graph.load.shape[0], -1, np.int64)
    lpos[used_links] = np.arange(used_links.size)
    capr = 2 * nh + n * n + np.arange(used_links.size * t_num).reshape(used_links.size, t_num)
    nrow = 2 * nh + n * n + used_links.size * t_num
    S, E, T = np.meshgrid(np.arange(n), np.arange(e_num), np.arange(t_num), indexing="ij")
    fcol = f_id[S, E, T].ravel()
    coef = _Coefficients()
    put = coef.put

    put(cons[S, es[E], T], fcol, 1.0)  # leaves the sender
    put(cons[S, ed[E], T], fcol, -1.0)  # arrives at the receiver
    put(sf[S, es[E], T], fcol, 1.0)
    Sh, Vh, Th = np.meshgrid(np.arange(n), np.arange(n), np.arange(t_num), indexing="ij")
    hcol = h_id[Sh, Vh, Th].ravel()
    put(cons[Sh, Vh, Th], hcol, 1.0)
    later = Th < t_num - 1
    put(cons[Sh[later], Vh[later], Th[later] + 1], h_id[Sh[later], Vh[later], Th[later]], -1.0)
    put(sf[Sh[later], Vh[later], Th[later] + 1], h_id[Sh[later], Vh[later], Th[later]], -1.0)
    rcol = r_id[Sh, Vh, Th].ravel()
    put(cons[Sh, Vh, Th], rcol, 1.0)
    put(dem[Sh, Vh], rcol, 1.0)
    lc = graph.load.tocoo()
    li, le, lv = lc.row.astype(np.int64), lc.col.astype(np.int64), lc.data
    for s in range(n):
        put(capr[lpos[li]], f_id[s][le], np.repeat(lv[:, None], t_num, axis=1))  # [nnz, T]
    a = coef.matrix((nrow, nf + 2 * nh))
    init = np.zeros((n, n))
    init[np.arange(n), np.arange(n)] = d_chunks.sum(axis=1)
    lo = np.full(nrow, -np.inf)
    hi = np.full(nrow, np.inf)
    first = np.zeros((n, n, t_num))
    first[:, :, 0] = init
    lo[cons.ravel()] = first.ravel()
    hi[cons.ravel()] = first.ravel()
    hi[sf.ravel()] = first.ravel()
    hi[dem.ravel()] = d_chunks.ravel()
    hi[capr.ravel()] = np.repeat(cap_chunks[used_links], t_num)
    col_hi = np.full(nf + 2 * nh, np.inf)
    self_r = r_id[np.arange(n), np.arange(n), :].ravel()
    col_hi[self_r] = 0.0
    c = np.zeros(nf + 2 * nh)
    # deliver as much as possible, and earlier rather than later (a tiny preference)
    c[rcol] = 1.0 - 1e-4 * (Th.ravel() + 1) / t_num
    res = solve_lp(c, a, lo, hi, col_hi=col_hi, maximize=True, time_limit_s=time_limit_s)
    return res, f_id, r_id


def _fluid_time_s(fabric: Fabric, graph: GpuGraph, d: np.ndarray) -> float:
    """Time of the demands under the best steady (fluid) routing: the min-max-utilization LP."""
    from flowherd.planning.mcf import route_min_max_utilization
    from flowherd.planning.traffic import TrafficMatrix

    i, j = np.nonzero(d)
    t = TrafficMatrix(src=graph.gpus[i], dst=graph.gpus[j], size_bytes=d[i, j])
    return route_min_max_utilization(fabric, t, paths_per_pair=8).max_utilization


def _synthesize_alltoall_at(coll: Collective, fabric: Fabric, graph: GpuGraph, d: np.ndarray,
                            reference_s: float, epochs: int, protocol: str,
                            time_limit_s: float | None, max_epochs_factor: float):
    epoch_s = reference_s / epochs
    slowest = float(graph.link_capacity_bytes_per_s[np.unique(graph.load.nonzero()[0])].min())
    chunk = epoch_s * slowest
    d_chunks = d / chunk
    total = d_chunks.sum()
    cap_chunks = graph.link_capacity_bytes_per_s * epoch_s / chunk
    horizon = epochs
    solves = 0
    best = None
    while horizon <= max_epochs_factor * epochs + 2:
        res, f_id, r_id = _alltoall_lp(graph, d_chunks, cap_chunks, horizon, time_limit_s)
        solves += 1
        if res.x is None:
            raise SolverError(f"HiGHS failed on the AllToAll LP ({res.status}, horizon {horizon})")
        delivered = float(res.x[r_id].sum())
        if delivered >= total * (1 - 1e-7):
            best = (res, f_id)
            break
        # the missing share at the rate delivered so far, at least one epoch more
        rate = delivered / horizon
        horizon += max(1, int((total - delivered) / rate) if rate > 0 else 1)
    if best is None:
        return None
    res, f_id = best
    while horizon > epochs:  # the search may have jumped past the smallest feasible horizon
        r2, f2, r_id2 = _alltoall_lp(graph, d_chunks, cap_chunks, horizon - 1, time_limit_s)
        solves += 1
        if r2.x is None or float(r2.x[r_id2].sum()) < total * (1 - 1e-7):
            break
        horizon, res, f_id = horizon - 1, r2, f2
    flow = res.x[f_id]  # [n, E, T] chunks
    per_epoch = [flow[:, :, t].sum(axis=0) * chunk for t in range(horizon)]
    per_epoch = [np.where(b > 1e-9 * chunk, b, 0.0) for b in per_epoch]
    proto = PROTOCOLS[str(protocol).lower()]
    sched = Schedule(collective=coll, algorithm="mcf", protocol=proto.value,
                     steps=_steps(coll, graph, per_epoch, protocol, fabric),
                     wire_fraction=WIRE_FRACTION[proto])
    return sched, horizon, epoch_s, chunk, solves, res.status


def simulate_schedule_s(fabric: Fabric, schedule: Schedule, router: str = "spray") -> float:
    """Time of `schedule` alone on `fabric` in the flow-level simulator (step fidelity), seconds."""
    from flowherd.cluster.collective import add_schedule
    from flowherd.engine.core import Engine

    eng = Engine(fabric, make_router(router, fabric), record_flows=False)
    done = add_schedule(eng, schedule, fidelity="step", at_s=0.0)
    eng.run()
    return float(eng.coflow_finish_s(done) or 0.0)


def synthesize_alltoall(coll: Collective, fabric: Fabric, *, epochs: int | tuple[int, ...] = (1, 2, 4, 8),
                        protocol: str = "simple", router: str = "spray",
                        edges: str | tuple[str, ...] = ("all", "adjacent"), check: bool = True,
                        time_limit_s: float | None = None, max_epochs_factor: float = 4.0) -> Synthesis:
    """AllToAll(v) by the time-expanded LP (module docstring).

    The epoch is ``reference / epochs``, the reference being the larger of the lower bound and
    the fluid optimum (the min-max-utilization routing LP of `flowherd.planning.mcf`). Every
    GPU graph of ``edges`` and every ``epochs`` value gives a candidate (fewer epochs cost less
    latency, more epochs lose less to discretization); the candidate that runs fastest in the
    simulator (``check``; otherwise the smallest predicted time, finish plus the steps'
    latencies) is kept. The simulator check matters because inside an epoch the simulator shares
    links max-min fairly, not in the LP's proportions: on DGX-1 the all-pairs graph's 2-epoch
    plan runs 6.7 % over its LP finish, TE-CCL's adjacent graph's 0.4 %. The search over a graph
    stops once a candidate meets the reference time, and over everything once a single-epoch
    candidate does (nothing has less latency).

    Args:
        coll: An AllToAll or AllToAllv collective.
        fabric: The fabric.
        epochs: Epochs the reference time spans (one value or several to choose from).
        protocol: NCCL protocol of the steps' latencies.
        router: The routing the simulator will use (its split fractions load the links).
        edges: GPU graph(s) (`gpu_graph`): "all" pairs and/or TE-CCL's "adjacent" ones.
        check: Pick among the candidates by simulating them (else by the predicted time).
        time_limit_s: Budget per LP solve.
        max_epochs_factor: Give up (InfeasibleError) beyond this many times ``epochs``.

    Raises:
        ConfigError: Wrong op, or bad ``epochs`` / ``edges``.
        InfeasibleError: Some destination cannot be reached from its source over the GPU graph.
    """
    if coll.op not in (Op.ALLTOALL, Op.ALLTOALLV):
        raise ConfigError(f"synthesize_alltoall needs op alltoall or alltoallv, got {coll.op.value!r} (op)")
    targets = (epochs,) if isinstance(epochs, int | np.integer) else tuple(epochs)
    if not targets or any(isinstance(e, bool) or int(e) != e or e < 1 for e in targets):
        raise ConfigError(f"epochs must be positive integers, got {epochs!r} (epochs)")
    kinds = (edges,) if isinstance(edges, str) else tuple(edges)
    if not kinds:
        raise ConfigError("edges must name at least one GPU graph, 'all' or 'adjacent' (edges)")
    t0 = time.perf_counter()
    proto = PROTOCOLS[str(protocol).lower()]
    graphs: list[GpuGraph] = []
    for kind in kinds:
        g = gpu_graph(fabric, coll.gpus, router, edges=kind)
        if not any(np.array_equal(g.edge_src, h.edge_src) and np.array_equal(g.edge_dst, h.edge_dst)
                   for h in graphs):
            graphs.append(g)
    d = coll.pair_matrix_bytes()
    gpus = graphs[0].gpus
    lb = alltoall_lower_bound_s(fabric, gpus, d) if d.sum() > 0 else 0.0
    if lb == 0.0 or coll.n < 2:
        sched = Schedule(collective=coll, algorithm="mcf", protocol=proto.value, steps=())
        return Synthesis(schedule=sched, epochs=0, epoch_s=0.0, chunk_bytes=0.0, finish_s=0.0,
                         lower_bound_s=0.0, solve_s=0.0, num_solves=0, status="optimal")
    if not math.isfinite(lb):
        raise InfeasibleError(f"AllToAll on GPUs {coll.gpus}: a server has demand but no link "
                              f"leaving it (fabric {fabric.name!r})")
    reference = max(lb, _fluid_time_s(fabric, graphs[0], d))
    best, best_cost, solves, done = None, math.inf, 0, False
    for graph in graphs:
        for e in sorted(set(int(x) for x in targets)):
            out = _synthesize_alltoall_at(coll, fabric, graph, d, reference, e, protocol, time_limit_s,
                                          max_epochs_factor)
            if out is None:
                continue
            sched, horizon, epoch_s, chunk, k, status = out
            solves += k
            sim = simulate_schedule_s(fabric, sched, router) if check else math.nan
            cost = sim if check else horizon * epoch_s + sched.critical_path()[0]
            if cost < best_cost:
                best, best_cost = (sched, horizon, epoch_s, chunk, status, sim), cost
            if horizon * epoch_s <= reference * (1 + 1e-9):
                done = horizon == 1  # one epoch at the reference: nothing has less latency
                break  # at the reference time: more epochs would only add step latency
        if done:
            break
    if best is None:
        raise InfeasibleError(f"AllToAll on GPUs {coll.gpus} does not finish within "
                              f"{max_epochs_factor:g} times its fluid time on fabric {fabric.name!r}: "
                              "some destination is unreachable over the GPU graph")
    sched, horizon, epoch_s, chunk, status, sim = best
    return Synthesis(schedule=sched, epochs=horizon, epoch_s=epoch_s, chunk_bytes=chunk,
                     finish_s=horizon * epoch_s, lower_bound_s=lb, solve_s=time.perf_counter() - t0,
                     num_solves=solves, status=status, simulated_s=sim)


def _allgather_milp(graph: GpuGraph, chunks: int, cap_chunks: np.ndarray, horizon: int,
                    time_limit_s: float | None):
    n, e_num, t_num = len(graph.gpus), graph.num_edges, horizon
    k = n * chunks  # commodity = (owner rank, piece)
    owner = np.repeat(np.arange(n), chunks)
    es, ed = graph.edge_src, graph.edge_dst
    nx_, nh = k * e_num * t_num, k * n * t_num
    x_id = np.arange(nx_).reshape(k, e_num, t_num)
    h_id = nx_ + np.arange(nh).reshape(k, n, t_num)
    hold = np.arange(nh).reshape(k, n, t_num)
    send = nh + np.arange(nx_).reshape(k, e_num, t_num)
    used_links = np.unique(graph.load.nonzero()[0])
    lpos = np.full(graph.load.shape[0], -1, np.int64)
    lpos[used_links] = np.arange(used_links.size)
    capr = nh + nx_ + np.arange(used_links.size * t_num).reshape(used_links.size, t_num)
    nrow = nh + nx_ + used_links.size * t_num
    coef = _Coefficients()
    put = coef.put

    C, E, T = np.meshgrid(np.arange(k), np.arange(e_num), np.arange(t_num), indexing="ij")
    # hold[c, v, t]: h[c,v,t] - h[c,v,t-1] - sum_{e into v} x[c,e,t] <= init (t == 0)
    put(hold[C, ed[E], T], x_id[C, E, T], -1.0)
    put(send[C, E, T], x_id[C, E, T], 1.0)
    Ch, Vh, Th = np.meshgrid(np.arange(k), np.arange(n), np.arange(t_num), indexing="ij")
    put(hold[Ch, Vh, Th], h_id[Ch, Vh, Th], 1.0)
    later = Th < t_num - 1
    put(hold[Ch[later], Vh[later], Th[later] + 1], h_id[Ch[later], Vh[later], Th[later]], -1.0)
    # send[c, e, t]: x[c,e,t] - h[c, src(e), t-1] <= init (t == 0)
    later = t_num - 1 > T
    put(send[C[later], E[later], T[later] + 1], h_id[C[later], es[E[later]], T[later]], -1.0)
    lc = graph.load.tocoo()
    li, le, lv = lc.row.astype(np.int64), lc.col.astype(np.int64), lc.data
    for c in range(k):
        put(capr[lpos[li]], x_id[c][le], np.repeat(lv[:, None], t_num, axis=1))
    a = coef.matrix((nrow, nx_ + nh))
    init_h = np.zeros((k, n))
    init_h[np.arange(k), owner] = 1.0
    lo = np.full(nrow, -np.inf)
    hi = np.zeros(nrow)
    hi[hold[:, :, 0].ravel()] = init_h.ravel()
    hi[send[:, :, 0].ravel()] = init_h[:, es].ravel()
    hi[capr.ravel()] = np.repeat(cap_chunks[used_links], t_num)
    col_lo = np.zeros(nx_ + nh)
    col_hi = np.ones(nx_ + nh)
    col_lo[h_id[:, :, t_num - 1].ravel()] = 1.0  # every GPU holds every chunk at the horizon
    integer = np.zeros(nx_ + nh, bool)
    integer[:nx_] = True
    cost = np.zeros(nx_ + nh)
    cost[:nx_] = 1.0  # fewest transfers
    res = solve_lp(cost, a, lo, hi, col_lo=col_lo, col_hi=col_hi, integer=integer,
                   time_limit_s=time_limit_s)
    return res, x_id


def synthesize_allgather(coll: Collective, fabric: Fabric, *, chunks: int = 1, protocol: str = "simple",
                         router: str = "spray", edges: str = "adjacent",
                         time_limit_s: float | None = 30.0,
                         max_epochs: int | None = None) -> Synthesis:
    """AllGather by the time-expanded MILP with copies (module docstring).

    Args:
        coll: An AllGather (``size_bytes`` is the gathered buffer; each rank owns ``S/n``).
        fabric: The fabric.
        chunks: Pieces each shard is cut into (commodities ``n * chunks``).
        protocol: NCCL protocol of the steps' latencies.
        router: The routing the simulator will use.
        edges: The GPU graph (`gpu_graph`): TE-CCL's "adjacent" pairs (default) or "all".
        time_limit_s: Budget per MILP solve; on a time-out with a solution the schedule is
            returned with ``status="time_limit"`` and its gap.
        max_epochs: Give up beyond this horizon (default ``4 n chunks``).

    Raises:
        InfeasibleError: No schedule within ``max_epochs`` (e.g. a disconnected GPU graph).
    """
    if coll.op != Op.ALLGATHER:
        raise ConfigError(f"synthesize_allgather needs op allgather, got {coll.op.value!r} (op)")
    if isinstance(chunks, bool) or int(chunks) < 1:
        raise ConfigError(f"chunks must be a positive integer, got {chunks!r} (chunks)")
    t0 = time.perf_counter()
    n = coll.n
    proto = PROTOCOLS[str(protocol).lower()]
    graph = gpu_graph(fabric, coll.gpus, router, edges=edges)
    chunk = float(coll.size_bytes) / (n * chunks)
    if n < 2 or chunk <= 0:
        sched = Schedule(collective=coll, algorithm="mcf", protocol=proto.value, steps=())
        return Synthesis(schedule=sched, epochs=0, epoch_s=0.0, chunk_bytes=chunk, finish_s=0.0,
                         lower_bound_s=0.0, solve_s=0.0, num_solves=0, status="optimal")
    epoch_s = chunk / float(graph.edge_capacity_bytes_per_s.min())
    cap_chunks = graph.link_capacity_bytes_per_s * epoch_s / chunk
    # lower bound: every GPU receives (n - 1) chunks pieces over its incoming links
    in_cap = np.bincount(fabric.link_dst.astype(np.int64), weights=graph.link_capacity_bytes_per_s,
                         minlength=fabric.num_nodes)[graph.gpus]
    lb_epochs = max(1, math.ceil(float(np.max((n - 1) * chunks * chunk / (in_cap * epoch_s))) - 1e-9))
    # and every server receives the other servers' chunks over its boundary links
    srv = _node_server(fabric)
    src_l, dst_l = fabric.link_src.astype(np.int64), fabric.link_dst.astype(np.int64)
    cross = srv[src_l] != srv[dst_l]
    gs = fabric.gpu_server[graph.gpus]
    for s_ in np.unique(gs):
        need = int(np.count_nonzero(gs != s_)) * chunks
        icap = float(graph.link_capacity_bytes_per_s[cross & (srv[dst_l] == s_)].sum())
        if need and icap > 0:
            lb_epochs = max(lb_epochs, math.ceil(need * chunk / (icap * epoch_s) - 1e-9))
    limit = max_epochs if max_epochs is not None else 4 * n * chunks
    horizon, solves = lb_epochs, 0
    while horizon <= limit:
        res, x_id = _allgather_milp(graph, int(chunks), cap_chunks, horizon, time_limit_s)
        solves += 1
        if res.x is not None:
            x = np.round(res.x[x_id])  # [k, E, T]
            per_epoch = [x[:, :, t].sum(axis=0) * chunk for t in range(horizon)]
            sched = Schedule(collective=coll, algorithm="mcf", protocol=proto.value,
                             steps=_steps(coll, graph, per_epoch, protocol, fabric),
                             wire_fraction=WIRE_FRACTION[proto])
            return Synthesis(schedule=sched, epochs=horizon, epoch_s=epoch_s, chunk_bytes=chunk,
                             finish_s=horizon * epoch_s, lower_bound_s=lb_epochs * epoch_s,
                             solve_s=time.perf_counter() - t0, num_solves=solves, status=res.status,
                             mip_gap=res.mip_gap)
        if res.status not in ("infeasible", "time_limit"):
            raise SolverError(f"HiGHS failed on the AllGather MILP ({res.status}, horizon {horizon})")
        horizon += 1
    raise InfeasibleError(f"AllGather on GPUs {coll.gpus} finds no schedule within {limit} epochs "
                          f"on fabric {fabric.name!r}: some GPU is unreachable over the GPU graph")


def _lp_columns(coll: Collective, epochs: int) -> int:
    n = coll.n
    return n * n * (n - 1) * epochs * 2  # edges at most n (n - 1), horizon about 2x the target


def mcf(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
        chunks: int | None = None) -> Schedule:
    """The ``mcf`` collective algorithm: TE-CCL-style synthesis (module docstring).

    AllToAll(v): the LP (FLASH-style `bvn` beyond `MAX_SYNTHESIS_GPUS` / `MAX_LP_COLUMNS`);
    AllGather: the MILP with copies (``chunks`` pieces per shard; the ring beyond the limit).
    """
    if fabric is None:
        raise ConfigError("algorithm 'mcf' needs the fabric to synthesize a schedule (fabric)")
    if coll.op in (Op.ALLTOALL, Op.ALLTOALLV):
        if coll.n > MAX_SYNTHESIS_GPUS or _lp_columns(coll, 8) > MAX_LP_COLUMNS:
            log.info("mcf: %d GPUs is beyond the synthesis LP's scale, using bvn", coll.n)
            return bvn(coll, fabric=fabric, protocol=protocol)
        return synthesize_alltoall(coll, fabric, protocol=protocol).schedule
    if coll.op == Op.ALLGATHER:
        if coll.n > MAX_ALLGATHER_GPUS:
            log.info("mcf: %d GPUs is beyond the synthesis MILP's scale, using ring", coll.n)
            return ALGORITHMS["ring"](coll, fabric=fabric, protocol=protocol)
        return synthesize_allgather(coll, fabric, chunks=chunks or 1, protocol=protocol).schedule
    raise ConfigError(f"algorithm 'mcf' does not implement op {coll.op.value!r}; it implements "
                      "alltoall, alltoallv, allgather (op, algorithm)")


#: Collective algorithms of the planning layer, by name (the CLI adds them to ``ALGORITHMS``).
SYNTHESIZERS: Registry = Registry("collective algorithm", {"mcf": mcf, "bvn": bvn})


def register_collective_algorithms() -> None:
    """Add `SYNTHESIZERS` to `flowherd.collectives.algorithms.ALGORITHMS` (idempotent).

    Planning sits above collectives, so collectives cannot import these; the CLI (and any
    script that wants ``build_schedule(coll, "mcf")``) calls this once.
    """
    for name, fn in SYNTHESIZERS.items():
        if name not in ALGORITHMS:
            ALGORITHMS.add(name, fn)
