"""`PathsEnv` (``flowherd/PathsDelays-v0``): the agent chooses paths and holds of collectives.

The same episode, thread hand-over and reward as `flowherd.rl.env.BufferingEnv` (one scenario run
per episode; reward minus the time integral of the jobs in the system, so that the undiscounted
return is ``-mean JCT / horizon``), with another agent: at every collective that crosses the
network and where the allowed actions make at least two different decisions, it picks a path
option and whether to hold the collective (`flowherd.control.paths_agent`: ``paths-raw`` or
``paths-index``, the structure of docs/rl-structure.md). Every other decision point gets no
decision (no control), so a policy that always takes the default action *is* no control.

With ``reward="progress"`` the reward is shaped by a potential (Ng, Harada and Russell, ICML 1999,
"Policy invariance under reward transformations", Theorem 1): the work the jobs have done, in
seconds of their solo iterations, so that a step's reward is minus the time the jobs lost to
contention in it instead of minus the time they spent. The episode return is the same (the
potential is zero at the end), the credit of a path or a hold lands within the iteration it slows
or speeds instead of at the jobs' finishes tens of seconds later.
"""

from __future__ import annotations

import queue
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.herd import asks_agent
from flowherd.control.paths_agent import (
    NUM_ACTIONS,
    OBS_BOUND,
    PATH_SPACES,
    WARM,
    decide,
    distinct,
    obs_dim,
    prepare,
)
from flowherd.errors import ConfigError
from flowherd.experiments.scenario import Scenario
from flowherd.rl.env import _ABORT, BufferingEnv, _Abort

__all__ = ["REWARDS", "PathsEnv", "work_done_s"]

REWARDS = ("jct", "progress")


def work_done_s(work: dict[str, float], solo: dict[str, tuple[float, int | None]], view: NetworkView,
                departing: str | None = None) -> float:
    """Update ``work`` (job -> seconds of solo iterations done) from ``view`` and return its sum.

    A job's iteration counts its solo period (else its first learnt period, kept in ``solo`` with
    its size); a ``departing`` job counts its whole size. Jobs that left keep their last value, so
    the sum never drops when a job leaves.
    """
    for name, j in view.jobs.items():
        if name not in solo:
            per = j.solo_period_s if j.solo_period_s is not None else j.period_s
            if per is None:
                continue
            solo[name] = (float(per), j.iterations_total)
        work[name] = j.iterations_done * solo[name][0]
    if departing is not None and departing in solo and solo[departing][1] is not None:
        work[departing] = solo[departing][1] * solo[departing][0]
    return float(sum(work.values()))


class _PathsBridge:
    """The controller the simulator calls in the worker thread (`flowherd.rl.env._Bridge`'s
    protocol, with the paths agent)."""

    def __init__(self, to_env: queue.Queue, to_sim: queue.Queue, space: str, warm: str, choice_only: bool):
        self.name = "rl-paths-agent"
        self.space, self.warm, self.choice_only = space, warm, choice_only
        self.to_env, self.to_sim = to_env, to_sim
        self.finish_s: dict[str, float] = {}
        self.work: dict[str, float] = {}
        self.solo: dict[str, tuple[float, int | None]] = {}
        self.work_s = 0.0

    def reset(self, seed: int) -> None:
        self.finish_s.clear()
        self.work.clear()
        self.solo.clear()
        self.work_s = 0.0

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        departing = None
        if point.kind == "departure" and point.job is not None:
            self.finish_s[point.job] = float(point.now_s)
            departing = point.job
        if departing is not None or asks_agent(point):
            self.work_s = work_done_s(self.work, self.solo, view, departing)
        if not asks_agent(point):
            return None
        obs, mask, default, ctx = prepare(self.space, point, view, warm=self.warm)
        if self.choice_only and distinct(mask) < 2:
            return decide(self.space, default, ctx)
        self.to_env.put(("point", obs, mask, int(default), float(point.now_s), dict(self.finish_s),
                         self.work_s))
        msg = self.to_sim.get()
        if msg is _ABORT:
            raise _Abort
        return decide(self.space, int(msg), ctx)


class PathsEnv(BufferingEnv):
    """Paths and holds of collectives on a shared fabric, one scenario run per episode.

    Description:
        As `BufferingEnv` (scenario, seeds, reward, episode end); the agent's decisions are those
        of `flowherd.control.paths_agent`, under the scenario's grant (``buffer``: delays and
        paths). ``info["structured_action"]`` is the ``warm`` policy's action at the point: ``none``
        (the default routes, no hold: no control) or ``index`` (the rule of docs/rl-structure.md:
        the option of rank 0, held iff the waiting bytes are within Theorem 1's threshold).

    Observation:
        ``Box(float32, (obs_dim(actions),))``: per path option its features and the point's
        (`flowherd.control.paths_agent`), clipped to ``[-10, 10]``.

    Action:
        ``Discrete(12)``: ``2 * option + hold`` (``paths-raw``: options in a fixed order;
        ``paths-index``: options by rank of the index). `action_masks()` and
        ``info["action_mask"]`` say which apply; a masked action is projected to the warm one.

    Args:
        scenario, seeds, horizon_s, render_mode: As `BufferingEnv`.
        actions: ``paths-raw`` or ``paths-index``.
        warm: ``none`` or ``index`` (the default action; what behaviour cloning copies).
        choice_only: Ask only where the allowed actions make at least two different decisions
            (default True: elsewhere the warm action is taken without a step).
        reward: ``jct`` (`BufferingEnv`'s: minus the job-seconds in the system) or ``progress``
            (that plus the change of the potential `work_done_s` over ``num_jobs x horizon_s``,
            the potential taken to zero at the last step: the same return, module docstring).

    Raises:
        ConfigError: a bad scenario, seed list, horizon, action space or warm policy.
    """

    def __init__(self, scenario: str | Path | Mapping[str, Any] | Scenario = "default", *,
                 seeds: Sequence[int] | None = None, horizon_s: float | None = None,
                 render_mode: str | None = None, actions: str = "paths-index", warm: str = "none",
                 choice_only: bool = True, reward: str = "jct"):
        if reward not in REWARDS:
            raise ConfigError(f"reward must be one of {REWARDS}, got {reward!r} (reward)")
        if actions not in PATH_SPACES:
            raise ConfigError(f"actions must be one of {PATH_SPACES}, got {actions!r} (actions)")
        if warm not in WARM:
            raise ConfigError(f"warm must be one of {WARM}, got {warm!r} (warm)")
        super().__init__(scenario, seeds=seeds, horizon_s=horizon_s, render_mode=render_mode,
                         choice_only=choice_only)
        self.actions, self.warm, self.reward = actions, warm, reward
        self._work_s = 0.0
        self._num_actions = NUM_ACTIONS
        self.observation_space = spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(obs_dim(actions),),
                                            dtype=np.float32)
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._obs = np.zeros(obs_dim(actions), np.float32)
        self._mask = np.ones(NUM_ACTIONS, bool)

    def _make_bridge(self):
        self._work_s = 0.0
        return _PathsBridge(self._to_env, self._to_sim, self.actions, self.warm, self.choice_only)

    def _take(self, msg: tuple) -> float:
        reward = super()._take(msg[:6])
        if self.reward == "progress":
            reward += (msg[6] - self._work_s) / self._norm
        self._work_s = msg[6]
        return reward

    def _finish(self, result, projected: bool):
        obs, reward, term, trunc, info = super()._finish(result, projected)
        if self.reward == "progress":
            reward -= self._work_s / self._norm  # the potential is zero at the end: the return is exact
        return obs, reward, term, trunc, info
