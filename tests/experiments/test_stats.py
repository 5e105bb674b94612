"""Confidence intervals over seeds (`flowherd.experiments.stats`), checked against closed forms."""

import math

import pytest

from flowherd.experiments.stats import mean_ci95, paired


def test_mean_ci95_is_the_student_t_interval():
    # n = 4, mean 2.5, s = sqrt(5/3); t_{0.975, 3} = 3.182446305 (any t table)
    m, h = mean_ci95([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5
    assert h == pytest.approx(3.182446305 * math.sqrt(5 / 3) / 2, rel=1e-9)
    m1, h1 = mean_ci95([7.0])
    assert m1 == 7.0 and math.isnan(h1)
    with pytest.raises(ValueError):
        mean_ci95([])


def test_paired_difference_uses_the_common_seeds_only():
    a = {1: 10.0, 2: 12.0, 3: 11.0, 9: 100.0}
    b = {1: 11.0, 2: 13.5, 3: 11.5, 4: 50.0}
    p = paired(a, b)
    assert p.seeds == (1, 2, 3) and p.n == 3
    # differences -1, -1.5, -0.5: mean -1, s = 0.5, t_{0.975, 2} = 4.302652730
    assert p.mean == pytest.approx(-1.0)
    assert p.half_width == pytest.approx(4.302652730 * 0.5 / math.sqrt(3), rel=1e-9)
    assert p.relative == pytest.approx(-1.0 / 12.0)
    assert p.tie  # -1 +- 1.24 holds 0: the seeds cannot tell the two apart
    assert p.phrase().endswith(": a tie") and p.phrase().startswith("-1.00 s +- 1.24 (-8.3%")
    sure = paired({1: 9.0, 2: 9.1, 3: 8.9}, {1: 10.0, 2: 10.0, 3: 10.0})  # -1 +- 0.25
    assert not sure.tie and "tie" not in sure.phrase()
    assert paired({1: 5.0, 2: 6.0}, {1: 5.0, 2: 6.0}).tie  # identical runs
    assert not paired({1: 4.0}, {1: 5.0}).tie  # one seed: no interval, no tie claimed
    with pytest.raises(ValueError):
        paired({1: 1.0}, {2: 1.0})
