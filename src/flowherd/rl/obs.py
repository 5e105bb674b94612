"""The observation bound shared by the training environment and the trained-policy controller.

Its own module so that `flowherd.rl.policy` (loaded by the scenario runner) need not import
`flowherd.rl.env`, which imports the runner: no import circle.
"""

__all__ = ["OBS_BOUND"]

# Observations are clipped to [-OBS_BOUND, OBS_BOUND] (features are documented to stay in about
# [-1, 10]; the clip only keeps the Box honest).
OBS_BOUND = 10.0
