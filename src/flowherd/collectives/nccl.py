"""NCCL's protocols and tuning model, and an NCCL-like (algorithm, protocol) selector.

Every constant below is copied from NVIDIA/nccl ``src/graph/tuning.cc`` at commit
``01afd20a77b5804e0ecf1042509dd9d20ebf9e93`` (NCCL 2.7.5 per makefiles/version.mk; Tree, Ring, CollNet;
``baseLat``, ``hwLat``, ``ll128MaxBwPerCh``, the per-protocol bus-bandwidth discounts and
``treeCorrectionFactor``). NCCL states latencies in microseconds and bandwidths in GB/s;
here they are converted to seconds and bytes per second.

NCCL predicts ``time = latency + size / algbw`` for each (algorithm, protocol) and picks the
fastest (``ncclTopoGetAlgoTime``); `select` does the same, mapping NCCL's Ring and Tree onto
flowherd's ``ring`` and ``tree`` algorithms. Operations NCCL runs as point-to-point
(AllToAll(v), SendRecv) go to ``direct`` with Simple.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from flowherd.collectives.ops import Op
from flowherd.errors import ConfigError
from flowherd.registry import Registry
from flowherd.units import GBps, us


class Protocol(StrEnum):
    SIMPLE = "simple"
    LL = "ll"
    LL128 = "ll128"


PROTOCOLS: Registry[Protocol] = Registry("protocol", {p.value: p for p in Protocol})

# Payload per wire byte. LL sends 8-byte lines of 4 data bytes + a 4-byte flag (NCCL
# src/include/devcomm.h, union ncclLLFifoLine), so half the bandwidth carries data; LL128
# sends 128-byte lines of which 8 bytes are flags, 120/128 (NCCL_LL128_DATAELEMS /
# NCCL_LL128_LINEELEMS); Simple sends raw data.
WIRE_FRACTION: dict[Protocol, float] = {Protocol.SIMPLE: 1.0, Protocol.LL: 0.5,
                                        Protocol.LL128: 120.0 / 128.0}

_ALGOS = ("tree", "ring", "collnet")
_PROTOS = (Protocol.LL, Protocol.LL128, Protocol.SIMPLE)  # NCCL's order
# tuning.cc: baseLat[algo][proto], us; Tree { LL, LL128, Simple }, Ring {...}, CollNet {...}
BASE_LATENCY_S: dict[tuple[str, Protocol], float] = {
    (a, p): v * us
    for a, row in zip(_ALGOS, ((4.4, 4.4, 0.0), (3.6, 10.0, 8.4), (4.4, 4.4, 0.0)), strict=True)
    for p, v in zip(_PROTOS, row, strict=True)
}
# tuning.cc: hwLat[hw][algo][proto], us. "Tree/Simple is the latency a 256kB chunk, which is
# ~ base lat + 256k/12GB/s (+ 256k/12GB/s for the network)."
_HW = ("nvlink", "pci", "net")
_HW_LAT_US = (
    ((0.52, 1.2, 28.0), (0.47, 1.9, 3.4), (0.5, 1.2, 4.0)),   # NVLink
    ((1.0, 1.9, 28.0), (1.0, 2.5, 5.7), (1.0, 1.9, 5.5)),     # PCI
    ((5.0, 8.5, 50.0), (2.7, 4.0, 9.6), (5.0, 5.0, 10.7)),    # NET
)
HW_LATENCY_S: dict[tuple[str, str, Protocol], float] = {
    (h, a, p): v * us
    for h, per_algo in zip(_HW, _HW_LAT_US, strict=True)
    for a, row in zip(_ALGOS, per_algo, strict=True)
    for p, v in zip(_PROTOS, row, strict=True)
}
# tuning.cc: ll128MaxBwPerCh, GB/s per channel, for Broadcast, Reduce, AllGather,
# ReduceScatter, AllReduce.
LL128_MAX_BW_PER_CHANNEL: dict[Op, float] = {
    Op.BROADCAST: 18.8 * GBps, Op.REDUCE: 12.0 * GBps, Op.ALLGATHER: 18.3 * GBps,
    Op.REDUCESCATTER: 15.2 * GBps, Op.ALLREDUCE: 16.7 * GBps,
}
# tuning.cc: treeCorrectionFactor[proto][log2(size / 64)], sizes 64 B .. 128 MiB.
TREE_CORRECTION: dict[Protocol, tuple[float, ...]] = {
    Protocol.LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
                  1.0, 1.0),
    Protocol.LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8,
                     .9, .9, 1.0),
    Protocol.SIMPLE: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7,
                      .8, .9),
}


def step_latency_s(protocol: Protocol | str, *, algorithm_family: str = "ring",
                   hw: str = "net") -> float:
    """Latency one step of an algorithm adds, from NCCL's ``hwLat``.

    NCCL's Tree/Simple entry is the time of a whole 256 kB chunk (tuning.cc comment), and the
    simulator sends chunks explicitly, so Tree/Simple uses the Ring/Simple per-hop value.
    Algorithms NCCL lacks (halving-doubling, direct, hierarchical) take the Ring values:
    each of their steps is a point-to-point hop like a ring step.

    Args:
        protocol: "simple", "ll" or "ll128".
        algorithm_family: "ring" or "tree".
        hw: "nvlink", "pci" or "net" (the link class the step crosses).
    """
    p = PROTOCOLS[str(protocol)]
    fam = "tree" if algorithm_family == "tree" and p != Protocol.SIMPLE else "ring"
    if hw not in _HW:
        raise ConfigError(f"hw must be one of {', '.join(_HW)}, got {hw!r} (hw)")
    return HW_LATENCY_S[(hw, fam, p)]


def base_latency_s(protocol: Protocol | str, *, algorithm_family: str = "ring") -> float:
    """Once-per-collective latency, NCCL's ``baseLat`` (Ring values for non-NCCL algorithms)."""
    p = PROTOCOLS[str(protocol)]
    return BASE_LATENCY_S[("tree" if algorithm_family == "tree" else "ring", p)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """NCCL's prediction for one (algorithm, protocol)."""

    algorithm: str
    protocol: Protocol
    time_s: float
    latency_s: float
    algbw_bytes_per_s: float


def nccl_predictions(op: Op | str, size_bytes: float, n: int, nodes: int, *,
                     bus_bandwidth_bytes_per_s: float = 50 * GBps, channels: int = 4,
                     intra_hw: str = "nvlink", ll128: bool = True) -> list[Prediction]:
    """NCCL's ``ncclTopoTuneModel`` + ``ncclTopoGetAlgoTime`` for Ring and Tree.

    Args:
        op: The collective.
        size_bytes: nccl-tests size (``nBytes`` in NCCL).
        n: Ranks (``nRanks``).
        nodes: Servers (``nNodes``).
        bus_bandwidth_bytes_per_s: Bus bandwidth of all channels together
            (``graph->nChannels * graph->speedIntra/Inter``): a GPU's NIC bandwidth.
        channels: ``graph->nChannels``; only LL128's per-channel cap depends on it. The
            default, 4, is an assumption of flowherd (12.5 GB/s per channel for a 400 Gb/s NIC)
            under which LL128's cap (12-18.8 GB/s per channel) does not bind.
        intra_hw: "nvlink" or "pci", the intra-server link class.
        ll128: Whether LL128 is enabled (NCCL enables it on Volta/Ampere with NVLink).

    Returns:
        One prediction per enabled (algorithm, protocol); Tree only for AllReduce (as in NCCL).
    """
    op = Op(op)
    if n < 1 or nodes < 1 or nodes > n:
        raise ConfigError(f"need 1 <= nodes <= n, got n={n}, nodes={nodes} (n, nodes)")
    if op not in LL128_MAX_BW_PER_CHANNEL:
        raise ConfigError(f"NCCL's tuning model covers broadcast, reduce, allgather, reducescatter "
                          f"and allreduce, got {op.value!r} (op)")
    if n == 1:
        return [Prediction(algorithm="ring", protocol=Protocol.SIMPLE, time_s=0.0, latency_s=0.0,
                           algbw_bytes_per_s=math.inf)]
    ppn = n / nodes
    nsteps = 2 * (n - 1) if op == Op.ALLREDUCE else (
        n - 1 if op in (Op.REDUCESCATTER, Op.ALLGATHER) else n)
    ninter = 2 * (nodes - 1) if op == Op.ALLREDUCE else (
        nodes - 1 if op in (Op.REDUCESCATTER, Op.ALLGATHER) else nodes)
    out = []
    gbps = bus_bandwidth_bytes_per_s / GBps  # NCCL computes in GB/s
    for algo in ("tree", "ring"):
        if op != Op.ALLREDUCE and algo != "ring":
            continue
        for p in _PROTOS:
            if p == Protocol.LL128 and not ll128:
                continue
            bw = gbps
            if algo == "ring" and p == Protocol.LL:
                bw *= 1 / 4 if (nodes > 1 or op in (Op.ALLREDUCE, Op.REDUCE)) else 1 / 3
            if algo == "ring" and p == Protocol.LL128:
                bw = min(bw * (0.7 if ppn < 2 else 0.92),
                         LL128_MAX_BW_PER_CHANNEL[op] / GBps * channels)
            max_tree_bw = 80.0 if nodes > 2 else 110.0
            if algo == "tree":
                bw = min(bw * 0.9, max_tree_bw)
                if p == Protocol.LL:
                    bw *= 1 / 3.8
                if p == Protocol.LL128:
                    bw = min(bw * (7 / 9 if nodes == 1 else 0.915),
                             LL128_MAX_BW_PER_CHANNEL[op] / GBps * channels * 7 / 9)
            ratio = 0.5 if algo == "tree" else n / nsteps
            algbw = bw * ratio
            lat = BASE_LATENCY_S[(algo, p)] / us
            intra = HW_LATENCY_S[(intra_hw, algo, p)] / us
            inter = HW_LATENCY_S[("net", algo, p)] / us
            if nodes > 1 and p == Protocol.LL:
                intra *= 1.8
            if algo == "ring":
                if op in (Op.REDUCE, Op.BROADCAST):
                    lat += HW_LATENCY_S[(intra_hw if nodes == 1 else "net", algo, p)] / us
                else:
                    lat += (nsteps - ninter) * intra + ninter * inter
            else:
                lat += 2 * ((n // nodes - 1) * intra + int(math.log2(nodes)) * inter)
            # ncclTopoGetAlgoTime: tree correction and the ring plateau factor
            log_size = int(math.log2(max(int(size_bytes) >> 6, 1)))
            if algo == "tree" and log_size < 22:
                algbw *= TREE_CORRECTION[p][log_size]
            if (algo == "ring" and p == Protocol.SIMPLE and nodes > 1 and op == Op.ALLREDUCE
                    and size_bytes >= n / 16.0 * 65536):
                lat *= 1.9
            time_us = lat + size_bytes / (1000 * algbw)
            out.append(Prediction(algorithm=algo, protocol=p, time_s=time_us * us,
                                  latency_s=lat * us, algbw_bytes_per_s=algbw * GBps))
    return out


def select(op: Op | str, size_bytes: float, n: int, nodes: int, *,
           bus_bandwidth_bytes_per_s: float = 50 * GBps, channels: int = 4,
           intra_hw: str = "nvlink", ll128: bool = True) -> tuple[str, Protocol]:
    """NCCL-like choice of (algorithm, protocol): the one NCCL's model predicts fastest.

    AllToAll, AllToAllv and SendRecv, which NCCL runs as point-to-point sends, get
    ``("direct", Protocol.SIMPLE)``. Arguments as in `nccl_predictions`.

    >>> select("allreduce", 1 << 30, 64, 8)
    ('ring', <Protocol.SIMPLE: 'simple'>)
    >>> select("allreduce", 1024, 64, 8)
    ('tree', <Protocol.LL: 'll'>)
    """
    op = Op(op)
    if op in (Op.ALLTOALL, Op.ALLTOALLV, Op.SENDRECV):
        return "direct", Protocol.SIMPLE
    preds = nccl_predictions(op, size_bytes, n, nodes, bus_bandwidth_bytes_per_s=bus_bandwidth_bytes_per_s,
                             channels=channels, intra_hw=intra_hw, ll128=ll128)
    best = min(preds, key=lambda p: p.time_s)
    return best.algorithm, best.protocol
