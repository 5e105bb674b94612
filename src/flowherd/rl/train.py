"""Train a buffering / priority policy: behaviour cloning of the structured policy, then PPO.

Flat on purpose (CleanRL's ``ppo.py`` is the model): `train` reads top to bottom.

1. Episodes of the structured `flowherd` policy on the training seeds give (observation,
   structured action, return-to-go) triples.
2. Behaviour cloning: the SB3 policy's action distribution is fitted to the structured actions
   by maximum likelihood, with label smoothing so that it keeps exploring (and its value head to
   the returns-to-go, so that the first PPO updates see sensible advantages), for a few epochs
   with Adam. The greedy agent starts as good as the structured policy
   (`TrainResult.bc_accuracy` says how closely it copies it).
3. PPO (stable-baselines3, a small MLP, ``n_steps`` about one episode, a fixed seed) for
   ``steps`` environment steps. Every ``eval_every`` steps the greedy masked policy
   (`flowherd.control.model.PolicyController`) runs on held-out validation seeds; the mean JCT
   (a job unfinished at the horizon counted to the horizon) is the learning curve.

The model saved at ``out`` is the one with the best validation mean JCT seen (the cloned one at
step 0 included); ``<out stem>_start.zip`` is the one at step 0 (the warm start), ``<out
stem>_last.zip`` the final one and ``<out stem>_curve.csv`` the curve (steps, wall_s, mean_jct_s,
cpu_s).
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flowherd import atomic
from flowherd.control.herd import HerdController, HerdParams
from flowherd.control.model import PathsPolicyController, PolicyController, greedy_action
from flowherd.control.paths_agent import PATH_SPACES, PathsRuleController
from flowherd.errors import ConfigError
from flowherd.experiments.scenario import Scenario
from flowherd.registry import Registry
from flowherd.rl.env import BufferingEnv
from flowherd.rl.paths_env import PathsEnv

__all__ = ["ALGOS", "POLICIES", "CloneStats", "CurvePoint", "TrainResult", "behaviour_clone", "clone_stats",
           "collect_structured", "evaluate", "train"]

ALGOS: Registry[str] = Registry("--algo", {"ppo": "PPO", "a2c": "A2C"})  # name -> SB3 class name
#: Policy classes: ``mlp`` (SB3's MLP actor-critic) or ``rule`` (`flowherd.control.paths_rule`: the
#: rule family of docs/rl-structure.md with eight learnable numbers, paths-index space only).
POLICIES = ("mlp", "rule")
#: Where the rule policy's actor starts: ``random`` (draws of scale 0.01) or ``index`` (the index rule
#: of docs/rl-structure.md, softly: `flowherd.control.paths_rule.WARM_RANK_WEIGHT`).
RULE_INITS = ("random", "index")


@dataclass(frozen=True, slots=True, kw_only=True)
class CurvePoint:
    """One evaluation of the learning curve.

    Attributes:
        steps: Environment steps of RL training so far (0: after behaviour cloning).
        wall_s: Wall time since training started (cloning included), seconds.
        mean_jct_s: Mean JCT on the validation seeds, seconds.
        cpu_s: CPU time of this process since training started (all its threads: the
            simulation's worker thread too), seconds; on a shared machine the cost to quote.
    """

    steps: int
    wall_s: float
    mean_jct_s: float
    cpu_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainResult:
    """What `train` did.

    Attributes:
        model_path: The best model on validation (``out``).
        last_model_path: The model at the end of training.
        curve_path: The learning curve, CSV.
        curve: The learning curve.
        best_steps: Steps of the saved best model.
        structured_mean_jct_s: The structured `flowherd` policy on the validation seeds, seconds.
        none_mean_jct_s: No control on the validation seeds, seconds.
        bc_accuracy: Share of the cloning samples where the cloned policy's greedy masked action
            is the structured one.
        bc_samples: Number of cloning samples.
        bc_stats: The cloned policy's entropy and teacher probability on them (`clone_stats`).
        train_seeds, val_seeds: Scenario seeds trained on and validated on.
        n_steps: Rollout length of an update.
        steps: Environment steps of RL training done.
        wall_s: Total wall time, seconds.
    """

    model_path: Path
    last_model_path: Path
    curve_path: Path
    curve: tuple[CurvePoint, ...]
    best_steps: int
    structured_mean_jct_s: float
    none_mean_jct_s: float
    bc_accuracy: float
    bc_samples: int
    bc_stats: CloneStats | None
    train_seeds: tuple[int, ...]
    val_seeds: tuple[int, ...]
    n_steps: int
    steps: int
    wall_s: float


def collect_structured(env: BufferingEnv, seeds: Sequence[int], *, gamma: float,
                       stop_at_s: float | None = None,
                       log: Callable[[str], None] | None = None) -> dict[str, np.ndarray]:
    """Run the structured policy (``info["structured_action"]``) for one episode per seed.

    Args:
        env, seeds, gamma: The environment, one episode per seed, the discount of the returns.
        stop_at_s: A `time.perf_counter` time after which no further episode starts (the first
            always runs): a time limit must leave room for the training it is for.
        log: Called with one line per episode.

    Returns:
        ``obs`` float32[N, F], ``action`` int64[N], ``mask`` bool[N, A], ``ret`` float32[N] (the
        discounted return-to-go from each observation), ``episode_len`` int64[len(seeds)].
    """
    obs_l, act_l, mask_l, ret_l, lens = [], [], [], [], []
    for k, s in enumerate(seeds):
        if k and stop_at_s is not None and time.perf_counter() > stop_at_s:
            if log is not None:
                log(f"structured episodes: {k} of {len(seeds)} (the time limit leaves no room for more)")
            break
        t_ep = time.perf_counter()
        obs, info = env.reset(options={"scenario_seed": int(s)})
        rewards = []
        while True:
            a = info["structured_action"]
            obs_l.append(obs)
            act_l.append(a)
            mask_l.append(info["action_mask"])
            obs, r, terminated, truncated, info = env.step(a)
            rewards.append(r)
            if terminated or truncated:
                break
        ret = np.zeros(len(rewards))
        acc = 0.0
        for i in range(len(rewards) - 1, -1, -1):
            acc = rewards[i] + gamma * acc
            ret[i] = acc
        ret_l.append(ret)
        lens.append(len(rewards))
        if log is not None:
            log(f"structured episode {k + 1}/{len(seeds)} (seed {s}): {len(rewards)} decisions in "
                f"{time.perf_counter() - t_ep:.1f} s")
    return {"obs": np.asarray(obs_l, np.float32), "action": np.asarray(act_l, np.int64),
            "mask": np.asarray(mask_l, bool),
            "ret": (np.concatenate(ret_l) if ret_l else np.zeros(0)).astype(np.float32),
            "episode_len": np.asarray(lens, np.int64)}


def behaviour_clone(policy: Any, data: Mapping[str, np.ndarray], *, epochs: int, seed: int,
                    smoothing: float = 0.1, min_updates: int = 500, batch_size: int = 64,
                    learning_rate: float = 1e-3, value_coef: float = 0.5, balance: bool = False) -> float:
    """Fit an SB3 actor-critic ``policy`` to ``data`` (`collect_structured`): maximize the log-
    likelihood of the structured actions, and regress the value head on the returns-to-go.

    The target puts ``1 - smoothing`` on the structured action and spreads ``smoothing`` over the
    actions the mask allows (label smoothing): the greedy action is the structured one, while the
    sampled actions still explore the others about a ``smoothing`` of the time, which RL needs to
    find anything better. Runs ``epochs`` passes over the data, more if that makes fewer than
    ``min_updates`` gradient steps (a few episodes of a small scenario are a few hundred samples).

    With ``balance`` each sample's likelihood is weighted by the inverse frequency of its
    structured action in the data (weights of mean 1): the policy's rare actions count as much as
    its common ones. Without it a clone can miss a rare action whole and still score 99.7%: on
    benchmarks/scenarios/rl_small.yaml the flowherd policy buffers at 2-6 of about 1,400 points
    an episode, and the unweighted clone never buffers.

    Returns:
        The share of samples whose greedy masked action is the structured one, after fitting.
    """
    import torch

    if not 0 <= smoothing < 1:
        raise ConfigError(f"smoothing must be in [0, 1), got {smoothing!r} (smoothing)")
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(data["obs"])
    ret = torch.as_tensor(data["ret"])
    allowed = torch.as_tensor(data["mask"], dtype=torch.float32)
    target = smoothing * allowed / allowed.sum(dim=1, keepdim=True).clamp(min=1.0)
    target[torch.arange(len(target)), torch.as_tensor(data["action"])] += 1.0 - smoothing
    weight = torch.ones(len(target))
    if balance and len(target):
        counts = np.bincount(data["action"])
        w = 1.0 / counts[data["action"]]
        weight = torch.as_tensor(w / w.mean(), dtype=torch.float32)
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    policy.set_training_mode(True)
    n = len(target)
    epochs = max(epochs, math.ceil(min_updates / max(math.ceil(n / batch_size), 1))) if n else 0
    for _ in range(epochs):
        perm = torch.as_tensor(rng.permutation(n))
        for lo in range(0, n, batch_size):
            idx = perm[lo:lo + batch_size]
            log_p = torch.log_softmax(policy.get_distribution(obs[idx]).distribution.logits, dim=-1)
            values = policy.predict_values(obs[idx]).flatten()
            loss = -(weight[idx] * (target[idx] * log_p).sum(dim=-1)).mean() \
                + value_coef * torch.nn.functional.mse_loss(values, ret[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    policy.set_training_mode(False)
    hits = sum(greedy_action(policy, o, m) == a for o, m, a in zip(data["obs"], data["mask"], data["action"],
                                                                   strict=True))
    return hits / max(n, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class CloneStats:
    """How a cloned policy's action distribution sits on the cloning samples (`clone_stats`).

    Attributes:
        entropy_nats: Mean entropy of the policy's distribution over the actions the mask allows
            (renormalized), nats.
        max_entropy_nats: Mean of ``log(allowed actions)``: the entropy of the uniform choice.
        teacher_prob: Mean probability of the structured action.
        masked_prob: Mean probability the unmasked SB3 policy puts on masked actions (they become
            the structured action when sampled).
    """

    entropy_nats: float
    max_entropy_nats: float
    teacher_prob: float
    masked_prob: float


def clone_stats(policy: Any, data: Mapping[str, np.ndarray]) -> CloneStats:
    """The entropy and the teacher's probability of ``policy`` on ``data`` (`collect_structured`):
    what PPO starts its sampling from. A greedy clone flips its choice at a point only when an
    alternative's probability passes the teacher's, and PPO's clip bounds each update's change of
    a sampled action's probability ratio to ``1 +- clip_range``."""
    import torch

    if not len(data["action"]):
        return CloneStats(entropy_nats=0.0, max_entropy_nats=0.0, teacher_prob=0.0, masked_prob=0.0)
    obs = torch.as_tensor(data["obs"])
    mask = torch.as_tensor(data["mask"])
    with torch.no_grad():
        probs = policy.get_distribution(obs).distribution.probs
    allowed = torch.where(mask, probs, torch.zeros_like(probs))
    inside = allowed.sum(dim=1)
    q = allowed / inside.clamp(min=1e-12).unsqueeze(1)
    ent = -(torch.where(q > 0, q * torch.log(q.clamp(min=1e-30)), torch.zeros_like(q))).sum(dim=1)
    teacher = probs[torch.arange(len(probs)), torch.as_tensor(data["action"])]
    most = torch.log(mask.sum(dim=1).float().clamp(min=1.0))
    return CloneStats(entropy_nats=float(ent.mean()), max_entropy_nats=float(most.mean()),
                      teacher_prob=float(teacher.mean()), masked_prob=float((1 - inside).mean()))


def evaluate(controller_factory: Callable[[], Any], env: BufferingEnv, seeds: Sequence[int]) -> float:
    """Mean over ``seeds`` of the mean JCT of one run per seed (unfinished jobs counted to the
    horizon), with a fresh controller from ``controller_factory`` per run, seconds."""
    from flowherd.experiments.runner import run_scenario

    means = []
    for s in seeds:
        scenario = env.scenario_for(int(s))
        run = run_scenario(scenario, solo=False, controller=controller_factory())
        n = max(len(run.cluster.jobs), 1)
        means.append(float(run.cluster.censored_jct_s().sum()) / n)
    return float(np.mean(means))


def _companion(out: Path, suffix: str) -> Path:
    return out.with_name(f"{out.stem}{suffix}")


# SB3's episode statistics: deques, which a model file read without unpickling
# (flowherd.control.model_file) refuses; training statistics, not the policy
_NOT_SAVED = ["ep_info_buffer", "ep_success_buffer"]


def _save(model: Any, path: Path) -> None:
    """``model.save`` (without the episode statistics) to a temporary file beside `path`, renamed
    over it (`flowherd.atomic`): a full disk or a kill mid-save leaves the model saved before, never
    half a zip."""
    with atomic.replacing(path, field="--out") as tmp:
        model.save(tmp, exclude=_NOT_SAVED)


def train(scenario: str | Path | Mapping[str, Any] | Scenario, *, out: str | Path, algo: str = "ppo",
          steps: int = 20_000, seed: int = 0, eval_every: int | None = None,
          train_seeds: Sequence[int] | None = None, val_seeds: Sequence[int] | None = None,
          horizon_s: float | None = None, bc_episodes: int | None = None, bc_epochs: int = 10,
          bc_smoothing: float = 0.1, ent_coef: float = 0.0, time_limit_s: float | None = None,
          gamma: float = 0.999, learning_rate: float = 3e-4, net_arch: Sequence[int] = (64, 64),
          num_threads: int = 1, actions: str = "structured", n_steps: int | None = None,
          choice_only: bool = False, bc_balance: bool = False, warm: str = "none", reward: str = "jct",
          policy: str = "mlp", rule_init: str = "random",
          progress: Callable[[int, int, CurvePoint | None], None] | None = None,
          log: Callable[[str], None] | None = None) -> TrainResult:
    """Behaviour cloning of the structured policy, then RL (module docstring).

    Args:
        scenario: As `BufferingEnv`.
        out: The model file to write (``.zip``); the curve and the last model go next to it.
        algo: "ppo" or "a2c" (`ALGOS`).
        steps: Environment steps of RL training (SB3 finishes the rollout it is in).
        seed: Seeds SB3 (network initialization, sampling), torch and the episode draws.
        eval_every: Evaluate every this many steps (default: about 10 points over the run).
        train_seeds: Scenario seeds to train on (default: the scenario's seed + 0..3).
        val_seeds: Held-out scenario seeds for the curve (default: the two after the training
            seeds).
        horizon_s: Override of the scenario's horizon, seconds.
        bc_episodes: Episodes of the structured policy to clone (default: one per training seed).
        bc_epochs: Passes of behaviour cloning over them.
        bc_smoothing: Label smoothing of the cloning (`behaviour_clone`): the exploration the
            cloned policy keeps.
        ent_coef: Entropy bonus of the RL algorithm.
        time_limit_s: Wall time of the whole training, seconds (cloning, reference runs and the
            last validation included; None: run all ``steps``). Structured episodes stop starting
            after a quarter of it (the first always runs); RL stops when the validation that
            closes the curve, timed at step 0, would end past the limit.
        gamma: Discount factor (the objective is undiscounted; close to 1).
        learning_rate: Of the RL algorithm.
        net_arch: Hidden layers of the policy and value networks.
        num_threads: torch threads (at most 2 on this machine's two cores).
        actions: The agent's action space, ``structured`` or ``raw``
            (`flowherd.control.agent.ACTION_SPACES`, environment ``flowherd/Buffering-v0``) or
            ``paths-raw`` / ``paths-index`` (`flowherd.control.paths_agent`, environment
            ``flowherd/PathsDelays-v0``, always asked only where it has a choice); ``bc_episodes=0``
            trains from scratch.
        warm: In a paths space, the policy behaviour cloning copies and the reference the curve
            is read against: ``none`` (no control) or ``index`` (the rule of docs/rl-structure.md).
        n_steps: PPO's rollout length per update, a multiple of 64 (default: about one cloned
            episode, 64 without cloning); a comparison of learners passes the same to each.
        choice_only: The agent is asked only where its actions make different decisions
            (`BufferingEnv`'s ``choice_only``), in cloning, RL and validation alike.
        bc_balance: Weight the cloning by the inverse frequency of each structured action
            (`behaviour_clone`'s ``balance``).
        reward: In a paths space, ``jct`` or ``progress`` (`flowherd.rl.paths_env.PathsEnv`: the
            same return, shaped by the jobs' work done so that a decision's credit lands within
            the iteration it changes); the cloning's returns-to-go and RL use it alike.
        policy: ``mlp`` (the actor is an MLP of ``net_arch``) or ``rule`` (with ``paths-index``:
            the actor is the rule family of `flowherd.control.paths_rule`, eight learnable numbers
            from a random start; the critic is the MLP of ``net_arch``).
        rule_init: With ``policy="rule"``: ``random`` (the default) or ``index`` (the actor set at
            the index rule with `paths_rule.WARM_RANK_WEIGHT` and `paths_rule.WARM_HOLD_SLOPE`: its
            greedy action is the rule's, its samples explore the other ranks; a warm start
            without cloning).
        progress: Called as ``progress(steps_done, steps, new_curve_point_or_None)``.
        log: Called with one line per phase (episodes, cloning, reference runs, stop), so that a
            long phase before RL does not look like a hang.

    Raises:
        ConfigError / UnknownNameError: a bad algo (naming ``--algo``), steps, seeds, output path
            or scenario.
    """
    import torch
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor

    algo_cls = {"PPO": PPO, "A2C": A2C}[ALGOS[algo]]
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"steps must be a positive integer, got {steps!r} (--steps)")
    if eval_every is not None and (isinstance(eval_every, bool) or not isinstance(eval_every, int)
                                   or eval_every < 1):
        raise ConfigError(f"eval_every must be a positive integer, got {eval_every!r} (--eval-every)")
    out = Path(out)
    if out.suffix != ".zip":
        raise ConfigError(f"the model file must end in .zip, got {str(out)!r} (--out)")
    if time_limit_s is not None and not (isinstance(time_limit_s, int | float) and time_limit_s > 0):
        raise ConfigError(f"time_limit_s must be a positive time, got {time_limit_s!r} (--time-limit)")
    if policy not in POLICIES:
        raise ConfigError(f"policy must be one of {POLICIES}, got {policy!r} (policy)")
    if rule_init not in RULE_INITS:
        raise ConfigError(f"rule_init must be one of {RULE_INITS}, got {rule_init!r} (rule_init)")
    if policy == "rule" and actions != "paths-index":
        raise ConfigError(f"the rule policy takes the paths-index space, got {actions!r} (actions)")
    if not (isinstance(num_threads, int) and 1 <= num_threads <= 2):
        raise ConfigError(f"num_threads must be 1 or 2 (two cores), got {num_threads!r} (num_threads)")
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    torch.set_num_threads(num_threads)
    torch.manual_seed(seed)

    # -- environments: training seeds, held-out validation seeds -----------------------------------
    probe = BufferingEnv(scenario, horizon_s=horizon_s)
    base = probe.scenario.seed
    train_seeds = tuple(train_seeds) if train_seeds is not None else tuple(base + i for i in range(4))
    n = len(train_seeds)
    val_seeds = tuple(val_seeds) if val_seeds is not None else (base + n, base + n + 1)
    overlap = set(train_seeds) & set(val_seeds)
    if overlap:
        raise ConfigError(f"validation seeds must be held out, got {sorted(overlap)} in both (val_seeds)")
    paths = actions in PATH_SPACES

    def make_env(seeds: Sequence[int], ask_only: bool) -> BufferingEnv:
        if paths:
            return PathsEnv(scenario, seeds=seeds, horizon_s=horizon_s, actions=actions, warm=warm,
                            reward=reward)
        return BufferingEnv(scenario, seeds=seeds, horizon_s=horizon_s, actions=actions, choice_only=ask_only)

    env = make_env(train_seeds, choice_only)
    val_env = make_env(val_seeds, False)
    params = HerdParams()

    def reference():
        return PathsRuleController(space=actions, warm=warm) if paths else HerdController(params=params)

    def learnt():
        if paths:
            return PathsPolicyController(model.policy, actions=actions)
        return PolicyController(model.policy, params=params, actions=actions)

    # -- 1. episodes of the structured policy ------------------------------------------------------
    n_bc = len(train_seeds) if bc_episodes is None else bc_episodes
    say = log if log is not None else (lambda line: None)
    deadline = None if time_limit_s is None else t0 + time_limit_s
    say(f"structured policy: {n_bc} episodes to clone")
    data = collect_structured(env, [train_seeds[i % len(train_seeds)] for i in range(n_bc)], gamma=gamma,
                              stop_at_s=None if time_limit_s is None else t0 + 0.25 * time_limit_s, log=log)
    mean_len = float(data["episode_len"].mean()) if n_bc else 64.0

    # -- the model: rollouts of about one episode --------------------------------------------------
    batch_size = 64
    # about one episode per update, at most 2048 steps (SB3's default; a longer episode spans
    # rollouts, the value function bootstraps) and at most the whole budget
    if n_steps is None:
        n_steps = int(min(max(math.ceil(mean_len / batch_size), 1), max(math.ceil(steps / batch_size), 1),
                          2048 // batch_size) * batch_size)
    elif isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < batch_size \
            or n_steps % batch_size:
        raise ConfigError(f"n_steps must be a positive multiple of {batch_size}, got {n_steps!r} (n_steps)")
    kwargs: dict[str, Any] = {"gamma": gamma, "learning_rate": learning_rate, "seed": seed, "device": "cpu",
                              "verbose": 0,
                              "policy_kwargs": {"net_arch": {"pi": list(net_arch), "vf": list(net_arch)}}}
    if algo_cls is PPO:
        kwargs.update(n_steps=n_steps, batch_size=batch_size, n_epochs=10, gae_lambda=0.95, ent_coef=ent_coef)
    else:  # A2C: short rollouts, one gradient step each
        n_steps = 64
        kwargs.update(n_steps=n_steps, gae_lambda=0.95, ent_coef=ent_coef)
    rl_env = Monitor(make_env(train_seeds, choice_only))
    rl_env.reset(seed=seed)
    policy_cls: Any = "MlpPolicy"
    if policy == "rule":
        from flowherd.control.paths_rule import PathsRulePolicy

        policy_cls = PathsRulePolicy
        kwargs["policy_kwargs"] = {"net_arch": {"pi": [], "vf": list(net_arch)}}
    model = algo_cls(policy_cls, rl_env, **kwargs)
    if policy == "rule" and rule_init == "index":
        from flowherd.control.paths_rule import WARM_HOLD_SLOPE, WARM_RANK_WEIGHT, rule_parameters

        rule_parameters(model.policy.action_net, rank_weight=WARM_RANK_WEIGHT, hold_slope=WARM_HOLD_SLOPE)

    # -- 2. behaviour cloning ----------------------------------------------------------------------
    bc_accuracy = (behaviour_clone(model.policy, data, epochs=bc_epochs, seed=seed, smoothing=bc_smoothing,
                                   balance=bc_balance)
                   if n_bc else 0.0)
    stats = clone_stats(model.policy, data) if n_bc else None
    say(f"behaviour cloning: the structured action on {100 * bc_accuracy:.1f}% of {len(data['action'])} "
        f"samples ({time.perf_counter() - t0:.0f} s in)"
        + (f"; entropy {stats.entropy_nats:.3f} of {stats.max_entropy_nats:.3f} nats, the structured "
           f"action's probability {stats.teacher_prob:.3f}" if stats is not None else ""))

    # -- reference points on the validation seeds --------------------------------------------------
    structured = evaluate(reference, val_env, val_seeds)
    from flowherd.control import make_controller

    none = evaluate(lambda: make_controller("none"), val_env, val_seeds)
    say(f"references on validation seeds {list(val_seeds)}: structured policy {structured:.4g} s, no control "
        f"{none:.4g} s mean JCT ({time.perf_counter() - t0:.0f} s in)")

    # -- 3. RL with periodic validation ------------------------------------------------------------
    every = eval_every if eval_every is not None else max(n_steps, steps // 10)
    last_path = _companion(out, "_last.zip")
    curve: list[CurvePoint] = []
    best = {"jct": math.inf, "steps": 0}

    cost = {"validate_s": 0.0}

    def validate(done: int) -> CurvePoint:
        v0 = time.perf_counter()
        jct = evaluate(learnt, val_env, val_seeds)
        cost["validate_s"] = max(cost["validate_s"], time.perf_counter() - v0)
        point = CurvePoint(steps=done, wall_s=time.perf_counter() - t0, mean_jct_s=jct,
                           cpu_s=time.process_time() - cpu0)
        curve.append(point)
        if jct < best["jct"]:
            best.update(jct=jct, steps=done)
            _save(model, out)
        if progress is not None:
            progress(done, steps, point)
        return point

    class Validation(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = every

        def _on_step(self) -> bool:
            # room left for the validation that closes the curve (after learn())
            if deadline is not None and time.perf_counter() + cost["validate_s"] > deadline:
                say(f"time limit: RL stops at {self.num_timesteps} steps, leaving "
                    f"{cost['validate_s']:.0f} s for the last validation")
                return False
            if self.num_timesteps >= self.next_eval:
                if deadline is not None and time.perf_counter() + 2 * cost["validate_s"] > deadline:
                    return True  # no room for this one and the last: the last one closes the curve
                validate(self.num_timesteps)
                self.next_eval += every
            elif progress is not None and self.num_timesteps % 64 == 0:
                progress(self.num_timesteps, steps, None)
            return True

    validate(0)
    _save(model, _companion(out, "_start.zip"))  # the warm start (after cloning), for held-out comparisons
    say(f"RL ({algo}): {steps} steps, validating every {every} ({time.perf_counter() - t0:.0f} s in)")
    model.learn(total_timesteps=steps, callback=Validation())
    done = int(model.num_timesteps)
    if curve[-1].steps != done:
        validate(done)
    _save(model, last_path)
    for e in (env, val_env, rl_env, probe):
        e.close()

    curve_path = _companion(out, "_curve.csv")
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["steps", "wall_s", "mean_jct_s", "cpu_s"])
    for p in curve:
        w.writerow([p.steps, f"{p.wall_s:.3f}", f"{p.mean_jct_s:.9g}", f"{p.cpu_s:.3f}"])
    atomic.write_text(curve_path, buf.getvalue(), field="--out")
    return TrainResult(model_path=out, last_model_path=last_path, curve_path=curve_path, curve=tuple(curve),
                       best_steps=int(best["steps"]), structured_mean_jct_s=structured,
                       none_mean_jct_s=none, bc_accuracy=float(bc_accuracy), bc_samples=len(data["action"]),
                       bc_stats=stats, train_seeds=train_seeds, val_seeds=val_seeds, n_steps=n_steps,
                       steps=done,
                       wall_s=time.perf_counter() - t0)
