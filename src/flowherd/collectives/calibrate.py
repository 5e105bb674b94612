"""A schedule run as NCCL runs it takes NCCL 2.30's time on an idle fabric.

`build_schedule` builds NCCL's channels (rings, trees, NVLS) from the fabric; run on the fabric's
links at their full rate and with NCCL's per-hop latency on every step, they would not take
the time NCCL's own model (`flowherd.collectives.tuning`, tuning.cc) gives:

* **Bandwidth.** NCCL's channels are copy loops on SMs; its model says what they move:
  ``nChannels x bw`` of the topology search (``bwIntra`` / ``bwInter``, GB/s per channel: an H100
  ring over NVLink 12 x 30 = 360 GB/s per GPU where the GPU's NVLink signals 450; across nodes
  48 per NIC where the NIC signals 50), after the protocol and per-channel caps of tuning.cc
  (``llMaxBw``, ``perChMaxRingLL128Bw``, ``perChMaxTreeBw``, ``perChMaxNVLSTreeBw``, Tree
  0.92 / 0.85, PAT 0.75) and the bus-to-algorithm conversion (``nRanks / nsteps`` for Ring, NVLS
  and NVLSTree, 0.5 for Tree). `rate_fraction` compares that with what the schedule's own bytes
  would take on the fabric's links (`idle_bound_s`: each GPU's NVLink ports and each NIC, both
  ways, at their capacity): the channels move the schedule's payload at that fraction of the
  ports' rate. It is a rate limit, not more bytes: the flows carry the bytes NCCL sends (payload
  over the protocol's wire fraction), and every step lasts at least its own busiest port's
  payload over that fraction of the port's capacity (`Step.min_transfer_s`; the whole schedule
  as one coflow `Schedule.min_transfer_s`). Alone on the fabric a step takes NCCL's time; on a
  link it shares, it takes its fair share of the link (a capped channel below its cap runs at
  the link's share; nobody gives it more bytes to send). Deliberate shortcut: the engine has
  no per-flow rate limit, so the cap is a least duration of the step; a step's flows may run
  ahead of the cap on links nobody else wants and then wait, which a capped channel would
  not, but the step ends when the capped one would whenever its rates hold over the step.
* **Latency.** NCCL prices a collective's latency in closed form (``baseLat`` + per-hop
  ``hwLat`` over the hops a chunk takes, tuning.cc); a step-synchronous schedule pays its
  slowest hop on every step. `nccl_latency_scale` scales the steps' latencies so that the
  schedule's critical path is NCCL's latency (`flowherd.collectives.tuning.algo_latency_us`),
  and NCCL's latency holds the wire's (`Schedule.adds_path_latency`), so it is counted once.

Both apply to the algorithms NCCL has (ring, tree, nvls, nvlstree, pat) on the ops of its
model, built with the fabric and NCCL's channels, under ``latency_model="nccl"``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from flowherd.collectives.schedule import Schedule
from flowherd.collectives.tuning import MODEL_OPS, algo_latency_us
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.units import us

#: The algorithms NCCL's model prices (flowherd names).
NCCL_ALGORITHMS = ("ring", "tree", "nvls", "nvlstree", "pat")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Ports:
    """Per node (fabric node id) capacities of the ports a collective's bytes cross, bytes/s."""

    nvl_out: np.ndarray
    nvl_in: np.ndarray
    nic_of: np.ndarray  # per GPU: its first NIC, -1 without
    pcie_out: np.ndarray  # per GPU: its link to its NIC
    pcie_in: np.ndarray
    net_out: np.ndarray  # per node: network links out / in
    net_in: np.ndarray


@functools.lru_cache(maxsize=32)
def _ports(fabric: Fabric) -> _Ports:
    n = fabric.num_nodes
    src, dst = fabric.link_src, fabric.link_dst
    cap = np.asarray(fabric.link_capacity_bytes_per_s, dtype=np.float64)
    kind, nk = fabric.link_kind, fabric.node_kind
    nvl = kind == LinkKind.NVLINK
    net = kind == LinkKind.NETWORK
    up = (kind == LinkKind.PCIE) & (nk[src] == NodeKind.GPU) & (nk[dst] == NodeKind.NIC)
    down = (kind == LinkKind.PCIE) & (nk[src] == NodeKind.NIC) & (nk[dst] == NodeKind.GPU)
    nic_of = np.full(n, -1, dtype=np.int64)
    nic_of[src[up][::-1]] = dst[up][::-1]  # a GPU's first NIC (as channels.gpu_rail)
    pcie_out = np.zeros(n)
    pcie_out[src[up][::-1]] = cap[up][::-1]
    pcie_in = np.zeros(n)
    first = nic_of[dst[down]] == src[down]  # the link back from that NIC
    pcie_in[dst[down][first]] = cap[down][first]
    return _Ports(nvl_out=np.bincount(src[nvl], cap[nvl], n), nvl_in=np.bincount(dst[nvl], cap[nvl], n),
                  nic_of=nic_of, pcie_out=pcie_out, pcie_in=pcie_in,
                  net_out=np.bincount(src[net], cap[net], n), net_in=np.bincount(dst[net], cap[net], n))


def _busiest_port_s(src: np.ndarray, dst: np.ndarray, size: np.ndarray, group: np.ndarray,
                    groups: int, fabric: Fabric) -> np.ndarray | None:
    """Per group (a step, or one for the whole schedule): its flows' bytes at their busiest port
    over that port's capacity, seconds (`idle_bound_s`); None where a flow has no such port."""
    worst = np.zeros(groups)
    if src.size == 0:
        return worst
    p = _ports(fabric)
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    server = fabric.gpu_server
    intra = server[src] == server[dst]
    loads: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (group, node, bytes, cap)
    s, d, b, g = src[intra], dst[intra], size[intra], group[intra]
    loads += [(g, s, b, p.nvl_out), (g, d, b, p.nvl_in)]
    s, d, b, g = src[~intra], dst[~intra], size[~intra], group[~intra]
    ns, nd = p.nic_of[s], p.nic_of[d]
    if np.any(ns < 0) or np.any(nd < 0):
        return None
    loads += [(g, s, b, p.pcie_out), (g, ns, b, p.net_out), (g, nd, b, p.net_in), (g, d, b, p.pcie_in)]
    width = np.int64(fabric.num_nodes)
    for g, node, b, capacity in loads:
        if node.size == 0:
            continue
        key, inv = np.unique(g * width + node, return_inverse=True)
        total = np.bincount(inv, b, key.size)
        cap = capacity[key % width]
        if np.any(cap <= 0):
            return None
        np.maximum.at(worst, key // width, total / cap)
    return worst


def idle_bound_s(schedule: Schedule, fabric: Fabric) -> float | None:
    """The time the schedule's payload takes at full link rate on an idle, non-blocking fabric:
    the most loaded port's bytes over its capacity, seconds. A flow inside a server loads the
    sender's NVLink out and the receiver's NVLink in (an NVSwitch: no other link limits it); a
    flow between servers the sender's PCIe link to its NIC and that NIC's network ports, and the
    receiver's. None where a flow has no such port (no NVLink inside, no NIC across): the bound
    is not known."""
    src, dst, size = schedule.pair_bytes()
    got = _busiest_port_s(src, dst, size, np.zeros(src.size, np.int64), 1, fabric)
    return None if got is None else float(got[0])


def step_bounds_s(schedule: Schedule, fabric: Fabric) -> np.ndarray | None:
    """`idle_bound_s` of every step on its own, ``float64[steps]`` seconds (None: not known)."""
    if not schedule.steps:
        return np.zeros(0)
    of, first = schedule.patterns()  # steps of one pattern have one bound: computed once
    src = np.concatenate([st.src_gpu for st in first])
    dst = np.concatenate([st.dst_gpu for st in first])
    size = np.concatenate([st.size_bytes for st in first])
    group = np.repeat(np.arange(len(first)), [st.num_flows for st in first])
    got = _busiest_port_s(src, dst, size, group, len(first), fabric)
    return None if got is None else got[of]


def _model(schedule: Schedule, fabric: Fabric):
    from flowherd.collectives.selector import nccl_model  # selector imports the algorithms

    coll = schedule.collective
    if coll.op not in MODEL_OPS or coll.n < 2 or schedule.algorithm not in NCCL_ALGORITHMS:
        return None
    return nccl_model(fabric, coll.gpus)


def rate_fraction(schedule: Schedule, fabric: Fabric) -> float:
    """The fraction of the ports' rate at which the schedule, alone on the fabric, moves its
    payload at NCCL's algorithm bandwidth (module docstring): ``min(protocol wire fraction,
    idle bound / NCCL's bandwidth time)``; the protocol's own where NCCL has no bandwidth for it
    or the bound is not known. In (0, 1]."""
    return _rate_fraction(schedule, fabric, functools.partial(idle_bound_s, schedule, fabric))


def _rate_fraction(schedule: Schedule, fabric: Fabric, bound_of) -> float:
    """`rate_fraction` with the idle bound from ``bound_of()`` (called only if needed)."""
    got = _model(schedule, fabric)
    wire = schedule.wire_fraction
    if got is None:
        return wire
    _, _, tables = got
    coll = schedule.collective
    bw_gbps = tables.bandwidth.get((coll.op, schedule.algorithm, schedule.protocol), 0.0)
    if bw_gbps <= 0:
        return wire
    bound = bound_of()
    if bound is None or bound <= 0:
        return wire
    model_s = float(coll.size_bytes) / (bw_gbps * 1e9)  # GB/s = 10**9 bytes/s (tuning.cc)
    return max(1e-9, min(wire, bound / model_s))


def _one_kind_chain(schedule: Schedule) -> bool:
    """Every step waits for the one before, and all stay inside a server or all do not."""
    return (all(st.deps == ((i - 1,) if i else ()) for i, st in enumerate(schedule.steps))
            and len({st.intra_server for st in schedule.steps}) <= 1)


def step_floors_s(schedule: Schedule, fabric: Fabric, rate: float) -> np.ndarray | None:
    """Least durations of the steps at NCCL's channel rate, ``float64[steps]`` seconds (None:
    not known). A chain of steps of one kind (ring, tree, PAT, NVLS: one step waits for the one
    before, all over NVLink or all across servers): each step's busiest port's payload over
    ``rate`` of its capacity (`step_bounds_s`), so the chain alone takes what it took at
    ``rate`` of the links. A pipeline whose steps overlap (NVLSTree: chunk k's NVLS
    ReduceScatter beside chunk k-1's AllGather on the same NVLink ports) would run its
    overlapping steps at the ports' full rate under per-step bounds, and one whose phases take
    turns (NVLSTree in one chunk: NVLink, network, NVLink) would pay NCCL's rate on each phase
    in turn: there NCCL's bandwidth time (the idle bound over ``rate``) is spread evenly over
    the steps of its longest chain, which paces the pipeline at NCCL's algorithm rate (NCCL's
    model prices NVLSTree as one pipeline, without fill or drain, tuning.cc)."""
    return _step_floors_s(schedule, fabric, rate, functools.partial(idle_bound_s, schedule, fabric))


def _step_floors_s(schedule: Schedule, fabric: Fabric, rate: float, bound_of) -> np.ndarray | None:
    """`step_floors_s` with the idle bound from ``bound_of()`` (called only if needed)."""
    if _one_kind_chain(schedule):
        bounds = step_bounds_s(schedule, fabric)
        return None if bounds is None else bounds / rate
    whole = bound_of()
    if whole is None:
        return None
    hops, _ = schedule.critical_path(np.ones(schedule.num_steps))
    return np.full(schedule.num_steps, whole / rate / max(hops, 1.0))


def nccl_latency_scale(schedule: Schedule, fabric: Fabric) -> float:
    """Factor on every step's latency that makes the critical path NCCL's latency for the
    collective (module docstring); 1 where NCCL has none or the schedule has no latency."""
    got = _model(schedule, fabric)
    if got is None:
        return 1.0
    comm, _, tables = got
    coll = schedule.collective
    lat_us = algo_latency_us(comm, tables, coll.op, schedule.algorithm, schedule.protocol,
                             float(coll.size_bytes))
    crit, _ = schedule.critical_path()
    if lat_us is None or crit <= 0:
        return 1.0
    return lat_us * us / crit


def as_nccl_runs(schedule: Schedule, fabric: Fabric) -> Schedule:
    """`schedule` with NCCL's bandwidth (`rate_fraction`, as the least durations of its steps
    and of its bytes as one coflow) and latency (`nccl_latency_scale`)."""
    bound = functools.cache(functools.partial(idle_bound_s, schedule, fabric))  # computed once
    rate = _rate_fraction(schedule, fabric, bound)
    k = nccl_latency_scale(schedule, fabric)
    floors = None
    if rate < schedule.wire_fraction * (1 - 1e-12):
        floors = _step_floors_s(schedule, fabric, rate, bound)
    if floors is None and k == 1.0:
        return replace(schedule, rate_fraction=rate)
    # the steps' flows were checked when they were built: retimed, not checked again
    steps = tuple(st.retimed(latency_s=st.latency_s * k,
                             min_transfer_s=0.0 if floors is None else float(floors[i]))
                  for i, st in enumerate(schedule.steps))
    whole = bound() if floors is not None else None
    return replace(schedule, steps=steps, rate_fraction=rate,
                   min_transfer_s=0.0 if whole is None else whole / rate)
