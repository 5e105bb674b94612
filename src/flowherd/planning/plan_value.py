"""`Plan` and `JobPlan`: what the planner returns, as a value that round-trips through JSON.

Apart from `flowherd.planning.plan` (which makes plans) because reading and writing a plan
needs none of the planner: ``flowherd simulate --plan`` and `flowherd.planning.export` read one
back without the planning timeline, its solvers or its simulator check.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flowherd.errors import ConfigError

__all__ = ["JobPlan", "Plan"]

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
            from flowherd import atomic

            atomic.write_text(path, text, field="--out")  # never half a plan (a full disk, a kill)
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
