"""Granted levers: the named grants, their validation at the scenario's edge."""

import pytest

from flowherd.cluster.control_api import GRANTS, Levers, levers_from
from flowherd.errors import ConfigError
from flowherd.experiments.scenario import scenario_from_mapping

TINY = {"name": "t",
        "fabric": {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 2, "leaves": 1, "spines": 1}}


def test_the_three_named_grants_add_levers_in_order():
    b, w, p = GRANTS["buffer"], GRANTS["weighted"], GRANTS["priority"]
    assert (b.delay, b.paths, b.weights, b.priority_classes, b.above_background) == \
        (True, True, False, 0, False)
    assert (w.delay, w.paths, w.weights, w.priority_classes) == (True, True, True, 0)
    assert (p.weights, p.priority_classes, p.above_background) == (True, 8, True)
    assert levers_from(None) == b  # buffer is the default


def test_a_scenario_without_levers_runs_under_buffer_and_names_its_grant():
    assert scenario_from_mapping(TINY).levers == GRANTS["buffer"]
    got = scenario_from_mapping({**TINY, "controller": {"levers": {"priority_classes": 4}}}).levers
    assert got == Levers(name="custom", priority_classes=4) and got.delay and not got.above_background


@pytest.mark.parametrize(("levers", "match"), [
    ("bufer", r"unknown grant 'bufer' \(controller.levers\); did you mean 'buffer'"),
    ({"priority_clases": 2}, r"unknown field 'priority_clases' \(controller.levers.priority_clases\); "
                             r"did you mean 'priority_classes'"),
    ({"priority_classes": -1}, r"priority_classes must be an int in 0..64, got -1"),
    ({"delay": "yes"}, r"controller.levers.delay must be true or false, got 'yes'"),
    ({"above_background": True}, r"above_background needs priority_classes >= 1"),
])
def test_bad_levers_name_the_field(levers, match):
    with pytest.raises(ConfigError, match=match):
        scenario_from_mapping({**TINY, "controller": {"levers": levers}})


@pytest.fixture(scope="module")
def two_jobs_run():
    """The two-job case (benchmarks/scenarios/control_two_jobs.yaml), 6 iterations per job:
    (controller, grant) -> (censored JCTs, the run's controller issues)."""
    from pathlib import Path

    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import read_scenario_mapping

    base = read_scenario_mapping(Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios"
                                 / "control_two_jobs.yaml")
    for j in base["workload"]["jobs"]:
        j["iterations"] = 6
    # pinned to the ideal engine (the scenario runs roce): what is checked is the grant, not the
    # fabric, and on roce's ports (8 queues, unmarked traffic in queue 2: marked classes 1 and up
    # share queue 1, `NetworkConfig.queue_of`) Varys's classes on this case land in one queue, so
    # its run under `priority` equals no control's (measured 2026-12-02; with `default_queue: 4`
    # it differs): the ideal engine's 8 strict classes show that the decisions apply
    base["network"] = "ideal"

    def run(name, levers):
        res = run_scenario(scenario_from_mapping({**base, "controller": {"name": name, "levers": levers}}))
        return res.cluster.censored_jct_s(), res.cluster.controller_issues

    return run


def test_the_benchmarks_no_op_controllers_are_no_control_under_their_grants(two_jobs_run):
    # benchmarks/control.py reuses no control's run for these (NO_OP): Sincronia and Varys order
    # by classes and MLTCP by weights; each decides nothing where the grant lacks its lever
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "control_benchmark", Path(__file__).resolve().parents[2] / "benchmarks" / "control.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    none, _ = two_jobs_run("none", "buffer")
    for name, grants in bench.NO_OP.items():
        for grant in grants:
            jct, issues = two_jobs_run(name, grant)
            assert jct.tolist() == none.tolist(), (name, grant)
            assert not issues, (name, grant)  # nothing asked, nothing refused
    # and where the grant has the lever, the decisions apply: Varys's classes change the run
    jct, issues = two_jobs_run("varys", "priority")
    assert not issues and jct.tolist() != none.tolist()
