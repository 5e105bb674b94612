"""``flowherd/PathsDelays-v0``: API conformance, determinism, the warm policies as controllers, exact
returns, and a trained model of a paths space running as a controller."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from flowherd.control.paths_agent import NUM_ACTIONS, PathsRuleController, obs_dim
from flowherd.errors import ConfigError
from flowherd.experiments.runner import run_scenario
from flowherd.rl import PATHS_ENV_ID
from flowherd.rl.paths_env import PathsEnv


@pytest.fixture
def two_spines(tiny):
    tiny["fabric"]["spines"] = 2  # a choice of paths between the leaves
    tiny["placement"]["method"] = "spread"  # jobs across the leaves: their rings cross the spines
    return tiny


def _episode(env, seed, pick):
    obs, info = env.reset(options={"scenario_seed": seed})
    total, n = 0.0, 0
    while True:
        obs, r, term, _, info = env.step(pick(obs, info))
        total += r
        n += 1
        if term:
            return total, n, info


def test_check_env_passes_for_both_spaces(two_spines):
    for space in ("paths-raw", "paths-index"):
        env = gymnasium.make(PATHS_ENV_ID, scenario=two_spines, seeds=[3, 4], actions=space)
        check_env(env.unwrapped, skip_render_check=True)
        assert env.observation_space.shape == (obs_dim(space),) and env.action_space.n == NUM_ACTIONS
        env.close()


def test_the_warm_policy_is_the_same_controller_outside_the_environment(two_spines):
    # always taking info["structured_action"] is the warm policy; run as a controller it gives the
    # same mean JCT, and the episode's return is -mean JCT / horizon (Little's law)
    for warm in ("none", "index"):
        env = PathsEnv(two_spines, seeds=[3], actions="paths-index", warm=warm)
        ret, n, info = _episode(env, 3, lambda _o, i: i["structured_action"])
        env.close()
        run = run_scenario(env.scenario_for(3), solo=False,
                           controller=PathsRuleController(space="paths-index", warm=warm))
        assert n > 5
        assert info["mean_jct_s"] == pytest.approx(float(run.cluster.censored_jct_s().mean()), rel=1e-9)
        assert ret == pytest.approx(-info["mean_jct_s"] / env.scenario.horizon_s, rel=1e-9)


def test_no_control_warm_policy_equals_no_controller(two_spines):
    env = PathsEnv(two_spines, seeds=[4], actions="paths-raw", warm="none")
    _, _, info = _episode(env, 4, lambda _o, i: i["structured_action"])
    env.close()
    run = run_scenario(env.scenario_for(4), solo=False)
    assert info["mean_jct_s"] == pytest.approx(float(run.cluster.censored_jct_s().mean()), rel=1e-9)


def test_same_seed_same_rollout_and_paths_change_the_outcome(two_spines):
    rng = np.random.default_rng(0)
    picks = rng.integers(0, NUM_ACTIONS, size=5000).tolist()

    def run(env):
        it = iter(picks)
        return _episode(env, 3, lambda _o, _i: next(it))

    a = run(PathsEnv(two_spines, seeds=[3], actions="paths-raw"))
    b = run(PathsEnv(two_spines, seeds=[3], actions="paths-raw"))
    assert a[0] == b[0] and a[1] == b[1]
    env = PathsEnv(two_spines, seeds=[3], actions="paths-raw")
    c = _episode(env, 3, lambda _o, i: i["structured_action"])
    assert c[2]["mean_jct_s"] != a[2]["mean_jct_s"]  # the random options change what the jobs do


def test_masks_follow_the_options_and_hold_needs_waiting_bytes(two_spines):
    env = PathsEnv(two_spines, seeds=[3], actions="paths-raw")
    _obs, info = env.reset(options={"scenario_seed": 3})
    seen = 0
    while True:
        m = info["action_mask"]
        assert m[0]  # the default routes are always allowed
        assert m.sum() >= 2  # asked only where the actions differ
        assert not np.any(m[1::2] & ~m[0::2])  # holding an option needs the option
        seen += 1
        _obs, _, term, _, info = env.step(info["structured_action"])
        if term:
            break
    env.close()
    assert seen > 5


def test_bad_space_or_warm_names_the_field(two_spines):
    with pytest.raises(ConfigError, match="actions"):
        PathsEnv(two_spines, actions="structured")
    with pytest.raises(ConfigError, match="warm"):
        PathsEnv(two_spines, warm="flowherd")


def test_a_saved_paths_model_runs_as_a_controller(two_spines, tmp_path):
    torch = pytest.importorskip("torch")
    from stable_baselines3 import PPO

    from flowherd.control import make_controller

    torch.manual_seed(0)
    env = PathsEnv(two_spines, seeds=[3], actions="paths-index")
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=0, device="cpu")
    path = tmp_path / "paths.zip"
    model.save(path)
    env.close()
    ctrl = make_controller(str(path))
    assert ctrl.actions == "paths-index" and ctrl.name == "rl:paths"
    run = run_scenario(env.scenario_for(3), solo=False, controller=ctrl)
    assert run.cluster.num_decisions > 0 and not run.cluster.controller_issues


def test_progress_shaping_keeps_the_return_and_charges_the_lost_time(two_spines):
    # the potential (work done, in solo seconds) telescopes: the same return as the JCT reward, on the
    # same rollout, while each step's reward is only the time lost to contention (Ng et al. 1999)
    rewards = {}
    for reward in ("jct", "progress"):
        env = PathsEnv(two_spines, seeds=[3], actions="paths-raw", reward=reward)
        _obs, info = env.reset(options={"scenario_seed": 3})
        rs = []
        while True:
            _obs, r, term, _, info = env.step(info["structured_action"])
            rs.append(r)
            if term:
                break
        env.close()
        rewards[reward] = np.asarray(rs)
        assert sum(rs) == pytest.approx(-info["mean_jct_s"] / env.scenario.horizon_s, rel=1e-9)
    jct, shaped = rewards["jct"], rewards["progress"]
    assert jct.shape == shaped.shape
    assert not np.allclose(jct[:-1], shaped[:-1])  # the jobs' iterations are credited as they end
    # minus the time lost, before the last step: smaller in size than minus the time spent
    assert np.abs(shaped[:-1]).sum() < np.abs(jct[:-1]).sum()
    with pytest.raises(ConfigError, match="reward"):
        PathsEnv(two_spines, reward="makespan")
