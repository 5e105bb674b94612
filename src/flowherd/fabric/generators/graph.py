"""A fabric from a networkx graph: the inverse of `Fabric.to_networkx`, for hand-made topologies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind, NodeKind

if TYPE_CHECKING:
    import networkx as nx


def from_networkx(g: nx.MultiDiGraph, *, gpu_server: Sequence[int] | np.ndarray,
                  gpu_type: Sequence[str], name: str | None = None) -> Fabric:
    """Build a `Fabric` from a graph shaped like `Fabric.to_networkx`'s output.

    Nodes are ``0 .. N-1`` with attributes ``kind`` (``gpu``, ``nic``, ``nvswitch``, ``switch``),
    ``tier`` and optionally ``name``; every directed edge has ``capacity_bytes_per_s``,
    ``latency_s``, ``kind`` (``nvlink``, ``pcie``, ``network``) and optionally ``link`` (its id; edges
    are ordered by it, so a graph exported by `to_networkx` comes back with the same link ids).
    The graph carries no servers, so `gpu_server` and `gpu_type` are given.

    >>> from flowherd.fabric.generators import fat_tree
    >>> f = fat_tree(k=4)
    >>> h = from_networkx(f.to_networkx(), gpu_server=f.gpu_server, gpu_type=f.gpu_type)
    >>> bool(np.array_equal(h.link_dst, f.link_dst))
    True
    """
    n = g.number_of_nodes()
    if sorted(g.nodes) != list(range(n)):
        raise ConfigError(f"graph nodes must be 0..{n - 1}, got {sorted(g.nodes)[:5]}... (graph.nodes)")
    try:
        kind = np.array([NodeKind[str(g.nodes[v]["kind"]).upper()] for v in range(n)], dtype=np.int8)
        tier = np.array([int(g.nodes[v]["tier"]) for v in range(n)], dtype=np.int8)
        edges = sorted(g.edges(data=True), key=lambda e: e[2].get("link", 0))
        lkind = np.array([LinkKind[str(d["kind"]).upper()] for _, _, d in edges], dtype=np.int8)
        cap = np.array([float(d["capacity_bytes_per_s"]) for _, _, d in edges])
        lat = np.array([float(d["latency_s"]) for _, _, d in edges])
    except KeyError as err:
        raise ConfigError(f"graph lacks attribute or value {err} (graph); expected node kind/tier and "
                          "edge capacity_bytes_per_s/latency_s/kind as Fabric.to_networkx writes") from None
    names = tuple(str(g.nodes[v].get("name", v)) for v in range(n))
    return Fabric(
        name=name or str(g.graph.get("name", "graph")),
        num_gpus=int(np.count_nonzero(kind == NodeKind.GPU)),
        node_kind=kind,
        node_tier=tier,
        gpu_server=np.asarray(gpu_server, dtype=np.int32),
        gpu_type=tuple(gpu_type),
        link_src=np.array([u for u, _, _ in edges], dtype=np.int32),
        link_dst=np.array([v for _, v, _ in edges], dtype=np.int32),
        link_capacity_bytes_per_s=cap,
        link_latency_s=lat,
        link_kind=lkind,
        node_names=names,
        params=dict(kind="graph"),
    )
