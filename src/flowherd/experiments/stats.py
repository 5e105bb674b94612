"""Confidence intervals of a mean and of a paired difference over seeds (Student's t).

Two methods run on the same seeds see the same jobs, arrivals and background: their difference
per seed removes what the seed alone decides, so a paired interval is much narrower than the two
unpaired ones. `paired` is what `flowherd demo`'s headline and its report print; a difference whose
95% interval contains 0 is a tie, and is named so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def t_quantile_975(dof: int) -> float:
    """The 0.975 quantile of Student's t with `dof` degrees of freedom (scipy.stats)."""
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def mean_ci95(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (t, n - 1 dof; nan for n < 2).

    >>> m, h = mean_ci95([1.0, 2.0, 3.0]); round(m, 3), round(h, 3)
    (2.0, 2.484)
    """
    n = len(xs)
    if n == 0:
        raise ValueError("mean_ci95 of no values")
    mean = math.fsum(xs) / n
    if n < 2:
        return mean, math.nan
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, t_quantile_975(n - 1) * math.sqrt(var / n)


@dataclass(frozen=True, slots=True, kw_only=True)
class Paired:
    """`a - b` over the seeds both ran.

    Attributes:
        n: Seeds in common.
        mean: Mean of the per-seed differences (the unit of the inputs).
        half_width: Half-width of its 95% confidence interval (nan for one seed).
        relative: `mean` over the mean of `b` on those seeds (-0.05: a is 5% lower).
        seeds: The seeds, ascending.
    """

    n: int
    mean: float
    half_width: float
    relative: float
    seeds: tuple[int, ...]

    @property
    def tie(self) -> bool:
        """No difference the seeds can tell: every difference 0, or a 95% interval holding 0."""
        if self.mean == 0.0 and (self.half_width == 0.0 or math.isnan(self.half_width)):
            return True
        return not math.isnan(self.half_width) and abs(self.mean) <= self.half_width

    def phrase(self, unit: str = "s") -> str:
        """``"-3.10 s +- 1.20 (-4.2%, 95% CI, 5 seeds paired)"``, or the same ending in ``": a tie"``."""
        hw = "n/a" if math.isnan(self.half_width) else f"{self.half_width:.2f}"
        text = (f"{self.mean:+.2f} {unit} +- {hw} ({100 * self.relative:+.1f}%, 95% CI, "
                f"{self.n} seed{'' if self.n == 1 else 's'} paired)")
        return text + (": a tie" if self.tie else "")


def paired(a: Mapping[int, float], b: Mapping[int, float]) -> Paired:
    """The paired difference `a - b` over the seeds in both (seed -> value; None values skipped).

    Raises:
        ValueError: No seed has a value in both.
    """
    seeds = tuple(sorted(s for s in a if s in b and a[s] is not None and b[s] is not None))
    if not seeds:
        raise ValueError("paired: no seed with a value in both")
    diffs = [a[s] - b[s] for s in seeds]
    mean, hw = mean_ci95(diffs)
    ref = math.fsum(b[s] for s in seeds) / len(seeds)
    return Paired(n=len(seeds), mean=mean, half_width=hw, relative=mean / ref if ref else math.nan,
                  seeds=seeds)
