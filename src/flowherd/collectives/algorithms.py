"""Collective algorithms: plain functions turning a `Collective` into a `Schedule`.

Every algorithm has the signature ``fn(collective, *, fabric=None, protocol="simple",
chunks=None) -> Schedule`` and is registered in `ALGORITHMS` under its name:

* ``ring``: AllReduce = ReduceScatter + AllGather, ``2(n-1)`` steps of ``S/n``;
  ReduceScatter / AllGather ``n-1`` steps; Broadcast / Reduce as a chunked pipelined chain
  (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
  workstations", JPDC 69(2)).
* ``tree``: NCCL's double binary tree for AllReduce (NVIDIA/nccl ``src/graph/trees.cc`` @ 18a07eee,
  ``ncclGetBtree`` / ``ncclGetDtree``): two complementary trees each carry half the data,
  reduce up then broadcast down, chunked and pipelined in lock-step wavefronts.
* ``halving_doubling``: Rabenseifner's AllReduce (recursive-halving ReduceScatter +
  recursive-doubling AllGather), and those two halves alone; non-powers of two by the
  standard fold of Thakur, Rabenseifner & Gropp 2005 ("Optimization of collective
  communication operations in MPICH", IJHPCA 19(1), Sec. 4.3).
* ``direct``: every transfer at once (AllToAll(v), AllGather, ReduceScatter, AllReduce as
  direct ReduceScatter + direct AllGather, Broadcast, Reduce, SendRecv).
* ``pairwise``: AllToAll(v) in ``n-1`` shifted exchange steps (rank i sends to i+k in step k).
* ``hierarchical``: intra-server, then across servers among GPUs of the same local rank,
  then intra-server again (AllReduce, ReduceScatter, AllGather, AllToAll); needs the fabric.

A schedule's flows are between the collective's GPUs (fabric node ids). Each step carries
the protocol's per-step latency (NCCL ``hwLat`` for the link class it crosses) and the
steps without predecessors also carry NCCL's ``baseLat`` (`flowherd.collectives.nccl`).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from flowherd.collectives.channels import chain_edges, ring_channels, ring_edges, tree_channels
from flowherd.collectives.nccl import (
    LATENCY_MODELS,
    PROTOCOLS,
    WIRE_FRACTION,
    Protocol,
    base_latency_s,
    step_latency_s,
)
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule, steps_shared
from flowherd.collectives.trees import nccl_dtree, parent_wavefronts, tree_wavefronts
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.registry import Registry
from flowherd.units import MiB

Algorithm = Callable[..., Schedule]
ALGORITHMS: Registry[Algorithm] = Registry("collective algorithm")

# Pipelining granularity when `chunks` is not given: 1 MiB chunks, at most 64 per pipeline.
# NCCL's Simple protocol moves data in slices of a few hundred KiB per channel
# (NCCL_STEPS x buffSize / ...); 1 MiB keeps the step count of big collectives moderate.
DEFAULT_CHUNK_BYTES = 1 * MiB
MAX_CHUNKS = 64
#: Bytes one NCCL channel forwards per chain step of a ring Broadcast / Reduce, per protocol
#: (src/init.cc, src/include/device.h, collectives.h, enqueue.cc calcCollChunking; NCCL
#: 2.30.7): Simple DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS 8 x BROADCAST_CHUNKSTEPS 1 = 512 KiB;
#: LL DEFAULT_LL_BUFFSIZE (8 lines x 512 threads x 8 steps x 16 B) / 8 / 2 = 32 KiB of data;
#: LL128 DEFAULT_LL128_BUFFSIZE (120 x 640 x 8 x 8 B) / 8 x 15/16 = 576,000 B of data.
CHAIN_CHUNK_BYTES = {"simple": 512 * 1024, "ll": 32 * 1024, "ll128": 576_000}  # Simple used
#: At most this many chunks per channel in a chain (4 GiB on 16 channels: 512 of NCCL's).
MAX_CHAIN_CHUNKS = 512


def default_chunks(pipeline_bytes: float) -> int:
    """Chunks a pipelined algorithm cuts `pipeline_bytes` into when not told."""
    return int(min(MAX_CHUNKS, max(1, math.ceil(pipeline_bytes / DEFAULT_CHUNK_BYTES))))


class _Builder:
    """Collects steps in rank space; `build` maps ranks to GPUs and sets latencies. Steps added
    with the same arrays (a ring's steps repeat one edge set) share one pattern
    (`flowherd.collectives.schedule.steps_shared`): the schedule holds their flows once."""

    def __init__(self, coll: Collective, algorithm: str, protocol: str, fabric: Fabric | None,
                 family: str = "ring"):
        self.coll = coll
        self.algorithm = algorithm
        self.protocol = PROTOCOLS[str(protocol).lower()]
        self.fabric = fabric
        self.family = family
        # distinct flow sets (src, dst, size) and, per step, its pattern and dependencies
        self.pats: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.raw: list[tuple[int, tuple[int, ...]]] = []
        # by the identity of the arrays given (held, so that an id is never reused), or the value
        # of a scalar size
        self._seen: dict[tuple, tuple[object, object, object, int]] = {}
        self.hop_latency_s: float | None = None  # overrides the per-step latency when set

    def add(self, src, dst, size, deps=()) -> int:
        scalar = np.ndim(size) == 0
        key = (id(src), id(dst), ("v", float(size)) if scalar else id(size))
        hit = self._seen.get(key)
        if hit is not None and hit[0] is src and hit[1] is dst and (scalar or hit[2] is size):
            p = hit[3]
        else:
            s = np.asarray(src, dtype=np.int64).ravel()
            d = np.asarray(dst, dtype=np.int64).ravel()
            z = np.asarray(size, dtype=np.float64)  # a scalar: every flow's, spread in `build`
            if z.ndim and z.shape != s.shape:
                z = np.broadcast_to(z, s.shape)
            p = len(self.pats)
            self.pats.append((s, d, z))
            self._seen[key] = (src, dst, size, p)
        self.raw.append((p, tuple(deps)))
        return len(self.raw) - 1

    def chain(self, src, dst, size) -> int:
        """Add a step waiting for the previous one."""
        return self.add(src, dst, size, () if not self.raw else (len(self.raw) - 1,))

    def build(self) -> Schedule:
        gpus = np.asarray(self.coll.gpus, dtype=np.int64)
        fab = self.fabric
        intra_hw = "net"
        if fab is not None:
            intra_hw = "nvlink" if np.any(fab.link_kind == LinkKind.NVLINK) else "pci"
        base = base_latency_s(self.protocol, algorithm_family=self.family)
        hop = {hw: (step_latency_s(self.protocol, algorithm_family=self.family, hw=hw)
                    if self.hop_latency_s is None else self.hop_latency_s)
               for hw in {intra_hw, "net"}}
        raw = self.raw
        if not raw:
            return Schedule(collective=self.coll, algorithm=self.algorithm, protocol=self.protocol.value,
                            steps=(), wire_fraction=WIRE_FRACTION[self.protocol])
        # each pattern's flows of positive size, on GPUs; intra-server if all stay in a server
        pats, pat_intra = [], []
        for s, d, z in self.pats:
            size = z if z.ndim else np.full(len(s), float(z))
            keep = size > 0
            src, dst = gpus[s[keep]], gpus[d[keep]]
            pats.append((src, dst, size[keep]))
            intra = bool(keep.any())
            if fab is None:
                intra = False
            elif intra:
                intra = not np.any(fab.gpu_server[src] != fab.gpu_server[dst])
            pat_intra.append(intra)
        deps = [r[1] for r in raw]
        which = [r[0] for r in raw]
        intra_l = [pat_intra[p] for p in which]
        lat = [hop[intra_hw if i else "net"] + (0.0 if d else base)
               for i, d in zip(intra_l, deps, strict=True)]
        steps = steps_shared(patterns=pats, step_pattern=which, deps=deps, latency_s=lat,
                             intra_server=intra_l)
        return Schedule(collective=self.coll, algorithm=self.algorithm, protocol=self.protocol.value,
                        steps=steps, wire_fraction=WIRE_FRACTION[self.protocol])


def _unsupported(coll: Collective, algorithm: str, supported: tuple[Op, ...]) -> ConfigError:
    return ConfigError(f"algorithm {algorithm!r} does not implement op {coll.op.value!r}; "
                       f"it implements {', '.join(o.value for o in supported)} (op, algorithm)")


def _check_chunks(chunks: int | None, pipeline_bytes: float) -> int:
    if chunks is None:
        return default_chunks(pipeline_bytes)
    if int(chunks) != chunks or chunks < 1:
        raise ConfigError(f"chunks must be a positive integer, got {chunks!r} (chunks)")
    return int(chunks)


# ---- ring -------------------------------------------------------------------------------------
_RING_OPS = (Op.ALLREDUCE, Op.REDUCESCATTER, Op.ALLGATHER, Op.BROADCAST, Op.REDUCE)


@ALGORITHMS.register("ring")
def ring(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
         chunks: int | None = None, channels: int | None = None) -> Schedule:
    """Ring algorithms (Patarasuk & Yuan 2009); Broadcast/Reduce as a pipelined chain.

    Without `channels`: one ring, rank ``i`` sends to rank ``i+1 (mod n)``. AllReduce:
    ``2(n-1)`` steps of ``S/n``; ReduceScatter and AllGather: ``n-1`` steps of ``S/n``.
    Broadcast from the root along ``root, root+1, ...`` (Reduce the other way) in ``c`` chunks
    of ``S/c``: ``n-2+c`` wavefronts, edge ``i`` of the chain carrying chunk ``w-i`` in
    wavefront ``w``. With `channels` (and the fabric): NCCL's C rings
    (`flowherd.collectives.channels.ring_channels`: rail-aligned, one NIC per channel, PXN),
    each carrying its share of the data, all advancing in the same steps.
    """
    b = _Builder(coll, "ring", protocol, fabric)
    n, size = coll.n, float(coll.size_bytes)
    if coll.op not in _RING_OPS:
        raise _unsupported(coll, "ring", _RING_OPS)
    if n < 2:
        return b.build()
    rings = ring_channels(coll.gpus, fabric, channels)
    if fabric is not None and len(rings) > 1:
        # NCCL's channels pipeline: a chunk crosses the network on g of its n hops, so a step
        # costs NCCL's mean hop latency (tuning.cc: (nsteps - nInter) intraLat + nInter interLat)
        g = len(np.unique(fabric.gpu_server[np.asarray(coll.gpus)]))
        intra_hw = "nvlink" if np.any(fabric.link_kind == LinkKind.NVLINK) else "pci"
        b.hop_latency_s = ((n - g) * step_latency_s(protocol, hw=intra_hw)
                           + g * step_latency_s(protocol, hw="net")) / n
    if coll.op in (Op.ALLREDUCE, Op.REDUCESCATTER, Op.ALLGATHER):
        nsteps = 2 * (n - 1) if coll.op == Op.ALLREDUCE else n - 1
        edges = np.arange(n)
        flows = [ring_edges(ch, edges) for ch in rings]
        src = np.concatenate([f[0] for f in flows])
        dst = np.concatenate([f[1] for f in flows])
        sz = np.concatenate([np.full(len(f[0]), size * ch.fraction / n)
                             for f, ch in zip(flows, rings, strict=True)])
        for _ in range(nsteps):
            b.chain(src, dst, sz)
        return b.build()
    chains = [chain_edges(ch, coll.root) for ch in rings]
    nccl_mode = chunks is None and channels is not None and fabric is not None
    if nccl_mode and b.protocol != Protocol.SIMPLE:
        # LL / LL128 carry a flag in every 8 B / 128 B line: a rank forwards each line as it
        # lands (cut-through), so the chain streams: every edge carries its share at once and
        # the hops' latencies add up (tuning.cc prices it so: nsteps x hwLat without a bandwidth
        # fill). Measured: 64 MiB over 4 x 8 H100 in 451.5 us (benchmarks/nccl_tests.py).
        servers = np.unique(fabric.gpu_server[np.asarray(coll.gpus)])
        intra_hw = "nvlink" if np.any(fabric.link_kind == LinkKind.NVLINK) else "pci"
        hop = b.hop_latency_s if b.hop_latency_s is not None else step_latency_s(
            protocol, hw=intra_hw if len(servers) == 1 else "net")
        b.hop_latency_s = (n - 1) * hop
        parts = [ring_edges(ch, chain) for ch, chain in zip(rings, chains, strict=True)]
        src = np.concatenate([p[0] for p in parts])
        dst = np.concatenate([p[1] for p in parts])
        sz = np.concatenate([np.full(len(p[0]), size * ch.fraction)
                             for p, ch in zip(parts, rings, strict=True)])
        if coll.op == Op.REDUCE:
            src, dst = dst, src
        b.chain(src, dst, sz)
        return b.build()
    if nccl_mode:
        # Simple hands a slice on only once it has all landed (store and forward): every channel
        # forwards its share hop by hop in NCCL's chunks, so the fill costs (n - 1) chunk times
        # whatever the size (a chunk per channel: S / C / c)
        per_channel = size / int(channels)
        c = int(min(MAX_CHAIN_CHUNKS, max(1, math.ceil(per_channel
                                                      / CHAIN_CHUNK_BYTES[b.protocol.value]))))
    else:
        c = _check_chunks(chunks, size)
    if b.hop_latency_s is not None:
        # a pipelined chain pays each hop's latency once, not once per wavefront
        b.hop_latency_s *= (n - 1) / (n - 2 + c)
    stage = np.arange(n - 1) if coll.op == Op.BROADCAST else (n - 2 - np.arange(n - 1))
    for w in range(n - 2 + c):
        on = (w - stage >= 0) & (w - stage < c)
        parts = [ring_edges(ch, chain[on]) for ch, chain in zip(rings, chains, strict=True)]
        src = np.concatenate([p[0] for p in parts])
        dst = np.concatenate([p[1] for p in parts])
        sz = np.concatenate([np.full(len(p[0]), size * ch.fraction / c)
                             for p, ch in zip(parts, rings, strict=True)])
        if coll.op == Op.REDUCE:
            src, dst = dst, src
        b.chain(src, dst, sz)
    return b.build()


# ---- double binary tree (its trees and wavefronts: flowherd.collectives.trees) ---------------
@ALGORITHMS.register("tree")
def tree(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
         chunks: int | None = None, channels: int | None = None) -> Schedule:
    """NCCL's double binary tree AllReduce, chunked and pipelined.

    Each of the two trees carries ``S/2`` in ``c`` chunks of ``S/(2c)``; ``c + 2D - 1``
    lock-step wavefronts, where ``D`` is the depth of the deeper tree. Without `channels`
    (or inside one server) the trees are over the ranks; with `channels` across whole servers,
    NCCL's per-channel trees (`flowherd.collectives.channels.tree_channels`): a double binary
    tree over the servers on one rail per channel, the server's other GPUs chained below it.
    """
    if coll.op != Op.ALLREDUCE:
        raise _unsupported(coll, "tree", (Op.ALLREDUCE,))
    b = _Builder(coll, "tree", protocol, fabric, family="tree")
    n, size = coll.n, float(coll.size_bytes)
    if n < 2:
        return b.build()
    c = _check_chunks(chunks, size / 2)
    per_channel = tree_channels(coll.gpus, fabric, channels, nccl_dtree)
    if per_channel is None:
        for src, dst in tree_wavefronts(n, c):
            b.chain(src, dst, size / (2 * c))
        return b.build()
    waves = [parent_wavefronts(parents, c) for parents, _ in per_channel]
    for w in range(max(len(x) for x in waves)):
        parts = [(x[w], frac) for x, frac in zip(waves, (f for _, f in per_channel), strict=True)
                 if w < len(x)]
        src = np.concatenate([p[0][0] for p in parts])
        dst = np.concatenate([p[0][1] for p in parts])
        sz = np.concatenate([np.full(len(p[0][0]), size * p[1] / (2 * c)) for p in parts])
        b.chain(src, dst, sz)
    return b.build()


# ---- recursive halving / doubling ---------------------------------------------------------------
_RHD_OPS = (Op.ALLREDUCE, Op.REDUCESCATTER, Op.ALLGATHER)


def fold(n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Thakur et al.'s fold to a power of two: with ``p' = 2^floor(log2 n)`` and
    ``r = n - p'``, even ranks ``0, 2, .., 2r-2`` hand their data to the odd rank after them.

    Returns:
        The ``p'`` surviving ranks (ascending), how many ranks each represents (1 or 2), p'.
    """
    p2 = 1 << (n.bit_length() - 1)
    r = n - p2
    survivors = np.concatenate([np.arange(1, 2 * r, 2), np.arange(2 * r, n)]).astype(np.int64)
    weight = np.where(np.arange(p2) < r, 2, 1)
    return survivors, weight, p2


def _halving(b: _Builder, surv: np.ndarray, block: np.ndarray) -> None:
    """Recursive halving among survivors: survivor j sends its partner's half of its range."""
    p2 = len(surv)
    pre = np.concatenate([[0.0], np.cumsum(block)])
    j = np.arange(p2)
    m = p2 // 2
    while m >= 1:
        partner = j ^ m
        lo = partner & ~(m - 1)
        b.chain(surv[j], surv[partner], pre[lo + m] - pre[lo])
        m //= 2


def _doubling(b: _Builder, surv: np.ndarray, block: np.ndarray) -> None:
    """Recursive doubling among survivors: survivor j sends all it holds to its partner."""
    p2 = len(surv)
    pre = np.concatenate([[0.0], np.cumsum(block)])
    j = np.arange(p2)
    m = 1
    while m < p2:
        lo = j & ~(m - 1)
        b.chain(surv[j], surv[j ^ m], pre[lo + m] - pre[lo])
        m *= 2


@ALGORITHMS.register("halving_doubling")
def halving_doubling(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
                     chunks: int | None = None) -> Schedule:
    """Rabenseifner AllReduce; recursive-halving ReduceScatter; recursive-doubling AllGather.

    For ``n`` not a power of two (Thakur, Rabenseifner & Gropp 2005, Sec. 4.3): the first
    ``2r`` ranks fold in pairs (even sends its vector to odd), the ``p'`` survivors run the
    power-of-two algorithm on blocks weighted by the ranks they stand for, and the odd ranks
    send the folded ranks their result at the end.
    """
    if coll.op not in _RHD_OPS:
        raise _unsupported(coll, "halving_doubling", _RHD_OPS)
    b = _Builder(coll, "halving_doubling", protocol, fabric)
    n, size = coll.n, float(coll.size_bytes)
    if n == 1:
        return b.build()
    surv, weight, p2 = fold(n)
    r = n - p2
    evens, odds = np.arange(0, 2 * r, 2), np.arange(1, 2 * r, 2)
    shard = size / n
    if coll.op == Op.ALLREDUCE:
        fold_in, fold_out, block = size, size, np.full(p2, size / p2)
    elif coll.op == Op.REDUCESCATTER:
        fold_in, fold_out, block = size, shard, weight * shard
    else:
        fold_in, fold_out, block = shard, size - shard, weight * shard
    if r:
        b.chain(evens, odds, fold_in)
    if coll.op in (Op.ALLREDUCE, Op.REDUCESCATTER):
        _halving(b, surv, block)
    if coll.op in (Op.ALLREDUCE, Op.ALLGATHER):
        _doubling(b, surv, block)
    if r:
        b.chain(odds, evens, fold_out)
    return b.build()


# ---- direct and pairwise ------------------------------------------------------------------------
_DIRECT_OPS = (Op.ALLTOALL, Op.ALLTOALLV, Op.ALLGATHER, Op.REDUCESCATTER, Op.ALLREDUCE,
               Op.BROADCAST, Op.REDUCE, Op.SENDRECV)


def _all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.divmod(np.arange(n * n), n)
    off = i != j
    return i[off], j[off]


@ALGORITHMS.register("direct")
def direct(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
           chunks: int | None = None) -> Schedule:
    """Every transfer in one step (two for AllReduce: direct ReduceScatter then AllGather).

    AllToAll: ``S/n`` from every rank to every other; AllToAllv: ``matrix_bytes[i, j]``;
    AllGather and ReduceScatter: ``S/n`` per pair; Broadcast: root sends ``S`` to each rank;
    Reduce: each rank sends ``S`` to the root; SendRecv: one flow of ``S``.
    """
    b = _Builder(coll, "direct", protocol, fabric)
    n, size = coll.n, float(coll.size_bytes)
    if n == 1:
        if coll.op not in _DIRECT_OPS:
            raise _unsupported(coll, "direct", _DIRECT_OPS)
        return b.build()
    i, j = _all_pairs(n)
    others = np.delete(np.arange(n), coll.root)
    if coll.op in (Op.ALLTOALL, Op.ALLGATHER, Op.REDUCESCATTER):
        b.chain(i, j, size / n)
    elif coll.op == Op.ALLTOALLV:
        b.chain(i, j, np.asarray(coll.matrix_bytes, dtype=np.float64)[i, j])
    elif coll.op == Op.ALLREDUCE:
        b.chain(i, j, size / n)
        b.chain(i, j, size / n)
    elif coll.op == Op.BROADCAST:
        b.chain(np.full(n - 1, coll.root), others, size)
    elif coll.op == Op.REDUCE:
        b.chain(others, np.full(n - 1, coll.root), size)
    elif coll.op == Op.SENDRECV:
        b.chain([0], [1], size)
    else:  # pragma: no cover - every Op is listed above
        raise _unsupported(coll, "direct", _DIRECT_OPS)
    return b.build()


@ALGORITHMS.register("pairwise")
def pairwise(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
             chunks: int | None = None) -> Schedule:
    """AllToAll(v) as ``n-1`` exchange steps: in step ``k`` rank ``i`` sends to ``i+k mod n``."""
    ops = (Op.ALLTOALL, Op.ALLTOALLV)
    if coll.op not in ops:
        raise _unsupported(coll, "pairwise", ops)
    b = _Builder(coll, "pairwise", protocol, fabric)
    n, size = coll.n, float(coll.size_bytes)
    r = np.arange(n)
    for k in range(1, n):
        dst = (r + k) % n
        if coll.op == Op.ALLTOALL:
            b.chain(r, dst, size / n)
        else:
            b.chain(r, dst, np.asarray(coll.matrix_bytes, dtype=np.float64)[r, dst])
    return b.build()


# ---- hierarchical -------------------------------------------------------------------------------
_HIER_OPS = (Op.ALLREDUCE, Op.REDUCESCATTER, Op.ALLGATHER, Op.ALLTOALL)


def server_grid(coll: Collective, fabric: Fabric) -> np.ndarray:
    """Ranks as a ``[servers, per_server]`` grid (servers in order of first rank, local ranks in
    rank order); raises `ConfigError` unless every server holds the same number of ranks."""
    gpus = np.asarray(coll.gpus)
    if gpus.max() >= fabric.num_gpus:
        raise ConfigError(f"GPU {int(gpus.max())} is not in fabric {fabric.name!r} with "
                          f"{fabric.num_gpus} GPUs (collective.gpus)")
    server = fabric.gpu_server[gpus]
    _, first, inv, counts = np.unique(server, return_index=True, return_inverse=True,
                                      return_counts=True)
    if np.any(counts != counts[0]):
        raise ConfigError(f"hierarchical needs the same number of ranks on every server, got "
                          f"{sorted(set(counts.tolist()))} ranks per server (collective.gpus)")
    order = np.argsort(first[inv] * len(gpus) + np.arange(len(gpus)), kind="stable")
    return order.reshape(len(counts), counts[0])


@ALGORITHMS.register("hierarchical")
def hierarchical(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
                 chunks: int | None = None) -> Schedule:
    """Two-level algorithm over ``g`` servers of ``m`` ranks each (``n = g m``).

    AllReduce: intra-server ring ReduceScatter (``m-1`` steps of ``S/m``), ring AllReduce
    among the ranks of equal local index (``2(g-1)`` steps of ``S/(gm)``), intra-server ring
    AllGather (``m-1`` steps of ``S/m``). ReduceScatter: the first two phases (the second with
    ``g-1`` steps); AllGather: inter ring AllGather (``g-1`` steps of ``S/n``), then intra
    (``m-1`` steps of ``S/m``). AllToAll: one intra step (rank ``(s,a)`` sends ``(s,b)`` the
    ``g S/n`` bytes meant for local index ``b`` on any server), then one inter step (``(s,b)``
    sends ``(s',b)`` the ``m S/n`` bytes for it), the rail-aligned scheme of PXN.
    """
    if coll.op not in _HIER_OPS:
        raise _unsupported(coll, "hierarchical", _HIER_OPS)
    if fabric is None:
        raise ConfigError("algorithm 'hierarchical' needs the fabric to group ranks by server "
                          "(fabric)")
    b = _Builder(coll, "hierarchical", protocol, fabric)
    n, size = coll.n, float(coll.size_bytes)
    grid = server_grid(coll, fabric)
    g, m = grid.shape
    intra_next = np.roll(grid, -1, axis=1)  # (s, a) -> (s, a+1)
    inter_next = np.roll(grid, -1, axis=0)  # (s, a) -> (s+1, a)
    if coll.op in (Op.ALLREDUCE, Op.REDUCESCATTER):
        for _ in range(m - 1):
            b.chain(grid, intra_next, size / m)
        for _ in range((2 if coll.op == Op.ALLREDUCE else 1) * (g - 1)):
            b.chain(grid, inter_next, size / n)
        if coll.op == Op.ALLREDUCE:
            for _ in range(m - 1):
                b.chain(grid, intra_next, size / m)
    elif coll.op == Op.ALLGATHER:
        for _ in range(g - 1):
            b.chain(grid, inter_next, size / n)
        for _ in range(m - 1):
            b.chain(grid, intra_next, size / m)
    else:  # AllToAll
        a, bb = _all_pairs(m)
        if m > 1:
            b.chain(grid[:, a], grid[:, bb], g * size / n)
        s, t = _all_pairs(g)
        if g > 1:
            b.chain(grid[s, :], grid[t, :], m * size / n)
    return b.build()


def build_schedule(collective: Collective, algorithm: str = "ring", *, fabric: Fabric | None = None,
                   protocol: str = "simple", chunks: int | None = None, channels: int | None = None,
                   latency_model: str = "nccl") -> Schedule:
    """Look `algorithm` up in `ALGORITHMS` and build the collective's schedule.

    Args:
        collective: What to run.
        algorithm: A name of `ALGORITHMS`.
        fabric: The fabric (needed by fabric-aware algorithms and by channels).
        protocol: "simple", "ll" or "ll128".
        chunks: Pipelining chunks of tree / chain algorithms (default: by size).
        channels: NCCL channels, for the algorithms that build one ring or tree per channel
            (ring, tree, nvls, nvlstree, pat); None: one, in rank order.
        latency_model: "nccl" (steps carry NCCL's latencies, which hold the paths'; run as
            NCCL runs it, with the fabric and `channels`, the schedule takes NCCL 2.30's
            bandwidth and latency, `flowherd.collectives.calibrate`) or "fabric" (no fixed
            step latency: only the paths' own, which the simulator adds; full link rates).

    >>> s = build_schedule(Collective(op="allreduce", gpus=range(4), size_bytes=4096), "ring")
    >>> (s.num_steps, float(s.steps[0].size_bytes[0]))
    (6, 1024.0)
    """
    model = LATENCY_MODELS[latency_model]
    fn = ALGORITHMS[algorithm]
    kw: dict[str, object] = dict(fabric=fabric, protocol=protocol, chunks=chunks)
    if channels is not None and _takes_channels(fn):
        kw["channels"] = channels
    sched = fn(collective, **kw)
    if model == "fabric":
        return replace(sched, steps=tuple(st.retimed(latency_s=0.0, min_transfer_s=st.min_transfer_s)
                                          for st in sched.steps))
    if fabric is not None and channels is not None:
        from flowherd.collectives.calibrate import as_nccl_runs  # it needs the selector

        sched = as_nccl_runs(sched, fabric)
    # NCCL's latencies hold the wire's: the simulator adds no path latency on top
    return replace(sched, adds_path_latency=False)


@functools.cache
def _takes_channels(fn: Algorithm) -> bool:
    return "channels" in inspect.signature(fn).parameters
