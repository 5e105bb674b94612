"""The rule-family policy class (`flowherd.control.paths_rule`): its logits are the formula, one
parameter setting is the index rule of docs/rl-structure.md, eight learnable numbers from a random
start, and PPO trains it into a model file that loads back as a controller."""

import numpy as np
import pytest
import torch

from flowherd.control.model import PathsPolicyController, greedy_action, load_controller
from flowherd.control.paths_agent import NUM_ACTIONS, PathsRuleController, obs_dim
from flowherd.control.paths_rule import (
    MASKED_LOGIT,
    NUM_RULE_PARAMS,
    PathsRulePolicy,
    RuleHead,
    rule_logits,
    rule_parameters,
)
from flowherd.errors import ConfigError
from flowherd.experiments.runner import run_scenario
from flowherd.rl.paths_env import PathsEnv
from flowherd.rl.train import train


@pytest.fixture
def two_spines(tiny):
    tiny["fabric"]["spines"] = 2
    tiny["placement"]["method"] = "spread"
    return tiny


def _ppo(env, seed=0):
    from stable_baselines3 import PPO

    return PPO(PathsRulePolicy, env, n_steps=64, batch_size=64, seed=seed, device="cpu",
               policy_kwargs={"net_arch": {"pi": [], "vf": [64, 64]}})


def _set(head, w, u, v):
    with torch.no_grad():
        head.w.copy_(torch.tensor(w, dtype=torch.float32))
        head.hold.copy_(torch.tensor([u, v], dtype=torch.float32))


def _obs():
    # three valid options in rank order (valid, rate/cap, utilization, wait/bytes, W/theta, own-pair
    # rate/cap), three invalid ones, then the point's five features and the raw position of rank 0
    opts = [[1, 0.5, 0.2, 0.0, 0.0, 0.5], [1, 0.25, 0.9, 2.0, 0.5, 0.2], [1, 0.1, 1.0, 4.0, 3.0, 0.05]]
    opts += [[0] * 6] * 3
    return np.array([x for o in opts for x in o] + [0.9, 0.1, 0.8, 0.1, 0.0625, 0.2], np.float32)


def test_logits_are_the_shared_score_plus_the_hold_formula(two_spines):
    env = PathsEnv(two_spines, seeds=[3], actions="paths-index")
    policy = _ppo(env).policy
    head = policy.action_net
    w, u, v = [0.5, 1.0, -2.0, -0.25, 0.75, 2.0], -3.0, 1.5
    _set(head, w, u, v)
    # by hand: s_j = w . (-j/5, rate, util, wait/bytes, W/theta, own rate); start = s_j;
    # hold = s_j + u W/theta + v
    s0 = 0.5 * 0 + 1.0 * 0.5 - 2.0 * 0.2 - 0.25 * 0 + 0.75 * 0 + 2.0 * 0.5  # 1.1
    s1 = 0.5 * -0.2 + 1.0 * 0.25 - 2.0 * 0.9 - 0.25 * 2.0 + 0.75 * 0.5 + 2.0 * 0.2  # -1.375
    s2 = 0.5 * -0.4 + 1.0 * 0.1 - 2.0 * 1.0 - 0.25 * 4.0 + 0.75 * 3.0 + 2.0 * 0.05  # -0.75
    m = MASKED_LOGIT
    # option 0 has nothing waiting (W/theta = 0): its hold is ruled out; options 3-5 are invalid
    want = np.array([s0, m, s1, s1 - 3.0 * 0.5 + 1.5, s2, s2 - 3.0 * 3.0 + 1.5, m, m, m, m, m, m])
    assert head(torch.as_tensor(_obs()[None]))[0].detach().numpy() == pytest.approx(want, rel=1e-6, abs=1e-6)
    assert rule_logits(_obs(), np.array(w), u, v) == pytest.approx(want, rel=1e-6, abs=1e-6)
    # the distribution PPO samples from: softmax over the three options and their allowed holds
    got = policy.get_distribution(torch.as_tensor(_obs()[None])).distribution.probs[0].detach().numpy()
    e = np.exp(want[:6] - want[:6].max())
    assert got[:6] == pytest.approx(e / e.sum(), rel=1e-5) and got[6:].sum() == 0.0
    env.close()


def test_eight_parameters_from_a_random_start(two_spines):
    env = PathsEnv(two_spines, seeds=[3], actions="paths-index")
    a, b = _ppo(env, seed=0).policy, _ppo(env, seed=1).policy
    actor = [p for name, p in a.named_parameters()
             if name.startswith(("action_net", "mlp_extractor.policy_net"))]
    assert sum(p.numel() for p in actor) == NUM_RULE_PARAMS == 8
    assert len(a.mlp_extractor.policy_net) == 0  # no hidden layer between the observation and the rule
    pa = torch.cat([a.action_net.w, a.action_net.hold]).detach().numpy()
    pb = torch.cat([b.action_net.w, b.action_net.hold]).detach().numpy()
    assert not np.allclose(pa, pb) and 0 < np.abs(pa).max() < 0.1  # seeded draws of scale 0.01
    # the critic is the other arms' MLP over the whole observation
    assert a.mlp_extractor.latent_dim_vf == 64 and a.value_net.in_features == 64
    env.close()


def test_the_rule_setting_takes_the_index_rules_action_at_every_point():
    # benchmarks/scenarios/rl_small.yaml under buffer, validation seed 4: 1,321 agent points, 59 of them
    # with waiting bytes on the rank-0 option (the tiny scenario has none: the index avoids them)
    from pathlib import Path

    from flowherd.experiments.scenario import read_scenario_mapping

    root = Path(__file__).resolve().parents[2]
    src = read_scenario_mapping(str(root / "benchmarks" / "scenarios" / "rl_small.yaml"))
    src["controller"] = {"name": "none", "levers": "buffer"}
    src["network"] = "roce"
    env = PathsEnv(src, seeds=[4], actions="paths-index", warm="index")
    policy = _ppo(env).policy
    rule_parameters(policy.action_net)
    n, can_hold, held = 0, 0, 0
    obs, info = env.reset(options={"scenario_seed": 4})
    done = False
    while not done:
        a = greedy_action(policy, obs, info["action_mask"])
        assert a == info["structured_action"], (n, obs)
        n += 1
        can_hold += bool(info["action_mask"][1])
        held += a == 1
        obs, _, done, _, info = env.step(a)
    assert n > 1000 and 0 < held <= can_hold  # the rule holds at some points
    # the soft warm start of train(rule_init="index") takes the same greedy actions (a held lower
    # rank never outscores rank 0), on a second pass over the same episode
    from flowherd.control.paths_rule import WARM_HOLD_SLOPE, WARM_RANK_WEIGHT

    rule_parameters(policy.action_net, rank_weight=WARM_RANK_WEIGHT, hold_slope=WARM_HOLD_SLOPE)
    obs, info = env.reset(options={"scenario_seed": 4})
    done, m = False, 0
    while not done:
        a = greedy_action(policy, obs, info["action_mask"])
        assert a == info["structured_action"], (m, obs)
        m += 1
        obs, _, done, _, info = env.step(a)
    assert m == n
    rule_parameters(policy.action_net)
    # as a controller it is the index rule's controller
    jct = run_scenario(env.scenario_for(4), solo=False, controller=PathsPolicyController(policy))
    ref = run_scenario(env.scenario_for(4), solo=False, controller=PathsRuleController())
    assert float(jct.cluster.censored_jct_s().mean()) == float(ref.cluster.censored_jct_s().mean())
    # and it reaches the room of this family, the widest-share option at every point (21.55 s on
    # this seed, 23.68 s with no control): the index counts the collective's own pairs on each link
    # (docs/rl-structure.md, A8'); ranked by the rate of one new flow it stayed near no control
    widest = run_scenario(env.scenario_for(4), solo=False, controller=_WidestEverywhere())
    none = run_scenario(env.scenario_for(4), solo=False)
    rule_s = float(jct.cluster.censored_jct_s().mean())
    assert rule_s <= 1.01 * float(widest.cluster.censored_jct_s().mean())
    assert rule_s <= 0.93 * float(none.cluster.censored_jct_s().mean())
    env.close()


class _WidestEverywhere:
    """The widest-share option (`paths_agent.OPTIONS[1]`) at every agent point, never holding."""

    name = "widest-everywhere"

    def reset(self, seed):
        pass

    def decide(self, point, view):
        from flowherd.control.herd import asks_agent
        from flowherd.control.paths_agent import decide, prepare

        if not asks_agent(point):
            return None
        _obs, mask, _d, ctx = prepare("paths-raw", point, view)
        return decide("paths-raw", 2 if mask[2] else 0, ctx)


def test_a_hold_threshold_is_the_ratio_where_the_hold_logit_turns():
    head = RuleHead()
    rule_parameters(head, rank_weight=50.0, hold_slope=4.0)
    x = _obs().copy()
    x[4] = 0.99  # rank 0 now has waiting bytes just inside Theorem 1's threshold: hold
    assert int(torch.argmax(head(torch.as_tensor(x[None]))[0])) == 1
    x[4] = 1.01  # just beyond: start now
    assert int(torch.argmax(head(torch.as_tensor(x[None]))[0])) == 0


def test_ppo_trains_the_rule_policy_into_a_model_that_loads_as_a_controller(two_spines, tmp_path):
    res = train(two_spines, out=tmp_path / "rule.zip", steps=128, train_seeds=[3], val_seeds=[7],
                bc_episodes=0, actions="paths-index", policy="rule", eval_every=64)
    ctl = load_controller(res.model_path)
    assert isinstance(ctl, PathsPolicyController) and isinstance(ctl.policy, PathsRulePolicy)
    assert ctl.policy.observation_space.shape == (obs_dim("paths-index"),)
    assert ctl.policy.action_space.n == NUM_ACTIONS
    # the saved best model decides as the in-memory one did when it was validated
    from flowherd.rl.train import evaluate

    again = evaluate(lambda: ctl, PathsEnv(two_spines, seeds=[7], actions="paths-index"), [7])
    assert again == pytest.approx(min(p.mean_jct_s for p in res.curve), rel=1e-9)


def test_the_rule_policy_takes_the_index_space_only(two_spines, tmp_path):
    with pytest.raises(ConfigError, match="paths-index"):
        train(two_spines, out=tmp_path / "r.zip", steps=64, bc_episodes=0, actions="paths-raw",
              policy="rule")
    with pytest.raises(ConfigError, match="policy"):
        train(two_spines, out=tmp_path / "r.zip", steps=64, bc_episodes=0, actions="paths-index",
              policy="cnn")


def test_a_rule_policy_warm_started_at_the_index_rule_decides_as_the_rule_at_step_0(two_spines, tmp_path):
    from flowherd.control.paths_rule import WARM_HOLD_SLOPE, WARM_RANK_WEIGHT

    res = train(two_spines, out=tmp_path / "warm.zip", steps=64, train_seeds=[3], val_seeds=[7],
                bc_episodes=0, actions="paths-index", policy="rule", rule_init="index", eval_every=64)
    start = load_controller(tmp_path / "warm_start.zip")
    head = start.policy.action_net
    assert head.w.detach().numpy() == pytest.approx([WARM_RANK_WEIGHT, 0, 0, 0, 0, 0])
    assert 0 < WARM_HOLD_SLOPE < WARM_RANK_WEIGHT / 5  # the hold never lifts a lower rank above rank 0
    env = PathsEnv(two_spines, seeds=[7], actions="paths-index")
    got = run_scenario(env.scenario_for(7), solo=False, controller=start)
    ref = run_scenario(env.scenario_for(7), solo=False, controller=PathsRuleController())
    assert float(got.cluster.censored_jct_s().mean()) == float(ref.cluster.censored_jct_s().mean())
    assert res.curve[0].mean_jct_s == pytest.approx(float(ref.cluster.censored_jct_s().mean()), rel=1e-9)
    # sampled, it explores: rank 0 is not certain
    obs, _info = env.reset(options={"scenario_seed": 7})
    probs = start.policy.get_distribution(torch.as_tensor(obs[None])).distribution.probs[0].detach().numpy()
    assert 0.5 < probs.max() < 0.99
    env.close()
    with pytest.raises(ConfigError, match="rule_init"):
        train(two_spines, out=tmp_path / "r.zip", steps=64, bc_episodes=0, actions="paths-index",
              policy="rule", rule_init="rank0")
