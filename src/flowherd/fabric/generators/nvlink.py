"""Scale-up domains without a network switch: point-to-point NVLink meshes (DGX-1, Azure NDv2)
and the 12-NVSwitch DGX-2, each optionally repeated over several chassis joined by InfiniBand.

Sources (see docs/sources/small_topologies.md): the DGX-1 link matrix of MSCCL
``msccl/topologies/nvidia.py`` (``dgx1()``), TE-CCL ``teccl/topologies/dgx1.py``, ``ndv2.py``,
``dgx2.py`` and TACCL ``taccl/topologies/generic.py`` (all MIT), NVIDIA's DGX-1 and DGX-2 texts.
"""

from __future__ import annotations

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.clos import _count
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us

#: DGX-1 (V100) hybrid cube-mesh: (GPU a, GPU b, NVLinks between them). 25 GB/s per NVLink and direction.
DGX1_NVLINKS: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2), (0, 2, 1), (0, 3, 1), (0, 4, 2), (1, 2, 1), (1, 3, 2), (1, 5, 1), (2, 3, 2),
    (2, 6, 2), (3, 7, 1), (4, 5, 2), (4, 6, 1), (4, 7, 1), (5, 6, 1), (5, 7, 2), (6, 7, 2),
)
NVLINK2_BYTES_PER_S = 25 * GBps  # one V100 NVLink, each direction


def nvlink_mesh(
    *,
    chassis: int = 1,
    gpus_per_chassis: int,
    links: tuple[tuple[int, int, int], ...],
    nvlink_bandwidth_bytes_per_s: float = NVLINK2_BYTES_PER_S,
    nvlink_latency_s: float = 0.0,
    ib_bandwidth_bytes_per_s: float = 100 * Gbps,
    ib_latency_s: float = 0.0,
    pcie_bandwidth_bytes_per_s: float = 16 * GBps,
    gpu_type: str = "v100",
    name: str = "nvlink-mesh",
) -> Fabric:
    """Chassis whose GPUs are joined by point-to-point NVLinks; chassis joined by one IB NIC each.

    Every GPU pair ``(a, b, n)`` of `links` gets one link of ``n * nvlink_bandwidth_bytes_per_s``.
    With more than one chassis, every chassis has one NIC that all its GPUs reach over PCIe; two
    chassis are cabled NIC to NIC, more chassis go through one IB switch (tier 2).

    >>> f = nvlink_mesh(gpus_per_chassis=2, links=((0, 1, 1),))
    >>> (f.num_gpus, f.num_links)
    (2, 1)
    """
    _count(chassis, "fabric.chassis")
    pairs = np.asarray(links, dtype=np.int64).reshape(-1, 3)
    if pairs.size and (pairs[:, :2].min() < 0 or pairs[:, :2].max() >= gpus_per_chassis
                       or (pairs[:, 2] < 1).any()):
        raise ConfigError(f"NVLink pairs must name GPUs 0..{gpus_per_chassis - 1} with >= 1 link each, "
                          f"got {links!r} (fabric.links)")
    b = FabricBuilder(name)
    blk = add_servers(b, servers=chassis, gpus_per_server=gpus_per_chassis, nics_per_server=1,
                      gpu_type=gpu_type, nvlink_bandwidth_bytes_per_s=None,
                      pcie_bandwidth_bytes_per_s=pcie_bandwidth_bytes_per_s) if chassis > 1 else None
    if blk is None:
        gpus = b.add_gpus(np.zeros(gpus_per_chassis, np.int32), [gpu_type]).reshape(1, -1)
    else:
        gpus = blk.gpus
    a = gpus[:, pairs[:, 0]].ravel()
    c = gpus[:, pairs[:, 1]].ravel()
    b.connect(a, c, np.tile(pairs[:, 2] * nvlink_bandwidth_bytes_per_s, chassis), nvlink_latency_s,
              LinkKind.NVLINK)
    if blk is not None:
        nics = blk.nics.ravel()
        if chassis == 2:
            b.connect(nics[0], nics[1], ib_bandwidth_bytes_per_s, ib_latency_s, LinkKind.NETWORK)
        else:
            ib = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
            b.connect(nics, np.repeat(ib, nics.size), ib_bandwidth_bytes_per_s, ib_latency_s,
                      LinkKind.NETWORK)
    return b.build(dict(kind="nvlink-mesh", chassis=chassis, gpus_per_chassis=gpus_per_chassis,
                        nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s,
                        ib_bandwidth_bytes_per_s=ib_bandwidth_bytes_per_s))


def dgx1(*, chassis: int = 1, nvlink_latency_s: float = 0.0, ib_latency_s: float = 0.0,
         name: str | None = None) -> Fabric:
    """DGX-1 (V100) hybrid cube-mesh: 8 GPUs, 16 NVLink pairs (8 double at 50 GB/s, 8 single at
    25 GB/s, each direction), per `DGX1_NVLINKS` (MSCCL ``dgx1()``, TE-CCL ``dgx1.py``).

    TE-CCL's DGX-1 has one chassis and a user-given alpha (default 0). With ``chassis > 1`` the
    chassis are joined by four 100 Gbps EDR NICs each (one per GPU pair; secondary source) through
    one IB switch.
    """
    _count(chassis, "fabric.chassis")
    if chassis == 1:
        return nvlink_mesh(gpus_per_chassis=8, links=DGX1_NVLINKS, nvlink_latency_s=nvlink_latency_s,
                           name=name or "dgx1")
    b = FabricBuilder(name or f"dgx1-{chassis}")
    blk = add_servers(b, servers=chassis, gpus_per_server=8, nics_per_server=4, gpu_type="v100",
                      nvlink_bandwidth_bytes_per_s=None, pcie_bandwidth_bytes_per_s=16 * GBps)
    pairs = np.asarray(DGX1_NVLINKS)
    b.connect(blk.gpus[:, pairs[:, 0]].ravel(), blk.gpus[:, pairs[:, 1]].ravel(),
              np.tile(pairs[:, 2] * NVLINK2_BYTES_PER_S, chassis), nvlink_latency_s, LinkKind.NVLINK)
    ib = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
    b.connect(blk.nics.ravel(), np.repeat(ib, blk.nics.size), 100 * Gbps, ib_latency_s, LinkKind.NETWORK)
    return b.build(dict(kind="dgx1", chassis=chassis))


def ndv2(*, chassis: int = 2, name: str | None = None) -> Fabric:
    """Azure NDv2 as TE-CCL models it (``teccl/topologies/ndv2.py``): the DGX-1 NVLink mesh with
    alpha 0.7 us per NVLink, and one 12.5 GB/s (100 Gbps EDR) InfiniBand NIC per chassis, alpha 1.3 us.

    TE-CCL sends only from a chassis' GPU 0 and receives only at its GPU 1; here the NIC hangs off
    GPUs 0 and 1 over PCIe and off no other GPU, so inter-chassis traffic enters and leaves through
    those two GPUs (in both directions: the IB cable is full duplex). Two chassis: NIC-to-NIC
    cable (TE-CCL: direct GPU links); more: one IB switch, so a chassis-to-chassis hop costs
    2 x 1.3 = 2.6 us (TACCL remote_alpha).
    """
    _count(chassis, "fabric.chassis")
    b = FabricBuilder(name or f"ndv2-{chassis}")
    b_gpus = b.add_gpus(np.repeat(np.arange(chassis, dtype=np.int32), 8), ["v100"] * chassis)
    gpus = b_gpus.reshape(chassis, 8)
    pairs = np.asarray(DGX1_NVLINKS)
    b.connect(gpus[:, pairs[:, 0]].ravel(), gpus[:, pairs[:, 1]].ravel(),
              np.tile(pairs[:, 2] * NVLINK2_BYTES_PER_S, chassis), 0.7 * us, LinkKind.NVLINK)
    if chassis > 1:
        nic = b.add_nodes(NodeKind.NIC, chassis, tier=1)
        b.connect(gpus[:, [0, 1]].ravel(), np.repeat(nic, 2), 16 * GBps, 0.0, LinkKind.PCIE)
        if chassis == 2:
            b.connect(nic[0], nic[1], 12.5 * GBps, 1.3 * us, LinkKind.NETWORK)
        else:
            ib = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
            b.connect(nic, np.repeat(ib, chassis), 12.5 * GBps, 1.3 * us, LinkKind.NETWORK)
    return b.build(dict(kind="ndv2", chassis=chassis))


def dgx2(*, chassis: int = 1, nvlink_latency_s: float = 0.35 * us, ib_latency_s: float = 1.3 * us,
         name: str | None = None) -> Fabric:
    """DGX-2: 16 V100 on two baseboards of 8, 6 NVSwitches per baseboard (12 in all).

    Each GPU has 6 NVLinks (25 GB/s each direction), one to each NVSwitch of its baseboard; NVSwitch
    ``i`` of baseboard 0 links to NVSwitch ``i`` of baseboard 1 with 8 NVLinks (200 GB/s; 1.2 TB/s
    between the baseboards). Scale-out: 8 EDR 100 Gbps NICs, one per 2 GPUs, through one IB switch
    when ``chassis > 1``. NVSwitches are NodeKind.NVSWITCH at tier 0. Latencies: TE-CCL's alphas
    (0.35 us per NVSwitch link, IB 2.6 us per chassis-to-chassis hop = 2 x 1.3 us).
    """
    _count(chassis, "fabric.chassis")
    b = FabricBuilder(name or ("dgx2" if chassis == 1 else f"dgx2-{chassis}"))
    blk = add_servers(b, servers=chassis, gpus_per_server=16, nics_per_server=8, gpu_type="v100",
                      nvlink_bandwidth_bytes_per_s=None, pcie_bandwidth_bytes_per_s=16 * GBps) \
        if chassis > 1 else None
    gpus = blk.gpus if blk is not None else b.add_gpus(np.zeros(16, np.int32), ["v100"]).reshape(1, 16)
    nvsw = b.add_nodes(NodeKind.NVSWITCH, chassis * 12, tier=0).reshape(chassis, 2, 6)
    board = np.arange(16) // 8
    g = np.repeat(gpus, 6, axis=1)  # [chassis, 16 * 6]
    sw = nvsw[:, np.repeat(board, 6), np.tile(np.arange(6), 16)]
    b.connect(g.ravel(), sw.ravel(), NVLINK2_BYTES_PER_S, nvlink_latency_s, LinkKind.NVLINK)
    b.connect(nvsw[:, 0, :].ravel(), nvsw[:, 1, :].ravel(), 8 * NVLINK2_BYTES_PER_S, nvlink_latency_s,
              LinkKind.NVLINK)
    if blk is not None:
        ib = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
        b.connect(blk.nics.ravel(), np.repeat(ib, blk.nics.size), 100 * Gbps, ib_latency_s,
                  LinkKind.NETWORK)
    return b.build(dict(kind="dgx2", chassis=chassis))
