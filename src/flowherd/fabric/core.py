"""The `Fabric` value: nodes, directed links, GPUs and their servers, compiled to arrays.

A fabric is built once by a generator (`flowherd.fabric.generators`) or a preset and never
changes. Everything the hot loops touch is an integer-indexed numpy array:

* nodes ``0 .. num_gpus - 1`` are the GPUs, in server order (GPU ``g`` of server ``s`` is
  node ``s * gpus_per_server + g`` when all servers are alike);
* every other node is a NIC, an NVSwitch or a network switch (`NodeKind`);
* ``node_tier`` orders the scale-out hierarchy: GPU 0, NIC 1, leaf/ToR 2, spine/aggregation 3,
  core 4. Routing derives the shortest paths of a Clos from it (up, then down) without
  enumerating the graph. NVSwitches have tier 0 (they belong to the scale-up domain);
* every physical link is two directed links, one per direction, each with its own
  capacity (bytes per second) and latency (seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from flowherd.errors import ConfigError

if TYPE_CHECKING:
    import networkx as nx
    import scipy.sparse as sp


class NodeKind(IntEnum):
    GPU = 0
    NIC = 1
    NVSWITCH = 2
    SWITCH = 3


class LinkKind(IntEnum):
    NVLINK = 0  # scale-up: GPU-GPU or GPU-NVSwitch
    PCIE = 1  # GPU-NIC inside a server
    NETWORK = 2  # scale-out: NIC-switch, switch-switch


_KIND_PREFIX = {NodeKind.GPU: "gpu", NodeKind.NIC: "nic", NodeKind.NVSWITCH: "nvsw"}
_TIER_PREFIX = {2: "leaf", 3: "spine", 4: "core"}


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Fabric:
    """A datacenter fabric as arrays. Build it with a generator; do not mutate the arrays.

    Attributes:
        name: Human name (preset name or generator summary).
        num_gpus: Number of GPUs; they are nodes ``0 .. num_gpus - 1``.
        node_kind: ``int8[N]``, a `NodeKind` per node.
        node_tier: ``int8[N]``, the scale-out tier (GPU 0, NIC 1, leaf 2, spine 3, core 4).
        gpu_server: ``int32[num_gpus]``, the server of each GPU (servers numbered from 0).
        gpu_type: Name of each server's GPU model, one entry per server (catalog key, e.g. "h100").
        link_src, link_dst: ``int32[L]``, endpoints of each directed link.
        link_capacity_bytes_per_s: ``float64[L]``.
        link_latency_s: ``float64[L]``.
        link_kind: ``int8[L]``, a `LinkKind` per link.
        node_names: Optional labels (e.g. real switch ids); generated when absent.
        params: The generator's parameters, for reports.
        server_nvls: One flag per server: whether its NVSwitch does in-switch reduction
            (NVLink SHARP, which NCCL's NVLS and NVLSTree algorithms use). Empty: none does.
    """

    name: str
    num_gpus: int
    node_kind: np.ndarray
    node_tier: np.ndarray
    gpu_server: np.ndarray
    gpu_type: tuple[str, ...]
    link_src: np.ndarray
    link_dst: np.ndarray
    link_capacity_bytes_per_s: np.ndarray
    link_latency_s: np.ndarray
    link_kind: np.ndarray
    node_names: tuple[str, ...] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    server_nvls: tuple[bool, ...] = ()
    # derived in __post_init__: outgoing links of each node, CSR by source node
    out_ptr: np.ndarray = field(init=False, repr=False)
    out_link: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.node_kind)
        src = np.asarray(self.link_src, dtype=np.int32)
        dst = np.asarray(self.link_dst, dtype=np.int32)
        cap = np.asarray(self.link_capacity_bytes_per_s, dtype=np.float64)
        lat = np.asarray(self.link_latency_s, dtype=np.float64)
        for name, arr in (("link_dst", dst), ("link_capacity_bytes_per_s", cap),
                          ("link_latency_s", lat), ("link_kind", self.link_kind)):
            if len(arr) != len(src):
                raise ConfigError(f"{name} has {len(arr)} entries, expected {len(src)} (fabric)")
        bad = np.flatnonzero(~(cap > 0) | ~np.isfinite(cap))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(
                f"link capacity must be positive, got {cap[i]:g} (fabric.links[{i}])"
            )
        bad = np.flatnonzero(~(lat >= 0) | ~np.isfinite(lat))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(f"link latency must be non-negative, got {lat[i]:g} (fabric.links[{i}])")
        bad = np.flatnonzero((src < 0) | (src >= n) | (dst < 0) | (dst >= n) | (src == dst))
        if bad.size:
            i = int(bad[0])
            raise ConfigError(
                f"link endpoints must be two distinct nodes in 0..{n - 1}, "
                f"got {src[i]} -> {dst[i]} (fabric.links[{i}])"
            )
        if self.num_gpus < 1 or np.any(self.node_kind[: self.num_gpus] != NodeKind.GPU):
            raise ConfigError(f"the first num_gpus={self.num_gpus} nodes must be GPUs (fabric)")
        if len(self.gpu_server) != self.num_gpus:
            raise ConfigError(
                f"gpu_server has {len(self.gpu_server)} entries, expected {self.num_gpus} (fabric)"
            )
        num_servers = int(self.gpu_server.max()) + 1
        if len(self.gpu_type) != num_servers:
            raise ConfigError(
                f"gpu_type has {len(self.gpu_type)} entries, expected one per server "
                f"({num_servers}) (fabric)"
            )
        if self.server_nvls and len(self.server_nvls) != num_servers:
            raise ConfigError(f"server_nvls has {len(self.server_nvls)} entries, expected one per "
                              f"server ({num_servers}) (fabric.server_nvls)")
        object.__setattr__(self, "server_nvls", tuple(bool(v) for v in self.server_nvls))
        order = np.argsort(src, kind="stable").astype(np.int32)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
        for name, arr in (("link_src", src), ("link_dst", dst),
                          ("link_capacity_bytes_per_s", cap), ("link_latency_s", lat)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "out_ptr", ptr)
        object.__setattr__(self, "out_link", order)

    # ---- counts -------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.node_kind)

    @property
    def num_directed_links(self) -> int:
        return len(self.link_src)

    @property
    def num_links(self) -> int:
        """Physical links (cables): each is a pair of directed links."""
        return len(self.link_src) // 2

    @property
    def num_network_links(self) -> int:
        """Physical scale-out links (NIC-switch and switch-switch cables)."""
        return int(np.count_nonzero(self.link_kind == LinkKind.NETWORK)) // 2

    @property
    def num_servers(self) -> int:
        return int(self.gpu_server.max()) + 1

    @property
    def num_switches(self) -> int:
        """Network switches (NVSwitches are counted apart, in `num_nvswitches`)."""
        return int(np.count_nonzero(self.node_kind == NodeKind.SWITCH))

    @property
    def num_nvswitches(self) -> int:
        return int(np.count_nonzero(self.node_kind == NodeKind.NVSWITCH))

    @property
    def num_nics(self) -> int:
        return int(np.count_nonzero(self.node_kind == NodeKind.NIC))

    # ---- lookups -------------------------------------------------------------------------
    def node_name(self, node: int) -> str:
        if self.node_names is not None:
            return self.node_names[node]
        kind = NodeKind(int(self.node_kind[node]))
        if kind == NodeKind.SWITCH:
            tier = int(self.node_tier[node])
            prefix = _TIER_PREFIX.get(tier, f"sw{tier}-")
        else:
            prefix = _KIND_PREFIX[kind]
        first = int(np.flatnonzero((self.node_kind == self.node_kind[node])
                                   & (self.node_tier == self.node_tier[node]))[0])
        return f"{prefix}{node - first}"

    def out_links(self, node: int) -> np.ndarray:
        """Ids of the directed links leaving `node`."""
        return self.out_link[self.out_ptr[node] : self.out_ptr[node + 1]]

    def nvls(self, server: int) -> bool:
        """Whether `server`'s NVSwitch supports NVLS (in-switch reduction)."""
        return bool(self.server_nvls[server]) if self.server_nvls else False

    def servers_gpus(self, server: int) -> np.ndarray:
        """GPU ids of one server."""
        return np.flatnonzero(self.gpu_server == server)

    def adjacency(self) -> sp.csr_matrix:
        """Directed adjacency (node x node) with link ids + 1 as values."""
        import scipy.sparse as sp  # a third of a second of import: only where it is used

        n = self.num_nodes
        data = np.arange(1, len(self.link_src) + 1)
        return sp.csr_matrix((data, (self.link_src, self.link_dst)), shape=(n, n))

    def check_connected(self) -> None:
        """Raise `ConfigError` unless every GPU can reach every other GPU."""
        # GPU 0's strongly connected component, by a search each way (numpy: scipy's csgraph
        # costs a third of a second of import, more than a small collective's run)
        from flowherd.fabric.sparse_rows import reachable

        n = self.num_nodes
        with_0 = (reachable(self.link_src, self.link_dst, n, 0)
                  & reachable(self.link_dst, self.link_src, n, 0))[: self.num_gpus]
        if not with_0.all():
            other = int(np.flatnonzero(~with_0)[0])
            raise ConfigError(
                f"fabric {self.name!r} is disconnected: GPU 0 cannot reach GPU {other}; "
                "expected every GPU to reach every other"
            )

    def to_networkx(self) -> nx.MultiDiGraph:
        """Export as a networkx MultiDiGraph: node attrs kind/tier/name, edge attrs per link."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for v in range(self.num_nodes):
            g.add_node(v, kind=NodeKind(int(self.node_kind[v])).name.lower(),
                       tier=int(self.node_tier[v]), name=self.node_name(v))
        for i in range(self.num_directed_links):
            g.add_edge(int(self.link_src[i]), int(self.link_dst[i]), key=i, link=i,
                       capacity_bytes_per_s=float(self.link_capacity_bytes_per_s[i]),
                       latency_s=float(self.link_latency_s[i]),
                       kind=LinkKind(int(self.link_kind[i])).name.lower())
        return g
