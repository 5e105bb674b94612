"""The action spaces a learning agent acts in at an agent point, built on the `flowherd` policy.

At an agent point (`flowherd.control.herd.asks_agent`: a collective that crosses the network) an
agent picks one discrete action; the space turns it into a `Decision`. Two spaces, to measure
what the policy's structure is worth to reinforcement learning (`benchmarks/rl_curves.py`):

* ``structured`` (`ACTIONS`): a priority class and whether to *buffer*, where buffering means
  the `flowherd` policy's own delay at that point (its interleaving shift or its yield to a job
  with less work left, `flowherd.control.periodic`), else the threshold rule's wait for the
  competing burst (`flowherd.control.threshold`, at ``theta = 0``). The agent chooses *whether*
  the structured rule holds the collective, never *how long*: the action space is the policy's
  parameterization, and its structured action (``default``) is exactly what the `flowherd`
  policy decides, so a behaviour-cloned agent starts as that policy.
* ``raw`` (`RAW_DELAY_FRACTIONS`): a delay as a fraction of the job's current period, with no
  rule behind it (the unstructured baseline): the agent must find out by itself when a delay
  pays and how long it should be.

Paths are the `flowherd` policy's in both spaces (the comparison is about the
buffering lever). A space is asked once per agent point: `prepare` runs the `flowherd` policy
there (so that its online pattern learner sees every collective, whatever the agent does) and
returns the mask of the actions that apply, the structured action and a context; `decide` turns
the chosen action into the `Decision`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.cluster.control_api import Decision, DecisionPoint, NetworkView
from flowherd.control.herd import ACTIONS, NUM_CLASSES, HerdController, _buffer_delay, _paths, srpt_class
from flowherd.errors import ConfigError

__all__ = ["ACTION_SPACES", "RAW_DELAY_FRACTIONS", "AgentContext", "action_space_size", "decide",
           "distinct_decisions", "prepare"]

RAW_DELAY_FRACTIONS: tuple[float, ...] = (0.0, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)
ACTION_SPACES = ("structured", "raw")


def action_space_size(space: str) -> int:
    """Number of discrete actions of ``space`` (`ACTION_SPACES`).

    Raises:
        ConfigError: an unknown space.
    """
    if space == "structured":
        return len(ACTIONS)
    if space == "raw":
        return len(RAW_DELAY_FRACTIONS)
    raise ConfigError(f"action space must be one of {ACTION_SPACES}, got {space!r} (actions)")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentContext:
    """What `prepare` learnt at an agent point, for `decide`.

    Attributes:
        herd: The `flowherd` policy's decision there (None: it changes nothing).
        buffer_s: The structured buffering delay there, seconds (0: buffering cannot delay).
        period_s: The job's current period (raw delays are fractions of it), seconds, or None.
    """

    herd: Decision | None
    buffer_s: float
    period_s: float | None


def prepare(space: str, ctrl: HerdController, point: DecisionPoint,
            view: NetworkView) -> tuple[np.ndarray, int, AgentContext]:
    """Run the `flowherd` policy ``ctrl`` at an agent point; return the mask of the actions of
    ``space`` that apply there, the structured action (the policy's own choice in that space)
    and the context `decide` needs."""
    action_space_size(space)  # checks the name
    herd = ctrl.decide(point, view)
    lv = view.levers
    job = view.jobs.get(point.job) if point.job is not None else None
    herd_s = herd.delay_s if herd is not None else 0.0
    buffer_s = 0.0
    if lv.delay and job is not None:
        buffer_s = herd_s if herd_s > 0 else _buffer_delay(point, view, ctrl.params)
    period = None if job is None else (job.period_s or job.solo_period_s)
    ctx = AgentContext(herd=herd, buffer_s=float(buffer_s), period_s=period)
    if space == "structured":
        mask = np.array([(not d) or buffer_s > 0 for _c, d in ACTIONS], dtype=bool)
        classes = min(ctrl.params.num_classes, lv.priority_classes)
        cls = srpt_class(point.job, view, classes) if ctrl.params.prioritize and classes > 0 \
            and job is not None else NUM_CLASSES - 1
        return mask, ACTIONS.index((cls, herd_s > 0)), ctx
    can = lv.delay and job is not None and period is not None and period > 0
    mask = np.array([can or f == 0 for f in RAW_DELAY_FRACTIONS], dtype=bool)
    default = 0
    if can and herd_s > 0:  # the raw level nearest the policy's delay
        default = int(np.argmin([abs(f * period - herd_s) for f in RAW_DELAY_FRACTIONS]))
    return mask, default, ctx


def distinct_decisions(space: str, mask: np.ndarray, levers) -> int:
    """How many different decisions the actions ``mask`` allows make in ``space`` under ``levers``.

    In the structured space the priority class of an action counts only where the grant has
    classes (``levers.priority_classes``; the class is clipped to them, as `decide` does), so under
    ``buffer`` the 16 actions make at most two decisions: buffer or not. In the raw space every
    allowed delay fraction is a different delay. A point with fewer than two is no choice at all:
    every allowed action gives the same `Decision`.
    """
    mask = np.asarray(mask, dtype=bool)
    if space == "raw":
        return int(mask.sum())
    action_space_size(space)  # checks the name
    k = int(levers.priority_classes)
    return len({(min(c, k - 1) if k else None, d) for (c, d), m in zip(ACTIONS, mask, strict=True) if m})


def decide(space: str, action: int, ctx: AgentContext, ctrl: HerdController, point: DecisionPoint,
           view: NetworkView) -> Decision | None:
    """The `Decision` of ``action`` of ``space`` at ``point`` (with `prepare`'s context).

    Raises:
        ConfigError: an action outside the space.
    """
    n = action_space_size(space)
    if isinstance(action, bool) or not isinstance(action, int | np.integer) or not 0 <= action < n:
        raise ConfigError(f"action must be an int in 0..{n - 1}, got {action!r} (action)")
    lv = view.levers
    paths = ctx.herd.path_choice if ctx.herd is not None else None
    splits = ctx.herd.path_splits if ctx.herd is not None else None
    if space == "structured":
        cls, buffer = ACTIONS[int(action)]
        cls = min(cls, lv.priority_classes - 1) if lv.priority_classes else None
        herd_cls = ctx.herd.priority if ctx.herd is not None else None
        if lv.paths and cls != herd_cls:  # the least-loaded paths for the class chosen
            paths, splits = _paths(point, view, ctrl.params, cls), None
        delay = ctx.buffer_s if buffer else 0.0
    else:
        cls = ctx.herd.priority if ctx.herd is not None else None
        f = RAW_DELAY_FRACTIONS[int(action)]
        delay = f * ctx.period_s if f > 0 and lv.delay and ctx.period_s else 0.0
    if not lv.paths:
        paths = splits = None
    if delay <= 0 and cls is None and paths is None and splits is None:
        return None
    return Decision(delay_s=float(delay) if math.isfinite(delay) else 0.0, priority=cls, path_choice=paths,
                    path_splits=splits)
