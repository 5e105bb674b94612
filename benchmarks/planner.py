"""Planner benchmark: heuristic vs exact MILP on seeded small instances, and the heuristic at scale.

Small: ``--instances`` seeded instances on a 64-GPU leaf-spine (16 servers of 4 GPUs, 8 leaves
of 8 GPUs, oversubscribed 16:1) filled with up to 8 training jobs of 4-12 GPUs, so that several
jobs must span leaves and the choice of which leaves they share decides their slow-down. Prints
the distribution of the heuristic's gap to the MILP optimum (or to the MILP's bound where it
timed out), to the MILP's best placement, and of the solve-time ratio.

Large: 4,096 GPUs (512 servers of 8, 32 leaves, 2:1) and 200 jobs (8-32 GPUs); prints the
heuristic's solve time and its gap to the LP lower bound (`flowherd.planning.milp.lp_bound`).

Simulated (``--simulate``): every method plans the embedded ``default`` scenario and a
trace-driven one on ``--trace-slices`` disjoint windows of 300 Microsoft Philly jobs (the first
window: 40 of them on 2-16 GPUs; each window is reported on its own: held-out honesty), arrivals
compressed 1000x, on 128 GPUs in servers of 4 under a 4:1 leaf-spine of 8 leaves, spraying routes); each plan
runs in `flowherd.sim.cluster` pinned to its GPUs in its order; prints simulated and predicted
mean JCT, queueing and the prediction error per method. The baseline placers schedule FIFO (as the
cluster does); the heuristic also schedules (EASY backfilling, `flowherd.planning.plan`); two
ablations split its gain: ``topology+backfill`` (the topology placer with the heuristic's
schedule) and ``heuristic-fifo`` (the heuristic's placement, FIFO). Every plan of a scenario with
background traffic is also simulated on ``--heldout`` other seeds (same plans; background flows
and hash draws the planner did not see); the heuristic's paired difference to the best baseline
placer of each seed is printed with its 95% confidence interval. ``--check`` adds the heuristic
with the simulator check (`flowherd.planning.plan.SimCheck`, the scenario's own seed).

    .venv/bin/python benchmarks/planner.py [--instances 20] [--skip-large]
    .venv/bin/python benchmarks/planner.py --simulate [--heldout 3] [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from control import ci95
from flowherd.planning.instances import large_instance, small_instance
from flowherd.planning.milp import lp_bound
from flowherd.planning.plan import make_plan
from flowherd.planning.predict import fabric_view, profile_job


def run_small(instances: int, time_limit_s: float) -> dict[str, np.ndarray]:
    gaps, ratios, base, to_best, opt = [], [], [], [], 0
    for seed in range(instances):
        fabric, jobs = small_instance(seed, servers=16, leaves=8, max_jobs=8)
        exact = make_plan(fabric, jobs, method="milp", time_limit_s=time_limit_s)
        heur = make_plan(fabric, jobs, method="heuristic", seed=seed)
        topo = make_plan(fabric, jobs, method="topology", seed=seed)
        ref = exact.objective if exact.status == "optimal" else exact.lower_bound
        opt += exact.status == "optimal"
        gaps.append((heur.objective - ref) / ref)
        ratios.append(heur.solve_s / exact.solve_s)
        to_best.append((heur.objective - exact.objective) / exact.objective)
        base.append((topo.objective - ref) / ref)
        print(f"seed {seed:2d}: {len(jobs)} jobs, milp {exact.objective:.4f} s ({exact.status}, bound "
              f"{exact.lower_bound:.4f}, {exact.solve_s:.2f} s), heuristic {heur.objective:.4f} s "
              f"({heur.solve_s:.2f} s), gap {100 * gaps[-1]:+.2f}%; topology placer {100 * base[-1]:+.2f}%")
    g = np.array(gaps)
    r = np.array(ratios)
    print(f"\n{instances} instances, MILP optimal on {opt}")
    print("heuristic gap to MILP optimum (or bound), %: "
          + ", ".join(f"{q}: {100 * np.quantile(g, q / 100):+.2f}" for q in (0, 25, 50, 75, 90, 100))
          + f"; within 5%: {int((g <= 0.05).sum())}/{len(g)}")
    tb = np.array(to_best)
    print("heuristic gap to the MILP's best placement (optimal or not), %: "
          + ", ".join(f"{q}: {100 * np.quantile(tb, q / 100):+.2f}" for q in (0, 50, 100)))
    b = np.array(base)
    print("topology placer's gap to the same reference, %: "
          + ", ".join(f"{q}: {100 * np.quantile(b, q / 100):+.2f}" for q in (0, 50, 100)))
    print("solve-time ratio heuristic/MILP: "
          + ", ".join(f"{q}: {np.quantile(r, q / 100):.3g}" for q in (0, 50, 100)))
    return {"gap": g, "ratio": r}


def run_large(seed: int = 0) -> dict[str, float]:
    fabric, jobs = large_instance(seed)
    t0 = time.perf_counter()
    plan = make_plan(fabric, jobs, method="heuristic", seed=seed)
    wall = time.perf_counter() - t0
    view = fabric_view(fabric)
    profiles = [profile_job(j, view) for j in jobs]
    t1 = time.perf_counter()
    bound = lp_bound(view, profiles, np.ones(fabric.num_gpus, bool)) / len(jobs)
    lp_s = time.perf_counter() - t1
    assert abs(bound - plan.lower_bound) <= 1e-9 * bound or plan.lower_bound >= bound
    gap = (plan.objective - bound) / plan.objective
    print(f"\nlarge: {fabric.num_gpus} GPUs, {len(jobs)} jobs ({sum(j.gpus for j in jobs)} GPUs asked): "
          f"heuristic {wall:.1f} s, mean JCT {plan.objective:.4f} s; LP bound {bound:.4f} s "
          f"({lp_s:.1f} s); gap {100 * gap:.2f}%")
    return {"wall_s": wall, "gap": gap}


TRACE_SCENARIO = {
    "name": "philly-300",
    "seed": 11,
    "fabric": {"kind": "leaf-spine", "servers": 32, "gpus_per_server": 4, "gpu": "h100",
               "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 8, "spines": 2,
               "oversubscription": 4, "link_latency": "1us"},
    "workload": {"traces": [{"path": "philly", "max_jobs": 300, "max_iterations": 30,
                             "time_scale": 0.001}]},
    "placement": {"method": "packed"},
    "simulation": {"fidelity": "collective", "horizon": "2h", "routing": "spray"},
}


BASELINES = ("random", "packed", "topology", "hetero")
# (label, method, make_plan options): the baseline placers (FIFO, as the cluster schedules), two
# ablations that split the heuristic's gain into schedule and placement, and the heuristic
VARIANTS = [(m, m, {}) for m in BASELINES] + [
    ("topology+backfill", "topology", {"backfill": True}),
    ("heuristic-fifo", "heuristic", {"backfill": False}),
    ("heuristic", "heuristic", {}),
]


def trace_slice(k: int) -> dict:
    """The trace scenario on the k-th disjoint window of 300 Philly jobs (k = 0: the first 300)."""
    source = {**TRACE_SCENARIO, "name": f"philly-300 window {k} (jobs {300 * k}-{300 * k + 299})"}
    source["workload"] = {"traces": [{**TRACE_SCENARIO["workload"]["traces"][0], "skip": 300 * k}]}
    return source


def run_simulated(heldout: int = 3, check: bool = False, check_wall_s: float = 240.0,
                  trace_slices: int = 2) -> None:
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import load_scenario, scenario_from_mapping
    from flowherd.planning.plan import SimCheck, simulated_mean_jct_s

    variants = [*VARIANTS, ("heuristic+check", "heuristic", {"check": True})] if check else VARIANTS
    scenarios = [load_scenario("default"),
                 *(scenario_from_mapping(trace_slice(k)) for k in range(trace_slices))]
    for sc in scenarios:
        print(f"\nscenario {sc.name}: {len(sc.jobs)} jobs on {sc.fabric.num_gpus} GPUs, "
              f"routing {sc.routing}, background {'yes' if sc.background else 'no'}, seed {sc.seed}")
        seeds = [sc.seed + 1000 + k for k in range(heldout)] if sc.background is not None else []
        # the scenario's simulation settings; the check simulates with the run's own seed, so it
        # knows that run's background draw: the held-out seeds show what carries over
        settings = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, background=sc.background,
                            fidelity=sc.fidelity, seed=sc.seed, candidates=3, max_wall_s=check_wall_s)
        sims: dict[str, list[float]] = {}
        for label, method, opts in variants:
            kw = dict(opts)
            if kw.pop("check", False):
                kw["check"] = settings
            plan = make_plan(sc.fabric, sc.jobs, method=method, seed=sc.seed, **kw)
            run = run_scenario(sc, plan=plan, solo=False)
            s = run.summary
            pred = {j.name: j.predicted_jct_s for j in plan.jobs}
            done = [j for j in run.jobs if j["finished"]]
            err = np.array([pred[j["name"]] / j["jct_s"] - 1 for j in done if j["jct_s"]])
            # unfinished jobs count with their time up to the horizon (a lower bound of their JCT),
            # so that a method leaving jobs unfinished does not look faster
            censored = float(run.cluster.censored_jct_s().mean())
            queue = np.mean([(r.start_s if r.start_s is not None else sc.horizon_s) - r.submit_s
                             for r in run.cluster.jobs])
            gap = 100 * (plan.predicted_mean_jct_s / s["mean_jct_s"] - 1) if s["mean_jct_s"] else float("nan")
            sims[label] = [censored] + [
                simulated_mean_jct_s(sc.fabric, sc.jobs, plan.placements(),
                                     dataclasses.replace(settings, seed=x), plan.planned_starts())
                for x in seeds]
            held = f"; held-out seeds mean {np.mean(sims[label][1:]):.3f} s" if seeds else ""
            print(f"  {label:17s}: simulated mean JCT {s['mean_jct_s']:.3f} s over {s['jobs_finished']}/"
                  f"{s['jobs_total']} finished ({censored:.3f} s with unfinished ones at the horizon), "
                  f"mean queueing {queue:.2f} s{held}; predicted {plan.predicted_mean_jct_s:.2f} s "
                  f"(predicted/simulated mean {gap:+.1f}%); per-job prediction error median "
                  f"{100 * np.median(err):+.1f}%, mean |err| {100 * np.mean(np.abs(err)):.1f}%; planned in "
                  f"{plan.solve_s:.1f} s, simulated in {run.wall_s:.1f} s")
            info = plan.info.get("sim_check")
            if info:
                cands = [round(v, 3) for v in info["candidates_simulated"]]
                print(f"  {'':17s}  sim check: candidates {cands} s, chosen #{info['chosen']}, moves kept "
                      f"{info['moves_kept']}, final {info['simulated_mean_jct_s']:.3f} s, "
                      f"{info['wall_s']:.0f} s of simulation")
        # paired over the scenario's seed and the held-out ones: heuristic minus the best baseline
        # placer of each seed
        h = np.array(sims["heuristic"])
        best = np.min([sims[m] for m in BASELINES], axis=0)
        d = h - best
        mean, half = ci95(d)
        print(f"  heuristic - best baseline placer, per seed {[round(float(x), 3) for x in d]} s: mean "
              f"{mean:+.3f} +- {half:.3f} s ({100 * (h / best - 1).mean():+.2f}%), heuristic better on "
              f"{int((d < 0).sum())}/{d.size} seeds")
        for label in ("topology+backfill", "heuristic-fifo"):
            print(f"  heuristic vs {label}: {100 * (h / np.array(sims[label]) - 1).mean():+.2f}% (mean over "
                  "seeds)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=120.0, help="MILP time limit, seconds")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--simulate", action="store_true", help="only the simulated comparison")
    ap.add_argument("--heldout", type=int, default=3, help="held-out seeds of the simulated comparison")
    ap.add_argument("--trace-slices", type=int, default=2,
                    help="disjoint 300-job windows of the Philly trace to run the trace scenario on")
    ap.add_argument("--check", action="store_true",
                    help="also the heuristic with the simulator check (SimCheck, the scenario's seed)")
    args = ap.parse_args()
    if args.simulate:
        run_simulated(heldout=args.heldout, check=args.check, trace_slices=args.trace_slices)
        return
    run_small(args.instances, args.time_limit)
    if not args.skip_large:
        run_large()


if __name__ == "__main__":
    main()
