"""Members of the rule family set by hand on ``flowherd/PathsDelays-v0``: does the family contain the room?

The rule family (`flowherd.control.paths_rule`, docs/rl-structure.md, "The learner that uses it")
scores each path option by a shared linear function of its features and holds by an affine function
of Theorem 1's ``W / theta``. Here a few members are set by hand and run greedily (the masked
argmax of `paths_rule.rule_logits` at every agent point, as a controller) on the validation seeds,
beside no control, the widest-share option at every point (the room of the family, docs/rl-learning.md)
and the flowherd policy. Validation seeds only (never the held-out test seeds of
benchmarks/rl_curves.py).

    python benchmarks/rl_members.py --name rl_members
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "rl_small.yaml"
NEVER = (-10.0, -1e3)  # hold logit far below zero wherever something waits: never hold
THEOREM1 = (-10.0, 10.0)  # hold iff W / theta < 1
# (name, w over (minus rank, new-flow rate, utilization, wait / bytes, W / theta, own-pair rate), (u, v))
MEMBERS = [
    ("index rule: rank 0, hold iff W/theta < 1", (100, 0, 0, 0, 0, 0), THEOREM1),
    ("rank 0, never hold", (100, 0, 0, 0, 0, 0), NEVER),
    ("largest own-pair rate, never hold", (0, 0, 0, 0, 0, 100), NEVER),
    ("largest own-pair rate, then new-flow rate, never hold", (0, 10, 0, 0, 0, 100), NEVER),
    ("largest new-flow rate, never hold", (0, 100, 0, 0, 0, 0), NEVER),
    ("least utilized, never hold", (0, 0, -100, 0, 0, 0), NEVER),
]


class HandRule:
    """A member of the rule family as a controller: the greedy masked action of its logits."""

    def __init__(self, w, u: float, v: float):
        self.w, self.u, self.v = np.asarray(w, np.float64), float(u), float(v)
        self.name = "rule-member"

    def reset(self, seed: int) -> None:
        """Stateless."""

    def decide(self, point, view):
        from flowherd.control import paths_agent
        from flowherd.control.herd import asks_agent
        from flowherd.control.paths_rule import rule_logits

        if not asks_agent(point):
            return None
        obs, mask, _default, ctx = paths_agent.prepare("paths-index", point, view)
        logits = np.where(mask, rule_logits(obs, self.w, self.u, self.v), -np.inf)
        return paths_agent.decide("paths-index", int(np.argmax(logits)), ctx)


class WidestEverywhere:
    """The widest-share option (``paths-raw`` action 2) at every agent point, never holding."""

    name = "widest-everywhere"

    def reset(self, seed: int) -> None:
        """Stateless."""

    def decide(self, point, view):
        from flowherd.control import paths_agent
        from flowherd.control.herd import asks_agent

        if not asks_agent(point):
            return None
        _obs, mask, _default, ctx = paths_agent.prepare("paths-raw", point, view)
        return paths_agent.decide("paths-raw", 2 if mask[2] else 0, ctx)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--seeds", type=int, nargs="+", default=[4, 5], help="validation seeds")
    ap.add_argument("--name", default=None, help="save as benchmarks/results/NAME.json (record.save)")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(HERE))
    from flowherd.control import make_controller
    from flowherd.control.herd import HerdController
    from rl_curves import _jct, scenario_source

    c0 = time.process_time()
    src = scenario_source(args.scenario, "roce")
    policies = [("no control", lambda: make_controller("none")),
                ("widest option everywhere", WidestEverywhere), ("flowherd policy", HerdController)]
    policies += [(name, (lambda w=w, h=h: HandRule(w, *h))) for name, w, h in MEMBERS]
    rows, figures = [], {}
    print(f"{args.scenario.name}, network roce, grant buffer, seeds {args.seeds}: mean JCT (s)")
    for name, factory in policies:
        jct = _jct(factory, src, args.seeds)
        rows.append([name, round(float(np.mean(jct)), 3)] + [round(x, 3) for x in jct])
        figures[name] = {"value": round(float(np.mean(jct)), 3), "unit": "s"}
        print(f"  {name:<56} {np.mean(jct):7.3f}  per seed " + ", ".join(f"{x:.3f}" for x in jct), flush=True)
    total = time.process_time() - c0
    print(f"CPU: {total:.0f} CPU-s")
    figures["CPU"] = {"value": round(total, 1), "unit": "CPU-s"}
    if args.name is not None:
        import record

        record.save(args.name, figures, tables=[record.table(
            "hand-set members of the rule family, greedy, mean JCT on the validation seeds",
            ["policy", "mean (s)"] + [f"seed {s} (s)" for s in args.seeds], rows)],
            notes=f"{args.scenario.name}, network roce, grant buffer, seeds {args.seeds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
