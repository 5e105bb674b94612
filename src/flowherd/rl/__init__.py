"""Reinforcement learning over the simulator: a Gymnasium environment, PPO training, trained models
as controllers.

* `flowherd.rl.env`: `BufferingEnv`, registered as ``flowherd/Buffering-v0`` when this package is
  imported: one episode is one run of a scenario; at every collective that crosses the network
  the agent picks one of `flowherd.control.herd.ACTIONS` (a priority class, buffer or not).
* `flowherd.rl.policy`: `ModelController` / `load_controller`, a model saved by training as a
  `Controller` (``flowherd simulate SCENARIO --controller model.zip``).
* `flowherd.rl.train`: `train`, behaviour cloning of the structured `flowherd` policy, then PPO
  (``flowherd train SCENARIO --algo ppo --steps N --out model.zip``).

Importing this package imports gymnasium (for the registration), not torch; `policy` and `train`
import torch and stable-baselines3 when used.
"""

from __future__ import annotations

import gymnasium

ENV_ID = "flowherd/Buffering-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="flowherd.rl.env:BufferingEnv")

__all__ = ["ENV_ID"]
