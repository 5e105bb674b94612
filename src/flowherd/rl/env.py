"""`BufferingEnv`: the cluster simulator as a Gymnasium environment (``flowherd/Buffering-v0``).

The simulator is callback-driven: it asks its controller at decision points from inside
`flowherd.cluster.simulate.simulate_cluster`. The environment therefore runs the scenario
(`flowherd.experiments.runner.run_scenario`) in a worker thread whose controller is a *bridge*:
at an agent point it hands the observation to `step` / `reset` and blocks until the next action
comes; at every other point it returns the structured `flowherd` policy's decision. The two
threads hand control back and forth through two queues, so only one of them runs at a time and
a rollout is as deterministic as the simulator (Park's `load_balance` environment runs its event
timeline to the next decision point in the same way; here the timeline is the simulator's own).
A `reset` or `close` in mid-episode sends the bridge an abort: it raises a private
`BaseException` that unwinds the simulation (`ControlHook` catches only `Exception`), and the
thread is joined; no thread outlives its episode.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.agent import action_space_size, decide, distinct_decisions, prepare
from flowherd.control.herd import NUM_FEATURES, OBS_BOUND, HerdController, HerdParams, asks_agent, features
from flowherd.errors import ConfigError, SimulationError
from flowherd.experiments.scenario import Scenario, read_scenario_mapping, scenario_from_mapping

__all__ = ["OBS_BOUND", "BufferingEnv", "jobs_in_system_integral"]


class _Abort(BaseException):
    """Unwinds the simulation in the worker thread when the environment resets or closes.

    A BaseException, not an Exception: `ControlHook.ask` turns every Exception of a controller into
    a recorded issue and goes on, which is right for a faulty controller but would keep this
    thread running.
    """


_ABORT = object()  # the message that tells the bridge to raise _Abort


class _Bridge:
    """The controller the simulator calls in the worker thread (module docstring)."""

    def __init__(self, to_env: queue.Queue, to_sim: queue.Queue, params: HerdParams, actions: str,
                 choice_only: bool = False):
        self.name = "rl-agent"
        self.params = params
        self.actions = actions
        self.choice_only = choice_only
        self.structured = HerdController(params=params)
        self.to_env, self.to_sim = to_env, to_sim
        self.finish_s: dict[str, float] = {}

    def reset(self, seed: int) -> None:
        self.structured.reset(seed)
        self.finish_s.clear()

    def decide(self, point: DecisionPoint, view: NetworkView) -> Decision | None:
        if point.kind == "departure" and point.job is not None:
            self.finish_s[point.job] = float(point.now_s)
        if not asks_agent(point):
            return self.structured.decide(point, view)
        obs = np.clip(features(point, view), -OBS_BOUND, OBS_BOUND).astype(np.float32)
        mask, default, ctx = prepare(self.actions, self.structured, point, view)
        if self.choice_only and distinct_decisions(self.actions, mask, view.levers) < 2:
            # every allowed action makes the same decision: nothing for the agent to choose
            return decide(self.actions, int(default), ctx, self.structured, point, view)
        self.to_env.put(("point", obs, mask, int(default), float(point.now_s), dict(self.finish_s)))
        msg = self.to_sim.get()
        if msg is _ABORT:
            raise _Abort
        return decide(self.actions, int(msg), ctx, self.structured, point, view)


def jobs_in_system_integral(submit_s: np.ndarray, finish_s: np.ndarray, t0_s: float, t1_s: float) -> float:
    """Integral over ``[t0_s, t1_s]`` of the number of jobs in the system, job-seconds.

    A job is in the system from its submission to its finish (queued or running); ``finish_s`` is
    ``inf`` for a job not (yet) known to have finished.
    """
    lo = np.maximum(submit_s, t0_s)
    hi = np.minimum(finish_s, t1_s)
    return float(np.clip(hi - lo, 0.0, None).sum())


def _work(scenario: Scenario, bridge: _Bridge, to_env: queue.Queue) -> None:
    """The worker thread: one run, then "done" (or the error) to the environment."""
    # (a function, not a method: the thread must hold no reference to the environment, so that a
    # forgotten environment is collected and its __del__ ends the thread)
    from flowherd.experiments.runner import run_scenario

    try:
        result = run_scenario(scenario, solo=False, controller=bridge)
    except _Abort:
        return
    except BaseException as err:  # handed to the caller of step / reset, raised there
        to_env.put(("error", err))
        return
    to_env.put(("done", result))


class BufferingEnv(gymnasium.Env):
    """Online CCL buffering and priorities on a shared fabric, one scenario run per episode.

    Description:
        An episode simulates one scenario (one of ``seeds``: its arrivals, background traffic and
        hashing) up to its horizon. Whenever a collective that crosses the network is about to
        start (`flowherd.control.herd.asks_agent`) the agent chooses how it goes; every other
        decision (arrivals, departures, the collectives `asks_agent` leaves out) is the
        structured `flowherd` policy's. Routes follow ``params`` (``HerdParams.balance``: the
        least-loaded candidate paths), whatever the action.

    Observation:
        ``Box(float32, (NUM_FEATURES,))``: `flowherd.control.herd.features` of the pending
        collective (its size, the contention and competing burst on its bottleneck, the job's
        slack, its shortest-remaining-first rank, ...; names in ``FEATURE_NAMES``), clipped to
        ``[-OBS_BOUND, OBS_BOUND]``.

    Action:
        ``Discrete(n)`` in one of the action spaces of `flowherd.control.agent` (``actions``):
        ``structured`` (``n = len(ACTIONS)``, ``ACTIONS[a] = (priority class, buffer)``, buffering
        being the `flowherd` policy's delay there) or ``raw`` (a delay as a fraction of the
        job's period, `RAW_DELAY_FRACTIONS`); `flowherd.control.agent.decide` makes the
        `Decision`. Not every action applies at every point: `action_masks()` (the
        sb3-contrib convention) and ``info["action_mask"]`` say which do. An action the mask
        rules out (or outside the space) is *projected* to the structured policy's action at that
        point (``info["structured_action"]``), and ``info["projected"]`` is True.

    Reward:
        Minus the time integral of the number of jobs in the system (submitted and not finished,
        queued or running) since the previous agent point, over the normalizer
        ``num_jobs x horizon_s`` (job-seconds). By Little's law the integral of the number in
        system over the episode is the sum of the completion times (a job unfinished at the
        horizon counted to the horizon), so the undiscounted episode return is exactly
        ``-sum(JCT) / (num_jobs x horizon_s) = -mean(JCT) / horizon_s``: maximizing it minimizes
        the mean JCT. Finishes are known when they happen (departure points); a job whose finish
        the controller does not see (inference jobs) counts as in the system until the episode
        ends, and the last reward settles the difference, so the return stays exact.

    Episode end:
        Terminated when the simulation returns (the horizon is reached); the last step's info
        carries ``mean_jct_s``, ``sum_jct_s``, ``jobs_finished`` and ``jobs_total``. No
        truncation: wrap in ``gymnasium.wrappers.TimeLimit`` for that. A scenario seed with no
        agent point at all gives a zero observation at reset and ends at the first step.

    Args:
        scenario: A scenario name (embedded), a YAML path, a scenario mapping or a `Scenario`
            (rebuilt from its ``source`` for each seed, as the seed draws its arrivals).
        seeds: Scenario seeds the episodes draw from (uniformly, with the generator `reset`
            seeds); default: the scenario's own seed. ``reset(options={"scenario_seed": s})``
            runs seed ``s`` (any integer, e.g. held-out seeds for evaluation).
        horizon_s: Override of the scenario's horizon, seconds.
        params: Parameters of the structured policy (the non-agent decisions, the buffering
            delay and the masks).
        actions: The action space, ``structured`` (default) or ``raw``
            (`flowherd.control.agent.ACTION_SPACES`).
        render_mode: Only None (nothing to draw).
        choice_only: Ask the agent only at the agent points where the allowed actions make at
            least two different decisions (`flowherd.control.agent.distinct_decisions`; under
            ``buffer`` in the structured space: where buffering is possible); elsewhere every
            action decides the same and the point is passed over. The same policies, far fewer
            steps: on benchmarks/scenarios/rl_small.yaml 0-53 of about 1,400 points per episode.
            The return stays exact (the job-seconds between asked points are charged as before).

    Raises:
        ConfigError: a bad scenario, seed list or horizon.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, scenario: str | Path | Mapping[str, Any] | Scenario = "default", *,
                 seeds: Sequence[int] | None = None, horizon_s: float | None = None,
                 params: HerdParams | None = None, render_mode: str | None = None,
                 actions: str = "structured", choice_only: bool = False):
        if render_mode is not None:
            raise ConfigError(f"render_mode must be None (the environment draws nothing), got "
                              f"{render_mode!r} (render_mode)")
        if isinstance(scenario, Scenario):
            source = dict(scenario.source)
        elif isinstance(scenario, Mapping):
            source = dict(scenario)
        else:
            source = read_scenario_mapping(scenario)
        if horizon_s is not None:
            if isinstance(horizon_s, bool) or not isinstance(horizon_s, int | float) \
                    or not math.isfinite(horizon_s) or horizon_s <= 0:
                raise ConfigError(f"horizon_s must be a positive finite time, got {horizon_s!r} (horizon_s)")
            source["simulation"] = {**source.get("simulation", {}), "horizon": float(horizon_s)}
        # the agent is the controller; the scenario's own (maybe a model file) is not used
        source["controller"] = {**source.get("controller", {}), "name": "none", "params": {}}
        self._source = source
        if seeds is None:
            seeds = (int(source.get("seed", 0)),)
        seeds = tuple(seeds)
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int | np.integer) for s in seeds):
            raise ConfigError(f"seeds must be a non-empty sequence of integers, got {list(seeds)!r} (seeds)")
        self.seeds = tuple(int(s) for s in seeds)
        self.params = params if params is not None else HerdParams()
        self.actions = actions
        self.choice_only = bool(choice_only)
        self._num_actions = action_space_size(actions)
        self._scenarios: dict[int, Scenario] = {}
        self.scenario = self.scenario_for(self.seeds[0])  # validates the scenario now
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-OBS_BOUND, OBS_BOUND, shape=(NUM_FEATURES,), dtype=np.float32)
        self.action_space = spaces.Discrete(self._num_actions)
        self._thread: threading.Thread | None = None
        self._to_env: queue.Queue = queue.Queue()
        self._to_sim: queue.Queue = queue.Queue()
        self._live = False  # an episode in progress (step may be called)
        self._pending: tuple | None = None  # a "done" that came before any agent point
        self._obs = np.zeros(NUM_FEATURES, np.float32)
        self._mask = np.ones(self._num_actions, bool)
        self._default = 0

    # -- scenarios --------------------------------------------------------------------------------
    def scenario_for(self, seed: int) -> Scenario:
        """The scenario of ``seed`` (built once, then cached)."""
        if seed not in self._scenarios:
            self._scenarios[seed] = scenario_from_mapping({**self._source, "seed": int(seed)})
        return self._scenarios[seed]

    # -- the worker thread ------------------------------------------------------------------------
    def _stop(self) -> None:
        """Abort the episode in progress, if any, and join its thread."""
        t = self._thread
        if t is not None:
            if t.is_alive():
                self._to_sim.put(_ABORT)
            t.join()
        self._thread = None
        self._live = False
        self._pending = None

    def _next(self) -> tuple:
        msg = self._to_env.get()
        if msg[0] != "point":
            self._thread.join()
            self._thread = None
        if msg[0] == "error":
            self._live = False
            raise msg[1]
        return msg

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode: the scenario seed from ``options["scenario_seed"]``, else drawn from
        ``seeds``; returns the first agent point's observation and info."""
        super().reset(seed=seed)
        self._stop()
        options = options or {}
        if "scenario_seed" in options:
            s = options["scenario_seed"]
            if isinstance(s, bool) or not isinstance(s, int | np.integer):
                raise ConfigError(f"options['scenario_seed'] must be an integer, got {s!r} (reset options)")
            s = int(s)
        else:
            s = self.seeds[int(self.np_random.integers(len(self.seeds)))]
        self.scenario = self.scenario_for(s)
        self._scenario_seed = s
        self._jobs = self.scenario.jobs
        self._submit_s = np.array([j.submit_s for j in self._jobs], dtype=np.float64)
        self._finish_s = np.full(len(self._jobs), np.inf)
        self._index = {j.name: i for i, j in enumerate(self._jobs)}
        self._norm = max(len(self._jobs), 1) * self.scenario.horizon_s
        self._t_s = 0.0
        self._counted = 0.0  # job-seconds the rewards so far have charged
        self._carry = 0.0
        self._steps = 0
        self._to_env, self._to_sim = queue.Queue(), queue.Queue()
        bridge = _Bridge(self._to_env, self._to_sim, self.params, self.actions, self.choice_only)
        self._thread = threading.Thread(target=_work, args=(self.scenario, bridge, self._to_env),
                                        name=f"flowherd-env-{s}", daemon=True)
        self._live = True
        self._thread.start()
        msg = self._next()
        if msg[0] == "done":
            self._pending = msg
            self._obs = np.zeros(NUM_FEATURES, np.float32)
            self._mask = np.ones(self._num_actions, bool)
            self._default = 0
            return self._obs.copy(), self._info()
        # the job-seconds before the first agent point go with the first step's reward, so that the
        # return is the whole integral (class docstring)
        self._carry = self._take(msg)
        return self._obs.copy(), self._info()

    def step(self, action):
        """Apply ``action`` at the pending agent point and run to the next one (class docstring)."""
        if not self._live:
            raise SimulationError("step() called with no episode in progress; call reset() first (action)")
        try:
            a = int(np.asarray(action).item())
        except (TypeError, ValueError):
            raise ConfigError(f"action must be an integer in 0..{self._num_actions - 1}, got {action!r} "
                              "(action)") from None
        projected = not (0 <= a < self._num_actions and self._mask[a])
        if projected:
            a = self._default
        self._steps += 1
        if self._pending is not None:
            msg, self._pending = self._pending, None
        else:
            self._to_sim.put(a)
            msg = self._next()
        carry, self._carry = self._carry, 0.0
        if msg[0] == "point":
            reward = carry + self._take(msg)
            return self._obs.copy(), reward, False, False, {**self._info(), "projected": projected}
        obs, reward, term, trunc, info = self._finish(msg[1], projected)
        return obs, carry + reward, term, trunc, info

    def action_masks(self) -> np.ndarray:
        """``bool[n]``: the actions that apply at the pending point (sb3-contrib name)."""
        return self._mask.copy()

    def close(self) -> None:
        """Abort the episode in progress (its worker thread is joined)."""
        self._stop()

    def __del__(self):
        with contextlib.suppress(Exception):  # at interpreter shutdown there is nothing left to tell
            self._stop()

    # -- helpers ----------------------------------------------------------------------------------
    def _take(self, msg: tuple) -> float:
        _, obs, mask, default, now_s, finishes = msg
        for name, t in finishes.items():
            i = self._index.get(name)
            if i is not None:
                self._finish_s[i] = t
        job_s = jobs_in_system_integral(self._submit_s, self._finish_s, self._t_s, now_s)
        self._counted += job_s
        self._t_s = now_s
        self._obs, self._mask, self._default = obs, mask, default
        return -job_s / self._norm

    def _finish(self, result, projected: bool):
        self._live = False
        total = float(result.cluster.censored_jct_s().sum())
        reward = -(total - self._counted) / self._norm
        n = len(result.cluster.jobs)
        info = {**self._info(), "projected": projected, "sum_jct_s": total,
                "mean_jct_s": total / n if n else 0.0,
                "jobs_finished": sum(r.finish_s is not None for r in result.cluster.jobs), "jobs_total": n,
                "agent_steps": self._steps}
        return self._obs.copy(), float(reward), True, False, info

    def _info(self) -> dict[str, Any]:
        return {"action_mask": self._mask.copy(), "structured_action": int(self._default),
                "now_s": float(self._t_s), "scenario_seed": self._scenario_seed}
