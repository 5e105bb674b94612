"""Three-tier Clos: racks under a ToR, pods of ToRs under pod spines, pods joined by core switches.

This is the shape of Meta's 24K-GPU RoCE clusters (Llama 3, arXiv:2407.21783 §3.3.1: racks of 16 GPUs
under one ToR, pods of 3,072 GPUs at full bisection, an aggregation layer oversubscribed 1:7).
Links between switch layers are aggregated: one link per (ToR, pod spine) and per (pod spine, core)
pair, whose capacity is the sum of the parallel cables it stands for.
"""

from __future__ import annotations

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us


def _positive(value: float, field: str) -> None:
    if not value > 0:
        raise ConfigError(f"{field.split('.')[-1]} must be positive, got {value!r} ({field})")


def _count(value: int, field: str, minimum: int = 1) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{field.split('.')[-1]} must be an integer >= {minimum}, got {value!r} "
                          f"({field})")


def clos3(
    *,
    servers: int,
    gpus_per_server: int = 8,
    servers_per_tor: int = 2,
    tors_per_pod: int = 192,
    spines_per_pod: int = 16,
    cores: int = 64,
    tor_oversubscription: float = 1.0,
    spine_oversubscription: float = 1.0,
    nics_per_server: int | None = None,
    nic_bandwidth_bytes_per_s: float = 400 * Gbps,
    nvlink_bandwidth_bytes_per_s: float | None = 900 * GBps,
    link_latency_s: float = 1 * us,
    gpu_type: str | list[str] = "h100",
    name: str | None = None,
) -> Fabric:
    """A 3-tier Clos with an oversubscription ratio at the ToR and at the pod-spine tier.

    Every NIC links to its rack's ToR (tier 2). Each ToR links to every spine of its pod (tier 3)
    with total capacity ``ToR downlink capacity / tor_oversubscription``. The cores (tier 4) form
    `spines_per_pod` planes of ``cores / spines_per_pod`` switches; spine ``j`` of every pod links to
    every core of plane ``j`` with total capacity ``spine downlink capacity / spine_oversubscription``.

    Args:
        servers: Number of servers; a multiple of ``servers_per_tor * tors_per_pod``.
        gpus_per_server: GPUs per server.
        servers_per_tor: Servers in a rack (Meta: 2 servers = 16 GPUs).
        tors_per_pod: Racks per pod (Meta: 192, so a pod holds 3,072 GPUs).
        spines_per_pod: Pod spine ("cluster") switches per pod; not published by Meta, assumed 16.
        cores: Core ("aggregation") switches, a multiple of `spines_per_pod`; assumed 64.
        tor_oversubscription: ToR downlink : uplink capacity (Meta: 1).
        spine_oversubscription: Pod-spine downlink : uplink capacity (Meta: 7, "1:7").
        nics_per_server: NICs per server; default one per GPU.
        nic_bandwidth_bytes_per_s: NIC-ToR capacity per NIC, each direction.
        nvlink_bandwidth_bytes_per_s: GPU-NVSwitch capacity; None: no NVLink.
        link_latency_s: Latency of every network link.
        gpu_type: GPU model of all servers, or one name per server.
        name: Fabric name.

    >>> f = clos3(servers=8, gpus_per_server=1, servers_per_tor=2, tors_per_pod=2, spines_per_pod=2,
    ...           cores=2, spine_oversubscription=4)
    >>> (f.num_gpus, f.num_switches)
    (8, 10)
    """
    for value, field in ((servers, "fabric.servers"), (servers_per_tor, "fabric.servers_per_tor"),
                         (tors_per_pod, "fabric.tors_per_pod"), (spines_per_pod, "fabric.spines_per_pod"),
                         (cores, "fabric.cores")):
        _count(value, field)
    _positive(tor_oversubscription, "fabric.tor_oversubscription")
    _positive(spine_oversubscription, "fabric.spine_oversubscription")
    per_pod = servers_per_tor * tors_per_pod
    if servers % per_pod:
        raise ConfigError(f"servers must be a multiple of servers_per_tor * tors_per_pod = {per_pod}, "
                          f"got {servers} (fabric.servers)")
    if cores % spines_per_pod:
        raise ConfigError(f"cores must be a multiple of spines_per_pod = {spines_per_pod}, got {cores} "
                          "(fabric.cores)")
    pods = servers // per_pod
    tors = pods * tors_per_pod
    b = FabricBuilder(name or f"clos3-{servers}x{gpus_per_server}")
    blk = add_servers(b, servers=servers, gpus_per_server=gpus_per_server,
                      nics_per_server=nics_per_server, gpu_type=gpu_type,
                      nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s)
    tor = b.add_nodes(NodeKind.SWITCH, tors, tier=2)
    spine = b.add_nodes(NodeKind.SWITCH, pods * spines_per_pod, tier=3)
    core = b.add_nodes(NodeKind.SWITCH, cores, tier=4)
    lat, net = link_latency_s, LinkKind.NETWORK
    nics_per_tor = blk.nics.shape[1] * servers_per_tor
    b.connect(blk.nics.ravel(), np.repeat(tor, nics_per_tor), nic_bandwidth_bytes_per_s, lat, net)
    tor_up = nics_per_tor * nic_bandwidth_bytes_per_s / tor_oversubscription
    tor_pod = np.repeat(np.arange(tors), spines_per_pod) // tors_per_pod
    local = np.tile(np.arange(spines_per_pod), tors)
    b.connect(np.repeat(tor, spines_per_pod), spine[tor_pod * spines_per_pod + local],
              tor_up / spines_per_pod, lat, net)
    per_plane = cores // spines_per_pod
    spine_down = tors_per_pod * tor_up / spines_per_pod
    spine_local = np.repeat(np.arange(pods * spines_per_pod) % spines_per_pod, per_plane)
    b.connect(np.repeat(spine, per_plane),
              core[spine_local * per_plane + np.tile(np.arange(per_plane), pods * spines_per_pod)],
              spine_down / spine_oversubscription / per_plane, lat, net)
    return b.build(dict(kind="clos3", servers=servers, gpus_per_server=gpus_per_server,
                        servers_per_tor=servers_per_tor, tors_per_pod=tors_per_pod,
                        spines_per_pod=spines_per_pod, cores=cores, pods=pods,
                        tor_oversubscription=tor_oversubscription,
                        spine_oversubscription=spine_oversubscription,
                        nic_bandwidth_bytes_per_s=nic_bandwidth_bytes_per_s))
