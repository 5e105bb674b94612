"""`flowherd demo`: plan, simulate without control and with the controllers over several seeds, pick
the best of each group, store the runs with their roles, and report no control / best baseline /
flowherd with the paired differences over the seeds."""

import copy
import json
import shutil

import pytest
from test_simulate_cli import SMALL as SIM_SMALL

pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.cli import main
from flowherd.cli.demo_cmd import DEMO_CANDIDATES_SWEEP, DEMO_SWEEP, run_demo
from flowherd.errors import ConfigError
from flowherd.experiments.stats import paired
from flowherd.experiments.store import ResultStore
from flowherd.report.data import CONTROLLER_LABELS, controller_label, load_report_data, paired_comparisons

SEEDS = (3, 4)

# test_simulate_cli's 32 GPUs, three jobs of two tenants contending on a 2:1 oversubscribed
# leaf-spine; they end well before a 3 s horizon (which keeps the background traffic small)
SMALL = {**SIM_SMALL, "name": "small-demo", "simulation": {"fidelity": "collective", "horizon": "3s"}}


def _small():
    return copy.deepcopy(SMALL)


def _runs(store_path):
    with ResultStore(store_path, read_only=True) as st:
        return st.runs()


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    # "not-yet-registered" stands for a flowherd policy that has not landed: it is skipped
    outcome = run_demo(out, scenario=_small(), baselines=("cassini", "varys"),
                       policies=("not-yet-registered", "threshold"), seeds=SEEDS, workers=2)
    return out, outcome


def test_demo_stores_every_controller_run_under_its_name(small_demo):
    out, outcome = small_demo
    runs = _runs(out)
    assert outcome.store_path == out / "results.duckdb"
    # per seed: 2 placements without control + 2 baselines + 1 registered policy, each stored once
    assert len(runs) == 10 and len({r["run_id"] for r in runs}) == 10
    for seed in SEEDS:
        assert sorted(r["controller"] or "none" for r in runs if r["seed"] == seed) == [
            "cassini", "none", "none", "threshold", "varys"]
    assert all(r["status"] == "ok" for r in runs)
    assert set(outcome.candidates) == {"cassini", "varys", "threshold"}
    assert all(set(c) == set(SEEDS) for c in outcome.candidates.values()) and outcome.seeds == SEEDS
    assert all((out / f"plan-heuristic-seed{s}.json").is_file() for s in SEEDS)


def test_demo_compares_no_control_the_best_baseline_and_the_flowherd_policy(small_demo):
    out, outcome = small_demo
    runs = _runs(out)
    compared = [r for r in runs if r["sweep"] == DEMO_SWEEP]
    roles = sorted((r["params"]["role"], r["placement"], r["controller"] or "none", r["seed"])
                   for r in compared)
    assert roles == sorted([(role, place, ctrl, seed) for seed in SEEDS for role, place, ctrl in [
        ("no control", "packed", "none"), ("no control", "heuristic", "none"),
        ("best baseline", "heuristic", outcome.best_baseline), ("flowherd", "heuristic", "threshold")]])
    # the best baseline: most finished jobs over the seeds, then lowest mean over the seeds of mean JCT
    baselines = [r for r in runs if r["controller"] in ("cassini", "varys")]
    score = {c: (-sum(r["jobs_finished"] for r in baselines if r["controller"] == c),
                 sum(r["mean_jct_s"] for r in baselines if r["controller"] == c))
             for c in ("cassini", "varys")}
    assert outcome.best_baseline == min(score, key=score.get)
    # candidates the seeds cannot tell from the chosen one (paired CI holds 0) are ties, named so
    jct = {c: {r["seed"]: r["mean_jct_s"] for r in baselines if r["controller"] == c} for c in score}
    same = [c for c in score if c != outcome.best_baseline and score[c][0] == score[outcome.best_baseline][0]
            and paired(jct[c], jct[outcome.best_baseline]).tie]
    assert sorted(outcome.ties["baseline"]) == sorted(same)
    if same:
        label = controller_label(outcome.best_baseline, "best baseline", outcome.ties["baseline"])
        assert label.startswith("best baseline (tie: " + CONTROLLER_LABELS[outcome.best_baseline] + " = ")
    # the candidates that were not chosen stay in the store, under their own sweep
    others = {r["controller"] for r in runs if r["sweep"] == DEMO_CANDIDATES_SWEEP}
    assert others == {"cassini", "varys"} - {outcome.best_baseline}


def test_the_report_names_placement_and_controller_of_each_method(small_demo):
    out, outcome = small_demo
    data = load_report_data(out, sweeps=[DEMO_SWEEP])
    best = controller_label(outcome.best_baseline, "best baseline", outcome.ties["baseline"])
    expected = ["packed + no control", "flowherd planner + no control",
                f"flowherd planner + {best}", "flowherd planner + flowherd threshold"]
    assert data.methods == expected and list(outcome.methods) == expected
    page = outcome.report_html.read_text()
    assert all(m in page for m in expected)
    assert (out / "report" / "jct_cdf.png").is_file()
    # the headline: paired differences over both seeds, the same in the report as in the outcome
    comps = {(c.method, c.reference): c.paired for c in paired_comparisons(data)}
    assert (expected[3], expected[2]) in comps and (expected[3], expected[1]) in comps
    assert (expected[1], expected[0]) in comps and all(p.n == len(SEEDS) for p in comps.values())
    assert "Headline: paired differences of mean JCT" in page
    flowherd = outcome.headline["flowherd (threshold) vs no control"]
    assert flowherd == comps[(expected[3], expected[1])]
    # checked by hand from the stored runs: the mean of the per-seed differences
    mine = {r["seed"]: r["mean_jct_s"] for r in data.runs if r["method"] == expected[3]}
    ref = {r["seed"]: r["mean_jct_s"] for r in data.runs if r["method"] == expected[1]}
    assert flowherd.mean == pytest.approx(sum(mine[s] - ref[s] for s in SEEDS) / len(SEEDS), rel=1e-12)


def test_a_second_demo_replaces_the_first_and_never_mixes_other_results(small_demo, tmp_path):
    again = tmp_path / "again"
    shutil.copytree(small_demo[0], again)
    run_demo(again, scenario=_small(), baselines=("varys",), policies=("threshold",), seeds=1)
    controllers = sorted(r["controller"] or "none" for r in _runs(again))
    assert controllers == ["none", "none", "threshold", "varys"]
    # a directory holding other results is refused before anything is simulated
    other = tmp_path / "sim"
    (tmp_path / "s.yaml").write_text(json.dumps(_small()))
    assert main(["simulate", str(tmp_path / "s.yaml"), "--out", str(other)]) == 0
    with pytest.raises(ConfigError, match=r"other sweeps \['simulate'\].*--out"):
        run_demo(other, scenario=_small(), baselines=("crux",), policies=("threshold",), seeds=1)


def test_unknown_baseline_or_bad_seeds_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"\['crucks'\] are not controllers.*\(baselines\)"):
        run_demo(tmp_path, scenario=_small(), baselines=("crucks",))
    with pytest.raises(ConfigError, match=r"seeds must be >= 1, got 0 \(--seeds\)"):
        run_demo(tmp_path, scenario=_small(), seeds=0)
    with pytest.raises(ConfigError, match=r"distinct integers >= 0, got \[1, 1\]"):
        run_demo(tmp_path, scenario=_small(), seeds=(1, 1))


@pytest.mark.slow
def test_demo_runs_the_whole_pipeline_on_the_embedded_default(capsys, tmp_path):
    from flowherd.cli.demo_cmd import DEMO_BASELINES, DEMO_SEEDS, QUICK_POLICIES
    from flowherd.control import CONTROLLERS

    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "report:" in out and str(tmp_path / "report" / "report.html") in out
    policies = [p for p in QUICK_POLICIES if p in CONTROLLERS]
    runs = _runs(tmp_path)
    assert len(runs) == DEMO_SEEDS * (2 + len(DEMO_BASELINES) + len(policies))
    assert all(r["status"] == "ok" for r in runs)
    compared = [r for r in runs if r["sweep"] == DEMO_SWEEP]
    assert sorted(r["params"]["role"] for r in compared) == sorted(
        DEMO_SEEDS * ["best baseline", "flowherd", "no control", "no control"])
    assert "paired differences of mean JCT over" in out
    methods = load_report_data(tmp_path, sweeps=[DEMO_SWEEP]).methods
    assert methods[:2] == ["packed + no control", "flowherd planner + no control"]
    assert "best baseline (" in methods[2] and methods[3].startswith("flowherd planner + flowherd")
    assert (tmp_path / "report" / "report.html").stat().st_size > 10_000


def test_demo_results_do_not_depend_on_the_number_of_workers(small_demo, tmp_path):
    out, outcome = small_demo  # two worker processes, both seeds
    # one seed, one process: its runs are the two-process demo's runs of that seed, number for number
    seed = SEEDS[-1]
    serial = run_demo(tmp_path / "serial", scenario=_small(), baselines=("cassini", "varys"),
                      policies=("not-yet-registered", "threshold"), seeds=(seed,), workers=1)
    assert {c: v[seed] for c, v in serial.candidates.items()} == {
        c: v[seed] for c, v in outcome.candidates.items()}
    key = lambda r: (r["placement"], r["controller"] or "none")  # noqa: E731
    assert sorted((key(r), r["mean_jct_s"]) for r in _runs(tmp_path / "serial")) == sorted(
        (key(r), r["mean_jct_s"]) for r in _runs(out) if r["seed"] == seed)
    with pytest.raises(ConfigError, match="--workers"):
        run_demo(tmp_path / "bad", scenario=_small(), workers=0)


def test_the_cost_to_others_is_the_paired_relative_change_against_no_control():
    from flowherd.cli.demo_cmd import _print_cost

    lines = []

    class Con:
        def print(self, text, **_):
            lines.append(text)

    def run(mean, p99, jain):
        return {"background": {"mean_fct_s": mean, "p99_fct_s": p99}, "tenant_jain": jain}

    none = {1: run(1.0, 4.0, 0.9), 2: run(2.0, 6.0, 0.8)}
    mine = {1: run(1.1, 4.0, 0.9), 2: run(2.1, 5.0, 0.8)}
    _print_cost(Con(), {"flowherd": mine, "best baseline": None}, none)
    # mean FCT: differences 0.1 and 0.1 (no spread: not a tie) over a mean of 1.5 -> +6.7%;
    # p99: 0 and -1 over a mean of 5 -> -10.0%, but two seeds that disagree so much are a tie
    assert lines == ["  cost to others, flowherd vs no control: background mean FCT +6.7%, "
                     "background p99 FCT -10.0% (a tie), Jain's index +0.0% (a tie)"]
