"""The plan's estimate against the simulation: per link and window, predicted vs measured load
and the congestion the network model saw; predicted vs simulated mean JCT.

`simulate_plan` runs a plan in `flowherd.cluster.simulate.simulate_cluster` (pinned GPUs, the plan's
order on every GPU, its routes through `ExplicitRouter` with the scenario's routing for every
other flow) under `SimCheck`'s network model, with the per-link, per-bin record on
(``link_series``). `estimate_check` compares, on the simulator's utilization bins, the plan's
predicted load of every network link (`flowherd.planning.congestion.predict_link_loads`: the
plan's routes, or spraying, ECMP's expectation, when it has none) with the bytes the link
carried over its capacity and the bin width, and sums what the network model reports in the
same cells: ECN-marked bytes, dropped bytes and paused bytes (pause time times the link's
capacity: what it could have sent meanwhile). The error is summarized over the cells where
either load is at least `ACTIVE_LOAD` (the rest are idle links both agree on), in points of
utilization (``|predicted - simulated|``), median and 90th percentile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.fabric.core import Fabric
from flowherd.planning.congestion import DEFAULT_MAX_UTILIZATION, PlannedJob, predict_link_loads
from flowherd.planning.sim_check import SimCheck

__all__ = ["ACTIVE_LOAD", "TIERS", "PlanSimulation", "estimate_check", "migrated_parts", "predicted_as_run",
           "run_penalties_s", "simulate_plan"]

ACTIVE_LOAD = 0.01


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PlanSimulation:
    """A plan run in the simulator: the raw records and the mean JCT (censored at the horizon)."""

    cluster: Any
    mean_jct_s: float
    wall_s: float
    cpu_s: float = math.nan


def _router(fabric: Fabric, plan: Any, check: SimCheck) -> Any:
    if not plan.routes:
        return check.routing
    from flowherd.planning.congestion import routes_to_splits
    from flowherd.routing.policies import ExplicitRouter

    return ExplicitRouter(fabric, routes_to_splits(plan.routes), fallback=check.routing, seed=check.seed)


def simulate_plan(fabric: Fabric, jobs: Sequence[Any], plan: Any, check: SimCheck, *,
                  controller: Any = None, levers: Any = None) -> PlanSimulation:
    """Run ``plan`` in the cluster simulator with ``check``'s settings (module docstring);
    ``controller`` under the grant ``levers`` (`flowherd.cluster.control_types.levers_from`; None:
    ``buffer``): without ``paths`` a controller's path choices are refused and every flow keeps
    the plan's route."""
    import time

    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.engine.network import use_network
    from flowherd.planning.pacing import plan_pacing

    t0, c0 = time.perf_counter(), time.process_time()
    moved = bool((plan.info or {}).get("migrations"))
    run_jobs, run_plan = migrated_parts(jobs, plan) if moved else (list(jobs), plan)
    reqs = [JobRequest(name=j.name, tenant=getattr(j, "tenant", "default"), spec=j, submit_s=j.submit_s)
            for j in run_jobs]
    ctx = contextlib.nullcontext() if check.network is None else use_network(check.network)
    with ctx:
        res = simulate_cluster(fabric, reqs, placer="first-fit", fidelity=check.fidelity,
                               horizon_s=check.horizon_s, router=_router(fabric, plan, check),
                               background=check.background, seed=check.seed,
                               placements=run_plan.placements(), planned_start=run_plan.planned_starts(),
                               link_series=True, controller=controller,
                               levers=levers, pacing=plan_pacing(plan, fabric))  # the plan's caps, paced
    if moved:  # a job's JCT: its last part's end less its submission
        from flowherd.planning.migration import merged_jct_s

        jct = merged_jct_s(jobs, res.jobs, res.horizon_s)
    else:
        jct = res.censored_jct_s()
    return PlanSimulation(cluster=res, mean_jct_s=float(jct.mean()) if jct.size else 0.0,
                          wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)


def migrated_parts(jobs: Sequence[Any], plan: Any) -> tuple[list[Any], Any]:
    """(the jobs, the plan) as the simulator runs a plan with migrations (``info["migrations"]``):
    a moved job's parts (`flowherd.planning.migration.split_parts`) as jobs of their own, pinned to
    their GPUs, each part after the first planned at its move's end; in the plan's order on
    every GPU, so a part starts once the part before it has left the GPUs they share."""
    from flowherd.planning.migration import Move, split_parts

    index = {j.name: k for k, j in enumerate(jobs)}
    by = {j.name: j for j in plan.jobs}
    moves = [Move(job=index[m["job"]], time_s=float(m["time_s"]),
                  old_gpus=np.asarray(m["from_gpus"], dtype=np.int64),
                  new_gpus=np.asarray(m["to_gpus"], dtype=np.int64),
                  moved_gpus=int(m["moved_gpus"]), iterations_before=int(m["iterations_before"]),
                  stall_s=float(m["stall_s"])) for m in plan.info["migrations"]]
    parts = split_parts(jobs, [by[j.name].start_s for j in jobs], [by[j.name].gpus for j in jobs], moves)
    run_jobs, plans = [], []
    for k, spec, g, start in parts:
        jp = by[jobs[k].name]
        run_jobs.append(spec)
        plans.append(dataclasses.replace(jp, name=spec.name, gpus=tuple(int(x) for x in g),
                                         start_s=float(start)))
    return run_jobs, dataclasses.replace(plan, jobs=tuple(plans))


def _planned(jobs: Sequence[Any], plan: Any) -> list[PlannedJob]:
    by = {j.name: j for j in plan.jobs}
    return [PlannedJob(job=j, gpus=by[j.name].gpus, start_s=by[j.name].start_s,
                       iteration_s=by[j.name].predicted_iteration_s) for j in jobs if j.name in by]


# each job's probe (`run_penalties_s`): at least this many iterations and seconds of simulated time
_PROBE_ITERATIONS = 8
_PROBE_S = 8.0


def run_penalties_s(fabric: Fabric, jobs: Sequence[Any], plan: Any, *, background: Any = None,
                    routing: str = "ecmp", network: Any = None, fidelity: str = "collective",
                    seed: int = 0) -> dict[str, float]:
    """Per training job of ``plan`` across servers: the extra iteration time, seconds, of the
    job run as the plan runs it (alone, pinned to its planned GPUs, the plan's routes, its host
    pacers) among ``background`` under ``network`` at ``fidelity``, over the same run alone on
    the ideal network without pacers (what the loads model reproduces).

    The loads model (`flowherd.planning.predict`) is the ideal network's max-min; its
    background term is measured on the ideal network on canonical servers. A congestion model
    adds to a job what max-min does not: queueing, ECN marks and DCQCN's cuts below the fair
    share, PFC pauses where its own flows or the background's overfill a port. How much depends
    on the ports its flows share, so it is measured on the plan's own placement, routes and
    caps, once per job (a background drawn from ``seed``, not a scenario's seed: the planner
    knows the background's statistics, not its flows), for at least `_PROBE_S` seconds.
    Measured on the embedded default's two-leaf 24-GPU job under ``roce`` (phase fidelity, the
    heuristic's routes): 0.2414 s per iteration alone on the ideal network (the model: 0.2385),
    0.2626 alone under ``roce``; among the background 0.2963 ideal, 0.3085 ``roce``. On the
    canonical servers with even splits over every shortest path the ``roce`` penalty is
    0.092-0.100 s (4 draws), not the plan's 0.067: the ports a job's splits share decide it.
    """
    import contextlib

    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.engine.network import load_network, use_network
    from flowherd.planning.pacing import plan_pacing
    from flowherd.workload.training import TrainingJob

    by = {j.name: j for j in plan.jobs}
    router: Any = routing
    if plan.routes:
        from flowherd.planning.congestion import routes_to_splits
        from flowherd.routing.policies import ExplicitRouter

        router = ExplicitRouter(fabric, routes_to_splits(plan.routes), fallback=routing, seed=seed)
    pacing = plan_pacing(plan, fabric)
    server = np.asarray(fabric.gpu_server)
    out: dict[str, float] = {}
    for j in jobs:
        jp = by.get(j.name)
        if not isinstance(j, TrainingJob) or jp is None or np.unique(server[list(jp.gpus)]).size <= 1:
            continue
        it = max(float(jp.predicted_iteration_s), 1e-6)
        iters = max(_PROBE_ITERATIONS, math.ceil(_PROBE_S / it))
        probe = dataclasses.replace(j, iterations=iters, submit_s=0.0)
        means = []
        # the reference is what the loads model reproduces: the ideal network, no background, no
        # pacers; the run as planned has all three (a pacer's cost is the model's to miss too)
        for bg, net, pac in ((None, load_network("ideal"), None), (background, network, pacing)):
            ctx = contextlib.nullcontext() if net is None else use_network(net)
            req = JobRequest(name=j.name, tenant="probe", spec=probe, submit_s=0.0)
            with ctx:
                res = simulate_cluster(fabric, [req], fidelity=fidelity, horizon_s=4.0 * iters * it,
                                       router=router, background=bg, seed=seed,
                                       placements={j.name: tuple(jp.gpus)}, pacing=pac)
            its = np.asarray(res.jobs[0].iteration_s, dtype=np.float64)
            means.append(float(its.mean()) if its.size else 0.0)
        out[j.name] = max(0.0, means[1] - means[0])
    return out


def predicted_as_run(fabric: Fabric, jobs: Sequence[Any], plan: Any, *, background: Any = None,
                     routing: str = "ecmp", penalties_s: Mapping[str, float] | None = None,
                     rounds: int = 10) -> np.ndarray:
    """The planner's model's JCT of each job of ``plan`` as the simulator executes the plan,
    seconds (``float64[J]``, in ``jobs`` order).

    The simulator keeps the plan's placements and its order of jobs on every GPU, not its
    times: a job starts when it is submitted and the jobs before it on its GPUs have ended. So
    the run times (`flowherd.planning.predict.evaluate`, with the time overlaps) and the starts
    are solved together, by fixed-point rounds from the planned starts. ``penalties_s``
    (`run_penalties_s`) replaces a job's background term (the ideal network's, on canonical
    servers) by the one measured on its own run under the scenario's network model; None: the
    planner's own model (its prediction, with the starts as run).
    """
    from flowherd.planning.predict import evaluate, fabric_view, profile_job

    view = fabric_view(fabric)
    by = {j.name: j for j in plan.jobs}
    profiles = [profile_job(j, view, background, routing) for j in jobs]
    if penalties_s:
        profiles = [dataclasses.replace(p, background_s=float(penalties_s[j.name])) if j.name in penalties_s
                    else p for j, p in zip(jobs, profiles, strict=True)]
    place = [np.asarray(by[j.name].gpus, dtype=np.int64) for j in jobs]
    submit = np.array([float(j.submit_s) for j in jobs])
    start = np.array([float(by[j.name].start_s) for j in jobs])
    order = np.argsort(start, kind="stable")  # the plan's order on every GPU
    for _ in range(rounds):
        dur = evaluate(view, profiles, place, start_s=start).duration_s
        free_at = np.full(fabric.num_gpus, -math.inf)
        new = np.empty_like(start)
        for j in order.tolist():
            new[j] = max(submit[j], float(free_at[place[j]].max(initial=-math.inf)))
            free_at[place[j]] = new[j] + dur[j]
        done = np.allclose(new, start, rtol=0.0, atol=1e-9)
        start = new
        if done:
            break
    return start - submit + evaluate(view, profiles, place, start_s=start).duration_s


TIERS = ("nic", "leaf-up", "spine-down")


def _link_tier(fabric: Fabric, links: np.ndarray) -> np.ndarray:
    """Each network link's tier: "nic" (a NIC's link to or from its leaf), "leaf-up" (towards a
    higher tier), "spine-down" (towards a lower one)."""
    tier = np.asarray(fabric.node_tier)
    a = tier[np.asarray(fabric.link_src)[links]]
    b = tier[np.asarray(fabric.link_dst)[links]]
    return np.where((a <= 1) | (b <= 1), "nic", np.where(b > a, "leaf-up", "spine-down"))


def _jobs_per_cell(fabric: Fabric, planned: Sequence[PlannedJob], router: Any, edges: np.ndarray,
                   links: np.ndarray) -> np.ndarray:
    """``int64[K, W]``: how many jobs' predicted traffic reaches `ACTIVE_LOAD` of each link in
    each window (the background not counted)."""
    count = np.zeros((links.size, edges.size - 1), dtype=np.int64)
    for pj in planned:
        one = predict_link_loads(fabric, [pj], router=router, edges_s=edges)
        row = {int(k): i for i, k in enumerate(one.links.tolist())}
        idx = np.array([row[int(k)] for k in links.tolist()])
        count += one.load[idx] >= ACTIVE_LOAD
    return count


def estimate_check(fabric: Fabric, jobs: Sequence[Any], plan: Any, sim: PlanSimulation, *,
                   background: Any = None, target: float | None = None) -> dict[str, Any]:
    """Predicted vs simulated per-link, per-window load and the congestion seen (module docstring).

    Returns:
        A JSON-able dict: ``load_error_median`` and ``load_error_p90`` (points of utilization
        over the active cells), ``active_cells``, predicted and simulated network bytes,
        ``marked_bytes``, ``dropped_bytes``, ``paused_bytes`` and their sum
        ``congested_bytes``, the same for the cells predicted over the target, for the cells
        one job alone was predicted on (``congested_bytes_one_job``) and per link tier
        (``congested_bytes_by_tier``, `TIERS`), the predicted
        and simulated mean JCT and their relative difference.
    """
    res = sim.cluster
    edges = np.asarray(res.util_bin_edges_s, dtype=np.float64)
    if target is None:
        target = float((plan.info.get("congestion") or {}).get("target", DEFAULT_MAX_UTILIZATION))
    if plan.routes:
        from flowherd.planning.congestion import routes_to_splits
        from flowherd.routing.policies import ExplicitRouter

        router: Any = ExplicitRouter(fabric, routes_to_splits(plan.routes), fallback="spray")
    else:
        router = "spray"  # ECMP's expectation
    pred = predict_link_loads(fabric, _planned(jobs, plan), router=router, background=background,
                              target=target, edges_s=edges)
    links = pred.links
    cap = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)[links]
    width = np.diff(edges)
    nb = width.size
    simu = res.link_bin_bytes[links, :nb] / (cap[:, None] * np.maximum(width[None, :], 1e-12))
    p = pred.load[:, :nb]
    active = (p >= ACTIVE_LOAD) | (simu >= ACTIVE_LOAD)
    err = np.abs(p - simu)[active]

    def cells(a: np.ndarray | None, scale: np.ndarray | None = None) -> np.ndarray:
        if a is None:
            return np.zeros_like(p)
        x = a[links, :nb]
        return x * scale[:, None] if scale is not None else x

    marked = cells(res.link_bin_marked_bytes)
    dropped = cells(res.link_bin_drop_bytes)
    paused = cells(res.link_bin_pause_s, cap)
    congested = marked + dropped + paused
    over = p > target + 1e-9
    sharing = _jobs_per_cell(fabric, _planned(jobs, plan), router, edges, links)[:, :nb]
    tier = _link_tier(fabric, links)
    pred_jct = float(plan.predicted_mean_jct_s)
    return {
        "load_error_median": float(np.median(err)) if err.size else 0.0,
        "load_error_p90": float(np.quantile(err, 0.9)) if err.size else 0.0,
        "active_cells": int(active.sum()),
        "predicted_bytes": float((p * cap[:, None] * width[None, :]).sum()),
        "simulated_bytes": float(res.link_bin_bytes[links, :nb].sum()),
        "marked_bytes": float(marked.sum()), "dropped_bytes": float(dropped.sum()),
        "paused_bytes": float(paused.sum()), "congested_bytes": float(congested.sum()),
        "congested_bytes_where_predicted_over": float(congested[over].sum()),
        # where no schedule or placement of other jobs helps: the cells only one job's traffic
        # (and the background) was predicted on; per tier of the link
        "congested_bytes_one_job": float(congested[sharing <= 1].sum()),
        "congested_bytes_by_tier": {t: float(congested[tier == t].sum()) for t in TIERS},
        "cells_predicted_over": int(over.sum()),
        "simulated_max_load": float(simu.max()) if simu.size else 0.0,
        "predicted_mean_jct_s": pred_jct, "simulated_mean_jct_s": sim.mean_jct_s,
        "jct_error": (pred_jct / sim.mean_jct_s - 1.0) if sim.mean_jct_s > 0 else math.nan,
    }
