"""Analytic alpha-beta times of the algorithms of `flowherd.collectives.algorithms`.

Model (Hockney; as used by Thakur, Rabenseifner & Gropp 2005, "Optimization of collective
communication operations in MPICH", IJHPCA 19(1)): a step in which a GPU sends or receives
``m`` bytes takes ``alpha + m / B``; a GPU's NIC sends and receives at ``B`` each way at once
(full duplex), and the fabric behind it is non-blocking. ``alpha`` is one step's latency (the
protocol's per-step latency plus the path's propagation delay); ``B`` the bandwidth a rank
gets (the NIC bandwidth times the protocol's wire fraction). ``base_s`` is added once.

These are the times of the *step* fidelity on an idle non-blocking fabric. The *collective*
fidelity (one coflow per collective) overlaps the steps' bandwidth terms, and equals
`collective_fidelity_time_s`: the critical path of the latencies plus the most loaded
rank's total bytes over ``B``. The two agree for ring, halving-doubling (powers of two),
direct and pairwise, whose every step loads every rank equally; they differ for pipelined
algorithms (tree, chain Broadcast/Reduce: the pipeline's fill and drain) and for
hierarchical ones (the intra- and inter-server phases overlap in one coflow).
"""

from __future__ import annotations

import math

import numpy as np

from flowherd.collectives.algorithms import default_chunks, fold
from flowherd.collectives.ops import Op
from flowherd.collectives.trees import tree_edges, tree_wavefronts
from flowherd.errors import ConfigError


def ring_time_s(op: Op | str, n: int, size_bytes: float, *, alpha_s: float,
                bandwidth_bytes_per_s: float, chunks: int | None = None, base_s: float = 0.0) -> float:
    """Ring (Patarasuk & Yuan 2009, Sec. 3; Thakur et al. 2005, Sec. 4):

    * AllReduce: ``2(n-1) alpha + 2(n-1)/n S/B``;
    * ReduceScatter, AllGather: ``(n-1) alpha + (n-1)/n S/B``;
    * Broadcast, Reduce (pipelined chain of ``c`` chunks): ``(n-2+c)(alpha + S/(c B))``.

    >>> ring_time_s("allreduce", 4, 4e9, alpha_s=0.0, bandwidth_bytes_per_s=1e9)
    6.0
    """
    op = Op(op)
    a, bw, s = alpha_s, bandwidth_bytes_per_s, size_bytes
    if n == 1:
        return base_s
    if op == Op.ALLREDUCE:
        return base_s + 2 * (n - 1) * a + 2 * (n - 1) / n * s / bw
    if op in (Op.REDUCESCATTER, Op.ALLGATHER):
        return base_s + (n - 1) * a + (n - 1) / n * s / bw
    if op in (Op.BROADCAST, Op.REDUCE):
        c = chunks or default_chunks(s)
        return base_s + (n - 2 + c) * (a + s / (c * bw))
    raise ConfigError(f"ring has no closed form for op {op.value!r} (op)")


def tree_time_s(n: int, size_bytes: float, *, alpha_s: float, bandwidth_bytes_per_s: float,
                chunks: int | None = None, base_s: float = 0.0) -> float:
    """Pipelined double binary tree AllReduce in ``W = c + 2D - 1`` lock-step wavefronts:
    ``sum_w (alpha + L_w S / (2 c B))`` where ``L_w`` is the largest number of chunks any rank
    sends or receives in wavefront ``w`` (at most 4 in steady state: up and two children down
    in its inner tree, up in its leaf tree). For large ``c`` this tends to NCCL's model,
    ``2 S / B`` (tuning.cc: tree algbw = busbw / 2).
    """
    if n == 1:
        return base_s
    c = chunks or default_chunks(size_bytes / 2)
    t = base_s
    for src, dst in tree_wavefronts(n, c):
        load = max(np.bincount(src, minlength=n).max(), np.bincount(dst, minlength=n).max())
        t += alpha_s + load * size_bytes / (2 * c * bandwidth_bytes_per_s)
    return t


def tree_max_rank_bytes(n: int, size_bytes: float) -> float:
    """Largest total a rank sends or receives in the double binary tree AllReduce (``2 S`` for
    ``n >= 4``: inner node with two children in one tree, leaf in the other)."""
    if n == 1:
        return 0.0
    child, parent, _, _ = tree_edges(n)
    # each edge carries S/2 up (reduce) and S/2 down (broadcast)
    out = np.bincount(child, minlength=n) + np.bincount(parent, minlength=n)
    return float(out.max()) * size_bytes / 2


def halving_doubling_time_s(op: Op | str, n: int, size_bytes: float, *, alpha_s: float,
                            bandwidth_bytes_per_s: float, base_s: float = 0.0) -> float:
    """Recursive halving / doubling (Thakur et al. 2005, Sec. 4.1 and 4.3), ``p' = 2^floor(log2 n)``,
    ``r = n - p'``, ``lg = log2 p'``:

    * AllReduce (Rabenseifner): ``2 lg alpha + 2 (p'-1)/p' S/B``, plus ``2 (alpha + S/B)`` for
      the fold when ``r > 0``;
    * ReduceScatter, AllGather: ``lg alpha + sum_{m=1,2,..,p'/2} (m + min(m, r)) S/(n B)``
      (the survivor whose blocks include the most folded ranks limits each step), plus
      ``alpha + S/B`` and ``alpha + S/(n B)`` (ReduceScatter) or ``alpha + S/(n B)`` and
      ``alpha + (n-1) S/(n B)`` (AllGather) for fold and unfold when ``r > 0``.
    """
    op = Op(op)
    a, bw, s = alpha_s, bandwidth_bytes_per_s, size_bytes
    if n == 1:
        return base_s
    _, _, p2 = fold(n)
    r, lg = n - p2, int(math.log2(p2))
    if op == Op.ALLREDUCE:
        t = 2 * lg * a + 2 * (p2 - 1) / p2 * s / bw
        return base_s + t + (2 * (a + s / bw) if r else 0.0)
    if op in (Op.REDUCESCATTER, Op.ALLGATHER):
        ms = [1 << k for k in range(lg)]
        t = lg * a + sum(m + min(m, r) for m in ms) * s / (n * bw)
        if r:
            t += 2 * a + (s + s / n if op == Op.REDUCESCATTER else s) / bw
        return base_s + t
    raise ConfigError(f"halving_doubling has no closed form for op {op.value!r} (op)")


def direct_time_s(op: Op | str, n: int, size_bytes: float, *, alpha_s: float,
                  bandwidth_bytes_per_s: float, matrix_bytes: np.ndarray | None = None,
                  base_s: float = 0.0) -> float:
    """Direct (all transfers of a phase at once; each rank's NIC is the bottleneck):

    * AllToAll, AllGather, ReduceScatter: ``alpha + (n-1)/n S/B``;
    * AllReduce: ``2 alpha + 2(n-1)/n S/B``;
    * Broadcast, Reduce: ``alpha + (n-1) S/B`` (the root's NIC carries all);
    * SendRecv: ``alpha + S/B``;
    * AllToAllv: ``alpha + max(max row sum, max column sum) / B`` (off-diagonal).
    """
    op = Op(op)
    a, bw, s = alpha_s, bandwidth_bytes_per_s, size_bytes
    if n == 1:
        return base_s
    if op in (Op.ALLTOALL, Op.ALLGATHER, Op.REDUCESCATTER):
        return base_s + a + (n - 1) / n * s / bw
    if op == Op.ALLREDUCE:
        return base_s + 2 * a + 2 * (n - 1) / n * s / bw
    if op in (Op.BROADCAST, Op.REDUCE):
        return base_s + a + (n - 1) * s / bw
    if op == Op.SENDRECV:
        return base_s + a + s / bw
    if op == Op.ALLTOALLV:
        if matrix_bytes is None:
            raise ConfigError("direct alltoallv needs matrix_bytes (matrix_bytes)")
        m = np.array(matrix_bytes, dtype=np.float64)
        np.fill_diagonal(m, 0.0)
        return base_s + a + max(m.sum(axis=1).max(), m.sum(axis=0).max()) / bw
    raise ConfigError(f"direct has no closed form for op {op.value!r} (op)")


def pairwise_time_s(n: int, size_bytes: float, *, alpha_s: float, bandwidth_bytes_per_s: float,
                    base_s: float = 0.0) -> float:
    """Pairwise-exchange AllToAll (Thakur et al. 2005, Sec. 3.5): ``(n-1)(alpha + S/(n B))``."""
    return base_s + (n - 1) * (alpha_s + size_bytes / (n * bandwidth_bytes_per_s))


def hierarchical_time_s(op: Op | str, servers: int, per_server: int, size_bytes: float, *,
                        alpha_intra_s: float, bandwidth_intra_bytes_per_s: float,
                        alpha_inter_s: float, bandwidth_inter_bytes_per_s: float,
                        base_s: float = 0.0, fidelity: str = "step") -> float:
    """Two-level algorithm, ``g`` servers of ``m`` ranks, ``n = g m`` (each GPU its own NIC):

    * AllReduce: intra ring ReduceScatter ``(m-1)(a_i + S/(m B_i))``, inter ring AllReduce
      on ``S/m`` ``2(g-1)(a_o + S/(n B_o))``, intra AllGather as the first;
    * ReduceScatter: the first two phases (the second with ``g-1`` steps);
    * AllGather: inter ``(g-1)(a_o + S/(n B_o))`` then intra ``(m-1)(a_i + S/(m B_i))``;
    * AllToAll: ``a_i + (m-1) g S/(n B_i) + a_o + (g-1) m S/(n B_o)``.

    With ``fidelity="collective"`` the phases share one coflow: the latencies add up, the
    bandwidth term is the larger of the intra and inter totals (NVLink and NICs are distinct
    links, so both run at once).
    """
    op = Op(op)
    g, m, s = servers, per_server, size_bytes
    n = g * m
    if op == Op.ALLREDUCE:
        k_i, bytes_i = 2 * (m - 1), 2 * (m - 1) * s / m
        k_o, bytes_o = 2 * (g - 1), 2 * (g - 1) * s / n
    elif op == Op.REDUCESCATTER or op == Op.ALLGATHER:
        k_i, bytes_i = m - 1, (m - 1) * s / m
        k_o, bytes_o = g - 1, (g - 1) * s / n
    elif op == Op.ALLTOALL:
        k_i, bytes_i = int(m > 1), (m - 1) * g * s / n
        k_o, bytes_o = int(g > 1), (g - 1) * m * s / n
    else:
        raise ConfigError(f"hierarchical has no closed form for op {op.value!r} (op)")
    lat = k_i * alpha_intra_s + k_o * alpha_inter_s
    t_i, t_o = bytes_i / bandwidth_intra_bytes_per_s, bytes_o / bandwidth_inter_bytes_per_s
    if fidelity == "collective":
        return base_s + lat + max(t_i, t_o)
    if fidelity != "step":
        raise ConfigError(f"fidelity must be 'step' or 'collective', got {fidelity!r} (fidelity)")
    return base_s + lat + t_i + t_o


def alpha_beta_time_s(algorithm: str, op: Op | str, n: int, size_bytes: float, *, alpha_s: float,
                      bandwidth_bytes_per_s: float, chunks: int | None = None,
                      matrix_bytes: np.ndarray | None = None, base_s: float = 0.0) -> float:
    """Closed-form time of a single-level algorithm (ring, tree, halving_doubling, direct,
    pairwise) at step fidelity; see the per-algorithm functions for the formulas."""
    op = Op(op)
    kw = dict(alpha_s=alpha_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s, base_s=base_s)
    if algorithm == "ring":
        return ring_time_s(op, n, size_bytes, chunks=chunks, **kw)
    if algorithm == "tree":
        if op != Op.ALLREDUCE:
            raise ConfigError(f"tree has no closed form for op {op.value!r} (op)")
        return tree_time_s(n, size_bytes, chunks=chunks, **kw)
    if algorithm == "halving_doubling":
        return halving_doubling_time_s(op, n, size_bytes, **kw)
    if algorithm == "direct":
        return direct_time_s(op, n, size_bytes, matrix_bytes=matrix_bytes, **kw)
    if algorithm == "pairwise":
        if op not in (Op.ALLTOALL,):
            raise ConfigError(f"pairwise has no closed form for op {op.value!r} (op)")
        return pairwise_time_s(n, size_bytes, **kw)
    raise ConfigError(f"no single-level closed form for algorithm {algorithm!r}; expected ring, "
                      "tree, halving_doubling, direct or pairwise (algorithm)")


def aggregate_time_s(schedule, *, alpha_s: float, bandwidth_bytes_per_s: float,
                     base_s: float = 0.0) -> float:
    """The `collective` fidelity's time on an idle non-blocking fabric with one link class:
    ``base + (steps on the longest dependency chain) alpha + max over GPUs of max(bytes
    sent, bytes received) / B``, the schedule's whole volume moving as one coflow (the
    most loaded NIC is the bottleneck, at ``B`` each way).

    Args:
        schedule: A `flowherd.collectives.schedule.Schedule`.
        alpha_s: One step's latency (protocol + path), seconds.
        bandwidth_bytes_per_s: Payload bandwidth of a NIC (wire bandwidth x wire fraction).
        base_s: Added once.
    """
    if not schedule.steps:
        return base_s
    src, dst, size = schedule.pair_bytes()
    n = int(max(src.max(), dst.max())) + 1 if src.size else 1
    load = max(np.bincount(src, weights=size, minlength=n).max(),
               np.bincount(dst, weights=size, minlength=n).max()) if src.size else 0.0
    hops, _ = schedule.critical_path(np.ones(schedule.num_steps))
    return base_s + hops * alpha_s + load / bandwidth_bytes_per_s
