"""Rail-optimized fat tree, as in NVIDIA DGX SuperPOD: NIC ``r`` of every server -> rail leaf ``r``.

Servers are grouped in scalable units (SUs). In each SU, rail leaf ``r`` connects NIC ``r`` of every
server of the SU, so same-rail traffic inside an SU is one switch hop away. Above the leaves:

* 2 tiers (``cores=None``): one global set of `spines`; each leaf's uplink cables are dealt round-robin
  over all spines (SuperPOD H100 RA, Table 4);
* 3 tiers: every pod of `sus_per_pod` SUs (SuperPOD: 1) has its own `spines_per_pod` spines; each
  leaf deals its uplinks over its pod's spines; the cores form `spines_per_pod` groups and spine ``j``
  of every pod deals its uplinks over core group ``j`` (SuperPOD B200 RA scale-out with a core tier).

Every cable is its own physical link (parallel cables between a switch pair are kept apart), so the
cable counts of the reference architectures can be checked one by one. Each tier has its own speed.
"""

from __future__ import annotations

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.clos import _count, _positive
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us


def _deal(num_sources: int, cables_per_source: int, group_size: int) -> np.ndarray:
    """Target (within its group) of every cable, the cables of all sources dealt round-robin."""
    return (np.arange(num_sources * cables_per_source, dtype=np.int64) % group_size).astype(np.int32)


def rail_optimized(
    *,
    servers: int,
    gpus_per_server: int = 8,
    nics_per_server: int | None = None,
    servers_per_su: int = 32,
    spines: int | None = None,
    sus_per_pod: int = 1,
    spines_per_pod: int | None = None,
    cores: int | None = None,
    leaf_uplinks: int | None = None,
    spine_uplinks: int | None = None,
    nic_bandwidth_bytes_per_s: float = 400 * Gbps,
    leaf_spine_bandwidth_bytes_per_s: float | None = None,
    spine_core_bandwidth_bytes_per_s: float | None = None,
    nvlink_bandwidth_bytes_per_s: float | None = 900 * GBps,
    link_latency_s: float = 1 * us,
    gpu_type: str | list[str] = "h100",
    name: str | None = None,
) -> Fabric:
    """A rail-optimized 2-tier or 3-tier fat tree of scalable units.

    Args:
        servers: Number of servers, a multiple of `servers_per_su`.
        gpus_per_server: GPUs per server.
        nics_per_server: NICs (= rails) per server; default one per GPU.
        servers_per_su: Servers per scalable unit (SuperPOD: 32).
        spines: 2-tier only: total spine switches (default: half the leaves, at least 1).
        sus_per_pod: 3-tier only: SUs sharing one set of spines (a pod); SuperPOD: 1.
        spines_per_pod: 3-tier only: spines of each pod (default: its number of leaves).
        cores: Core switches; None builds 2 tiers. A multiple of `spines_per_pod`; the cores form
            `spines_per_pod` groups and each spine's uplinks go round-robin over its group.
        leaf_uplinks: Uplink cables per leaf; default `servers_per_su` (1:1 with its downlinks
            when all tiers have the same speed). The leaf oversubscription is
            ``servers_per_su * nic_bw / (leaf_uplinks * leaf_spine_bw)``.
        spine_uplinks: 3-tier: uplink cables per spine; default its downlink cable count (1:1).
        nic_bandwidth_bytes_per_s: NIC-leaf cable capacity.
        leaf_spine_bandwidth_bytes_per_s: Leaf-spine cable capacity; default the NIC speed.
        spine_core_bandwidth_bytes_per_s: Spine-core cable capacity; default the leaf-spine speed.
        nvlink_bandwidth_bytes_per_s: GPU-NVSwitch capacity; None: no NVLink.
        link_latency_s: Latency of every network cable.
        gpu_type: One GPU model for all, one name per server, or one name per SU (heterogeneous
            clusters built of SUs of different GPU generations).
        name: Fabric name.

    >>> f = rail_optimized(servers=4, gpus_per_server=2, servers_per_su=2, spines=2)
    >>> (f.num_gpus, f.num_switches, f.num_network_links)
    (8, 6, 16)
    """
    nics = gpus_per_server if nics_per_server is None else nics_per_server
    _count(servers, "fabric.servers")
    _count(servers_per_su, "fabric.servers_per_su")
    _count(nics, "fabric.nics_per_server")
    if servers % servers_per_su:
        raise ConfigError(f"servers must be a multiple of servers_per_su = {servers_per_su}, "
                          f"got {servers} (fabric.servers)")
    sus = servers // servers_per_su
    ls_bw = leaf_spine_bandwidth_bytes_per_s or nic_bandwidth_bytes_per_s
    sc_bw = spine_core_bandwidth_bytes_per_s or ls_bw
    for value, field in ((nic_bandwidth_bytes_per_s, "fabric.nic_bandwidth"),
                         (ls_bw, "fabric.leaf_spine_bandwidth"), (sc_bw, "fabric.spine_core_bandwidth")):
        _positive(value, field)
    up = servers_per_su if leaf_uplinks is None else leaf_uplinks
    _count(up, "fabric.leaf_uplinks")
    if isinstance(gpu_type, list | tuple) and len(gpu_type) == sus and sus != servers:
        gpu_type = list(np.repeat(np.asarray(gpu_type, dtype=object), servers_per_su))
    three_tier = cores is not None
    if three_tier:
        other = [("spines", spines)]
    else:
        other = [("spines_per_pod", spines_per_pod), ("spine_uplinks", spine_uplinks),
                 ("spine_core_bandwidth", spine_core_bandwidth_bytes_per_s),
                 ("sus_per_pod", None if sus_per_pod == 1 else sus_per_pod)]
    wrong = next(((k, v) for k, v in other if v is not None), None)
    if wrong is not None:
        tiers = "3-tier (with cores)" if three_tier else "2-tier (without cores)"
        raise ConfigError(f"{wrong[0]} does not apply to a {tiers} rail-optimized fabric, got "
                          f"{wrong[1]!r} (fabric.{wrong[0]}); expected spines for 2 tiers, or cores with "
                          "spines_per_pod, sus_per_pod, spine_uplinks for 3 tiers")
    b = FabricBuilder(name or f"rail-{'3' if three_tier else '2'}tier-{servers}x{gpus_per_server}")
    blk = add_servers(b, servers=servers, gpus_per_server=gpus_per_server, nics_per_server=nics,
                      gpu_type=gpu_type, nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s)
    num_leaves = sus * nics
    leaf = b.add_nodes(NodeKind.SWITCH, num_leaves, tier=2)  # leaf of (su, rail): su * nics + rail
    lat, net = link_latency_s, LinkKind.NETWORK
    server_su = np.arange(servers) // servers_per_su
    b.connect(blk.nics.ravel(), leaf[(server_su[:, None] * nics + np.arange(nics)).ravel()],
              nic_bandwidth_bytes_per_s, lat, net)
    params = dict(kind="rail-optimized", servers=servers, gpus_per_server=gpus_per_server,
                  nics_per_server=nics, servers_per_su=servers_per_su, sus=sus, leaf_uplinks=up,
                  nic_bandwidth_bytes_per_s=nic_bandwidth_bytes_per_s,
                  leaf_spine_bandwidth_bytes_per_s=ls_bw)
    cable_leaf = np.repeat(np.arange(num_leaves), up)
    if not three_tier:
        n_sp = max(1, num_leaves // 2) if spines is None else spines
        _count(n_sp, "fabric.spines")
        spine = b.add_nodes(NodeKind.SWITCH, n_sp, tier=3)
        b.connect(leaf[cable_leaf], spine[_deal(num_leaves, up, n_sp)], ls_bw, lat, net)
        return b.build(params | dict(spines=n_sp))
    _count(sus_per_pod, "fabric.sus_per_pod")
    if sus % sus_per_pod:
        raise ConfigError(f"the {sus} scalable units must divide evenly into pods of sus_per_pod = "
                          f"{sus_per_pod} (fabric.sus_per_pod)")
    per_pod = nics * sus_per_pod if spines_per_pod is None else spines_per_pod
    _count(per_pod, "fabric.spines_per_pod")
    _count(cores, "fabric.cores")
    if cores % per_pod:
        raise ConfigError(f"cores must be a multiple of spines_per_pod = {per_pod}, got {cores} "
                          "(fabric.cores)")
    pods = sus // sus_per_pod
    leaves_per_pod = nics * sus_per_pod
    spine = b.add_nodes(NodeKind.SWITCH, pods * per_pod, tier=3)  # spine j of pod q: q * per_pod + j
    core = b.add_nodes(NodeKind.SWITCH, cores, tier=4)  # core group j: j * group .. (j + 1) * group - 1
    # leaf cables of a pod are dealt round-robin over the pod's spines
    cable_pod = cable_leaf // leaves_per_pod
    pod_cable = np.arange(num_leaves * up) % (leaves_per_pod * up)
    b.connect(leaf[cable_leaf], spine[cable_pod * per_pod + pod_cable % per_pod], ls_bw, lat, net)
    group = cores // per_pod
    s_up = leaves_per_pod * up // per_pod if spine_uplinks is None else spine_uplinks
    _count(s_up, "fabric.spine_uplinks")
    if s_up % group:
        # a spine must reach every core of its group, or pods would only meet through other pods
        raise ConfigError(f"spine_uplinks ({s_up}) must be a multiple of the core group size "
                          f"cores / spines_per_pod = {group} (fabric.cores)")
    num_spines = pods * per_pod
    cable_spine = np.repeat(np.arange(num_spines), s_up)
    cable_i = np.tile(np.arange(s_up), num_spines)
    b.connect(spine[cable_spine], core[(cable_spine % per_pod) * group + cable_i % group], sc_bw, lat, net)
    return b.build(params | dict(sus_per_pod=sus_per_pod, spines_per_pod=per_pod, cores=cores,
                                 spine_uplinks=s_up, spine_core_bandwidth_bytes_per_s=sc_bw))
