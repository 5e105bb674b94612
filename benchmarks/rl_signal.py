"""How much one decision of ``flowherd/PathsDelays-v0`` is worth, against the noise PPO sees it in.

The simulator is deterministic, so the worth of one decision is measured exactly: on a training
seed, run no control; then, at one decision point drawn at random, take the widest-share option
(``paths-raw`` action 2, the option whose every-point use gives most of the room) and no control
everywhere else; the change of the mean JCT is that decision's effect. Against it, the noise: the
spread of the advantages PPO would compute on the same episodes (GAE with the cloned critic of
``bc+ppo``, ``gamma`` 0.999, ``lambda`` 0.95, before its per-batch normalization), under the JCT
reward and under the progress-shaped one (`flowherd.rl.paths_env`). A policy gradient tells a
better action from the teacher's at a point only once it has sampled it about
``4 (sd of the advantage / its mean effect)^2`` times (two standard errors); divided by the
probability the clone samples it, that is the environment steps the learner needs, printed with
the CPU they would take at the measured cost of a step. Training seeds only (never the held-out
test seeds of benchmarks/rl_curves.py).

    python benchmarks/rl_signal.py --probes 15 --name rl_signal
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "rl_small.yaml"
WIDEST = 2  # paths-raw: 2 * option + hold, option 1 = widest share, no hold


def _episode(env, seed: int, pick) -> tuple[float, int, list]:
    """One episode on ``seed`` with ``pick(k, info) -> action``: mean JCT, decisions, (obs, reward)."""
    obs, info = env.reset(options={"scenario_seed": seed})
    k, steps = 0, []
    while True:
        a = pick(k, info)
        nxt, r, term, _, info = env.step(a)
        steps.append((obs, r))
        obs = nxt
        k += 1
        if term:
            return float(info["mean_jct_s"]), k, steps


def _gae(values: np.ndarray, rewards: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    adv = np.zeros(len(rewards))
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        nxt = values[t + 1] if t + 1 < len(rewards) else 0.0
        acc = rewards[t] + gamma * nxt - values[t] + gamma * lam * acc
        adv[t] = acc
    return adv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="training seeds")
    ap.add_argument("--probes", type=int, default=15, help="single-decision deviations per seed")
    ap.add_argument("--smoothing", type=float, nargs="+", default=[0.1, 0.5],
                    help="label smoothings of the clones (bc+ppo, bc+ppo-shaped)")
    ap.add_argument("--cpu-per-step", type=float, default=None,
                    help="CPU-s per environment step of PPO (default: measured here, simulation only)")
    ap.add_argument("--name", default=None, help="save as benchmarks/results/NAME.json (record.save)")
    args = ap.parse_args(argv)

    import torch
    from stable_baselines3 import PPO

    sys.path.insert(0, str(HERE))
    from flowherd.experiments.scenario import scenario_from_mapping
    from flowherd.rl.curves import mean_ci
    from flowherd.rl.paths_env import PathsEnv
    from flowherd.rl.train import behaviour_clone, clone_stats, collect_structured
    from rl_curves import scenario_source

    torch.set_num_threads(1)
    c0 = time.process_time()
    src = scenario_source(args.scenario, "roce")
    horizon_s = scenario_from_mapping(src).horizon_s
    rng = np.random.default_rng(0)

    # -- 1. the worth of one decision (exact: deterministic simulation) ----------------------------
    raw = PathsEnv(src, seeds=args.seeds, actions="paths-raw", warm="none")
    effects, rows = [], []
    sim_steps, sim_cpu = 0, 0.0
    for s in args.seeds:
        t = time.process_time()
        base, n, _ = _episode(raw, s, lambda _k, i: i["structured_action"])
        sim_cpu += time.process_time() - t
        sim_steps += n
        widest, _, _ = _episode(raw, s, lambda _k, i: WIDEST if i["action_mask"][WIDEST]
                                else i["structured_action"])
        d = []
        for k in rng.choice(n, size=min(args.probes, n), replace=False):
            def pick(j, i, k=int(k)):
                return WIDEST if j == k and i["action_mask"][WIDEST] else i["structured_action"]
            d.append(_episode(raw, s, pick)[0] - base)
        d = np.asarray(d)
        effects.append(d)
        rows.append([s, n, round(base, 4), round(100 * (widest / base - 1), 2), round(1e3 * d.mean(), 3),
                     round(1e3 * d.std(ddof=1), 3), round(float(np.mean(d < 0)), 2),
                     round(float(np.mean(d > 0)), 2)])
    raw.close()
    allfx = np.concatenate(effects)
    fx_m, fx_h = mean_ci(allfx)
    cpu_step = args.cpu_per_step if args.cpu_per_step is not None else sim_cpu / max(sim_steps, 1)
    print(f"== the worth of one decision on {args.scenario.name}, training seeds {args.seeds} ==")
    print("seed  decisions  none JCT (s)  widest everywhere (%)  one widest decision: mean (ms)  sd (ms)  "
          "helps  hurts")
    for r in rows:
        print(f"{r[0]:>4} {r[1]:>10} {r[2]:>13.3f} {r[3]:>+22.2f} {r[4]:>+31.3f} {r[5]:>8.3f} {r[6]:>6.2f} "
              f"{r[7]:>6.2f}")
    print(f"one decision, all seeds: {1e3 * fx_m:+.3f} +-{1e3 * fx_h:.3f} ms mean JCT (95% CI over "
          f"{allfx.size} probes); sd {1e3 * allfx.std(ddof=1):.3f} ms")

    # -- 2. the noise PPO sees it in: advantages of the cloned critic ------------------------------
    figures: dict = {"one widest-share decision: mean JCT change": {
        "value": round(1e3 * fx_m, 4), "unit": "ms", "ci95": round(1e3 * fx_h, 4)}}
    delta_ret = abs(fx_m) / horizon_s  # the return is -mean JCT / horizon
    noise_rows = []
    for reward in ("jct", "progress"):
        env = PathsEnv(src, seeds=args.seeds, actions="paths-index", warm="none", reward=reward)
        data = collect_structured(env, list(args.seeds), gamma=0.999)
        lens = data["episode_len"]
        rewards = np.asarray(data["ret"], np.float64)
        # rewards from the returns-to-go: r_t = G_t - gamma G_{t+1} within an episode
        r_all, lo = [], 0
        for n in lens:
            g = rewards[lo:lo + n]
            r_all.append(g - 0.999 * np.append(g[1:], 0.0))
            lo += n
        for sm in args.smoothing:
            model = PPO("MlpPolicy", env, seed=0, device="cpu",
                        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]}})
            behaviour_clone(model.policy, data, epochs=10, seed=0, smoothing=sm)
            st = clone_stats(model.policy, data)
            with torch.no_grad():
                v = model.policy.predict_values(torch.as_tensor(data["obs"])).flatten().numpy()
            v = v.astype(np.float64)
            adv, lo = [], 0
            for n, r in zip(lens, r_all, strict=True):
                adv.append(_gae(v[lo:lo + n], r, 0.999, 0.95))
                lo += n
            sd = float(np.concatenate(adv).std())
            allowed = data["mask"].sum(axis=1)
            p_alt = float(np.mean((1 - st.teacher_prob) / np.maximum(allowed - 1, 1)))
            ratio = sd / delta_ret if delta_ret > 0 else math.inf
            need = 4 * ratio ** 2
            steps = need / p_alt if p_alt > 0 else math.inf
            noise_rows.append([reward, sm, round(st.entropy_nats, 3), round(st.teacher_prob, 3),
                               round(p_alt, 4),
                               f"{sd:.3g}", f"{ratio:.3g}", f"{need:.3g}", f"{steps:.3g}",
                               round(steps * cpu_step / 3600, 1)])
            figures[f"env steps to tell one decision's worth, reward {reward}, smoothing {sm}"] = {
                "value": float(f"{steps:.3g}"), "unit": "steps"}
        env.close()
    print(f"\n== the noise (GAE advantages of the cloned critic on the teacher's episodes; one decision's "
          f"worth {delta_ret:.3g} in return units) ==")
    print("reward    smoothing  entropy (nats)  p(teacher)  p(an alternative)  sd(advantage)  sd/worth  "
          "samples of it  env steps  CPU-h")
    for r in noise_rows:
        print(f"{r[0]:<9} {r[1]:>9} {r[2]:>15} {r[3]:>11} {r[4]:>18} {r[5]:>14} {r[6]:>9} {r[7]:>14} "
              f"{r[8]:>10} {r[9]:>6}")
    how = "given" if args.cpu_per_step else "the simulation alone"
    print(f"(CPU per env step {1e3 * cpu_step:.2f} ms: {how})")
    total = time.process_time() - c0
    print(f"CPU: {total:.0f} CPU-s")
    figures["CPU"] = {"value": round(total, 1), "unit": "CPU-s"}
    if args.name is not None:
        import record

        record.save(args.name, figures, tables=[
            record.table("one decision's worth per training seed",
                         ["seed", "decisions", "none mean JCT (s)", "widest everywhere vs none (%)",
                          "one widest decision, mean (ms)", "sd (ms)", "share helped", "share hurt"], rows),
            record.table("the noise it is learnt in",
                         ["reward", "label smoothing", "clone entropy (nats)", "p(teacher)",
                          "p(an alternative)", "sd(advantage)", "sd / worth", "samples of the alternative",
                          "env steps", "CPU-h"],
                         noise_rows)],
            notes=f"{args.scenario.name}, network roce, grant buffer, training seeds {args.seeds}, "
                  f"{args.probes} probes per seed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
