"""The plan's pacing lever: per-GPU-pair rate caps at the rate the plan assumed.

The routing LP (`flowherd.planning.congestion`) keeps every link's load *averaged over a window*
at or under the target; within the window a job's collective still starts all its flows at once,
at line rate, and where they converge on a link (a data-parallel ring's flows on an
oversubscribed leaf uplink) they arrive faster than it drains: the port queues, marks and, on a
lossless fabric, pauses its upstream links (PFC), whatever the routes. Those bursts are the
job's own; no placement, schedule or routing of the other jobs removes them (the planner
benchmark's "cells of at most one job").

The plan's model of a communication task (`flowherd.planning.traffic.job_traffic`) is the
time its busiest link needs for the task's bytes. Pacing makes the simulator keep to that
model: every GPU pair of a task is capped at

    rate_k = wire_k / T,   T = max(max_l W_l / a_l, least duration)

with ``wire_k`` the pair's bytes on the wire, ``W_l`` the task's wire bytes on link l under the
plan's routes, ``c_l`` the capacity, ``a_l = u c_l - b_l`` on a switch's port (``u`` the target
utilization, `planner.max_utilization`; ``b_l`` the expected background on the link,
`flowherd.planning.congestion.background_link_bytes_per_s`; at least `MIN_SHARE` of ``c_l``) and
``a_l = c_l`` elsewhere: on a host's own links (its NIC's uplink, PCIe, NVLink: nothing queues
there) and on the ports the task's flows cannot fill (their line rates summed stay under the
port's capacity, as one flow into a host's downlink), so a task whose bottleneck is its NIC is
not slowed; and the least duration NCCL's channel rate gives the whole collective
(`flowherd.collectives.schedule.Schedule.min_transfer_s`). Paced so, the task's flows together
load no switch port above ``u c_l - b_l`` (less where the plan's own time is longer): a
pair's flows all end together at ``T``, the time of the task's bottleneck (Varys' MADD,
Chowdhury et al., SIGCOMM 2014), so where the least duration or the bottleneck link decides the
task's time, as it does under max-min, the cap costs no time. A pair used by several tasks (or
jobs, one after the other) takes the largest of their rates.

The simulator applies the caps as host pacers (`flowherd.cluster.pacing`) under every network model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from flowherd.cluster.collective import choose, nccl_channels
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.planning.congestion import PlannedJob, background_link_bytes_per_s, check_max_utilization
from flowherd.planning.traffic import TrafficMatrix, link_profile
from flowherd.routing.policies import make_router
from flowherd.workload.opgraph import TaskKind
from flowherd.workload.training import TrainingJob, rank_to_gpu

__all__ = ["MIN_SHARE", "pacing_caps", "pacing_from_plan", "plan_pacing"]

# the least share of a link a pacer leaves a task where the background's expectation takes more
MIN_SHARE = 0.1


def _task_rates(job: TrainingJob, gpus: Sequence[int], fabric: Fabric, router: Any, avail: np.ndarray,
                cap: np.ndarray) -> dict[tuple[int, int], float]:
    """Per scale-out GPU pair of ``job`` on ``gpus``, the largest paced rate over its tasks."""
    rank_gpu = rank_to_gpu(job, np.asarray(gpus, np.int64), 1, gpu_server=fabric.gpu_server)
    server = fabric.gpu_server
    rt = router if hasattr(router, "route") else make_router(router, fabric)
    line0 = np.zeros(0)
    out: dict[tuple[int, int], float] = {}
    memo: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray, float]] = {}
    for t in job.iteration_graph("stage").tasks:
        if t.kind == TaskKind.COMPUTE:
            continue
        src, dst, wire, least = [], [], [], 0.0
        for c in t.collectives:
            on = tuple(int(x) for x in rank_gpu[list(c.gpus)])
            key = (c.op, on, float(c.size_bytes), c.root,
                   None if c.matrix_bytes is None else np.asarray(c.matrix_bytes).tobytes())
            if key not in memo:
                coll = Collective(op=c.op, gpus=on, size_bytes=c.size_bytes, root=c.root,
                                  matrix_bytes=c.matrix_bytes)
                if coll.n < 2 or coll.size_bytes <= 0:
                    memo[key] = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), 0.0)
                else:
                    algo, proto = choose(fabric, coll)
                    sched = build_schedule(coll, algo, fabric=fabric, protocol=proto,
                                           channels=nccl_channels(fabric, coll))
                    s, d, b = sched.pair_bytes()
                    memo[key] = (s.astype(np.int64), d.astype(np.int64), b / sched.wire_fraction,
                                 float(sched.min_transfer_s))
            s, d, w, mt = memo[key]
            cross = server[s] != server[d]
            src.append(s[cross])
            dst.append(d[cross])
            wire.append(w[cross])
            least = max(least, mt)
        if not src or not sum(x.size for x in src):
            continue
        s, d = np.concatenate(src), np.concatenate(dst)
        w = np.concatenate(wire)
        tm = TrafficMatrix(src=s, dst=d, size_bytes=w).aggregated()
        load_w = link_profile(fabric, tm, router)
        used = load_w > 0
        # a port queues only where the task's flows can arrive faster than it drains: their line
        # rates (narrowest link of each path) summed over the flows that cross it, as the
        # network model's arrival potential (`flowherd.engine.network.kernels.flow_pass`) does
        r = rt.route(tm.src.astype(np.int32), tm.dst.astype(np.int32), np.zeros(tm.num_pairs, np.int64))
        lens = np.diff(np.asarray(r.ptr, np.int64))
        line = np.minimum.reduceat(cap[r.link], np.asarray(r.ptr[:-1], np.int64)) if r.link.size else line0
        pot = np.bincount(r.link, weights=np.repeat(line, lens), minlength=cap.size)
        a = np.where(pot > cap * (1 + 1e-9), avail, cap)
        span = max(float(np.max(load_w[used] / a[used])), least)
        if span <= 0:
            continue
        for a, b, x in zip(tm.src.tolist(), tm.dst.tolist(), tm.size_bytes.tolist(), strict=True):
            out[(a, b)] = max(out.get((a, b), 0.0), x / span)
    return out


def pacing_caps(fabric: Fabric, planned: Sequence[PlannedJob], *, router: Any, max_utilization: float,
                background: Any = None) -> dict[tuple[int, int], float]:
    """The caps of every scale-out GPU pair of the planned training jobs (module docstring).

    Args:
        fabric: The fabric.
        planned: The plan's jobs (GPUs; inference jobs are not paced).
        router: The plan's routing of the jobs' traffic (a router or router name).
        max_utilization: The target utilization ``u`` in (0, 1].
        background: The scenario's `flowherd.cluster.simulate.BackgroundSpec`, or None.

    Returns:
        ``(src GPU, dst GPU)`` -> bytes per second.
    """
    u = check_max_utilization(max_utilization)
    cap = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)
    # only a switch's port queues (marks, pauses): the target holds there; a host's own links
    # (its NIC's uplink, PCIe, NVLink) send at their rate with nothing to protect
    port = (np.asarray(fabric.link_kind) == LinkKind.NETWORK) & (
        np.asarray(fabric.node_kind)[fabric.link_src] == NodeKind.SWITCH)
    avail = np.where(port, np.maximum(u * cap - background_link_bytes_per_s(fabric, background),
                                      MIN_SHARE * cap), cap)
    out: dict[tuple[int, int], float] = {}
    for pj in planned:
        if not isinstance(pj.job, TrainingJob):
            continue
        for k, r in _task_rates(pj.job, pj.gpus, fabric, router, avail, cap).items():
            out[k] = max(out.get(k, 0.0), r)
    return out


def pacing_from_plan(plan: Any) -> dict[tuple[int, int], float]:
    """``plan.info["pacing"]`` (``"src,dst"`` -> bytes per second) as pairs; empty without."""
    raw: Mapping[str, float] = (plan.info or {}).get("pacing") or {}
    out = {}
    for key, v in raw.items():
        a, b = (int(x) for x in str(key).split(","))
        out[(a, b)] = float(v)
    return out


def plan_pacing(plan: Any, fabric: Fabric) -> Any:
    """The host pacers of ``plan``'s caps on ``fabric`` (`flowherd.cluster.pacing.Pacing`, for
    `flowherd.cluster.simulate.simulate_cluster`'s ``pacing``); None for a plan without caps."""
    caps = pacing_from_plan(plan)
    if not caps:
        return None
    from flowherd.cluster.pacing import make_pacing

    return make_pacing(fabric, caps)
