"""Summaries of learning curves for the reinforcement-learning comparison (`benchmarks/rl_curves.py`).

A *run* is one learner (an *arm*: ``ppo-raw``, ``ppo-structured``, ``bc+ppo``) trained with one SB3
seed; its curve is the validation mean JCT (lower is better) at a sequence of environment steps.
`summarize` turns the runs of every arm into one table row each: the final and best validation
JCT with a 95% confidence interval over the seeds, the steps each seed took to come within 5% of
the best policy (`steps_to_within`), and the best model's JCT on held-out seeds and windows.

Plain numpy and scipy: no torch, no simulator; the benchmark stores its runs as JSON and this
module reads them back (``--reuse``), so the table is reproducible without retraining.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.experiments.stats import mean_ci95

__all__ = ["ArmSummary", "Convergence", "compare_convergence", "format_table", "mean_ci", "steps_to_within",
           "summarize"]


def steps_to_within(steps: Sequence[int], values: Sequence[float], target: float, *,
                    tol: float = 0.05) -> int | None:
    """The first step of a curve whose value is within ``tol`` of ``target`` (lower is better).

    A point is within when ``value <= (1 + tol) * target``; None if no point is ("not reached").

    Raises:
        ConfigError: curves of different lengths, steps not increasing, a target not positive.

    >>> steps_to_within([0, 100, 200], [12.0, 10.4, 10.0], 10.0)
    100
    >>> steps_to_within([0, 100], [12.0, 11.0], 10.0) is None
    True
    """
    s = np.asarray(steps, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    if s.shape != v.shape or s.ndim != 1:
        raise ConfigError(f"steps and values must be two curves of one length, got {s.shape} and {v.shape} "
                          "(curve)")
    if s.size > 1 and np.any(np.diff(s) <= 0):
        raise ConfigError(f"curve steps must increase, got {s.tolist()} (curve)")
    if not (math.isfinite(target) and target > 0):
        raise ConfigError(f"target must be a positive finite value, got {target!r} (target)")
    hit = np.flatnonzero(v <= (1.0 + tol) * target)
    return int(s[hit[0]]) if hit.size else None


def mean_ci(x: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% Student-t confidence interval (`flowherd.experiments.stats
    .mean_ci95`), with a table's edge cases: NaN for no value, half-width 0 for a single one."""
    a = [float(v) for v in x]
    if not a:
        return math.nan, math.nan
    if len(a) < 2:
        return a[0], 0.0
    return mean_ci95(a)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArmSummary:
    """One arm of the comparison over its seeds.

    Attributes:
        arm: The learner's label.
        seeds: SB3 seeds of its runs.
        start: Validation mean JCT at step 0 (mean, CI half-width), seconds.
        final: At the last step, seconds.
        best: At each run's best step, seconds.
        steps_to: Per seed, the first step within ``tol`` of ``target`` (None: not reached).
        target: The JCT the steps are counted against (the best policy), seconds.
        test, later: The best model's mean JCT on the held-out test seeds and on the later trace
            windows (mean over seeds of the per-run mean, CI half-width), seconds; NaN if absent.
        cpu_s: CPU seconds of each run (training, validations and held-out evaluation).
    """

    arm: str
    seeds: tuple[int, ...]
    start: tuple[float, float]
    final: tuple[float, float]
    best: tuple[float, float]
    steps_to: tuple[int | None, ...]
    target: float
    test: tuple[float, float]
    later: tuple[float, float]
    cpu_s: tuple[float, ...]

    @property
    def reached(self) -> int:
        """Seeds whose curve came within the tolerance."""
        return sum(s is not None for s in self.steps_to)


def summarize(runs: Sequence[Mapping[str, Any]], *, target: float, tol: float = 0.05) -> list[ArmSummary]:
    """One `ArmSummary` per arm (in first-seen order) of ``runs``.

    Each run is a mapping with ``arm``, ``seed``, ``curve`` (a list of ``{"steps", "mean_jct_s"}``),
    and optionally ``test_jct_s`` / ``later_jct_s`` (per held-out seed, seconds) and ``cpu_s``.

    Raises:
        ConfigError: a run without a curve.
    """
    arms: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        if not r.get("curve"):
            raise ConfigError(f"run {r.get('arm')!r} seed {r.get('seed')!r} has no curve (runs)")
        arms.setdefault(str(r["arm"]), []).append(r)
    out = []
    for arm, rs in arms.items():
        curves = [([int(p["steps"]) for p in r["curve"]], [float(p["mean_jct_s"]) for p in r["curve"]])
                  for r in rs]

        def held(key: str, rs=rs) -> tuple[float, float]:
            xs = [float(np.mean(r[key])) for r in rs if r.get(key)]
            return mean_ci(xs) if xs else (math.nan, math.nan)

        out.append(ArmSummary(
            arm=arm, seeds=tuple(int(r["seed"]) for r in rs),
            start=mean_ci([v[0] for _, v in curves]), final=mean_ci([v[-1] for _, v in curves]),
            best=mean_ci([min(v) for _, v in curves]),
            steps_to=tuple(steps_to_within(s, v, target, tol=tol) for s, v in curves), target=float(target),
            test=held("test_jct_s"), later=held("later_jct_s"),
            cpu_s=tuple(float(r.get("cpu_s", math.nan)) for r in rs)))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Convergence:
    """How fast a structured arm comes within ``tol`` of its own best against an unstructured arm.

    Per run (one SB3 seed) the steps are the first validation point within ``tol`` of that run's own
    best (`steps_to_within` against the curve's minimum); a run that never leaves the band of its
    step-0 value counts 0 steps (it learnt nothing, and was at its best from the start), so the
    number of runs that did leave it (``*_learnt``) is reported beside the steps. The criterion
    "at most a third of the unstructured arm's steps" is judged on the means over seeds:
    ``margin`` is ``mean(structured) - mean(unstructured) / ratio_target`` with its Welch 95% CI,
    since the arms' runs are independent samples (an SB3 seed couples nothing across two policy
    classes) and a per-seed ratio is undefined wherever the unstructured run counts 0.

    Attributes:
        structured, unstructured: Steps per run, in seed order.
        structured_learnt, unstructured_learnt: Runs whose best is below their step-0 band.
        structured_mean, unstructured_mean: Mean steps and 95% CI half-width over the runs.
        margin: ``mean(s) - mean(u) / ratio_target`` and its Welch 95% CI half-width.
        ratio: ``mean(s) / mean(u)``; NaN when the unstructured mean is 0.
        met: The margin's point estimate is at most 0; None when both means are 0 (nothing was
            learnt to compare).
        sure: The margin's CI lies below 0 (met beyond the seeds' noise).
        per_seed_met: Seeds (paired by position) whose structured steps are at most
            ``unstructured / ratio_target`` (both 0 counts).
        mean_curve_steps: Each arm's mean curve over its runs: steps to within ``tol`` of its own
            minimum (structured, unstructured).
        structured_settle, unstructured_settle: Per run, the first step from which every later
            point stays within ``tol`` of the run's best (reaching it and staying: a noisy curve
            that touches its best once and leaves it settles late); None: its last point is out.
    """

    structured: tuple[int, ...]
    unstructured: tuple[int, ...]
    structured_learnt: int
    unstructured_learnt: int
    structured_mean: tuple[float, float]
    unstructured_mean: tuple[float, float]
    margin: tuple[float, float]
    ratio: float
    met: bool | None
    sure: bool
    per_seed_met: int
    mean_curve_steps: tuple[int, int]
    structured_settle: tuple[int | None, ...] = ()
    unstructured_settle: tuple[int | None, ...] = ()


def _own_best_steps(curves: Sequence[tuple[Sequence[int], Sequence[float]]], tol: float) -> list[int]:
    out = []
    for s, v in curves:
        hit = steps_to_within(s, v, min(v), tol=tol)
        out.append(0 if hit is None else hit)  # never None: the minimum is within its own band
    return out


def _settle_steps(curves: Sequence[tuple[Sequence[int], Sequence[float]]], tol: float) -> list[int | None]:
    out: list[int | None] = []
    for s, v in curves:
        a = np.asarray(v, dtype=float)
        out_of_band = np.flatnonzero(a > (1.0 + tol) * a.min())
        if out_of_band.size == 0:
            out.append(int(s[0]))
        elif out_of_band[-1] + 1 < a.size:
            out.append(int(s[int(out_of_band[-1]) + 1]))
        else:
            out.append(None)  # its last point is out of the band: it has not settled
    return out


def _welch_margin(a: Sequence[float], b: Sequence[float], k: float) -> tuple[float, float]:
    """``mean(a) - mean(b) / k`` and the half-width of its Welch 95% CI."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float) / k
    m = float(x.mean() - y.mean())
    va = x.var(ddof=1) / x.size if x.size > 1 else 0.0
    vb = y.var(ddof=1) / y.size if y.size > 1 else 0.0
    var = va + vb
    if var <= 0.0:
        return m, 0.0
    den = (va ** 2 / (x.size - 1) if x.size > 1 else 0.0) + (vb ** 2 / (y.size - 1) if y.size > 1 else 0.0)
    df = var ** 2 / den
    return m, float(stats.t.ppf(0.975, df) * math.sqrt(var))


def compare_convergence(structured: Sequence[tuple[Sequence[int], Sequence[float]]],
                        unstructured: Sequence[tuple[Sequence[int], Sequence[float]]], *,
                        tol: float = 0.05, ratio_target: float = 3.0) -> Convergence:
    """Steps to within ``tol`` of each run's own best, structured arm against unstructured
    (`Convergence` says how it is judged). Each argument is a list of curves ``(steps, values)``,
    one per run, lower values better.

    Raises:
        ConfigError: an arm without runs, curves on different step grids.

    >>> c = compare_convergence([([0, 1, 2], [9.0, 5.0, 5.0])], [([0, 1, 2], [9.0, 9.0, 5.0])])
    >>> c.structured, c.unstructured, c.met
    ((1,), (2,), False)
    """
    if not structured or not unstructured:
        raise ConfigError(f"both arms need runs, got {len(structured)} structured and {len(unstructured)} "
                          "unstructured (runs)")
    grid = [tuple(int(x) for x in s) for s, _ in (*structured, *unstructured)]
    if len(set(grid)) != 1:
        raise ConfigError("every run must be validated at the same steps to compare them (curve)")
    s_steps, u_steps = _own_best_steps(structured, tol), _own_best_steps(unstructured, tol)

    def learnt(curves) -> int:
        return sum(float(v[0]) > (1.0 + tol) * float(min(v)) for _, v in curves)

    def mean_curve(curves) -> int:
        v = np.mean([np.asarray(v, dtype=float) for _, v in curves], axis=0)
        return int(steps_to_within(grid[0], v, float(v.min()), tol=tol) or 0)

    sm, um = mean_ci(s_steps), mean_ci(u_steps)
    margin = _welch_margin(s_steps, u_steps, ratio_target)
    met = None if sm[0] == 0 and um[0] == 0 else bool(margin[0] <= 0)
    per_seed = sum(a <= b / ratio_target for a, b in zip(s_steps, u_steps, strict=False))
    return Convergence(structured=tuple(s_steps), unstructured=tuple(u_steps),
                       structured_learnt=learnt(structured), unstructured_learnt=learnt(unstructured),
                       structured_mean=sm, unstructured_mean=um, margin=margin,
                       ratio=sm[0] / um[0] if um[0] > 0 else math.nan, met=met,
                       sure=bool(margin[0] + margin[1] < 0), per_seed_met=per_seed,
                       mean_curve_steps=(mean_curve(structured), mean_curve(unstructured)),
                       structured_settle=tuple(_settle_steps(structured, tol)),
                       unstructured_settle=tuple(_settle_steps(unstructured, tol)))


def _pm(mc: tuple[float, float]) -> str:
    m, h = mc
    return "-" if math.isnan(m) else f"{m:.3f} +-{h:.3f}"


def format_table(rows: Sequence[ArmSummary], *, horizon_s: float, tol: float = 0.05) -> str:
    """The table as text: per arm the validation JCT at step 0, at the end (with the episode return
    it equals, ``-mean JCT / horizon``), at its best, the steps to within ``tol`` of the target per
    seed, and the held-out JCTs (95% CIs over seeds)."""
    pct = round(100 * tol)
    head = (f"{'arm':<15} {'seeds':>5} {'val JCT step 0':>15} {'val JCT final':>15} {'return final':>13} "
            f"{'val JCT best':>15} {f'steps to {pct}% (per seed)':>28} {'test seeds':>15} "
            f"{'later window':>15} {'CPU-s/run':>9}")
    lines = [head]
    for r in rows:
        cpu = [c for c in r.cpu_s if not math.isnan(c)]
        reach = ", ".join("not reached" if s is None else str(s) for s in r.steps_to)
        ret = (-r.final[0] / horizon_s, r.final[1] / horizon_s)
        lines.append(f"{r.arm:<15} {len(r.seeds):>5} {_pm(r.start):>15} {_pm(r.final):>15} "
                     f"{ret[0]:>+7.4f}+-{ret[1]:.4f} {_pm(r.best):>15} {reach:>28} {_pm(r.test):>15} "
                     f"{_pm(r.later):>15} {(f'{np.mean(cpu):.0f}' if cpu else '-'):>9}")
    return "\n".join(lines)
