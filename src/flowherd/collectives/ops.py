"""Collective operations and the nccl-tests reporting conventions.

Sizes follow nccl-tests (``doc/PERFORMANCE.md`` of NVIDIA/nccl-tests): ``size_bytes`` is

* AllReduce, Broadcast, Reduce, SendRecv: the buffer each rank holds;
* AllGather: the gathered (output) buffer, ``n`` shards of ``size_bytes / n``;
* ReduceScatter: the input buffer, ``n`` shards of ``size_bytes / n``;
* AllToAll: what each rank sends in all, ``size_bytes / n`` to each rank (itself included);
* AllToAllv: the largest per-rank send total; the matrix gives every pair's bytes.

``algbw = size_bytes / time_s`` and ``busbw = algbw * busbw_factor(op, n)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from flowherd.errors import ConfigError


class Op(StrEnum):
    ALLREDUCE = "allreduce"
    REDUCESCATTER = "reducescatter"
    ALLGATHER = "allgather"
    ALLTOALL = "alltoall"
    ALLTOALLV = "alltoallv"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SENDRECV = "sendrecv"


def busbw_factor(op: Op, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: AllReduce 2(n-1)/n; ReduceScatter, AllGather,
    AllToAll(v) (n-1)/n; Broadcast, Reduce, SendRecv 1.

    >>> busbw_factor(Op.ALLREDUCE, 8)
    1.75
    """
    op = Op(op)
    if op == Op.ALLREDUCE:
        return 2 * (n - 1) / n
    if op in (Op.REDUCESCATTER, Op.ALLGATHER, Op.ALLTOALL, Op.ALLTOALLV):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    """One collective call over GPUs (node ids of a `Fabric`), in rank order.

    Attributes:
        op: The operation.
        gpus: GPU node ids; rank ``i`` runs on ``gpus[i]``. SendRecv has two: sender, receiver.
        size_bytes: Size by the nccl-tests convention (module docstring).
        root: Rank index of the root for Broadcast and Reduce.
        matrix_bytes: AllToAllv only: ``[n, n]`` bytes sent by rank i to rank j.
    """

    op: Op
    gpus: tuple[int, ...]
    size_bytes: float
    root: int = 0
    matrix_bytes: np.ndarray | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", Op(self.op))
        object.__setattr__(self, "gpus", tuple(int(g) for g in self.gpus))
        n = len(self.gpus)
        if n < 1:
            raise ConfigError("a collective needs at least one GPU (gpus)")
        if len(set(self.gpus)) != n:
            raise ConfigError(f"a collective's GPUs must be distinct, got {self.gpus} (gpus)")
        if self.op == Op.SENDRECV and n != 2:
            raise ConfigError(f"sendrecv takes exactly 2 GPUs (sender, receiver), got {n} (gpus)")
        if not (self.size_bytes >= 0):
            raise ConfigError(f"size must be non-negative, got {self.size_bytes} (size_bytes)")
        if not 0 <= self.root < n:
            raise ConfigError(f"root must be a rank in 0..{n - 1}, got {self.root} (root)")
        if self.op == Op.ALLTOALLV:
            m = self.matrix_bytes
            if m is None or np.shape(m) != (n, n) or np.any(np.asarray(m) < 0):
                raise ConfigError(
                    f"alltoallv needs matrix_bytes of shape ({n}, {n}) with non-negative "
                    f"entries, got {None if m is None else np.shape(m)} (matrix_bytes)"
                )

    @property
    def n(self) -> int:
        return len(self.gpus)

    def busbw_factor(self) -> float:
        return busbw_factor(self.op, self.n)

    def pair_matrix_bytes(self) -> np.ndarray:
        """``[n, n]`` bytes rank i sends rank j in an AllToAll(v), the diagonal (a rank's share
        for itself, never on a link) zeroed.

        >>> Collective(op="alltoall", gpus=(0, 1), size_bytes=8).pair_matrix_bytes().tolist()
        [[0.0, 4.0], [4.0, 0.0]]
        """
        if self.op == Op.ALLTOALLV:
            d = np.asarray(self.matrix_bytes, dtype=np.float64).copy()
        elif self.op == Op.ALLTOALL:
            d = np.full((self.n, self.n), float(self.size_bytes) / self.n)
        else:
            raise ConfigError(f"a pair matrix is defined for alltoall(v), got {self.op.value!r} (op)")
        np.fill_diagonal(d, 0.0)
        return d
