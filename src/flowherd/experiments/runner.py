"""Run one scenario in-process and turn the simulator's records into metrics.

`run_scenario` simulates the scenario, then measures each started job alone on the idle fabric,
on the same GPUs, at ``collective`` fidelity (for the slowdowns), unless the simulator already
measured it (``phase`` fidelity does). Alone runs are cached by job shape and GPUs.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowherd.cluster.placement import PLACERS
from flowherd.cluster.simulate import ClusterResult, JobRecord, JobRequest, simulate_cluster
from flowherd.engine.network import use_network
from flowherd.experiments.metrics import cost_to_others, job_metrics, run_metrics, tenant_metrics
from flowherd.experiments.scenario import Scenario
from flowherd.workload import ChakraJob, InferenceJob, TrainingJob

log = logging.getLogger(__name__)

# Iterations an alone run simulates to measure a training job's steady iteration time.
_SOLO_ITERATIONS = 2


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunResult:
    """A finished run: the raw records and the metrics."""

    scenario: Scenario
    cluster: ClusterResult
    jobs: tuple[dict[str, Any], ...]
    tenants: tuple[dict[str, Any], ...]
    summary: dict[str, Any]
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of `flowherd simulate --json`."""
        return {
            "scenario": self.scenario.name,
            "seed": self.scenario.seed,
            "fidelity": self.scenario.fidelity,
            "placement": self.scenario.placement,
            "routing": self.scenario.routing,
            "controller": self.cluster.controller,
            "levers": self.scenario.levers.name,
            "horizon_s": self.scenario.horizon_s,
            "num_gpus": self.scenario.fabric.num_gpus,
            **self.summary,
            "jobs": list(self.jobs),
            "tenants": list(self.tenants),
            "num_events": self.cluster.num_events,
            "num_decisions": self.cluster.num_decisions,
            "decision_wall_s": self.cluster.decision_wall_s,
            "controller_issues": [
                {"kind": i.kind, "now_s": i.now_s, "job": i.job, "task": i.task, "message": i.message,
                 "action": i.action} for i in self.cluster.controller_issues],
            "refused_decisions": sum(i.refused for i in self.cluster.controller_issues),
            "stopped_at_s": self.cluster.stopped_at_s,
            "wall_s": self.wall_s,
        }


def _solo_key(spec: TrainingJob | InferenceJob | ChakraJob, gpus: tuple[int, ...]) -> tuple[Any, ...]:
    neutral = dataclasses.replace(spec, name="solo", tenant="solo", submit_s=0.0)
    if isinstance(spec, TrainingJob | ChakraJob):
        neutral = dataclasses.replace(neutral, iterations=1)
    return (repr(neutral), gpus)


def _alone(scenario: Scenario, spec: TrainingJob | InferenceJob | ChakraJob, rec: JobRecord) -> float | None:
    if isinstance(spec, TrainingJob | ChakraJob):
        short = dataclasses.replace(spec, name="solo", submit_s=0.0,
                                    iterations=min(spec.iterations, _SOLO_ITERATIONS))
    else:
        short = dataclasses.replace(spec, name="solo", submit_s=0.0)
    horizon = max(scenario.horizon_s, 1.0) * 10
    req = JobRequest(name="solo", tenant="solo", spec=short, submit_s=0.0)
    with use_network(scenario.network):  # alone on the same network model
        res = simulate_cluster(scenario.fabric, [req], placer="first-fit", fidelity="collective",
                               horizon_s=horizon, router=scenario.routing, seed=scenario.seed,
                               placements={"solo": rec.gpus})
    it = res.jobs[0].iteration_s
    if not len(it):
        return None
    # the last iteration is the steady one (the first may include pipeline warm-up effects)
    return float(it[-1]) if isinstance(spec, TrainingJob | ChakraJob) else float(it.mean())


def run_scenario(scenario: Scenario, *, progress: Callable[[float], None] | None = None,
                 solo: bool = True, plan: Any = None, controller: Any = None,
                 compare_none: bool = False, background_records: bool = False) -> RunResult:
    """Simulate `scenario` and compute its metrics (module docstring).

    Args:
        scenario: A validated scenario.
        progress: Called with the simulated time, seconds, as the run advances.
        solo: Measure each job alone for its slowdown (off: slowdowns are None).
        plan: A `flowherd.planning.plan.Plan` whose GPUs pin the jobs it names (and whose
            routes, if any, route their flows: `ExplicitRouter`). Without one, a
            placement method that only the planner knows (``milp``, ``heuristic``, ``topology``,
            ``hetero``, ``random``) plans the scenario first.
        controller: A controller object (`flowherd.cluster.control_api.Controller`) that overrides
            the scenario's ``controller``; None: the scenario's, by registry name or, for a path
            to a trained model (.zip), through `flowherd.control.make_controller`.
        compare_none: With a controller, also run the scenario without one (same seed, same
            background flows) and add ``cost_to_others`` to the summary
            (`flowherd.experiments.metrics.cost_to_others`).
        background_records: Keep every background flow's finish time in the cluster result
            (`flowherd.cluster.simulate.simulate_cluster`); without, a streaming summary of
            their FCTs (bounded memory). Telemetry with flows asks for them too.

    Raises:
        ConfigError: The run's estimated memory or events exceed the limits
            (`flowherd.experiments.cost.check`), before anything is built.
    """
    from flowherd.experiments import cost

    cost.check(cost.run_cost(scenario), f"scenario {scenario.name!r}")
    wall0 = time.perf_counter()
    requests = [JobRequest(name=j.name, tenant=j.tenant, spec=j, submit_s=j.submit_s) for j in scenario.jobs]
    placer, placements = scenario.placement, None
    if plan is None and placer not in PLACERS:
        from flowherd.planning.placers import PLANNERS
        from flowherd.planning.plan import make_plan

        if placer in PLANNERS:
            # the planner sees what `flowherd plan` gives it: the congestion target, the known
            # background and the routing the run uses
            plan = make_plan(scenario.fabric, scenario.jobs, method=placer, seed=scenario.seed,
                             max_utilization=scenario.max_utilization,
                             background=scenario.background, routing=scenario.routing,
                             pace=scenario.pace)
    router: Any = scenario.routing
    planned_start, pacing = None, None
    if plan is not None:
        placements, placer = plan.placements(), "first-fit"
        if set(placements) == {j.name for j in scenario.jobs}:  # the plan's order on every GPU
            planned_start = plan.planned_starts()
        if plan.routes:  # the plan's routes, the scenario's routing for every other flow
            from flowherd.planning.plan import routes_to_splits
            from flowherd.routing.policies import ExplicitRouter

            router = ExplicitRouter(scenario.fabric, routes_to_splits(plan.routes),
                                    fallback=scenario.routing, seed=scenario.seed)
        from flowherd.planning.pacing import plan_pacing

        pacing = plan_pacing(plan, scenario.fabric)  # the plan's rate caps (planner.pace), if any
    if controller is None and (scenario.controller != "none" or scenario.controller_params):
        from flowherd.control import make_controller

        controller = make_controller(scenario.controller, **scenario.controller_params)
    tel = scenario.telemetry  # link series and coflow records on the run's own grid (no other run)
    bg_records = bool(tel is not None and tel.flows)  # telemetry's flows hold the background's too
    extra = {} if tel is None else {"link_series": True, "coflow_records": tel.flows,
                                    "utilization_bin_s": tel.bin_s}
    with use_network(scenario.network):  # every engine of the run: the scenario's network model
        cluster = simulate_cluster(scenario.fabric, requests, placer=placer,
                                   fidelity=scenario.fidelity, horizon_s=scenario.horizon_s,
                                   router=router, background=scenario.background,
                                   seed=scenario.seed, progress=progress, placements=placements,
                                   planned_start=planned_start,
                                   controller=controller, on_controller_error=scenario.on_controller_error,
                                   levers=scenario.levers, pacing=pacing,
                                   background_records=background_records or bg_records, **extra)
    cache: dict[tuple[Any, ...], float | None] = {}
    jobs = []
    for spec, rec in zip(scenario.jobs, cluster.jobs, strict=True):
        solo_s = rec.solo_iteration_s
        if solo_s is None and solo and rec.start_s is not None and rec.gpus:
            key = _solo_key(spec, rec.gpus)
            if key not in cache:
                cache[key] = _alone(scenario, spec, rec)
            solo_s = cache[key]
        jobs.append(job_metrics(rec, solo_iteration_s=solo_s, horizon_s=scenario.horizon_s, spec=spec,
                                slo=scenario.slos.get(spec.name)))
    summary = run_metrics(cluster, jobs)
    for line in summary["warnings"]:
        log.warning("%s", line)
    tenants = tenant_metrics(jobs)
    if compare_none and controller is not None:
        free = run_scenario(dataclasses.replace(scenario, controller="none", controller_params={}), solo=solo,
                            plan=plan)
        summary["cost_to_others"] = cost_to_others(summary, tenants, free.summary, list(free.tenants))
    return RunResult(scenario=scenario, cluster=cluster, jobs=tuple(jobs),
                     tenants=tuple(tenants), summary=summary,
                     wall_s=time.perf_counter() - wall0)
