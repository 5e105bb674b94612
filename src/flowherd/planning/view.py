"""The planner's view of a fabric: servers, their GPUs and leaves, the leaves' uplink capacities,
the pods the leaves hang from and the pods' uplink capacities to the core, and the per-GPU
scale-up and scale-out rates (`FabricView`, cached per fabric by `fabric_view`).

The JCT model (`flowherd.planning.predict`) and every placer work on this view: placement
changes the traffic at the level of servers and leaf switches (the fabric's ``server_leaf``).
A pod (`leaf_pods`) is the set of leaves whose uplinks reach the same upper-tier switches: one pod
on a leaf-spine, the aggregation (PSW) group of a ToR group on the Lingjun fabric, whose traffic
to another pod crosses the (there 15:1 oversubscribed) core. The view holds two tiers of uplinks:
each leaf's to the switches above it, and each pod's (its aggregation switches') to the core
(`pod_uplink_bytes_per_s`, inf where the pod's switches have nothing above them, as the spines
of a leaf-spine).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.placement import server_leaf
from flowherd.fabric.core import Fabric, LinkKind

__all__ = ["FabricView", "fabric_view", "leaf_pods", "pod_uplinks"]


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
        leaf_pod: ``int64[L]`` pod of each leaf (`leaf_pods`); None: one pod.
        pod_uplink_bytes_per_s: ``float64[P]`` capacity of each pod towards the core, one
            direction: the uplinks of the switches its leaves' uplinks reach (inf where they
            have none, or with one pod); None: no pod tier.
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
    leaf_pod: np.ndarray | None = None
    pod_uplink_bytes_per_s: np.ndarray | None = None

    @property
    def num_pods(self) -> int:
        """Pods the leaves hang from (1 without ``leaf_pod``)."""
        return 1 if self.leaf_pod is None or not self.leaf_pod.size else int(self.leaf_pod.max()) + 1

    def gpus_of(self, server: int) -> np.ndarray:
        """GPU ids of ``server``, ascending."""
        return self.gpu_order[self.server_gpus[server]:self.server_gpus[server + 1]]


def leaf_pods(fabric: Fabric) -> np.ndarray:
    """``int64[L]``: the pod of each leaf of the planner's view (leaves whose uplinks reach the
    same upper-tier switches share a pod, numbered in leaf order: one pod on a leaf-spine, the
    aggregation (PSW) group of a ToR group on the Lingjun fabric). Servers without a leaf form
    pods of their own."""
    keys: list[tuple] = []
    for n in np.unique(server_leaf(fabric)).tolist():
        if n < 0:
            keys.append(("server", n))
            continue
        keys.append(tuple(sorted(int(x) for x in fabric.link_dst[_up_links(fabric, n)])))
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return np.array([ids[k] for k in keys], dtype=np.int64)


def _up_links(fabric: Fabric, node: int) -> np.ndarray:
    """Link ids from ``node`` to network nodes of a higher tier."""
    out = fabric.out_links(node)
    kind = np.asarray(fabric.link_kind)[out]
    return out[(kind == LinkKind.NETWORK) & (fabric.node_tier[fabric.link_dst[out]] > fabric.node_tier[node])]


def _upper_capacity(fabric: Fabric, switches: set[int]) -> float:
    """Summed capacity of the links from ``switches`` to switches of a higher tier (inf: none)."""
    cap = fabric.link_capacity_bytes_per_s
    total = sum(float(cap[_up_links(fabric, sw)].sum()) for sw in sorted(switches))
    return total if total > 0 else math.inf


def pod_uplinks(fabric: Fabric, leaf_nodes: np.ndarray, attached: list[set[int]],
                pod: np.ndarray) -> np.ndarray:
    """``float64[P]``: each pod's capacity towards the core, one direction: the uplinks of the
    switches that its leaves' switches (``attached``: the switches each leaf's NICs reach, and the
    leaf node) link up to; inf for a pod whose switches have nothing above them, and for every
    pod of a fabric of one pod."""
    num_pods = int(pod.max()) + 1 if pod.size else 0
    out = np.full(num_pods, math.inf)
    if num_pods < 2:
        return out
    above: list[set[int]] = [set() for _ in range(num_pods)]
    for i, n in enumerate(leaf_nodes.tolist()):
        if n < 0:
            continue
        for sw in attached[i] | {n}:
            above[int(pod[i])].update(int(x) for x in fabric.link_dst[_up_links(fabric, sw)])
    for k in range(num_pods):
        if above[k]:
            out[k] = _upper_capacity(fabric, above[k])
    return out


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
    # a leaf's uplinks: those of every switch its servers' NICs attach to (one leaf on a
    # leaf-spine; the SU's rail leaves on a rail-optimized fabric, where server_leaf names the
    # rail-0 leaf and each rail's traffic leaves the SU through its own rail leaf)
    attached: list[set[int]] = [set() for _ in nodes]
    nic_link = np.flatnonzero((kind == LinkKind.NETWORK) & (tier[src] == 1))
    nic_srv = np.full(fabric.num_nodes, -1, np.int64)
    pcie = np.flatnonzero((kind == LinkKind.PCIE) & (src < fabric.num_gpus))  # GPU -> its NIC
    nic_srv[dst[pcie]] = server[src[pcie]]
    for lk in nic_link.tolist():
        sv = int(nic_srv[int(src[lk])])
        if sv >= 0 and leaf_idx[sv] >= 0 and nodes[leaf_idx[sv]] >= 0:
            attached[int(leaf_idx[sv])].add(int(dst[lk]))
    for i, n in enumerate(nodes.tolist()):
        up[i] = math.inf if n < 0 else _upper_capacity(fabric, attached[i] | {n})
    if len(nodes) == 1:
        up[:] = math.inf
    nv = fabric.link_capacity_bytes_per_s[kind == LinkKind.NVLINK]
    nic = (kind == LinkKind.NETWORK) & (tier[src] == 1)
    nic_bw = float(np.median(fabric.link_capacity_bytes_per_s[nic])) if nic.any() else math.inf
    pods = leaf_pods(fabric)
    view = FabricView(num_servers=num_servers, server_gpus=ptr, gpu_order=order,
                      server_capacity=np.diff(ptr), server_type=tuple(fabric.gpu_type),
                      server_leaf=leaf_idx.astype(np.int64), num_leaves=len(nodes),
                      leaf_uplink_bytes_per_s=up,
                      nvlink_bytes_per_s=float(np.median(nv)) if nv.size else nic_bw,
                      nic_bytes_per_s=nic_bw, gpus_per_server=int(np.diff(ptr).max()), fabric=fabric,
                      leaf_pod=pods, pod_uplink_bytes_per_s=pod_uplinks(fabric, nodes, attached, pods))
    _VIEWS[id(fabric)] = (fabric, view)
    return view
