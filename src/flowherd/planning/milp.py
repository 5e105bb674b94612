"""Exact placement of a batch of jobs: a MILP over servers and leaves, solved by HiGHS.

The MILP optimizes exactly the planner's static model (`flowherd.planning.predict`, jobs of a
batch running concurrently, plus the load of jobs already running): the sum over jobs of
``iterations * iteration time``. Servers are bins, routing is the leaf-uplink load it implies
(spraying over the spines, the routing the model assumes). Variables, for job j, server s, leaf l:

* ``k[j,s]`` integer: TP groups (``unit_gpus`` GPUs) of j on s; ``x = unit * k``;
  ``sum_s x[j,s] = n_j``, ``sum_j x[j,s] <= free[s]`` (servers of j's GPU type only);
* ``u[j,s]``, ``y[j,l]`` binary: j uses s, l (``x <= n u``, ``u[j,s] <= y[j,leaf(s)]``);
* ``single[j]`` binary: j in one server (``sum_s u <= 1 + (S - 1)(1 - single)``);
  ``ml[j]`` binary: j on several leaves (``sum_l y <= 1 + (L - 1) ml``);
* ``q[j,l] >= y + ml - 1``: j loads l's uplinks; ``rho[l] = (extra[l] + sum_j r_j q[j,l]) / C[l]``;
* ``v[j] >= rho[l] - 1 - M_l (2 - y[j,l] - ml[j])``, ``v >= 0``: the stretch above 1.

Cost of j: ``it_j ((a_j + b_j) - (a_j + b_j - T1_j) single_j + b_j v_j)`` with ``T1`` the
one-server iteration time, ``a + b`` the uncontended multi-server one. Start times follow from
the batch (all start when the batch is placed; `flowherd.planning.plan.make_plan` decides the
batches over time).

`lp_bound` relaxes a leaf-level aggregation of the same model (leaves as bins, one-server
placements at their floor) to a lower bound for instances too large for the MILP.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import highspy
import numpy as np
import scipy.sparse as sp

from flowherd.errors import InfeasibleError, SolverError
from flowherd.planning.batch import BatchResult, running_leaf_load
from flowherd.planning.heuristic import heuristic_batch
from flowherd.planning.predict import FabricView, JobProfile

__all__ = ["lp_bound", "running_leaf_load", "solve_batch"]

log = logging.getLogger(__name__)


class _Model:
    """Columns and rows collected as arrays, then passed to HiGHS at once."""

    def __init__(self) -> None:
        self.cost: list[np.ndarray] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.n = 0
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.rlo: list[float] = []
        self.rhi: list[float] = []

    def add(self, count: int, cost=0.0, lo=0.0, hi=math.inf, integer=False) -> np.ndarray:
        idx = np.arange(self.n, self.n + count)
        self.n += count
        self.cost.append(np.broadcast_to(np.asarray(cost, float), (count,)).copy())
        self.lo.append(np.broadcast_to(np.asarray(lo, float), (count,)).copy())
        self.hi.append(np.broadcast_to(np.asarray(hi, float), (count,)).copy())
        self.integer.append(np.full(count, bool(integer)))
        return idx

    def row(self, cols: Sequence[int], vals: Sequence[float], lo: float = -math.inf,
            hi: float = math.inf) -> None:
        r = len(self.rlo)
        self.rows.extend([r] * len(cols))
        self.cols.extend(int(c) for c in cols)
        self.vals.extend(float(v) for v in vals)
        self.rlo.append(lo)
        self.rhi.append(hi)

    def solve(self, time_limit_s: float | None, relax: bool = False):
        lp = highspy.HighsLp()
        lp.num_col_ = self.n
        lp.num_row_ = len(self.rlo)
        lp.col_cost_ = np.concatenate(self.cost)
        lp.col_lower_ = np.concatenate(self.lo)
        lp.col_upper_ = np.concatenate(self.hi)
        lp.row_lower_ = np.asarray(self.rlo)
        lp.row_upper_ = np.asarray(self.rhi)
        a = sp.csc_matrix((self.vals, (self.rows, self.cols)), shape=(lp.num_row_, self.n))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = a.indptr
        lp.a_matrix_.index_ = a.indices
        lp.a_matrix_.value_ = a.data
        if not relax:
            integ = np.concatenate(self.integer)
            lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                               for i in integ]
        # highspy.Highs() prints a banner to stdout (breaking --json); the wrapped class does not
        h = getattr(getattr(highspy, "_core", None), "_Highs", highspy.Highs)()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("random_seed", 0)
        h.setOptionValue("threads", 1)
        if time_limit_s is not None:
            h.setOptionValue("time_limit", float(max(0.05, time_limit_s)))
        h.passModel(lp)
        h.run()
        return h


def _build(view: FabricView, batch: Sequence[JobProfile], free: np.ndarray, extra: np.ndarray,
           *, leaf_level: bool) -> tuple[_Model, dict]:
    m = _Model()
    nj = len(batch)
    nl = view.num_leaves
    if leaf_level:
        bins = nl
        bin_leaf = np.arange(nl)
    else:
        bins = view.num_servers
        bin_leaf = view.server_leaf
    from flowherd.planning.predict import _server_of

    server = _server_of(view)
    free_srv = np.bincount(server[free], minlength=view.num_servers)
    cap = view.leaf_uplink_bytes_per_s
    finite = np.isfinite(cap)
    offered = np.array([p.offered_bytes_per_s for p in batch])
    big = (extra + offered.sum()) / np.where(finite, cap, 1.0) + 1.0
    single_cost = []
    cols: dict = {"k": [], "bins": bins}
    rho = m.add(nl, lo=0.0)
    per_bin_terms: list[list[tuple[int, float]]] = [[] for _ in range(bins)]
    for j, p in enumerate(batch):
        ok_srv = np.array([t == p.gpu_type for t in view.server_type])
        u_gpus = p.unit_gpus
        f = np.where(ok_srv, free_srv // u_gpus, 0)
        if leaf_level:
            f = np.bincount(view.server_leaf, weights=f, minlength=nl).astype(np.int64)
        if int(f.sum()) * u_gpus < p.world_size:
            raise InfeasibleError(f"job {p.name!r} ({p.world_size} GPUs of type {p.gpu_type!r}) does not "
                                  f"fit in the {int(f.sum()) * u_gpus} free GPUs of its type")
        it = float(p.iterations)
        multi = p.multi_server_s if p.fixed_duration_s is None else p.fixed_duration_s
        t1 = p.single_server_s if p.single_server_s is not None else multi
        can_single = (p.single_server_s is not None and not leaf_level
                      and p.world_size <= view.gpus_per_server)
        b = p.stretch_slope_s if p.fixed_duration_s is None else 0.0
        if leaf_level:
            floor = min(t1, multi) if p.single_server_s is not None else multi
            const = it * floor
        else:
            const = it * multi
        single_cost.append(const)
        k = m.add(bins, lo=0.0, hi=f.astype(float), integer=True)
        u = m.add(bins, lo=0.0, hi=1.0, integer=True)
        y = m.add(nl, lo=0.0, hi=1.0, integer=True)
        ml = m.add(1, lo=0.0, hi=1.0, integer=True)
        q = m.add(nl, lo=0.0, hi=1.0)
        v = m.add(1, cost=it * b, lo=0.0)
        cols["k"].append((k, u_gpus))
        m.row(k, [u_gpus] * bins, lo=p.world_size, hi=p.world_size)
        for s in range(bins):
            per_bin_terms[s].append((int(k[s]), float(u_gpus)))
            m.row([k[s], u[s]], [u_gpus, -p.world_size], hi=0.0)
            m.row([u[s], y[bin_leaf[s]]], [1.0, -1.0], hi=0.0)
        if can_single:
            sg = m.add(1, cost=-it * (multi - t1), lo=0.0, hi=1.0, integer=True)
            m.row([*u, sg[0]], [1.0] * bins + [bins - 1.0], hi=float(bins))
        if nl > 1:
            m.row([*y, ml[0]], [1.0] * nl + [-(nl - 1.0)], hi=1.0)
        for li in range(nl):
            if not finite[li]:
                continue
            m.row([q[li], y[li], ml[0]], [1.0, -1.0, -1.0], lo=-1.0)
            # v >= rho - 1 - M (2 - y - ml)
            m.row([v[0], rho[li], y[li], ml[0]], [1.0, -1.0, -big[li], -big[li]], lo=-1.0 - 2 * big[li])
        cols.setdefault("q", []).append(q)
        cols.setdefault("r", []).append(float(offered[j]))
    for li in range(nl):
        if not finite[li]:
            m.row([rho[li]], [1.0], lo=0.0, hi=0.0)
            continue
        qs = [cols["q"][j][li] for j in range(nj)]
        # rho - sum (r / C) q = extra / C (scaled to loads: HiGHS dislikes 1e11 coefficients)
        e = float(extra[li] / cap[li])
        m.row([rho[li], *qs], [1.0, *[-r / cap[li] for r in cols["r"]]], lo=e, hi=e)
    bin_free = free_srv if not leaf_level else np.bincount(view.server_leaf, weights=free_srv,
                                                           minlength=nl)
    for s in range(bins):
        terms = per_bin_terms[s]
        if terms:
            m.row([c for c, _ in terms], [w for _, w in terms], hi=float(bin_free[s]))
    cols["const"] = float(sum(single_cost))
    return m, cols


def _status(h) -> str:
    st = h.getModelStatus()
    if st == highspy.HighsModelStatus.kOptimal:
        return "optimal"
    if st == highspy.HighsModelStatus.kInfeasible:
        return "infeasible"
    if st in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kIterationLimit,
              highspy.HighsModelStatus.kInterrupt, highspy.HighsModelStatus.kSolutionLimit):
        return "time_limit"
    return str(st)


def solve_batch(view: FabricView, batch: Sequence[JobProfile], free: np.ndarray,
                running: Sequence[tuple[JobProfile, np.ndarray]], *,
                time_limit_s: float | None = 60.0) -> BatchResult:
    """Place ``batch`` optimally in the ``free`` GPUs (module docstring).

    Args:
        view: The fabric view.
        batch: Jobs to place together.
        free: ``bool[G]`` free GPUs.
        running: Jobs already running, with their GPUs (their leaf load is fixed).
        time_limit_s: HiGHS time limit, seconds (None: no limit). At the limit the best
            placement found is returned with HiGHS's bound.

    Returns:
        Placements, the lower bound on the batch's summed run time (seconds), and the status
        ("optimal" or "time_limit").

    Raises:
        InfeasibleError: a job that does not fit (its type, its TP groups), naming it; or
            the batch as a whole does not fit.
        SolverError: HiGHS failed otherwise, or found no placement within the time limit.
    """
    extra = running_leaf_load(view, running)
    m, cols = _build(view, batch, free, extra, leaf_level=False)
    h = m.solve(time_limit_s)
    status = _status(h)
    if status == "infeasible":
        names = ", ".join(repr(p.name) for p in batch)
        raise InfeasibleError(f"jobs {names} do not fit together in the {int(free.sum())} free GPUs "
                              "with whole TP groups per server and their GPU types")
    sol = h.getSolution()
    bound: float | None = float(h.getInfo().mip_dual_bound) + cols["const"]
    if not math.isfinite(bound):
        bound = None
    out: list[np.ndarray] | None = None
    if sol.value_valid:
        out = _readout(view, batch, free, np.asarray(sol.col_value), cols)
    elif status != "time_limit":
        raise SolverError(f"HiGHS failed on the placement MILP: {h.modelStatusToString(h.getModelStatus())}")
    if status != "optimal":
        # a time-out returns the best placement known: HiGHS's incumbent or the heuristic's
        from flowherd.planning.predict import evaluate

        alt = heuristic_batch(view, batch, free.copy(), running, rng=np.random.default_rng(0),
                              time_limit_s=1.0)
        if len(alt.placements) == len(batch) and all(g is not None for g in alt.placements):
            def cost(gs: Sequence[np.ndarray]) -> float:
                r = evaluate(view, list(batch), list(gs), extra_leaf_bytes_per_s=extra)
                return float(r.duration_s.sum())

            if out is None or cost(alt.placements) < cost(out):
                out = list(alt.placements)
        if out is None:
            raise SolverError(f"no placement of {len(batch)} jobs found within the time limit of "
                              f"{time_limit_s} s; raise --time-limit")
    log.debug("milp: %d jobs, status %s, bound %s", len(batch), status, bound)
    return BatchResult(placements=tuple(out), lower_bound=bound, status=status)


def _readout(view: FabricView, batch: Sequence[JobProfile], free: np.ndarray, x: np.ndarray,
             cols: dict) -> list[np.ndarray]:
    """GPU ids of each job from the MILP's server counts (lowest free ids of each server)."""
    from flowherd.planning.predict import _server_of

    server = _server_of(view)
    out = []
    taken = ~free.copy()
    for j, p in enumerate(batch):
        k, unit = cols["k"][j]
        counts = np.rint(x[k]).astype(np.int64) * unit
        ok = np.array([t == p.gpu_type for t in view.server_type])
        g = []
        for s in np.flatnonzero(counts).tolist():
            if not ok[s]:
                raise SolverError(f"MILP put job {p.name!r} on a server of the wrong type (server {s})")
            cand = np.flatnonzero(~taken & (server == s))[:counts[s]]
            taken[cand] = True
            g.append(cand)
        out.append(np.sort(np.concatenate(g)))
    return out


def lp_bound(view: FabricView, batch: Sequence[JobProfile], free: np.ndarray,
             running: Sequence[tuple[JobProfile, np.ndarray]] = (), *,
             time_limit_s: float | None = 30.0) -> float:
    """A lower bound on the batch's summed run time, seconds: the LP relaxation of the leaf-level
    aggregation of the MILP (module docstring)."""
    extra = running_leaf_load(view, running)
    m, cols = _build(view, batch, free, extra, leaf_level=True)
    h = m.solve(time_limit_s, relax=True)
    status = _status(h)
    if status == "infeasible":
        raise InfeasibleError(f"the {len(batch)} jobs do not fit in the {int(free.sum())} free GPUs")
    if status != "optimal":
        raise SolverError(f"the LP bound did not solve: {h.modelStatusToString(h.getModelStatus())}")
    return float(h.getInfo().objective_function_value) + cols["const"]
