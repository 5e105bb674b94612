"""Two-tier leaf-spine (folded Clos) with an oversubscription ratio at the leaves."""

from __future__ import annotations

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us


def leaf_spine(
    *,
    servers: int,
    gpus_per_server: int = 1,
    leaves: int,
    spines: int,
    nic_bandwidth_bytes_per_s: float = 400 * Gbps,
    nvlink_bandwidth_bytes_per_s: float | None = 900 * GBps,
    oversubscription: float = 1.0,
    link_latency_s: float = 1 * us,
    nics_per_server: int | None = None,
    gpu_type: str | list[str] = "h100",
    name: str | None = None,
) -> Fabric:
    """Servers split evenly over `leaves`; every leaf linked to every spine.

    Each leaf's uplink capacity is its downlink capacity divided by `oversubscription`,
    spread evenly over its `spines` uplinks (one aggregated link per leaf-spine pair).

    >>> f = leaf_spine(servers=4, leaves=2, spines=2)
    >>> (f.num_gpus, f.num_switches)
    (4, 4)
    """
    if leaves < 1 or spines < 1:
        raise ConfigError(f"leaves and spines must be at least 1, got {leaves} and {spines} "
                          "(fabric.leaves, fabric.spines)")
    if servers % leaves:
        raise ConfigError(f"servers must divide evenly over leaves, got servers={servers}, "
                          f"leaves={leaves} (fabric.servers)")
    if not oversubscription > 0:
        raise ConfigError(f"oversubscription must be positive, got {oversubscription} "
                          "(fabric.oversubscription)")
    b = FabricBuilder(name or f"leaf-spine-{servers}x{gpus_per_server}")
    blk = add_servers(b, servers=servers, gpus_per_server=gpus_per_server,
                      nics_per_server=nics_per_server, gpu_type=gpu_type,
                      nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s)
    leaf = b.add_nodes(NodeKind.SWITCH, leaves, tier=2)
    spine = b.add_nodes(NodeKind.SWITCH, spines, tier=3)
    nics_per_leaf = blk.nics.size // leaves
    nic_leaf = np.repeat(leaf, nics_per_leaf)
    b.connect(blk.nics.ravel(), nic_leaf, nic_bandwidth_bytes_per_s, link_latency_s,
              LinkKind.NETWORK)
    uplink = nics_per_leaf * nic_bandwidth_bytes_per_s / oversubscription / spines
    b.connect(np.repeat(leaf, spines), np.tile(spine, leaves), uplink, link_latency_s,
              LinkKind.NETWORK)
    return b.build(dict(kind="leaf-spine", servers=servers, gpus_per_server=gpus_per_server,
                        leaves=leaves, spines=spines, oversubscription=oversubscription))
