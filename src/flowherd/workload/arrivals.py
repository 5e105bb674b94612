"""Job arrivals: a Poisson process over a weighted mix of job templates.

>>> parse_rate_per_s("4/h")
0.0011111111111111111
>>> parse_rate_per_s("30/min")
0.5
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.units import parse_time

_RATE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:/\s*([A-Za-zµ]*))?\s*$")


def parse_rate_per_s(text: str | float | int, *, field: str | None = None) -> float:
    """Parse an event rate such as ``"4/h"``, ``"0.5/min"``, ``"10/s"`` or a bare number (per second)."""
    where = f" ({field})" if field else ""
    if isinstance(text, bool):
        raise ConfigError(f"malformed rate {text!r}{where}: expected a count per time such as '4/h'")
    if isinstance(text, int | float):
        value, unit = float(text), "s"
    else:
        m = _RATE.match(str(text))
        if not m:
            raise ConfigError(f"malformed rate {text!r}{where}: expected a count per time such as '4/h'")
        value, unit = float(m.group(1)), m.group(2) or "s"
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"rate must be non-negative, got {text!r}{where}")
    per = parse_time(f"1{unit}", field=field)
    return value / per


def poisson_times(rng: np.random.Generator, rate_per_s: float, until_s: float, *,
                  start_s: float = 0.0) -> np.ndarray:
    """Event times of a Poisson process of ``rate_per_s`` in ``[start_s, until_s)``, sorted, seconds.

    Draws the count from Poisson(rate * span) and places the events uniformly (the conditional law of a
    Poisson process given its count), so the cost does not depend on the order of drawing.
    """
    if not (math.isfinite(rate_per_s) and rate_per_s >= 0):
        raise ConfigError(f"rate must be non-negative, got {rate_per_s!r} (rate)")
    span = until_s - start_s
    if rate_per_s == 0 or span <= 0:
        return np.empty(0)
    n = rng.poisson(rate_per_s * span)
    return np.sort(rng.uniform(start_s, until_s, size=n))


@dataclass(frozen=True, slots=True, kw_only=True)
class MixEntry:
    """A job template and its weight in a mix (weights need not sum to one)."""

    job: Any
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.weight, int | float) and math.isfinite(self.weight) and self.weight > 0):
            raise ConfigError(f"mix weight must be positive, got {self.weight!r} (mix.weight)")
        if not dataclasses.is_dataclass(self.job) or not hasattr(self.job, "submit_s"):
            raise ConfigError(
                f"a mix entry needs a job spec (TrainingJob or InferenceJob), got {self.job!r} (mix.job)"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PoissonArrivals:
    """Jobs arriving as a Poisson process; each arrival draws its template from ``mix`` by weight.

    Attributes:
        rate_per_s: Mean arrivals per second (`parse_rate_per_s` turns "4/h" into it).
        until_s: End of the arrival window, seconds.
        mix: Templates and weights.
        start_s: Start of the window, seconds.
        prefix: Arrival ``i`` is named ``f"{prefix}{i}-{template.name}"``.
    """

    rate_per_s: float
    until_s: float
    mix: tuple[MixEntry, ...]
    start_s: float = 0.0
    prefix: str = "arr"

    def __post_init__(self) -> None:
        if not (isinstance(self.rate_per_s, int | float) and math.isfinite(self.rate_per_s)
                and self.rate_per_s >= 0):
            raise ConfigError(f"arrival rate must be non-negative, got {self.rate_per_s!r} (arrivals.rate)")
        for f in ("until_s", "start_s"):
            v = getattr(self, f)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= 0):
                raise ConfigError(f"{f} must be a non-negative number of seconds, got {v!r} (arrivals.{f})")
        mix = tuple(e if isinstance(e, MixEntry) else MixEntry(job=e) for e in self.mix)
        if not mix:
            raise ConfigError("an arrival process needs at least one job in its mix (arrivals.mix)")
        object.__setattr__(self, "mix", mix)

    def generate(self, rng: np.random.Generator) -> list[Any]:
        """The arriving jobs, in submission order, with ``submit_s`` and unique names set."""
        times = poisson_times(rng, self.rate_per_s, self.until_s, start_s=self.start_s)
        w = np.array([e.weight for e in self.mix], dtype=np.float64)
        pick = rng.choice(len(self.mix), size=len(times), p=w / w.sum())
        out = []
        for i, (t, k) in enumerate(zip(times, pick, strict=True)):
            tpl = self.mix[int(k)].job
            out.append(dataclasses.replace(tpl, name=f"{self.prefix}{i}-{tpl.name}", submit_s=float(t)))
        return out


def merge_arrivals(*streams: Sequence[Any]) -> list[Any]:
    """Merge job lists into one, ordered by (``submit_s``, name)."""
    return sorted((j for s in streams for j in s), key=lambda j: (j.submit_s, j.name))


__all__ = ["MixEntry", "PoissonArrivals", "merge_arrivals", "parse_rate_per_s", "poisson_times"]
