"""Learning curves of reinforcement learning with and without the policy's structure (issue 14).

Three learners, each with the same budget of environment steps, the same training seeds (trace
windows), the same validation seeds and the same SB3 seed, on the small cluster of
benchmarks/scenarios/rl_small.yaml under the ``buffer`` grant:

* ``ppo-raw``: PPO from scratch on the unstructured action space (a delay as a fraction of the
  job's period, `flowherd.control.agent.RAW_DELAY_FRACTIONS`);
* ``ppo-structured``: PPO from scratch on the structured action space (whether the flowherd
  policy's rule holds the collective: its interleaving shift, its yield to a job with less work
  left, else the threshold rule's wait; `flowherd.control.agent`);
* ``bc+ppo``: the same structured space, warm-started by behaviour cloning of the flowherd policy
  (`flowherd.rl.train`), then PPO.

Every ``--eval-every`` steps the greedy policy runs on the validation seeds (mean JCT, jobs
unfinished at the horizon counted to it): the learning curve. The table gives each learner's
validation mean JCT at step 0 and at its best, the steps it took to come within 5% of the best
validation JCT any learner reached, and its best model's mean JCT on held-out test seeds and on
a later window of the trace never trained on (``skip``: jobs further on), beside no control and
the flowherd policy on the same seeds. The figure (--figure) draws the three curves.

    python benchmarks/rl_curves.py --figure docs/rl_curves.png   # about 30 min on the shared 2 cores
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "rl_small.yaml"
LEARNERS = (("ppo-raw", "raw", False), ("ppo-structured", "structured", False),
            ("bc+ppo", "structured", True))


def _scenario(skip: int | None = None) -> dict:
    from flowherd.experiments.scenario import read_scenario_mapping

    src = read_scenario_mapping(str(SCENARIO))
    src["controller"] = {"name": "none", "levers": "buffer"}
    if skip is not None:
        traces = [{**t, "skip": skip} for t in src["workload"]["traces"]]
        src["workload"] = {**src["workload"], "traces": traces}
    return src


def _jct(controller_factory, source: dict, seeds) -> np.ndarray:
    """Per seed, the mean JCT of one run (unfinished jobs counted to the horizon), seconds."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping

    out = []
    for s in seeds:
        run = run_scenario(scenario_from_mapping({**source, "seed": int(s)}), solo=False,
                           controller=controller_factory())
        out.append(float(run.cluster.censored_jct_s().mean()))
    return np.asarray(out)


def _ci(x: np.ndarray) -> str:
    if x.size < 2:
        return f"{x.mean():.3f}"
    h = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return f"{x.mean():.3f} +-{h:.3f}"


def _held_out(args: argparse.Namespace, src: dict, models: dict[str, Path]) -> None:
    """Mean JCT of no control, the flowherd policy and each learner's model on the test seeds
    (windows never trained on) and on the same seeds later in the trace, with 95% CIs."""
    from flowherd.control import make_controller
    from flowherd.control.herd import HerdController
    from flowherd.control.model import PolicyController, load_policy

    later = _scenario(skip=args.later_skip)
    print(f"\nheld-out: mean JCT over test seeds {args.test_seeds} (windows never trained on), 95% CI; "
          f"'later' = the same seeds {args.later_skip} trace jobs further on")
    rows = {"none": lambda: make_controller("none"), "flowherd": lambda: HerdController()}
    for label, (_, actions, _) in zip(models, LEARNERS, strict=True):
        pol = load_policy(models[label])
        rows[label] = lambda pol=pol, a=actions: PolicyController(pol, actions=a)
    base = {}
    print(f"{'controller':<16} {'test seeds':>16} {'vs none':>8} {'later window':>16} {'vs none':>8}")
    for label, fac in rows.items():
        a, b = _jct(fac, src, args.test_seeds), _jct(fac, later, args.test_seeds)
        base.setdefault("a", a)
        base.setdefault("b", b)
        print(f"{label:<16} {_ci(a):>16} {100 * (a.mean() / base['a'].mean() - 1):>+7.1f}% {_ci(b):>16} "
              f"{100 * (b.mean() / base['b'].mean() - 1):>+7.1f}%", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4096, help="environment steps of RL per learner")
    ap.add_argument("--eval-every", type=int, default=1024)
    # seed s is the window of trace jobs 5s..5s+4 (seed_stride 5; the filtered trace has about 128)
    ap.add_argument("--train-seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--val-seeds", type=int, nargs="+", default=[4, 5])
    ap.add_argument("--test-seeds", type=int, nargs="+", default=[6, 7, 8, 9, 10])
    ap.add_argument("--later-skip", type=int, default=60,
                    help="trace jobs skipped for the later windows (test seeds 6-10 then hold jobs 90-114, "
                         "disjoint from the training, validation and test windows)")
    ap.add_argument("--seed", type=int, default=0, help="SB3 / torch seed of every learner")
    ap.add_argument("--out", type=Path, default=Path("rl_curves"), help="directory for the models")
    ap.add_argument("--figure", type=Path, default=None, help="write the learning-curve figure here")
    ap.add_argument("--eval-only", action="store_true",
                    help="train nothing: evaluate the best models an earlier run saved in --out "
                         "(LABEL.zip) on the held-out seeds and the later window")
    args = ap.parse_args(argv)

    from flowherd.rl.train import train

    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    src = _scenario()
    if args.eval_only:
        missing = [lab for lab, *_ in LEARNERS if not (args.out / f"{lab}.zip").is_file()]
        if missing:
            print(f"error: no saved model {args.out / (missing[0] + '.zip')} (--out, --eval-only)",
                  file=sys.stderr)
            return 2
        _held_out(args, src, {lab: args.out / f"{lab}.zip" for lab, *_ in LEARNERS})
        print(f"\nwall {time.perf_counter() - t0:.0f} s")
        return 0
    results = {}
    for label, actions, warm in LEARNERS:
        t = time.perf_counter()
        r = train(src, out=args.out / f"{label}.zip", steps=args.steps, seed=args.seed,
                  eval_every=args.eval_every, train_seeds=args.train_seeds, val_seeds=args.val_seeds,
                  bc_episodes=None if warm else 0, actions=actions,
                  log=lambda line, lab=label: print(f"  [{lab}] {line}", flush=True))
        results[label] = r
        print(f"{label}: {r.steps} steps in {time.perf_counter() - t:.0f} s, validation mean JCT "
              + ", ".join(f"{p.steps}:{p.mean_jct_s:.3f}" for p in r.curve), flush=True)

    ref = next(iter(results.values()))
    best_all = min(min(p.mean_jct_s for p in r.curve) for r in results.values())
    print(f"\n== learning curves on {SCENARIO.name}, grant buffer: {args.steps} steps per learner, "
          f"train seeds {args.train_seeds}, validation seeds {args.val_seeds}, SB3 seed {args.seed} ==")
    print(f"validation: no control {ref.none_mean_jct_s:.3f} s, flowherd policy "
          f"{ref.structured_mean_jct_s:.3f} s; best of any learner {best_all:.3f} s")
    print(f"{'learner':<16} {'JCT step 0':>11} {'best JCT':>9} {'at step':>8} {'steps to 5%':>12} "
          f"{'wall s':>7}")
    for label, r in results.items():
        within = [p.steps for p in r.curve if p.mean_jct_s <= 1.05 * best_all]
        reach = str(within[0]) if within else "never"
        best = min(r.curve, key=lambda p: p.mean_jct_s)
        print(f"{label:<16} {r.curve[0].mean_jct_s:>11.3f} {best.mean_jct_s:>9.3f} {best.steps:>8} "
              f"{reach:>12} {r.wall_s:>7.0f}")

    _held_out(args, src, {lab: r.model_path for lab, r in results.items()})

    if args.figure is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.6))
        for label, r in results.items():
            ax.plot([p.steps for p in r.curve], [p.mean_jct_s for p in r.curve], marker="o", label=label)
        ax.axhline(ref.structured_mean_jct_s, color="k", ls="--", lw=1, label="flowherd policy")
        ax.axhline(ref.none_mean_jct_s, color="grey", ls=":", lw=1, label="no control")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("validation mean JCT (s)")
        ax.set_title(f"RL on {SCENARIO.stem}, buffer grant")
        ax.legend(fontsize=8)
        fig.tight_layout()
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.figure, dpi=120)
        print(f"figure: {args.figure}")
    print(f"\nwall {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
