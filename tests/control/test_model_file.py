"""A model file is input like any other: nothing in it runs (flowherd.control.model_file).

Each hostile file holds a pickled call that would create a marker file if it were unpickled;
the command must refuse it in one line and the marker must never appear. A model of flowherd's
spaces, saved by stable-baselines3, loads and gives the actions stable-baselines3's own loader
gives.
"""

import base64
import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from flowherd.cli import main
from flowherd.control.agent import ACTION_SPACES, action_space_size
from flowherd.control.herd import NUM_FEATURES, OBS_BOUND
from flowherd.control.model import load_policy
from flowherd.control.model_file import MAX_MEMBER_BYTES, class_reference, read_model_file
from flowherd.errors import ConfigError

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml"


class _Touch:
    """Unpickled, it would run ``touch <path>``."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture(scope="module")
def model_zip(tmp_path_factory) -> Path:
    """A PPO model of flowherd's observation and action spaces, as `flowherd train` saves one."""
    import gymnasium as gym
    from gymnasium import spaces
    from stable_baselines3 import PPO

    class Env(gym.Env):
        observation_space = spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(NUM_FEATURES,), dtype=np.float32)
        action_space = spaces.Discrete(action_space_size("structured"))

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(NUM_FEATURES, np.float32), {}

        def step(self, action):
            return np.zeros(NUM_FEATURES, np.float32), 0.0, True, False, {}

    model = PPO("MlpPolicy", Env(), n_steps=64, batch_size=64, seed=5, device="cpu",
                policy_kwargs={"net_arch": {"pi": [32, 32], "vf": [32, 32]}})
    path = tmp_path_factory.mktemp("model") / "m.zip"
    model.save(path)
    return path


def _rewrite(src: Path, dst: Path, *, data=None, members=None) -> Path:
    with zipfile.ZipFile(src) as z:
        out = {n: z.read(n) for n in z.namelist()}
    if data is not None:
        d = json.loads(out["data"])
        data(d)
        out["data"] = json.dumps(d).encode()
    out.update(members or {})
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
        for name, blob in out.items():
            z.writestr(name, blob)
    return dst


def _one_line(capsys, argv, *parts):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for p in parts:
        assert p in err, (p, err)
    return err


@pytest.mark.parametrize("key", ["policy_class", "observation_space", "action_space", "lr_schedule"])
def test_a_pickled_call_in_the_data_never_runs(model_zip, tmp_path, capsys, key):
    marker = tmp_path / "marker"
    blob = base64.b64encode(pickle.dumps(_Touch(marker))).decode()
    bad = _rewrite(model_zip, tmp_path / "evil.zip", data=lambda d: d[key].update({":serialized:": blob}))
    _one_line(capsys, ["simulate", str(SCENARIO), "--controller", str(bad)],
              "evil.zip", "is not a stable-baselines3 actor-critic model", "system", "(controller.name)")
    assert not marker.exists()
    # and through the Python API, which the scenario check and the controller both use
    with pytest.raises(ConfigError, match="system"):
        load_policy(bad)
    assert not marker.exists()


def test_a_pickled_call_in_the_weights_never_runs(model_zip, tmp_path, capsys):
    import torch

    marker = tmp_path / "marker"
    buf = io.BytesIO()
    torch.save({"w": _Touch(marker)}, buf)
    bad = _rewrite(model_zip, tmp_path / "evil.zip", members={"policy.pth": buf.getvalue()})
    _one_line(capsys, ["simulate", str(SCENARIO), "--controller", str(bad)],
              "its policy.pth is not a torch archive of weights", "(controller.name)")
    assert not marker.exists()


def test_class_reference_reads_a_reference_and_refuses_a_call(tmp_path):
    from stable_baselines3.common.policies import ActorCriticPolicy

    assert class_reference(pickle.dumps(ActorCriticPolicy)) == ("stable_baselines3.common.policies",
                                                                "ActorCriticPolicy")
    assert class_reference(pickle.dumps(ActorCriticPolicy, protocol=0)) == (
        "stable_baselines3.common.policies", "ActorCriticPolicy")
    with pytest.raises(ValueError, match=r"posix\.system"):
        class_reference(pickle.dumps(_Touch(tmp_path / "m")))
    with pytest.raises(ValueError, match="malformed"):
        class_reference(b"\x80\x05\xff")


def test_a_member_declaring_more_than_the_cap_is_refused_before_it_is_read(model_zip, tmp_path):
    bomb = _rewrite(model_zip, tmp_path / "bomb.zip", members={"policy.pth": bytes(MAX_MEMBER_BYTES + 1)})
    assert bomb.stat().st_size < MAX_MEMBER_BYTES // 100  # zeros compress: a zip bomb in small
    with pytest.raises(ConfigError, match="declares 67,108,865 bytes; expected at most 67,108,864"):
        read_model_file(bomb)


def test_a_saved_model_loads_and_gives_the_actions_of_stable_baselines3s_loader(model_zip):
    import torch
    from stable_baselines3 import PPO

    ours = load_policy(model_zip)
    theirs = PPO.load(model_zip, device="cpu").policy  # trusted here: the test wrote the file
    assert ours.flowherd_actions == "structured" and ours.flowherd_actions in ACTION_SPACES
    obs = np.random.default_rng(0).uniform(-OBS_BOUND, OBS_BOUND, size=(300, NUM_FEATURES)).astype(np.float32)
    with torch.no_grad():
        a = ours.get_distribution(torch.as_tensor(obs)).distribution.logits.numpy()
        b = theirs.get_distribution(torch.as_tensor(obs)).distribution.logits.numpy()
    np.testing.assert_array_equal(a, b)
    assert (a.argmax(axis=1) == b.argmax(axis=1)).all() and len(set(a.argmax(axis=1))) > 1


def test_an_a2c_model_with_pickled_optimizer_settings_loads(tmp_path):
    import gymnasium as gym
    from gymnasium import spaces
    from stable_baselines3 import A2C

    class Env(gym.Env):
        observation_space = spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(NUM_FEATURES,), dtype=np.float32)
        action_space = spaces.Discrete(action_space_size("raw"))

        def reset(self, *, seed=None, options=None):
            return np.zeros(NUM_FEATURES, np.float32), {}

        def step(self, action):
            return np.zeros(NUM_FEATURES, np.float32), 0.0, True, False, {}

    path = tmp_path / "a2c.zip"
    A2C("MlpPolicy", Env(), seed=1, device="cpu", policy_kwargs={"net_arch": [16]}).save(path)
    assert ":serialized:" in json.loads(zipfile.ZipFile(path).read("data"))["policy_kwargs"]
    assert load_policy(path).flowherd_actions == "raw"
    # the same pickle with a call in it is refused
    blob = base64.b64encode(pickle.dumps({"net_arch": [16], "x": _Touch(tmp_path / "m")})).decode()
    bad = _rewrite(path, tmp_path / "bad.zip",
                   data=lambda d: d["policy_kwargs"].update({":serialized:": blob}))
    with pytest.raises(ConfigError, match=r"pickled policy_kwargs uses posix\.system"):
        read_model_file(bad)
    assert not (tmp_path / "m").exists()


def test_the_rule_policy_class_is_read_for_the_paths_index_space_only(model_zip, tmp_path):
    # a file naming flowherd's rule-family policy (flowherd.control.paths_rule) over another space than
    # paths-index is refused in one line, before any weight is read into it
    from flowherd.control.paths_rule import PathsRulePolicy

    ref = base64.b64encode(pickle.dumps(PathsRulePolicy)).decode()
    assert class_reference(base64.b64decode(ref)) == ("flowherd.control.paths_rule", "PathsRulePolicy")
    bad = _rewrite(model_zip, tmp_path / "rule.zip",
                   data=lambda d: d["policy_class"].update({":serialized:": ref}))
    assert read_model_file(bad).policy_class == ("flowherd.control.paths_rule", "PathsRulePolicy")
    with pytest.raises(ConfigError, match="paths-index space, over the structured space"):
        load_policy(bad)
