"""What the planner's predictor asks of the simulator's own collective model
(`flowherd.planning.predict`): a collective's time alone on the canonical servers, and the wire
bytes its NCCL schedule sends across a two-leaf split. Both run the code the simulator runs
(NCCL's algorithm, protocol and channels, the per-channel caps), not a copy of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from flowherd.collectives.ops import busbw_factor

if TYPE_CHECKING:
    from flowherd.planning.view import FabricView

__all__ = ["collective_timer", "schedule_cut"]


def collective_timer(view: FabricView | None, n_servers: int, per: int) -> Any:
    """A ``timer(c, local)`` for `flowherd.planning.predict`'s graph times: the collective alone
    in the simulator's own model
    (`flowherd.cluster.collective.simulate_collective`, NCCL-like algorithm choice and latencies,
    spraying), inside server 0 (``local``) or on the canonical servers; None when the fabric is
    not known or too small for the canonical layout."""
    if view is None or view.fabric is None or n_servers > view.num_servers:
        return None
    if np.any(view.server_capacity[:n_servers] < per):
        return None
    from flowherd.cluster.collective import simulate_collective
    from flowherd.collectives.ops import Collective

    canon = np.concatenate([view.gpus_of(k)[:per] for k in range(n_servers)])
    local = view.gpus_of(0)
    memo: dict[tuple[Any, ...], float] = {}

    def timer(c: Collective, inside: bool) -> float:
        ranks = np.asarray(c.gpus, dtype=np.int64)
        if inside and c.n > local.size:
            return busbw_factor(c.op, c.n) * c.size_bytes / view.nvlink_bytes_per_s
        gpus = tuple(local[:c.n].tolist()) if inside else tuple(canon[ranks].tolist())
        key = (c.op, gpus, float(c.size_bytes), c.root)
        if key not in memo:
            if c.n < 2 or c.size_bytes <= 0:
                memo[key] = 0.0
            else:
                one = Collective(op=c.op, gpus=gpus, size_bytes=c.size_bytes, root=c.root,
                                 matrix_bytes=c.matrix_bytes)
                memo[key] = simulate_collective(view.fabric, one, fidelity="collective").time_s
        return memo[key]

    return timer


def schedule_cut(view: FabricView, n_servers: int, per: int) -> Any:
    """A ``cut(c)`` for a collective over canonical virtual GPUs (`collective_timer`'s layout):
    the wire bytes it sends across the canonical two-leaf split (servers ``< n_servers // 2``
    on one side), the larger direction. The schedule is the one the simulator runs: NCCL's
    algorithm, protocol and channels (`flowherd.cluster.collective.choose`, `nccl_channels`),
    built by `flowherd.collectives.algorithms.build_schedule`, whose wire fraction (the
    protocol's overhead) grows every pair's bytes as the simulator's flows grow
    (`flowherd.cluster.executor`); NCCL's per-channel caps are a rate limit, not bytes."""
    from flowherd.cluster.collective import choose, nccl_channels
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.ops import Collective

    canon = np.concatenate([view.gpus_of(k)[:per] for k in range(n_servers)])
    vserver = np.full(int(canon.max()) + 1, -1, np.int64)
    vserver[canon] = np.arange(canon.size) // per
    half = max(1, n_servers // 2)
    memo: dict[tuple[Any, ...], float] = {}  # cut wire bytes per payload byte of one schedule

    def cut(c: Collective) -> float:
        if c.n < 2 or c.size_bytes <= 0:
            return 0.0
        gpus = tuple(canon[np.asarray(c.gpus, dtype=np.int64)].tolist())
        one = Collective(op=c.op, gpus=gpus, size_bytes=c.size_bytes, root=c.root,
                         matrix_bytes=c.matrix_bytes)
        algo, proto = choose(view.fabric, one)
        channels = nccl_channels(view.fabric, one)
        # a schedule's pair bytes are linear in the payload: one build per algorithm choice
        key = (c.op, gpus, c.root, algo, proto, channels,
               None if c.matrix_bytes is None else float(c.size_bytes))
        if key not in memo:
            sched = build_schedule(one, algo, fabric=view.fabric, protocol=proto, channels=channels)
            src, dst, size = sched.pair_bytes()
            a, b = vserver[src] < half, vserver[dst] < half
            wire = size / sched.wire_fraction
            memo[key] = float(max(wire[a & ~b].sum(), wire[~a & b].sum())) / float(c.size_bytes)
        return memo[key] * float(c.size_bytes)

    return cut
