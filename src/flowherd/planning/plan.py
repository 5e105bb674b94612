"""A plan (placement, rank mapping, start times, routes, predicted JCT) and the planning timeline.

`Plan` is a value that round-trips through JSON; ``flowherd simulate SCENARIO --plan PLAN.json``
pins every job to its planned GPUs and keeps the plan's order of jobs on every GPU
(`flowherd.sim.cluster`, "Executing a plan"), so predicted and simulated JCT can be compared.

`make_plan` runs the planner over time: whenever GPUs free up (at a predicted job end) or jobs
arrive, the longest run of queued jobs, in submission order, that fits in the free GPUs is handed
to the method as one batch (`flowherd.planning.placers.PLANNERS`); the method places them jointly
(MILP, heuristic) or one after the other (baseline placers). A job's run time is predicted when it
starts, with the jobs running then (`flowherd.planning.predict.evaluate`); the plan's JCTs are
predicted at the end with the time overlaps of all jobs.

The schedule. The baseline placers and the MILP place; they do not schedule: their timeline is
the cluster's FIFO queue without backfilling (a job behind a head that does not fit waits). The
heuristic also decides when jobs start (the upper level's schedule): EASY backfilling (Lifka
1995; Mu'alem and Feitelson, IEEE TPDS 2001), the rule of production schedulers such as Slurm.
When the queue's head does not fit, it is promised the earliest time at which the predicted ends
of the running jobs free enough GPUs (its shadow time); a job behind it starts now if it fits
and either ends before the shadow time with `flowherd.planning.heuristic.OVERRUN_SLACK` of margin
on its predicted run, or takes only GPUs the head will not need then. So the head's promised
start is never later than FIFO's, unless a backfilled job overruns its prediction by more than
the margin; every job behind it that starts early cuts its own queueing. Mean JCT drops when the
queue is long and holds jobs of mixed sizes; on an uncongested cluster the schedule is FIFO's.
The simulator executes every plan alike (each GPU's planned order, planned times not waited
for), so a job of a FIFO plan whose GPUs happen to be free early starts early too: the baseline
placers get that much backfilling for free, which makes the comparison below conservative.
``make_plan(..., backfill=True)`` gives a baseline placer the same schedule (the ablation that
separates what the schedule and what the placement gain: `benchmarks/planner.py --simulate`).
Measured there (mean JCT in simulation): on the embedded default, where a burst of trace jobs
asks for about three times the cluster, the heuristic's plan beats the best baseline placer on
each of 5 seeds (the scenario's and 4 held-out background draws) by 3.42 +- 0.20 s (3.7 %),
almost all from the schedule (the topology placer with the same schedule is 0.2 % behind); on
the 300-job Philly replay it is 10.9 % ahead of the best baseline (topology), 6.4 % from the
placement (the topology placer with backfilling) and 3.0 % from the schedule (the heuristic's
placement with FIFO).

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
(`benchmarks/planner.py --simulate --check`): on its own seed the check takes the heuristic from
90.781 s (model alone) to 90.770 s (3 candidates, 3 moves kept, 152 s of simulation); on 4
held-out seeds its plan averages 89.926 s against the model-alone plan's 89.922 s: what it fitted
to the scenario's background does not carry over, and the schedule, not the check, is what
beats the baseline placers (module docstring, "The schedule"). Without background (the
trace-driven benchmark) the candidates simulate alike and the check changes nothing.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flowherd.errors import ConfigError, InfeasibleError
from flowherd.fabric.core import Fabric
from flowherd.planning.predict import JobProfile, evaluate, fabric_view, profile_job
from flowherd.workload.training import rank_to_gpu

__all__ = ["JobPlan", "Plan", "SimCheck", "capacity_bound", "make_plan", "plan_routes", "routes_to_splits",
           "simulated_mean_jct_s"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlan:
    """One job of a plan.

    Attributes:
        name: Job name.
        gpus: GPU ids, ascending.
        rank_to_gpu: ``rank_to_gpu[r]`` is the GPU of rank r.
        start_s: Planned start, seconds.
        predicted_iteration_s: Predicted iteration time (inference: serving window), seconds.
        predicted_jct_s: Predicted JCT (queueing + run time), seconds.
    """

    name: str
    gpus: tuple[int, ...]
    rank_to_gpu: tuple[int, ...]
    start_s: float
    predicted_iteration_s: float
    predicted_jct_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The output of the planner.

    Attributes:
        method: Planner name (`flowherd.planning.placers.PLANNERS`).
        jobs: One entry per job, in submission order.
        routes: Per GPU pair ``"src,dst"`` a list of ``(directed link ids, weight)`` splits, or
            None (the simulator's router routes).
        objective: Mean JCT under the planning model the methods optimize (each job's run time
            predicted when it starts, with the jobs running then), seconds. The jobs'
            ``predicted_jct_s`` refine it with the time overlaps of all jobs
            (`predicted_mean_jct_s`).
        lower_bound: A proven lower bound on the objective under the model, seconds.
        gap: ``(objective - lower_bound) / objective`` (0 when proven optimal).
        solve_s: Wall-clock planning time, seconds.
        status: "optimal" (every batch solved to optimality), "time_limit", "heuristic" or
            "baseline".
        info: Free-form facts of the run (fabric and instance sizes, seed).
    """

    method: str
    jobs: tuple[JobPlan, ...]
    routes: Mapping[str, Sequence[tuple[Sequence[int], float]]] | None = None
    objective: float
    lower_bound: float
    gap: float
    solve_s: float
    status: str = "baseline"
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def predicted_mean_jct_s(self) -> float:
        """Mean predicted JCT, seconds."""
        return float(np.mean([j.predicted_jct_s for j in self.jobs])) if self.jobs else 0.0

    def placements(self) -> dict[str, tuple[int, ...]]:
        """Job name -> GPU ids (for ``simulate_cluster(placements=...)``)."""
        return {j.name: j.gpus for j in self.jobs}

    def planned_starts(self) -> dict[str, float]:
        """Job name -> planned start, seconds (for ``simulate_cluster(planned_start=...)``, which
        then keeps the plan's order of jobs on every GPU)."""
        return {j.name: j.start_s for j in self.jobs}

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (`to_json`)."""
        return {
            "method": self.method, "status": self.status, "objective": self.objective,
            "lower_bound": self.lower_bound, "gap": self.gap, "solve_s": self.solve_s,
            "predicted_mean_jct_s": self.predicted_mean_jct_s,
            "jobs": [{"name": j.name, "gpus": list(j.gpus), "rank_to_gpu": list(j.rank_to_gpu),
                      "start_s": j.start_s, "predicted_iteration_s": j.predicted_iteration_s,
                      "predicted_jct_s": j.predicted_jct_s} for j in self.jobs],
            "routes": None if self.routes is None else {
                k: [[list(map(int, p)), float(w)] for p, w in v] for k, v in self.routes.items()},
            "info": dict(self.info),
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Plan:
        """Read a plan from its JSON object; a missing or malformed field is a `ConfigError`."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a plan must be a JSON object, got {type(data).__name__} (plan)")
        for key in ("method", "objective", "lower_bound", "gap", "solve_s", "jobs"):
            if key not in data:
                raise ConfigError(f"missing required field ({key}) in plan; expected the keys of "
                                  "Plan.to_dict (plan)")
        jobs = []
        for i, j in enumerate(data["jobs"]):
            try:
                gpus = tuple(int(g) for g in j["gpus"])
                jobs.append(JobPlan(name=str(j["name"]), gpus=gpus,
                                    rank_to_gpu=tuple(int(g) for g in j.get("rank_to_gpu", gpus)),
                                    start_s=float(j.get("start_s", 0.0)),
                                    predicted_iteration_s=float(j.get("predicted_iteration_s", math.nan)),
                                    predicted_jct_s=float(j.get("predicted_jct_s", math.nan))))
            except (KeyError, TypeError, ValueError) as err:
                raise ConfigError(f"plan job {i} is malformed: {err!r}; expected name and gpus "
                                  f"(plan.jobs[{i}])") from None
        routes = data.get("routes")
        if routes is not None:
            routes = {str(k): [(tuple(int(x) for x in p), float(w)) for p, w in v]
                      for k, v in routes.items()}
        return Plan(method=str(data["method"]), jobs=tuple(jobs), routes=routes,
                    objective=float(data["objective"]), lower_bound=float(data["lower_bound"]),
                    gap=float(data["gap"]), solve_s=float(data["solve_s"]),
                    status=str(data.get("status", "baseline")), info=dict(data.get("info") or {}))

    def to_json(self, path: str | Path | None = None) -> str:
        """The plan as JSON text; written to ``path`` too when given."""
        text = json.dumps(_finite(self.to_dict()), indent=1)
        if path is not None:
            Path(path).write_text(text)
        return text

    @staticmethod
    def from_json(path_or_text: str | Path) -> Plan:
        """Read a plan from a JSON file (or JSON text)."""
        p = Path(path_or_text) if not str(path_or_text).lstrip().startswith("{") else None
        try:
            text = p.read_text() if p is not None else str(path_or_text)
        except OSError as err:
            raise ConfigError(f"cannot read plan file {str(path_or_text)!r}: {err.strerror} (plan)") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"plan file {str(path_or_text)!r} is not JSON: {err} (plan)") from None
        return Plan.from_dict(data)


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


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


def routes_to_splits(routes: Mapping[str, Sequence[tuple[Sequence[int], float]]]
                     ) -> dict[tuple[int, int], list[tuple[np.ndarray, float]]]:
    """`Plan.routes` as the ``splits`` of `flowherd.routing.policies.ExplicitRouter`."""
    out = {}
    for key, v in routes.items():
        try:
            a, b = (int(x) for x in str(key).split(","))
        except ValueError:
            raise ConfigError(f"plan routes key must be 'src,dst', got {key!r} (plan.routes)") from None
        out[(a, b)] = [(np.asarray(p, dtype=np.int64), float(w)) for p, w in v]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SimCheck:
    """How the heuristic checks its candidate plans in the simulator (module docstring).

    Attributes:
        horizon_s: Simulated horizon, seconds (a job unfinished then counts with its time up to it).
        routing: Routing policy of the simulation (`flowherd.routing.policies.ROUTERS` name).
        background: Background traffic (`flowherd.sim.cluster.BackgroundSpec`), or None.
        fidelity: Simulator fidelity.
        seed: Seed of the simulation (hashing, background flows, inference requests).
        candidates: Most candidate plans simulated (the best by the model first).
        max_wall_s: Wall-clock budget of the simulations, seconds: no candidate starts after it.
    """

    horizon_s: float
    routing: str = "ecmp"
    background: Any = None
    fidelity: str = "collective"
    seed: int = 0
    candidates: int = 4
    max_wall_s: float = 300.0

    def __post_init__(self) -> None:
        if not (isinstance(self.horizon_s, int | float) and math.isfinite(self.horizon_s)
                and self.horizon_s > 0):
            raise ConfigError(f"horizon must be a positive finite time, got {self.horizon_s!r} "
                              "(SimCheck.horizon_s)")
        if not (isinstance(self.candidates, int) and self.candidates >= 1):
            raise ConfigError(f"candidates must be an integer >= 1, got {self.candidates!r} "
                              "(SimCheck.candidates)")
        if not (isinstance(self.max_wall_s, int | float) and self.max_wall_s > 0):
            raise ConfigError(f"max_wall_s must be a positive number of seconds, got "
                              f"{self.max_wall_s!r} (SimCheck.max_wall_s)")


def simulated_mean_jct_s(fabric: Fabric, jobs: Sequence[Any], placements: Mapping[str, Sequence[int]],
                         check: SimCheck, planned_start: Mapping[str, float] | None = None) -> float:
    """Mean JCT of ``jobs`` pinned to ``placements`` (in the plan's order on every GPU, given
    ``planned_start``) in `flowherd.sim.cluster.simulate_cluster`, seconds; a job unfinished at the
    horizon counts with its time up to it (a lower bound)."""
    from flowherd.sim.cluster import JobRequest, simulate_cluster

    reqs = [JobRequest(name=j.name, tenant=getattr(j, "tenant", "default"), spec=j, submit_s=j.submit_s)
            for j in jobs]
    res = simulate_cluster(fabric, reqs, placer="first-fit", fidelity=check.fidelity,
                           horizon_s=check.horizon_s, router=check.routing, background=check.background,
                           seed=check.seed, placements=placements, planned_start=planned_start)
    jct = res.censored_jct_s()
    return float(jct.mean()) if jct.size else 0.0


@dataclass(slots=True, kw_only=True)
class _Timeline:
    gpus: list[np.ndarray | None]
    start: np.ndarray
    end: np.ndarray
    bounds: list[float]
    statuses: list[str]
    risk: float  # jobs placed on GPUs at risk of an overrun (`heuristic.OVERRUN_SLACK`)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Background:
    """Known background flows: start, end (on the idle fabric), bytes, end servers."""

    start_s: np.ndarray
    end_s: np.ndarray
    size_bytes: np.ndarray
    src: np.ndarray
    dst: np.ndarray

    def bytes_at(self, t0_s: float, t1_s: float, num_servers: int) -> np.ndarray:
        """``float64[S]``: background bytes at each server (either end) during [t0_s, t1_s]."""
        dur = np.maximum(self.end_s - self.start_s, 1e-12)
        w = np.clip(np.minimum(self.end_s, t1_s) - np.maximum(self.start_s, t0_s), 0.0, None) / dur
        b = w * self.size_bytes
        return (np.bincount(self.src, weights=b, minlength=num_servers)
                + np.bincount(self.dst, weights=b, minlength=num_servers))


def known_background(fabric: Fabric, check: SimCheck) -> _Background | None:
    """The background flows the simulation of ``check`` will run (drawn from its seed before
    any job, so independent of the plan), timed on the idle fabric; None without background."""
    if check.background is None:
        return None
    from flowherd.sim.cluster import simulate_cluster

    res = simulate_cluster(fabric, [], placer="first-fit", fidelity=check.fidelity,
                           horizon_s=check.horizon_s, router=check.routing, background=check.background,
                           seed=check.seed)
    end = np.where(np.isfinite(res.background_finish_s), res.background_finish_s, check.horizon_s)
    return _Background(start_s=np.asarray(res.background_start_s, np.float64), end_s=end,
                       size_bytes=np.asarray(res.background_size_bytes, np.float64),
                       src=np.asarray(res.background_src_server, np.int64),
                       dst=np.asarray(res.background_dst_server, np.int64))


def _run_timeline(planner: Any, method: str, view: Any, profiles: Sequence[JobProfile], num_gpus: int,
                  rng: np.random.Generator, deadline: float | None, slack_aware: bool,
                  shuffle: bool = False, background: _Background | None = None,
                  backfill: bool = False) -> _Timeline:
    """The planning timeline of the module docstring with one method (``backfill``: EASY)."""
    from flowherd.planning.heuristic import OVERRUN_SLACK
    from flowherd.planning.predict import _server_of

    server = _server_of(view)
    nj = len(profiles)
    submit = np.array([p.submit_s for p in profiles])
    waiting = sorted(range(nj), key=lambda i: (profiles[i].submit_s, i))  # the queue, FIFO
    free = np.ones(num_gpus, dtype=bool)
    freed_at = np.full(num_gpus, -math.inf)  # predicted end of each GPU's last holder
    held_s = np.zeros(num_gpus)  # predicted run time of that holder
    gpus: list[np.ndarray | None] = [None] * nj
    start = np.zeros(nj)
    end = np.full(nj, math.inf)
    running: list[int] = []
    t = 0.0
    bounds: list[float] = []
    statuses: list[str] = []
    risk = 0.0

    def slack_now() -> np.ndarray:
        """Each GPU's slack now: the overrun of its last holder, as a fraction of its predicted
        run, that would delay a job placed on it now."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(held_s > 0, (t - freed_at) / held_s, math.inf)

    def place(batch: list[int]) -> list[np.ndarray | None]:
        """The method's placements of ``batch`` into the free GPUs now (None: not placed)."""
        gpu_slack = slack_now()
        srv_slack = np.full(view.num_servers, math.inf)
        np.minimum.at(srv_slack, server[free], gpu_slack[free])
        left = None if deadline is None else max(0.05, deadline - time.perf_counter())
        kw: dict[str, Any] = {}
        if slack_aware:
            kw["server_slack"] = srv_slack
        if shuffle:
            kw["shuffle"] = True
        if background is not None:
            kw["background_bytes"] = np.stack([
                background.bytes_at(t, t + (profiles[i].fixed_duration_s if profiles[i].fixed_duration_s
                                            is not None else profiles[i].iterations
                                            * profiles[i].multi_server_s), view.num_servers)
                for i in batch])
        res = planner.place_batch(view, [profiles[i] for i in batch], free.copy(),
                                  [(profiles[k], gpus[k]) for k in running], rng=rng, time_limit_s=left, **kw)
        if res.lower_bound is not None and len(batch) == nj:
            bounds.append(res.lower_bound)
        statuses.append(res.status)
        out: list[np.ndarray | None] = []
        for i, g in zip(batch, res.placements, strict=False):
            if g is None:
                break
            g = np.sort(np.asarray(g, dtype=np.int64))
            if g.size != profiles[i].world_size or not free[g].all():
                raise ConfigError(f"planner {method!r} returned an invalid placement for job "
                                  f"{profiles[i].name!r} (placement)")
            out.append(g)
        out += [None] * (len(batch) - len(out))
        return out

    def commit(took: list[int], placed: Sequence[np.ndarray]) -> None:
        """Start ``took`` on ``placed`` now; their run times are predicted with the jobs running."""
        nonlocal risk
        gpu_slack = slack_now()
        for i, g in zip(took, placed, strict=True):
            free[g] = False
            gpus[i] = g
            start[i] = t
            risk += float(np.min(gpu_slack[g]) < OVERRUN_SLACK)
        now = running + took
        res_m = evaluate(view, [profiles[k] for k in now], [gpus[k] for k in now])
        for k, d in zip(now[len(running):], res_m.duration_s[len(running):], strict=True):
            end[k] = t + float(d)
        running.extend(took)
        for i in took:
            waiting.remove(i)

    def backfill_now() -> bool:
        """EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001) now: the queue's head does
        not fit; it is promised the earliest time at which enough GPUs will be free by the
        predicted ends of the running jobs (its *shadow* time). A later submitted job starts now
        if it fits in the free GPUs and either ends before the shadow time, with `OVERRUN_SLACK`
        of margin on its predicted run, or uses only GPUs the head will not need then (the
        *extra* GPUs). So no backfilled job delays the head's promised start unless it overruns
        its prediction by more than the margin. Returns whether any job started."""
        head = waiting[0]
        if profiles[head].submit_s > t:
            return False
        need = profiles[head].world_size
        count = int(free.sum())
        shadow, extra = math.inf, 0
        for k in sorted(running, key=lambda k: end[k]):
            count += len(gpus[k])
            if count >= need:
                shadow, extra = float(end[k]), count - need
                break
        started = False
        for i in list(waiting[1:]):
            p = profiles[i]
            if p.submit_s > t:
                break
            if p.world_size > int(free.sum()):
                continue
            g = place([i])[0]
            if g is None:
                continue
            # its run time started now, predicted with the jobs running
            d = float(evaluate(view, [profiles[k] for k in [*running, i]],
                               [*(gpus[k] for k in running), g]).duration_s[-1])
            if t + d * (1.0 + OVERRUN_SLACK) <= shadow:
                commit([i], [g])
                started = True
            elif p.world_size <= extra:
                commit([i], [g])
                extra -= p.world_size
                started = True
        return started

    while waiting:
        head = waiting[0]
        t = max(t, profiles[head].submit_s)
        done = [k for k in running if end[k] <= t]
        for k in done:
            free[gpus[k]] = True
            freed_at[gpus[k]] = end[k]
            held_s[gpus[k]] = end[k] - start[k]
            running.remove(k)
        batch: list[int] = []
        count = int(free.sum())
        for i in waiting:
            if profiles[i].submit_s > t or profiles[i].world_size > count:
                break
            batch.append(i)
            count -= profiles[i].world_size
        if batch:
            placed = place(batch)
            n = next((k for k, g in enumerate(placed) if g is None), len(batch))
            if n:  # FIFO: nothing behind an unplaced job starts
                commit(batch[:n], placed[:n])
                continue
        if backfill and backfill_now():
            continue
        # the head waits for the next end or (if it was not submitted yet) its submission; with
        # backfilling, also for the next submission of a job behind it
        nxt = min((end[k] for k in running), default=math.inf)
        if profiles[head].submit_s > t:
            nxt = min(nxt, profiles[head].submit_s)
        if backfill:
            later = submit[waiting][submit[waiting] > t]
            if later.size:
                nxt = min(nxt, float(later.min()))
        if not math.isfinite(nxt):
            raise InfeasibleError(f"job {profiles[head].name!r} ({profiles[head].world_size} GPUs of type "
                                  f"{profiles[head].gpu_type}) fits nowhere on the idle fabric for "
                                  f"planner {method!r}")
        t = nxt
    return _Timeline(gpus=gpus, start=start, end=end, bounds=bounds, statuses=statuses, risk=risk)


def make_plan(fabric: Fabric, jobs: Sequence[Any], *, method: str = "heuristic",
              time_limit_s: float | None = None, seed: int = 0, routes: bool = False,
              check: SimCheck | None = None, backfill: bool | None = None) -> Plan:
    """Plan ``jobs`` on ``fabric`` with ``method`` (module docstring).

    Args:
        fabric: The fabric.
        jobs: `TrainingJob` / `InferenceJob` specs with unique names.
        method: A `flowherd.planning.placers.PLANNERS` name.
        time_limit_s: Time limit of the method (MILP, heuristic), seconds; None: its default.
        seed: Seed of the random choices.
        routes: Also compute routes with the lower level (`plan_routes`).
        check: ``heuristic`` only: simulate its best candidate plans with these settings and
            keep the one of least simulated mean JCT (module docstring); None: the model alone.
        backfill: Schedule with EASY backfilling (module docstring) instead of FIFO; None: the
            method's own schedule (backfilling for ``heuristic``, FIFO for the baseline placers
            and the MILP, which place and do not schedule).

    Returns:
        The plan.

    Raises:
        InfeasibleError: a job that fits nowhere (more GPUs than the fabric has of its type).
        UnknownNameError: an unknown method.
    """
    from flowherd.planning.placers import PLANNERS

    planner = PLANNERS[method]()
    if time_limit_s is not None and not (isinstance(time_limit_s, int | float) and time_limit_s > 0):
        raise ConfigError(f"time limit must be a positive number of seconds, got {time_limit_s!r} "
                          "(--time-limit)")
    if check is not None and not isinstance(check, SimCheck):
        raise ConfigError(f"check must be a SimCheck or None, got {type(check).__name__} (check)")
    wall0 = time.perf_counter()
    view = fabric_view(fabric)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"job names must be unique, got {dup!r} twice (jobs)")
    profiles = [profile_job(j, view) for j in jobs]
    for p in profiles:
        planner.check(view, p)
    deadline = None if time_limit_s is None else wall0 + float(time_limit_s)
    slack_aware = method == "heuristic"
    bg = known_background(fabric, check) if check is not None and slack_aware else None
    backfill = method == "heuristic" if backfill is None else bool(backfill)
    tl = _run_timeline(planner, method, view, profiles, fabric.num_gpus, np.random.default_rng(seed),
                       deadline, slack_aware, background=bg, backfill=backfill)
    submit = np.array([p.submit_s for p in profiles])
    info: dict[str, Any] = {"num_gpus": fabric.num_gpus, "num_jobs": len(jobs), "seed": int(seed),
                            "schedule": "backfill" if backfill else "fifo"}
    if check is not None and method == "heuristic" and jobs:
        tl, info["sim_check"] = _check_in_simulator(tl, planner, method, view, profiles, fabric, jobs,
                                                    seed, deadline, check, bg, backfill)
    gpus, start, end, bounds, statuses = tl.gpus, tl.start, tl.end, tl.bounds, tl.statuses
    placements = [g for g in gpus]
    # the objective is the planning model the methods optimize (run times predicted at the start,
    # with the jobs running then); the per-job predictions refine it with the time overlaps
    final = evaluate(view, profiles, placements, start_s=start)
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
        status = "heuristic" if method in ("heuristic", "milp") else "baseline"
    jp = tuple(JobPlan(name=p.name, gpus=tuple(int(x) for x in g),
                       rank_to_gpu=tuple(int(x) for x in rank_to_gpu(j, g, view.gpus_per_server,
                                                                     gpu_server=fabric.gpu_server)),
                       start_s=float(s), predicted_iteration_s=float(it), predicted_jct_s=float(c))
               for j, p, g, s, it, c in zip(jobs, profiles, placements, start, final.iteration_s,
                                             final.jct_s, strict=True))
    route_map = None
    if routes:
        left = None if deadline is None else max(1.0, deadline - time.perf_counter())
        route_map = plan_routes(fabric, jobs, {j.name: j.gpus for j in jp}, time_limit_s=left)
    info["overrun_risk"] = float(tl.risk)
    return Plan(method=method, jobs=jp, routes=route_map, objective=objective, lower_bound=lower, gap=gap,
                solve_s=time.perf_counter() - wall0, status=status, info=info)


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


def _check_in_simulator(base: _Timeline, planner: Any, method: str, view: Any,
                        profiles: Sequence[JobProfile], fabric: Fabric, jobs: Sequence[Any], seed: int,
                        deadline: float | None, check: SimCheck, bg: _Background | None,
                        backfill: bool = False) -> tuple[_Timeline, dict[str, Any]]:
    """Candidate plans (the model's best first), each simulated; the least simulated mean JCT wins.

    Candidates: the plan made with the overrun tie-break, the plan made without it, and plans
    whose greedy construction breaks ties between equally good placements at random (seeds
    ``seed + 1, ...``). Plans with the same placements are simulated once.
    """
    submit = np.array([p.submit_s for p in profiles])
    variants: list[tuple[bool, bool, int, bool]] = [(True, False, seed, True), (True, False, seed, False),
                                                    (False, False, seed, False)]
    variants += [(True, True, seed + k, k % 2 == 0) for k in range(1, 2 * check.candidates)]
    seen: set[tuple[tuple[int, ...], ...]] = set()
    cands: list[_Timeline] = []
    for slack_aware, shuffle, s, use_bg in variants:
        if len(cands) >= check.candidates:
            break
        tl = base if (slack_aware, shuffle, s, use_bg) == (True, False, seed, True) else _run_timeline(
            planner, method, view, profiles, fabric.num_gpus, np.random.default_rng(s), deadline,
            slack_aware, shuffle, bg if use_bg else None, backfill)
        key = tuple(tuple(int(x) for x in g) for g in tl.gpus)
        if key in seen:
            continue
        seen.add(key)
        cands.append(tl)
    # the model's ranking first: objective, then overrun risk
    cands.sort(key=lambda c: (round(float(np.mean(c.end - submit)), 9), c.risk))
    t0 = time.perf_counter()
    sims: list[float] = []
    for c in cands:
        if sims and time.perf_counter() - t0 > check.max_wall_s:
            break
        sims.append(simulated_mean_jct_s(fabric, jobs, {j.name: tuple(int(x) for x in g)
                                                        for j, g in zip(jobs, c.gpus, strict=True)}, check,
                                         {j.name: float(x) for j, x in zip(jobs, c.start, strict=True)}))
    best = int(np.argmin(sims))
    tl, val, moves = cands[best], sims[best], []
    if bg is not None:  # without background, moves inside a leaf are symmetric for the simulator
        tl, val, moves = _refine(tl, val, view, profiles, fabric, jobs, check, bg, t0 + check.max_wall_s)
    return tl, {"simulated_mean_jct_s": val, "candidates_simulated": sims, "chosen": best,
                "moves_kept": moves, "seed": int(check.seed), "routing": check.routing,
                "background": check.background is not None, "wall_s": time.perf_counter() - t0}


def _refine(tl: _Timeline, value: float, view: Any, profiles: Sequence[JobProfile], fabric: Fabric,
            jobs: Sequence[Any], check: SimCheck, bg: _Background | None, stop_at: float,
            alternatives: int = 2) -> tuple[_Timeline, float, list[str]]:
    """Move single jobs that span servers to other servers of the same layout, simulate, keep a
    move when the simulated mean JCT drops (first improvement, jobs in start order). Only with
    known background: a leaf is non-blocking, so without it such moves change nothing.

    A job keeps its start and its per-server GPU counts (so the model's prediction is unchanged)
    and moves inside one leaf only (jobs spanning leaves stay: their cost depends on the leaves);
    the target GPUs must be free over its predicted run, with `OVERRUN_SLACK` of margin around
    the runs of the jobs holding them before or after. Candidates: the servers meeting the least
    known background over the run (`known_background`), one set per leaf that can host it.
    """
    from flowherd.planning.heuristic import OVERRUN_SLACK
    from flowherd.planning.predict import _server_of

    server = _server_of(view)
    ns = view.num_servers
    gpus = [None if g is None else np.asarray(g, np.int64) for g in tl.gpus]
    start, end = tl.start, tl.end
    moves: list[str] = []
    ok_type = {p.gpu_type: np.array([t == p.gpu_type for t in view.server_type]) for p in profiles}
    for j in np.argsort(start, kind="stable").tolist():
        if time.perf_counter() > stop_at:
            break
        g = gpus[j]
        if g is None or profiles[j].kind != "training":
            continue
        used = np.bincount(server[g], minlength=ns)
        srv = np.flatnonzero(used)
        if srv.size < 2 or np.unique(view.server_leaf[srv]).size > 1:
            continue
        lo, hi = start[j], end[j] + OVERRUN_SLACK * (end[j] - start[j])
        busy = np.zeros(fabric.num_gpus, bool)
        for k, gk in enumerate(gpus):
            if k == j or gk is None:
                continue
            k_hi = end[k] + OVERRUN_SLACK * (end[k] - start[k])
            if start[k] < hi and k_hi > lo:
                busy[gk] = True
        free_per = np.bincount(server[~busy], minlength=ns)
        free_per[~ok_type[profiles[j].gpu_type]] = 0
        expo = (bg.bytes_at(lo, end[j], ns) if bg is not None else np.zeros(ns)) / np.maximum(
            view.server_capacity, 1)
        counts = np.sort(used[srv])[::-1]
        alts = []
        for li in range(view.num_leaves):
            cand = np.flatnonzero((view.server_leaf == li) & (free_per >= counts.min()))
            cand = cand[np.lexsort((cand, expo[cand]))]
            pick: list[int] = []
            for c in counts.tolist():  # largest counts first, each on the least-exposed server
                fit = [s for s in cand.tolist() if s not in pick and free_per[s] >= c]
                if not fit:
                    break
                pick.append(fit[0])
            if len(pick) == counts.size:
                score = float(sum(expo[s] * c for s, c in zip(pick, counts.tolist(), strict=True)))
                alts.append((score, pick))
        alts.sort(key=lambda a: a[0])
        tried = 0
        for _, pick in alts:
            if tried >= alternatives or time.perf_counter() > stop_at:
                break
            if sorted(pick) == sorted(srv.tolist()):
                continue
            tried += 1
            new = np.sort(np.concatenate([np.flatnonzero(~busy & (server == s))[:c]
                                          for s, c in zip(pick, counts.tolist(), strict=True)]))
            trial = list(gpus)
            trial[j] = new
            v = simulated_mean_jct_s(fabric, jobs, {jb.name: tuple(int(x) for x in gg)
                                                    for jb, gg in zip(jobs, trial, strict=True)}, check,
                                     {jb.name: float(x) for jb, x in zip(jobs, start, strict=True)})
            if v < value - 1e-9:
                gpus, value = trial, v
                moves.append(f"{profiles[j].name}: servers {srv.tolist()} -> {sorted(pick)}")
                break
    return dataclasses.replace(tl, gpus=gpus), value, moves
