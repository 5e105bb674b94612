"""NCCL 2.30's tuning model: per (collective, algorithm, protocol) bandwidth and latency, and the
predicted time NCCL picks its algorithm, protocol and channel count by.

A port of NVIDIA/nccl ``src/graph/tuning.cc`` (``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``)
and of the channel tuning of ``src/enqueue.cc`` (``topoGetAlgoInfo``) at NCCL 2.30.7
(``makefiles/version.mk``; commit 5067397c of github.com/NVIDIA/nccl). Every constant below
names the file it is copied from. NCCL states latencies in microseconds and bandwidths in GB/s
(10**9 bytes per second); the port computes in those units, as NCCL does, and converts at
its edges (`predict`).

The inputs NCCL takes from its topology search (per algorithm ``graph->nChannels``,
``bwIntra``, ``bwInter``, ``latencyInter``, the link types) are a `Graph` each; they come
from the fabric through `flowherd.collectives.topology`. CollNet (in-network reduction of the
NICs' switches) is not modelled: flowherd's fabrics have no SHARP-capable network switches,
and NCCL disables it without a CollNet plugin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from flowherd.collectives.ops import Op
from flowherd.errors import ConfigError

#: NCCL's algorithms in NCCL's order (src/include/device.h, NCCL_ALGO_*), by flowherd name.
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvlstree", "pat")
#: NCCL's protocols in NCCL's order (NCCL_PROTO_LL, NCCL_PROTO_LL128, NCCL_PROTO_SIMPLE).
PROTOCOL_NAMES = ("ll", "ll128", "simple")
#: The collectives NCCL's model covers (ncclFunc_t order does not matter here).
MODEL_OPS = (Op.BROADCAST, Op.REDUCE, Op.ALLGATHER, Op.REDUCESCATTER, Op.ALLREDUCE)


class Arch(StrEnum):
    """NCCL's compute-capability classes (NCCL_VOLTA/AMPERE/HOPPER/BLACKWELL_COMPCAP_IDX)."""

    VOLTA = "volta"
    AMPERE = "ampere"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"


_ARCH_INDEX = {Arch.VOLTA: 0, Arch.AMPERE: 1, Arch.HOPPER: 2, Arch.BLACKWELL: 3}
#: Compute capability (x10) of each class, for the "minCompCap >= 90" tests of tuning.cc.
COMPCAP = {Arch.VOLTA: 70, Arch.AMPERE: 80, Arch.HOPPER: 90, Arch.BLACKWELL: 100}

# ---- constants of src/graph/tuning.cc, NCCL 2.30.7 ---------------------------------------------
#: ``nvlsEfficiency[NCCL_NUM_COMPCAPS]``.
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: ``ncclTunerConstantsDefaults.baseLatencies[algo][proto]``, us (LL, LL128, Simple).
BASE_LATENCY_US = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0, 0, 0), "collnet_chain": (0, 0, 0),
    "nvls": (0, 0, 0), "nvlstree": (0, 0, 0), "pat": (8.0, 8.0, 8.0),
}
#: ``hwLatencies[hw][algo][proto]``, us; hw NVLINK, PCI, NET.
HW_LATENCY_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0, 0, 3.7),
               "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 25), "nvlstree": (0, 0, 25),
               "pat": (0, 0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0, 0, 3.7),
            "collnet_chain": (0, 0, 2.8), "nvls": (0, 0, 0), "nvlstree": (0, 0, 0),
            "pat": (0, 0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0, 0, 31),
            "collnet_chain": (0, 0, 30), "nvls": (0, 0, 18), "nvlstree": (0, 0, 20.9),
            "pat": (0, 0, 14)},
}
#: ``llMaxBws[index1][nNodes index]``: index1 the GPU class on one node, the CPU class
#: (0 Intel, 1 AMD) across nodes; nNodes index 1, 2, >2 nodes.
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
#: ``perChMaxRingLL128Bws[arch][nNodes index]``.
PER_CH_MAX_RING_LL128_BW = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                            (40.0, 40.0, 40.0))
#: ``perChMaxTreeLL128Bws``.
PER_CH_MAX_TREE_LL128_BW = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                            (55.6, 31.67, 20.0))
#: ``perChMaxTreeBws``.
PER_CH_MAX_TREE_BW = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
#: ``perChMaxNVLSTreeBws``.
PER_CH_MAX_NVLSTREE_BW = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5),
                          (0.0, 96.0, 80.0))
#: ``treeCorrectionFactor[proto][log2(nBytes / 64)]``, 64 B .. 512 MiB (LL, LL128, Simple).
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
     1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
     1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
     .9),
)
#: ``getNetOverhead``: us per network post on Intel x86 (2.0 on AMD).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
# src/include/device.h: NCCL_SIMPLE_MAX_NTHREADS 512, NCCL_LL_MAX_NTHREADS 512,
# NCCL_LL128_MAX_NTHREADS 640, NCCL_MAX_NTHREADS 640; src/graph/topo.h PCI_BW 12.0.
SIMPLE_MAX_NTHREADS, LL_MAX_NTHREADS, LL128_MAX_NTHREADS, MAX_NTHREADS = 512, 512, 640, 640
PCI_BW = 12.0
# src/include/comm.h: NCCL_LL_THREAD_THRESHOLD 8, NCCL_LL128_THREAD_THRESHOLD 8,
# NCCL_SIMPLE_THREAD_THRESHOLD 64.
THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
#: src/include/device.h NCCL_MAX_NVLS_ARITY.
MAX_NVLS_ARITY = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class Graph:
    """What NCCL's topology search found for one algorithm (``struct ncclTopoGraph``).

    Attributes:
        n_channels: ``nChannels`` (0: the pattern was not found, the algorithm is off).
        bw_intra: ``bwIntra``, GB/s per channel inside a node.
        bw_inter: ``bwInter``, GB/s per channel across nodes.
        latency_inter_us: ``latencyInter`` (the net plugin's latency; 0 for IB).
        intra_nvlink: ``typeIntra == LINK_NVL`` (else PCI).
        intra_le_nvb: ``typeIntra <= PATH_NVB`` (LL128 needs it).
        inter_le_pxn: ``typeInter <= PATH_PXN`` (LL128 on Hopper+ needs it).
        same_channels: ``sameChannels``.
        simple_tree: ``maxTreePattern == NCCL_TOPO_PATTERN_TREE`` (Tree bandwidth x 0.85).
    """

    n_channels: int
    bw_intra: float
    bw_inter: float
    latency_inter_us: float = 0.0
    intra_nvlink: bool = True
    intra_le_nvb: bool = True
    inter_le_pxn: bool = True
    same_channels: bool = True
    simple_tree: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Comm:
    """A communicator as NCCL's tuning sees it.

    Attributes:
        n_ranks: ``nRanks``.
        n_nodes: ``nNodes``.
        arch: GPU class (all GPUs alike: ``minCompCap == maxCompCap``).
        graphs: `Graph` per algorithm name (`ALGORITHMS`); missing ones are off.
        n_channels: ``comm->nChannels`` after ``ncclTopoPostset`` (ring/tree channels).
        nvls_channels: ``comm->nvlsChannels`` (0: no NVLS).
        nvls_support: Whether NVLS is usable (NVSwitch with in-switch reduction).
        cpu_vendor: "intel" or "amd".
        local_ranks: Largest number of ranks on one node.
    """

    n_ranks: int
    n_nodes: int
    arch: Arch
    graphs: dict[str, Graph]
    n_channels: int
    nvls_channels: int = 0
    nvls_support: bool = False
    cpu_vendor: str = "intel"
    local_ranks: int = 1

    @property
    def compcap(self) -> int:
        return COMPCAP[self.arch]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tables:
    """``comm->bandwidths`` (GB/s, algorithm bandwidth) and ``comm->latencies`` (us), 0 = off."""

    bandwidth: dict[tuple[Op, str, str], float] = field(default_factory=dict)
    latency_us: dict[tuple[Op, str, str], float] = field(default_factory=dict)
    max_threads: dict[tuple[str, str], int] = field(default_factory=dict)


def _log2i(x: int) -> int:
    return int(x).bit_length() - 1 if x > 0 else -1


def _max_threads(comm: Comm) -> dict[tuple[str, str], int]:
    """``comm->maxThreads[algo][proto]`` without NCCL_NTHREADS overrides (tuning.cc)."""
    ring = comm.graphs.get("ring")
    low = ring is not None and ring.bw_intra * ring.n_channels <= PCI_BW
    mt = {}
    for a in ALGORITHMS:
        mt[(a, "simple")] = MAX_NTHREADS if a in ("collnet_direct", "collnet_chain", "nvls",
                                                   "nvlstree") else SIMPLE_MAX_NTHREADS
        mt[(a, "ll")] = LL_MAX_NTHREADS
        mt[(a, "ll128")] = LL128_MAX_NTHREADS
    mt[("ring", "simple")] = 256 if low else SIMPLE_MAX_NTHREADS
    return mt


def tune(comm: Comm) -> Tables:
    """``ncclTopoTuneModel``: bandwidth and latency of every (op, algorithm, protocol).

    Environment overrides (NCCL_ALGO, NCCL_PROTO, ...) are not modelled: the defaults are.
    """
    tables = Tables(max_threads=_max_threads(comm))
    n_ranks, n_nodes = comm.n_ranks, comm.n_nodes
    if n_ranks <= 1:
        return tables
    ai = _ARCH_INDEX[comm.arch]
    index2 = n_nodes - 1 if n_nodes <= 2 else 2
    index1 = ai if n_nodes == 1 else (1 if comm.cpu_vendor == "amd" else 0)
    ll_max_bw = LL_MAX_BW[index1][index2]
    per_ch_tree = PER_CH_MAX_TREE_BW[ai][index2]
    per_ch_ring_ll128 = PER_CH_MAX_RING_LL128_BW[ai][index2]
    per_ch_tree_ll128 = PER_CH_MAX_TREE_LL128_BW[ai][index2]
    per_ch_nvlstree = PER_CH_MAX_NVLSTREE_BW[ai][index2]
    ppn = n_ranks / n_nodes
    pat_enable = comm.compcap >= 60 and n_nodes == n_ranks
    for op in MODEL_OPS:
        nsteps = (2 * (n_ranks - 1) if op == Op.ALLREDUCE else
                  n_ranks - 1 if op in (Op.REDUCESCATTER, Op.ALLGATHER) else n_ranks)
        for a in ALGORITHMS:
            g = comm.graphs.get(a)
            if g is None or g.n_channels == 0:
                continue
            if op in (Op.BROADCAST, Op.REDUCE) and a != "ring":
                continue
            if op in (Op.REDUCESCATTER, Op.ALLGATHER) and a not in ("pat", "ring", "nvls",
                                                                     "collnet_direct"):
                continue
            if op == Op.ALLREDUCE and a == "pat":
                continue
            intra_hw = "nvlink" if g.intra_nvlink else "pci"
            hw = intra_hw if n_nodes == 1 else "net"
            for pi, p in enumerate(PROTOCOL_NAMES):
                if a in ("nvls", "nvlstree") and p != "simple":
                    continue
                if a == "pat" and (p != "simple" or not pat_enable):
                    continue
                collnet = a in ("collnet_direct", "collnet_chain")
                bw = g.bw_intra if n_nodes <= 2 or collnet else g.bw_inter
                if a in ("nvls", "nvlstree"):
                    if g.n_channels < 2:  # NVLS/NVLSTree needs at least 2 channels
                        continue
                    intra_bw = g.bw_intra * NVLS_EFFICIENCY[ai] * (g.n_channels - 1) / g.n_channels
                    intra_bw *= 2.0 if op == Op.ALLREDUCE else (ppn - 1) / ppn
                    inter_bw = g.bw_inter * (2 if n_nodes <= 2 and a == "nvlstree" else 1)
                    bw = min(intra_bw, inter_bw, per_ch_nvlstree if a == "nvlstree" else math.inf)
                bus_bw = g.n_channels * bw
                if a == "ring" and p == "ll":
                    bus_bw = min(ll_max_bw, bus_bw * .5)
                if a == "ring" and p == "ll128":
                    bus_bw = min(bus_bw * 0.92, g.n_channels * per_ch_ring_ll128)
                if a == "tree" and op == Op.ALLREDUCE:
                    bus_bw = min(bus_bw * .92, g.n_channels * per_ch_tree)
                if a == "tree" and p == "ll":
                    bus_bw = min(bus_bw / 3.8, ll_max_bw)
                if a == "tree" and p == "ll128":
                    bus_bw = min(bus_bw * (7.0 / 9.0 if n_nodes == 1 else 120.0 / 128.0),
                                 g.n_channels * per_ch_tree_ll128)
                if a == "tree" and g.simple_tree:
                    bus_bw *= .85
                if a == "pat":
                    bus_bw *= .75
                if collnet:
                    bus_bw = 0.0  # no CollNet plugin (module docstring)
                # NVLS AllGather/ReduceScatter across nodes needs CollNet (tuning.cc)
                if a == "nvls" and op in (Op.ALLGATHER, Op.REDUCESCATTER) and n_nodes > 1:
                    bus_bw = 0.0
                # bus bandwidth -> algorithm bandwidth
                if not (a != "ring" and op in (Op.ALLGATHER, Op.REDUCESCATTER)):
                    ratio = n_ranks / nsteps if a in ("ring", "nvls", "nvlstree") else .5
                    bus_bw *= ratio
                lat = BASE_LATENCY_US[a][pi]
                intra_lat = HW_LATENCY_US[intra_hw][a][pi]
                # with ppn = 1 latencies are fully exposed: NCCL takes the Tree network latency
                inter_lat = HW_LATENCY_US["net"]["tree" if ppn == 1 else a][pi]
                inter_lat += g.latency_inter_us
                if p == "simple":  # the flush's extra latency
                    inter_lat += g.latency_inter_us
                if a == "ring":
                    hw_lat = HW_LATENCY_US[hw][a][pi]
                    if op in (Op.REDUCE, Op.BROADCAST):
                        if g.same_channels:
                            lat += hw_lat
                        else:
                            if p == "simple":
                                hw_lat = HW_LATENCY_US[hw]["tree"][pi]
                            lat += nsteps * hw_lat
                    else:
                        net_overhead = 0.0
                        if n_nodes > 1:
                            net_overhead = NET_OVERHEAD_US[comm.cpu_vendor]
                            if p == "simple":
                                net_overhead *= 3
                        intra_lat = max(intra_lat, net_overhead)
                        n_inter = (0 if n_nodes == 1 else
                                   2 * (n_nodes - 1) if op == Op.ALLREDUCE else n_nodes - 1)
                        lat += (nsteps - n_inter) * intra_lat + n_inter * inter_lat
                elif a == "tree":
                    if op == Op.ALLREDUCE:
                        lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat
                                    + _log2i(n_nodes) * inter_lat)
                elif a == "nvls":
                    lat = intra_lat + (inter_lat if n_nodes > 1 else 0.0)
                elif a == "nvlstree":
                    lat += intra_lat + 2 * _log2i(n_nodes) * inter_lat
                elif a == "pat":
                    lat += _log2i(n_nodes) * (inter_lat / 3.5) + n_ranks * 2.8
                # algorithms/protocols enabled by default (the end of ncclTopoTuneModel)
                off = (n_nodes == 1 and a == "nvlstree") or (a == "nvls" and n_nodes > 1)
                off |= a in ("nvls", "nvlstree") and not comm.nvls_support
                if p == "ll128":
                    # enabled by default on Hopper/Blackwell up to PXN, else up to PXB (which
                    # flowherd's fabrics, GPU and NIC behind one switch, always are), and only
                    # with NVLink (or better) inside the node
                    off |= not g.intra_le_nvb or (comm.compcap >= 90 and not g.inter_le_pxn)
                    off |= comm.compcap < 70
                tables.bandwidth[(op, a, p)] = 0.0 if off else bus_bw
                tables.latency_us[(op, a, p)] = lat
    return tables


def algo_latency_us(comm: Comm, tables: Tables, op: Op, algorithm: str, protocol: str,
                    size_bytes: float, num_pipe_ops: int = 1) -> float | None:
    """The latency term of ``ncclTopoGetAlgoTime``, us (the ring's plateau factor included);
    None where the algorithm is off."""
    if tables.bandwidth.get((op, algorithm, protocol), 0.0) == 0:
        return None
    lat = tables.latency_us[(op, algorithm, protocol)]
    if (algorithm == "ring" and protocol == "simple" and comm.n_nodes > 1 and op == Op.ALLREDUCE
            and int(size_bytes) // (comm.n_channels * comm.n_ranks) >= 64):
        lat *= 1.9 if comm.compcap < 80 else 1.4  # plateau effect of ring
    # latCount: DIVUP(numPipeOps, NCCL_MAX_DEV_WORK_BATCH_COLLS) = 1 for one call off the ring
    return lat * (num_pipe_ops if algorithm == "ring" else 1)


def algo_time_us(comm: Comm, tables: Tables, op: Op, algorithm: str, protocol: str,
                 size_bytes: float, num_pipe_ops: int = 1) -> float | None:
    """``ncclTopoGetAlgoTime``: predicted time, us; None where the algorithm is off."""
    bw = tables.bandwidth.get((op, algorithm, protocol), 0.0)
    if bw == 0:
        return None
    lat = algo_latency_us(comm, tables, op, algorithm, protocol, size_bytes, num_pipe_ops)
    pi = PROTOCOL_NAMES.index(protocol)
    log_size = _log2i(int(size_bytes) >> 6)
    if algorithm == "tree" and op == Op.ALLREDUCE and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[pi][log_size]
    # NVLSTree's correction applies on Blackwell x86 only (tuning.cc); not on Hopper
    if (algorithm == "nvlstree" and op == Op.ALLREDUCE and 0 <= log_size < 24
            and comm.compcap >= 100):
        bw *= TREE_CORRECTION[pi][log_size]
    return lat + size_bytes / (1000 * bw)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """NCCL's choice for one collective call (``topoGetAlgoInfo``)."""

    algorithm: str
    protocol: str
    channels: int
    time_us: float


def choose(comm: Comm, tables: Tables, op: Op, size_bytes: float) -> Choice:
    """``topoGetAlgoInfo``: the fastest (algorithm, protocol) and its channel count."""
    op = Op(op)
    if op not in MODEL_OPS:
        raise ConfigError(f"NCCL's tuning model covers {', '.join(o.value for o in MODEL_OPS)}, "
                          f"got {op.value!r} (op)")
    if comm.n_ranks == 1:
        return Choice(algorithm="ring", protocol="simple", channels=1, time_us=0.0)
    best: tuple[float, str, str] | None = None
    for a in ALGORITHMS:  # NCCL's loop order; ties keep the first
        if a in ("nvls", "nvlstree") and op != Op.ALLREDUCE and comm.local_ranks > MAX_NVLS_ARITY:
            continue
        for p in PROTOCOL_NAMES:
            t = algo_time_us(comm, tables, op, a, p, size_bytes)
            if t is not None and t >= 0 and (best is None or t < best[0]):
                best = (t, a, p)
    if best is None:
        raise ConfigError(f"no algorithm/protocol available for {op.value} on this communicator "
                          "(op)")
    t, a, p = best
    nc = comm.n_channels
    nt = tables.max_threads[(a, p)]
    threshold = THREAD_THRESHOLD[p] * (comm.n_ranks if (a, p) == ("ring", "ll") else 1)
    if a in ("nvls", "nvlstree"):
        # "NVLS should not need more than 16 channels to get peak BW" (enqueue.cc)
        nc = min(comm.nvls_channels, comm.n_channels) if (comm.n_nodes > 1 and a == "nvls") \
            else comm.nvls_channels
    else:
        while size_bytes < nc * nt * threshold and nc >= 2:
            nc -= 1
    return Choice(algorithm=a, protocol=p, channels=max(1, nc), time_us=t)
