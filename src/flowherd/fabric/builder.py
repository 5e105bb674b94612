"""`FabricBuilder`: the mutable scratchpad generators fill, vectorized, then freeze into a `Fabric`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from flowherd.fabric.core import Fabric, LinkKind, NodeKind


class FabricBuilder:
    """Collects nodes and bidirectional links as array chunks; `build()` makes the `Fabric`.

    GPUs must be added first (they become nodes ``0 .. num_gpus - 1``).

    >>> b = FabricBuilder("two-gpus")
    >>> gpus = b.add_gpus(servers=[0, 0], gpu_type=["h100"])
    >>> sw = b.add_nodes(NodeKind.NVSWITCH, 1, tier=0)
    >>> b.connect(gpus, np.repeat(sw, 2), 450e9, 0.0, LinkKind.NVLINK)
    >>> b.build().num_links
    2
    """

    def __init__(self, name: str):
        self.name = name
        self._kind: list[np.ndarray] = []
        self._tier: list[np.ndarray] = []
        self._names: list[str] | None = None
        self._n = 0
        self._gpu_server: np.ndarray | None = None
        self._gpu_type: tuple[str, ...] = ()
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []
        self._cap: list[np.ndarray] = []
        self._lat: list[np.ndarray] = []
        self._lkind: list[np.ndarray] = []

    @property
    def num_nodes(self) -> int:
        return self._n

    def add_gpus(self, servers: Sequence[int] | np.ndarray, gpu_type: Sequence[str]) -> np.ndarray:
        """Add one GPU per entry of `servers` (its server id); `gpu_type` has one name per server."""
        if self._n:
            raise RuntimeError("GPUs must be added first")
        servers = np.asarray(servers, dtype=np.int32)
        self._gpu_server = servers
        self._gpu_type = tuple(gpu_type)
        return self.add_nodes(NodeKind.GPU, len(servers), tier=0)

    def add_nodes(self, kind: NodeKind, count: int, *, tier: int,
                  names: Sequence[str] | None = None) -> np.ndarray:
        """Add `count` nodes of one kind and tier; returns their ids."""
        ids = np.arange(self._n, self._n + count, dtype=np.int32)
        self._kind.append(np.full(count, kind, dtype=np.int8))
        self._tier.append(np.full(count, tier, dtype=np.int8))
        if names is not None:
            if self._names is None:
                self._names = [self._default_name(i) for i in range(self._n)]
            self._names.extend(names)
        elif self._names is not None:
            self._names.extend(f"{kind.name.lower()}{i}" for i in ids)
        self._n += count
        return ids

    def _default_name(self, node: int) -> str:
        return f"node{node}"

    def connect(self, a: np.ndarray | int, b: np.ndarray | int, capacity_bytes_per_s: Any,
                latency_s: Any, kind: LinkKind) -> None:
        """Add one physical link per pair (a[i], b[i]): directed links a->b and b->a.

        Capacity and latency are scalars or arrays, the same in both directions.
        """
        a, b = np.broadcast_arrays(np.asarray(a, dtype=np.int32), np.asarray(b, dtype=np.int32))
        n = a.size
        cap = np.broadcast_to(np.asarray(capacity_bytes_per_s, dtype=np.float64), (n,))
        lat = np.broadcast_to(np.asarray(latency_s, dtype=np.float64), (n,))
        # a->b and b->a interleaved, so that link 2i and 2i+1 are the two directions of a cable
        self._src.append(np.stack([a.ravel(), b.ravel()], axis=1).ravel())
        self._dst.append(np.stack([b.ravel(), a.ravel()], axis=1).ravel())
        self._cap.append(np.repeat(cap, 2))
        self._lat.append(np.repeat(lat, 2))
        self._lkind.append(np.full(2 * n, kind, dtype=np.int8))

    def build(self, params: Mapping[str, Any] | None = None) -> Fabric:
        if self._gpu_server is None:
            raise RuntimeError("a fabric needs GPUs")
        cat = np.concatenate
        return Fabric(
            name=self.name,
            num_gpus=len(self._gpu_server),
            node_kind=cat(self._kind),
            node_tier=cat(self._tier),
            gpu_server=self._gpu_server,
            gpu_type=self._gpu_type,
            link_src=cat(self._src) if self._src else np.zeros(0, np.int32),
            link_dst=cat(self._dst) if self._dst else np.zeros(0, np.int32),
            link_capacity_bytes_per_s=cat(self._cap) if self._cap else np.zeros(0),
            link_latency_s=cat(self._lat) if self._lat else np.zeros(0),
            link_kind=cat(self._lkind) if self._lkind else np.zeros(0, np.int8),
            node_names=tuple(self._names) if self._names is not None else None,
            params=dict(params or {}),
        )
