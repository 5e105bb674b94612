"""Background flows' completion times as a streaming summary (no per-flow records).

A run of millions of background flows kept each flow's finish time to compute its FCT mean and
percentiles at the end. `BackgroundStats` takes the flows as they finish and keeps, per flow-size
class, their count, bytes, sum of FCTs, least and largest FCT, and a histogram of FCTs on fixed
log-spaced bins: 256 bins per factor of two from 2^-30 s (about 1 ns) to 2^20 s (12 days), so
memory is a few hundred KiB whatever the number of flows.

Accuracy. The count, bytes, mean (sum over count), least and largest FCT are exact (the sum is
accumulated in another order than ``np.mean``'s, so the mean may differ from it by rounding, a
relative 1e-15). A percentile is ``np.percentile``'s linear interpolation between the two order
statistics around its rank, each order statistic replaced by the geometric middle of its bin
(clamped to the least and largest FCT): every FCT in a bin lies within a factor ``2^(1/512)`` of
that middle, so the percentile is within a relative ``2^(1/512) - 1 = 0.136%`` of the exact one,
above or below. A p99 FCT that feeds a control table moves by at most that much.

Size classes (``SIZE_CLASSES_BYTES``): below 100 kB, 100 kB to 1 MB, 1 MB to 10 MB, 10 MB and
above (MB = 10^6 B), the split datacenter transport papers report FCTs in (DCTCP, SIGCOMM 2010;
HPCC, SIGCOMM 2019: "short" and "long" flows).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from flowherd.errors import ConfigError

__all__ = ["BINS_PER_OCTAVE", "SIZE_CLASSES_BYTES", "BackgroundStats", "BackgroundSummary"]

#: Upper edges of the size classes but the last, bytes.
SIZE_CLASSES_BYTES = (100e3, 1e6, 10e6)
BINS_PER_OCTAVE = 256
_LOW_EXP = -30  # the first bin starts at 2^-30 s
_HIGH_EXP = 20  # the last ends at 2^20 s
_NUM_BINS = (_HIGH_EXP - _LOW_EXP) * BINS_PER_OCTAVE
#: Largest relative error of a percentile (module docstring).
PERCENTILE_RTOL = 2.0 ** (1 / (2 * BINS_PER_OCTAVE)) - 1.0


def _bin(fct_s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        b = np.floor((np.log2(np.maximum(fct_s, 0.0)) - _LOW_EXP) * BINS_PER_OCTAVE)
    return np.clip(np.nan_to_num(b, nan=0.0, neginf=0.0), 0, _NUM_BINS - 1).astype(np.int64)


def _middle(b: np.ndarray) -> np.ndarray:
    """Geometric middle of bins ``b``, seconds."""
    return 2.0 ** (_LOW_EXP + (np.asarray(b, np.float64) + 0.5) / BINS_PER_OCTAVE)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class BackgroundSummary:
    """What a run's background flows did, without a record per flow.

    Attributes:
        flows: Background flows added up to the horizon (each standing for ``aggregation`` real
            flows).
        finished: Flows that finished before the horizon.
        aggregation: Real flows each simulated flow stands for.
        bytes_offered: Bytes of the flows added, bytes.
        class_edges_bytes: Upper edges of the size classes but the last (`SIZE_CLASSES_BYTES`).
        class_count: ``int64[C]`` finished flows per size class.
        class_bytes: ``float64[C]`` their bytes.
        class_fct_sum_s: ``float64[C]`` sum of their FCTs, seconds.
        class_fct_min_s, class_fct_max_s: ``float64[C]`` least and largest FCT (nan if none).
        histogram: ``int64[C, bins]`` finished flows per size class and FCT bin (module
            docstring).
        flow_seconds: Time in flight summed over the flows, up to the horizon for the ones
            unfinished then, seconds (over the horizon: the mean number of flows in flight).
    """

    flows: int
    finished: int
    aggregation: int
    bytes_offered: float
    class_edges_bytes: tuple[float, ...]
    class_count: np.ndarray
    class_bytes: np.ndarray
    class_fct_sum_s: np.ndarray
    class_fct_min_s: np.ndarray
    class_fct_max_s: np.ndarray
    histogram: np.ndarray
    flow_seconds: float = 0.0

    @property
    def class_names(self) -> tuple[str, ...]:
        e = self.class_edges_bytes

        def fmt(x: float) -> str:
            return f"{x / 1e6:g} MB" if x >= 1e6 else f"{x / 1e3:g} kB"

        return (f"< {fmt(e[0])}", *(f"{fmt(a)} - {fmt(b)}" for a, b in itertools.pairwise(e)),
                f">= {fmt(e[-1])}")

    def mean_fct_s(self, size_class: int | None = None) -> float | None:
        """Mean FCT of the finished flows (of one size class), seconds; None if none finished."""
        sel = slice(None) if size_class is None else slice(size_class, size_class + 1)
        n = int(self.class_count[sel].sum())
        return float(self.class_fct_sum_s[sel].sum()) / n if n else None

    def percentile_fct_s(self, q: float, size_class: int | None = None) -> float | None:
        """The ``q``-th percentile (0..100) of the finished flows' FCTs (of one size class), as
        ``np.percentile`` interpolates, within a relative `PERCENTILE_RTOL`; None if none finished."""
        if not (isinstance(q, int | float) and 0 <= q <= 100):
            raise ConfigError(f"a percentile must be in [0, 100], got {q!r} (q)")
        sel = slice(None) if size_class is None else slice(size_class, size_class + 1)
        hist = self.histogram[sel].sum(axis=0)
        n = int(hist.sum())
        if n == 0:
            return None
        lo = float(np.nanmin(self.class_fct_min_s[sel]))
        hi = float(np.nanmax(self.class_fct_max_s[sel]))
        h = (n - 1) * q / 100.0
        j = math.floor(h)
        cum = np.cumsum(hist)
        b = np.searchsorted(cum, [j + 1, min(j + 2, n)])  # the bins of order statistics j, j + 1
        v = np.clip(_middle(b), lo, hi)
        return float(v[0] + (h - j) * (v[1] - v[0]))

    def to_dict(self) -> dict[str, object]:
        """The summary's figures (no histogram): per class count, bytes, mean, p50, p99 FCT."""
        classes = []
        for i, name in enumerate(self.class_names):
            classes.append({"size_class": name, "finished": int(self.class_count[i]),
                            "bytes": float(self.class_bytes[i]), "mean_fct_s": self.mean_fct_s(i),
                            "p50_fct_s": self.percentile_fct_s(50, i),
                            "p99_fct_s": self.percentile_fct_s(99, i)})
        return {"flows": self.flows, "finished": self.finished, "aggregation": self.aggregation,
                "bytes_offered": self.bytes_offered, "mean_fct_s": self.mean_fct_s(),
                "p99_fct_s": self.percentile_fct_s(99), "classes": classes}


class BackgroundStats:
    """Accumulates `BackgroundSummary` as flows are added and finish (module docstring)."""

    def __init__(self, aggregation: int = 1, class_edges_bytes: tuple[float, ...] = SIZE_CLASSES_BYTES):
        self.aggregation = int(aggregation)
        self.edges = np.asarray(class_edges_bytes, dtype=np.float64)
        c = self.edges.size + 1
        self.flows = 0
        self.bytes_offered = 0.0
        self.count = np.zeros(c, np.int64)
        self.bytes = np.zeros(c)
        self.fct_sum = np.zeros(c)
        self.fct_min = np.full(c, np.nan)
        self.fct_max = np.full(c, np.nan)
        self.hist = np.zeros((c, _NUM_BINS), np.int64)
        self.unfinished_s = 0.0

    def added(self, size_bytes: np.ndarray) -> None:
        """Flows of ``size_bytes`` were added."""
        self.flows += int(np.size(size_bytes))
        self.bytes_offered += float(np.sum(size_bytes))

    def finished(self, fct_s: np.ndarray, size_bytes: np.ndarray) -> None:
        """Flows of ``size_bytes`` finished after ``fct_s`` seconds each."""
        fct = np.asarray(fct_s, dtype=np.float64)
        size = np.asarray(size_bytes, dtype=np.float64)
        if fct.size == 0:
            return
        cls = np.searchsorted(self.edges, size, side="right")
        c = self.count.size
        self.count += np.bincount(cls, minlength=c)
        self.bytes += np.bincount(cls, weights=size, minlength=c)
        self.fct_sum += np.bincount(cls, weights=fct, minlength=c)
        lo = np.full(c, np.inf)
        hi = np.full(c, -np.inf)
        np.minimum.at(lo, cls, fct)
        np.maximum.at(hi, cls, fct)
        seen = np.isfinite(lo)
        self.fct_min[seen] = np.fmin(self.fct_min[seen], lo[seen])
        self.fct_max[seen] = np.fmax(self.fct_max[seen], hi[seen])
        flat = np.bincount(cls * _NUM_BINS + _bin(fct), minlength=c * _NUM_BINS)
        self.hist += flat.reshape(c, _NUM_BINS)

    def unfinished(self, start_s: np.ndarray, horizon_s: float) -> None:
        """Flows started at ``start_s`` are still in flight at the horizon."""
        self.unfinished_s = float(np.sum(horizon_s - np.asarray(start_s, dtype=np.float64)))

    def summary(self) -> BackgroundSummary:
        return BackgroundSummary(flows=self.flows, finished=int(self.count.sum()),
                                 aggregation=self.aggregation,
                                 bytes_offered=self.bytes_offered,
                                 class_edges_bytes=tuple(float(x) for x in self.edges),
                                 class_count=self.count.copy(), class_bytes=self.bytes.copy(),
                                 class_fct_sum_s=self.fct_sum.copy(), class_fct_min_s=self.fct_min.copy(),
                                 class_fct_max_s=self.fct_max.copy(), histogram=self.hist.copy(),
                                 flow_seconds=float(self.fct_sum.sum()) + self.unfinished_s)
