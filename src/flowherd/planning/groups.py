"""Communication groups of a job and placements that keep them inside the smallest fabric unit.

An LLM training job's traffic is sparse: a GPU talks to its tensor-parallel peers (every layer),
its expert- and data-parallel peers (rings and all-to-alls once per micro-batch or per
iteration) and its two pipeline neighbours (point to point per micro-batch), and to no one else
(Arnold, NeurIPS'25: 99 % of GPU pairs exchange nothing). With Megatron's rank order
(`flowherd.workload.training`: TP innermost, then CP, then DP with EP carved out of it, PP
outermost) and ranks laid on whole servers in server order (`rank_to_gpu`), the groups are
nested blocks of consecutive servers:

* a **unit** (TP x CP, times EP for an MoE job when it fits): inside one server, over NVLink;
* a **stage** (TP x CP x DP = one pipeline stage, holding its DP and EP rings): ``stage_servers``
  consecutive servers;
* the pipeline's neighbours: stage p's k-th server talks to stage p + 1's k-th server.

A placement in whole servers that gives every leaf (or scalable unit of a rail-optimized fabric:
the fabric unit under one set of uplinks, `flowherd.planning.view`) a multiple of
``stage_servers`` keeps each stage's DP/EP rings inside one leaf, so only the pipeline's
neighbour sends cross leaves, and as few times as the job has leaves; and whole servers keep
every rank's rail (its NIC's index) equal to its peers' on a rail-optimized fabric. `aligned_counts`
finds such leaf counts (fewest leaves first), `arnold_counts` solves Arnold's trade-off as a
MIP (HiGHS): the spread of the DP groups (stage blocks) and of the pipelines over leaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np

from flowherd.planning.predict import FabricView, JobProfile, _server_of

__all__ = [
    "JobGroups",
    "aligned_counts",
    "arnold_counts",
    "counts_to_gpus",
    "free_whole_servers",
    "job_groups",
    "packed_place",
    "type_mask",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobGroups:
    """A job's communication groups in whole servers (module docstring).

    Attributes:
        servers: Whole servers the job needs (0 when it fits in part of one, or is not whole).
        stage_servers: Servers of one pipeline stage (its DP/EP rings), at least 1.
        stages: Pipeline stages (the blocks of ``stage_servers``).
    """

    servers: int
    stage_servers: int
    stages: int


def job_groups(p: JobProfile, gpus_per_server: int) -> JobGroups:
    """The `JobGroups` of a job's profile on servers of ``gpus_per_server`` GPUs."""
    job = p.job
    n = p.world_size
    if n < gpus_per_server or n % gpus_per_server or p.kind != "training" or job is None:
        return JobGroups(servers=0, stage_servers=1, stages=1)
    servers = n // gpus_per_server
    stage_gpus = job.tp * job.cp * job.dp
    stage_servers = max(1, stage_gpus // gpus_per_server) if stage_gpus % gpus_per_server == 0 else servers
    return JobGroups(servers=servers, stage_servers=stage_servers, stages=max(1, servers // stage_servers))


def free_whole_servers(view: FabricView, free: np.ndarray, gpu_type: str | None = None) -> np.ndarray:
    """``bool[S]``: servers all of whose GPUs are free (and of ``gpu_type`` when given)."""
    server = _server_of(view)
    busy = np.bincount(server[~free], minlength=view.num_servers)
    ok = busy == 0
    if gpu_type is not None:
        ok &= np.array([t == gpu_type for t in view.server_type])
    return ok


def aligned_counts(room: np.ndarray, need: int, block: int, order: np.ndarray) -> np.ndarray | None:
    """Servers to take in each leaf: multiples of ``block`` (a stage stays in one leaf), fewest
    leaves; ``room`` the whole free servers per leaf, ``order`` the leaves by preference (ties of
    the fewest-leaves rule go to the earlier ones). A leaf that holds the whole job alone is
    chosen by best fit (least room left, then ``order``). None when no aligned counts exist."""
    usable = room // block * block
    counts = np.zeros(room.size, np.int64)
    rank = np.empty(room.size, np.int64)
    rank[order] = np.arange(order.size)
    one = np.flatnonzero(usable >= need)
    if one.size:
        best = one[np.lexsort((rank[one], usable[one]))][0]
        counts[best] = need
        return counts
    left = need
    for li in np.lexsort((rank, -usable)).tolist():  # largest usable room first: fewest leaves
        if left <= 0 or usable[li] <= 0:
            break
        take = min(int(usable[li]), left)
        counts[li] = take
        left -= take
    return counts if left == 0 else None


def arnold_counts(room: np.ndarray, need: int, block: int, *, alpha: float = 0.5,
                  time_limit_s: float = 5.0) -> np.ndarray | None:
    """Arnold's placement of one job as a MIP (HiGHS): servers per leaf minimizing ``alpha`` x the
    DP groups' spread (the leaves a stage block touches, summed over stages) plus ``1 - alpha`` x
    the pipelines' spread (the leaves the job touches), then the room it leaves in the leaves
    it touches (best fit, less fragmentation). Stage blocks are laid on the leaves in server
    order (`rank_to_gpu`), so a leaf's count that is not a multiple of ``block`` splits a stage
    with the next leaf: the DP spread counts one more leaf for each such leaf. None when the
    leaves' room is short of ``need``."""
    nl = room.size
    if int(room.sum()) < need:
        return None
    cap = room.astype(np.float64)
    # columns: x[l] servers (int), v[l] uses leaf (bin), s[l] leaf's count is split (bin),
    # k[l] whole blocks in leaf (int)
    n_col = 4 * nl
    x, v, s, k = (np.arange(nl) + i * nl for i in range(4))
    stages = max(1, need // block)
    cost = np.zeros(n_col)
    cost[v] = (1.0 - alpha) + 1e-3 * cap / max(need, 1)  # pipelines' spread; then best fit
    cost[s] = alpha  # a split stage touches one more leaf
    cost[k] = 0.0
    cost[x] = -1e-3 / max(need, 1)  # best fit: fill the leaves it uses
    lo = np.zeros(n_col)
    hi = np.concatenate([cap, np.ones(nl), np.ones(nl), np.floor(cap / block)])
    rows, cols, vals, rlo, rhi = [], [], [], [], []

    def row(cs: list[int], vs: list[float], a: float, b: float) -> None:
        r = len(rlo)
        rows.extend([r] * len(cs))
        cols.extend(cs)
        vals.extend(vs)
        rlo.append(a)
        rhi.append(b)

    row(list(x), [1.0] * nl, float(need), float(need))
    for li in range(nl):
        row([int(x[li]), int(v[li])], [1.0, -cap[li]], -math.inf, 0.0)  # x <= cap v
        # x = block k + r, 0 <= r <= (block - 1) s: a remainder is a split stage
        row([int(x[li]), int(k[li]), int(s[li])], [1.0, -float(block), -(block - 1.0)], -math.inf, 0.0)
        row([int(x[li]), int(k[li])], [1.0, -float(block)], 0.0, math.inf)
    import scipy.sparse as sp

    a = sp.csc_matrix((vals, (rows, cols)), shape=(len(rlo), n_col))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_col, len(rlo)
    lp.col_cost_ = cost + alpha * 0.0 * stages
    lp.col_lower_, lp.col_upper_ = lo, hi
    lp.row_lower_, lp.row_upper_ = np.asarray(rlo), np.asarray(rhi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n_col
    h = getattr(getattr(highspy, "_core", None), "_Highs", highspy.Highs)()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("threads", 1)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.passModel(lp)
    h.run()
    sol = h.getSolution()
    if not sol.value_valid:
        return None
    return np.rint(np.asarray(sol.col_value)[x]).astype(np.int64)


def counts_to_gpus(view: FabricView, whole: np.ndarray, counts: np.ndarray,
                   prefer: np.ndarray | None = None) -> np.ndarray:
    """GPU ids of ``counts[l]`` whole free servers in each leaf (``whole``: `free_whole_servers`),
    servers by ``prefer`` (lower first; default their id), then id."""
    chosen = []
    key = np.arange(view.num_servers) if prefer is None else np.asarray(prefer)
    for li in np.flatnonzero(counts).tolist():
        srv = np.flatnonzero(whole & (view.server_leaf == li))
        srv = srv[np.lexsort((srv, key[srv]))][:int(counts[li])]
        chosen.extend(srv.tolist())
    return np.sort(np.concatenate([view.gpus_of(s) for s in chosen])) if chosen else np.zeros(0, np.int64)


def leaf_room(view: FabricView, whole: np.ndarray) -> np.ndarray:
    """``int64[L]``: whole free servers per leaf."""
    return np.bincount(view.server_leaf[whole], minlength=view.num_leaves).astype(np.int64)


def fragments(view: FabricView, placements: list[Any]) -> np.ndarray:
    """``int64[L]``: jobs present in each leaf that also have servers elsewhere (MonkeyTree's
    fragments: each sends its rings out of the leaf)."""
    out = np.zeros(view.num_leaves, np.int64)
    server = _server_of(view)
    for g in placements:
        if g is None or not len(g):
            continue
        leaves = np.unique(view.server_leaf[np.unique(server[np.asarray(g, dtype=np.int64)])])
        if leaves.size > 1:
            out[leaves] += 1
    return out

def type_mask(view: FabricView, gpu_type: str) -> np.ndarray:
    """``bool[G]``: GPUs of servers of type ``gpu_type``."""
    ok = np.array([t == gpu_type for t in view.server_type])
    return ok[_server_of(view)]


def packed_place(view: FabricView, n: int, free: np.ndarray) -> np.ndarray | None:
    """Fewest servers then fewest leaves (the rule of `flowherd.cluster.placement.PackedPlacer`)."""
    server = _server_of(view)
    if int(free.sum()) < n:
        return None
    free_per = np.bincount(server[free], minlength=view.num_servers)
    fits = np.flatnonzero(free_per >= n)
    if fits.size:
        s = int(fits[np.argmin(free_per[fits])])
        return np.flatnonzero(free & (server == s))[:n]
    leaf = view.server_leaf
    free_leaf = np.bincount(leaf, weights=free_per, minlength=view.num_leaves)
    chosen: list[int] = []
    need = n
    for li in np.lexsort((np.arange(view.num_leaves), -free_leaf)).tolist():
        if need <= 0:
            break
        srv = np.flatnonzero((leaf == li) & (free_per > 0))
        srv = srv[np.lexsort((srv, -free_per[srv]))]
        if free_leaf[li] >= need:
            while need > 0:
                done = srv[free_per[srv] >= need]
                s = int(done[np.argmin(free_per[done])]) if done.size else int(srv[0])
                chosen.append(s)
                need -= int(free_per[s])
                srv = srv[srv != s]
        else:
            chosen.extend(srv.tolist())
            need -= int(free_leaf[li])
    g = np.concatenate([np.flatnonzero(free & (server == s)) for s in chosen])[:n]
    return np.sort(g)
