"""Behaviour cloning, training, and a trained model run as a controller."""

import csv
import json
import zipfile

import numpy as np
import pytest
import yaml

from flowherd.cli import main
from flowherd.control.herd import ACTIONS, HerdController
from flowherd.control.model import (
    ModelController,
    PolicyController,
    greedy_action,
    load_controller,
    numpy_actor,
    numpy_logits,
)
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.rl.env import BufferingEnv
from flowherd.rl.train import behaviour_clone, clone_stats, collect_structured, evaluate, train


def _ppo(env, seed=0):
    from stable_baselines3 import PPO

    return PPO("MlpPolicy", env, n_steps=64, batch_size=64, seed=seed, device="cpu",
               policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}})


def _accuracy(policy, data):
    return float(np.mean([greedy_action(policy, o, m) == a
                          for o, m, a in zip(data["obs"], data["mask"], data["action"], strict=True)]))


def test_behaviour_cloning_reproduces_the_structured_policy(tiny):
    import torch

    torch.set_num_threads(1)
    # under the priority grant the structured actions vary (classes by remaining time); under
    # buffer they are one action here (no classes granted, no delay pays in this scenario)
    tiny = {**tiny, "controller": {"name": "none", "levers": "priority"}}
    env = BufferingEnv(tiny, seeds=[3, 4, 5])
    data = collect_structured(env, [3, 4, 5], gamma=0.999)
    assert len(data["action"]) == int(data["episode_len"].sum()) > 150
    # the structured actions are not all one: copying them takes more than a constant
    majority = np.bincount(data["action"]).max() / len(data["action"])
    model = _ppo(BufferingEnv(tiny, seeds=[3]))
    before = _accuracy(model.policy, data)
    acc = behaviour_clone(model.policy, data, epochs=10, seed=0)
    assert acc == pytest.approx(_accuracy(model.policy, data))
    assert acc > 0.9 and acc > majority + 0.05 and acc > before + 0.2, (before, majority, acc)
    # the clone, run as a controller on a seed it was not cloned on, is about as good as the original
    held_out = BufferingEnv(tiny, seeds=[9])
    cloned = evaluate(lambda: PolicyController(model.policy), held_out, [9])
    structured = evaluate(HerdController, held_out, [9])
    assert cloned == pytest.approx(structured, rel=0.1)


def test_greedy_action_never_picks_a_masked_action(tiny):
    model = _ppo(BufferingEnv(tiny, seeds=[3]))
    obs = np.zeros(model.observation_space.shape, np.float32)
    free = greedy_action(model.policy, obs, np.ones(len(ACTIONS), bool))
    mask = np.ones(len(ACTIONS), bool)
    mask[free] = False
    assert greedy_action(model.policy, obs, mask) != free
    only = np.zeros(len(ACTIONS), bool)
    only[3] = True
    assert greedy_action(model.policy, obs, only) == 3


def test_numpy_actor_gives_the_policy_logits(tiny):
    import torch

    model = _ppo(BufferingEnv(tiny, seeds=[3]), seed=1)
    layers = numpy_actor(model.policy)
    assert layers is not None and [k[0] for k in layers] == ["linear", "tanh", "linear", "tanh", "linear"]
    obs = np.random.default_rng(0).uniform(-1, 4, size=(50, model.observation_space.shape[0]))
    with torch.no_grad():
        want = model.policy.get_distribution(torch.as_tensor(obs, dtype=torch.float32)).distribution.logits
    got = np.array([numpy_logits(layers, o) for o in obs])
    # torch's Categorical keeps normalized logits (log-probabilities): compare those
    got = got - np.log(np.exp(got).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    assert (got.argmax(axis=1) == want.numpy().argmax(axis=1)).all()


def _same_actions_as_stable_baselines3(path):
    """flowherd's loader (nothing unpickled) gives the logits of stable-baselines3's own."""
    import torch
    from stable_baselines3 import PPO

    from flowherd.control.herd import NUM_FEATURES, OBS_BOUND
    from flowherd.control.model import load_policy

    ours, theirs = load_policy(path), PPO.load(path, device="cpu").policy
    obs = torch.as_tensor(np.random.default_rng(1).uniform(-OBS_BOUND, OBS_BOUND, (200, NUM_FEATURES)),
                          dtype=torch.float32)
    with torch.no_grad():
        a = ours.get_distribution(obs).distribution.logits.numpy()
        b = theirs.get_distribution(obs).distribution.logits.numpy()
    np.testing.assert_array_equal(a, b)


def test_tiny_training_writes_a_model_that_simulate_runs(tiny, tiny_yaml, tmp_path, capsys):
    out = tmp_path / "m.zip"
    rc = main(["train", str(tiny_yaml), "--steps", "128", "--out", str(out), "--train-seeds", "2",
               "--val-seeds", "1", "--eval-every", "64", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert out.is_file() and zipfile.is_zipfile(out) and (tmp_path / "m_last.zip").is_file()
    assert res["bc_accuracy"] > 0.9 and res["steps"] >= 128
    _same_actions_as_stable_baselines3(out)
    with open(tmp_path / "m_curve.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["steps"]) for r in rows] == [p["steps"] for p in res["curve"]] == [0, 64, 128]
    assert all(float(r["mean_jct_s"]) > 0 for r in rows)
    # the saved model is the best on validation
    assert min(p["mean_jct_s"] for p in res["curve"]) == pytest.approx(
        next(p["mean_jct_s"] for p in res["curve"] if p["steps"] == res["best_steps"]))

    val_seed = res["val_seeds"][0]
    assert val_seed == tiny["seed"] + 2 and res["train_seeds"] == [tiny["seed"], tiny["seed"] + 1]
    argv = ["simulate", str(tiny_yaml), "--controller", str(out), "--json", "--seed", str(val_seed)]
    assert main(argv) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["controller"] == "rl:m" and run["num_decisions"] > 0 and not run["controller_issues"]
    # the run on the validation seed is the best curve point (deterministic policy, same seed)
    assert run["mean_jct_s"] == pytest.approx(min(p["mean_jct_s"] for p in res["curve"]), rel=1e-9)

    # controller: {name: path} in a scenario does the same
    sc = scenario_from_mapping({**tiny, "seed": val_seed, "controller": {"name": str(out)}})
    again = run_scenario(sc, solo=False)
    assert again.cluster.controller == "rl:m"
    assert again.summary["mean_jct_s"] == pytest.approx(run["mean_jct_s"], rel=1e-12)


def test_ppo_from_scratch_on_raw_delays_loads_back_with_its_action_space(tiny, tmp_path):
    from flowherd.control.agent import RAW_DELAY_FRACTIONS

    res = train(tiny, out=tmp_path / "raw.zip", steps=64, train_seeds=[3], val_seeds=[7], bc_episodes=0,
                actions="raw")
    assert res.bc_samples == 0 and res.bc_accuracy == 0.0 and res.steps >= 64
    ctl = load_controller(res.model_path)
    assert ctl.actions == "raw" and ctl.policy.action_space.n == len(RAW_DELAY_FRACTIONS)
    # the saved (best) model decides as the in-memory one did when it was validated
    again = evaluate(lambda: ctl, BufferingEnv(tiny, seeds=[7], actions="raw"), [7])
    assert again == pytest.approx(min(p.mean_jct_s for p in res.curve), rel=1e-9)


def test_a_model_saved_after_finished_episodes_loads_as_a_controller(tiny, tmp_path):
    # the tiny episodes are 50-90 agent points: 256 steps finish some, and SB3's episode statistics
    # (deques a model file may not hold) are left out of every saved model
    res = train(tiny, out=tmp_path / "e.zip", steps=256, train_seeds=[3], val_seeds=[7], bc_epochs=1,
                eval_every=128)
    for path in (res.model_path, res.last_model_path, tmp_path / "e_start.zip"):
        assert isinstance(load_controller(path), ModelController)
        with zipfile.ZipFile(path) as zf:
            assert "ep_info_buffer" not in json.loads(zf.read("data"))


def test_train_function_with_a2c(tiny, tmp_path):
    res = train(tiny, out=tmp_path / "a.zip", algo="a2c", steps=64, train_seeds=[3], val_seeds=[7],
                bc_epochs=5)
    assert res.steps >= 64 and res.model_path.is_file() and len(res.curve) >= 2
    assert isinstance(load_controller(res.model_path), ModelController)


def test_time_limit_stops_training_and_keeps_the_last_point(tiny, tmp_path):
    res = train(tiny, out=tmp_path / "t.zip", steps=1_000_000, train_seeds=[3], val_seeds=[7],
                bc_epochs=1, time_limit_s=0.5)  # over before RL starts: stops at its first step
    assert res.steps < 1000 and res.curve[-1].steps == res.steps and res.last_model_path.is_file()


def _one_line_error(capsys, argv, expected):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert expected in err, err


def test_bad_algo_is_one_clear_error(capsys, tiny_yaml, tmp_path):
    _one_line_error(capsys, ["train", str(tiny_yaml), "--algo", "ppp", "--out", str(tmp_path / "m.zip")],
                    "unknown --algo 'ppp'; did you mean 'ppo'?")
    with pytest.raises(UnknownNameError, match="--algo"):
        train({}, out=tmp_path / "m.zip", algo="dqn")
    _one_line_error(capsys, ["train", str(tiny_yaml), "--out", str(tmp_path / "m.txt")], "(--out)")


def test_missing_or_bad_model_file_is_one_clear_error(capsys, tiny, tiny_yaml, tmp_path):
    missing = str(tmp_path / "nope.zip")
    _one_line_error(capsys, ["simulate", str(tiny_yaml), "--controller", missing],
                    f"no trained model file {missing!r} (controller.name)")
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**tiny, "controller": {"name": missing}}))
    _one_line_error(capsys, ["simulate", str(path)], "(controller.name)")
    junk = tmp_path / "junk.zip"
    with zipfile.ZipFile(junk, "w") as z:
        z.writestr("hello.txt", "not a model")
    _one_line_error(capsys, ["simulate", str(tiny_yaml), "--controller", str(junk)],
                    "is not a stable-baselines3 actor-critic model")
    with pytest.raises(ConfigError, match=r"\(controller.params\)"):
        load_controller(junk, bogus=1)


def test_time_limit_is_honoured_within_ten_percent(tiny, tmp_path):
    from flowherd.cli.train_cmd import ALGO_NAMES
    from flowherd.rl.train import ALGOS

    assert tuple(ALGOS) == ALGO_NAMES
    lines = []
    limit_s = 20.0
    res = train(tiny, out=tmp_path / "t.zip", steps=10_000_000, train_seeds=[3, 4], val_seeds=[7],
                bc_epochs=1, time_limit_s=limit_s, log=lines.append)
    # the whole training, cloning and the last validation included, ends at the limit
    # (never "--time-limit 2min" running 18 min); what comes before RL (cloning, references, the first
    # validation: a few seconds, more on a busy machine) must leave RL some of the limit
    before_rl_s = res.curve[0].wall_s
    if before_rl_s > 0.6 * limit_s:  # about 3 s on a quiet 2-core machine
        pytest.skip(f"the machine is too busy for this check: {before_rl_s:.1f} s before RL")
    assert 0.9 * limit_s <= res.wall_s <= 1.1 * limit_s, res.wall_s
    assert res.steps > 0 and res.curve[-1].steps == res.steps and res.model_path.is_file()
    assert lines[0].startswith("structured policy: 2 episodes")
    assert any(ln.startswith("time limit: RL stops at ") for ln in lines)


def test_train_prints_its_first_line_within_seconds_off_a_terminal(tiny_yaml, tmp_path):
    import subprocess
    import sys
    import time

    code = "import sys; from flowherd.cli import main; sys.exit(main(sys.argv[1:]))"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, "train", str(tiny_yaml), "--steps", "100000",
                             "--time-limit", "6s", "--train-seeds", "1", "--val-seeds", "1",
                             "--out", str(tmp_path / "m.zip")], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    first_s = time.perf_counter() - t0
    rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0, rest
    assert first.startswith("train: ppo on ") and "time limit 6s" in first
    assert first_s < 5.0, first_s  # before torch loads
    # off a terminal the phases are lines, not an invisible bar
    assert "train: structured episode 1/1" in rest and "train: time limit: RL stops at" in rest


def test_balanced_cloning_keeps_a_rare_action_the_unweighted_one_drops(tiny):
    # as the flowherd policy's buffering on rl_small.yaml (2-6 of ~1,400 points an episode): 4 samples
    # of 1,000 take action 8 (buffer), told apart only by feature 4 (slack_over_period) being high; an
    # unweighted clone is 99.6% accurate by never buffering, a balanced one copies the rare action
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    obs = rng.uniform(0, 0.1, (1000, len(BufferingEnv(tiny).observation_space.low))).astype(np.float32)
    action = np.full(1000, 7)
    rare = np.arange(0, 1000, 250)
    obs[rare, 4] = 1.0
    action[rare] = 8
    data = {"obs": obs, "action": action, "mask": np.ones((1000, len(ACTIONS)), bool),
            "ret": np.zeros(1000, np.float32)}
    got = {}
    for balance in (False, True):
        model = _ppo(BufferingEnv(tiny, seeds=[3]))
        behaviour_clone(model.policy, data, epochs=3, seed=0, min_updates=150, balance=balance)
        got[balance] = [greedy_action(model.policy, obs[i], data["mask"][i]) for i in rare]
    assert got[False] == [7] * len(rare)
    assert got[True] == [8] * len(rare)


def test_a_soft_clone_keeps_the_teachers_greedy_action_and_its_entropy(tiny):
    # the clone of no control in the paths-index space (the default routes sit at varying ranks): with
    # label smoothing 0.5 its greedy action is still the teacher's on the cloning states, while its
    # distribution keeps more than half the entropy of the uniform choice over the allowed actions;
    # smoothing 0.1 keeps much less (the clone PPO starts bc+ppo from)
    import torch

    from flowherd.rl.paths_env import PathsEnv

    torch.set_num_threads(1)
    two = {**tiny, "fabric": {**tiny["fabric"], "spines": 2}, "placement": {"method": "spread"}}
    env = PathsEnv(two, seeds=[3, 4], actions="paths-index", warm="none")
    data = collect_structured(env, [3, 4], gamma=0.999)
    assert len(np.unique(data["action"])) > 1  # the teacher's action is not one constant output
    got = {}
    for smoothing in (0.1, 0.5):
        model = _ppo(PathsEnv(two, seeds=[3], actions="paths-index"))
        acc = behaviour_clone(model.policy, data, epochs=10, seed=0, smoothing=smoothing)
        got[smoothing] = (acc, clone_stats(model.policy, data))
    env.close()
    acc, soft = got[0.5]
    assert acc >= 0.95, acc
    assert soft.entropy_nats > 0.5 * soft.max_entropy_nats, soft
    assert soft.teacher_prob < 0.75 and soft.masked_prob < 0.05, soft
    sharp = got[0.1][1]
    assert sharp.entropy_nats < 0.7 * soft.entropy_nats, sharp
    assert sharp.teacher_prob > soft.teacher_prob + 0.1, sharp
