"""Reinforcement learning over the simulator: Gymnasium environments, PPO training, trained models
as controllers.

* `flowherd.rl.env`: `BufferingEnv`, registered as ``flowherd/Buffering-v0`` when this package is
  imported: one episode is one run of a scenario; at every collective that crosses the network
  the agent picks one of `flowherd.control.herd.ACTIONS` (a priority class, buffer or not).
* `flowherd.rl.paths_env`: `PathsEnv`, registered as ``flowherd/PathsDelays-v0``: the agent picks a
  path option and whether to hold each collective (`flowherd.control.paths_agent`), in a fixed
  order (``paths-raw``) or ranked by the index of docs/rl-structure.md (``paths-index``).
* `flowherd.rl.train`: `train`, behaviour cloning of a warm policy, then PPO
  (``flowherd train SCENARIO --algo ppo --steps N --out model.zip``).
* `flowherd.rl.curves`: the learning-curve table of the comparison in `benchmarks/rl_curves.py`
  (steps to within 5% of the best policy, confidence intervals over seeds); numpy and scipy only.

A saved model runs as a controller through `flowherd.control.make_controller` (its loader,
`flowherd.control.model`, sits in the control layer, so that running a scenario never imports this
package). Importing this package imports gymnasium (for the registration), not torch; `train`
imports torch and stable-baselines3 when used.
"""

from __future__ import annotations

import gymnasium

ENV_ID = "flowherd/Buffering-v0"
PATHS_ENV_ID = "flowherd/PathsDelays-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="flowherd.rl.env:BufferingEnv")
if PATHS_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=PATHS_ENV_ID, entry_point="flowherd.rl.paths_env:PathsEnv")

__all__ = ["ENV_ID", "PATHS_ENV_ID"]
