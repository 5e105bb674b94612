"""Alibaba HPN (Qian et al., SIGCOMM 2024): dual-ToR, rail-optimized segments, dual-plane aggregation.

Each host has 8 GPUs and one backend NIC per GPU; a NIC has two 200 Gbps ports that go to two
different ToRs, one per plane (non-stacked dual-ToR). A segment holds `hosts_per_segment` hosts
(HPN: 128, i.e. 1,024 GPUs); for each rail ``r`` and plane ``p`` the segment has one ToR that takes
port ``p`` of NIC ``r`` of every host. Each ToR of plane ``p`` links to every aggregation switch of
plane ``p`` of its Pod, so traffic that leaves a NIC on port ``p`` stays in plane ``p``. Pods are
joined by core switches, also split by plane (an assumption: the paper only says Aggregation-Core is
15:1 and carries mostly pipeline-parallel traffic).

Ratios kept at any size: ToR downlink : uplink = `tor_oversubscription` (HPN 1.067 = 128 x 200G over
60 x 400G), aggregation downlink : core uplink = `agg_oversubscription` (HPN 15). Switch-to-switch
links are aggregated (one link per switch pair, its capacity the sum of the cables).
"""

from __future__ import annotations

import numpy as np

from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.clos import _count, _positive
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps

HPN_TOR_OVERSUBSCRIPTION = (128 * 200) / (60 * 400)  # 1.0667, HPN §5 (51.2T ToR: 128x200G down, 60x400G up)
HPN_AGG_CORE_OVERSUBSCRIPTION = 15.0  # HPN Table 2 / §6


def hpn_dual_plane(
    *,
    pods: int = 1,
    segments_per_pod: int = 15,
    hosts_per_segment: int = 128,
    gpus_per_host: int = 8,
    aggs_per_plane: int = 60,
    cores_per_plane: int = 8,
    port_bandwidth_bytes_per_s: float = 200 * Gbps,
    tor_oversubscription: float = HPN_TOR_OVERSUBSCRIPTION,
    agg_oversubscription: float = HPN_AGG_CORE_OVERSUBSCRIPTION,
    nvlink_bandwidth_bytes_per_s: float | None = 200 * GBps,
    link_latency_s: float = 500e-9,
    gpu_type: str | list[str] = "h800",
    name: str | None = None,
) -> Fabric:
    """An HPN-style dual-plane fabric; with the defaults, one 15,360-GPU Pod as in HPN Table 1.

    Args:
        pods: Pods; more than one adds the core tier (tier 4).
        segments_per_pod: Segments per Pod (HPN: 15).
        hosts_per_segment: Hosts per segment, the size parameter of scaled-down variants (HPN: 128).
        gpus_per_host: GPUs (and backend NICs, one per GPU = one rail each) per host (HPN: 8).
        aggs_per_plane: Aggregation switches per plane per Pod (HPN: 60).
        cores_per_plane: Core switches per plane (not published; assumed 8).
        port_bandwidth_bytes_per_s: Each of the two NIC ports (HPN: 200 Gbps).
        tor_oversubscription: ToR downlink : uplink capacity.
        agg_oversubscription: Aggregation downlink : core uplink capacity (only with ``pods > 1``).
        nvlink_bandwidth_bytes_per_s: GPU-NVSwitch capacity per direction (HPN's evaluation hosts:
            8 H800 with 400 GB/s bidirectional NVLink, so 200 GB/s each way).
        link_latency_s: Latency of every network link (SimAI default 500 ns).
        gpu_type: GPU model of all hosts, or one per host.
        name: Fabric name.

    >>> f = hpn_dual_plane(segments_per_pod=2, hosts_per_segment=4, aggs_per_plane=2)
    >>> (f.num_gpus, f.num_switches)
    (64, 36)
    """
    for value, field in ((pods, "fabric.pods"), (segments_per_pod, "fabric.segments_per_pod"),
                         (hosts_per_segment, "fabric.hosts_per_segment"),
                         (gpus_per_host, "fabric.gpus_per_host"),
                         (aggs_per_plane, "fabric.aggs_per_plane"),
                         (cores_per_plane, "fabric.cores_per_plane")):
        _count(value, field)
    _positive(tor_oversubscription, "fabric.tor_oversubscription")
    _positive(agg_oversubscription, "fabric.agg_oversubscription")
    _positive(port_bandwidth_bytes_per_s, "fabric.port_bandwidth")
    rails = gpus_per_host
    segments = pods * segments_per_pod
    hosts = segments * hosts_per_segment
    b = FabricBuilder(name or f"hpn-{hosts * gpus_per_host}")
    blk = add_servers(b, servers=hosts, gpus_per_server=gpus_per_host, gpu_type=gpu_type,
                      nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s)
    # ToR of (segment s, plane p, rail r): (s * 2 + p) * rails + r
    tor = b.add_nodes(NodeKind.SWITCH, segments * 2 * rails, tier=2)
    # aggregation a of (pod q, plane p): (q * 2 + p) * aggs_per_plane + a
    agg = b.add_nodes(NodeKind.SWITCH, pods * 2 * aggs_per_plane, tier=3)
    lat, net = link_latency_s, LinkKind.NETWORK
    host_seg = np.arange(hosts) // hosts_per_segment
    for p in (0, 1):
        tor_of_nic = (host_seg[:, None] * 2 + p) * rails + np.arange(rails)
        b.connect(blk.nics.ravel(), tor[tor_of_nic.ravel()], port_bandwidth_bytes_per_s, lat, net)
    tor_up = hosts_per_segment * port_bandwidth_bytes_per_s / tor_oversubscription
    t = np.repeat(np.arange(len(tor)), aggs_per_plane)
    t_seg, t_plane = t // (2 * rails), (t // rails) % 2
    t_pod = t_seg // segments_per_pod
    a = np.tile(np.arange(aggs_per_plane), len(tor))
    b.connect(tor[t], agg[(t_pod * 2 + t_plane) * aggs_per_plane + a], tor_up / aggs_per_plane, lat, net)
    params = dict(kind="hpn-dual-plane", pods=pods, segments_per_pod=segments_per_pod,
                  hosts_per_segment=hosts_per_segment, gpus_per_host=gpus_per_host,
                  aggs_per_plane=aggs_per_plane, tor_oversubscription=tor_oversubscription,
                  port_bandwidth_bytes_per_s=port_bandwidth_bytes_per_s)
    if pods > 1:
        core = b.add_nodes(NodeKind.SWITCH, 2 * cores_per_plane, tier=4)  # core c of plane p: p*cpp + c
        agg_down = segments_per_pod * rails * tor_up / aggs_per_plane
        g = np.repeat(np.arange(len(agg)), cores_per_plane)
        g_plane = (g // aggs_per_plane) % 2
        c = np.tile(np.arange(cores_per_plane), len(agg))
        b.connect(agg[g], core[g_plane * cores_per_plane + c],
                  agg_down / agg_oversubscription / cores_per_plane, lat, net)
        params |= dict(cores_per_plane=cores_per_plane, agg_oversubscription=agg_oversubscription)
    return b.build(params)


def node_plane(fabric: Fabric) -> np.ndarray:
    """Plane (0 or 1) of every ToR/aggregation/core switch of an `hpn_dual_plane` fabric; -1 elsewhere."""
    p = fabric.params
    rails, aggs = p["gpus_per_host"], p["aggs_per_plane"]
    plane = np.full(fabric.num_nodes, -1, dtype=np.int8)
    for tier, size in ((2, rails), (3, aggs), (4, p.get("cores_per_plane", 1))):
        ids = np.flatnonzero(fabric.node_tier == tier)
        ids = ids[fabric.node_kind[ids] == NodeKind.SWITCH]
        plane[ids] = (np.arange(ids.size) // size) % 2
    return plane
