"""What every batch placer shares: its result value and the leaf load of running jobs.

Below `placers`, `heuristic` and `milp` (the registry entries call the heuristic and the MILP;
the MILP falls back on the heuristic): none of the three imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.planning.predict import FabricView, JobProfile, _layout

__all__ = ["BatchResult", "LeafCongestion", "leaf_excess", "running_leaf_load", "running_leaf_mean_load"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """Placements of a batch: GPU ids per job (None: not placed), and what the method proved.

    Attributes:
        placements: One entry per job of the batch.
        lower_bound: Lower bound on the batch's summed predicted JCT, seconds (None: none).
        status: "optimal", "time_limit", "heuristic" or "baseline".
        notes: What the method reports of its choices (`flowherd.planning.bilevel`: the
            placements the routing LP changed).
    """

    placements: tuple[np.ndarray | None, ...]
    lower_bound: float | None = None
    status: str = "baseline"
    notes: tuple[str, ...] = ()


def running_leaf_load(view: FabricView, running: Sequence[tuple[JobProfile, np.ndarray]]) -> np.ndarray:
    """``float64[L]``: offered load (bytes per second) of running jobs on each leaf's uplinks."""
    load = np.zeros(view.num_leaves)
    for p, g in running:
        s, leaves = _layout(view, np.asarray(g, dtype=np.int64))
        if s == 2:
            load[leaves] += p.offered_bytes_per_s
    return load


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LeafCongestion:
    """The upper level's side of `planner.max_utilization` (`flowherd.planning.congestion`).

    At leaf level a spread job loads each leaf it uses with its mean uplink rate
    (`running_leaf_mean_load`); on a two-tier leaf-spine the routing LP can split a leaf's
    traffic evenly over its uplinks, so the leaf's aggregate over its uplink capacity is what the
    LP achieves there. The heuristic keeps it at or under ``target`` before it minimizes its
    cost (moving jobs), and the timeline holds back a job that would push a leaf over it while
    running jobs will free room (shifting its start).

    Attributes:
        target: Target utilization of a leaf's uplinks.
        background_bytes_per_s: ``float64[L]`` expected background on each leaf's uplinks.
        route_score: Optional ``f(batch placements) -> float``: the routing LP's objective of a
            candidate placement of the batch with the running jobs (less is better); the
            heuristic chooses among its best candidates with it (the joint placement).
    """

    target: float
    background_bytes_per_s: np.ndarray
    route_score: Any = None


def running_leaf_mean_load(view: FabricView, jobs: Sequence[tuple[JobProfile, np.ndarray]]) -> np.ndarray:
    """``float64[L]``: mean load (bytes per second) of ``jobs`` running together on each leaf's
    uplinks: a spread job's leaf uplink bytes per iteration over its iteration time predicted
    with the others (`flowherd.planning.predict.evaluate`, stretch included)."""
    from flowherd.planning.predict import evaluate

    load = np.zeros(view.num_leaves)
    if not jobs:
        return load
    res = evaluate(view, [p for p, _ in jobs], [np.asarray(g, dtype=np.int64) for _, g in jobs])
    for (p, g), it in zip(jobs, res.iteration_s, strict=True):
        s, leaves = _layout(view, np.asarray(g, dtype=np.int64))
        if s == 2 and p.fixed_duration_s is None and it > 0:
            load[leaves] += p.leaf_uplink_bytes / it
    return load


def leaf_excess(view: FabricView, placed: Sequence[tuple[JobProfile, np.ndarray]],
                guard: LeafCongestion) -> float:
    """Summed excess of the leaves' mean uplink utilization over ``guard.target`` with the jobs
    ``placed`` running (0 when every leaf is at or under it)."""
    load = np.asarray(guard.background_bytes_per_s, dtype=np.float64) + running_leaf_mean_load(view, placed)
    cap = view.leaf_uplink_bytes_per_s
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(np.isfinite(cap), load / cap, 0.0)
    return float(np.clip(util - guard.target, 0.0, None).sum())
