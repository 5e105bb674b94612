"""Multi-commodity-flow routing LP (path-based, with column generation) on HiGHS.

Given GPU-pair demands (a `TrafficMatrix` of bytes per period), choose for every pair a split of
its bytes over paths so that the largest link utilization ``load / (capacity * period)`` is as
small as possible. Background bytes already on the links count towards their load. The
communication time of a period's traffic under the split is then ``max_utilization * period``
(fluid model): minimizing the utilization minimizes the time.

Formulation (master LP over a restricted path set ``P_k`` per pair ``k``, demand ``d_k``)::

    min  U + eps * sum_l load_l / (c_l T)
    s.t. sum_{p in P_k} x_p = 1                                   for every pair k   (dual pi_k)
         sum_k d_k sum_{p in P_k, l in p} x_p / (c_l T) - U <= -bg_l / (c_l T)  for every link l
         x >= 0

The small ``eps`` term breaks ties towards short, lightly used paths (the min-max objective
alone leaves the links off the bottleneck arbitrary). Paths start as the pair's equal-cost
shortest paths (`flowherd.routing.paths.shortest_paths`, at most ``paths_per_pair``), or the
``k_shortest_paths`` when there are fewer; column generation then prices new paths: with
link weights ``w_l = (eps - mu_l) / (c_l T)`` from the link rows' duals ``mu_l <= 0``, the
cheapest path of pair k (Dijkstra over the network: switches, NICs and NVSwitches forward,
GPUs only send and receive) enters if ``d_k * w(path) < pi_k``. When no path prices out,
the restricted optimum is the optimum over all such paths (paths through GPUs, e.g. the
multi-hop NVLink paths of a DGX-1 mesh, come only from the initial set). Stopped early (time limit, round
limit), the solution is feasible and ``lower_bound`` is the Lagrangian bound
``z_RMP + sum_k min(0, reduced cost_k)`` (Lasdon, "Optimization Theory for Large Systems").

Scale: one LP row per directed link and per pair, one column per path. Measured on this
2-core machine: a 4,096-GPU leaf-spine (512 servers of 8, 32 leaves, 16 spines, 16 equal-cost
paths per inter-leaf pair), random pairs: 2,000 pairs 2.1 s, 20,000 pairs 8.3 s (one round:
the equal-cost set is already optimal there), most of it listing the initial paths in Python.
On fabrics with thousands of equal-cost paths per pair (large fat-trees) pass
``paths_per_pair`` and let column generation add paths where they pay; beyond about 10^5
pairs aggregate pairs per server (or leaf) first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from flowherd.errors import ConfigError, InfeasibleError, SolverError
from flowherd.fabric.core import Fabric, NodeKind
from flowherd.planning.traffic import TrafficMatrix
from flowherd.routing.paths import k_shortest_paths, shortest_paths

log = logging.getLogger(__name__)

__all__ = ["LpResult", "McfSolution", "route_min_max_utilization", "solve_lp"]

_UTIL_RTOL = 1e-6


# ---- a thin array-based HiGHS wrapper (shared with teccl) -----------------------------------
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LpResult:
    """What `solve_lp` returns: our values, never HiGHS objects.

    Attributes:
        x: Column values (None if the solver found no feasible point).
        row_dual: Row duals (LPs only; None otherwise).
        objective: Objective value (nan without a solution).
        status: "optimal", "time_limit", "infeasible", "unbounded" or HiGHS' status text.
        mip_gap: Relative MIP gap (0 for LPs and proven optima).
        solve_s: Wall-clock seconds in the solver.
    """

    x: np.ndarray | None
    row_dual: np.ndarray | None
    objective: float
    status: str
    mip_gap: float
    solve_s: float


def solve_lp(c: np.ndarray, a: sp.spmatrix, row_lo: np.ndarray, row_hi: np.ndarray, *,
             col_lo: np.ndarray | None = None, col_hi: np.ndarray | None = None,
             integer: np.ndarray | None = None, maximize: bool = False,
             time_limit_s: float | None = None, mip_rel_gap: float | None = None) -> LpResult:
    """Solve ``min/max c x  s.t.  row_lo <= A x <= row_hi,  col_lo <= x <= col_hi`` with HiGHS.

    The model is passed as arrays (CSC matrix) in one call. ``integer`` marks integer columns
    (a MILP). Infinite bounds are given as ``np.inf``.
    """
    n = len(c)
    a = sp.csc_matrix(a)
    if a.shape[1] != n:
        raise ConfigError(f"constraint matrix has {a.shape[1]} columns, expected {n} (solve_lp)")
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = a.shape[0]
    lp.col_cost_ = np.asarray(c, dtype=np.float64)
    lp.col_lower_ = np.zeros(n) if col_lo is None else np.clip(np.asarray(col_lo, float), -inf, inf)
    lp.col_upper_ = np.full(n, inf) if col_hi is None else np.clip(np.asarray(col_hi, float), -inf, inf)
    lp.row_lower_ = np.clip(np.asarray(row_lo, dtype=np.float64), -inf, inf)
    lp.row_upper_ = np.clip(np.asarray(row_hi, dtype=np.float64), -inf, inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr.astype(np.int32)
    lp.a_matrix_.index_ = a.indices.astype(np.int32)
    lp.a_matrix_.value_ = a.data.astype(np.float64)
    lp.sense_ = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
    is_mip = integer is not None and bool(np.any(integer))
    if is_mip:
        lp.integrality_ = [highspy.HighsVarType.kInteger if v else highspy.HighsVarType.kContinuous
                           for v in np.asarray(integer, bool)]
    # highspy.Highs() prints HiGHS' banner to stdout when constructed, which would break the
    # CLI's --json output; the binding class it wraps does not, once output_flag is off
    h = getattr(getattr(highspy, "_core", None), "_Highs", highspy.Highs)()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    if time_limit_s is not None:
        h.setOptionValue("time_limit", float(time_limit_s))
    if mip_rel_gap is not None:
        h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    t0 = time.perf_counter()
    if h.passModel(lp) != highspy.HighsStatus.kOk:
        raise SolverError("HiGHS rejected the model (passModel failed)")
    h.run()
    solve_s = time.perf_counter() - t0
    ms = h.getModelStatus()
    info = h.getInfo()
    has_x = info.primal_solution_status == 2  # kSolutionStatusFeasible
    status = {highspy.HighsModelStatus.kOptimal: "optimal",
              highspy.HighsModelStatus.kTimeLimit: "time_limit",
              highspy.HighsModelStatus.kInfeasible: "infeasible",
              highspy.HighsModelStatus.kUnbounded: "unbounded",
              highspy.HighsModelStatus.kUnboundedOrInfeasible: "infeasible"}.get(
        ms, h.modelStatusToString(ms))
    sol = h.getSolution()
    x = np.asarray(sol.col_value) if has_x else None
    dual = np.asarray(sol.row_dual) if (has_x and not is_mip and sol.dual_valid) else None
    gap = float(info.mip_gap) if is_mip and has_x else 0.0
    obj = float(info.objective_function_value) if has_x else float("nan")
    return LpResult(x=x, row_dual=dual, objective=obj, status=status,
                    mip_gap=gap if np.isfinite(gap) else float("inf"), solve_s=solve_s)


# ---- the routing LP ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class McfSolution:
    """A routing of GPU-pair demands: per pair, paths and the share of its bytes on each.

    Attributes:
        src, dst: ``int64[k]`` the routed pairs (distinct, ``src != dst``).
        demand_bytes: ``float64[k]`` bytes of each pair per period.
        paths: ``paths[k]``: the pair's paths, each an ``int32`` array of directed link ids.
        split: ``split[k]``: ``float64`` share of the pair's bytes on each path (sums to 1).
        max_utilization: Largest ``(load + background) / (capacity * period)`` over the links.
        link_load_bytes: ``float64[L]`` bytes per period on each link from the demands
            (background excluded).
        solve_s: Wall-clock seconds, path listing and all LP solves.
        status: "optimal" (no path prices out), "time_limit" or "round_limit" (column
            generation stopped early), or "restricted" (``column_generation=False``: optimal over
            the initial paths only).
        lower_bound: A lower bound on the optimal max utilization (equal to it when optimal).
        period_s: The period the demands and loads refer to, seconds.
        rounds: Column-generation rounds run.
        bottleneck_link: The most utilized directed link (-1 without links).
    """

    src: np.ndarray
    dst: np.ndarray
    demand_bytes: np.ndarray
    paths: list[list[np.ndarray]]
    split: list[np.ndarray]
    max_utilization: float
    link_load_bytes: np.ndarray
    solve_s: float
    status: str
    lower_bound: float = 0.0
    period_s: float = 1.0
    rounds: int = 0
    bottleneck_link: int = field(default=-1)

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` arrays of the routed pairs."""
        return self.src, self.dst

    @property
    def gap(self) -> float:
        """Relative gap ``(max_utilization - lower_bound) / max_utilization`` (0 when optimal)."""
        if self.max_utilization <= 0:
            return 0.0
        return max(0.0, (self.max_utilization - self.lower_bound) / self.max_utilization)

    @property
    def time_s(self) -> float:
        """Fluid communication time of one period's demands: ``max_utilization * period_s``."""
        return self.max_utilization * self.period_s

    def splits(self) -> dict[tuple[int, int], list[tuple[np.ndarray, float]]]:
        """Per pair, ``[(path, weight), ...]`` with positive weights, for
        ``routing.policies.ExplicitRouter(fabric, sol.splits())``."""
        out: dict[tuple[int, int], list[tuple[np.ndarray, float]]] = {}
        for s, d, ps, w in zip(self.src.tolist(), self.dst.tolist(), self.paths, self.split,
                               strict=True):
            keep = [(p, float(x)) for p, x in zip(ps, w, strict=True) if x > 1e-9]
            if keep:
                out[(s, d)] = keep
        return out


def _initial_paths(fabric: Fabric, s: int, d: int, k: int | None) -> list[np.ndarray]:
    paths = shortest_paths(fabric, s, d, limit=k)
    if k is not None and len(paths) < k:
        seen = {p.tobytes() for p in paths}
        for p in k_shortest_paths(fabric, s, d, k):
            if p.astype(np.int32).tobytes() not in seen and len(paths) < k:
                paths.append(p.astype(np.int32))
                seen.add(p.astype(np.int32).tobytes())
    return [np.asarray(p, dtype=np.int32) for p in paths]


class _Pricer:
    """Cheapest path per pair under link weights: Dijkstra where only non-GPU nodes forward.

    Each GPU is split in two: an "out" copy (the GPU node itself, only outgoing links) and an
    "in" copy (node id + N, only incoming links), so no path passes through a GPU.
    """

    def __init__(self, fabric: Fabric):
        self.f = fabric
        n = fabric.num_nodes
        self.n = n
        dst = fabric.link_dst.astype(np.int64)
        is_gpu = fabric.node_kind[dst] == NodeKind.GPU
        self.head = np.where(is_gpu, dst + n, dst)
        self.tail = fabric.link_src.astype(np.int64)

    def cheapest(self, w: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.n
        # parallel links: csgraph sums duplicates, so keep the lightest of each node pair
        order = np.lexsort((w, self.head, self.tail))
        t, h, ww = self.tail[order], self.head[order], w[order]
        first = np.ones(t.size, bool)
        first[1:] = (t[1:] != t[:-1]) | (h[1:] != h[:-1])
        g = sp.csr_matrix((ww[first], (t[first], h[first])), shape=(2 * n, 2 * n))
        self._lid = sp.csr_matrix((order[first] + 1, (t[first], h[first])), shape=(2 * n, 2 * n))
        dist, pred = dijkstra(g, directed=True, indices=sources, return_predecessors=True)
        return dist, pred

    def path(self, pred_row: np.ndarray, s: int, d: int) -> np.ndarray | None:
        v = d + self.n
        links = []
        while v != s:
            u = int(pred_row[v])
            if u < 0:
                return None
            links.append(int(self._lid[u, v]) - 1)
            v = u
            if len(links) > 4 * self.n:
                return None
        return np.asarray(links[::-1], dtype=np.int32)


def route_min_max_utilization(fabric: Fabric, traffic: TrafficMatrix, *,
                              paths_per_pair: int | None = None,
                              background_bytes: np.ndarray | None = None, period_s: float = 1.0,
                              hard_capacity: bool = False, time_limit_s: float | None = None,
                              max_rounds: int = 50, column_generation: bool = True) -> McfSolution:
    """Route `traffic` to minimize the largest link utilization (module docstring).

    Args:
        fabric: The fabric.
        traffic: Bytes per period between GPU pairs (duplicates merged, self pairs dropped).
        paths_per_pair: Initial paths per pair: at most this many equal-cost shortest paths,
            topped up with k-shortest paths when there are fewer; None: all equal-cost ones.
        background_bytes: ``float64[L]`` bytes per period already on each link.
        period_s: Period of the demands, seconds (> 0).
        hard_capacity: Require every link's utilization <= 1; raise otherwise.
        time_limit_s: Wall-clock budget; when it runs out the best routing so far is returned
            with ``status="time_limit"`` and its `lower_bound`.
        max_rounds: Column-generation rounds at most.
        column_generation: Price new paths beyond the initial ones.

    Returns:
        The `McfSolution`.

    Raises:
        ConfigError: Bad arguments (period, background shape, GPU ids).
        InfeasibleError: ``hard_capacity`` and no routing keeps every link within capacity;
            the message names the most loaded link of the best routing.
        SolverError: HiGHS failed.
    """
    t_start = time.perf_counter()
    if not (isinstance(period_s, int | float) and np.isfinite(period_s) and period_s > 0):
        raise ConfigError(f"period_s must be a positive number of seconds, got {period_s!r} (period_s)")
    if paths_per_pair is not None and (isinstance(paths_per_pair, bool) or int(paths_per_pair) < 1):
        raise ConfigError(f"paths_per_pair must be a positive integer or None, got {paths_per_pair!r} "
                          "(paths_per_pair)")
    num_links = fabric.num_directed_links
    bg = np.zeros(num_links) if background_bytes is None else np.asarray(background_bytes, float)
    if bg.shape != (num_links,) or np.any(~np.isfinite(bg)) or np.any(bg < 0):
        raise ConfigError(f"background_bytes must be {num_links} finite non-negative bytes (one per "
                          f"directed link), got shape {bg.shape} (background_bytes)")
    t = traffic.aggregated()
    if t.num_pairs and max(t.src.max(), t.dst.max()) >= fabric.num_gpus:
        raise ConfigError(f"traffic names GPU {int(max(t.src.max(), t.dst.max()))}, but fabric "
                          f"{fabric.name!r} has {fabric.num_gpus} GPUs (traffic)")
    cap_t = fabric.link_capacity_bytes_per_s * period_s
    k = t.num_pairs
    demand = t.size_bytes
    paths: list[list[np.ndarray]] = [
        _initial_paths(fabric, int(s), int(d), paths_per_pair) for s, d in zip(t.src, t.dst, strict=True)]
    eps = 1e-4 / max(1, num_links)
    bg_util = bg / cap_t
    status, rounds, lb = "optimal", 0, 0.0
    x_best: np.ndarray | None = None
    counts_solved = np.zeros(k, dtype=np.int64)
    pricer = _Pricer(fabric) if column_generation and k else None
    while True:
        rounds += 1
        # columns: U, then every path of every pair
        counts = np.asarray([len(p) for p in paths], dtype=np.int64)
        owner = np.repeat(np.arange(k), counts)
        flat = [p for ps in paths for p in ps]
        plen = np.asarray([len(p) for p in flat], dtype=np.int64)
        col_of_entry = np.repeat(np.arange(len(flat)), plen)
        link_of_entry = np.concatenate(flat).astype(np.int64) if flat else np.zeros(0, np.int64)
        coef = demand[owner[col_of_entry]] / cap_t[link_of_entry] if flat else np.zeros(0)
        ncol = 1 + len(flat)
        # rows: k convexity rows, then num_links capacity rows
        rows = np.concatenate([owner, k + link_of_entry, k + np.arange(num_links)])
        cols = np.concatenate([1 + np.arange(len(flat)), 1 + col_of_entry, np.zeros(num_links, np.int64)])
        vals = np.concatenate([np.ones(len(flat)), coef, -np.ones(num_links)])
        a = sp.csc_matrix((vals, (rows, cols)), shape=(k + num_links, ncol))
        cost = np.zeros(ncol)
        cost[0] = 1.0
        if flat:
            cost[1:] = eps * np.bincount(col_of_entry, weights=coef, minlength=len(flat))
        lo = np.concatenate([np.ones(k), np.full(num_links, -np.inf)])
        hi = np.concatenate([np.ones(k), -bg_util])
        left = None if time_limit_s is None else max(1e-3, time_limit_s - (time.perf_counter() - t_start))
        res = solve_lp(cost, a, lo, hi, time_limit_s=left)
        if res.x is not None:
            counts_solved = counts
        if res.x is None:
            if res.status == "time_limit":
                if x_best is None:  # nothing solved in time: an even split over the initial paths
                    counts_solved = counts
                    x_best = np.concatenate([[0.0], np.repeat(1.0 / counts, counts)])
                status = "time_limit"
                break
            raise SolverError(f"HiGHS found no routing ({res.status}) for {k} pairs on fabric "
                              f"{fabric.name!r}")
        x_best = res.x
        util_rmp = float(res.x[0])
        if res.status != "optimal":
            status = res.status
            break
        if pricer is None or res.row_dual is None:
            # optimal over the given paths only: no bound beyond the endpoint one below
            status = "restricted" if k else "optimal"
            break
        pi = res.row_dual[:k]
        mu = res.row_dual[k:]
        w = (np.maximum(-mu, 0.0) + eps) / cap_t
        srcs = np.unique(t.src)
        dist, pred = pricer.cheapest(w, srcs)
        row_of = {int(s): i for i, s in enumerate(srcs)}
        rc = demand * dist[[row_of[int(s)] for s in t.src], t.dst + fabric.num_nodes] - pi
        # Lagrangian bound: each convexity row sums to 1, so z* >= z_RMP + sum_k min(0, rc_k)
        obj = float(res.objective)
        # (the tie-break term, at most 1e-4 of U, is taken off the bound)
        lb = max(lb, obj + float(np.minimum(rc, 0.0).sum()) - (obj - util_rmp))
        new = np.flatnonzero(rc < -1e-9 * max(1.0, abs(obj)))
        added = 0
        for i in new.tolist():
            p = pricer.path(pred[row_of[int(t.src[i])]], int(t.src[i]), int(t.dst[i]))
            if p is None or any(np.array_equal(p, q) for q in paths[i]):
                continue
            paths[i].append(p)
            added += 1
        if not added:
            lb = util_rmp
            break
        if rounds >= max_rounds:
            status = "round_limit"
            break
        if time_limit_s is not None and time.perf_counter() - t_start >= time_limit_s:
            status = "time_limit"
            break
    # the primal solution of the last solved master; paths priced after it get share 0
    x = x_best
    ends = 1 + np.cumsum(counts_solved)
    split: list[np.ndarray] = []
    load = np.zeros(num_links)
    kept_paths: list[list[np.ndarray]] = []
    for i in range(k):
        vals_i = np.clip(x[ends[i] - counts_solved[i]:ends[i]], 0.0, None)
        keep = np.flatnonzero(vals_i > 1e-12)
        if keep.size == 0:
            keep, vals_i = np.array([0]), np.ones(1)
        share = vals_i[keep] / vals_i[keep].sum()
        kept_paths.append([paths[i][j] for j in keep])
        split.append(share)
        for p, sh in zip(kept_paths[-1], share, strict=True):
            load[p] += sh * demand[i]
    util = (load + bg) / cap_t
    max_util = float(util.max()) if util.size else 0.0
    worst = int(np.argmax(util)) if util.size else -1
    # every pair's bytes leave its source and enter its destination over their own links
    out_cap = np.bincount(fabric.link_src, weights=cap_t, minlength=fabric.num_nodes)
    in_cap = np.bincount(fabric.link_dst, weights=cap_t, minlength=fabric.num_nodes)
    if k:
        ends = max(float(np.max(np.bincount(t.src, weights=demand, minlength=fabric.num_nodes)
                                / np.maximum(out_cap, 1e-300))),
                   float(np.max(np.bincount(t.dst, weights=demand, minlength=fabric.num_nodes)
                                / np.maximum(in_cap, 1e-300))))
        lb = max(lb, ends)
    lb = min(lb, max_util)
    if status == "optimal":
        lb = max_util
    sol = McfSolution(src=t.src, dst=t.dst, demand_bytes=demand, paths=kept_paths, split=split,
                      max_utilization=max_util, link_load_bytes=load,
                      solve_s=time.perf_counter() - t_start, status=status, lower_bound=max(0.0, lb),
                      period_s=float(period_s), rounds=rounds, bottleneck_link=worst)
    if hard_capacity and max_util > 1 + _UTIL_RTOL and sol.lower_bound > 1 + _UTIL_RTOL:
        f = fabric
        raise InfeasibleError(
            f"no routing keeps every link within capacity: link {worst} "
            f"({f.node_name(int(f.link_src[worst]))} -> {f.node_name(int(f.link_dst[worst]))}) "
            f"needs {load[worst] + bg[worst]:.4g} bytes per {period_s:g} s but carries "
            f"{cap_t[worst]:.4g} (utilization {max_util:.3f}, expected <= 1; hard_capacity)")
    return sol
