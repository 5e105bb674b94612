"""The RL comparison's table: steps to within 5% of the best policy, CIs over seeds, and the
benchmark's report from stored runs (flowherd.rl.curves, benchmarks/rl_curves.py)."""

import importlib.util
import math
from pathlib import Path

import pytest

from flowherd.errors import ConfigError
from flowherd.rl.curves import compare_convergence, format_table, mean_ci, steps_to_within, summarize

_SPEC = importlib.util.spec_from_file_location(
    "rl_curves_benchmark", Path(__file__).resolve().parents[2] / "benchmarks" / "rl_curves.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def _curve(values, every=1000):
    return [{"steps": every * i, "mean_jct_s": v} for i, v in enumerate(values)]


def test_steps_to_within_is_the_first_point_within_the_tolerance_not_the_best():
    # target 10: within 5% means <= 10.5; the curve dips to 10.4 at 2000, rises, reaches 10 at 4000
    steps, values = [0, 1000, 2000, 3000, 4000], [14.0, 11.0, 10.4, 12.0, 10.0]
    assert steps_to_within(steps, values, 10.0) == 2000
    assert steps_to_within(steps, values, 10.0, tol=0.0) == 4000
    assert steps_to_within(steps, values, 10.0, tol=0.2) == 1000  # 11 <= 12 < 14
    assert steps_to_within(steps, [12.0, 11.0, 10.6, 10.51, 10.6], 10.0) is None  # never <= 10.5
    assert steps_to_within([0, 5], [10.5, 9.0], 10.0) == 0  # the boundary counts as within


def test_steps_to_within_rejects_bad_curves():
    with pytest.raises(ConfigError, match="one length"):
        steps_to_within([0, 1], [1.0], 1.0)
    with pytest.raises(ConfigError, match="must increase"):
        steps_to_within([0, 0], [1.0, 1.0], 1.0)
    with pytest.raises(ConfigError, match="positive"):
        steps_to_within([0], [1.0], 0.0)


def _c(values, every=1000):
    return [every * i for i in range(len(values))], values


def test_convergence_counts_steps_to_each_runs_own_best_and_judges_the_means():
    # structured runs reach their own band (<= 1.05 x their minimum) at 1000 and 0 (a flat run that
    # never left its step-0 band); unstructured at 3000 and 6000: means 500 against 4500, 500 <= 1500
    s = [_c([20.0, 10.4, 10.0, 10.0, 10.0, 10.0, 10.0]), _c([10.0, 10.2, 10.1, 10.3, 10.0, 10.0, 10.0])]
    u = [_c([20.0, 19.0, 18.0, 10.5, 10.0, 10.0, 10.0]), _c([30.0, 25.0, 20.0, 15.0, 12.0, 11.0, 10.0])]
    c = compare_convergence(s, u)
    assert c.structured == (1000, 0) and c.unstructured == (3000, 6000)
    assert c.structured_learnt == 1 and c.unstructured_learnt == 2  # the flat run learnt nothing
    assert c.structured_mean[0] == 500 and c.unstructured_mean[0] == 4500
    assert c.ratio == pytest.approx(500 / 4500)
    assert c.met is True and c.per_seed_met == 2
    # margin 500 - 1500 = -1000; Welch: var 500^2 + (1500^2 / 9) / 2 ... checked against its formula
    va, vb = (1000 - 0) ** 2 / 2 / 2, ((6000 - 3000) / 3) ** 2 / 2 / 2
    df = (va + vb) ** 2 / (va ** 2 + vb ** 2)
    from scipy import stats
    assert c.margin[0] == pytest.approx(-1000)
    assert c.margin[1] == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(va + vb))
    assert c.sure is (c.margin[0] + c.margin[1] < 0)
    # the arms' mean curves: structured [15, 10.3, 10.05, ...] within 5% of 10.0 at 1000
    assert c.mean_curve_steps[0] == 1000
    assert c.structured_settle == (1000, 0) and c.unstructured_settle == (3000, 6000)
    # a run that touches its best band at 1000, leaves it, and is back from 4000 on settles at 4000
    bounce = compare_convergence([_c([20.0, 10.0, 20.0, 20.0, 10.2, 10.1, 10.3]),
                                  _c([10.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0])], u)
    assert bounce.structured == (1000, 0) and bounce.structured_settle == (4000, None)


def test_convergence_is_not_met_at_half_and_not_judged_when_nothing_was_learnt():
    c = compare_convergence([_c([20.0, 20.0, 10.0])], [_c([20.0, 20.0, 20.0, 10.0][:3])])
    assert c.structured == (2000,) and c.unstructured == (0,)  # the flat unstructured run is at its best
    assert c.met is False and math.isnan(c.ratio)
    flat = compare_convergence([_c([10.0, 10.1])], [_c([10.0, 10.2])])
    assert flat.met is None and flat.structured == (0,) and flat.unstructured == (0,)
    with pytest.raises(ConfigError, match="same steps"):
        compare_convergence([_c([1.0, 2.0])], [_c([1.0, 2.0, 3.0])])
    with pytest.raises(ConfigError, match="both arms"):
        compare_convergence([], [_c([1.0])])


def test_mean_ci_is_the_student_t_interval():
    # two values 1 and 3: mean 2, sd sqrt(2), t(0.975, 1) = 12.7062: half-width 12.7062 * sqrt(2) / sqrt(2)
    m, h = mean_ci([1.0, 3.0])
    assert m == 2.0 and h == pytest.approx(12.7062, rel=1e-4)
    assert mean_ci([4.0]) == (4.0, 0.0)


def test_summary_counts_each_seed_against_one_target_and_averages_held_out_runs():
    runs = [{"arm": "a", "seed": 0, "curve": _curve([14.0, 10.4, 11.0]), "test_jct_s": [5.0, 7.0],
             "cpu_s": 10},
            {"arm": "a", "seed": 1, "curve": _curve([12.0, 12.0, 10.9]), "test_jct_s": [7.0, 9.0],
             "cpu_s": 30},
            {"arm": "b", "seed": 0, "curve": _curve([10.0, 10.0, 10.0])}]
    a, b = summarize(runs, target=10.0)
    assert (a.arm, a.seeds, a.steps_to, a.reached) == ("a", (0, 1), (1000, None), 1)
    assert a.start == mean_ci([14.0, 12.0]) and a.final == mean_ci([11.0, 10.9])
    assert a.best == mean_ci([10.4, 10.9])
    assert a.test == mean_ci([6.0, 8.0])  # per run the mean over test seeds, then over SB3 seeds
    assert math.isnan(a.later[0]) and math.isnan(b.test[0])
    assert b.steps_to == (0,)
    text = format_table([a, b], horizon_s=20.0)
    assert "1000, not reached" in text
    assert f"{-10.95 / 20:+.4f}" in text  # the final return is -mean JCT / horizon
    with pytest.raises(ConfigError, match="no curve"):
        summarize([{"arm": "c", "seed": 0, "curve": []}], target=1.0)


def _stored(runs):
    cfg = {"scenario": "rl_small.yaml", "network": "roce", "steps": 2000, "eval_every": 1000, "n_steps": 512,
           "train_seeds": [0], "val_seeds": [4], "test_seeds": [6, 7], "later_skip": 60,
           "arms": ["ppo-raw", "bc+ppo"], "horizon_s": 30.0}
    ref = {"none": {"val_jct_s": [12.0], "test_jct_s": [10.0, 12.0], "later_jct_s": [8.0, 8.0]},
           "flowherd": {"val_jct_s": [10.0], "test_jct_s": [9.0, 11.0], "later_jct_s": [7.0, 7.0]},
           "room": [{"seed": 6, "points": 100, "choice": 3, "buffered": 1}], "cpu_s": 5.0}
    return {"config": cfg, "reference": ref, "runs": runs, "commit": "test"}


def test_report_targets_the_flowherd_policy_when_no_run_beats_it(capsys):
    runs = [{"arm": "ppo-raw", "seed": 0, "curve": _curve([20.0, 10.6, 10.4]), "test_jct_s": [9.0, 12.0],
             "later_jct_s": [7.0, 8.0], "cpu_s": 1.0},
            {"arm": "bc+ppo", "seed": 0, "curve": _curve([10.2, 10.2, 10.2]), "test_jct_s": [9.0, 11.0],
             "later_jct_s": [7.0, 7.0], "cpu_s": 1.0}]
    bench.report(_stored(runs), 0.05, None)
    out = capsys.readouterr().out
    assert "target (best policy) 10.000 s, within 5% = 10.500 s" in out
    assert "2000" in out.splitlines()[4] and "not reached" not in out
    assert "test +0.500 " in out  # ppo-raw vs flowherd per test seed: (0 + 1) / 2
    assert "3 with a choice" in out


def test_report_targets_the_best_run_when_it_beats_the_flowherd_policy(capsys):
    runs = [{"arm": "ppo-raw", "seed": 0, "curve": _curve([20.0, 12.0, 11.0]), "cpu_s": 1.0,
             "test_jct_s": [9.0, 11.0], "later_jct_s": [7.0, 7.0]},
            {"arm": "bc+ppo", "seed": 0, "curve": _curve([10.0, 9.0, 8.0]), "cpu_s": 1.0,
             "test_jct_s": [9.0, 11.0], "later_jct_s": [7.0, 7.0]}]
    bench.report(_stored(runs), 0.05, None)
    out = capsys.readouterr().out
    assert "target (best policy) 8.000 s" in out
    raw_row = next(line for line in out.splitlines() if line.startswith("ppo-raw "))
    assert "not reached" in raw_row
    assert "best below its own step 0 on validation: 1 of 1 seeds" in out
