"""The plan's upper level on LLM clusters: communication groups placed by the lower level's cost.

For each job of a batch (in the timeline's order: the queue's prefix that fits, then EASY
backfilling, `flowherd.planning.timeline`), the candidates are placements in whole servers
that keep its groups together (`flowherd.planning.groups`):

* Arnold's MIP (the DP groups' and the pipelines' spread over leaves, `arnold_counts`);
* every stage in one leaf, fewest leaves, the leaves ordered by the uplink load the running jobs
  put on them (least loaded first: the concurrent-traffic estimate at leaf level,
  `flowherd.planning.batch.running_leaf_load`) and by id (`aligned_counts`);
* where the fabric has several pods (`flowherd.planning.view.leaf_pods`: the leaves grouped by
  the aggregation switches they hang from, the Lingjun fabric's PSW groups), the aligned fill
  inside the fewest pods (`pod_fill`): the pods by usable room, largest first, then least loaded,
  as many as the job needs, and the aligned fill of their leaves;
* when no aligned placement exists (not enough whole free servers in the right leaves), the
  topology placer's (fewest servers, then fewest leaves).

The lower level scores each distinct candidate: the windowed congestion-free routing LP
(`flowherd.planning.congestion.route_windows`, one window with the running jobs and the batch
placed so far at their uncontended rates, the expected background; its objective: 100 x the
summed excess over `planner.max_utilization` plus the largest link load,
`flowherd.planning.timeline.Congestion.for_batch`). The candidate of least score wins; ties go
to fewer leaves, then the order above. Where the fabric has several pods, the candidates whose
score is within `POD_SCORE_TOLERANCE` of the least take the one spread over the fewest pods
(then the least score): below the target, neither the LP's largest link load nor the JCT
model charges what a ring crossing the core costs (the extra switch hops and ECMP stages every
iteration pays; the Lingjun fabric is 15:1 there), so at a near tie the pods decide. On one pod
the rule is the least score, as without pods. Where the JCT model charges the core tier
(`flowherd.planning.predict.core_tier`: the pods' uplinks to the core, charged once the rings
crossing them overload them), the near candidates are first ranked by what the core costs the
job by that model: its predicted run time with the
running jobs and the batch placed so far, less the same without the core tier
(`core_charge_s`); a candidate whose rings would share oversubscribed core uplinks loses to one
that avoids them, and where no candidate's rings overload the core (every charge 0) the rule
is the fewest pods as before. That is the coupling of the two levels: a placement the
upper level's rule prefers (Arnold's, fewest leaves) loses to one whose traffic the LP can route
under the target when the first cannot. Each such change is noted (``BatchResult.notes``,
``Plan.info["placement_notes"]``: job, the rule's choice and the LP's, their scores).

A job smaller than a server goes where the topology placer puts it (best fit in one server).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from flowherd.planning.batch import BatchResult, running_leaf_load
from flowherd.planning.groups import (
    aligned_counts,
    arnold_counts,
    counts_to_gpus,
    free_whole_servers,
    job_groups,
    leaf_room,
    packed_place,
    type_mask,
)
from flowherd.planning.predict import FabricView, JobProfile, _layout, core_tier, evaluate

__all__ = ["POD_SCORE_TOLERANCE", "core_charge_s", "place_groups", "pod_fill"]

# routing-LP score (100 x excess over the target + the largest link load) within which the
# candidate over fewer pods wins: 0.05 is 5 points of link utilization, no excess
POD_SCORE_TOLERANCE = 0.05


def pod_fill(view: FabricView, room: np.ndarray, need: int, block: int, rho: np.ndarray) -> np.ndarray | None:
    """Servers per leaf of the aligned fill inside the fewest pods: the pods ordered by their
    usable room (whole stage blocks), largest first, then by their leaves' mean uplink load
    ``rho`` (least first), then id; the first pods that hold ``need`` servers, and among their
    leaves `aligned_counts` (least-loaded leaves first on ties). A job one pod holds goes to the
    pod of least room that holds it (best fit). None when the fabric has one pod or no pods
    hold the job."""
    if view.leaf_pod is None or view.num_pods < 2:
        return None
    pod = view.leaf_pod
    usable = np.bincount(pod, weights=room // block * block, minlength=view.num_pods)
    mean_rho = np.bincount(pod, weights=rho, minlength=view.num_pods) / np.maximum(
        np.bincount(pod, minlength=view.num_pods), 1)
    ids = np.arange(view.num_pods)
    one = np.flatnonzero(usable >= need)
    if one.size:
        chosen = one[np.lexsort((ids[one], mean_rho[one], usable[one]))][:1]
    else:
        order = np.lexsort((ids, mean_rho, -usable))
        k = int(np.searchsorted(np.cumsum(usable[order]), need)) + 1
        if k > order.size:
            return None
        chosen = order[:k]
    inside = np.isin(pod, chosen)
    counts = aligned_counts(np.where(inside, room, 0), need, block, np.lexsort((np.arange(rho.size), rho)))
    return counts if counts is not None and int(counts.sum()) == need else None


def _candidates(view: FabricView, p: JobProfile, free: np.ndarray, load: np.ndarray) -> list[tuple[str, Any]]:
    """(rule, GPU ids) of the distinct candidate placements of ``p`` (module docstring)."""
    g = job_groups(p, view.gpus_per_server)
    mask = free & type_mask(view, p.gpu_type)
    out: list[tuple[str, Any]] = []
    if g.servers:
        whole = free_whole_servers(view, free, p.gpu_type)
        room = leaf_room(view, whole)
        cap = np.where(np.isfinite(view.leaf_uplink_bytes_per_s), view.leaf_uplink_bytes_per_s, 1.0)
        rho = load / cap
        for rule, counts in (("arnold", arnold_counts(room, g.servers, g.stage_servers)),
                             ("aligned-least-loaded", aligned_counts(room, g.servers, g.stage_servers,
                                                                     np.lexsort((np.arange(rho.size), rho)))),
                             ("aligned", aligned_counts(room, g.servers, g.stage_servers,
                                                        np.arange(view.num_leaves))),
                             ("aligned-fewest-pods", pod_fill(view, room, g.servers, g.stage_servers, rho))):
            if counts is not None and int(counts.sum()) == g.servers:
                out.append((rule, counts_to_gpus(view, whole, counts)))
    if not out:
        gp = packed_place(view, p.world_size, mask)
        if gp is not None:
            out.append(("topology", gp))
    seen: set[bytes] = set()
    uniq = []
    for rule, gp in out:
        key = np.asarray(gp, dtype=np.int64).tobytes()
        if key not in seen:
            seen.add(key)
            uniq.append((rule, np.asarray(gp, dtype=np.int64)))
    return uniq


def core_charge_s(view: FabricView, p: JobProfile, gp: np.ndarray,
                  others: Sequence[tuple[JobProfile, np.ndarray]]) -> float:
    """Seconds the JCT model's core tier adds to the run time of ``p`` on ``gp`` beside
    ``others`` (running together): its predicted run time less the same without the core tier
    (0 on a view without one)."""
    if not core_tier(view):
        return 0.0
    profs = [q for q, _ in others] + [p]
    gpus = [np.asarray(g, dtype=np.int64) for _, g in others] + [gp]
    flat = dataclasses.replace(view, pod_uplink_bytes_per_s=None)
    return float(evaluate(view, profs, gpus).duration_s[-1] - evaluate(flat, profs, gpus).duration_s[-1])


def _charge_note(charge: dict[int, float], best: int) -> str:
    """The core charges of the rule's candidate and the chosen one, where one is not 0."""
    if not any(charge.values()):
        return ""
    first = f"{charge[0]:.3f} s" if 0 in charge else "not near"
    return f"; core charge {first} -> {charge.get(best, 0.0):.3f} s"


def _pods(view: FabricView, gp: np.ndarray) -> int:
    """Pods the GPUs ``gp`` touch."""
    if view.leaf_pod is None:
        return 1
    return int(np.unique(view.leaf_pod[_layout(view, gp)[1]]).size)


def place_groups(view: FabricView, batch: Sequence[JobProfile], free: np.ndarray,
                 running: Sequence[tuple[JobProfile, np.ndarray]], *, congestion: Any = None) -> BatchResult:
    """Place ``batch`` into the ``free`` GPUs, job after job (module docstring).

    Args:
        view: The fabric view.
        batch: The jobs, in the timeline's order (the first that does not fit ends the batch).
        free: ``bool[G]`` free GPUs (changed in place).
        running: Jobs running, with their GPUs.
        congestion: The timeline's `flowherd.planning.batch.LeafCongestion` with its
            ``route_score`` (the routing LP); None: the rule's first candidate.

    Returns:
        Placements (None from the first job that does not fit) and the notes of the placements
        the LP changed.
    """
    out: list[np.ndarray | None] = []
    notes: list[str] = []
    score = getattr(congestion, "route_score", None)
    placed: list[tuple[JobProfile, np.ndarray]] = []
    for p in batch:
        load = running_leaf_load(view, [*running, *placed])
        cands = _candidates(view, p, free, load)
        if not cands:
            out.append(None)
            break
        best = 0
        charge: dict[int, float] = {}
        if score is not None and len(cands) > 1:
            scored = []
            for k, (_, gp) in enumerate(cands):
                s = float(score([*(g for _, g in placed), gp]))
                leaves = _layout(view, gp)[1].size
                scored.append((round(s, 9), leaves, k))
            best = min(scored)[2]
            if view.num_pods > 1:  # near the least score: the least core charge, the fewest pods
                pods = [_pods(view, gp) for _, gp in cands]
                near = [t for t in scored if t[0] <= scored[best][0] + POD_SCORE_TOLERANCE]
                charge = {t[2]: round(core_charge_s(view, p, cands[t[2]][1], [*running, *placed]), 6)
                          for t in near} if len(near) > 1 else {t[2]: 0.0 for t in near}
                best = min((charge[t[2]], pods[t[2]], *t) for t in near)[4]
            if best != 0:
                notes.append(f"{p.name}: {cands[0][0]} ({_layout(view, cands[0][1])[1].size} leaves, LP "
                             f"score {scored[0][0]:.3f}) -> {cands[best][0]} "
                             f"({_layout(view, cands[best][1])[1].size} leaves, LP score "
                             f"{scored[best][0]:.3f})" + _charge_note(charge, best))
        gp = cands[best][1]
        free[gp] = False
        placed.append((p, gp))
        out.append(gp)
    return BatchResult(placements=tuple(out), status="heuristic", notes=tuple(notes))
