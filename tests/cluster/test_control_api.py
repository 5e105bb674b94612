"""The controller protocol's values and `validate`: an invalid decision is caught and named."""

import math

import numpy as np
import pytest

from flowherd.cluster.control_api import (
    Controller,
    Decision,
    DecisionPoint,
    JobState,
    NetworkView,
    validate,
)
from flowherd.errors import ConfigError, SimulationError


def _point(**kw):
    base = dict(kind="collective", now_s=2.0, job="a", group="dp", task="a/it0/ar", size_bytes=16.0,
                link_idx=np.array([0, 1]), link_bytes=np.array([8.0, 8.0]),
                src_gpu=np.array([0, 1]), dst_gpu=np.array([2, 3]),
                candidate_paths=((np.array([0]), np.array([2])),
                                 (np.array([1]), np.array([3]), np.array([4]))))
    base.update(kw)
    return DecisionPoint(**base)


def test_valid_decisions_pass():
    p = _point()
    for d in (None, Decision(), Decision(delay_s=0.25), Decision(path_choice=(1, 2)),
              Decision(path_splits=((0.5, 0.5), (0.2, 0.3, 0.5))), Decision(weight=2.0, priority=3)):
        validate(d, p)


@pytest.mark.parametrize(("decision", "field"), [
    (Decision(delay_s=-1.0), "delay_s"),
    (Decision(delay_s=math.nan), "delay_s"),
    (Decision(delay_s=math.inf), "delay_s"),
    (Decision(path_choice=(0, 3)), "path_choice[1]"),  # pair 1 has 3 paths: 0..2
    (Decision(path_choice=(-1, 0)), "path_choice[0]"),
    (Decision(path_choice=(0,)), "path_choice"),  # one entry for two pairs
    (Decision(path_splits=((0.5, 0.4), (1.0, 0.0, 0.0))), "path_splits[0]"),
    (Decision(path_splits=((1.0,), (1.0, 0.0, 0.0))), "path_splits[0]"),
    (Decision(path_splits=((1.5, -0.5), (1.0, 0.0, 0.0))), "path_splits[0]"),
    (Decision(path_choice=(0, 0), path_splits=((1.0, 0.0), (1.0, 0.0, 0.0))), "path_splits"),
    (Decision(weight=0.0), "weight"),
    (Decision(weight=-2.0), "weight"),
    (Decision(priority=-1), "priority"),
    (Decision(priority=1.5), "priority"),
    (Decision(priority=True), "priority"),
])
def test_invalid_decisions_name_the_field(decision, field):
    with pytest.raises(SimulationError, match=r"decision\." + field.split("[")[0]) as e:
        validate(decision, _point())
    msg = str(e.value)
    assert field in msg
    assert "'a/it0/ar'" in msg and "2 s" in msg  # the decision point is in the message


def test_delay_and_paths_only_at_collective_points():
    tick = DecisionPoint(kind="tick", now_s=1.0)
    validate(Decision(weight=1.0), tick)
    with pytest.raises(SimulationError, match="delay_s must be 0 at a 'tick' point"):
        validate(Decision(delay_s=1.0), tick)
    with pytest.raises(SimulationError, match="no candidate paths"):
        validate(Decision(path_choice=()), tick)
    no_cands = _point(candidate_paths=())
    with pytest.raises(SimulationError, match="no candidate paths"):
        validate(Decision(path_choice=(0, 0)), no_cands)


def test_a_non_decision_is_invalid():
    with pytest.raises(SimulationError, match="must return a Decision or None, got dict"):
        validate({"delay_s": 1.0}, _point())


@pytest.mark.parametrize(("kw", "field"), [
    ({"kind": "later"}, "DecisionPoint.kind"),
    ({"now_s": math.nan}, "DecisionPoint.now_s"),
    ({"link_bytes": np.array([1.0])}, "DecisionPoint.link_bytes"),
    ({"dst_gpu": np.array([1])}, "DecisionPoint.dst_gpu"),
    ({"candidate_paths": ((np.array([0]),),)}, "DecisionPoint.candidate_paths"),
])
def test_bad_decision_points_are_config_errors(kw, field):
    with pytest.raises(ConfigError, match=field):
        _point(**kw)


def test_view_arrays_are_read_only_and_shapes_checked():
    v = NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.ones(3), link_utilization=np.zeros(3))
    with pytest.raises(ValueError):
        v.link_utilization[0] = 1.0
    with pytest.raises(ConfigError, match=r"NetworkView\.link_utilization"):
        NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.ones(3), link_utilization=np.zeros(2))
    with pytest.raises(ConfigError, match=r"JobState\.period_s"):
        JobState(name="a", num_gpus=8, period_s=0.0)


def test_gpu_intensity_is_compute_over_the_busiest_link_time():
    # Crux (SIGCOMM'24) Eq. 2: I = W / t, t = max over links of bytes / bandwidth
    j = JobState(name="a", num_gpus=8, compute_flops_per_iteration=6e15, comm_bytes_per_iteration=2e9,
                 busiest_link_s=0.5)
    assert j.gpu_intensity_flops_per_s == pytest.approx(1.2e16)
    assert JobState(name="b", num_gpus=1, busiest_link_s=0.0).gpu_intensity_flops_per_s == math.inf
    assert JobState(name="c", num_gpus=1).gpu_intensity_flops_per_s == 0.0  # unknown: last
    with pytest.raises(ConfigError, match=r"JobState\.busiest_link_s"):
        JobState(name="d", num_gpus=1, busiest_link_s=-1.0)


def test_protocol_is_structural():
    class Mine:
        name = "mine"

        def reset(self, seed: int) -> None: ...

        def decide(self, point, view):
            return None

    assert isinstance(Mine(), Controller)
    assert not isinstance(object(), Controller)
