"""`select`: the algorithm, protocol and channel count NCCL 2.30 would pick, and its time.

The fabric's graph gives NCCL's topology inputs (`flowherd.collectives.topology`), the ported
tuning model (`flowherd.collectives.tuning`) the choice. AllToAll(v) and SendRecv, which NCCL
runs as grouped point-to-point sends outside its tuning model, get ``direct`` / Simple and a
time of flowherd's own: NCCL's Simple base and per-hop latency plus the bytes through the
busiest of each GPU's NIC and NVLink at NCCL's per-channel speeds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from flowherd.collectives.ops import Op
from flowherd.collectives.topology import ServerView, nccl_comm
from flowherd.collectives.tuning import MODEL_OPS, Comm, Tables, algo_time_us, choose, tune
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.units import us


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """NCCL's choice for one collective call.

    Attributes:
        algorithm: "ring", "tree", "nvls", "nvlstree", "pat" (NCCL's), or "direct" (p2p ops).
        protocol: "simple", "ll" or "ll128".
        channels: Channels NCCL runs the call on.
        predicted_time_s: The tuning model's time, seconds.
        op: The operation.
        size_bytes: nccl-tests size.
    """

    algorithm: str
    protocol: str
    channels: int
    predicted_time_s: float
    op: str
    size_bytes: float


@functools.lru_cache(maxsize=512)
def _model(fabric: Fabric, gpus: tuple[int, ...]) -> tuple[Comm, ServerView, Tables]:
    comm, view = nccl_comm(fabric, gpus)
    return comm, view, tune(comm)


def nccl_model(fabric: Fabric, gpus: Sequence[int]) -> tuple[Comm, ServerView, Tables]:
    """The communicator NCCL would build on `gpus`, its server facts and tuning tables (cached
    per fabric and GPU tuple)."""
    return _model(fabric, tuple(int(g) for g in gpus))


def predicted_time_s(fabric: Fabric, gpus: Sequence[int], op: Op | str, size_bytes: float,
                     algorithm: str, protocol: str) -> float | None:
    """The tuning model's time of one (algorithm, protocol), seconds; None where it is off."""
    comm, _, tables = nccl_model(fabric, gpus)
    t = algo_time_us(comm, tables, Op(op), algorithm, protocol, float(size_bytes))
    return None if t is None else t * us


def _p2p(view: ServerView, comm: Comm, op: Op, size_bytes: float) -> Selection:
    n, m = view.n_ranks, view.local_ranks
    ring = comm.graphs["ring"]
    if op == Op.SENDRECV:
        inter = view.n_nodes > 1
        bw = ring.bw_inter if inter else max(ring.bw_intra, view.nvl_bw)
        lat = 8.4 + (14.0 if inter else 3.4)
        t = lat + size_bytes / (1000 * bw)
    else:
        # each rank sends size/n to every other rank: (n - m) shares leave the server through the
        # GPU's NIC (PXN puts every share on its destination's rail), m - 1 stay on NVLink
        share = size_bytes / n
        nic_gbps = max(min(view.nic_bw, view.pci_bw) * view.nics / max(m, 1), 1e-9)
        t_net = (n - m) * share / (1000 * nic_gbps) if view.n_nodes > 1 else 0.0
        intra = view.nvl_bw if view.nvl_bw > 0 else view.pci_bw
        t_intra = (m - 1) * share / (1000 * intra) if m > 1 else 0.0
        lat = 8.4 + (14.0 if view.n_nodes > 1 else 3.4)
        t = lat + max(t_net, t_intra) if n > 1 else 0.0
    return Selection(algorithm="direct", protocol="simple", channels=comm.n_channels,
                     predicted_time_s=t * us, op=op.value, size_bytes=float(size_bytes))


def select(fabric: Fabric, gpus: Sequence[int], op: Op | str, size_bytes: float) -> Selection:
    """What NCCL 2.30 runs for `op` of `size_bytes` on the GPUs `gpus` of `fabric`.

    Args:
        fabric: The fabric (its servers, NICs, NVLink and NVSwitch are NCCL's topology).
        gpus: GPU ids of `fabric`, in rank order.
        op: A CLI op name: allreduce, allgather, reducescatter, broadcast, reduce, alltoall,
            alltoallv, sendrecv.
        size_bytes: nccl-tests size (`flowherd.collectives.ops`).

    Returns:
        The algorithm, protocol, channel count and predicted time.

    >>> from flowherd.fabric.presets import preset
    >>> s = select(preset("dgx-superpod-h100-1su"), range(16), "allreduce", 1 << 30)
    >>> (s.algorithm, s.protocol, s.channels)
    ('nvlstree', 'simple', 16)
    """
    try:
        the_op = Op(str(op).lower())
    except ValueError:
        raise ConfigError(f"op must be one of {', '.join(o.value for o in Op)}, got {op!r} "
                          "(op)") from None
    if not size_bytes >= 0:
        raise ConfigError(f"size must be non-negative, got {size_bytes} (size_bytes)")
    comm, view, tables = nccl_model(fabric, gpus)
    if the_op not in MODEL_OPS:
        return _p2p(view, comm, the_op, float(size_bytes))
    c = choose(comm, tables, the_op, float(size_bytes))
    return Selection(algorithm=c.algorithm, protocol=c.protocol, channels=c.channels,
                     predicted_time_s=c.time_us * us, op=the_op.value, size_bytes=float(size_bytes))
