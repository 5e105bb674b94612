"""A plan (placement, rank mapping, start times, routes, predicted JCT) and the planning timeline.

`Plan` is a value that round-trips through JSON (`flowherd.planning.plan_value`, re-exported
here); ``flowherd simulate SCENARIO --plan PLAN.json`` pins every job to its planned GPUs and
keeps the plan's order of jobs on every GPU (`flowherd.cluster.simulate`, "Executing a plan"),
so predicted and simulated JCT can be compared.

`make_plan` runs the planner over time: whenever GPUs free up (at a predicted job end) or jobs
arrive, the longest run of queued jobs, in submission order, that fits in the free GPUs is handed
to the method as one batch (`flowherd.planning.placers.PLANNERS`); the method places them jointly
(MILP, heuristic) or one after the other (baseline placers). The heuristic, which knows the
arrivals, also places with the batch the jobs submitted within
`flowherd.planning.timeline.LOOKAHEAD_SHARE` of the batch's shortest run (started at their
submission). Run times follow the jobs' progress (a fluid model): whenever a job starts or ends,
the running jobs' rates are predicted again with the jobs running then
(`flowherd.planning.predict.evaluate`) and their ends move with the work they have left, so a
job slowed by later neighbours holds its GPUs as long as predicted, and the jobs pinned behind it
start when it ends, not when it was first predicted to. The plan's JCTs are predicted at the end
with the time overlaps of all jobs.

The schedule. The baseline placers and the MILP place; they do not schedule: their timeline is
the cluster's FIFO queue without backfilling (a job behind a head that does not fit waits). The
heuristic also decides when jobs start (the upper level's schedule): EASY backfilling (Lifka
1995; Mu'alem and Feitelson, IEEE TPDS 2001), the rule of production schedulers such as Slurm.
When the queue's head does not fit, it is promised the earliest time at which the predicted ends
of the running jobs free enough GPUs (its shadow time); a job behind it starts now if it fits
and either ends before the shadow time with `flowherd.planning.heuristic.OVERRUN_SLACK` of margin
on its predicted run, or takes only GPUs the head will not need then. So the head's promised
start is never later than FIFO's, unless a backfilled job overruns its prediction by more than
the margin; every job behind it that starts early cuts its own queueing. The queue's order is
least work first (``order="work"``): among the jobs submitted by now, the one of least GPUs x
least run time is the head (Smith's rule for the sum of completion times, here the order of the
relaxation `capacity_bound` solves exactly, where shortest remaining work first is optimal). In
submission order the head of a long queue is often a large job that every job behind it waits
for (EASY lets a job pass the head only if it ends before the head's promised start or fits
beside it); least work first starts the short, narrow jobs first. On the planner benchmark's
trace scenario (`benchmarks/planner.py --simulate --network roce`, 2 Philly slices x 5 windows
of 16 jobs) the network is 3-8 % of an iteration, every placer gives each window the same
leaves, and the queue (10-85 s per job on 9 of 10 windows) is the lever: in submission order
EASY gained 0.46 % over the topology placer; least work first 8.5 % (9 of 10 windows; the
topology placer with this schedule gains the same). The heuristic's plan of the embedded
default is the same in either order (placements, starts and routes). A job can wait behind a
stream of smaller ones (no aging): a deliberate choice for mean JCT, bounded on a finite plan.
Mean JCT drops when the queue is long and holds jobs of mixed sizes; on an uncongested cluster
the schedule is FIFO's. The simulator executes every plan alike (each GPU's planned order,
planned times not waited for), so a job of a FIFO plan whose GPUs happen to be free early
starts early too: the baseline placers get that much backfilling for free, which makes the
comparison below conservative.
``make_plan(..., backfill=True)`` gives a baseline placer the same schedule (the ablation that
separates what the schedule and what the placement gain: `benchmarks/planner.py --simulate`).
Measured there on the ideal network, before the congestion-free routing (mean JCT in
simulation): on the embedded default, where a burst of trace jobs asks for about three times
the cluster, the heuristic's plan beats the best baseline placer on
each of 5 seeds (the scenario's and 4 held-out background draws) by 3.42 +- 0.20 s (3.7 %),
almost all from the schedule (the topology placer with the same schedule is 0.2 % behind); on
the 300-job Philly replay it is 10.9 % ahead of the best baseline (topology), 6.4 % from the
placement (the topology placer with backfilling) and 3.0 % from the schedule (the heuristic's
placement with FIFO).

Congestion-free (``routes=True``, ``max_utilization``: `planner.max_utilization`). The lower
level routes the plan over time windows (`flowherd.planning.congestion.route_windows`): every
link's predicted load (the jobs running in the window at their predicted iteration rate, the
expected background) stays at or under the target where some routing can keep it there, and the
plan reports per link and window the load and the slack (``info["link_loads"]``) and the links
over the target with their excess (``info["congestion"]``). The heuristic is the joint method
(``joint``, the default with routes): its placement keeps every leaf's mean uplink load under
the target before it minimizes its cost (moving jobs), a start that would push a leaf over it
while running jobs will free room is shifted (``info["starts_held"]``), the routing LP chooses
among its best placements of each batch, and where the routes still leave avoidable links over
the target, restore rounds plan again with a tighter leaf guard; the plan kept is, among these
candidates and the sequential plan (placement, then routing), the one of least excess whose
predicted mean JCT is within `RESTORE_JCT_TOLERANCE` of the best (``info["congestion_restore"]``).
A link that no routing can avoid (a GPU's own NIC link) is reported, not fixed: only the job's
own traffic and the background load it.

Pacing (``pace``). The windows bound a link's mean load; within a window a collective's flows
still start at line rate and burst where they converge. With ``pace`` the plan also caps every
scale-out GPU pair of its training jobs at the rate the plan assumed for it
(`flowherd.planning.pacing`: each task's bottleneck at the target minus the expected background,
``info["pacing"]``), which the simulation applies as host pacers (`flowherd.cluster.pacing`).

The simulator as the evaluator of the heuristic (``check``, a `SimCheck`). The model is exact
about what placement changes structurally (servers, leaves, uplink load, queueing) but blind to
what the simulator adds on top: ECMP hash collisions, background flows on the NICs and uplinks,
and the queueing when a pinned job's GPUs are freed late. When the caller passes the
simulation settings, the heuristic (1) makes a few candidate plans (with and without the overrun
and known-background tie-breaks of `flowherd.planning.heuristic`, and with random tie-breaks),
simulates each, keeps the best; (2) then moves single jobs that span servers inside their leaf
to the servers meeting the least known background (same start, same per-server GPU counts, so
the model's prediction is unchanged), keeping a move only if the simulated mean JCT drops, until
``SimCheck.max_wall_s``. The plan's ``info["sim_check"]`` reports the simulated mean JCT next to
the predicted one. The simulation uses ``SimCheck.seed``: with the scenario's own seed the
planner knows the very background flows and hash draws the run will see, so the gain measured
on that seed is partly fitted to that realization; `benchmarks/planner.py --simulate` therefore
also reports every method's plan on held-out seeds. Measured on the default scenario
(ideal network; `benchmarks/planner.py --simulate --check` at commit d4e2916): on its own
seed the check takes the heuristic from 90.781 s (model alone) to 90.770 s (3 candidates, 3
moves kept, 152 s of simulation); on 4 held-out seeds its plan averages 89.926 s against the
model-alone plan's 89.922 s: what it fitted to the scenario's background does not carry over,
and the schedule, not the check, is what beats the baseline placers (module docstring, "The
schedule"). Without background (the trace-driven benchmark) the candidates simulate alike and
the check changes nothing.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.planning.batch import LeafCongestion
from flowherd.planning.congestion import (
    DEFAULT_MAX_UTILIZATION,
    LinkLoads,
    PlannedJob,
    check_max_utilization,
    leaf_background_bytes_per_s,
    route_windows,
    routes_to_splits,
)
from flowherd.planning.plan_value import JobPlan, Plan
from flowherd.planning.predict import JobProfile, evaluate, fabric_view, profile_job
from flowherd.planning.sim_check import SimCheck, check_in_simulator, known_background, simulated_mean_jct_s
from flowherd.planning.timeline import ORDERS, Congestion, run_timeline
from flowherd.workload.training import rank_to_gpu

# methods whose placement takes the routing LP's score (the joint upper level)
JOINT_METHODS = ("heuristic", "bilevel")

__all__ = ["JOINT_METHODS", "JobPlan", "Plan", "SimCheck", "capacity_bound", "make_plan", "plan_routes",
           "routes_to_splits", "simulated_mean_jct_s"]


def floor_iteration_s(view: Any, p: JobProfile) -> float:
    """The least iteration time any placement gives ``p`` (stretch 1, tightest spread it fits)."""
    if p.single_server_s is not None and p.world_size <= int(view.server_capacity.max()):
        return min(p.single_server_s, p.multi_server_s)
    return p.multi_server_s


def plan_routes(fabric: Fabric, jobs: Sequence[Any], placements: Mapping[str, Sequence[int]], *,
                time_limit_s: float | None = None) -> dict[str, list[tuple[tuple[int, ...], float]]]:
    """Routes for a placement from the lower level: every training job's scale-out traffic
    (`flowherd.planning.traffic.job_traffic`, bytes per second averaged over its iteration) routed
    by the min-max-utilization multi-commodity flow (`flowherd.planning.mcf`).

    A deliberate shortcut: all jobs' traffic is routed together, as if they all ran at once
    (conservative when they do not overlap in time).

    Returns:
        ``"src,dst"`` -> ``[(directed link ids, weight), ...]`` (for `routing.policies.ExplicitRouter`).
    """
    from flowherd.planning.mcf import route_min_max_utilization
    from flowherd.planning.traffic import TrafficMatrix, job_traffic
    from flowherd.workload.training import TrainingJob

    parts = []
    for j in jobs:
        if not isinstance(j, TrainingJob) or j.name not in placements:
            continue
        jt = job_traffic(j, placements[j.name], fabric)
        if jt.iteration_s > 0:
            parts.append(jt.network(fabric).scaled(1.0 / jt.iteration_s))
    if not parts:
        return {}
    demand = TrafficMatrix.concat(parts).aggregated()
    if demand.num_pairs == 0:
        return {}
    sol = route_min_max_utilization(fabric, demand, time_limit_s=time_limit_s)
    return {f"{a},{b}": [(tuple(int(x) for x in path), float(w)) for path, w in v]
            for (a, b), v in sol.splits().items()}


def make_plan(fabric: Fabric, jobs: Sequence[Any], *, method: str = "heuristic",
              time_limit_s: float | None = None, seed: int = 0, routes: bool = False,
              check: SimCheck | None = None, backfill: bool | None = None,
              max_utilization: float = DEFAULT_MAX_UTILIZATION, background: Any = None,
              joint: bool | None = None, window_s: float | None = None, routing: str = "ecmp",
              pace: bool = False, order: str | None = None, network: Any = None,
              migration_cost_per_worker_s: float | None = None) -> Plan:
    """Plan ``jobs`` on ``fabric`` with ``method`` (module docstring).

    Args:
        fabric: The fabric.
        jobs: `TrainingJob` / `InferenceJob` specs with unique names.
        method: A `flowherd.planning.placers.PLANNERS` name.
        time_limit_s: Time limit of the method (MILP, heuristic), seconds; None: its default.
        seed: Seed of the random choices.
        routes: Also compute routes with the lower level (`plan_routes`).
        check: ``heuristic``: simulate its best candidate plans with these settings and keep
            the one of least simulated mean JCT (module docstring); any method: simulate the
            final plan and put the estimate against the simulation in ``info["estimate"]``
            (`flowherd.planning.estimate.estimate_check`: per-link, per-window load error,
            median and p90, congestion seen, predicted vs simulated mean JCT). None: the model
            alone.
        backfill: Schedule with EASY backfilling (module docstring) instead of FIFO; None: the
            method's own schedule (backfilling for ``heuristic``, FIFO for the baseline placers
            and the MILP, which place and do not schedule).
        max_utilization: Target utilization of every link (`planner.max_utilization`, in
            (0, 1]): the routes keep each link's predicted load under it where feasible
            (`flowherd.planning.congestion`), and the joint heuristic's placement and schedule
            restore it where the routes cannot (module docstring, "Congestion-free").
        background: The scenario's `flowherd.cluster.simulate.BackgroundSpec` (its expected load
            counts on every link), or None.
        joint: ``heuristic`` only: place with the routing (the leaf guard, candidates scored by
            the routing LP, restore rounds); None: when ``routes``. False with ``routes`` is the
            sequential ablation (placement, then routing).
        window_s: Width of the routing LP's time windows, seconds (None: the span over 50).
        routing: The scenario's routing of the flows the plan does not route (the background):
            the profiles' background probe routes it so (`flowherd.planning.predict.
            background_penalty_s`); with "spray" the routes take spraying's even split where
            it is as good as the LP's optimum (`flowherd.planning.congestion.route_windows`,
            ``even_ties``).
        pace: Also cap every scale-out GPU pair of the training jobs at the rate the plan
            assumed (``info["pacing"]``, ``"src,dst"`` -> bytes per second;
            `flowherd.planning.pacing`), which the simulation applies as host pacers.
        order: The queue's order (`flowherd.planning.timeline.ORDERS`): "fifo" (submission) or
            "work" (least GPUs x least run time first; module docstring, "The schedule"); None:
            "work" with backfilling, else "fifo" (``info["order"]``).
        network: The scenario's network model (`flowherd.engine.network.NetworkConfig`): with a
            congestion model (roce, tcp) each job's background term is probed under it
            (`flowherd.planning.predict.background_penalty_s`), so its predicted cost (queueing,
            marks, DCQCN's cuts, PFC pauses) enters the predicted iteration times, hence the
            lower level's concurrent-traffic estimate and the upper level's scores and
            schedule; None (or ideal): the ideal network's loads model.
        migration_cost_per_worker_s: Job migration as a lever of the plan
            (`flowherd.planning.migration`): at every job start and end, MonkeyTree's ILP proposes
            moves of running jobs that defragment the leaves, made when the model predicts a gain
            over the stalls; each moved worker is down this many seconds (`planner.
            migration_cost_per_worker_s`, >= 0). None: no migration (``monkeytree`` always
            migrates, by MonkeyTree's rule, at MonkeyTree's 9.02 s unless given). The moves are in
            ``info["migrations"]``.

    Returns:
        The plan.

    Raises:
        InfeasibleError: a job that fits nowhere (more GPUs than the fabric has of its type).
        UnknownNameError: an unknown method.
    """
    from flowherd.planning.placers import PLANNERS

    planner = PLANNERS[method]()
    target = check_max_utilization(max_utilization)
    joint = (routes and method in JOINT_METHODS) if joint is None else bool(joint)
    if joint and method not in JOINT_METHODS:
        raise ConfigError(f"joint placement and routing is the methods' {', '.join(JOINT_METHODS)}, got "
                          f"method {method!r} (joint)")
    if time_limit_s is not None and not (isinstance(time_limit_s, int | float) and time_limit_s > 0):
        raise ConfigError(f"time limit must be a positive number of seconds, got {time_limit_s!r} "
                          "(--time-limit)")
    if check is not None and not isinstance(check, SimCheck):
        raise ConfigError(f"check must be a SimCheck or None, got {type(check).__name__} (check)")
    migration = None
    if migration_cost_per_worker_s is not None or method == "monkeytree":
        from flowherd.planning.migration import MONKEYTREE_COST_PER_WORKER_S, Migration, check_migration_cost

        cost = (MONKEYTREE_COST_PER_WORKER_S if migration_cost_per_worker_s is None
                else check_migration_cost(migration_cost_per_worker_s))
        migration = Migration(cost_per_worker_s=cost, cost_aware=method != "monkeytree")
    wall0, cpu0 = time.perf_counter(), time.process_time()
    clock = {"routing_s": 0.0}  # CPU seconds of the lower level's routing LP (`_route`)
    view = fabric_view(fabric)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"job names must be unique, got {dup!r} twice (jobs)")
    profiles = [profile_job(j, view, background, routing, network) for j in jobs]
    for p in profiles:
        planner.check(view, p)
    deadline = None if time_limit_s is None else wall0 + float(time_limit_s)
    slack_aware = method == "heuristic"
    bg = known_background(fabric, check) if check is not None and slack_aware else None
    backfill = method in JOINT_METHODS if backfill is None else bool(backfill)
    order = ("work" if backfill else "fifo") if order is None else order
    if order not in ORDERS:
        raise ConfigError(f"queue order must be one of {', '.join(ORDERS)}, got {order!r} (order)")
    guard = None
    if joint:
        leaf_bg = leaf_background_bytes_per_s(fabric, background)
        guard = Congestion(leaf=LeafCongestion(target=target, background_bytes_per_s=leaf_bg), fabric=fabric,
                           background=background, target=target, scores={})
    tl = run_timeline(planner, method, view, profiles, fabric.num_gpus, np.random.default_rng(seed),
                       deadline, slack_aware, background=bg, backfill=backfill, congestion=guard, order=order,
                       migration=migration)
    submit = np.array([p.submit_s for p in profiles])
    info: dict[str, Any] = {"num_gpus": fabric.num_gpus, "num_jobs": len(jobs), "seed": int(seed),
                            "schedule": "backfill" if backfill else "fifo", "order": order}
    if getattr(network, "model", "ideal") != "ideal":  # the profiles carry its cost
        info["network_cost"] = network.model
    loads = None
    if routes and jobs:
        tl, loads, info["congestion_restore"] = _route_and_restore(
            tl, planner, method, view, profiles, fabric, jobs, seed, deadline, slack_aware, bg, backfill,
            guard, target, background, window_s, routing, order, migration, clock)
    if check is not None and method == "heuristic" and jobs:
        tl, info["sim_check"] = check_in_simulator(tl, planner, method, view, profiles, fabric, jobs,
                                                    seed, deadline, check, bg, backfill, order)
    start, end, bounds, statuses = tl.start, tl.end, tl.bounds, tl.statuses
    # the objective is the planning model the methods optimize (run times predicted at the start,
    # with the jobs running then); the per-job predictions refine it with the time overlaps (of
    # every part of a migrated job: `flowherd.planning.migration.split_parts`)
    placements, final_it, final_jct = _final_prediction(jobs, tl, view, profiles)
    lb_jobs = np.array([p.fixed_duration_s if p.fixed_duration_s is not None
                        else p.iterations * floor_iteration_s(view, p) for p in profiles])
    objective = float(np.mean(end - submit)) if len(jobs) else 0.0
    lower = float(lb_jobs.mean()) if len(jobs) else 0.0
    if len(jobs):  # the queueing a burst of work cannot avoid
        lower = max(lower, capacity_bound(submit, lb_jobs * np.array([p.world_size for p in profiles]),
                                          fabric.num_gpus))
    if bounds:  # one batch held every job: the method's bound is a bound of the whole plan
        lower = max(lower, bounds[0] / len(jobs))
    lower = min(lower, objective)
    gap = (objective - lower) / objective if objective > 0 else 0.0
    if statuses and all(st == "optimal" for st in statuses):
        status = "optimal"
    elif "time_limit" in statuses:
        status = "time_limit"
    else:
        status = "heuristic" if method in ("heuristic", "milp", "bilevel") else "baseline"
    jp = tuple(JobPlan(name=p.name, gpus=tuple(int(x) for x in g),
                       rank_to_gpu=tuple(int(x) for x in rank_to_gpu(j, g, view.gpus_per_server,
                                                                     gpu_server=fabric.gpu_server)),
                       start_s=float(s), predicted_iteration_s=float(it), predicted_jct_s=float(c))
               for j, p, g, s, it, c in zip(jobs, profiles, placements, start, final_it, final_jct,
                                             strict=True))
    route_map = None
    if routes:
        route_map = {}
        if jobs and (loads is None or tl.gpus is not loads[2]):  # the check moved jobs: route again
            loads = _route(fabric, jobs, tl, view, profiles, target, background, window_s, routing,
                           clock)
        if loads is not None:
            route_map = {f"{a},{b}": [(tuple(int(x) for x in p), float(w)) for p, w in v]
                         for (a, b), v in loads[0].items()}
            info["congestion"] = loads[1].summary(fabric)
            info["link_loads"] = loads[1].to_dict()
    if pace and jobs:
        from flowherd.planning.pacing import pacing_caps
        from flowherd.routing.policies import ExplicitRouter

        rtr = ExplicitRouter(fabric, routes_to_splits(route_map), fallback="spray") if route_map else "spray"
        caps = pacing_caps(fabric, _planned_jobs(jobs, tl, view, profiles), router=rtr,
                           max_utilization=target, background=background)
        info["pacing"] = {f"{a},{b}": float(r) for (a, b), r in sorted(caps.items())}
    if tl.notes:
        info["placement_notes"] = list(tl.notes)
    if migration is not None:
        info["migration_cost_per_worker_s"] = migration.cost_per_worker_s
        info["migrations"] = [{"job": jobs[m.job].name, "time_s": float(m.time_s),
                               "from_gpus": [int(x) for x in m.old_gpus],
                               "to_gpus": [int(x) for x in m.new_gpus],
                               "moved_gpus": int(m.moved_gpus), "iterations_before": int(m.iterations_before),
                               "stall_s": float(m.stall_s)} for m in tl.moves]
    info["overrun_risk"] = float(tl.risk)
    info["starts_held"] = int(tl.held)
    # CPU seconds: the routing LP of the lower level (every routed candidate), the rest (placement,
    # schedule, the LP scores inside a joint placement, pacing)
    cpu = time.process_time() - cpu0
    info["cpu_s"] = {"total": cpu, "routing": clock["routing_s"], "placement": cpu - clock["routing_s"]}
    plan = Plan(method=method, jobs=jp, routes=route_map, objective=objective, lower_bound=lower, gap=gap,
                solve_s=time.perf_counter() - wall0, status=status, info=info)
    if check is not None and jobs:  # the estimate against the simulation (the plan's check)
        from flowherd.planning.estimate import estimate_check, simulate_plan

        sim = simulate_plan(fabric, jobs, plan, check)
        est = estimate_check(fabric, jobs, plan, sim, background=background, target=target)
        plan = dataclasses.replace(plan, info={**info, "estimate": est})
    return plan


def _parts(jobs: Sequence[Any], tl: Any, profiles: Sequence[JobProfile]) -> tuple[list, list, list, list]:
    """(part specs, part profiles, part GPUs, part starts) of the timeline's jobs: one part per
    job, more for a migrated one (`flowherd.planning.migration.split_parts`); the owner of each
    part is in its spec's name."""
    if not getattr(tl, "moves", ()):
        return list(jobs), list(profiles), list(tl.gpus), list(tl.start)
    from flowherd.planning.migration import split_parts

    parts = split_parts(jobs, tl.start, tl.gpus, tl.moves)
    specs = [spec for _, spec, _, _ in parts]
    profs = [dataclasses.replace(profiles[k], name=spec.name, iterations=int(spec.iterations),
                                 submit_s=float(spec.submit_s), job=spec) for k, spec, _, _ in parts]
    return specs, profs, [g for _, _, g, _ in parts], [s for _, _, _, s in parts]


def _final_prediction(jobs: Sequence[Any], tl: Any, view: Any, profiles: Sequence[JobProfile]
                      ) -> tuple[list, np.ndarray, np.ndarray]:
    """(each job's first GPUs, predicted iteration time there, predicted JCT) with the time
    overlaps of every part."""
    specs, profs, gpus, starts = _parts(jobs, tl, profiles)
    res = evaluate(view, profs, gpus, start_s=np.asarray(starts, dtype=np.float64))
    if len(specs) == len(jobs):
        return list(gpus), np.asarray(res.iteration_s), np.asarray(res.jct_s)
    first: dict[str, int] = {}
    last_end: dict[str, float] = {}
    for i, (spec, p) in enumerate(zip(specs, profs, strict=True)):
        owner = spec.name.split("~", 1)[0]
        first.setdefault(owner, i)
        last_end[owner] = max(last_end.get(owner, -math.inf), float(res.jct_s[i]) + p.submit_s)
    idx = [first[j.name] for j in jobs]
    return ([gpus[i] for i in idx], np.asarray(res.iteration_s)[idx],
            np.array([last_end[j.name] - j.submit_s for j in jobs]))


def _planned_jobs(jobs: Sequence[Any], tl: Any, view: Any,
                  profiles: Sequence[JobProfile]) -> list[PlannedJob]:
    """The timeline's jobs (the parts of a migrated one) as the lower level sees them
    (iteration times predicted with the time overlaps of all jobs)."""
    specs, profs, gpus, starts = _parts(jobs, tl, profiles)
    res = evaluate(view, profs, gpus, start_s=np.asarray(starts, dtype=np.float64))
    return [PlannedJob(job=j, gpus=tuple(int(x) for x in g), start_s=float(s), iteration_s=float(it))
            for j, g, s, it in zip(specs, gpus, starts, res.iteration_s, strict=True)]


def _route(fabric: Fabric, jobs: Sequence[Any], tl: Any, view: Any, profiles: Sequence[JobProfile],
           target: float, background: Any, window_s: float | None, routing: str = "ecmp",
           clock: dict | None = None, memo: dict | None = None) -> tuple[dict, LinkLoads, Any]:
    """The routing LP of the timeline's plan; ``memo``: the LP's answers by the planned jobs (the
    same jobs on the same GPUs at the same starts and rates route the same: a restore round that
    plans what an earlier candidate planned is not routed again)."""
    # ties to spraying's even split where the scenario sprays (flowherd.planning.congestion)
    c0 = time.process_time()
    planned = _planned_jobs(jobs, tl, view, profiles)
    key = tuple((getattr(j.job, "name", None), getattr(j.job, "iterations", None), j.gpus, j.start_s,
                 j.iteration_s) for j in planned)
    hit = None if memo is None else memo.get(key)
    if hit is None:
        hit = route_windows(fabric, planned, target=target, background=background, window_s=window_s,
                            even_ties=routing == "spray")
        if memo is not None:
            memo[key] = hit
    splits, loads = hit
    if clock is not None:
        clock["routing_s"] += time.process_time() - c0
    return splits, loads, tl.gpus


# Restore rounds of the joint heuristic: each tightens the leaf guard by the largest excess the
# routes left on a link they could avoid, plus this margin. A restored plan is kept only if its
# predicted mean JCT is within `RESTORE_JCT_TOLERANCE` of the best candidate's: congestion-free
# at no cost to JCT.
_RESTORE_ROUNDS = 2
_RESTORE_MARGIN = 0.02
RESTORE_JCT_TOLERANCE = 0.01


def _route_and_restore(tl: Any, planner: Any, method: str, view: Any, profiles: Sequence[JobProfile],
                       fabric: Fabric, jobs: Sequence[Any], seed: int, deadline: float | None,
                       slack_aware: bool, bg: Any, backfill: bool, guard: Congestion | None, target: float,
                       background: Any, window_s: float | None, routing: str = "ecmp", order: str = "fifo",
                       migration: Any = None, clock: dict | None = None
                       ) -> tuple[Any, tuple, dict[str, Any]]:
    """Route the timeline's plan (`flowherd.planning.congestion.route_windows`). For the joint
    heuristic, while the routes leave links over the target that a routing could avoid, plan
    again with a tighter leaf guard (moving jobs, shifting starts), and also without the guard
    (the routing LP still choosing among the best placements); keep, among the candidates whose
    predicted mean JCT is within `RESTORE_JCT_TOLERANCE` of the best, the one of least
    time-weighted excess on avoidable links. The sequential plan (placement without the
    routing) is always a candidate."""
    def excess(ll: LinkLoads) -> float:
        over = np.clip(ll.load - ll.target, 0.0, None) * ll.routable[:, None]
        return float((over * np.diff(ll.edges_s)[None, :]).sum())

    submit = np.array([p.submit_s for p in profiles])

    routed: dict = {}

    def candidate(t: Any, leaf_target: float) -> dict[str, Any]:
        r = _route(fabric, jobs, t, view, profiles, target, background, window_s, routing, clock, routed)
        return {"tl": t, "routes": r, "excess_s": excess(r[1]), "leaf_target": leaf_target,
                "objective_s": float(np.mean(t.end - submit))}

    def rerun(leaf_target: float) -> Any:
        g2 = dataclasses.replace(guard, leaf=dataclasses.replace(guard.leaf, target=leaf_target))
        return run_timeline(planner, method, view, profiles, fabric.num_gpus, np.random.default_rng(seed),
                            deadline, slack_aware, background=bg, backfill=backfill, congestion=g2,
                            order=order, migration=migration)

    cands = [candidate(tl, target if guard is not None else math.inf)]
    if guard is not None:  # the sequential plan is a candidate: the joint one is never worse
        cands.append(candidate(run_timeline(planner, method, view, profiles, fabric.num_gpus,
                                            np.random.default_rng(seed), deadline, slack_aware,
                                            background=bg, backfill=backfill, order=order,
                                            migration=migration), math.inf))
    if guard is not None and min(c["excess_s"] for c in cands) > 0:
        cands.append(candidate(rerun(1e9), math.inf))  # the LP's choice without the leaf guard
        leaf_target = target
        for _ in range(_RESTORE_ROUNDS):
            worst = cands[0]["routes"][1].violations(fabric)
            routable = [v for v in worst if v["routable"]] or worst
            if not routable:
                break
            leaf_target = max(0.05, leaf_target - routable[0]["excess"] - _RESTORE_MARGIN)
            cands.append(candidate(rerun(leaf_target), leaf_target))
            if cands[-1]["excess_s"] <= 0:
                break
    least = min(c["objective_s"] for c in cands)
    ok = [c for c in cands if c["objective_s"] <= least * (1 + RESTORE_JCT_TOLERANCE) + 1e-12]
    best = min(ok, key=lambda c: (c["excess_s"], c["objective_s"]))
    return best["tl"], best["routes"], {
        "excess_s": best["excess_s"], "chosen": next(i for i, c in enumerate(cands) if c is best),
        "candidates": [{k: c[k] for k in ("leaf_target", "excess_s", "objective_s")} for c in cands]}


def capacity_bound(submit_s: np.ndarray, work_gpu_s: np.ndarray, num_gpus: int) -> float:
    """A lower bound on the mean JCT of jobs that need ``work_gpu_s`` GPU-seconds each, submitted
    at ``submit_s``, on ``num_gpus`` GPUs, seconds.

    Relaxation: the cluster as one machine that runs ``num_gpus`` GPU-seconds per second, any job
    at any rate, preemptively (every real schedule is one of these: a job on n GPUs for p seconds
    uses n p of its GPU-seconds). For the sum of completion times on one machine with release dates
    and preemption, shortest remaining processing time first is optimal (Schrage, Oper. Res. 1968;
    the 1|r_j, pmtn|sum C_j result), so its mean JCT bounds every schedule's from below.
    """
    n = len(submit_s)
    if n == 0:
        return 0.0
    rate = float(num_gpus)
    order = np.argsort(submit_s, kind="stable")
    rel = np.asarray(submit_s, dtype=np.float64)[order]
    work = np.asarray(work_gpu_s, dtype=np.float64)[order]
    heap: list[tuple[float, int]] = []
    t, k, total = 0.0, 0, 0.0
    while k < n or heap:
        if not heap:
            t = max(t, rel[k])
        while k < n and rel[k] <= t:
            heapq.heappush(heap, (work[k], k))
            k += 1
        rem, j = heapq.heappop(heap)
        nxt = rel[k] if k < n else math.inf
        if t + rem / rate <= nxt:  # j finishes before the next release
            t += rem / rate
            total += t - rel[j]
        else:  # run j until the next release, then choose again
            heapq.heappush(heap, (rem - (nxt - t) * rate, j))
            t = nxt
    return total / n
