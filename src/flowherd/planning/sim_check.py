"""The simulator as the evaluator of the heuristic's plans (`flowherd.planning.plan`, "The
simulator as the evaluator"): the settings (`SimCheck`), the known background, the candidates
simulated and the moves kept."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.planning.heuristic import OVERRUN_SLACK
from flowherd.planning.predict import JobProfile, _server_of
from flowherd.planning.timeline import KnownBackground, Timeline, run_timeline

__all__ = ["SimCheck", "check_in_simulator", "known_background", "refine", "simulated_mean_jct_s"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimCheck:
    """How the heuristic checks its candidate plans in the simulator (module docstring).

    Attributes:
        horizon_s: Simulated horizon, seconds (a job unfinished then counts with its time up to it).
        routing: Routing policy of the simulation (`flowherd.routing.policies.ROUTERS` name).
        background: Background traffic (`flowherd.cluster.simulate.BackgroundSpec`), or None.
        fidelity: Simulator fidelity.
        seed: Seed of the simulation (hashing, background flows, inference requests).
        candidates: Most candidate plans simulated (the best by the model first).
        max_wall_s: Wall-clock budget of the simulations, seconds: no candidate starts after it.
        network: The congestion model of the simulation (`flowherd.engine.network.NetworkConfig`),
            or None: the one set by `flowherd.engine.network.use_network`, else ideal.
    """

    horizon_s: float
    routing: str = "ecmp"
    background: Any = None
    fidelity: str = "collective"
    seed: int = 0
    candidates: int = 4
    max_wall_s: float = 300.0
    network: Any = None

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
    ``planned_start``) in `flowherd.cluster.simulate.simulate_cluster`, seconds; a job unfinished at the
    horizon counts with its time up to it (a lower bound)."""
    from flowherd.cluster.simulate import JobRequest, simulate_cluster

    reqs = [JobRequest(name=j.name, tenant=getattr(j, "tenant", "default"), spec=j, submit_s=j.submit_s)
            for j in jobs]
    with _network(check):
        res = simulate_cluster(fabric, reqs, placer="first-fit", fidelity=check.fidelity,
                               horizon_s=check.horizon_s, router=check.routing, background=check.background,
                               seed=check.seed, placements=placements, planned_start=planned_start)
    jct = res.censored_jct_s()
    return float(jct.mean()) if jct.size else 0.0


def _network(check: SimCheck) -> Any:
    import contextlib

    from flowherd.engine.network import use_network

    return contextlib.nullcontext() if check.network is None else use_network(check.network)


def known_background(fabric: Fabric, check: SimCheck) -> KnownBackground | None:
    """The background flows the simulation of ``check`` will run (drawn from its seed before
    any job, so independent of the plan), timed on the idle fabric; None without background."""
    if check.background is None:
        return None
    from flowherd.cluster.simulate import simulate_cluster

    res = simulate_cluster(fabric, [], placer="first-fit", fidelity=check.fidelity,
                           horizon_s=check.horizon_s, router=check.routing, background=check.background,
                           seed=check.seed, background_records=True)
    end = np.where(np.isfinite(res.background_finish_s), res.background_finish_s, check.horizon_s)
    return KnownBackground(start_s=np.asarray(res.background_start_s, np.float64), end_s=end,
                       size_bytes=np.asarray(res.background_size_bytes, np.float64),
                       src=np.asarray(res.background_src_server, np.int64),
                       dst=np.asarray(res.background_dst_server, np.int64))


def check_in_simulator(base: Timeline, planner: Any, method: str, view: Any,
                        profiles: Sequence[JobProfile], fabric: Fabric, jobs: Sequence[Any], seed: int,
                        deadline: float | None, check: SimCheck, bg: KnownBackground | None,
                        backfill: bool = False, order: str = "fifo") -> tuple[Timeline, dict[str, Any]]:
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
    cands: list[Timeline] = []
    for slack_aware, shuffle, s, use_bg in variants:
        if len(cands) >= check.candidates:
            break
        tl = base if (slack_aware, shuffle, s, use_bg) == (True, False, seed, True) else run_timeline(
            planner, method, view, profiles, fabric.num_gpus, np.random.default_rng(s), deadline,
            slack_aware, shuffle, bg if use_bg else None, backfill, order=order)
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
        tl, val, moves = refine(tl, val, view, profiles, fabric, jobs, check, bg, t0 + check.max_wall_s)
    return tl, {"simulated_mean_jct_s": val, "candidates_simulated": sims, "chosen": best,
                "moves_kept": moves, "seed": int(check.seed), "routing": check.routing,
                "background": check.background is not None, "wall_s": time.perf_counter() - t0}


def refine(tl: Timeline, value: float, view: Any, profiles: Sequence[JobProfile], fabric: Fabric,
            jobs: Sequence[Any], check: SimCheck, bg: KnownBackground | None, stop_at: float,
            alternatives: int = 2) -> tuple[Timeline, float, list[str]]:
    """Move single jobs that span servers to other servers of the same layout, simulate, keep a
    move when the simulated mean JCT drops (first improvement, jobs in start order). Only with
    known background: a leaf is non-blocking, so without it such moves change nothing.

    A job keeps its start and its per-server GPU counts (so the model's prediction is unchanged)
    and moves inside one leaf only (jobs spanning leaves stay: their cost depends on the leaves);
    the target GPUs must be free over its predicted run, with `OVERRUN_SLACK` of margin around
    the runs of the jobs holding them before or after. Candidates: the servers meeting the least
    known background over the run (`known_background`), one set per leaf that can host it.
    """
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
