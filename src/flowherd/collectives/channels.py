"""Channels: the C rings NCCL runs one collective over, built from the fabric.

NCCL's topology search (``src/graph/search.cc``) finds one ring per channel; across servers
each channel enters and leaves a server on one NIC, and channel ``j`` of a DGX-like server
(one NIC per GPU, rail-optimized network) starts at the GPU of NIC ``j``, so the channels
spread over every NIC. Inside the server a ring goes over NVLink. NCCL's rings are
rail-aligned: a server's ring leaves on the NIC of the rail the next server's ring enters on;
where the last GPU of a server's ring is not on that rail, NCCL's PXN (``src/graph/paths.cc``,
``ncclTopoGetPxnRanks`` / ``NCCL_PXN_DISABLE``, on by default since 2.12) moves the data over
NVLink to the GPU of the right rail, whose NIC sends it.

A `Channel` here is one distinct ring: its rank order, the PXN relay of each edge, and the
fraction of the collective's data it carries. Channels that NCCL duplicates (``ncclTopoDupChannels``
and ``ncclTopoPostset`` copy the rings; channel ``c`` and ``c + k`` are the same ring) are
merged into one `Channel` whose fraction is their sum, so a schedule has the same flows as
C channels of ``1/C`` each but fewer of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind, NodeKind


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Channel:
    """One ring of a collective.

    Attributes:
        order: ``int64[n]`` ranks in ring order (rank ``order[i]`` sends to ``order[i+1]``).
        relay: ``int64[n]`` for the edge ``order[i] -> order[i+1 mod n]``: the rank whose NIC
            sends the data across (PXN), or -1 when the sender's own path is used.
        fraction: Share of the collective's bytes this ring carries (all rings sum to 1).
        copies: How many of NCCL's channels this ring stands for.
    """

    order: np.ndarray
    relay: np.ndarray
    fraction: float
    copies: int = 1


def gpu_rail(fabric: Fabric, gpus: np.ndarray) -> np.ndarray:
    """Rail of each GPU: the index of its NIC among its server's NICs (-1 without a NIC)."""
    gpus = np.asarray(gpus, dtype=np.int64)
    src, dst = fabric.link_src, fabric.link_dst
    pcie = (fabric.link_kind == LinkKind.PCIE) & (fabric.node_kind[src] == NodeKind.GPU) & (
        fabric.node_kind[dst] == NodeKind.NIC)
    nic_of = np.full(fabric.num_gpus, -1, dtype=np.int64)
    nic_of[src[pcie][::-1]] = dst[pcie][::-1]  # a GPU's first NIC
    server = fabric.gpu_server
    has = nic_of >= 0
    base = np.full(fabric.num_servers, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(base, server[has], nic_of[has])
    rail = np.where(has, nic_of - base[server], -1)
    return rail[gpus]


def ring_channels(gpus: tuple[int, ...] | np.ndarray, fabric: Fabric | None,
                  channels: int | None) -> list[Channel]:
    """The distinct rings of a collective over `gpus` (rank order) on `channels` channels.

    One channel, no fabric, or all ranks on one server: one ring in rank order. Across servers
    with ``m`` ranks on each: servers in order of their first rank, and channel ``c`` enters
    every server at its local rank ``c mod m`` (the GPU of rail ``c mod m`` on a DGX-like
    server) and visits the others in local order; the edge to the next server is sent by the
    rank of the next server's entry rail (PXN) when the last rank is on another rail.
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    n = len(gpus)
    rank_order = Channel(order=np.arange(n), relay=np.full(n, -1), fraction=1.0,
                         copies=max(1, channels or 1))
    if channels is not None and (int(channels) != channels or channels < 1):
        raise ConfigError(f"channels must be a positive integer, got {channels!r} (channels)")
    if fabric is None or channels is None or n < 2:
        return [rank_order]
    server = fabric.gpu_server[gpus]
    _, first, inv, counts = np.unique(server, return_index=True, return_inverse=True,
                                      return_counts=True)
    if len(counts) == 1 or np.any(counts != counts[0]):
        return [rank_order]
    g, m = len(counts), int(counts[0])
    # [server, local] grid of ranks: servers by first rank, local ranks by GPU id
    srv_rank = np.argsort(np.argsort(first))[inv]  # server position of each rank
    key = srv_rank * (int(gpus.max()) + 1) + gpus
    grid = np.argsort(key, kind="stable").reshape(g, m)
    rail = gpu_rail(fabric, gpus)
    out = []
    distinct = min(int(channels), m)
    for j in range(distinct):
        copies = len(range(j, int(channels), m))
        rot = np.roll(grid, -j, axis=1)  # enter at local rank j
        order = rot.ravel()
        relay = np.full(n, -1, dtype=np.int64)
        if m > 1:
            for s in range(g):
                last = rot[s, -1]
                nxt = rot[(s + 1) % g, 0]
                if rail[last] != rail[nxt]:
                    same = np.flatnonzero(rail[grid[s]] == rail[nxt])
                    if same.size:
                        relay[(s + 1) * m - 1] = grid[s, same[0]]
        out.append(Channel(order=order, relay=relay, fraction=copies / int(channels),
                           copies=copies))
    return out


def ring_edges(ch: Channel, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flows (src rank, dst rank) that carry the ring edges `edges` (edge ``i`` is
    ``order[i] -> order[i+1]``), a PXN edge as two flows: sender -> relay, relay -> receiver."""
    n = len(ch.order)
    s = ch.order[edges]
    d = ch.order[(edges + 1) % n]
    r = ch.relay[edges]
    direct = r < 0
    src = np.concatenate([s[direct], s[~direct], r[~direct]])
    dst = np.concatenate([d[direct], r[~direct], d[~direct]])
    return src, dst


def chain_edges(ch: Channel, root: int) -> np.ndarray:
    """The ring edges of `ch`, in chain order from the rank `root` (for Broadcast / Reduce)."""
    n = len(ch.order)
    pos = int(np.flatnonzero(ch.order == root)[0])
    return (pos + np.arange(n - 1)) % n


def tree_channels(gpus: tuple[int, ...] | np.ndarray, fabric: Fabric | None,
                  channels: int | None, dtree) -> list[tuple[tuple[np.ndarray, ...], float]] | None:
    """NCCL's trees across servers (``src/graph/trees.cc``, ``connect.cc`` ``connectTrees``):
    per channel, a double binary tree over the servers among the ranks of one rail, each
    server's other ranks chained below its tree rank over NVLink (channel ``j`` starts the chain
    at local rank ``j``). Returns, per distinct channel, the parent arrays of its two trees (over
    ranks) and its share of the data; None where the ranks are not whole equal servers (then the
    flat double binary tree over ranks is used).

    Args:
        dtree: ``n -> (parent0, parent1)``, NCCL's double binary tree over ``n`` nodes.
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    n = len(gpus)
    if fabric is None or channels is None or n < 2:
        return None
    server = fabric.gpu_server[gpus]
    _, first, inv, counts = np.unique(server, return_index=True, return_inverse=True,
                                      return_counts=True)
    if len(counts) == 1 or np.any(counts != counts[0]):
        return None
    g, m = len(counts), int(counts[0])
    srv_rank = np.argsort(np.argsort(first))[inv]
    grid = np.argsort(srv_rank * (int(gpus.max()) + 1) + gpus, kind="stable").reshape(g, m)
    out = []
    node_trees = dtree(g)
    for j in range(min(int(channels), m)):
        copies = len(range(j, int(channels), m))
        rot = np.roll(grid, -j, axis=1)
        parents = []
        for tp in node_trees:
            parent = np.full(n, -1, dtype=np.int64)
            heads = rot[:, 0]
            has = tp >= 0
            parent[heads[has]] = heads[tp[has]]
            parent[rot[:, 1:].ravel()] = rot[:, :-1].ravel()  # the chain below the head
            parents.append(parent)
        out.append((tuple(parents), copies / int(channels)))
    return out
