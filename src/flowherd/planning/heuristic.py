"""Fast placement of many jobs: greedy construction plus large-neighbourhood search (LNS).

Why this design. Under the planner's model (`flowherd.planning.predict`) a job's cost depends on
its placement only through three things: whether it fits one server, whether it fits one leaf,
and, if it spans leaves, the uplink load of the leaves it uses (which couples it to the other
spread jobs). So a placement is mostly a bin-packing decision (keep every job as tight as its
size allows) plus a load-balancing decision for the jobs that must span leaves. Greedy
construction handles the first well (largest jobs first, best fit, the classic bin-packing
rule); its mistakes are local: a job that took the last room of a leaf another job needed more,
or two spread jobs piled on the same leaves. Large-neighbourhood search repairs exactly those:
remove two to five jobs (spread jobs four times as likely), or all spread jobs at once,
reinsert them greedily in a random order (or largest first; ties between equally good
placements broken at random, since a placement's cost does not show the room it leaves the
jobs after it), keep the result if the model says it is better, stop after a time limit or a
run of rounds without improvement. Every move is evaluated with the full model
(O(jobs x servers) numpy work), never with the LP: the model is the LP's objective on a
leaf-level routing (spraying), so the LP adds nothing per move and would cost milliseconds to
seconds. With `planner.max_utilization` (``congestion``, `LeafCongestion`) the leaves' mean
uplink loads come first (placements keeping them under the target win), and the routing LP
itself scores the few best distinct placements of the batch at the end (the joint choice,
`JOINT_TOLERANCE`). The MILP (`flowherd.planning.milp`) certifies the
heuristic on small instances; on large ones the LP relaxation (`milp.lp_bound`) bounds it.

Ties the model cannot see. Many placements have the same model cost (every placement of a job
inside one leaf does), and two things the simulator does decide between them:

* Queueing behind an overrun. A plan pins each job to its GPUs, and the simulator starts a job
  only when its GPUs are free: if the job that held them runs longer than predicted (background
  traffic and ECMP collisions make the model optimistic, by about 6 % on the default scenario),
  the pinned job waits. So among equal costs the heuristic prefers servers whose GPUs were freed
  at least `OVERRUN_SLACK` of their last holder's predicted run ago (``server_slack``, from
  `flowherd.planning.plan.make_plan`). The same margin guards the heuristic's schedule: a job is
  backfilled before the queue's head only if it ends before the head's promised start with
  that margin (`flowherd.planning.plan`, "The schedule").
* Collisions with known background traffic. When the caller gives the simulation settings
  (`flowherd.planning.plan.SimCheck`), the background flows of that simulation are known in
  advance (they are drawn from its seed before any job), and among equal costs and risks a job
  that spans servers takes the servers whose NICs meet the fewest background bytes during its
  predicted run (``background_bytes``). This is clairvoyance about one background realization,
  of the same kind as the offline planner's knowledge of arrivals; with another realization it
  gains nothing in expectation (`benchmarks/planner.py --simulate` prints held-out seeds).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from flowherd.planning.batch import BatchResult, LeafCongestion, running_leaf_load, running_leaf_mean_load
from flowherd.planning.predict import FabricView, JobProfile, _server_of

__all__ = ["OVERRUN_SLACK", "heuristic_batch"]

# GPUs freed less than this fraction of their last holder's predicted run before now are "at
# risk": a pinned job placed on them waits if that holder overruns its prediction. The model
# under-predicts the run of jobs spanning servers under background traffic by 3-18 % (the
# default scenario: `benchmarks/planner.py --simulate`), so a quarter is a safe margin.
OVERRUN_SLACK = 0.25


class _State:
    """Per-server GPU counts of every job of the batch and the model's cost of them."""

    def __init__(self, view: FabricView, batch: Sequence[JobProfile], free: np.ndarray, extra: np.ndarray,
                 slack: np.ndarray | None = None, exposure: np.ndarray | None = None,
                 guard: LeafCongestion | None = None, extra_mean: np.ndarray | None = None):
        self.view = view
        self.batch = batch
        nj, ns = len(batch), view.num_servers
        server = _server_of(view)
        self.free0 = np.bincount(server[free], minlength=ns).astype(np.int64)
        self.free = self.free0.copy()
        self.x = np.zeros((nj, ns), np.int64)
        self.ok = np.array([[t == p.gpu_type for t in view.server_type] for p in batch])
        self.unit = np.array([p.unit_gpus for p in batch])
        self.n = np.array([p.world_size for p in batch])
        self.it = np.array([float(p.iterations) for p in batch])
        fixed = np.array([p.fixed_duration_s is not None for p in batch])
        self.multi = np.array([p.fixed_duration_s if p.fixed_duration_s is not None else p.multi_server_s
                               for p in batch])
        self.t1 = np.array([p.single_server_s if p.single_server_s is not None else m
                            for p, m in zip(batch, self.multi, strict=True)])
        # iteration = base + network_s + stretch_slope (stretch - 1) (predict.evaluate)
        self.a = np.where(fixed, self.multi, [p.base_s + p.network_s + p.background_s - p.stretch_slope_s
                                              for p in batch])
        self.b = np.where(fixed, 0.0, [p.stretch_slope_s for p in batch])
        self.r = np.array([p.offered_bytes_per_s for p in batch])
        self.cap = view.leaf_uplink_bytes_per_s
        self.finite = np.isfinite(self.cap)
        self.extra = extra
        self.leaf = view.server_leaf
        self.nl = view.num_leaves
        self.placed = np.zeros(nj, bool)
        self.room_only = False  # spread jobs take the roomiest leaves only (packs tightest)
        # slack of each server's free GPUs (`server_slack`): the overrun of their last holder,
        # as a fraction of its predicted run, that would delay a job placed on them now
        self.slack = np.full(ns, np.inf) if slack is None else np.asarray(slack, dtype=np.float64)
        self.server_risk = (self.slack < OVERRUN_SLACK).astype(np.float64)
        # background bytes each job would meet per GPU on each server during its run (known
        # background only, `flowherd.planning.plan.SimCheck`); zero without
        cap = np.maximum(view.server_capacity, 1).astype(np.float64)
        self.exposure = (np.zeros((nj, ns)) if exposure is None
                         else np.asarray(exposure, dtype=np.float64) / cap[None, :])
        # planner.max_utilization at leaf level (`LeafCongestion`): mean uplink loads
        self.guard = guard
        self.leaf_bytes = np.array([p.leaf_uplink_bytes if p.fixed_duration_s is None else 0.0
                                    for p in batch])
        self.extra_mean = (np.zeros(self.nl) if extra_mean is None
                           else np.asarray(extra_mean, dtype=np.float64))

    # ---- the model on the state ------------------------------------------------------------
    def cost_of(self, x: np.ndarray, placed: np.ndarray) -> float:
        """Summed run time of the placed jobs, seconds."""
        it, _ = self._model(x)
        return float((self.it * it)[placed].sum())

    def _model(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Iteration time of every job and the leaves whose uplinks it loads."""
        nj = len(self.batch)
        use = np.zeros((nj, self.nl), bool)
        if self.nl > 1:
            np.logical_or.at(use, (np.nonzero(x)[0], self.leaf[np.nonzero(x)[1]]), True)
        nleaf = use.sum(axis=1)
        nsrv = (x > 0).sum(axis=1)
        spread = np.where(nsrv <= 1, 0, np.where(nleaf <= 1, 1, 2))
        spread_use = use & (spread == 2)[:, None]
        load = self.extra + self.r @ spread_use
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(self.finite, load / self.cap, 0.0)
        worst = np.where(spread_use, rho[None, :], 0.0).max(axis=1, initial=0.0)
        stretch = np.maximum(1.0, worst)
        it = np.where(spread == 0, self.t1, self.a + self.b * np.where(spread == 2, stretch, 1.0))
        return it, spread_use

    def cost(self) -> float:
        return self.cost_of(self.x, self.placed)

    def excess(self) -> float:
        """Summed excess of the leaves' mean uplink utilization over the target (0 without a
        guard): the constraint the heuristic meets before it minimizes its cost."""
        if self.guard is None:
            return 0.0
        it, use = self._model(self.x)
        use = use & self.placed[:, None]
        # a stretched job sends its bytes over a longer iteration: the mean load the LP sees
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(it > 0, self.leaf_bytes / it, 0.0)
        load = self.extra_mean + mean @ use
        with np.errstate(invalid="ignore", divide="ignore"):
            util = np.where(self.finite, load / self.cap, 0.0)
        return float(np.clip(util - self.guard.target, 0.0, None).sum())

    def risk(self) -> float:
        """Placed jobs on GPUs at risk of an overrun (`OVERRUN_SLACK`); a tie-break of equal costs."""
        r = np.where(self.x > 0, self.server_risk[None, :], 0.0).max(axis=1, initial=0.0)
        return float(r[self.placed].sum())

    def background(self) -> float:
        """Known background bytes met by the placed jobs that span servers (per GPU's NIC)."""
        multi = ((self.x > 0).sum(axis=1) > 1) & self.placed
        return float((self.x[multi] * self.exposure[multi]).sum())

    def _order(self, j: int, servers: np.ndarray, avail: np.ndarray) -> np.ndarray:
        """``servers`` by most room, then no overrun risk, then least known background, then id."""
        return servers[np.lexsort((servers, self.exposure[j, servers], self.server_risk[servers],
                                   -avail[servers]))]

    # ---- moves ------------------------------------------------------------------------------
    def remove(self, j: int) -> None:
        self.free += self.x[j]
        self.x[j] = 0
        self.placed[j] = False

    def candidates(self, j: int) -> list[np.ndarray]:
        """Per-server GPU counts of the placements worth trying for job j."""
        n, u = int(self.n[j]), int(self.unit[j])
        avail = np.where(self.ok[j], self.free // u * u, 0)
        out: list[np.ndarray] = []
        ns = len(avail)
        fits = np.flatnonzero(avail >= n)
        if fits.size:  # best fit in one server
            s = int(fits[np.lexsort((fits, self.server_risk[fits], avail[fits]))[0]])
            c = np.zeros(ns, np.int64)
            c[s] = n
            out.append(c)
            return out  # a one-server placement is never worse under the model
        per_leaf = np.bincount(self.leaf, weights=avail, minlength=self.nl)
        leaf_fits = np.flatnonzero(per_leaf >= n)
        if leaf_fits.size:
            for li in leaf_fits[np.argsort(per_leaf[leaf_fits], kind="stable")][:3].tolist():
                out.append(self._fill(j, avail, np.flatnonzero(self.leaf == li), n))
            if self.exposure[j].any():  # and the least-background leaf, servers by least background
                srv = np.flatnonzero(np.isin(self.leaf, leaf_fits) & (avail > 0))
                srv = srv[np.lexsort((srv, self.exposure[j, srv], -avail[srv], self.server_risk[srv]))]
                per = np.bincount(self.leaf[srv], weights=self.exposure[j, srv], minlength=self.nl)
                li = int(leaf_fits[np.argmin(per[leaf_fits] / per_leaf[leaf_fits])])
                out.append(self._fill(j, avail, srv[self.leaf[srv] == li], n, keep_order=True))
            return out
        if per_leaf.sum() < n:
            return out
        # spread over leaves: least loaded first, or largest room first (fewest leaves)
        load = self.extra + self.r @ self._spread_use()
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(self.finite, (load + self.r[j]) / self.cap, 0.0)
        has = per_leaf > 0
        # least loaded leaves (largest room first, or smallest holes first: leftovers of jobs
        # inside one leaf, which keeps whole leaves free), or the fewest leaves
        orders = [np.lexsort((-per_leaf, rho)), np.lexsort((rho, -per_leaf))]
        if not self.room_only:
            orders.append(np.lexsort((per_leaf, rho)))
        fit = self._best_fit_leaves(per_leaf, rho, n)
        if fit is not None:
            orders.append(fit)
        for order in orders:
            order = order[has[order]]
            take, room = [], 0
            for li in order.tolist():
                take.append(li)
                room += per_leaf[li]
                if room >= n:
                    break
            srv = np.flatnonzero(np.isin(self.leaf, take))
            # fill the leaves in the chosen order, largest servers first inside each
            rank = {li: k for k, li in enumerate(take)}
            srv = srv[np.lexsort((self.exposure[j, srv], self.server_risk[srv], -avail[srv],
                                  [rank[int(self.leaf[s])] for s in srv]))]
            out.append(self._fill(j, avail, srv, n, keep_order=True))
        return out

    @staticmethod
    def _best_fit_leaves(per_leaf: np.ndarray, rho: np.ndarray, n: int) -> np.ndarray | None:
        """Leaves whose whole room fits what is still needed, roomiest first, then the leaf of
        least room that completes the job (best fit): the other orders may split a job over
        two roomy leaves and leave two half-used ones to the next job, which then shares."""
        take: list[int] = []
        need = n
        for li in np.lexsort((rho, -per_leaf)).tolist():
            if 0 < per_leaf[li] <= need:
                take.append(li)
                need -= int(per_leaf[li])
                if need == 0:
                    break
        if need > 0:
            rest = [li for li in range(per_leaf.size) if li not in take and per_leaf[li] >= need]
            if not rest:
                return None
            take.append(min(rest, key=lambda li: (per_leaf[li], rho[li], li)))
        return np.asarray(take, dtype=np.int64)

    def _fill(self, j: int, avail: np.ndarray, servers: np.ndarray, n: int,
              keep_order: bool = False) -> np.ndarray:
        c = np.zeros(len(avail), np.int64)
        if not keep_order:
            servers = self._order(j, servers, avail)
        need = n
        for s in servers.tolist():
            if need <= 0:
                break
            t = min(int(avail[s]), need)
            c[s] = t
            need -= t
        return c

    def _spread_use(self) -> np.ndarray:
        nj = len(self.batch)
        use = np.zeros((nj, self.nl), bool)
        if self.nl > 1:
            r, s = np.nonzero(self.x)
            use[r, self.leaf[s]] = True
        multi = use.sum(axis=1) > 1
        return use & multi[:, None]

    def insert(self, j: int, rng: np.random.Generator | None = None) -> bool:
        best, best_key = None, (math.inf, math.inf, math.inf, math.inf)
        cands = self.candidates(j)
        if rng is not None and len(cands) > 1:
            cands = [cands[i] for i in rng.permutation(len(cands))]
        for c in cands:
            self.x[j] = c
            self.placed[j] = True
            key = (self.excess(), self.cost(), self.risk(), self.background())
            if best is None or _better(key, best_key):
                best, best_key = c, key
        if best is None:
            self.x[j] = 0
            self.placed[j] = False
            return False
        self.x[j] = best
        self.placed[j] = True
        self.free -= best
        return True


def heuristic_batch(view: FabricView, batch: Sequence[JobProfile], free: np.ndarray,
                    running: Sequence[tuple[JobProfile, np.ndarray]], *, rng: np.random.Generator,
                    time_limit_s: float | None = None, max_rounds: int | None = None,
                    target_cost: float | None = None, server_slack: np.ndarray | None = None,
                    background_bytes: np.ndarray | None = None, shuffle: bool = False,
                    congestion: LeafCongestion | None = None) -> BatchResult:
    """Place ``batch`` into the ``free`` GPUs: greedy, then LNS (module docstring).

    Args:
        view: The fabric view.
        batch: Jobs to place together.
        free: ``bool[G]`` free GPUs.
        running: Jobs already running with their GPUs (fixed leaf load).
        rng: Random generator of the search.
        time_limit_s: Search time, seconds. None (default): no clock; the search ends after
            ``max_rounds`` or its patience, so the same inputs and seed give the same placement
            on any machine at any load (a wall-clock stop made plans depend on the load).
        max_rounds: Cap on LNS rounds (None: ``1000 + 50 * jobs``); the search also stops after
            ``150 + 20 * jobs`` rounds without improvement.
        target_cost: A lower bound on the summed run time (seconds); the search stops when it
            reaches it.
        server_slack: ``float64[S]``: for each server, how long its free GPUs have been free
            over the predicted run time of the job that held them last (inf: never held); among
            placements of equal cost the one on the most slack wins (module docstring).
        background_bytes: ``float64[J, S]``: bytes of known background flows at server s during
            job j's predicted run (`flowherd.planning.plan.SimCheck`); among placements of equal
            cost and risk, the one meeting the least wins. None: no known background.
        shuffle: Break exact ties of the greedy construction at random (``rng``) instead of by
            the candidates' order (diversifies the candidates `flowherd.planning.plan.SimCheck`
            simulates).
        congestion: `planner.max_utilization` at leaf level (`LeafCongestion`): placements
            keeping every leaf's mean uplink load at or under the target come first; with its
            ``route_score``, the routing LP chooses among the best placements found (those
            within `JOINT_TOLERANCE` of the least cost that differ in the jobs spread over leaves).

    Returns:
        Placements (None from the first job that did not fit: FIFO), status "heuristic".
    """
    t0 = time.perf_counter()
    nj = len(batch)
    limit = np.inf if time_limit_s is None else float(time_limit_s)
    rounds = 1000 + 50 * nj if max_rounds is None else int(max_rounds)
    extra = running_leaf_load(view, running)
    extra_mean = None
    if congestion is not None:
        extra_mean = np.asarray(congestion.background_bytes_per_s, dtype=np.float64).copy()
        extra_mean += running_leaf_mean_load(view, running)
    order = sorted(range(nj), key=lambda j: (-int(batch[j].world_size), -batch[j].iterations
                                             * batch[j].network_s, j))
    st = None
    for room_only in (False, True):  # two greedy starts; the second packs tightest
        cand = _State(view, batch, free, extra, server_slack, background_bytes, congestion, extra_mean)
        cand.room_only = room_only
        for j in order:
            cand.insert(j, rng if shuffle else None)
        if st is None or _better(_score(cand), _score(st)):
            st = cand
    st.room_only = False
    best_x, best_placed, best = st.x.copy(), st.placed.copy(), _score(st)
    pool = {best_x.tobytes(): (best, best_x, best_placed)}  # the best placements seen (joint choice)
    patience, stale = 150 + 20 * nj, 0
    if nj > 1:
        for _ in range(rounds):
            if time.perf_counter() - t0 > limit or stale >= patience:
                break
            if (target_cost is not None and st.placed.all() and st.cost() <= target_cost
                    + 1e-9 * max(1.0, target_cost)):
                if st.risk() == 0.0 and not st.exposure.any():
                    break
                patience = min(patience, 50)  # optimal cost: a short search for the tie-breaks
            stale += 1
            spread = (st.x > 0).sum(axis=1) > 1
            if rng.random() < 0.3 and spread.any():
                # all spread jobs at once plus one more: they compete for the same uplinks
                pick = np.union1d(np.flatnonzero(spread), rng.choice(nj, size=1))
            else:
                k = int(rng.integers(2, min(nj, 5) + 1))
                w = np.where(spread, 4.0, 1.0)
                pick = rng.choice(nj, size=min(k, nj), replace=False, p=w / w.sum())
            saved_x, saved_free, saved_placed = st.x.copy(), st.free.copy(), st.placed.copy()
            for j in pick.tolist():
                if st.placed[j]:
                    st.remove(j)
            todo = list(np.flatnonzero(~st.placed))
            rng.shuffle(todo)
            if rng.random() < 0.5:
                todo.sort(key=lambda j: -st.n[j])
            for j in todo:
                st.insert(int(j), rng)
            score = _score(st)
            if congestion is not None and congestion.route_score is not None:
                pool.setdefault(st.x.tobytes(), (score, st.x.copy(), st.placed.copy()))
            if _better(score, best):
                best, best_x, best_placed = score, st.x.copy(), st.placed.copy()
                stale = 0
            else:
                st.x, st.free, st.placed = saved_x, saved_free, saved_placed
    out = _gpus_of(view, free, best_x, best_placed)
    if congestion is not None and congestion.route_score is not None and len(pool) > 1:
        out = _joint_choice(view, free, st, pool, best, out, congestion)
    return BatchResult(placements=tuple(out), status="heuristic")


# The routing LP chooses among placements whose model cost is within this share of the best
# (and that meet the leaf guard as well as the best): the model's leaf-level estimate and the LP
# agree on a two-tier leaf-spine, so wider choices would only trade model cost for noise.
JOINT_TOLERANCE = 0.005
_JOINT_CANDIDATES = 4


def _gpus_of(view: FabricView, free: np.ndarray, x: np.ndarray,
             placed: np.ndarray) -> list[np.ndarray | None]:
    """GPU ids of each job from per-server counts (the lowest free ids of each server)."""
    server = _server_of(view)
    taken = ~free.copy()
    out: list[np.ndarray | None] = []
    for j in range(x.shape[0]):
        if not placed[j]:
            out.append(None)
            break
        g = []
        for s in np.flatnonzero(x[j]).tolist():
            cand = np.flatnonzero(~taken & (server == s))[:x[j, s]]
            taken[cand] = True
            g.append(cand)
        out.append(np.sort(np.concatenate(g)))
    return out


def _joint_choice(view: FabricView, free: np.ndarray, st: _State, pool: dict, best: tuple[float, ...],
                  out: list[np.ndarray | None], guard: LeafCongestion) -> list[np.ndarray | None]:
    """The placement of least routing-LP objective among the best ones seen (module docstring
    of `heuristic_batch`, ``congestion``); the best by the model when they route alike."""
    tol = JOINT_TOLERANCE * max(1.0, abs(best[2]))
    near = sorted((v for v in pool.values() if v[0][0] == best[0] and v[0][1] <= best[1] + 1e-9
                   and v[0][2] <= best[2] + tol), key=lambda v: v[0])
    seen: set[bytes] = set()
    cands = []
    for score, x, placed in near:
        st.x, st.placed = x, placed
        sig = np.packbits(st._spread_use()).tobytes()  # which jobs load which leaves' uplinks
        if sig in seen:
            continue
        seen.add(sig)
        cands.append((score, x, placed))
        if len(cands) >= _JOINT_CANDIDATES:
            break
    if len(cands) < 2:
        return out
    scored = []
    for score, x, placed in cands:
        gpus = _gpus_of(view, free, x, placed)
        scored.append((float(guard.route_score(gpus)), score, gpus))
    scored.sort(key=lambda v: (round(v[0], 9), v[1]))
    return scored[0][2]


def _score(st: _State) -> tuple[float, ...]:
    """Lexicographic: placed prefix length first (FIFO), excess over the leaf guard, cost,
    overrun risk, known background."""
    unplaced = np.flatnonzero(~st.placed)
    prefix = int(unplaced[0]) if unplaced.size else len(st.batch)
    return float(-prefix), st.excess(), st.cost(), st.risk(), st.background()


def _better(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """``a`` beats ``b`` lexicographically: (excess, cost, risk, background) or (prefix, excess,
    cost, risk, background); excesses and costs closer than rounding tie."""
    if len(a) == 5:
        if a[0] != b[0]:
            return a[0] < b[0]
        a, b = a[1:], b[1:]
    if a[0] < b[0] - 1e-9:
        return True
    if a[0] > b[0] + 1e-9:
        return False
    a, b = a[1:], b[1:]
    tol = 1e-12 * max(1.0, abs(b[0]))
    if a[0] < b[0] - tol:
        return True
    if a[0] > b[0] + tol:
        return False
    if a[1] != b[1]:
        return a[1] < b[1]
    return a[2] < b[2] * (1 - 1e-9)
