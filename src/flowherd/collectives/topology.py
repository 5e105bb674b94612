"""What NCCL's topology search would find on a fabric: the inputs of its tuning model.

NCCL (``src/graph/search.cc``, ``ncclTopoCompute``, NCCL 2.30.7) searches, per pattern (ring,
tree, NVLS), for the largest number of channels at the highest per-channel bandwidth its links
sustain, trying the speeds of a fixed array from the top; then duplicates channels
(``ncclTopoDupChannels``) and, in ``src/graph/connect.cc`` (``ncclTopoPostset``), doubles them
again. This module redoes that search in closed form for flowherd's servers (GPUs on an
NVSwitch or NVLink mesh, NICs behind PCIe, one network): per speed, the channels a resource
allows are its capacity over the speed, the resources being each NIC (one channel per
``nic_bw / speed``), each GPU's PCIe link to its NIC, and each GPU's NVLink bandwidth.

Bandwidths are in NCCL's units, GB/s. NCCL counts an NVLink at ``SM90_NVLINK_BW`` = 20.6 GB/s
on Hopper (``src/graph/topo.h``; 20.0 on Volta/Ampere, 40.1 on Blackwell) where the link
signals 25 GB/s per direction (50 on Blackwell), so a GPU's NVLink bandwidth in the fabric is
scaled by that ratio (H100: 450 GB/s -> 370.8 GB/s, NCCL's 18 links x 20.6). A NIC counts its
network ports' capacity (NCCL: ``speed / 8000``, 400 Gb/s -> 50 GB/s). A PCIe link counts
``width * speed / 80`` GB/s with ``speed`` from ``kvDictPciGen`` (``src/graph/topo.cc``):
240 for 32 GT/s, i.e. 24 Gb/s of a lane's 32, so NCCL sees 0.75 of the fabric's PCIe rate
(Gen5 x16: 64 GB/s -> 48 GB/s, as NCCL logs ``PCI[48.0]`` on H100 servers).

The tree search (``NCCL_TOPO_PATTERN_BALANCED_TREE`` first) counts half a channel's network
bandwidth on each of the first two GPUs, which must reach the same NIC at the path type being
tried; on Hopper and later, when that fails at the first path type (every GPU with a NIC of its
own, as on DGX H100), the search falls back to ``NCCL_TOPO_PATTERN_TREE`` ("Try a simpler tree",
search.cc) before widening the path type, and the tuning model then takes 0.85 of the Tree
bandwidth (tuning.cc, ``maxTreePattern == NCCL_TOPO_PATTERN_TREE``). One GPU per node always
searches ``NCCL_TOPO_PATTERN_TREE`` (search.cc: ``ngpus == 1``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowherd.collectives.tuning import COMPCAP, MAX_NVLS_ARITY, Arch, Comm, Graph
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind, NodeKind

# src/graph/search.cc, NCCL 2.30.7: the speeds (GB/s per channel) the search tries, in order.
SPEEDS_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEEDS_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                3.0, 2.4, 1.2, 0.24, 0.12)
SM90_SPEEDS_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
SM90_SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                     2.4, 1.2, 0.24, 0.12)
SM100_SPEEDS_INTRA = (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
SM100_SPEEDS_INTER = (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                      15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
#: src/include/device.h MAXCHANNELS; the ring search's maxChannels is MAXCHANNELS / 2 (init.cc).
MAXCHANNELS = 64
#: src/transport/nvls.cc NVLS_NCHANNELS_SM90 / _SM100 / _SM100_NVL.
NVLS_CHANNELS = {Arch.HOPPER: 16, Arch.BLACKWELL: 32}
NVLS_CHANNELS_SM100_ONE_NODE = 24
#: NVLink GB/s per link NCCL counts (topo.h SM*_NVLINK_BW) over the link's signalling rate.
NVLINK_EFFICIENCY = {Arch.VOLTA: 20.0 / 25.0, Arch.AMPERE: 20.0 / 25.0, Arch.HOPPER: 20.6 / 25.0,
                     Arch.BLACKWELL: 40.1 / 50.0}
#: NCCL's PCIe GB/s over the link's raw rate: ``kvDictPciGen`` 240 (x100 Mb/s per lane) for
#: 32 GT/s, 120 for 16 GT/s, 60 for 8 GT/s (src/graph/topo.cc, NCCL 2.30.7).
PCIE_EFFICIENCY = 0.75
#: GPU catalog name -> NCCL compute-capability class (CUDA compute capability of the part).
GPU_ARCH = {"v100": Arch.VOLTA, "a100": Arch.AMPERE, "a800": Arch.AMPERE, "h100": Arch.HOPPER,
            "h800": Arch.HOPPER, "h200": Arch.HOPPER, "b200": Arch.BLACKWELL,
            "gb200": Arch.BLACKWELL}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerView:
    """The communicator's part of the fabric NCCL's search sees.

    Attributes:
        n_ranks, n_nodes: Ranks and servers of the communicator.
        local_ranks: Most ranks on one server.
        arch: GPU class (of the first rank's server).
        nics: NICs local to the communicator's GPUs on the busiest server.
        nic_bw: Network GB/s of one NIC (the smallest).
        pci_bw: GB/s of a GPU's PCIe link to its NIC (the smallest).
        nvl_bw: NCCL's NVLink GB/s of one GPU (0 without NVLink).
        nvswitch: Whether the GPUs meet at an NVSwitch.
        nvls: Whether every server's NVSwitch does in-switch reduction.
        shared_nic: Whether two of the communicator's GPUs on one server share a NIC (PCIe).
    """

    n_ranks: int
    n_nodes: int
    local_ranks: int
    arch: Arch
    nics: int
    nic_bw: float
    pci_bw: float
    nvl_bw: float
    nvswitch: bool
    nvls: bool
    shared_nic: bool = False


def server_view(fabric: Fabric, gpus: Sequence[int]) -> ServerView:
    """Read the facts NCCL's search uses off the fabric for the communicator `gpus`."""
    g = np.asarray(list(gpus), dtype=np.int64)
    if g.size == 0:
        raise ConfigError("a communicator needs at least one GPU (gpus)")
    if g.min() < 0 or g.max() >= fabric.num_gpus:
        raise ConfigError(f"GPU ids must be in 0..{fabric.num_gpus - 1} (the GPUs of fabric "
                          f"{fabric.name!r}), got {int(g.max())} (gpus)")
    if np.any(np.diff(np.sort(g)) == 0):  # not np.unique: numpy 2.4's imports numpy.ma (0.02 s)
        raise ConfigError(f"a communicator's GPUs must be distinct, got {g.tolist()} (gpus)")
    server = fabric.gpu_server[g]
    servers, counts = np.unique(server, return_counts=True)
    arch = GPU_ARCH.get(str(fabric.gpu_type[int(server[0])]).lower(), Arch.AMPERE)
    kind = fabric.link_kind
    nics_per_server, nic_bw, pci_bw, nvl_bw, nvswitch = [], math.inf, math.inf, math.inf, True
    shared_nic = False
    for s in servers:
        local = g[server == s]
        nics: set[int] = set()
        for gpu in local:
            out = fabric.out_links(int(gpu))
            pcie = out[kind[out] == LinkKind.PCIE]
            for lk in pcie:
                nic = int(fabric.link_dst[lk])
                if fabric.node_kind[nic] != NodeKind.NIC:
                    continue
                shared_nic |= nic in nics
                nics.add(nic)
                pci_bw = min(pci_bw, PCIE_EFFICIENCY * fabric.link_capacity_bytes_per_s[lk] / 1e9)
            nvl = out[kind[out] == LinkKind.NVLINK]
            nvl_bw = min(nvl_bw, float(fabric.link_capacity_bytes_per_s[nvl].sum()) / 1e9)
            nvswitch &= bool(nvl.size) and bool(
                np.all(fabric.node_kind[fabric.link_dst[nvl]] == NodeKind.NVSWITCH))
        for nic in nics:
            out = fabric.out_links(nic)
            net = out[kind[out] == LinkKind.NETWORK]
            if net.size:
                nic_bw = min(nic_bw, float(fabric.link_capacity_bytes_per_s[net].sum()) / 1e9)
        nics_per_server.append(len(nics))
    nvl_bw = 0.0 if not math.isfinite(nvl_bw) else nvl_bw * NVLINK_EFFICIENCY[arch]
    return ServerView(
        n_ranks=int(g.size), n_nodes=len(servers), local_ranks=int(counts.max()), arch=arch,
        nics=max(1, min(nics_per_server)), nic_bw=nic_bw if math.isfinite(nic_bw) else 12.0,
        pci_bw=pci_bw if math.isfinite(pci_bw) else 12.0, nvl_bw=nvl_bw,
        nvswitch=nvswitch and nvl_bw > 0,
        nvls=all(fabric.nvls(int(s)) for s in servers), shared_nic=shared_nic)


def _speeds(arch: Arch, inter: bool) -> tuple[float, ...]:
    cc = COMPCAP[arch]
    if inter:
        return SM100_SPEEDS_INTER if cc >= 100 else SM90_SPEEDS_INTER if cc >= 90 else SPEEDS_INTER
    return SM100_SPEEDS_INTRA if cc >= 100 else SM90_SPEEDS_INTRA if cc >= 90 else SPEEDS_INTRA


def _ring_channels(v: ServerView, speed: float, chain: bool = False) -> int:
    """Channels of `speed` a ring (`chain`: a tree) finds: each crosses a node on one NIC (in
    and out), and m-1 of a node's m GPUs send over NVLink (the last sends to the NIC over PCIe;
    a tree's chain inside a node has m-1 hops, also on one node)."""
    m = v.local_ranks
    if m > 1:
        intra = v.nvl_bw if v.nvl_bw > 0 else v.pci_bw
        share = (m - 1) / m if v.n_nodes > 1 or chain else 1.0
        by_intra = math.floor(intra / (speed * share) + 1e-9)
    else:
        by_intra = MAXCHANNELS
    if v.n_nodes == 1:
        return by_intra
    by_nic = v.nics * math.floor(min(v.nic_bw, v.pci_bw) / speed + 1e-9)
    return min(by_intra, by_nic)


def _nvls_channels(v: ServerView, speed: float) -> int:
    """NVLS heads at `speed`: every GPU link carries one share per head, the head's link two
    (``ncclTopoSearchTryNvls``); across nodes each head needs a NIC of its own."""
    heads = min(MAX_NVLS_ARITY, v.local_ranks)
    heads = min(heads, math.floor(v.nvl_bw / speed + 1e-9) - 1)
    if v.n_nodes > 1:
        heads = min(heads, v.nics * (1 if min(v.nic_bw, v.pci_bw) >= speed else 0))
    return max(0, heads)


def _search(v: ServerView, channels_at, max_channels: int, min_channels: int,
            total_bw: float, max_bw: float, dup: bool) -> tuple[int, float]:
    """Pass 1 of ``ncclTopoCompute`` (highest speed first, lower while a lower speed may still
    give more bandwidth) and ``ncclTopoDupChannels``. Returns (channels, GB/s per channel)."""
    speeds = _speeds(v.arch, v.n_nodes > 1)
    i = 0
    while i < len(speeds) - 1 and (speeds[i] > max_bw or speeds[i] * min_channels > total_bw):
        i += 1
    best: tuple[int, float] | None = None
    while True:
        ch = min(max_channels, channels_at(speeds[i]))
        if ch >= min_channels and (best is None or ch * speeds[i] > best[0] * best[1]):
            best = (ch, speeds[i])
        if best is not None and (best[0] == max_channels or best[0] * best[1] >= total_bw):
            break
        if i < len(speeds) - 1 and (best is None or speeds[i + 1] / best[1] > .49):
            i += 1
            continue
        break
    if best is None:
        return 0, 0.0
    ch, bw = best
    if dup and bw >= 25.0 and not (COMPCAP[v.arch] > 80 and bw < 50.0 and ch > 4):
        dup_ch = min(ch * 2, max_channels)
        bw /= math.ceil(dup_ch / ch)
        ch = dup_ch
    return ch, bw


def _raise_speed(v: ServerView, channels_at, ch: int, bw: float) -> float:
    """Pass 2 for rings: the highest speed that still gives `ch` channels."""
    for s in _speeds(v.arch, v.n_nodes > 1):
        if s <= bw:
            break
        if channels_at(s) >= ch:
            return s
    return bw


def _tree_total_bw(v: ServerView, total_bw: float) -> float:
    """search.cc: patterns other than the ring need not come back to the starting NIC, so
    ``totalBw *= ndevs / (ndevs - 1)`` (ndevs: the node's GPUs)."""
    m = v.local_ranks
    return total_bw * m / (m - 1) if m > 1 else total_bw


def _tree(v: ServerView, ring_channels: int, total_bw: float, path_bw: float,
          nvlink: bool) -> Graph:
    """The tree graph: ``ncclTopoCompute`` held to the ring's channel count (init.cc:
    ``treeGraph->minChannels = maxChannels = ringGraph->nChannels``), then pass 2's raise of
    ``bwIntra`` while it stays under twice ``bwInter`` (search.cc, "increase bwIntra for trees")."""
    inter = v.n_nodes > 1
    tree_at = lambda s: _ring_channels(v, s, chain=True)  # noqa: E731
    ch, bw = _search(v, tree_at, ring_channels, ring_channels, _tree_total_bw(v, total_bw),
                     path_bw, dup=True)
    if ch == 0:
        ch, bw = ring_channels, _speeds(v.arch, inter)[-1]
    bw_intra = bw
    speeds = _speeds(v.arch, inter)
    i = speeds.index(bw) if bw in speeds else len(speeds) - 1
    m = v.local_ranks
    intra = v.nvl_bw if v.nvl_bw > 0 else v.pci_bw
    while i > 0 and bw_intra < 2 * bw:
        s = speeds[i - 1]
        if m > 1 and math.floor(intra / (s * (m - 1) / m) + 1e-9) < ch:
            break  # the chain inside the node cannot carry the higher speed
        bw_intra, i = s, i - 1
    # Hopper+ with a NIC per GPU (or one GPU per node) ends on NCCL_TOPO_PATTERN_TREE (module
    # docstring): the tuning model's Tree bandwidth x 0.85
    simple = inter and (m == 1 or (COMPCAP[v.arch] >= 90 and not v.shared_nic))
    return Graph(n_channels=ch, bw_intra=bw_intra, bw_inter=bw, intra_nvlink=nvlink,
                 intra_le_nvb=nvlink or m == 1, simple_tree=simple)


def nccl_comm(fabric: Fabric, gpus: Sequence[int]) -> tuple[Comm, ServerView]:
    """The `Comm` (graphs, channel counts) NCCL would set up for the communicator `gpus`."""
    v = server_view(fabric, gpus)
    inter = v.n_nodes > 1
    if v.n_ranks == 1 or (v.local_ranks == 1 and not inter):
        g = Graph(n_channels=1, bw_intra=5000.0, bw_inter=5000.0)  # LOC_BW (topo.h)
        return Comm(n_ranks=v.n_ranks, n_nodes=v.n_nodes, arch=v.arch, graphs={"ring": g},
                    n_channels=1, local_ranks=v.local_ranks), v
    intra_bw = v.nvl_bw if v.nvl_bw > 0 else v.pci_bw
    path_bw = min(v.nic_bw, v.pci_bw) if inter else intra_bw  # system->maxBw
    total_bw = max(v.pci_bw, v.nvl_bw)  # getTotalBw
    ring_at = lambda s: _ring_channels(v, s)  # noqa: E731
    ch, bw = _search(v, ring_at, MAXCHANNELS // 2, 1, total_bw, path_bw, dup=True)
    if ch == 0:  # search fallback: one channel of the slowest speed
        ch, bw = 1, _speeds(v.arch, inter)[-1]
    bw = _raise_speed(v, ring_at, ch, bw)
    nvlink = v.nvl_bw > 0
    # sameChannels: pass 1 tries each setting with every channel replaying the first one's GPU
    # order, then with channels of their own (search.cc). Across nodes with a NIC per channel a
    # replayed order cannot enter at the next NIC's own GPU, and the full set of channels comes
    # from crossNic = 2 with sameChannels = 0 (rings alternating NICs: NET a -> GPU a ... GPU b
    # -> NET b, then NET b -> GPU b ... GPU a -> NET a; Postset swaps them on odd nodes so the
    # rails line up); the tuning model then prices Broadcast / Reduce at nsteps hop latencies.
    ring = Graph(n_channels=ch, bw_intra=bw, bw_inter=bw, intra_nvlink=nvlink,
                 intra_le_nvb=nvlink or v.local_ranks == 1,
                 same_channels=not (inter and v.nics > 1))
    tree = _tree(v, ch, total_bw, path_bw, nvlink)
    graphs = {"ring": ring, "tree": tree, "pat": tree}  # PAT runs on the tree graph (init.cc)
    n_channels = min(MAXCHANNELS, 2 * ch)  # ncclTopoPostset duplicates the channels
    if COMPCAP[v.arch] >= 90 and inter and ring.bw_intra > 45.0 and n_channels < 16:
        n_channels = min(MAXCHANNELS, 2 * n_channels)
    nvls_ok = v.nvls and v.nvswitch and COMPCAP[v.arch] >= 90 and v.local_ranks > 1
    nvls_channels = 0
    if nvls_ok:
        nvls_at = lambda s: _nvls_channels(v, s)  # noqa: E731
        heads = min(MAX_NVLS_ARITY, v.local_ranks)
        if inter:
            heads = min(heads, v.nics)
        n_min = 1 if inter else heads  # intra-node NVLS pulls evenly from all GPUs
        nch, nbw = _search(v, nvls_at, heads, n_min, _tree_total_bw(v, total_bw), intra_bw,
                           dup=False)
        if nch:
            # pass 2: raise bwInter while it stays under twice bwIntra and the NICs carry it
            b_inter = nbw
            for s in reversed(_speeds(v.arch, inter)):
                if s <= b_inter:
                    continue
                if s >= 2 * nbw or (inter and s > min(v.nic_bw, v.pci_bw)):
                    break
                b_inter = s
            g = Graph(n_channels=nch, bw_intra=nbw, bw_inter=b_inter, same_channels=False)
            graphs["nvls"] = graphs["nvlstree"] = g
            nvls_channels = (NVLS_CHANNELS_SM100_ONE_NODE if v.arch == Arch.BLACKWELL and not inter
                             else NVLS_CHANNELS.get(v.arch, 16))
    return Comm(n_ranks=v.n_ranks, n_nodes=v.n_nodes, arch=v.arch, graphs=graphs,
                n_channels=n_channels, nvls_channels=nvls_channels,
                nvls_support=bool(nvls_channels), local_ranks=v.local_ranks), v
