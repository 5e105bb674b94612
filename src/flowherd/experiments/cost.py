"""What a run, a sweep or a collective will cost, estimated before it starts.

Each estimate is a sum of parts, each part the memory and the events of one thing the input
asks for, with the field that asks for it: the fabric (its GPUs and links), each job (its
operation graph: micro-batches x pipeline stages x virtual stages per iteration), the background
traffic (its flows: the arrival rate, capped by ``max_flows_per_s``, over the horizon), a
sweep's points, a collective's flows. `check` refuses a cost over the limits of
`flowherd.experiments.budget` in one line naming the part that drives it, its figure, the limit
and the field; the limits are raised with ``--max-memory`` and ``--max-events``.

The per-item figures are measured on whole runs (peak resident memory of `flowherd simulate` and
`flowherd collective`, /usr/bin/time, 2-core machine) and rounded up: an estimate is for refusing
what cannot run and for saying early what will take long, not for sizing a machine. Jobs' events
are not counted: how many iterations fit in the horizon is only known by simulating (phase
fidelity fast-forwards the steady ones), so a job's cost is its memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flowherd.errors import ConfigError
from flowherd.experiments import budget
from flowherd.units import KiB, MiB, format_size, format_time

__all__ = ["BYTES_PER_BACKGROUND_FLOW", "BYTES_PER_MICRO_BATCH_STAGE", "Cost", "Part", "check",
           "collective_cost", "run_cost", "sweep_cost"]

#: A background flow, bytes: 480 (0.5 M flows) and 535 (2 M flows) measured on the tiny
#: scenario with 500 flows/s over 1,000 and 4,000 s of horizon.
BYTES_PER_BACKGROUND_FLOW = 640
#: CPU seconds per background flow: 7.4 us measured on the same runs (2 M flows, 14.5 CPU-s).
CPU_S_PER_BACKGROUND_FLOW = 7.5e-6
#: Events per simulated flow: its arrival and its departure.
EVENTS_PER_FLOW = 2
#: A micro-batch of one pipeline stage in a job's operation graph, bytes: 20-36 KB measured
#: (llama3-8b, 2,048 to 32,768 micro-batches per iteration, pp 1 and 4).
BYTES_PER_MICRO_BATCH_STAGE = 48 * KiB
#: A job besides its operation graph (records, rank grid), bytes.
BYTES_PER_JOB = 1 * MiB
#: A flow of a collective's schedule, bytes, by fidelity: 361 and 142 measured (ring AllGather of
#: 1 GiB over 256 to 1,024 GPUs: 0.59 M to 9.4 M flows).
BYTES_PER_COLLECTIVE_FLOW = {"step": 400, "collective": 160}
#: A sweep point (the containers its values change, its parameters, its hash, its run), bytes per
#: kB of the base scenario's JSON: 100,000 points of two job axes of the 0.92 kB tiny scenario
#: took 2.2 kB each (322 MB peak).
BYTES_PER_POINT_PER_KB = 3000
#: Events a run costs at the least (building, the alone runs, storing): a tiny scenario's run of
#: 2 s counts 10,388.
MIN_EVENTS_PER_RUN = 10_000
#: Ranks of the schedules built to extrapolate a larger collective's flows.
PROBE_RANKS = (128, 256)
#: Up to this many ranks the selector's choice for all of them is made for the estimate (1.4 s
#: at 16,384 ranks measured, 85 us per rank); above, the choice at the larger probe.
CHOOSE_RANKS = 16_384
#: CPU seconds per flow of a collective (7.6 CPU-s for 9.4 M flows measured, step fidelity) and
#: per rank of the selector's choice.
CPU_S_PER_COLLECTIVE_FLOW = 0.8e-6
CPU_S_PER_CHOICE_RANK = 85e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One thing the input asks for.

    Attributes:
        what: It, for a message (``"background traffic of about 5e11 flows (500/s over 1e9 s)"``).
        field: The field or flag that asks for it.
        memory_bytes: Its memory, bytes.
        events: Its simulator events.
        cpu_s: Its CPU time, seconds (0 where unknown).
    """

    what: str
    field: str
    memory_bytes: float = 0.0
    events: float = 0.0
    cpu_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """An estimate: the parts, and their sums."""

    parts: tuple[Part, ...]

    @property
    def memory_bytes(self) -> float:
        return math.fsum(p.memory_bytes for p in self.parts)

    @property
    def events(self) -> float:
        return math.fsum(p.events for p in self.parts)

    @property
    def cpu_s(self) -> float:
        return math.fsum(p.cpu_s for p in self.parts)

    def describe(self) -> str:
        """``"about 2.1 GiB of memory and 4.0e+06 events (about 30 s of CPU)"``."""
        cpu = f" (about {format_time(self.cpu_s)} of CPU)" if self.cpu_s >= 1 else ""
        return f"about {format_size(self.memory_bytes)} of memory and {self.events:.2g} events{cpu}"


def check(cost: Cost, what: str) -> None:
    """Refuse `cost` over the memory or the events limit (`flowherd.experiments.budget`).

    Raises:
        ConfigError: Naming `what`, the part that weighs most, its figure, the limit and its field.
    """
    limit = budget.memory_limit()
    if cost.memory_bytes > limit.limit_bytes:
        p = max(cost.parts, key=lambda x: x.memory_bytes)
        total = ("" if p.memory_bytes > 0.9 * cost.memory_bytes
                 else f" ({format_size(cost.memory_bytes)} in all)")
        raise ConfigError(f"{what}: {p.what} would use about {format_size(p.memory_bytes)} of memory{total}; "
                          f"{limit.source} (--max-memory overrides) ({p.field})")
    most = budget.events_limit()
    if cost.events > most:
        p = max(cost.parts, key=lambda x: x.events)
        cpu = f", about {format_time(p.cpu_s)} of CPU" if p.cpu_s >= 1 else ""
        raise ConfigError(f"{what}: {p.what} would take about {p.events:.2g} simulator events{cpu}; expected "
                          f"at most "
                          f"{most:.2g} (--max-events raises it) ({p.field})")


# ---- one run -------------------------------------------------------------------------------------------
def _job_fields(source: Any) -> dict[str, str]:
    jobs = ((source or {}).get("workload") or {}).get("jobs") or [] if isinstance(source, dict) else []
    return {str(j.get("name")): f"workload.jobs[{i}]" for i, j in enumerate(jobs) if isinstance(j, dict)}


def _background_part(sc: Any) -> Part | None:
    bg = sc.background
    if bg is None or bg.load <= 0:
        return None
    import numpy as np

    from flowherd.fabric.core import LinkKind
    from flowherd.workload import BackgroundTraffic

    fab = sc.fabric
    nic = (fab.link_kind == LinkKind.NETWORK) & (fab.node_tier[fab.link_src] == 1)
    per_server = float(np.asarray(fab.link_capacity_bytes_per_s)[nic].sum()) / max(fab.num_servers, 1)
    if fab.num_servers < 2 or per_server <= 0:
        return None
    rate = BackgroundTraffic(load=float(bg.load), num_servers=fab.num_servers, server_bytes_per_s=per_server,
                             until_s=sc.horizon_s, cdf=bg.cdf).arrival_rate_per_s
    simulated = min(rate, float(bg.max_flows_per_s))
    n = simulated * sc.horizon_s
    drives = ("simulation.horizon, workload.background.max_flows_per_s" if rate > bg.max_flows_per_s
              else "simulation.horizon, workload.background.load")
    events = EVENTS_PER_FLOW * n if bg.fast_forward == "exact" else 0.0
    return Part(what=f"background traffic of about {n:.3g} flows ({simulated:.3g}/s over the "
                     f"{format_time(sc.horizon_s)} horizon)", field=drives,
                memory_bytes=n * BYTES_PER_BACKGROUND_FLOW, events=events,
                cpu_s=n * CPU_S_PER_BACKGROUND_FLOW)


def run_cost(sc: Any) -> Cost:
    """The cost of simulating scenario `sc` (a `flowherd.experiments.scenario.Scenario`)."""
    from flowherd.experiments.loading import BYTES_PER_GPU

    fab = sc.fabric
    parts = [Part(what=f"the fabric of {fab.num_gpus:,} GPUs and {fab.num_directed_links:,} links",
                  field="fabric", memory_bytes=fab.num_gpus * BYTES_PER_GPU + fab.num_directed_links * KiB)]
    fields = _job_fields(sc.source)
    for j in sc.jobs:
        stages = getattr(j, "micro_batches", None)
        if stages is None:  # an inference job: its requests, counted in its records
            parts.append(Part(what=f"job {j.name!r}", field="workload", memory_bytes=BYTES_PER_JOB))
            continue
        depth = j.pp * j.virtual_stages
        grid = stages * depth
        where = fields.get(j.name)
        parts.append(Part(
            what=(f"job {j.name[:40]!r} with {stages:,} micro-batches per iteration x {depth} pipeline "
                  f"stage{'s' if depth > 1 else ''}"),
            field=f"{where}.global_batch" if where else "workload",
            memory_bytes=BYTES_PER_JOB + grid * BYTES_PER_MICRO_BATCH_STAGE))
    bg = _background_part(sc)
    if bg is not None:
        parts.append(bg)
    return Cost(parts=tuple(parts))


# ---- a sweep ---------------------------------------------------------------------------------------------
def sweep_cost(n_points: int, n_seeds: int, base: Any, per_run: Cost | None = None) -> Cost:
    """The cost of a sweep of `n_points` points of scenario mapping `base` x `n_seeds` seeds: its
    points in memory (the driver holds them all) and its runs' events (`per_run` each, at least
    `MIN_EVENTS_PER_RUN`)."""
    import json

    kb = len(json.dumps(base, default=str)) / 1000
    runs = n_points * n_seeds
    events = max(MIN_EVENTS_PER_RUN, per_run.events if per_run is not None else 0.0)
    return Cost(parts=(
        Part(what=f"the sweep's {n_points:,} points (of a {kb:.1f} kB base scenario)", field="axes",
             memory_bytes=n_points * kb * BYTES_PER_POINT_PER_KB),
        Part(what=f"{runs:,} runs of at least {events:.2g} events each", field="axes, seeds",
             events=runs * events, cpu_s=runs * (per_run.cpu_s if per_run is not None else 0.0))))


# ---- a collective ---------------------------------------------------------------------------------------
def collective_cost(fabric: Any, op: Any, gpus: tuple[int, ...], size_bytes: float, *,
                    algorithm: str = "auto", protocol: str | None = None, channels: int | None = None,
                    fidelity: str = "step") -> Cost | None:
    """The cost of `flowherd.cluster.collective.simulate_collective` of `op` of `size_bytes` over the
    ranks `gpus` of `fabric`, for more than ``PROBE_RANKS[-1]`` ranks (None for fewer: those cost
    seconds). An AllToAllv is costed with the uniform matrix.

    The schedule is built at `PROBE_RANKS` ranks (the first of `gpus`; the same op, size,
    algorithm, protocol and channels: the selector's choice for all the ranks where ``auto`` and
    at most `CHOOSE_RANKS`, at the larger probe above), and its flow count extrapolated with the
    growth measured between the two (``flows ~ ranks^a``, a in [1, 2.2]): building the real one
    to count it would be the cost itself (the selector alone takes about 85 us per rank: 85 s at
    10^6 ranks).
    """
    import dataclasses

    import numpy as np

    from flowherd.cluster.collective import choose, nccl_channels
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.nccl import LATENCY_MODELS
    from flowherd.collectives.ops import Collective, Op

    n = len(gpus)
    lo, hi = PROBE_RANKS
    if n <= hi:
        return None

    def sub(k: int) -> Collective:  # the first k ranks; an AllToAllv gets the uniform matrix
        matrix = np.full((k, k), size_bytes / k) if op == Op.ALLTOALLV else None
        return Collective(op=op, gpus=tuple(gpus[:k]), size_bytes=size_bytes, matrix_bytes=matrix)

    whole = n <= CHOOSE_RANKS and op != Op.ALLTOALLV
    ref = dataclasses.replace(sub(hi), gpus=tuple(gpus)) if whole else sub(hi)
    algo, proto = choose(fabric, ref, algorithm, protocol)
    ch = nccl_channels(fabric, ref) if channels is None else int(channels)
    flows = []
    for k in (lo, hi):
        sched = build_schedule(sub(k), algo, fabric=fabric, protocol=proto, channels=ch,
                               latency_model=LATENCY_MODELS["nccl"])
        flows.append(max(1, sched.num_flows))
    growth = min(2.2, max(1.0, math.log(flows[1] / flows[0]) / math.log(hi / lo)))
    total = flows[1] * (n / hi) ** growth
    per = BYTES_PER_COLLECTIVE_FLOW.get(fidelity, BYTES_PER_COLLECTIVE_FLOW["step"])
    what = (f"{op.value} over {n:,} GPUs ({algo}) of about {total:.2g} flows (extrapolated as "
            f"ranks^{growth:.2f} from {flows[0]:,} and {flows[1]:,} flows at {lo} and {hi} ranks)")
    return Cost(parts=(Part(what=what, field="--gpus", memory_bytes=total * per,
                            events=EVENTS_PER_FLOW * total,
                            cpu_s=total * CPU_S_PER_COLLECTIVE_FLOW + n * CPU_S_PER_CHOICE_RANK),))
