"""Learning curves of reinforcement learning with and without the policy's structure.

``--env paths`` (``flowherd/PathsDelays-v0``: the agent picks a path option and whether to hold each
collective, `flowherd.control.paths_agent`; asked only where its actions differ) compares:

* ``ppo-raw``: PPO from scratch, options in a fixed order (default ECMP routes, widest share,
  every pair over candidate k) and each option's link features;
* ``ppo-index``: PPO from scratch, the same decisions ranked by the index of docs/rl-structure.md
  (Theorem 2) with Theorem 1's hold feature: the proven structure as the policy's inputs and outputs;
* ``ppo-rule``: PPO from scratch on the same space with the rule family as the policy class
  (`flowherd.control.paths_rule`: one linear score shared by the options, a hold logit affine in
  Theorem 1's ``W / theta``; eight parameters from a random start, the same MLP critic);
* ``rule+ppo``: ``ppo-rule`` warm-started at the index rule (the rule family's parameters set at it,
  softly: `flowherd.control.paths_rule.WARM_RANK_WEIGHT`; no cloning), then PPO: what learning adds
  to the proven rule;
* ``bc+ppo``: the index space, warm-started by behaviour cloning of no control (the default routes,
  never holding; ``--warm``), then PPO: what learning adds to its warm start;
* ``bc+ppo-shaped``: the same with a softer clone (label smoothing 0.5) and the reward shaped by the
  jobs' progress (`flowherd.rl.paths_env`, ``reward="progress"``: the same return, each decision's
  credit within the iteration it changes); benchmarks/rl_signal.py measures why neither moves.

The references are no control, the index rule (rank 0, hold within Theorem 1's threshold) and the
flowherd policy; "room" counts the agent's decision points and what the rule corners give.

``--env buffering`` (``flowherd/Buffering-v0``) keeps the earlier comparison: three learners
(arms), each with the same budget of environment steps, the same training seeds
(trace windows), the same validation seeds and the same SB3 seeds, on the small cluster of
benchmarks/scenarios/rl_small.yaml under the ``buffer`` grant, on the network given by
``--network`` (default ``roce``, the congestion-aware model; set here, not in the YAML):

* ``ppo-raw``: PPO from scratch on the unstructured action space (a delay as a fraction of the
  job's period, `flowherd.control.agent.RAW_DELAY_FRACTIONS`);
* ``ppo-structured``: PPO from scratch on the structured action space (whether the flowherd
  policy's rule holds the collective: its interleaving shift, else the threshold rule's wait for
  the competing burst; `flowherd.control.agent`);
* ``bc+ppo``: the same structured space, warm-started by behaviour cloning of the flowherd policy
  (`flowherd.rl.train`), then PPO.

Every ``--eval-every`` steps the greedy policy runs on the validation seeds (mean JCT, jobs
unfinished at the horizon counted to it): the learning curve. Each (arm, SB3 seed) is one run in
its own process (``--jobs`` at a time, at most 2); its best model on validation is then run on
held-out test seeds (trace windows never trained on nor validated on) and on the same seeds
``--later-skip`` trace jobs further on. The table (`flowherd.rl.curves`) gives per arm the
validation JCT at step 0, at the end (and the return it equals, ``-mean JCT / horizon``), at its
best, the steps each seed took to come within 5% of the best policy (the lowest validation JCT of
any run or of the flowherd policy) or "not reached", the held-out JCTs with 95% CIs over the SB3
seeds, and the CPU seconds of a run. "Room" counts, per held-out episode of the flowherd policy,
the agent points and those where the structured space offers more than one decision (buffering
possible: ``buffer_s > 0``); only there can a structured agent differ from the policy.

    python benchmarks/rl_curves.py --results benchmarks/results/rl_curves_roce.json \
        --figure docs/rl_curves.png          # trains; --reuse FILE prints from stored runs
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "rl_small.yaml"
LEARNERS = {"ppo-raw": ("raw", False), "ppo-structured": ("structured", False),
            "bc+ppo": ("structured", True)}
PATH_LEARNERS = {"ppo-raw": ("paths-raw", False), "ppo-index": ("paths-index", False),
                 "ppo-rule": ("paths-index", False), "rule+ppo": ("paths-index", False),
                 "bc+ppo": ("paths-index", True), "bc+ppo-shaped": ("paths-index", True)}
# arms trained otherwise than the defaults of flowherd.rl.train.train: bc+ppo-shaped is bc+ppo with the
# reward shaped by the jobs' progress (flowherd.rl.paths_env, reward="progress": a decision's credit
# within the iteration it changes) and a softer clone (label smoothing 0.5: the clone of no control
# keeps the teacher's greedy action with probability about 0.56 instead of 0.87)
# ppo-rule is ppo-index with the policy class of the rule family (flowherd.control.paths_rule: one shared
# linear score of each option's features and a hold logit affine in Theorem 1's W / theta, eight learnable
# numbers from a random start; the critic the same MLP)
# rule+ppo is ppo-rule with its actor set at the index rule (a warm start without cloning)
TRAIN_KWARGS = {"bc+ppo-shaped": {"reward": "progress", "bc_smoothing": 0.5}, "ppo-rule": {"policy": "rule"},
                "rule+ppo": {"policy": "rule", "rule_init": "index"}}
WARM_ARMS = ("bc+ppo", "bc+ppo-shaped", "rule+ppo")


def learners(env: str) -> dict[str, tuple[str, bool]]:
    return PATH_LEARNERS if env == "paths" else LEARNERS


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def scenario_source(path: Path, network: str | None, skip: int | None = None) -> dict:
    """The scenario mapping under the ``buffer`` grant, its network set, its trace windows moved on
    by ``skip`` jobs if given."""
    from flowherd.experiments.scenario import read_scenario_mapping

    src = read_scenario_mapping(str(path))
    src["controller"] = {"name": "none", "levers": "buffer"}
    if network is not None:
        src["network"] = network
    if skip is not None:
        traces = [{**t, "skip": int(t.get("skip", 0)) + skip} for t in src["workload"].get("traces", [])]
        src["workload"] = {**src["workload"], "traces": traces}
    return src


def _jct(controller_factory, source: dict, seeds) -> list[float]:
    """Per seed, the mean JCT of one run (unfinished jobs counted to the horizon), seconds."""
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping

    out = []
    for s in seeds:
        run = run_scenario(scenario_from_mapping({**source, "seed": int(s)}), solo=False,
                           controller=controller_factory())
        out.append(float(run.cluster.censored_jct_s().mean()))
    return out


def _room(source: dict, seeds) -> list[dict]:
    """Per seed, the flowherd policy's episode in the structured space: agent points, points where
    buffering is possible (more than one distinct decision), points where the policy buffers."""
    from flowherd.control.herd import ACTIONS
    from flowherd.rl.env import BufferingEnv

    buffered = np.array([d for _c, d in ACTIONS])
    env = BufferingEnv(source, seeds=list(seeds))
    out = []
    for s in seeds:
        _, info = env.reset(options={"scenario_seed": int(s)})
        n = choice = held = 0
        done = False
        while not done:
            a = info["structured_action"]
            n += 1
            choice += bool(info["action_mask"][buffered].any())
            held += bool(buffered[a])
            _, _, done, _, info = env.step(a)
        out.append({"seed": int(s), "points": n, "choice": choice, "buffered": held})
    env.close()
    return out


def _paths_room(source: dict, seeds) -> list[dict]:
    """Per seed, the no-control episode in the paths space: agent points (where the options differ)
    and the points where holding is possible."""
    from flowherd.rl.paths_env import PathsEnv

    env = PathsEnv(source, seeds=list(seeds), actions="paths-index", warm="none")
    out = []
    for s in seeds:
        _, info = env.reset(options={"scenario_seed": int(s)})
        n = hold = 0
        done = False
        while not done:
            n += 1
            hold += bool(info["action_mask"][1::2].any())
            _, _, done, _, info = env.step(info["structured_action"])
        out.append({"seed": int(s), "points": n, "choice": n, "buffered": hold})
    env.close()
    return out


def reference_task(cfg: dict) -> dict:
    """No control and the flowherd policy (and, for the paths environment, the index rule) on the
    validation, test and later seeds; the room."""
    from flowherd.control import make_controller
    from flowherd.control.herd import HerdController
    from flowherd.control.paths_agent import PathsRuleController

    c0 = _cpu_s()
    src = scenario_source(Path(cfg["scenario"]), cfg["network"])
    later = scenario_source(Path(cfg["scenario"]), cfg["network"], cfg["later_skip"])
    out: dict = {}
    refs = [("none", lambda: make_controller("none")), ("flowherd", lambda: HerdController())]
    if cfg.get("env") == "paths":
        refs.append(("index rule", lambda: PathsRuleController(space="paths-index", warm="index")))
    for name, fac in refs:
        out[name] = {"val_jct_s": _jct(fac, src, cfg["val_seeds"]),
                     "test_jct_s": _jct(fac, src, cfg["test_seeds"]),
                     "later_jct_s": _jct(fac, later, cfg["test_seeds"])}
    room = _paths_room if cfg.get("env") == "paths" else _room
    out["room"] = room(src, cfg["test_seeds"])
    out["cpu_s"] = _cpu_s() - c0
    return {"kind": "reference", **out}


def run_task(cfg: dict) -> dict:
    """One (arm, SB3 seed): train, then its best model on the held-out seeds and windows."""
    import torch

    from flowherd.control.model import PathsPolicyController, PolicyController, load_policy
    from flowherd.rl.train import train

    torch.set_num_threads(1)
    arm, seed = cfg["arm"], int(cfg["seed"])
    actions, warm = learners(cfg.get("env", "buffering"))[arm]
    c0 = _cpu_s()
    src = scenario_source(Path(cfg["scenario"]), cfg["network"])
    out = Path(cfg["out"]) / f"{arm}_s{seed}.zip"
    r = train(src, out=out, steps=cfg["steps"], seed=seed, eval_every=cfg["eval_every"],
              train_seeds=cfg["train_seeds"], val_seeds=cfg["val_seeds"], bc_episodes=None if warm else 0,
              actions=actions, n_steps=cfg["n_steps"], choice_only=cfg.get("choice_only", False),
              bc_balance=cfg.get("bc_balance", False), warm=cfg.get("warm", "none"),
              time_limit_s=cfg.get("time_limit_s"),
              log=lambda line: print(f"  [{arm} s{seed}] {line}", flush=True), **TRAIN_KWARGS.get(arm, {}))
    train_cpu = _cpu_s() - c0
    pol = load_policy(r.model_path)
    later = scenario_source(Path(cfg["scenario"]), cfg["network"], cfg["later_skip"])
    if actions.startswith("paths"):
        def ctrl():
            return PathsPolicyController(pol, actions=actions)
    else:
        def ctrl():
            return PolicyController(pol, actions=actions)
    test = _jct(ctrl, src, cfg["test_seeds"])
    late = _jct(ctrl, later, cfg["test_seeds"])
    start_pol = load_policy(r.model_path.with_name(f"{r.model_path.stem}_start.zip"))
    if actions.startswith("paths"):
        start_test = _jct(lambda: PathsPolicyController(start_pol, actions=actions), src, cfg["test_seeds"])
    else:
        start_test = _jct(lambda: PolicyController(start_pol, actions=actions), src, cfg["test_seeds"])
    print(f"{arm} s{seed}: {r.steps} steps, {train_cpu:.0f} CPU-s training, curve "
          + ", ".join(f"{p.steps}:{p.mean_jct_s:.3f}" for p in r.curve), flush=True)
    return {"kind": "run", "arm": arm, "seed": seed, "steps": r.steps, "best_steps": r.best_steps,
            "bc_accuracy": r.bc_accuracy, "bc_samples": r.bc_samples, "n_steps": r.n_steps,
            "bc_entropy_nats": None if r.bc_stats is None else r.bc_stats.entropy_nats,
            "bc_teacher_prob": None if r.bc_stats is None else r.bc_stats.teacher_prob,
            "curve": [{"steps": p.steps, "mean_jct_s": p.mean_jct_s, "cpu_s": p.cpu_s} for p in r.curve],
            "test_jct_s": test, "later_jct_s": late, "start_test_jct_s": start_test, "train_cpu_s": train_cpu,
            "cpu_s": _cpu_s() - c0}


def _task(cfg: dict) -> dict:
    return reference_task(cfg) if cfg["kind"] == "reference" else run_task(cfg)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def report(data: dict, tol: float, figure: Path | None, name: str | None = None) -> None:
    """Print the table (and draw the figure) of stored results; with ``name``, save the headline
    figures and the table as benchmarks/results/NAME.json (`record.save`)."""
    from flowherd.rl.curves import format_table, mean_ci, summarize

    cfg, ref = data["config"], data["reference"]
    runs = [r for r in data["runs"] if r["arm"] in cfg["arms"]]
    path = Path(cfg["scenario"])
    if not path.is_file():
        path = SCENARIO.parent / path.name
    if path.is_file() and not scenario_source(path, None)["workload"].get("traces"):
        # no trace: the "later window" is the test seeds again, not another window
        runs = [{**r, "later_jct_s": []} for r in runs]
        ref = {**ref, **{k: {**ref[k], "later_jct_s": []} for k in ref if isinstance(ref[k], dict)}}
    policies = [k for k in ref if isinstance(ref[k], dict) and "val_jct_s" in ref[k]]
    fh_val = min(float(np.mean(ref[k]["val_jct_s"])) for k in policies if k != "none")
    none_val = float(np.mean(ref["none"]["val_jct_s"]))
    best_run = min((min(p["mean_jct_s"] for p in r["curve"]), r["arm"], r["seed"]) for r in runs)
    target = min(best_run[0], fh_val)
    print(f"== RL comparison on {Path(cfg['scenario']).name}, network {cfg['network']}, grant buffer "
          f"(commit {data.get('commit', '?')}) ==")
    asked = "only where it has a choice" if cfg.get("choice_only") else "at every collective on the network"
    cloning = "balanced" if cfg.get("bc_balance") else "unweighted"
    print(f"{cfg['steps']} env steps per run, validation every {cfg['eval_every']}, PPO rollout "
          f"{cfg['n_steps']}, agent asked {asked}, cloning {cloning}; train seeds {cfg['train_seeds']}, "
          f"validation seeds {cfg['val_seeds']}, test "
          f"seeds {cfg['test_seeds']}, later window = test seeds {cfg['later_skip']} trace jobs on; SB3 "
          f"seeds {sorted({r['seed'] for r in runs})}")
    print("validation mean JCT: " + ", ".join(f"{k} {float(np.mean(ref[k]['val_jct_s'])):.3f} s"
                                               for k in policies) + "; best run "
          f"{best_run[0]:.3f} s ({best_run[1]} seed {best_run[2]}); target (best policy) {target:.3f} s, "
          f"within {round(100 * tol)}% = {(1 + tol) * target:.3f} s")
    rows = summarize(runs, target=target, tol=tol)
    horizon_s = float(cfg["horizon_s"])
    print(format_table(rows, horizon_s=horizon_s, tol=tol))
    for pol in policies:
        t, la = mean_ci(ref[pol]["test_jct_s"]), mean_ci(ref[pol]["later_jct_s"])
        print(f"{pol + ' (policy)':<15} test seeds {t[0]:.3f} s, later window "
              f"{'-' if math.isnan(la[0]) else f'{la[0]:.3f} s'} (one run per seed)")
    print("\nheld-out, paired per test seed against the flowherd policy (each run's best model; mean over "
          "SB3 seeds, 95% CI over test seeds):")
    for arm in cfg["arms"]:
        rs = [r for r in runs if r["arm"] == arm]
        if not rs:
            continue
        parts = []
        for key in ("test_jct_s", "later_jct_s"):
            if not ref["flowherd"][key]:
                continue
            d = np.mean([np.asarray(r[key]) for r in rs], axis=0) - np.asarray(ref["flowherd"][key])
            m, h = mean_ci(d)
            base = float(np.mean(ref["flowherd"][key]))
            parts.append(f"{'test' if key == 'test_jct_s' else 'later'} {m:+.3f} +-{h:.3f} s "
                         f"({100 * m / base:+.1f}%)")
        start = [r["curve"][0]["mean_jct_s"] for r in rs]
        best = [min(p["mean_jct_s"] for p in r["curve"]) for r in rs]
        better = sum(b < s * (1 - 1e-9) for b, s in zip(best, start, strict=True))
        parts.append(f"best below its own step 0 on validation: {better} of {len(rs)} seeds")
        print(f"  {arm:<15} " + "; ".join(parts))
    room = ref.get("room", [])
    if room:
        pts = sum(x["points"] for x in room)
        ch = sum(x["choice"] for x in room)
        print(f"\nroom (flowherd episodes on the test seeds): {pts} agent points, {ch} with a choice in "
              f"the structured space ({100 * ch / max(pts, 1):.2f}%), {sum(x['buffered'] for x in room)} "
              "buffered; per seed " + ", ".join(f"{x['seed']}: {x['choice']}/{x['points']}" for x in room))
    total = sum(r["cpu_s"] for r in runs) + ref.get("cpu_s", 0.0)
    print(f"CPU: {total:.0f} CPU-s in all ({len(runs)} runs and the references)")
    figures, warm_rows = _headline(runs, rows, cfg, tol, ref)
    figures["CPU, runs and references"] = {"value": round(total, 1), "unit": "CPU-s"}
    if figure is not None:
        _figure(runs, cfg, fh_val, none_val, figure)
        print(f"figure: {figure}")
    if name is not None:
        sys.path.insert(0, str(HERE))
        import record

        cols = ["arm", "seeds", "val JCT step 0 (s)", "val JCT final (s)", "val JCT best (s)",
                "steps to within 5% (per seed)", "test JCT (s)", "test JCT vs warm start (%)", "ci95"]
        table_rows = []
        for r in rows:
            w = warm_rows.get(r.arm, (math.nan, math.nan))
            table_rows.append([r.arm, len(r.seeds), round(r.start[0], 4), round(r.final[0], 4),
                               round(r.best[0], 4),
                               ", ".join("not reached" if s is None else str(s) for s in r.steps_to),
                               round(r.test[0], 4), round(w[0], 3), round(w[1], 3)])
        for pol in policies:
            table_rows.append([f"{pol} (policy)", "", round(float(np.mean(ref[pol]["val_jct_s"])), 4), "", "",
                               "",
                               round(float(np.mean(ref[pol]["test_jct_s"])), 4), "", ""])
        title = f"{Path(cfg['scenario']).name}, env {cfg.get('env', 'buffering')}, grant buffer"
        record.save(name, figures, tables=[record.table(title, cols, table_rows)],
            notes=f"{cfg['steps']} steps per run, train seeds {cfg['train_seeds']}, validation "
                  f"{cfg['val_seeds']}, held-out test seeds {cfg['test_seeds']}")


def _headline(runs: list[dict], rows, cfg: dict, tol: float, ref: dict) -> tuple[dict, dict]:
    """The two criteria of the comparison, printed and as record figures: each arm's best model
    against its own warm start on the held-out seeds (paired per test seed, mean over the SB3 seeds,
    95% CI over the test seeds), and the steps the structured arm needs to come within ``tol`` of
    its best against the unstructured arm's."""
    from flowherd.rl.curves import mean_ci

    figures: dict = {}
    warm: dict = {}
    print("\nheld-out, each run's best model against its own warm start (its step-0 model), paired per "
          "test seed:")
    for arm in cfg["arms"]:
        rs = [r for r in runs if r["arm"] == arm and r.get("start_test_jct_s")]
        if not rs:
            continue
        best = np.mean([np.asarray(r["test_jct_s"]) for r in rs], axis=0)
        start = np.mean([np.asarray(r["start_test_jct_s"]) for r in rs], axis=0)
        m, h = mean_ci(100 * (best / start - 1))
        warm[arm] = (m, h)
        kind = "its random initialization"
        if arm.startswith("bc"):
            kind = "a clone of " + cfg.get("warm", "none")
        elif arm == "rule+ppo":
            kind = "the index rule"
        # the criterion is about improving on a warm start: an arm that starts from a random
        # initialization has none, and its gain over it says nothing (reported, not judged)
        met = (m <= -3.0 and m + h < 0) if arm in WARM_ARMS else None
        none = np.asarray(ref["none"]["test_jct_s"])
        mn, hn = mean_ci(100 * (best / none - 1))
        verdict = {True: "met", False: "not met", None: "not judged: no warm start"}[met]
        print(f"  {arm:<15} {m:+.2f} +-{h:.2f}% mean JCT against its warm start ({kind}; criterion: <= -3% "
              f"with a CI excluding 0: {verdict}); {mn:+.2f} +-{hn:.2f}% against no control")
        fig = {"value": round(m, 3), "unit": "%", "ci95": round(h, 3)}
        if met is not None:
            fig.update(target="<= -3%, CI excluding 0", met=bool(met))
        figures[f"{arm}: held-out mean JCT vs its warm start ({kind})"] = fig
        figures[f"{arm}: held-out mean JCT vs no control"] = {"value": round(mn, 3), "unit": "%",
                                                              "ci95": round(hn, 3)}
    # every structured arm against the unstructured one (paths: ppo-index, the index-ranked space with an
    # MLP, and ppo-rule, the rule family as the policy class)
    structs, raw = (("ppo-index", "ppo-rule"), "ppo-raw") if cfg.get("env") == "paths" \
        else (("ppo-structured",), "ppo-raw")
    for struct in structs:
        _convergence(runs, struct, raw, tol, figures)
    return figures, warm


def _convergence(runs: list[dict], struct: str, raw: str, tol: float, figures: dict) -> None:
    """Print and record whether ``struct`` reaches within ``tol`` of its best in at most a third of
    ``raw``'s steps (`flowherd.rl.curves.compare_convergence`), if both arms have runs."""
    from flowherd.rl.curves import compare_convergence

    curves = {arm: [([int(p["steps"]) for p in r["curve"]], [float(p["mean_jct_s"]) for p in r["curve"]])
                    for r in sorted((r for r in runs if r["arm"] == arm), key=lambda r: r["seed"])]
              for arm in (struct, raw)}
    if not (curves[struct] and curves[raw]):
        return
    c = compare_convergence(curves[struct], curves[raw], tol=tol)
    pct = round(100 * tol)
    verdict = {True: "met", False: "not met", None: "not judged: both arms start at their best"}[c.met]
    if c.met:
        verdict += " beyond the seeds' noise" if c.sure else " on the means, within the seeds' noise"
    print(f"\nsteps to within {pct}% of each run's own best validation JCT (per SB3 seed; mean +- 95% "
          "CI):")
    for arm, st, m, n, se in ((struct, c.structured, c.structured_mean, c.structured_learnt,
                               c.structured_settle),
                              (raw, c.unstructured, c.unstructured_mean, c.unstructured_learnt,
                               c.unstructured_settle)):
        settle = ", ".join("never" if x is None else str(x) for x in se)
        print(f"  {arm:<15} {list(st)}: {m[0]:.0f} +-{m[1]:.0f}; runs that left their step-0 band: "
              f"{n} of {len(st)}; in the band from then on: [{settle}]")
    print(f"  criterion, at most a third on the means: {struct} - {raw}/3 = {c.margin[0]:+.0f} "
          f"+-{c.margin[1]:.0f} steps (Welch 95% CI), ratio of means "
          f"{'-' if math.isnan(c.ratio) else f'{c.ratio:.2f}'}: {verdict}; per seed {c.per_seed_met} of "
          f"{min(len(c.structured), len(c.unstructured))}; mean curves {c.mean_curve_steps[0]} against "
          f"{c.mean_curve_steps[1]} steps")
    fig = {"value": None if math.isnan(c.ratio) else round(float(c.ratio), 3), "unit": "ratio"}
    if c.met is not None:
        fig.update(target="<= 1/3", met=c.met)
    figures[f"steps to within {pct}% of its best: {struct} over {raw}"] = fig
    figures[f"steps to within {pct}% of its best: {struct} mean"] = {
        "value": round(c.structured_mean[0], 1), "unit": "steps", "ci95": round(c.structured_mean[1], 1)}
    figures[f"steps to within {pct}% of its best: {raw} mean"] = {
        "value": round(c.unstructured_mean[0], 1), "unit": "steps",
        "ci95": round(c.unstructured_mean[1], 1)}
    figures[f"steps to within {pct}% of its best: {struct} - {raw}/3"] = {
        "value": round(c.margin[0], 1), "unit": "steps", "ci95": round(c.margin[1], 1),
        "target": "<= 0", "met": bool(c.met) if c.met is not None else None}


def _figure(runs: list[dict], cfg: dict, fh_val: float, none_val: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for k, arm in enumerate(cfg["arms"]):
        rs = [r for r in runs if r["arm"] == arm]
        if not rs:
            continue
        steps = [p["steps"] for p in rs[0]["curve"]]
        n = min(len(r["curve"]) for r in rs)
        v = np.array([[p["mean_jct_s"] for p in r["curve"][:n]] for r in rs])
        color = f"C{k}"
        ax.plot(steps[:n], v.mean(axis=0), marker="o", color=color, label=f"{arm} (mean of {len(rs)} seeds)")
        ax.fill_between(steps[:n], v.min(axis=0), v.max(axis=0), color=color, alpha=0.2, lw=0)
    ax.axhline(fh_val, color="k", ls="--", lw=1, label="flowherd policy")
    ax.axhline(1.05 * min(fh_val, min(min(p["mean_jct_s"] for p in r["curve"]) for r in runs)), color="k",
               ls=":", lw=0.8, label="within 5% of best")
    ax.axhline(none_val, color="grey", ls="-.", lw=1, label="no control")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("validation mean JCT (s)")
    ax.set_title(f"RL on {Path(cfg['scenario']).stem}, {cfg['network']}, buffer grant "
                 "(band: min-max over seeds)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--network", default="roce", help="network model set on the scenario (default roce)")
    ap.add_argument("--steps", type=int, default=8192, help="environment steps of RL per run")
    ap.add_argument("--eval-every", type=int, default=2048)
    ap.add_argument("--n-steps", type=int, default=512, help="PPO rollout per update, the same for every arm")
    ap.add_argument("--choice-only", action="store_true",
                    help="ask the agent only where its actions make different decisions (BufferingEnv)")
    ap.add_argument("--bc-balance", action="store_true",
                    help="weight behaviour cloning by the inverse frequency of each structured action")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="SB3 / torch seeds, one run each")
    ap.add_argument("--env", choices=["buffering", "paths"], default="buffering",
                    help="the environment: flowherd/Buffering-v0 or flowherd/PathsDelays-v0")
    ap.add_argument("--warm", choices=["none", "index"], default="none",
                    help="paths environment: the policy bc+ppo clones (none: no control)")
    ap.add_argument("--time-limit", type=float, default=None, help="wall seconds per training run")
    ap.add_argument("--name", default=None,
                    help="save the headline figures and table as benchmarks/results/NAME.json (record.save)")
    ap.add_argument("--arms", nargs="+", default=None,
                    help="learners (buffering: ppo-raw ppo-structured bc+ppo; paths: ppo-raw ppo-index "
                         "bc+ppo bc+ppo-shaped)")
    # seed s is the window of trace jobs 5s..5s+4 (seed_stride 5; the filtered trace has about 128)
    ap.add_argument("--train-seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--val-seeds", type=int, nargs="+", default=[4, 5])
    ap.add_argument("--test-seeds", type=int, nargs="+", default=[6, 7, 8, 9, 10])
    ap.add_argument("--later-skip", type=int, default=60,
                    help="trace jobs skipped for the later windows (test seeds 6-10 then hold jobs 90-114, "
                         "disjoint from the training, validation and test windows)")
    ap.add_argument("--jobs", type=int, default=2, choices=[1, 2], help="runs at once (two cores)")
    ap.add_argument("--out", type=Path, default=Path("rl_curves"), help="directory for the models")
    ap.add_argument("--results", type=Path, default=None, help="store the runs here (JSON), after each one")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="stored results: print the table from them, training only the runs they lack")
    ap.add_argument("--report-only", action="store_true", help="with --reuse: train nothing")
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--figure", type=Path, default=None, help="write the learning-curve figure here")
    args = ap.parse_args(argv)
    known = learners(args.env)
    args.arms = list(known) if args.arms is None else args.arms
    bad = [a for a in args.arms if a not in known]
    if bad:
        ap.error(f"--arms {bad[0]!r} is not a learner of --env {args.env}; expected {', '.join(known)}")

    from flowherd.experiments.scenario import scenario_from_mapping

    src = scenario_source(args.scenario, args.network)
    cfg = {"scenario": str(args.scenario), "network": args.network, "steps": args.steps,
           "eval_every": args.eval_every, "n_steps": args.n_steps, "choice_only": args.choice_only,
           "bc_balance": args.bc_balance, "train_seeds": args.train_seeds,
           "val_seeds": args.val_seeds,
           "test_seeds": args.test_seeds, "later_skip": args.later_skip, "arms": args.arms,
           "horizon_s": scenario_from_mapping(src).horizon_s, "out": str(args.out), "env": args.env,
           "warm": args.warm, "time_limit_s": args.time_limit}
    data = {"config": cfg, "commit": _commit(), "reference": None, "runs": []}
    if args.reuse is not None:
        old = json.loads(args.reuse.read_text())
        same = ("network", "steps", "eval_every", "n_steps", "choice_only", "bc_balance", "train_seeds",
                "val_seeds", "test_seeds", "later_skip", "env", "warm")
        if args.report_only:
            old["config"]["arms"] = [a for a in args.arms if any(r["arm"] == a for r in old["runs"])]
            report(old, args.tol, args.figure, args.name)
            return 0
        defaults = {"env": "buffering", "warm": "none"}
        if Path(old["config"]["scenario"]).name != args.scenario.name \
                or any(old["config"].get(k, defaults.get(k, False)) != cfg[k] for k in same):
            print(f"error: {args.reuse} was run with other settings; pass the same ones (--reuse)",
                  file=sys.stderr)
            return 2
        data["reference"], data["runs"] = old["reference"], old["runs"]
    have = {(r["arm"], r["seed"]) for r in data["runs"]}
    tasks = [] if data["reference"] is not None else [{**cfg, "kind": "reference"}]
    tasks += [{**cfg, "kind": "run", "arm": a, "seed": s} for s in args.seeds for a in args.arms
              if (a, s) not in have]
    args.out.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), _cpu_s()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.jobs, maxtasksperchild=1) as pool:
        for res in pool.imap_unordered(_task, tasks):
            if res.pop("kind") == "reference":
                data["reference"] = res
            else:
                data["runs"].append(res)
            if args.results is not None:
                args.results.parent.mkdir(parents=True, exist_ok=True)
                args.results.write_text(json.dumps(data, indent=1))
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\ntrained {len(tasks)} tasks: {time.perf_counter() - t0:.0f} s wall, "
          f"{ru.ru_utime + ru.ru_stime + _cpu_s() - c0:.0f} CPU-s (this process and its workers)\n")
    data["config"]["arms"] = [a for a in args.arms if any(r["arm"] == a for r in data["runs"])]
    report(data, args.tol, args.figure, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
