"""How much room the structured action space leaves a learner: rule policies in it.

In the structured space (`flowherd.control.agent`) a learner chooses, at each collective that
crosses the network, only *whether* the flowherd policy's rule holds it (its interleaving shift,
else the threshold rule's wait for the competing burst, `flowherd.control.threshold` at theta 0);
under the ``buffer`` grant the priority class does nothing. So a structured learner can differ
from the flowherd policy only at the points where buffering is possible (``buffer_s > 0``), and
every policy it can learn lies between a few corners, which this script runs episode by episode
in the environment (`flowherd.rl.env.BufferingEnv`):

* ``flowherd``: the policy's own action (what behaviour cloning copies);
* ``never``: never buffer (the policy without its shifts);
* ``always``: buffer wherever possible (threshold buffering at theta 0 everywhere, shifts kept);
* ``slack>q``: buffer only where the job's slack exceeds ``q`` of its period (the observed
  feature ``slack_over_period``), shifts included; a rule a learner could find from its input.

Per seed it prints the agent points, the points with a choice, the points held, and each rule's
mean JCT (jobs unfinished at the horizon counted to it).

    python studies/rl_room.py --scenario benchmarks/scenarios/rl_small.yaml --seeds 4 5 6 7 8
"""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"  # its scenarios and rl_curves
RULES = ("flowherd", "never", "always", "slack>0.1")


def _action(rule: str, obs: np.ndarray, info: dict) -> int:
    from flowherd.control.herd import ACTIONS, FEATURE_NAMES

    a = int(info["structured_action"])
    if rule == "flowherd":
        return a
    cls = ACTIONS[a][0]
    can = bool(info["action_mask"][ACTIONS.index((cls, True))])
    if rule == "never":
        hold = False
    elif rule == "always":
        hold = can
    elif rule.startswith("slack>"):
        hold = can and float(obs[FEATURE_NAMES.index("slack_over_period")]) > float(rule[6:])
    else:
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULES}")
    return ACTIONS.index((cls, hold))


def episode(env, seed: int, rule: str) -> dict:
    """One episode of ``rule``: points, points with a choice, points held, mean JCT."""
    from flowherd.control.herd import ACTIONS

    obs, info = env.reset(options={"scenario_seed": int(seed)})
    n = choice = held = 0
    done = False
    while not done:
        a = _action(rule, obs, info)
        cls = ACTIONS[a][0]
        n += 1
        choice += bool(info["action_mask"][ACTIONS.index((cls, True))])
        held += ACTIONS[a][1]
        obs, _, done, _, info = env.step(a)
    return {"points": n, "choice": choice, "held": held, "mean_jct_s": float(info["mean_jct_s"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=BENCH / "scenarios" / "rl_small.yaml")
    ap.add_argument("--network", default="roce")
    ap.add_argument("--seeds", type=int, nargs="+", default=[4, 5, 6, 7, 8])
    ap.add_argument("--rules", nargs="+", default=list(RULES))
    args = ap.parse_args(argv)

    sys.path.insert(0, str(BENCH))
    from flowherd.rl.env import BufferingEnv
    from rl_curves import scenario_source

    env = BufferingEnv(scenario_source(args.scenario, args.network), seeds=args.seeds)
    print(f"== structured space's room on {args.scenario.name}, network {args.network}, grant buffer ==")
    print(f"{'seed':>4} {'points':>7} {'choice':>7} " + " ".join(f"{r:>18}" for r in args.rules))
    jct = {r: [] for r in args.rules}
    for s in args.seeds:
        rows = {r: episode(env, s, r) for r in args.rules}
        first = rows[args.rules[0]]
        for r in args.rules:
            jct[r].append(rows[r]["mean_jct_s"])
        print(f"{s:>4} {first['points']:>7} {first['choice']:>7} "
              + " ".join(f"{rows[r]['mean_jct_s']:>9.4f} ({rows[r]['held']:>4} held)" for r in args.rules),
              flush=True)
    env.close()
    base = np.asarray(jct[args.rules[0]])
    print("mean " + " ".join(f"{r}: {np.mean(v):.4f} s ({100 * (np.mean(v) / base.mean() - 1):+.2f}%)"
                             for r, v in jct.items()))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"CPU {ru.ru_utime + ru.ru_stime:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
