"""The Gymnasium environment: API conformance, determinism, exact rewards, clean threads."""

import gc
import threading

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from flowherd.control.herd import ACTIONS, NUM_FEATURES, HerdController
from flowherd.errors import ConfigError, SimulationError
from flowherd.experiments.runner import run_scenario
from flowherd.rl import ENV_ID
from flowherd.rl.env import BufferingEnv, jobs_in_system_integral


def _env_threads():
    return [t for t in threading.enumerate() if t.name.startswith("flowherd-env-")]


def _rollout(env, actions, scenario_seed):
    """Observations, rewards, masks and infos of one episode under a fixed action sequence."""
    obs, info = env.reset(options={"scenario_seed": scenario_seed})
    out = [(obs, 0.0, info["action_mask"], info["now_s"])]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, info["action_mask"], info["now_s"]))
        if term or trunc:
            break
    return out, info


def _structured_episode(env, scenario_seed):
    _, info = env.reset(options={"scenario_seed": scenario_seed})
    rewards, times = [], []
    while True:
        _, r, term, _, info = env.step(info["structured_action"])
        rewards.append(r)
        times.append(info["now_s"])
        if term:
            return rewards, times, info


def test_check_env_passes(tiny):
    env = gymnasium.make(ENV_ID, scenario=tiny, seeds=[3, 4])
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.shape == (NUM_FEATURES,)
    assert env.action_space.n == len(ACTIONS)
    env.close()
    assert not _env_threads()


def test_same_seed_gives_the_same_rollout(tiny):
    # a fixed action sequence mixing valid, masked-out and out-of-range actions
    actions = np.random.default_rng(0).integers(-2, len(ACTIONS) + 2, size=400).tolist()
    a, b = BufferingEnv(tiny, seeds=[3, 4]), BufferingEnv(tiny, seeds=[3, 4])
    ra, ia = _rollout(a, actions, 4)
    rb, ib = _rollout(b, actions, 4)
    assert len(ra) == len(rb) > 10 and ia["mean_jct_s"] == ib["mean_jct_s"]
    for (oa, ra_, ma, ta), (ob, rb_, mb, tb) in zip(ra, rb, strict=True):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ma, mb)
        assert ra_ == rb_ and ta == tb
    # and reset(seed=...) draws the same scenario seed and first observation
    oa, xa = a.reset(seed=11)
    ob, xb = b.reset(seed=11)
    assert xa["scenario_seed"] == xb["scenario_seed"]
    np.testing.assert_array_equal(oa, ob)
    a.close()
    b.close()


def test_return_is_minus_mean_jct_over_horizon(tiny):
    # Little's law: the integral over the episode of the number of jobs in the system is the sum
    # of their completion times, so the return is -sum(JCT) / (num_jobs * horizon). Checked against
    # an independent run of the structured controller, which the structured actions reproduce.
    env = BufferingEnv(tiny, seeds=[4])
    rewards, times, info = _structured_episode(env, 4)
    run = run_scenario(env.scenario_for(4), solo=False, controller=HerdController())
    horizon = env.scenario.horizon_s
    n = len(run.cluster.jobs)
    assert n == info["jobs_total"] >= 3 and info["jobs_finished"] == run.summary["jobs_finished"]
    total = run.cluster.censored_jct_s().sum()
    assert info["sum_jct_s"] == pytest.approx(total, rel=1e-12)
    assert sum(rewards) == pytest.approx(-total / (n * horizon), rel=1e-9)
    # the rewards before the last charge exactly the job-seconds up to the last agent point (all
    # finishes of training jobs reach the controller when they happen): not all at the end
    submit = np.array([r.submit_s for r in run.cluster.jobs])
    finish = np.array([np.inf if r.finish_s is None else r.finish_s for r in run.cluster.jobs])
    upto = jobs_in_system_integral(submit, finish, 0.0, times[-2])
    assert upto > 0.5 * total
    assert sum(rewards[:-1]) == pytest.approx(-upto / (n * horizon), rel=1e-9)
    assert all(r <= 0 for r in rewards[:-1])


def test_jobs_in_system_integral_closed_form():
    # two jobs: [0, 2) and [1, inf); over [0.5, 3]: 1.5 + 2 = 3.5 job-seconds
    got = jobs_in_system_integral(np.array([0.0, 1.0]), np.array([2.0, np.inf]), 0.5, 3.0)
    assert got == pytest.approx(3.5)
    assert jobs_in_system_integral(np.array([5.0]), np.array([np.inf]), 0.0, 4.0) == 0.0


def test_masked_out_action_is_projected_to_the_structured_one(tiny):
    a, b = BufferingEnv(tiny, seeds=[3]), BufferingEnv(tiny, seeds=[3])
    _, ia = a.reset(options={"scenario_seed": 3})
    _, ib = b.reset(options={"scenario_seed": 3})
    checked = 0
    for _ in range(200):
        bad = np.flatnonzero(~ia["action_mask"])
        wrong = int(bad[0]) if bad.size else len(ACTIONS) + 5
        oa, ra, ta, _, ia2 = a.step(wrong)
        ob, rb, tb, _, ib2 = b.step(ib["structured_action"])
        assert ia2["projected"] and not ib2["projected"]
        np.testing.assert_array_equal(oa, ob)
        assert ra == rb and ta == tb
        checked += 1
        ia, ib = ia2, ib2
        if ta:
            break
    assert checked > 10
    a.close()
    b.close()


def test_masks_allow_some_action_and_match_info(tiny):
    env = BufferingEnv(tiny, seeds=[3])
    _, info = env.reset(options={"scenario_seed": 3})
    for _ in range(30):
        m = env.action_masks()
        assert m.dtype == bool and m.shape == (len(ACTIONS),) and m.any()
        np.testing.assert_array_equal(m, info["action_mask"])
        assert m[info["structured_action"]]
        _, _, term, _, info = env.step(info["structured_action"])
        if term:
            break
    env.close()


def test_reset_and_close_mid_episode_leave_no_live_thread(tiny):
    before = set(threading.enumerate())
    env = BufferingEnv(tiny, seeds=[3, 4])
    env.reset(options={"scenario_seed": 3})
    for _ in range(5):
        env.step(0)
    assert len(_env_threads()) == 1  # the episode's worker, blocked on the next action
    env.reset(options={"scenario_seed": 4})  # aborts the first episode
    assert len(_env_threads()) == 1
    env.step(0)
    env.close()
    assert not _env_threads()
    # a forgotten environment in mid-episode ends its thread when collected
    env = BufferingEnv(tiny, seeds=[3])
    env.reset(options={"scenario_seed": 3})
    del env
    gc.collect()
    assert not _env_threads()
    assert set(threading.enumerate()) == before
    # and an aborted episode left the simulator reusable: a new episode runs to its end
    env = BufferingEnv(tiny, seeds=[3])
    _, _, info = _structured_episode(env, 3)
    assert info["jobs_finished"] == info["jobs_total"] and not _env_threads()


def test_step_without_episode_and_bad_arguments_raise_one_clear_error(tiny):
    env = BufferingEnv(tiny, seeds=[3])
    with pytest.raises(SimulationError, match="call reset"):
        env.step(0)
    with pytest.raises(ConfigError, match=r"\(seeds\)"):
        BufferingEnv(tiny, seeds=[])
    with pytest.raises(ConfigError, match=r"\(horizon_s\)"):
        BufferingEnv(tiny, horizon_s=-1.0)
    with pytest.raises(ConfigError, match="scenario_seed"):
        env.reset(options={"scenario_seed": "x"})
    env.reset(options={"scenario_seed": 3})
    with pytest.raises(ConfigError, match=r"\(action\)"):
        env.step("not an action")
    env.close()


def test_horizon_override_shortens_the_episode(tiny):
    long_env, short_env = BufferingEnv(tiny, seeds=[3]), BufferingEnv(tiny, seeds=[3], horizon_s=0.05)
    long_r, _, _ = _structured_episode(long_env, 3)
    short_r, short_t, info = _structured_episode(short_env, 3)
    assert short_env.scenario.horizon_s == 0.05 and max(short_t) <= 0.05
    assert len(short_r) < len(long_r) and info["jobs_finished"] < info["jobs_total"]


def _slack_pair():
    """benchmarks/scenarios/rl_two_jobs_slack.yaml cut to 2 iterations, no background (0.3 s): job b's DP
    buckets have slack, so buffering is possible at some points."""
    import yaml

    path = __import__("pathlib").Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" \
        / "rl_two_jobs_slack.yaml"
    src = yaml.safe_load(path.read_text())
    for j in src["workload"]["jobs"]:
        j["iterations"] = 2
    src["workload"]["background"] = {"load": 0.0}
    src["controller"] = {"name": "none", "levers": "buffer"}
    return src


def test_choice_only_asks_fewer_points_and_keeps_the_run_and_the_return():
    # the points passed over are those where every allowed action makes the same decision, so the
    # structured policy's episode is the same run (same JCT) and the return the same integral
    got = {}
    for co in (False, True):
        env = BufferingEnv(_slack_pair(), seeds=[0], choice_only=co)
        rewards, _times, info = _structured_episode(env, 0)
        got[co] = (len(rewards), sum(rewards), info["mean_jct_s"])
        env.close()
    assert 0 < got[True][0] < got[False][0] / 5
    assert got[True][2] == got[False][2]
    assert got[True][1] == pytest.approx(got[False][1], rel=1e-9)
    # and every point it asks offers a buffering choice
    env = BufferingEnv(_slack_pair(), seeds=[0], choice_only=True)
    _, info = env.reset(options={"scenario_seed": 0})
    buffered = np.array([d for _c, d in ACTIONS])
    while True:
        assert info["action_mask"][buffered].any() and info["action_mask"][~buffered].any()
        _, _, term, _, info = env.step(info["structured_action"])
        if term:
            break
    env.close()
