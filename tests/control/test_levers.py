"""Granted levers: the named grants, their validation at the scenario's edge (issue 14)."""

import pytest

from flowherd.errors import ConfigError
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.sim.control_api import GRANTS, Levers, levers_from

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
