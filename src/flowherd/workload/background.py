"""Background traffic: flows between random servers, Poisson arrivals at a target load.

Flow sizes come from the standard datacenter distributions shipped in ``flowherd/data/flow_sizes/``
(web search: Alizadeh et al., DCTCP, SIGCOMM 2010; data mining: Greenberg et al., VL2, SIGCOMM 2009;
and others; provenance in that folder's README). A CDF table is sampled by inverse transform with
linear interpolation between its points, as HPCC's ``traffic_gen/custom_rand.py`` does; the mean of
that piecewise-linear law is ``sum_i (x[i-1] + x[i]) / 2 * (F[i] - F[i-1])``.

The arrival rate that gives a target load follows (HPCC ``traffic_gen.py``): ``lambda = load *
num_servers * server_bytes_per_s / mean_size``; sources and destinations are uniform over distinct
server pairs, so every server offers ``load`` of its scale-out bandwidth on average.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from flowherd.errors import ConfigError
from flowherd.registry import Registry
from flowherd.workload.arrivals import poisson_times

FLOW_SIZE_CDFS: Registry[str] = Registry("flow-size distribution", {
    name: f"{name}.csv" for name in (
        "web_search", "web_search_ns2", "web_search_opera", "data_mining", "data_mining_ns2",
        "data_mining_opera", "fb_hadoop", "fb_hadoop_inter_rack", "alibaba_storage_2019",
        "google_rpc_2008",
    )
})


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class FlowSizeCDF:
    """A flow-size distribution as a CDF table.

    Attributes:
        name: Label.
        size_bytes: Non-decreasing sizes, bytes.
        cdf: Non-decreasing cumulative fractions from 0 to 1 (a repeated size is a point mass).
    """

    name: str
    size_bytes: np.ndarray
    cdf: np.ndarray

    def __post_init__(self) -> None:
        x = np.asarray(self.size_bytes, dtype=np.float64)
        f = np.asarray(self.cdf, dtype=np.float64)
        where = f"flow-size CDF {self.name!r}"
        if x.ndim != 1 or x.shape != f.shape or len(x) < 2:
            raise ConfigError(
                f"{where}: needs two equal-length columns of >= 2 points, got {x.shape}, {f.shape} (cdf)"
            )
        if np.any(np.diff(x) < 0) or np.any(np.diff(f) < 0) or x[0] < 0:
            raise ConfigError(f"{where}: size_bytes and cdf must be non-decreasing and sizes >= 0 (cdf)")
        if not (math.isclose(f[0], 0.0, abs_tol=1e-9) and math.isclose(f[-1], 1.0, abs_tol=1e-9)):
            raise ConfigError(f"{where}: cdf must start at 0 and end at 1, got {f[0]} .. {f[-1]} (cdf)")
        object.__setattr__(self, "size_bytes", x)
        object.__setattr__(self, "cdf", f)

    @classmethod
    def load(cls, name_or_path: str | Path) -> FlowSizeCDF:
        """Load a shipped distribution by name (``web_search``, ``data_mining`` ...) or a CSV path
        with a ``size_bytes,cdf`` header."""
        text = str(name_or_path)
        if text in FLOW_SIZE_CDFS:
            path = Path(str(resources.files("flowherd") / "data" / "flow_sizes" / FLOW_SIZE_CDFS[text]))
            name = text
        else:
            path = Path(text)
            if path.suffix == "" and not path.exists():
                FLOW_SIZE_CDFS[text]  # raises UnknownNameError with the closest name
            name = path.stem
        try:
            with open(path, newline="") as fh:
                rows = list(csv.DictReader(fh))
            x = [float(r["size_bytes"]) for r in rows]
            f = [float(r["cdf"]) for r in rows]
        except (OSError, KeyError, TypeError, ValueError, csv.Error) as e:
            raise ConfigError(
                f"cannot read flow-size CDF {str(path)!r}: {e!s}; expected a size_bytes,cdf CSV "
                f"(background.cdf)"
            ) from None
        return cls(name=name, size_bytes=np.array(x), cdf=np.array(f))

    def mean_bytes(self) -> float:
        """Mean of the piecewise-linear law, bytes."""
        x, f = self.size_bytes, self.cdf
        return float(np.sum((x[1:] + x[:-1]) / 2 * np.diff(f)) + x[0] * f[0])

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` sizes by inverse transform with linear interpolation, bytes (float)."""
        u = rng.random(n)
        # np.interp needs increasing xp: drop repeated cdf values (zero-probability segments)
        keep = np.concatenate(([True], np.diff(self.cdf) > 0))
        return np.interp(u, self.cdf[keep], self.size_bytes[keep])


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class BackgroundFlows:
    """Generated flows, sorted by start time (arrays of equal length).

    Attributes:
        start_s: Arrival times, seconds.
        src_server, dst_server: Server indices (``0 .. num_servers - 1``), never equal.
        size_bytes: Flow sizes, bytes (integers >= 1).
    """

    start_s: np.ndarray
    src_server: np.ndarray
    dst_server: np.ndarray
    size_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.start_s)

    def offered_load(self, num_servers: int, server_bytes_per_s: float, span_s: float) -> float:
        """Offered bytes per second over ``span_s`` as a fraction of the servers' aggregate bandwidth."""
        return float(self.size_bytes.sum()) / span_s / (num_servers * server_bytes_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundTraffic:
    """A background-traffic process.

    Attributes:
        load: Target offered load, a fraction of the servers' aggregate scale-out bandwidth, in [0, 1].
        num_servers: Servers that exchange flows (>= 2 when ``load > 0``).
        server_bytes_per_s: Scale-out bandwidth of one server (all its NICs), bytes per second.
        cdf: Flow-size distribution name (``web_search``, ``data_mining`` ...) or a `FlowSizeCDF`.
        until_s: End of the window, seconds.
        start_s: Start of the window, seconds.
    """

    load: float
    num_servers: int
    server_bytes_per_s: float
    until_s: float
    cdf: FlowSizeCDF | str = "web_search"
    start_s: float = 0.0
    _dist: FlowSizeCDF | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.load, int | float) and 0 <= self.load <= 1):
            raise ConfigError(f"background load must be in [0, 1], got {self.load!r} (background.load)")
        n = self.num_servers
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"num_servers must be a positive integer, got {n!r} (num_servers)")
        if self.load > 0 and self.num_servers < 2:
            raise ConfigError(f"background traffic needs >= 2 servers, got {self.num_servers} (num_servers)")
        if not (self.server_bytes_per_s > 0 and math.isfinite(self.server_bytes_per_s)):
            raise ConfigError(
                f"server_bytes_per_s must be positive, got {self.server_bytes_per_s!r} (server_bytes_per_s)"
            )
        if not (math.isfinite(self.until_s) and math.isfinite(self.start_s) and self.start_s >= 0):
            raise ConfigError(
                f"start_s and until_s must be finite and start_s >= 0, got {self.start_s}, {self.until_s} "
                f"(background.until)"
            )
        dist = self.cdf if isinstance(self.cdf, FlowSizeCDF) else FlowSizeCDF.load(self.cdf)
        object.__setattr__(self, "_dist", dist)

    @property
    def distribution(self) -> FlowSizeCDF:
        return self._dist

    @property
    def arrival_rate_per_s(self) -> float:
        """``load * num_servers * server_bytes_per_s / mean_size``, flows per second."""
        return self.load * self.num_servers * self.server_bytes_per_s / self._dist.mean_bytes()

    def expected_flows(self, start_s: float | None = None, until_s: float | None = None) -> float:
        """Mean number of flows in ``[start_s, until_s)`` (default: the whole window)."""
        lo = self.start_s if start_s is None else start_s
        hi = self.until_s if until_s is None else until_s
        return self.arrival_rate_per_s * max(0.0, hi - lo)

    def pair_rate_bytes_per_s(self) -> float:
        """Mean offered rate from one server to each other server, bytes per second (the fluid view:
        ``load * server_bytes_per_s / (num_servers - 1)``), for simulators that model background
        traffic as a steady load instead of individual flows."""
        return self.load * self.server_bytes_per_s / max(1, self.num_servers - 1)

    def generate(self, rng: np.random.Generator, *, start_s: float | None = None,
                 until_s: float | None = None, max_flows: int = 10_000_000) -> BackgroundFlows:
        """Draw the flows of ``[start_s, until_s)`` (default: the whole window).

        Poisson arrivals in disjoint windows are independent, so a simulator may draw the flows window
        by window as its clock advances. Raises `ConfigError` when the window would hold more than
        ``max_flows`` flows on average (use shorter windows or `pair_rate_bytes_per_s`).
        """
        lo = self.start_s if start_s is None else max(self.start_s, start_s)
        hi = self.until_s if until_s is None else min(self.until_s, until_s)
        expected = self.expected_flows(lo, hi)
        if expected > max_flows:
            raise ConfigError(
                f"background load {self.load} over {hi - lo:g} s means {expected:.3g} flows, more than "
                f"max_flows={max_flows}; generate shorter windows or use the fluid rate (background.load)"
            )
        t = poisson_times(rng, self.arrival_rate_per_s, hi, start_s=lo)
        n = len(t)
        src = rng.integers(0, self.num_servers, size=n)
        # a uniform destination among the other servers
        dst = (src + rng.integers(1, max(self.num_servers, 2), size=n)) % self.num_servers
        size = np.maximum(1, np.rint(self._dist.sample(rng, n))).astype(np.int64)
        return BackgroundFlows(start_s=t, src_server=src.astype(np.int32), dst_server=dst.astype(np.int32),
                               size_bytes=size)


__all__ = ["FLOW_SIZE_CDFS", "BackgroundFlows", "BackgroundTraffic", "FlowSizeCDF"]
