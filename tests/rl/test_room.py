"""The rule policies of the structured space's room (studies/rl_room.py)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from flowherd.control.herd import ACTIONS, FEATURE_NAMES, NUM_FEATURES, HerdController
from flowherd.experiments.runner import run_scenario
from flowherd.rl.env import BufferingEnv

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "benchmarks"))  # rl_room imports rl_curves
_SPEC = importlib.util.spec_from_file_location("rl_room_study", _ROOT / "studies" / "rl_room.py")
room = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(room)


def _info(structured, can_buffer):
    mask = np.array([(not d) or can_buffer for _c, d in ACTIONS])
    return {"structured_action": ACTIONS.index(structured), "action_mask": mask}


def test_rules_hold_only_where_buffering_is_possible_and_keep_the_class():
    obs = np.zeros(NUM_FEATURES, np.float32)
    obs[FEATURE_NAMES.index("slack_over_period")] = 0.25  # exact in float32
    for can in (False, True):
        for held in ((False, True) if can else (False,)):
            info = _info((7, held), can)
            assert room._action("flowherd", obs, info) == ACTIONS.index((7, held))
            assert room._action("never", obs, info) == ACTIONS.index((7, False))
            assert room._action("always", obs, info) == ACTIONS.index((7, can))
            assert room._action("slack>0.2", obs, info) == ACTIONS.index((7, can))
            assert room._action("slack>0.25", obs, info) == ACTIONS.index((7, False))  # strictly above
    with pytest.raises(ValueError, match="unknown rule"):
        room._action("sometimes", obs, _info((7, False), True))


def test_flowherd_rule_episode_is_the_policys_run(tiny):
    env = BufferingEnv({**tiny, "controller": {"name": "none", "levers": "buffer"}}, seeds=[3])
    got = room.episode(env, 3, "flowherd")
    never = room.episode(env, 3, "never")
    env.close()
    assert never["held"] == 0 and got["points"] > 0
    run = run_scenario(env.scenario_for(3), solo=False, controller=HerdController())
    want = float(run.cluster.censored_jct_s().mean())
    assert got["mean_jct_s"] == pytest.approx(want, rel=1e-12)
