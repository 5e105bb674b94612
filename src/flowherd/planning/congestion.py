"""Congestion-free routing of a plan over time windows: the lower level with a target utilization.

A plan says which jobs run where and when (placements, starts, predicted iteration times). Its
span is cut into windows of ``window_s``; in window w every running training job offers its
per-iteration scale-out bytes on the wire (`flowherd.planning.traffic.network_pairs`, GPU pairs
on different servers, ``wire=True``) at its predicted iteration rate, weighted by the share of the
window it runs: the concurrent-traffic estimate of that window. The expected background load is
added on every link (`background_link_bytes_per_s`: each server sends ``load`` of its NIC
capacity to uniformly drawn other servers, from uniformly drawn GPUs, spread as spraying spreads
it, which is what ECMP's hash gives in expectation). The predicted load of link l in window w is

    u[l, w] = (sum_k d[k, w] sum_{p in P_k, l in p} x_p + b[l, w]) / c_l

with ``x_p`` the share of pair k's bytes on path p, ``b`` the background and the pairs with a
single path. The routing LP (HiGHS, `flowherd.planning.mcf.solve_lp`) keeps one split per GPU
pair for the whole plan (the simulator's `ExplicitRouter` routes by pair)::

    min  sum_w T_w (U_w + M sum_l s[l, w]) + eps sum_{w, p} T_w x_p sum_{l in p} d[k(p), w] / c_l
    s.t. sum_{p in P_k} x_p = 1                 every routed pair k
         u[l, w] - U_w <= 0                     every link l some pair can avoid, every window w
         u[l, w] - s[l, w] <= target            s >= 0 (the link's excess over the target)

With ``M`` large the LP keeps every link at or under ``target`` (`planner.max_utilization`)
wherever some routing can, and otherwise minimizes the time-weighted excess summed over links; ``U_w`` is the
window's largest utilization (the fluid communication time of its traffic, as in
`flowherd.planning.mcf`), so below the target it still spreads the load. Paths are the pairs'
equal-cost shortest paths (`flowherd.routing.paths.shortest_paths`; where a pair has more than
``paths_per_pair``, that many spread over all of them, `flowherd.planning.spread_paths`).
Ties (``even_ties``, the plan's choice where the scenario sprays): where the even split of
every pair over its paths (spraying's) scores as well as the LP's optimum (within 1e-6 of its
objective, the tie-break term left out), the routes are the even split: the windows average the
load, and within a window a collective's flows burst together, which even splits spread over
every path while an optimal vertex may put a pair whole on one (on the planner benchmark's
trace windows, spraying, the vertex ran up to 0.3% slower). Where the scenario hashes (ECMP: one
path per flow) the vertex stays: on the default scenario under roce the even split paused
1.44x more bytes than the vertex (2572 vs 1782 GB, seed 7) at the same mean JCT (18.84 vs
18.80 s), as a burst split over both spines pauses both.

What it reports (`LinkLoads`): per network link and window the predicted load and the slack
``target - load``, and the violations: links and windows over the target, by how much, and
whether a routing could avoid the link at all (a NIC's own link cannot be avoided: there only
the upper level, moving the job or shifting its start, helps; `flowherd.planning.plan`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from flowherd.errors import ConfigError, SolverError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.planning.mcf import solve_lp
from flowherd.planning.spread_paths import spread_paths
from flowherd.planning.traffic import TrafficMatrix, link_profile, network_pairs

__all__ = ["DEFAULT_MAX_UTILIZATION", "LinkLoads", "PlannedJob", "background_link_bytes_per_s",
           "check_max_utilization", "leaf_background_bytes_per_s", "predict_link_loads", "route_windows",
           "routes_to_splits"]

DEFAULT_MAX_UTILIZATION = 0.9
_EXCESS_COST = 100.0  # M: a unit of excess over the target costs 100 units of utilization
_EPS = 1e-4  # tie-break towards short, lightly used paths
_TOL = 1e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedJob:
    """One job of a plan as the lower level sees it: GPUs, start, predicted iteration time."""

    job: Any
    gpus: tuple[int, ...]
    start_s: float
    iteration_s: float

    @property
    def end_s(self) -> float:
        """Predicted end, seconds (start + iterations x iteration time)."""
        return self.start_s + int(getattr(self.job, "iterations", 1)) * self.iteration_s


def check_max_utilization(value: Any, field: str = "planner.max_utilization") -> float:
    """``value`` as a target utilization in (0, 1]; a `ConfigError` naming ``field`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value <= 1):
        raise ConfigError(f"max utilization must be a number in (0, 1], got {value!r} ({field})")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LinkLoads:
    """Predicted load of every network link in every window of a plan (module docstring).

    Attributes:
        edges_s: ``float64[W + 1]`` window edges, seconds.
        links: ``int64[K]`` the directed network links reported.
        load: ``float64[K, W]`` predicted utilization (bytes over capacity times width).
        target: The target utilization (`planner.max_utilization`).
        routable: ``bool[K]``: some routed pair can avoid the link (False: only placement or
            schedule change its load, e.g. a NIC's link).
        routing: What routed the jobs' traffic: "mcf" (the LP) or a router name.
        status: The LP's status ("optimal", ...; the router name when no LP ran).
        solve_s: Wall-clock seconds of the LP.
    """

    edges_s: np.ndarray
    links: np.ndarray
    load: np.ndarray
    target: float
    routable: np.ndarray
    routing: str
    status: str = "optimal"
    solve_s: float = 0.0

    @property
    def slack(self) -> np.ndarray:
        """``float64[K, W]``: ``target - load`` (negative where a link is over the target)."""
        return self.target - self.load

    def violations(self, fabric: Fabric, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The (link, window) cells over the target, largest excess first: link id and name,
        window and its times, predicted load, excess and whether routing could avoid the link."""
        k, w = np.nonzero(self.load > self.target + _TOL)
        order = np.argsort(-(self.load[k, w] - self.target), kind="stable")
        if limit is not None:
            order = order[:limit]
        out = []
        for i in order.tolist():
            lk, win = int(self.links[k[i]]), int(w[i])
            out.append({"link": lk, "name": _link_name(fabric, lk), "window": win,
                        "t0_s": float(self.edges_s[win]), "t1_s": float(self.edges_s[win + 1]),
                        "load": float(self.load[k[i], win]),
                        "excess": float(self.load[k[i], win] - self.target),
                        "routable": bool(self.routable[k[i]])})
        return out

    def summary(self, fabric: Fabric, *, limit: int = 10) -> dict[str, Any]:
        """A JSON-able digest for ``Plan.info``: target, windows, largest load, violations."""
        over = self.load > self.target + _TOL
        return {"target": self.target, "routing": self.routing, "status": self.status,
                "solve_s": self.solve_s, "windows": int(self.load.shape[1]),
                "window_s": float(self.edges_s[1] - self.edges_s[0]) if self.edges_s.size > 1 else 0.0,
                "links": int(self.links.size),
                "max_load": float(self.load.max()) if self.load.size else 0.0,
                "min_slack": float(self.slack.min()) if self.load.size else self.target,
                "violations": int(over.sum()),
                "violations_routable": int((over & self.routable[:, None]).sum()),
                "worst": self.violations(fabric, limit=limit)}

    def to_dict(self) -> dict[str, Any]:
        """Every reported link's loads (4 decimals), for ``Plan.info["link_loads"]``."""
        return {"edges_s": [round(float(x), 6) for x in self.edges_s], "links": self.links.tolist(),
                "routable": self.routable.tolist(), "target": self.target, "routing": self.routing,
                "load": np.round(self.load, 4).tolist()}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> LinkLoads:
        """Read back `to_dict`."""
        return LinkLoads(edges_s=np.asarray(data["edges_s"], float),
                         links=np.asarray(data["links"], np.int64),
                         load=np.asarray(data["load"], float).reshape(len(data["links"]), -1),
                         target=float(data["target"]), routable=np.asarray(data["routable"], bool),
                         routing=str(data.get("routing", "mcf")))


def routes_to_splits(routes: Mapping[str, Sequence[tuple[Sequence[int], float]]]
                     ) -> dict[tuple[int, int], list[tuple[np.ndarray, float]]]:
    """`flowherd.planning.plan.Plan.routes` as the ``splits`` of
    `flowherd.routing.policies.ExplicitRouter`."""
    out = {}
    for key, v in routes.items():
        try:
            a, b = (int(x) for x in str(key).split(","))
        except ValueError:
            raise ConfigError(f"plan routes key must be 'src,dst', got {key!r} (plan.routes)") from None
        out[(a, b)] = [(np.asarray(p, dtype=np.int64), float(w)) for p, w in v]
    return out


def _link_name(fabric: Fabric, link: int) -> str:
    return f"{fabric.node_name(int(fabric.link_src[link]))}->{fabric.node_name(int(fabric.link_dst[link]))}"


# ---- the concurrent-traffic estimate --------------------------------------------------------
_BG: dict[tuple[int, float], tuple[Fabric, np.ndarray]] = {}


def background_link_bytes_per_s(fabric: Fabric, background: Any) -> np.ndarray:
    """``float64[L]``: expected bytes per second of `flowherd.cluster.simulate.BackgroundSpec`
    traffic on each directed link (module docstring); zeros without background."""
    load = 0.0 if background is None else float(getattr(background, "load", 0.0))
    if load <= 0 or fabric.num_servers < 2:
        return np.zeros(fabric.num_directed_links)
    hit = _BG.get((id(fabric), load))
    if hit is not None and hit[0] is fabric:
        return hit[1]
    server = np.asarray(fabric.gpu_server, np.int64)
    ns = fabric.num_servers
    nic = (fabric.link_kind == LinkKind.NETWORK) & (fabric.node_tier[fabric.link_src] == 1)
    bw = float(fabric.link_capacity_bytes_per_s[nic].sum()) / ns  # as the simulator's background
    gps = np.bincount(server, minlength=ns).astype(np.float64)
    out = None
    if fabric.num_gpus ** 2 > GROUPED_BACKGROUND_PAIRS:
        out = _background_grouped(fabric, load * bw / (ns - 1), server, gps)
    if out is None:
        g = np.arange(fabric.num_gpus)
        src, dst = np.meshgrid(g, g, indexing="ij")
        src, dst = src.ravel(), dst.ravel()
        cross = server[src] != server[dst]
        src, dst = src[cross], dst[cross]
        rate = load * bw / (ns - 1) / (gps[server[src]] * gps[server[dst]])
        out = link_profile(fabric, TrafficMatrix(src=src, dst=dst, size_bytes=rate), "spray")
    _BG[(id(fabric), load)] = (fabric, out)
    return out


#: GPU pairs above which the background is routed between the switches the NICs hang from
#: rather than GPU pair by GPU pair (`_background_grouped`; 6,776 GPUs give 46 M pairs and, on a
#: 3-tier fabric, hundreds of spray paths each).
GROUPED_BACKGROUND_PAIRS = 2**24


def _background_grouped(fabric: Fabric, per_server_pair: float, server: np.ndarray,
                        gps: np.ndarray) -> np.ndarray | None:
    """The uniform background of `background_link_bytes_per_s` with the same link loads, computed
    from one demand per pair of NIC attachments: GPUs whose NICs hang from the same switches are
    alike above those switches, so spraying the summed demand of every attachment pair from one
    GPU of each gives every switch-to-switch link its load; the GPU-side links (PCIe, NIC up and
    down) carry each GPU's own total, ``per_server_pair x (servers - 1) / GPUs of its server``
    each way, split evenly over its NIC's uplinks. None where a server's NICs hang from different
    switches (rails: a GPU pair's shortest paths may then cross NVLink, which this does not
    model)."""
    src_l, dst_l, kind = fabric.link_src, fabric.link_dst, fabric.link_kind
    tier = fabric.node_tier
    ng = fabric.num_gpus
    pcie = np.flatnonzero((kind == LinkKind.PCIE) & (src_l < ng) & (tier[dst_l] == 1))
    nic_of = np.full(ng, -1, np.int64)
    nic_of[src_l[pcie]] = dst_l[pcie]
    up = np.flatnonzero((kind == LinkKind.NETWORK) & (tier[src_l] == 1))
    attach: dict[int, list[int]] = {}
    for lk in up.tolist():
        attach.setdefault(int(src_l[lk]), []).append(int(dst_l[lk]))
    keys = [tuple(sorted(attach.get(int(n), []))) for n in nic_of.tolist()]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    grp = np.array([ids[k] for k in keys], np.int64)
    ngr = len(ids)
    per_server = np.zeros((fabric.num_servers, ngr), bool)
    per_server[server, grp] = True
    if np.any(per_server.sum(1) > 1) or np.any(nic_of < 0):
        return None
    # W[a, s]: GPUs of attachment a on server s, each weighted 1 / GPUs of s; demand between
    # attachments a != b over GPU pairs on different servers: c (w_a w_b - sum_s W[a,s] W[b,s])
    w = np.zeros((ngr, fabric.num_servers))
    np.add.at(w, (grp, server), 1.0 / gps[server])
    demand = per_server_pair * (np.outer(w.sum(1), w.sum(1)) - w @ w.T)
    np.fill_diagonal(demand, 0.0)  # between GPUs of one attachment: no switch-to-switch link
    rep = np.array([int(np.flatnonzero(grp == a)[0]) for a in range(ngr)], np.int64)
    a, b = np.nonzero(demand > 0)
    out = (link_profile(fabric, TrafficMatrix(src=rep[a], dst=rep[b], size_bytes=demand[a, b]), "spray")
           if a.size else np.zeros(fabric.num_directed_links))
    gpu_side = (tier[src_l] <= 1) | (tier[dst_l] <= 1)
    out = np.where(gpu_side, 0.0, out)
    own = per_server_pair * (fabric.num_servers - 1) / gps[server]  # each GPU's total, each way
    back = {(int(src_l[lk]), int(dst_l[lk])): lk for lk in np.flatnonzero(gpu_side).tolist()}
    for g in range(ng):
        n = int(nic_of[g])
        if n < 0:
            continue
        for a_, b_ in ((g, n), (n, g)):
            if (a_, b_) in back:
                out[back[(a_, b_)]] += own[g]
        sw = attach.get(n, [])
        for x in sw:
            for a_, b_ in ((n, x), (x, n)):
                if (a_, b_) in back:
                    out[back[(a_, b_)]] += own[g] / len(sw)
    return out


_TRAFFIC: dict[tuple[Any, ...], tuple[Fabric, TrafficMatrix]] = {}


def _job_pairs(fabric: Fabric, job: Any, gpus: tuple[int, ...]) -> TrafficMatrix:
    """Wire bytes per iteration between the job's GPUs on different servers (cached)."""
    from flowherd.workload.training import TrainingJob

    if not isinstance(job, TrainingJob):
        return TrafficMatrix.empty()  # serving traffic is not modelled (`flowherd.planning.predict`)
    import dataclasses

    key = (repr(dataclasses.replace(job, name="p", tenant="p", submit_s=0.0, iterations=1)), gpus,
           id(fabric))
    hit = _TRAFFIC.get(key)
    if hit is None or hit[0] is not fabric:
        hit = _TRAFFIC[key] = (fabric, network_pairs(job, gpus, fabric, wire=True))
    return hit[1]


def window_edges(jobs: Sequence[PlannedJob], window_s: float | None, num_windows: int = 50) -> np.ndarray:
    """Window edges from 0 to the last predicted end: width ``window_s`` (None: the span over
    ``num_windows``)."""
    span = max((j.end_s for j in jobs), default=0.0)
    if not math.isfinite(span) or span <= 0:
        span = 1.0
    if window_s is None:
        window_s = span / num_windows
    if not (isinstance(window_s, int | float) and window_s > 0 and math.isfinite(window_s)):
        raise ConfigError(f"window must be a positive time in seconds, got {window_s!r} (window_s)")
    n = max(1, math.ceil(span / window_s - 1e-9))
    return np.arange(n + 1) * float(window_s)


def _demand(fabric: Fabric, jobs: Sequence[PlannedJob], edges: np.ndarray, members: list | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct pairs (src, dst) and ``float64[pairs, W]`` bytes per second in each window;
    ``members`` (when given) receives each job's (pair indices, bool[W] windows it runs in)."""
    keys: dict[tuple[int, int], int] = {}
    rows, cols, vals = [], [], []
    width = np.diff(edges)
    for pj in jobs:
        if not (pj.iteration_s > 0 and math.isfinite(pj.iteration_s)):
            continue
        t = _job_pairs(fabric, pj.job, pj.gpus)
        if not t.num_pairs:
            continue
        share = np.clip(np.minimum(edges[1:], pj.end_s) - np.maximum(edges[:-1], pj.start_s), 0, None) / width
        on = np.flatnonzero(share > 0)
        if not on.size:
            continue
        rate = t.size_bytes / pj.iteration_s
        idx = np.array([keys.setdefault((int(a), int(b)), len(keys))
                        for a, b in zip(t.src.tolist(), t.dst.tolist(), strict=True)])
        if members is not None:
            members.append((idx, share > 0))
        rows.append(np.repeat(idx, on.size))
        cols.append(np.tile(on, idx.size))
        vals.append(np.outer(rate, share[on]).ravel())
    n = len(keys)
    pairs = np.array(list(keys), dtype=np.int64).reshape(n, 2)
    if not n:
        return pairs[:, 0], pairs[:, 1], np.zeros((0, width.size))
    d = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, width.size)).toarray()
    return pairs[:, 0], pairs[:, 1], d


_PATHS: dict[tuple[int, int, int, int | None], tuple[Fabric, list[np.ndarray]]] = {}


def _paths(fabric: Fabric, s: int, d: int, limit: int | None) -> list[np.ndarray]:
    key = (id(fabric), s, d, limit)
    hit = _PATHS.get(key)
    if hit is None or hit[0] is not fabric:
        paths = spread_paths(fabric, s, d, limit)
        hit = _PATHS[key] = (fabric, paths)
    return hit[1]


def leaf_background_bytes_per_s(fabric: Fabric, background: Any) -> np.ndarray:
    """``float64[L]``: expected background bytes per second on each leaf's uplinks, leaves in
    the order of `flowherd.planning.predict.fabric_view`."""
    from flowherd.cluster.placement import server_leaf

    nodes = np.unique(server_leaf(fabric))
    bg = background_link_bytes_per_s(fabric, background)
    kind, tier, dst = np.asarray(fabric.link_kind), fabric.node_tier, fabric.link_dst
    out = np.zeros(nodes.size)
    for i, n in enumerate(nodes.tolist()):
        if n < 0:
            continue
        up = fabric.out_links(n)
        up = up[(kind[up] == LinkKind.NETWORK) & (tier[dst[up]] > tier[n])]
        out[i] = float(bg[up].sum())
    return out


def _network_links(fabric: Fabric) -> np.ndarray:
    return np.flatnonzero(np.asarray(fabric.link_kind) == LinkKind.NETWORK)


def predict_link_loads(fabric: Fabric, jobs: Sequence[PlannedJob], *, router: Any = "spray",
                       background: Any = None, target: float = DEFAULT_MAX_UTILIZATION,
                       window_s: float | None = None, edges_s: np.ndarray | None = None) -> LinkLoads:
    """Predicted per-link, per-window loads of a plan routed by ``router`` (a router name, a
    `Router`, or a splits mapping as `flowherd.planning.traffic.link_profile` takes); ECMP's
    expectation is spraying, so ``"ecmp"`` is predicted as ``"spray"``."""
    edges = window_edges(jobs, window_s) if edges_s is None else np.asarray(edges_s, float)
    src, dst, d = _demand(fabric, jobs, edges)
    net = _network_links(fabric)
    cap = np.asarray(fabric.link_capacity_bytes_per_s, float)
    name = router if isinstance(router, str) else "explicit"
    rt = "spray" if router == "ecmp" else router
    load = np.zeros((fabric.num_directed_links, edges.size - 1))
    for w in range(edges.size - 1):
        on = d[:, w] > 0
        if on.any():
            tm = TrafficMatrix(src=src[on], dst=dst[on], size_bytes=d[on, w])
            load[:, w] = link_profile(fabric, tm, rt)
    load += background_link_bytes_per_s(fabric, background)[:, None]
    util = load[net] / cap[net, None]
    return LinkLoads(edges_s=edges, links=net, load=util, target=float(target),
                     routable=_routable(fabric, src, dst, net), routing=name, status=name)


def _routable(fabric: Fabric, src: np.ndarray, dst: np.ndarray, links: np.ndarray,
              limit: int | None = None) -> np.ndarray:
    """``bool[K]``: some pair has a shortest path avoiding the link while another uses it."""
    choice = np.zeros(fabric.num_directed_links, bool)
    for s, t in zip(src.tolist(), dst.tolist(), strict=True):
        ps = _paths(fabric, s, t, limit)
        if len(ps) > 1:
            cnt = np.bincount(np.concatenate(ps), minlength=choice.size)
            choice |= (cnt > 0) & (cnt < len(ps))
    return choice[links]


def _job_bottleneck_rows(members: list[tuple[np.ndarray, np.ndarray]], multi: list[int], uses: Any,
                         rows_l: np.ndarray, rep: np.ndarray, t_w: np.ndarray, nl: int
                         ) -> tuple[list[tuple[int, int]], list[float]]:
    """Rows ``u[l, w] - V[j, w] <= ...`` of every job j, window w it runs in and routable link l
    some path of its pairs uses, as (load row index, V column) pairs, and the V columns' costs
    (``T_w``). Minimizing each job's bottleneck, not only the window's largest load, keeps the
    links a job is not bottlenecked on from taking arbitrary splits (a vertex of the min-max LP
    may route a pair whole over one spine while another spine idles)."""
    where = {k: i for i, k in enumerate(multi)}
    row_of = np.full(uses.shape[0], -1, np.int64)
    row_of[rows_l] = np.arange(rows_l.size)
    csc = uses.tocsc()
    rows: list[tuple[int, int]] = []
    cost: list[float] = []
    for pairs, on in members:
        mine = [k for k in pairs.tolist() if k in where]
        if not mine:
            continue
        links = np.unique(csc[:, mine].indices)
        links = row_of[links]
        links = links[links >= 0]
        if not links.size:
            continue
        for u in np.flatnonzero(on[rep]).tolist():
            col = len(cost)
            cost.append(float(t_w[u]))
            rows.extend((u * nl + int(r), col) for r in links.tolist())
    return rows, cost


def _objective(x: np.ndarray, loads: sp.csr_matrix, rhs: np.ndarray, t_w: np.ndarray, target: float,
               v_rows: list, v_cost: list, nl: int) -> float:
    """The routing LP's objective at path shares ``x`` (its tie-break term left out): each
    window's largest load, the excess over the target and the jobs' bottlenecks, at their
    smallest values ``x`` allows."""
    util = loads @ x - rhs  # (window, link row) loads, window-major
    per = util.reshape(-1, nl) if nl else np.zeros((t_w.size, 0))
    u_w = per.max(axis=1, initial=-np.inf) if nl else np.zeros(t_w.size)
    total = float(t_w @ np.where(np.isfinite(u_w), u_w, 0.0))
    total += _EXCESS_COST * float((np.clip(per - target, 0.0, None) * t_w[:, None]).sum())
    if v_cost:
        v = np.full(len(v_cost), -np.inf)
        np.maximum.at(v, np.array([c for _, c in v_rows]), util[np.array([r for r, _ in v_rows])])
        total += float(np.asarray(v_cost) @ np.where(np.isfinite(v), v, 0.0))
    return total


def route_windows(fabric: Fabric, jobs: Sequence[PlannedJob], *, target: float = DEFAULT_MAX_UTILIZATION,
                  background: Any = None, window_s: float | None = None, edges_s: np.ndarray | None = None,
                  paths_per_pair: int | None = 16, time_limit_s: float | None = None,
                  even_ties: bool = False
                  ) -> tuple[dict[tuple[int, int], list[tuple[np.ndarray, float]]], LinkLoads]:
    """Route a plan's traffic with the windowed congestion-free LP (module docstring).

    Args:
        fabric: The fabric.
        jobs: The plan's jobs (`PlannedJob`).
        target: Target utilization of every link (`planner.max_utilization`), in (0, 1].
        background: `flowherd.cluster.simulate.BackgroundSpec` (its expected load), or None.
        window_s: Window width, seconds (None: the plan's span over 50).
        edges_s: Window edges instead (e.g. the simulator's utilization bins).
        paths_per_pair: Equal-cost shortest paths per pair at most.
        time_limit_s: HiGHS time limit, seconds.
        even_ties: Where the even split scores as well as the LP's optimum, route by it (module
            docstring); False: the LP's optimum as HiGHS returns it.

    Returns:
        ``(splits, loads)``: per GPU pair of the plan's scale-out traffic the paths and shares
        (for `ExplicitRouter`), and the predicted `LinkLoads` under them.

    Raises:
        ConfigError: a target outside (0, 1].
        SolverError: HiGHS failed.
    """
    target = check_max_utilization(target, "target")
    edges = window_edges(jobs, window_s) if edges_s is None else np.asarray(edges_s, float)
    width = np.diff(edges)
    members: list[tuple[np.ndarray, np.ndarray]] = []
    src, dst, d = _demand(fabric, jobs, edges, members)
    cap = np.asarray(fabric.link_capacity_bytes_per_s, float)
    num_links = fabric.num_directed_links
    fixed = np.zeros((num_links, width.size)) + background_link_bytes_per_s(fabric, background)[:, None]
    multi: list[int] = []
    path_pair: list[int] = []
    path_links: list[np.ndarray] = []
    splits: dict[tuple[int, int], list[tuple[np.ndarray, float]]] = {}
    for k, (s, t) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        ps = _paths(fabric, s, t, paths_per_pair)
        if len(ps) == 1:
            fixed[ps[0]] += d[k][None, :]
            splits[(s, t)] = [(ps[0].astype(np.int32), 1.0)]
            continue
        multi.append(k)
        for p in ps:
            path_pair.append(k)
            path_links.append(p)
    net = _network_links(fabric)
    status, solve_s = "optimal", 0.0
    load = fixed.copy()  # background and single-path pairs; the routed pairs are added below
    choice = np.zeros(num_links, bool)
    if multi:
        npth = len(path_links)
        pp = np.asarray(path_pair)
        lens = np.array([p.size for p in path_links])
        a = sp.csr_matrix((np.ones(int(lens.sum())),
                           (np.concatenate(path_links), np.repeat(np.arange(npth), lens))),
                          shape=(num_links, npth))
        # the links some pair can avoid: rows of the LP; the others' loads do not depend on x
        per_pair = sp.csr_matrix((np.ones(npth), (pp, np.arange(npth))), shape=(len(src), npth))
        uses = (a @ per_pair.T).tocsr()  # link x pair: how many of the pair's paths use it
        npaths = np.asarray(per_pair.sum(axis=1)).ravel()
        uc = uses.tocoo()
        choice[uc.row[uc.data < npaths[uc.col]]] = True
        # links every path of a pair uses carry its whole demand whatever the split
        full = uc.data >= npaths[uc.col]
        if full.any():
            fixed_links = sp.csr_matrix((np.ones(int(full.sum())), (uc.row[full], uc.col[full])),
                                        shape=(num_links, len(src)))
            fixed = fixed + fixed_links @ d
        rows_l = np.flatnonzero(choice)
        # distinct windows (same demand columns) share their rows
        active = np.flatnonzero(width > 0)
        cols_d, inv = np.unique(np.round(d[multi][:, active], 6).T, axis=0, return_inverse=True)
        inv = np.asarray(inv).ravel()
        nw = cols_d.shape[0]
        t_w = np.bincount(inv, weights=width[active], minlength=nw)
        rep = np.array([active[np.flatnonzero(inv == u)[0]] for u in range(nw)])
        dpath = d[pp][:, rep]  # path x distinct window: its pair's bytes per second
        ac = a[rows_l].tocsc()
        blocks, rhs = [], []
        for u in range(nw):
            blocks.append((sp.diags(1.0 / cap[rows_l]) @ ac @ sp.diags(dpath[:, u])).tocsr())
            rhs.append(-fixed[rows_l, rep[u]] / cap[rows_l])
        nl = rows_l.size
        n_x, n_u, n_s = npth, nw, nl * nw
        # columns: x (paths), U (windows), s (excess of each link row over the target), V (each
        # job's bottleneck in each window it runs in)
        loads = sp.vstack(blocks).tocsr()
        loads.data[np.abs(loads.data) < 1e-9] = 0.0  # below HiGHS' small_matrix_value: a warning
        loads.eliminate_zeros()
        per_u = sp.kron(sp.identity(nw), np.ones((nl, 1))).tocsr()
        rhs = np.concatenate(rhs)
        v_rows, v_cost = _job_bottleneck_rows(members, multi, uses, rows_l, rep, t_w, nl)
        n_v = len(v_cost)
        load_rows = sp.hstack([loads, -per_u, sp.csr_matrix((n_s, n_s + n_v))]).tocsr()
        exc_rows = sp.hstack([loads, sp.csr_matrix((n_s, n_u)), -sp.identity(n_s),
                              sp.csr_matrix((n_s, n_v))]).tocsr()
        conv = sp.hstack([per_pair[multi], sp.csr_matrix((len(multi), n_u + n_s + n_v))]).tocsr()
        parts = [conv, load_rows, exc_rows]
        if n_v:
            sel = sp.csr_matrix((np.ones(len(v_rows)), (np.arange(len(v_rows)), [r for r, _ in v_rows])),
                                shape=(len(v_rows), n_s))
            vcol = sp.csr_matrix((-np.ones(len(v_rows)), (np.arange(len(v_rows)), [c for _, c in v_rows])),
                                 shape=(len(v_rows), n_v))
            parts.append(sp.hstack([sel @ loads, sp.csr_matrix((len(v_rows), n_u + n_s)), vcol]).tocsr())
        mat = sp.vstack(parts).tocsc()
        lo = np.concatenate([np.ones(len(multi)), np.full(2 * n_s + len(v_rows), -np.inf)])
        hi = np.concatenate([np.ones(len(multi)), rhs, rhs + target, rhs[[r for r, _ in v_rows]]])
        unit = np.asarray((sp.diags(1.0 / cap) @ a).sum(axis=0)).ravel()  # sum over the path of 1/c
        cost = np.concatenate([_EPS * unit * (dpath @ t_w), t_w, _EXCESS_COST * np.repeat(t_w, nl),
                               np.asarray(v_cost, dtype=np.float64)])
        col_lo = np.concatenate([np.zeros(n_x), np.full(n_u, -np.inf), np.zeros(n_s),
                                 np.full(n_v, -np.inf)])
        res = solve_lp(cost, mat, lo, hi, col_lo=col_lo, time_limit_s=time_limit_s)
        status, solve_s = res.status, res.solve_s
        if res.x is None:
            raise SolverError(f"the congestion-free routing LP found no routing ({res.status})")
        x = np.clip(res.x[:n_x], 0.0, None)
        # an optimum as good as spraying's even splits is no reason to leave them: within a
        # window a collective's flows burst together, and even splits spread every burst (on a
        # trace that never loads its spines an LP vertex put each pair on one spine and ran
        # 0.15% slower in simulation than spraying)
        even = 1.0 / npaths[pp]
        if even_ties and _objective(even, loads, rhs, t_w, target, v_rows, v_cost, nl) <= (
                _objective(x, loads, rhs, t_w, target, v_rows, v_cost, nl) * (1 + 1e-6) + 1e-12):
            x = even
        for k in multi:
            sel = np.flatnonzero(pp == k)
            w = x[sel]
            w = w / w.sum() if w.sum() > 0 else np.full(sel.size, 1.0 / sel.size)
            keep = [(path_links[i].astype(np.int32), float(v)) for i, v in zip(sel.tolist(), w.tolist(),
                                                                               strict=True) if v > 1e-9]
            splits[(int(src[k]), int(dst[k]))] = keep
            for i, v in zip(sel.tolist(), w.tolist(), strict=True):
                load[path_links[i]] += v * d[k][None, :]
    util = load[net] / cap[net, None]
    return splits, LinkLoads(edges_s=edges, links=net, load=util, target=target, routable=choice[net],
                             routing="mcf", status=status, solve_s=solve_s)
