"""The planner's view of a fabric: servers, their GPUs and leaves, the leaves' uplink capacities
and the per-GPU scale-up and scale-out rates (`FabricView`, cached per fabric by `fabric_view`).

The JCT model (`flowherd.planning.predict`) and every placer work on this view: placement
changes the traffic at the level of servers and leaf switches (the fabric's ``server_leaf``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.placement import server_leaf
from flowherd.fabric.core import Fabric, LinkKind

__all__ = ["FabricView", "fabric_view"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FabricView:
    """The planner's view of a fabric: servers, their leaves, the leaves' uplink capacities.

    Attributes:
        num_servers: Servers.
        server_gpus: ``int64[S + 1]`` CSR pointer into ``gpu_order`` (GPUs of server s).
        gpu_order: ``int64[G]`` GPU ids sorted by (server, id).
        server_capacity: ``int64[S]`` GPUs per server.
        server_type: GPU type name of each server.
        server_leaf: ``int64[S]`` leaf index (0..L-1) of each server.
        num_leaves: Leaves L.
        leaf_uplink_bytes_per_s: ``float64[L]`` capacity of each leaf towards the spines, one
            direction (inf for a fabric with a single leaf or none).
        nvlink_bytes_per_s: Scale-up capacity per GPU per direction (median NVLink link).
        nic_bytes_per_s: Scale-out capacity per GPU per direction (median NIC-switch link).
        gpus_per_server: Largest server size.
        fabric: The fabric it views.
    """

    num_servers: int
    server_gpus: np.ndarray
    gpu_order: np.ndarray
    server_capacity: np.ndarray
    server_type: tuple[str, ...]
    server_leaf: np.ndarray
    num_leaves: int
    leaf_uplink_bytes_per_s: np.ndarray
    nvlink_bytes_per_s: float
    nic_bytes_per_s: float
    gpus_per_server: int
    fabric: Fabric | None = None

    def gpus_of(self, server: int) -> np.ndarray:
        """GPU ids of ``server``, ascending."""
        return self.gpu_order[self.server_gpus[server]:self.server_gpus[server + 1]]


_VIEWS: dict[int, tuple[Fabric, FabricView]] = {}


def fabric_view(fabric: Fabric) -> FabricView:
    """The (cached) `FabricView` of ``fabric``."""
    hit = _VIEWS.get(id(fabric))
    if hit is not None and hit[0] is fabric:
        return hit[1]
    server = np.asarray(fabric.gpu_server, dtype=np.int64)
    num_servers = int(server.max()) + 1
    order = np.lexsort((np.arange(fabric.num_gpus), server)).astype(np.int64)
    ptr = np.zeros(num_servers + 1, np.int64)
    np.cumsum(np.bincount(server, minlength=num_servers), out=ptr[1:])
    leaf_node = server_leaf(fabric)
    nodes, leaf_idx = np.unique(leaf_node, return_inverse=True)
    kind = np.asarray(fabric.link_kind)
    src, dst = fabric.link_src, fabric.link_dst
    up = np.zeros(len(nodes))
    tier = fabric.node_tier
    for i, n in enumerate(nodes.tolist()):
        if n < 0:
            up[i] = math.inf
            continue
        out = fabric.out_links(n)
        out = out[(kind[out] == LinkKind.NETWORK) & (tier[dst[out]] > tier[n])]
        up[i] = float(fabric.link_capacity_bytes_per_s[out].sum()) if out.size else math.inf
    if len(nodes) == 1:
        up[:] = math.inf
    nv = fabric.link_capacity_bytes_per_s[kind == LinkKind.NVLINK]
    nic = (kind == LinkKind.NETWORK) & (tier[src] == 1)
    nic_bw = float(np.median(fabric.link_capacity_bytes_per_s[nic])) if nic.any() else math.inf
    view = FabricView(num_servers=num_servers, server_gpus=ptr, gpu_order=order,
                      server_capacity=np.diff(ptr), server_type=tuple(fabric.gpu_type),
                      server_leaf=leaf_idx.astype(np.int64), num_leaves=len(nodes),
                      leaf_uplink_bytes_per_s=up,
                      nvlink_bytes_per_s=float(np.median(nv)) if nv.size else nic_bw,
                      nic_bytes_per_s=nic_bw, gpus_per_server=int(np.diff(ptr).max()), fabric=fabric)
    _VIEWS[id(fabric)] = (fabric, view)
    return view
