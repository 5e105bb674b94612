"""A policy class whose form is the proven rule family of docs/rl-structure.md (``ppo-rule``).

The MLP arms of `benchmarks/rl_curves.py` learn a general map from the observation of the
``paths-index`` space (`flowherd.control.paths_agent`) to 12 action logits. `PathsRulePolicy` is a
stable-baselines3 actor-critic policy whose *actor* is the family of rules the theorems name, with
`NUM_RULE_PARAMS` learnable numbers:

* one shared linear score of each option's features, the same weights for every option slot
  (`RULE_FEATURES`: minus its rank of Theorem 2's index over the last rank, the rate a new flow gets
  over the link's capacity, the utilization, the waiting bytes over the collective's, Theorem
  1's ``W / theta``, and the rate each of the collective's pairs gets with its own pairs counted on
  each link, over capacity): ``s_j = w . x_j``. "Rank 0" (the index rule's option) is a positive
  weight on the first feature, not a choice learnt per output;
* a hold logit affine in Theorem 1's statistic of that option: ``h_j = u * (W / theta)_j + v``
  (the threshold ``-v / u`` and the temperature ``|u|``; Theorem 1's rule is ``u < 0``,
  ``v = -u``);
* the logits ``s_j`` (option ``j``, start now) and ``s_j + h_j`` (option ``j``, hold), so that
  an option's probability is ``softmax(s)_j``-like and its hold is ``sigmoid(h_j)`` given it.
  An option the observation marks invalid (its ``valid`` feature 0), and the hold of an option on
  whose links nothing waits (``W / theta`` = 0), get `MASKED_LOGIT`: the rule picks among
  the options that exist (the environment's own mask; no parameter).

The *critic* is the other arms' value network (an MLP over the whole observation): PPO needs a
baseline, and the comparison is about the policy's form. The actor's parameters start at random
(`init_scale` times a standard normal draw from torch's seeded generator, like SB3's output layer
of gain 0.01), not at the theorem's rule; `rule_parameters` sets them to the rule, for tests.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from flowherd.control.paths_agent import GLOBAL_FEATURES, NUM_ACTIONS, OPTION_FEATURES, OPTIONS

__all__ = ["MASKED_LOGIT", "NUM_RULE_PARAMS", "RULE_FEATURES", "WARM_HOLD_SLOPE", "WARM_RANK_WEIGHT",
           "PathsRulePolicy", "RuleHead", "rule_logits", "rule_parameters"]

RULE_FEATURES = ("minus_rank", "rate_over_capacity", "utilization", "wait_over_bytes", "wait_over_threshold",
                 "own_rate_over_capacity")
#: Learnable numbers of the actor: the shared score's weights, the hold's slope and offset.
NUM_RULE_PARAMS = len(RULE_FEATURES) + 2
#: The logit of an action the observation rules out (finite: torch's entropy of a categorical
#: multiplies probabilities by logits, and 0 * -inf is not a number).
MASKED_LOGIT = -1e9
#: The index rule as a warm start for PPO (``train(..., rule_init="index")``): a score falling by 10
#: over the ranks (2 per rank: rank 0 is sampled with probability about 0.86 among five options) and
#: a hold logit ``1.5 (1 - W / theta)``, below the rank step, so that no held lower rank outscores
#: rank 0: the greedy action is the rule's wherever ``W / theta != 1``.
WARM_RANK_WEIGHT = 10.0
WARM_HOLD_SLOPE = 1.5
_NF = len(OPTION_FEATURES)
_M = len(OPTIONS)
_VALID = OPTION_FEATURES.index("valid")
_RATIO = OPTION_FEATURES.index("wait_over_threshold")
_OBS_DIM = _M * _NF + len(GLOBAL_FEATURES) + 1  # the paths-index space


def rule_logits(obs: np.ndarray, w: np.ndarray, u: float, v: float) -> np.ndarray:
    """The 12 action logits of the rule family at one ``paths-index`` observation, in numpy: the
    formula `RuleHead` computes (module docstring)."""
    f = np.asarray(obs, np.float64)[:_M * _NF].reshape(_M, _NF)
    x = np.column_stack([-np.arange(_M) / (_M - 1), f[:, 1:]])
    s = x @ np.asarray(w, np.float64)
    h = u * f[:, _RATIO] + v
    out = np.empty(NUM_ACTIONS)
    out[0::2] = np.where(f[:, _VALID] > 0, s, MASKED_LOGIT)
    out[1::2] = np.where((f[:, _VALID] > 0) & (f[:, _RATIO] > 0), s + h, MASKED_LOGIT)
    return out


class RuleHead(nn.Module):
    """Observation of the ``paths-index`` space -> 12 logits of the rule family (module docstring).

    Args:
        init_scale: Standard deviation of the random initial parameters.
    """

    def __init__(self, init_scale: float = 0.01):
        super().__init__()
        self.w = nn.Parameter(torch.randn(len(RULE_FEATURES)) * init_scale)
        self.hold = nn.Parameter(torch.randn(2) * init_scale)  # (u, v)
        rank = -torch.arange(_M, dtype=torch.float32) / (_M - 1)
        self.register_buffer("minus_rank", rank, persistent=False)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        f = obs[:, :_M * _NF].reshape(-1, _M, _NF)
        x = torch.cat([self.minus_rank.expand(f.shape[0], _M).unsqueeze(-1), f[:, :, 1:]], dim=-1)
        s = x @ self.w
        ratio = f[:, :, _RATIO]
        h = self.hold[0] * ratio + self.hold[1]
        valid = f[:, :, _VALID] > 0
        masked = torch.full_like(s, MASKED_LOGIT)
        start = torch.where(valid, s, masked)
        held = torch.where(valid & (ratio > 0), s + h, masked)
        return torch.stack([start, held], dim=-1).reshape(-1, NUM_ACTIONS)


class PathsRulePolicy(ActorCriticPolicy):
    """stable-baselines3's actor-critic policy with `RuleHead` as its actor (module docstring):
    ``PPO(PathsRulePolicy, env, policy_kwargs={"net_arch": {"pi": [], "vf": [64, 64]}})``.

    The actor's hidden layers are none (``net_arch["pi"]`` is forced to ``[]``: the head reads
    the observation itself); the critic is ``net_arch["vf"]``. Observations must be those of the
    ``paths-index`` space.

    Args:
        init_scale: Of `RuleHead` (not saved: a loaded policy takes its parameters from the file).
        *args, **kwargs: As `ActorCriticPolicy`.
    """

    def __init__(self, *args: Any, init_scale: float = 0.01, **kwargs: Any):
        self._init_scale = float(init_scale)
        arch = kwargs.get("net_arch") or {"pi": [], "vf": [64, 64]}
        vf = arch.get("vf", [64, 64]) if isinstance(arch, dict) else list(arch)
        kwargs["net_arch"] = {"pi": [], "vf": list(vf)}
        super().__init__(*args, **kwargs)
        shape = self.observation_space.shape
        if shape != (_OBS_DIM,) or getattr(self.action_space, "n", None) != NUM_ACTIONS:
            raise ValueError(f"PathsRulePolicy takes the paths-index space ({_OBS_DIM} features, "
                             f"{NUM_ACTIONS} actions), got {shape} and {self.action_space}")

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = RuleHead(self._init_scale)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["net_arch"] = {"pi": [], "vf": list(self.net_arch["vf"])}
        return data


def rule_parameters(head: RuleHead, *, rank_weight: float = 100.0, hold_slope: float = 10.0) -> None:
    """Set ``head`` to the index rule of docs/rl-structure.md: rank 0 (a score falling by
    ``rank_weight`` over the ranks, nothing else weighed) and hold iff ``W / theta < 1`` (``u =
    -hold_slope``, ``v = hold_slope``); the greedy masked action is then the rule's
    (`flowherd.control.paths_agent.prepare` with ``warm="index"``) wherever ``W / theta != 1``."""
    with torch.no_grad():
        head.w.zero_()
        head.w[0] = rank_weight
        head.hold.copy_(torch.tensor([-hold_slope, hold_slope]))
