"""Host pacers: rate caps of GPU pairs as private virtual links, exact under max-min sharing.

A plan may cap the rate of what a GPU pair sends (a NIC's per-queue-pair rate limiter, as
NCCL's channel rate caps a channel): ``caps[(src, dst)]`` bytes per second. Each capped pair
gets one *pacer*: a link of capacity ``caps[(src, dst)]`` appended after the fabric's links,
and `PacedRouter` puts it on the path of every flow of that pair (fraction 1). Max-min sharing
then gives the pair's flows together at most the cap, and exactly their max-min rates on the
real links where those are lower: a cap is a bottleneck link like any other, so the compiled
allocation kernels need no change.

A pacer is not a network link. It is a `flowherd.fabric.core.LinkKind.PCIE` link from the
pair's destination GPU to its source GPU (the reverse direction: no router runs on the paced
fabric, and no path search could take it as a short cut from src to dst), with no latency, so
the congestion models (`flowherd.engine.network`: ``tcp``, ``roce``) give it no queue, no ECN
marks, no PFC pauses and no drops (they model `LinkKind.NETWORK` links only), and add nothing
to a flow's round trip. What they do see is the flow's line rate, the narrowest link of its
path (`flowherd.engine.network.kernels.flow_pass`): a paced flow arrives at a switch port at most
at its cap, so the first-window bursts and the arrival potential that decide whether a port
queues, marks or pauses are the paced ones. That is the point of pacing.

Scope: the pacers pace the flows the cluster's router routes (the jobs' collectives, and the
private probes of the ``phase`` fidelity); `flowherd.cluster.simulate.simulate_cluster` routes the
background with the router it was given, unpaced. A controller granted paths that re-routes a
flow keeps its pacer (`flowherd.cluster.control_api.ControlHook`, ``pacers``): the cap is the
host's, whichever path the flow takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.routing.base import Routes

__all__ = ["PacedRouter", "Pacing", "make_pacing"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Pacing:
    """A fabric with one pacer link per capped GPU pair (module docstring).

    Attributes:
        fabric: The base fabric's nodes and links, then the pacers (ids ``base_links`` onward).
        base_links: Number of links of the base fabric.
        pacer_of: ``(src, dst)`` GPU pair -> its pacer's link id.
    """

    fabric: Fabric
    base_links: int
    pacer_of: Mapping[tuple[int, int], int] = field(default_factory=dict)

    def router(self, base: Any) -> PacedRouter:
        """``base`` (a router on the base fabric) with the pacers on its paths."""
        return PacedRouter(base, self)


def make_pacing(fabric: Fabric, caps: Mapping[tuple[int, int], float]) -> Pacing:
    """The paced fabric of ``caps`` (``(src GPU, dst GPU)`` -> bytes per second).

    Raises:
        ConfigError: A pair that is not two distinct GPUs of ``fabric``, a cap that is not
            positive and finite.
    """
    g = fabric.num_gpus
    pairs = sorted((int(a), int(b)) for a, b in caps)
    for a, b in pairs:
        if not (0 <= a < g and 0 <= b < g and a != b):
            raise ConfigError(f"a paced pair must be two distinct GPU ids in 0..{g - 1}, got "
                              f"({a}, {b}) (pacing)")
    rate = np.array([float(caps[p]) for p in pairs], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(rate) | ~(rate > 0))
    if bad.size:
        raise ConfigError(f"a pacing rate must be positive and finite bytes/s, got {rate[bad[0]]!r} "
                          f"(pacing of pair {pairs[int(bad[0])]})")
    n = fabric.num_directed_links
    if not pairs:
        return Pacing(fabric=fabric, base_links=n)
    src = np.array([b for _, b in pairs], dtype=np.int32)  # dst GPU -> src GPU (module docstring)
    dst = np.array([a for a, _ in pairs], dtype=np.int32)
    kind = np.asarray(fabric.link_kind)
    paced = replace(
        fabric,
        link_src=np.concatenate([fabric.link_src, src]),
        link_dst=np.concatenate([fabric.link_dst, dst]),
        link_capacity_bytes_per_s=np.concatenate([fabric.link_capacity_bytes_per_s, rate]),
        link_latency_s=np.concatenate([fabric.link_latency_s, np.zeros(len(pairs))]),
        link_kind=np.concatenate([kind, np.full(len(pairs), LinkKind.PCIE, dtype=kind.dtype)]),
        params={**dict(fabric.params), "pacers": len(pairs)})
    return Pacing(fabric=paced, base_links=n, pacer_of={p: n + i for i, p in enumerate(pairs)})


class PacedRouter:
    """A router whose flows of a paced pair also cross the pair's pacer (fraction 1)."""

    def __init__(self, base: Any, pacing: Pacing):
        self.base = base
        self.pacing = pacing
        self.name = f"{getattr(base, 'name', 'custom')}+paced"

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray | None = None) -> Routes:
        """``base``'s routes, the pacer appended to every flow of a paced pair."""
        r = self.base.route(src, dst, key) if key is not None else self.base.route(src, dst)
        pac = self.pacing.pacer_of
        extra = np.array([pac.get((a, b), -1) for a, b in zip(np.asarray(src).tolist(),
                                                               np.asarray(dst).tolist(), strict=True)],
                         dtype=np.int64)
        has = extra >= 0
        if not has.any():
            return r
        lens = np.diff(np.asarray(r.ptr, dtype=np.int64))
        new_lens = lens + has
        ptr = np.zeros(lens.size + 1, dtype=np.int64)
        np.cumsum(new_lens, out=ptr[1:])
        link = np.empty(int(ptr[-1]), dtype=np.int32)
        frac = np.empty(int(ptr[-1]), dtype=np.float64)
        # the base incidences keep their order; each paced flow's pacer goes after its links
        pos = np.arange(int(lens.sum())) + np.repeat(ptr[:-1] - np.asarray(r.ptr[:-1], np.int64), lens)
        link[pos] = r.link
        frac[pos] = r.frac
        last = ptr[1:][has] - 1
        link[last] = extra[has]
        frac[last] = 1.0
        return Routes(ptr=ptr, link=link, frac=frac, latency_s=np.asarray(r.latency_s))
