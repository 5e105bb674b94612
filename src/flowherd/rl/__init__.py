"""Reinforcement learning over the simulator: Gymnasium environments, PPO training, trained models
as controllers.

* `flowherd.rl.env`: `BufferingEnv`, registered as ``flowherd/Buffering-v0`` when this package is
  imported (and through Gymnasium's plugin entry point, `flowherd.rl.registration`): one episode is
  one run of a scenario; at every collective that crosses the network the agent picks one of
  `flowherd.control.herd.ACTIONS` (a priority class, buffer or not).
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

from flowherd.rl.registration import ENV_ID, ENV_ID_WITH_MODULE, PATHS_ENV_ID, register_envs

register_envs()

__all__ = ["ENV_ID", "ENV_ID_WITH_MODULE", "PATHS_ENV_ID"]
