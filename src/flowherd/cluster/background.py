"""Background traffic of a cluster run: its flows drawn ahead for the horizon (sizes
aggregated, `flowherd.cluster.simulate` explains the rule) and the link tiers utilization is reported by."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.records import BackgroundSpec
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.routing.base import Routes
from flowherd.workload.background import BackgroundTraffic, FlowSizeCDF

__all__ = ["Background", "link_tiers", "make_background"]


_EXACT_SUM_MAX = 64
_SIZE_DRAWS = 1 << 20  # uniforms drawn at once for the aggregated sizes


# ---- link tiers ---------------------------------------------------------------------------------
_TIER_NAMES = {1: "host-leaf", 2: "leaf-spine", 3: "spine-core", 4: "core-up"}


def link_tiers(fabric: Fabric) -> tuple[tuple[str, ...], np.ndarray]:
    """Names of the tiers present and the tier index of every directed link."""
    kind = np.asarray(fabric.link_kind)
    lo = np.minimum(fabric.node_tier[fabric.link_src], fabric.node_tier[fabric.link_dst]).astype(np.int64)
    label = np.where(kind == LinkKind.NVLINK, -2, np.where(kind == LinkKind.PCIE, -1, lo))
    names = []
    codes = np.unique(label)
    for c in codes.tolist():
        names.append("nvlink" if c == -2 else "pcie" if c == -1 else _TIER_NAMES.get(c, f"tier{c}"))
    return tuple(names), np.searchsorted(codes, label)


# ---- background ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Background:
    """The background flows of a run, drawn for the whole horizon (sorted by start).

    Attributes:
        start_s, size_bytes: ``float64[F]`` per flow.
        src_server, dst_server, src_gpu, dst_gpu: ``int32[F]`` per flow.
        routes: Every flow's route (computed up front where the ``phase`` fidelity needs the
            per-link arrival tables below), or None: `routes_of` routes a range of flows when
            they are added (the same routes: a router is deterministic per flow and its key).
        k: Real flows each flow stands for.
        link_ptr, link_times: CSR link -> arrival times of the flows crossing it (sorted), or None.
        link_load_max: Per arrival of ``link_times``, the most the flow can put on that link (its
            fraction there times its least capacity / fraction along its route), bytes/s
            (`flowherd.cluster.quiet`), or None.
    """

    start_s: np.ndarray
    src_server: np.ndarray
    dst_server: np.ndarray
    size_bytes: np.ndarray
    src_gpu: np.ndarray
    dst_gpu: np.ndarray
    routes: Routes | None
    k: int
    link_ptr: np.ndarray | None
    link_times: np.ndarray | None
    link_load_max: np.ndarray | None
    router: object = None

    def routes_of(self, lo: int, hi: int) -> Routes:
        """Routes of flows ``lo .. hi - 1`` (ECMP key: the flow's index)."""
        if self.routes is not None:
            r = self.routes
            a, b = int(r.ptr[lo]), int(r.ptr[hi])
            return Routes(ptr=r.ptr[lo:hi + 1] - a, link=r.link[a:b], frac=r.frac[a:b],
                          latency_s=r.latency_s[lo:hi])
        if hi <= lo:
            return Routes.concat([])
        return self.router.route(self.src_gpu[lo:hi], self.dst_gpu[lo:hi], np.arange(lo, hi, dtype=np.int64))


def _server_bytes_per_s(fabric: Fabric) -> float:
    """Mean scale-out bandwidth of a server: NIC network capacity out of the NICs behind its GPUs."""
    nic_link = (fabric.link_kind == LinkKind.NETWORK) & (fabric.node_tier[fabric.link_src] == 1)
    total = float(fabric.link_capacity_bytes_per_s[nic_link].sum())
    return total / max(fabric.num_servers, 1)


def make_background(spec: BackgroundSpec, fabric: Fabric, router, horizon_s: float,
                     rng: np.random.Generator, *, routes: bool = True) -> Background | None:
    """The background flows of a run (`flowherd.cluster.simulate` explains the rule); with
    ``routes`` False their routes and per-link arrival tables are not kept (`Background.routes_of`
    routes flows as they are added), which a run that does not fast-forward (``step`` and
    ``collective`` fidelity) never reads: a few hundred bytes less per flow."""
    num_servers = fabric.num_servers
    bw = _server_bytes_per_s(fabric)
    if spec.load == 0 or bw <= 0:
        return None
    if num_servers < 2:
        raise ConfigError(f"background traffic needs >= 2 servers, the fabric has {num_servers} "
                          "(background.load)")
    proc = BackgroundTraffic(load=float(spec.load), num_servers=num_servers, server_bytes_per_s=bw,
                             until_s=horizon_s, cdf=spec.cdf)
    rate = proc.arrival_rate_per_s
    k = max(1, math.ceil(rate / spec.max_flows_per_s))
    if k == 1:
        fl = proc.generate(rng)
        t, src, dst, size = fl.start_s, fl.src_server, fl.dst_server, fl.size_bytes.astype(np.float64)
    else:
        from flowherd.workload.arrivals import poisson_times

        t = poisson_times(rng, rate / k, horizon_s, start_s=0.0)
        n = len(t)
        src = rng.integers(0, num_servers, size=n)
        dst = (src + rng.integers(1, num_servers, size=n)) % num_servers
        dist = proc.distribution
        if k <= _EXACT_SUM_MAX:
            # k draws per flow, in chunks of flows (the same draws as one call: the generator's
            # uniforms come in order), so that n * k draws are never held at once
            size = np.empty(n)
            step = max(1, _SIZE_DRAWS // k)
            for a in range(0, n, step):
                b = min(n, a + step)
                size[a:b] = dist.sample(rng, (b - a) * k).reshape(b - a, k).sum(axis=1)
        else:
            mu, var = _cdf_moments(dist)
            size = k * mu + math.sqrt(k * var) * rng.standard_normal(n)
        size = np.maximum(1.0, np.rint(size))
    n = len(t)
    gps = np.bincount(fabric.gpu_server, minlength=num_servers)
    first = np.concatenate(([0], np.cumsum(gps)[:-1]))
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    sg = (first[src] + (rng.random(n) * gps[src]).astype(np.int64)).astype(np.int32)
    dg = (first[dst] + (rng.random(n) * gps[dst]).astype(np.int64)).astype(np.int32)
    t = np.asarray(t, dtype=np.float64)
    size = np.asarray(size, dtype=np.float64)
    if not routes:
        return Background(start_s=t, src_server=src.astype(np.int32), dst_server=dst.astype(np.int32),
                          size_bytes=size, src_gpu=sg, dst_gpu=dg, routes=None, k=k, link_ptr=None,
                          link_times=None, link_load_max=None, router=router)
    routes = (router.route(sg, dg, np.arange(n, dtype=np.int64)) if n else Routes.concat([]))
    lens = np.diff(routes.ptr)
    flow_of = np.repeat(np.arange(n), lens)
    lnk = np.asarray(routes.link, dtype=np.int64)
    order = np.lexsort((t[flow_of], lnk))
    link_ptr = np.zeros(fabric.num_directed_links + 1, np.int64)
    np.cumsum(np.bincount(lnk, minlength=fabric.num_directed_links), out=link_ptr[1:])
    frac = np.asarray(routes.frac, np.float64)
    top = np.full(n, np.inf)  # a flow's highest rate: the least cap / frac along its route
    if lnk.size:
        np.minimum.at(top, flow_of, fabric.link_capacity_bytes_per_s[lnk] / frac)
    return Background(start_s=t, src_server=src.astype(np.int32), dst_server=dst.astype(np.int32),
                      size_bytes=size, src_gpu=sg, dst_gpu=dg, routes=routes, k=k, link_ptr=link_ptr,
                      link_times=t[flow_of][order], link_load_max=(frac * top[flow_of])[order],
                      router=router)


def _cdf_moments(dist: FlowSizeCDF) -> tuple[float, float]:
    """Mean and variance of the piecewise-linear law (uniform on each segment), bytes and bytes^2."""
    x, f = dist.size_bytes, dist.cdf
    p = np.diff(f)
    a, b = x[:-1], x[1:]
    m1 = float(np.sum(p * (a + b) / 2) + x[0] * f[0])
    m2 = float(np.sum(p * (a * a + a * b + b * b) / 3) + x[0] ** 2 * f[0])
    return m1, max(0.0, m2 - m1 * m1)


