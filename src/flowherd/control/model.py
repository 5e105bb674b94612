"""A trained policy as an online controller: ``flowherd simulate SCENARIO --controller model.zip``.

`ModelController` loads a model saved by `flowherd.rl.train` (a stable-baselines3 ``.zip`` of an
actor-critic policy: PPO or A2C) and decides as the environment's agent did: at an agent point
(`flowherd.control.herd.asks_agent`) it takes the policy's most likely action among those the
mask allows (``predict(deterministic=True)`` restricted to the mask: the masked actions are
removed before the arg-max, rather than projected afterwards) and turns it into a `Decision`
with `decision_for`; every other point gets the structured `flowherd` policy's decision, as in
`flowherd.rl.env.BufferingEnv`. torch and stable-baselines3 are imported here only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control import paths_agent
from flowherd.control.agent import ACTION_SPACES, action_space_size, decide, prepare
from flowherd.control.herd import NUM_FEATURES, OBS_BOUND, HerdController, HerdParams, asks_agent, features
from flowherd.errors import ConfigError

__all__ = ["ModelController", "PathsPolicyController", "PolicyController", "greedy_action", "load_controller",
           "load_policy", "numpy_actor", "numpy_logits"]


def _masked_argmax(logits: np.ndarray, mask: np.ndarray) -> int:
    mask = np.asarray(mask, dtype=bool)
    if mask.any():
        logits = np.where(mask, logits, -np.inf)
    return int(np.argmax(logits))


def greedy_action(policy: Any, obs: np.ndarray, mask: np.ndarray) -> int:
    """The most likely action of an SB3 actor-critic ``policy`` at ``obs`` among those ``mask``
    allows (all, if it allows none)."""
    import torch

    with torch.no_grad():
        x = torch.as_tensor(np.asarray(obs, dtype=np.float32)[None])
        logits = policy.get_distribution(x).distribution.logits[0].numpy()
    return _masked_argmax(logits, mask)


def numpy_actor(policy: Any) -> list[tuple] | None:
    """The layers from observation to action logits of an SB3 actor-critic ``policy`` as numpy
    arrays (``("linear", W, b)``, ``("tanh",)``, ``("relu",)``), or None if its actor is not such
    a plain MLP over the flat observation.

    A decision is one small matrix-vector product per layer; torch's per-call overhead would
    cost about twice the rest of a decision (0.5 ms against 0.25 ms measured).
    """
    from stable_baselines3.common.torch_layers import FlattenExtractor
    from torch import nn

    extractor = getattr(policy, "pi_features_extractor", getattr(policy, "features_extractor", None))
    net = getattr(getattr(policy, "mlp_extractor", None), "policy_net", None)
    if not isinstance(extractor, FlattenExtractor) or not isinstance(net, nn.Sequential):
        return None
    layers: list[tuple] = []
    for m in [*net, policy.action_net]:
        if isinstance(m, nn.Linear):
            layers.append(("linear", m.weight.detach().cpu().numpy().astype(np.float32).copy(),
                           m.bias.detach().cpu().numpy().astype(np.float32).copy()))
        elif isinstance(m, nn.Tanh | nn.ReLU):
            layers.append((type(m).__name__.lower(),))
        else:
            return None
    return layers


def numpy_logits(layers: list[tuple], obs: np.ndarray) -> np.ndarray:
    """Action logits of `numpy_actor` layers at ``obs``."""
    x = np.asarray(obs, dtype=np.float32).ravel()
    for layer in layers:
        if layer[0] == "linear":
            x = layer[1] @ x + layer[2]
        elif layer[0] == "tanh":
            x = np.tanh(x)
        else:
            x = np.maximum(x, 0.0)
    return x


class PolicyController:
    """An in-memory SB3 actor-critic policy as a `Controller` (module docstring).

    A plain MLP actor is copied into numpy at construction (`numpy_actor`): the controller acts
    with the weights of that moment (make a new one after more training).

    Args:
        policy: The policy (``model.policy``), observations ``float32[NUM_FEATURES]``, actions
            those of ``actions``.
        name: The controller's name (in the run records).
        params: Parameters of the structured part (non-agent points, masks, buffering delay).
        actions: Its action space (`flowherd.control.agent.ACTION_SPACES`).
    """

    def __init__(self, policy: Any, *, name: str = "rl", params: HerdParams | None = None,
                 actions: str = "structured"):
        self.policy = policy
        self.name = name
        self.actions = actions
        action_space_size(actions)  # checks the name
        self.params = params if params is not None else HerdParams()
        self.structured = HerdController(params=self.params)
        self._layers = numpy_actor(policy)

    def reset(self, seed: int) -> None:
        """The policy is deterministic; the structured part is reset."""
        self.structured.reset(seed)

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        if not asks_agent(point):
            return self.structured.decide(point, view)
        obs = np.clip(features(point, view), -OBS_BOUND, OBS_BOUND)
        mask, _default, ctx = prepare(self.actions, self.structured, point, view)
        if self._layers is None:
            a = greedy_action(self.policy, obs, mask)
        else:
            a = _masked_argmax(numpy_logits(self._layers, obs), mask)
        return decide(self.actions, a, ctx, self.structured, point, view)


class PathsPolicyController:
    """An in-memory SB3 actor-critic policy over a paths space (`flowherd.control.paths_agent`) as a
    `Controller`: at an agent point the most likely allowed action, else no decision.

    Args:
        policy: The policy (observations of ``obs_dim(actions)``, `paths_agent.NUM_ACTIONS` actions).
        name: The controller's name.
        actions: ``paths-raw`` or ``paths-index``.
    """

    def __init__(self, policy: Any, *, name: str = "rl-paths", actions: str = "paths-index"):
        paths_agent.obs_dim(actions)  # checks the name
        self.policy, self.name, self.actions = policy, name, actions
        self._layers = numpy_actor(policy)

    def reset(self, seed: int) -> None:
        """The policy is deterministic."""

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        if not asks_agent(point):
            return None
        obs, mask, _default, ctx = paths_agent.prepare(self.actions, point, view)
        if self._layers is None:
            a = greedy_action(self.policy, obs, mask)
        else:
            a = _masked_argmax(numpy_logits(self._layers, obs), mask)
        return paths_agent.decide(self.actions, a, ctx)


def _spaces_by_shape() -> dict[tuple[tuple[int, ...], int], str]:
    """(observation shape, number of actions) -> action space, for every space a model may have."""
    out = {((NUM_FEATURES,), action_space_size(a)): a for a in ACTION_SPACES}
    for a in paths_agent.PATH_SPACES:
        out[((paths_agent.obs_dim(a),), paths_agent.NUM_ACTIONS)] = a
    return out


def load_policy(path: str | Path) -> Any:
    """The actor-critic policy of a stable-baselines3 model file, on the CPU, in eval mode (its
    action space, `flowherd.control.agent.ACTION_SPACES`, told by its number of actions:
    ``policy.flowherd_actions``).

    Nothing in the file is run: it is checked first (`flowherd.control.model_file`: no pickle is
    loaded, the policy class, spaces and keyword arguments are read as declared), the policy is
    built from flowherd's own spaces, and the weights are read by torch's restricted unpickler.

    Raises:
        ConfigError: no such file, not a .zip, not a stable-baselines3 actor-critic model, one
            holding pickled code, or one made for other observations / actions than
            `flowherd.control.herd`'s.
    """
    from flowherd.control.model_file import POLICY_CLASSES, load_weights, read_model_file

    p = Path(path)
    if p.suffix != ".zip" or not p.is_file():
        raise ConfigError(f"no trained model file {str(path)!r} (controller.name); expected an existing .zip "
                          "written by flowherd train")
    schema = read_model_file(p)  # before anything is loaded
    known = _spaces_by_shape()
    key = ((schema.num_features,), schema.num_actions)
    if key not in known:
        have = ", ".join(f"{s} and {k} actions ({a})" for (s, k), a in known.items())
        raise ConfigError(f"model {str(path)!r} takes observations ({schema.num_features},) and "
                          f"{schema.num_actions} actions; this flowherd has {have} (retrain it with "
                          "flowherd train) (controller.name)")
    state = load_weights(schema, p)
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticPolicy

    cls = ActorCriticPolicy
    if schema.policy_class != POLICY_CLASSES[0]:
        if known[key] != "paths-index":
            raise ConfigError(f"model {str(path)!r} declares {'.'.join(schema.policy_class)}, a policy of "
                              f"the paths-index space, over the {known[key]} space (controller.name)")
        from flowherd.control.paths_rule import PathsRulePolicy

        cls = PathsRulePolicy
    try:
        # both observation spaces are clipped to the same bound (herd.OBS_BOUND, paths_agent's)
        policy = cls(
            observation_space=spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(schema.num_features,),
                                         dtype=np.float32),
            action_space=spaces.Discrete(schema.num_actions), lr_schedule=lambda _: 0.0,
            **schema.policy_kwargs)
        policy.load_state_dict(state)
    except Exception as err:  # declared layers that the weights do not fit: many ways to fail
        first = " ".join(str(err).split())[:200]
        raise ConfigError(f"{str(path)!r} is not a stable-baselines3 actor-critic model written by "
                          "flowherd train: its weights do not fit its declared policy "
                          f"({type(err).__name__}: {first}) (controller.name)") from None
    policy.set_training_mode(False)
    policy.flowherd_actions = known[key]
    return policy


class ModelController(PolicyController):
    """A model file written by `flowherd train` as a `Controller`, named ``rl:<file stem>``.

    Args:
        path: The ``.zip`` file.
        params: Parameters of the structured part (default `HerdParams()`, as in training).

    Raises:
        ConfigError: as `load_policy`.
    """

    def __init__(self, path: str | Path, *, params: HerdParams | None = None):
        policy = load_policy(path)
        super().__init__(policy, name=f"rl:{Path(path).stem}", params=params, actions=policy.flowherd_actions)
        self.path = Path(path)


def load_controller(path: str | Path, **params: Any) -> ModelController | PathsPolicyController:
    """`ModelController` of ``path`` (a `PathsPolicyController` for a model of a paths space);
    ``params`` are `HerdParams` fields (the scenario's ``controller.params``).

    Raises:
        ConfigError: a bad file (`load_policy`) or parameters `HerdParams` does not take.
    """
    herd = None
    if params:
        try:
            herd = HerdParams(**params)
        except TypeError as err:
            raise ConfigError(f"a trained model takes the flowherd policy's parameters only, got "
                              f"{sorted(params)}: {err} (controller.params)") from None
    policy = load_policy(path)
    if policy.flowherd_actions in paths_agent.PATH_SPACES:
        if params:
            raise ConfigError(f"a paths model takes no parameters, got {sorted(params)} (controller.params)")
        return PathsPolicyController(policy, name=f"rl:{Path(path).stem}", actions=policy.flowherd_actions)
    return ModelController(path, params=herd)
