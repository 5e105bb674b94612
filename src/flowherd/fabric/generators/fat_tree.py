"""k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and k/2 aggregation switches.

Closed forms for even ``k``: ``k**3 / 4`` host ports, ``5 * k**2 / 4`` switches (``k**2`` edge and
aggregation, ``k**2 / 4`` core), ``3 * k**3 / 4`` network cables, full bisection ``k**3 / 8 * B``.
"""

from __future__ import annotations

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us


def fat_tree(
    *,
    k: int,
    gpus_per_server: int = 1,
    nics_per_server: int | None = None,
    nic_bandwidth_bytes_per_s: float = 400 * Gbps,
    nvlink_bandwidth_bytes_per_s: float | None = 900 * GBps,
    link_latency_s: float = 1 * us,
    gpu_type: str | list[str] = "h100",
    name: str | None = None,
) -> Fabric:
    """A k-ary fat-tree whose ``k**3 / 4`` host ports each hold one server NIC.

    Servers have `gpus_per_server` GPUs and `nics_per_server` NICs (default: one per GPU);
    ``k**3 / 4 / nics_per_server`` servers fill the host ports in order, so the NICs of a server
    sit on consecutive ports (under one edge switch when ``nics_per_server`` divides ``k / 2``).
    Every cable carries `nic_bandwidth_bytes_per_s` each way. Tiers: edge 2, aggregation 3, core 4.

    Args:
        k: Switch radix, even and at least 2.
        gpus_per_server: GPUs per server.
        nics_per_server: NICs per server (one host port each); default `gpus_per_server`.
        nic_bandwidth_bytes_per_s: Capacity of every network cable, each direction.
        nvlink_bandwidth_bytes_per_s: GPU-NVSwitch capacity inside a server; None: no NVLink.
        link_latency_s: Latency of every network cable.
        gpu_type: GPU model of all servers, or one name per server.
        name: Fabric name; default ``fat-tree-k{k}``.

    >>> f = fat_tree(k=4)
    >>> (f.num_gpus, f.num_switches, f.num_network_links)
    (16, 20, 48)
    """
    if not isinstance(k, int | np.integer) or k < 2 or k % 2:
        raise ConfigError(f"fat-tree radix must be an even integer >= 2, got {k!r} (fabric.k)")
    nics = gpus_per_server if nics_per_server is None else nics_per_server
    hosts = k**3 // 4
    if nics < 1 or hosts % nics:
        raise ConfigError(f"nics_per_server must divide the {hosts} host ports of a k={k} fat-tree, "
                          f"got {nics} (fabric.nics_per_server)")
    h = k // 2
    b = FabricBuilder(name or f"fat-tree-k{k}")
    blk = add_servers(b, servers=hosts // nics, gpus_per_server=gpus_per_server, nics_per_server=nics,
                      gpu_type=gpu_type, nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s)
    edge = b.add_nodes(NodeKind.SWITCH, k * h, tier=2)  # edge e of pod p: p * h + e
    agg = b.add_nodes(NodeKind.SWITCH, k * h, tier=3)
    core = b.add_nodes(NodeKind.SWITCH, h * h, tier=4)  # core a * h + j serves aggregation a of each pod
    cap, lat, net = nic_bandwidth_bytes_per_s, link_latency_s, LinkKind.NETWORK
    b.connect(blk.nics.ravel(), np.repeat(edge, h), cap, lat, net)
    pod = np.repeat(np.arange(k), h * h)  # every (pod, edge, agg) triple
    e_local = np.tile(np.repeat(np.arange(h), h), k)
    a_local = np.tile(np.arange(h), k * h)
    b.connect(edge[pod * h + e_local], agg[pod * h + a_local], cap, lat, net)
    # (pod, agg, core-port) triples: aggregation a of every pod reaches cores a*h .. a*h+h-1
    b.connect(agg[pod * h + e_local], core[e_local * h + a_local], cap, lat, net)
    return b.build(dict(kind="fat-tree", k=k, gpus_per_server=gpus_per_server, nics_per_server=nics,
                        nic_bandwidth_bytes_per_s=nic_bandwidth_bytes_per_s,
                        link_latency_s=link_latency_s))
