"""Planner benchmark: heuristic vs exact MILP on seeded small instances, and the heuristic at scale.

Small: ``--instances`` seeded instances on a 64-GPU leaf-spine (16 servers of 4 GPUs, 8 leaves
of 8 GPUs, oversubscribed 16:1) filled with up to 8 training jobs of 4-12 GPUs, so that several
jobs must span leaves and the choice of which leaves they share decides their slow-down. Both
the MILP's and the heuristic's plans are routed by the windowed congestion-free LP
(`flowherd.planning.congestion`, ``routes=True``); prints the distribution of the heuristic's gap
to the MILP optimum (or its bound where it timed out), to the MILP's best placement, each plan's
routed excess over the target, and the solve-time ratio (placement and routing).

Large (``--large``: only it): 4,096 GPUs (512 servers of 8, 32 leaves, 2:1) and 200 jobs (8-32
GPUs); prints the heuristic's planning time (wall and CPU seconds, budget 60 s) and its gap
to the LP lower bound (`flowherd.planning.milp.lp_bound`).

Simulated (``--simulate``): every variant (`VARIANTS`: the baseline placers, FIFO, the scenario's
routing; ``topology+backfill``; the heuristic's placement then ECMP, then the windowed MCF; the
heuristic, routing-aware placement with the MCF routes; and ``heuristic+pacing``, the same plan
with every scale-out GPU pair capped at the rate the plan assumed, `flowherd.planning.pacing`,
applied as host pacers, `flowherd.cluster.pacing` (what a scenario's plan is where the network
queues: `planner.pace` omitted is on under roce and tcp); ``heuristic+netcost``, the heuristic with each
job's background term probed under ``--network``, `make_plan(network=)`) plans the embedded ``default``
scenario and a trace-driven one on ``--trace-slices`` disjoint slices of the Microsoft Philly
trace, each slice ``--seeds`` disjoint windows of `TRACE_JOBS` jobs (``skip`` the slice's start,
``seed_stride`` the window: the scenario's seed picks the window; arrivals compressed 1000x,
128 GPUs in servers of 4 under a 4:1 leaf-spine of 8 leaves, spraying routes); each plan runs
in `flowherd.cluster.simulate` under ``--network`` (roce by default, stated explicitly), pinned to
its GPUs in its order, its routes through `ExplicitRouter`
(`flowherd.planning.estimate.simulate_plan`). Replicates: on the default its own seed and
``--seeds - 1`` held-out ones (background flows and hash draws the planner did not see); on the
trace the windows of a slice (no background, spraying: the simulation seed changes nothing).
Tables per slice and over every slice. Per cell:
simulated and predicted mean JCT, the per-link, per-window load error (median, p90) and the
paused, ECN-marked and dropped bytes (`flowherd.planning.estimate.estimate_check`); per
scenario: each variant's paired difference to the best baseline placer with its 95% CI, the
gain split into schedule (topology -> topology+backfill), placement (-> heuristic+ecmp),
routing (-> heuristic) and pacing (-> heuristic+pacing), joint vs sequential, and the congested
bytes against packed + ECMP. CPU seconds of each cell's planning and simulation are stored
(``plan_cpu_s``, ``sim_cpu_s``; wall times on the shared machine are mostly waiting).
``--as-run LABELS`` simulates nothing: it adds, per plan, the model's mean JCT as the plan runs
with each job's background term probed on its own run under the network model
(`flowherd.planning.estimate.predicted_as_run`, `run_penalties_s`), reported next to the plan's
own prediction. Cells run group by group, replicate by replicate (`PRIORITY`), and are cached in ``--cache``
(JSON lines): a run can be resumed, and ``--report`` prints the tables from the cache. The cache
keys on the plan, not on the simulator: ``--recheck N`` simulates N cached cells per scenario
kind again and prints the cached and the new mean JCT (``STALE`` where they differ).

    .venv/bin/python benchmarks/planner.py [--instances 20] [--skip-large]
    .venv/bin/python benchmarks/planner.py --large
    .venv/bin/python benchmarks/planner.py --simulate --network roce --cache planner.jsonl
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from control import ci95
from flowherd.planning.instances import large_instance, small_instance, small_llm_instance
from flowherd.planning.milp import lp_bound
from flowherd.planning.plan import make_plan
from flowherd.planning.predict import fabric_view, profile_job


def _routed(plan) -> tuple[float, float]:
    """(time-weighted excess over the target on links a routing could avoid, largest predicted
    link load) of a plan routed by the windowed congestion-free LP."""
    from flowherd.planning.congestion import LinkLoads

    ll = LinkLoads.from_dict(plan.info["link_loads"])
    over = np.clip(ll.load - ll.target, 0.0, None) * ll.routable[:, None]
    return float((over * np.diff(ll.edges_s)[None, :]).sum()), float(ll.load.max(initial=0.0))


def run_small(instances: int, time_limit_s: float, llm: bool = False) -> dict[str, np.ndarray]:
    """MILP vs heuristic with the routing in the objective: both plans are routed by the windowed
    congestion-free LP (`flowherd.planning.congestion`); the MILP places, then routes (its
    optimum is over the placement model, whose leaf-uplink loads are the LP's optimum on a
    two-tier leaf-spine); the heuristic is the joint one (routing-aware placement). The topology
    placer plans first (it also fills the job-profile cache, so neither timed method pays for
    profiling). Printed: the gap of the predicted mean JCT, the routed excess over the target and
    largest link load of each, and the CPU seconds of each method's placement search (schedule,
    placement, the LP scores inside a joint placement) and of the shared routing LP
    (``Plan.info["cpu_s"]``), apart and in total, and their ratios."""
    gaps, base, to_best, opt = [], [], [], 0
    cpu = {m: {k: [] for k in ("placement", "routing", "total")} for m in ("milp", "heuristic")}
    ex_h, ex_m = [], []
    for seed in range(instances):
        if llm:  # LLM-era shapes (NeMo recipes) on 24 servers of 8 H100 under 4 leaves at 8:1
            fabric, jobs = small_llm_instance(seed)
        else:
            fabric, jobs = small_instance(seed, servers=16, leaves=8, max_jobs=8)
        topo = make_plan(fabric, jobs, method="topology", seed=seed)
        exact = make_plan(fabric, jobs, method="milp", time_limit_s=time_limit_s, routes=True)
        heur = make_plan(fabric, jobs, method="heuristic", seed=seed, routes=True)
        for m, p in (("milp", exact), ("heuristic", heur)):
            for k in ("placement", "routing", "total"):
                cpu[m][k].append(p.info["cpu_s"][k])
        ref = exact.objective if exact.status == "optimal" else exact.lower_bound
        opt += exact.status == "optimal"
        gaps.append((heur.objective - ref) / ref)
        to_best.append((heur.objective - exact.objective) / exact.objective)
        base.append((topo.objective - ref) / ref)
        (em, lm), (eh, lh) = _routed(exact), _routed(heur)
        ex_m.append(em)
        ex_h.append(eh)
        cm, ch = exact.info["cpu_s"], heur.info["cpu_s"]
        print(f"seed {seed:2d}: {len(jobs)} jobs ({sum(j.world_size for j in jobs)} GPUs), milp "
              f"{exact.objective:.4f} s ({exact.status}, bound {exact.lower_bound:.4f}; placement "
              f"{cm['placement']:.3f} + routing {cm['routing']:.3f} CPU-s; routed excess {em:.3f} s, max "
              f"load {lm:.3f}), heuristic {heur.objective:.4f} s (placement {ch['placement']:.3f} + routing "
              f"{ch['routing']:.3f} CPU-s; routed excess {eh:.3f} s, max load {lh:.3f}), gap "
              f"{100 * gaps[-1]:+.2f}%; topology placer {100 * base[-1]:+.2f}%", flush=True)
    g = np.array(gaps)
    print(f"\n{instances} instances, MILP optimal on {opt}")
    print("heuristic gap to MILP optimum (or bound), %: "
          + ", ".join(f"{q}: {100 * np.quantile(g, q / 100):+.2f}" for q in (0, 25, 50, 75, 90, 100))
          + f"; within 5%: {int((g <= 0.05).sum())}/{len(g)}")
    tb = np.array(to_best)
    print("heuristic gap to the MILP's best placement (optimal or not), %: "
          + ", ".join(f"{q}: {100 * np.quantile(tb, q / 100):+.2f}" for q in (0, 50, 100)))
    b = np.array(base)
    print("topology placer's gap to the same reference, %: "
          + ", ".join(f"{q}: {100 * np.quantile(b, q / 100):+.2f}" for q in (0, 50, 100))
          + f"; above it on {int((b > 1e-9).sum())}/{len(b)}")
    out = {"gap": g}
    for k in ("placement", "routing", "total"):
        m, h = np.array(cpu["milp"][k]), np.array(cpu["heuristic"][k])
        r = m / np.maximum(h, 1e-9)
        out[f"speedup_{k}"] = r
        print(f"CPU seconds, {k}: MILP median {np.median(m):.3f} (total {m.sum():.2f}), heuristic median "
              f"{np.median(h):.3f} (total {h.sum():.2f}); MILP / heuristic per instance "
              + ", ".join(f"{q}: {np.quantile(r, q / 100):.3g}" for q in (0, 50, 100))
              + f", of the totals {m.sum() / max(h.sum(), 1e-9):.3g}")
    eh, em = np.array(ex_h), np.array(ex_m)
    print(f"routed excess over the target (link-seconds): heuristic mean {eh.mean():.3f}, MILP then routing "
          f"mean {em.mean():.3f}; heuristic lower on {int((eh < em - 1e-9).sum())}, equal on "
          f"{int((np.abs(eh - em) <= 1e-9).sum())}, higher on {int((eh > em + 1e-9).sum())} of {instances}")
    return out


LARGE_BUDGET_S = 60.0  # the heuristic's planning time at 4,096 GPUs and 200 jobs (the target)


def run_large(seed: int = 0) -> dict[str, float]:
    """The heuristic at scale (`flowherd.planning.instances.large_instance`): its planning time,
    wall and CPU seconds, against `LARGE_BUDGET_S`, and its gap to the LP lower bound. The timing
    lives here, not in a test: the wall clock of a shared machine is not the planner's."""
    fabric, jobs = large_instance(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    plan = make_plan(fabric, jobs, method="heuristic", seed=seed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    view = fabric_view(fabric)
    profiles = [profile_job(j, view) for j in jobs]
    t1 = time.perf_counter()
    bound = lp_bound(view, profiles, np.ones(fabric.num_gpus, bool)) / len(jobs)
    lp_s = time.perf_counter() - t1
    assert abs(bound - plan.lower_bound) <= 1e-9 * bound or plan.lower_bound >= bound
    gap = (plan.objective - bound) / plan.objective
    print(f"\nlarge: {fabric.num_gpus} GPUs, {len(jobs)} jobs ({sum(j.gpus for j in jobs)} GPUs asked): "
          f"heuristic {wall:.1f} s wall, {cpu:.1f} CPU-s (budget {LARGE_BUDGET_S:.0f} s: "
          f"{'within' if cpu <= LARGE_BUDGET_S else 'over'}), mean JCT {plan.objective:.4f} s; LP bound "
          f"{bound:.4f} s ({lp_s:.1f} s); gap {100 * gap:.2f}%")
    return {"wall_s": wall, "cpu_s": cpu, "gap": gap}


def run_large_llm(seed: int = 0, method: str = "bilevel", routes: bool = False) -> dict[str, float]:
    """The plan's upper level and schedule at 16,384 GPUs (2,048 servers of 8 H100, 128 leaves
    of 128 GPUs at 4:1) and 500 jobs of the Kalos figures (`flowherd.workload.llm_cluster`, every
    size, offered load 1): planning CPU seconds against `LARGE_BUDGET_S`; with ``routes`` also the
    lower level's windowed routing LP (and pacing), its CPU seconds apart (``Plan.info["cpu_s"]``)."""
    from flowherd.fabric.generators import leaf_spine
    from flowherd.workload.llm_cluster import llm_cluster

    fabric = leaf_spine(servers=2048, gpus_per_server=8, leaves=128, spines=32, oversubscription=4)
    jobs = llm_cluster(500, fabric.num_gpus, seed=seed, profile="kalos", duration_scale=0.05,
                       max_iterations=60)
    t0, c0 = time.perf_counter(), time.process_time()
    plan = make_plan(fabric, jobs, method=method, seed=seed, routes=routes, pace=routes)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    asked = sum(j.world_size for j in jobs)
    split = plan.info["cpu_s"]
    lp = " with the routing LP and pacing" if routes else " (no routing LP)"
    print(f"\nlarge LLM: {fabric.num_gpus} GPUs, {len(jobs)} jobs ({asked} GPUs asked, "
          f"largest {max(j.world_size for j in jobs)}): {method}{lp} {wall:.1f} s wall, {cpu:.1f} CPU-s "
          f"(routing LP {split['routing']:.1f}, the rest {split['placement']:.1f}; budget "
          f"{LARGE_BUDGET_S:.0f} s: {'within' if cpu <= LARGE_BUDGET_S else 'over'}), predicted mean JCT "
          f"{plan.predicted_mean_jct_s:.2f} s", flush=True)
    return {"wall_s": wall, "cpu_s": cpu, "routing_cpu_s": split["routing"]}


TRACE_SCENARIO = {
    "name": "philly",
    "seed": 11,
    "fabric": {"kind": "leaf-spine", "servers": 32, "gpus_per_server": 4, "gpu": "h100",
               "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 8, "spines": 2,
               "oversubscription": 4, "link_latency": "1us"},
    "workload": {"traces": [{"path": "philly", "max_jobs": 300, "max_iterations": 10,
                             "min_gpus": 2, "gpu_scale": 4, "time_scale": 0.001}]},
    "placement": {"method": "packed"},
    "simulation": {"fidelity": "phase", "horizon": "2h", "routing": "spray"},
}


BASELINES = ("random", "packed", "topology", "hetero")
# (label, method, make_plan options). The baseline placers schedule FIFO and route by the
# scenario's routing (ECMP on the default, spraying on the trace), as the cluster does; the
# ablations: the heuristic's schedule with the topology placer (schedule), the heuristic's
# placement routed by ECMP (placement then ECMP), the same placement routed by the windowed
# congestion-free MCF (placement then MCF routing), and the heuristic: routing-aware placement
# (the joint one: leaf guard, candidates scored by the routing LP, restore rounds).
VARIANTS = [(m, m, {}) for m in BASELINES] + [
    ("topology+backfill", "topology", {"backfill": True}),
    ("heuristic+ecmp", "heuristic", {}),
    ("heuristic+mcf", "heuristic", {"routes": True, "joint": False}),
    ("heuristic", "heuristic", {"routes": True}),
    ("heuristic+pacing", "heuristic", {"routes": True, "pace": True}),
    # the heuristic with each job's background term probed under the scenario's network model
    # (`make_plan(network=)`): the congestion model's predicted cost in the plan's durations
    ("heuristic+netcost", "heuristic", {"routes": True, "network": None}),
]


TRACE_JOBS = 16  # jobs per trace window (the replicate); a slice is --seeds such windows


def trace_slice(k: int, seeds: int = 5, jobs: int = TRACE_JOBS) -> dict:
    """The trace scenario on the k-th slice of the Philly trace: ``seeds`` disjoint windows of
    ``jobs`` jobs (skip ``k * seeds * jobs``, seed_stride ``jobs``: seed s is the window of jobs
    skip + s * jobs onward), each window a replicate; slices do not overlap."""
    skip = k * seeds * jobs
    source = {**TRACE_SCENARIO, "name": f"philly slice {k} (jobs {skip}-{skip + seeds * jobs - 1})"}
    source["workload"] = {"traces": [{**TRACE_SCENARIO["workload"]["traces"][0], "max_jobs": jobs,
                                      "skip": skip, "seed_stride": jobs}]}
    return source


def _signature(plan) -> str:
    """Plans with the same placements, starts and routes simulate alike: simulated once."""
    import hashlib
    import json

    routes = sorted((k, [[list(p), round(w, 9)] for p, w in v]) for k, v in (plan.routes or {}).items())
    pace = sorted((plan.info or {}).get("pacing", {}).items())  # the host pacers' caps, if any
    key = json.dumps([[j.name, list(j.gpus), round(j.start_s, 9)] for j in plan.jobs] + [routes]
                     + ([[[k, round(v, 3)] for k, v in pace]] if pace else []))
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def _cache_read(path) -> dict:
    import json
    from pathlib import Path

    out = {}
    for one in (path or "").split(","):  # several caches: read all (runs split by variant)
        if one and Path(one).exists():
            for line in Path(one).read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    if r.get("as_run"):  # a plan's JCTs as run (`_as_run`), one row per plan
                        out.setdefault("as_run", {})[(r["scenario"], r["label"], r["signature"])] = r
                    else:
                        out[(r["scenario"], r["seed"], r.get("label", r["signature"]))] = r
    return out


def _cache_add(path, row: dict) -> None:
    import json

    if path:
        with open(path.split(",")[0], "a") as fh:
            fh.write(json.dumps(row) + "\n")


def _instances(kind: str, seeds: int, trace_slices: int, network: str,
               first_slice: int = 0) -> list[tuple[str, dict, list[int]]]:
    """(report group, scenario mapping, simulation seeds) per instance: the default with its own
    seed and ``seeds - 1`` held-out ones (other background draws and hashes); the trace, per
    slice, ``seeds`` windows (the scenario's seed picks the window; no background, spraying: the
    simulation seed would change nothing, the window is the replicate)."""
    from flowherd.experiments.scenario import read_scenario_mapping

    if kind == "default":
        m = {**read_scenario_mapping("default"), "network": network}
        return [("default", m, [int(m["seed"])] + [int(m["seed"]) + 1000 + k for k in range(seeds - 1)])]
    return [(f"trace slice {k}", {**trace_slice(k, seeds), "network": network, "seed": s}, [s])
            for k in range(first_slice, first_slice + trace_slices) for s in range(seeds)]


# simulation order: groups of variants, each run replicate by replicate (seed or trace window),
# so that a run stopped early (the machine is shared) still holds paired comparisons
PRIORITY = (("packed", "heuristic"), ("heuristic+ecmp", "topology"), ("topology+backfill", "heuristic+mcf"),
            ("random", "hetero"), ("heuristic+pacing",), ("heuristic+netcost",))


def run_simulated(kinds: tuple[str, ...] = ("default", "trace"), seeds: int = 5, trace_slices: int = 2,
                  network: str = "roce", labels: tuple[str, ...] | None = None, cache: str | None = None,
                  report_only: bool = False, first_slice: int = 0, as_run: tuple[str, ...] = (),
                  recheck: int = 0) -> None:
    """Every variant's plan simulated (module docstring), cells in `PRIORITY` order (every
    replicate of a variant before the next variant); results cached per (scenario, seed, plan
    signature) in ``cache`` (JSON lines) so a run can be resumed, and reported from the cache.
    The cache keys on the plan, not on the simulator: ``recheck`` cached cells per scenario kind
    are simulated again and compared (`_recheck`), nothing written, to tell a stale cache."""
    from flowherd.experiments.scenario import scenario_from_mapping
    from flowherd.planning.estimate import estimate_check, simulate_plan
    from flowherd.planning.plan import SimCheck

    done = _cache_read(cache)  # (scenario, seed, label) -> row
    ran_done = done.pop("as_run", {})  # (scenario, label, signature) -> the plan's JCTs as run
    sims = {(r["scenario"], r["seed"], r["signature"]): r for r in done.values()}  # by plan signature
    if not report_only:
        insts = []
        for kind in kinds:
            for group, mapping, sim_seeds in _instances(kind, seeds, trace_slices, network, first_slice):
                sc = scenario_from_mapping(mapping)
                print(f"scenario {sc.name}: {len(sc.jobs)} jobs on {sc.fabric.num_gpus} GPUs, routing "
                      f"{sc.routing}, network {sc.network.model}, "
                      f"background {'yes' if sc.background else 'no'}, "
                      f"seeds {sim_seeds}", flush=True)
                insts.append((group, sc, sim_seeds, {}))
        variants = {label: (method, opts) for label, method, opts in VARIANTS}
        cells = []
        for group in PRIORITY:
            group = [x for x in group if x in variants and (not labels or x in labels)]
            reps = [(inst, seed) for inst in insts for seed in inst[2]]
            cells += [(label, inst, seed) for inst, seed in reps for label in group]
        plan_cpu: dict = {}  # (scenario name, label) -> CPU seconds of its planning
        rechecked: dict = {}  # scenario kind -> cached cells re-simulated (``recheck``)
        for label, (kind, sc, _, plans), seed in cells:
            method, opts = variants[label]
            if label not in plans:
                c0 = time.process_time()
                if "network" in opts:
                    opts = {**opts, "network": sc.network}
                plans[label] = make_plan(sc.fabric, sc.jobs, method=method, seed=sc.seed,
                                         background=sc.background, window_s=sc.horizon_s / 100,
                                         routing=sc.routing, **opts)
                plan_cpu[(sc.name, label)] = time.process_time() - c0
            plan = plans[label]
            sig = _signature(plan)
            cong = plan.info.get("congestion") or {}
            key = (sc.name, seed, label)
            if as_run:  # only the model's JCTs as each plan runs (no simulation): once per plan
                if label in as_run and (sc.name, label, sig) not in ran_done:
                    same = next((r for r in ran_done.values()  # another label's plan, the same plan
                                 if (r["scenario"], r["signature"]) == (sc.name, sig)), None)
                    mean_s, cpu_s = (same["as_run_mean_jct_s"], 0.0) if same else _as_run(sc, plan)
                    ran_done[(sc.name, label, sig)] = row = {
                        "as_run": True, "scenario": sc.name, "label": label, "signature": sig,
                        "as_run_mean_jct_s": mean_s, "as_run_cpu_s": cpu_s}
                    _cache_add(cache, row)
                    print(f"  {sc.name[:24]:24s} {label:17s}: mean JCT as run {mean_s:.3f} s ({cpu_s:.0f} "
                          "CPU-s of probes)", flush=True)
                continue
            if key in done and done[key]["signature"] == sig:
                _repredict(done[key], plan)  # the plan's prediction by this tree's predictor
                if rechecked.get(kind.split(" ")[0], 0) < recheck:
                    rechecked[kind.split(" ")[0]] = rechecked.get(kind.split(" ")[0], 0) + 1
                    _recheck(sc, seed, plan, done[key], label)
                continue
            row = sims.get((sc.name, seed, sig))
            if row is not None:
                row = _repredict(dict(row), plan)
            if row is None:
                check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, background=sc.background,
                                 fidelity=sc.fidelity, seed=seed, network=sc.network)
                sim = simulate_plan(sc.fabric, sc.jobs, plan, check)
                est = estimate_check(sc.fabric, sc.jobs, plan, sim, background=sc.background)
                row = {"scenario": sc.name, "seed": seed, "signature": sig, "sim_wall_s": sim.wall_s,
                       "sim_cpu_s": sim.cpu_s, **est}
            row = {**row, "kind": kind, "label": label, "plan_s": plan.solve_s,
                   "plan_cpu_s": plan_cpu.get((sc.name, label)),
                   "predicted_max_load": cong.get("max_load"),
                   "predicted_violations": cong.get("violations"),
                   "restore": plan.info.get("congestion_restore"),
                   "held": plan.info.get("starts_held", 0)}
            done[key] = sims[(sc.name, seed, sig)] = row
            _cache_add(cache, row)
            gb = {k: row[k] / 1e9 for k in ("congested_bytes", "marked_bytes", "paused_bytes",
                                             "dropped_bytes")}
            print(f"  {sc.name[:24]:24s} {label:17s} seed {seed}: simulated mean JCT "
                  f"{row['simulated_mean_jct_s']:.3f} s, predicted "
                  f"{row['predicted_mean_jct_s']:.3f} s "
                  f"({100 * row['jct_error']:+.1f}%); link load error median "
                  f"{row['load_error_median']:.3f}, p90 {row['load_error_p90']:.3f} "
                  f"({row['active_cells']} cells); congested {gb['congested_bytes']:.3f} GB (marked "
                  f"{gb['marked_bytes']:.3f}, paused {gb['paused_bytes']:.3f}, dropped "
                  f"{gb['dropped_bytes']:.3f}); predicted max link load {row['predicted_max_load']}; "
                  f"planned in {plan.solve_s:.1f} s, simulated in {row['sim_wall_s']:.0f} s "
                  f"({row.get('sim_cpu_s', math.nan):.0f} CPU-s)",
                  flush=True)
    table: dict = {}
    for row in done.values():
        kind = row.get("kind", "")
        if row.get("simulated_mean_jct_s", 0.0) <= 0.0:  # a window past the trace's end: no jobs
            continue
        ran = ran_done.get((row["scenario"], row.get("label"), row["signature"]))
        if ran is not None:
            row = {**row, "jct_error_as_run": ran["as_run_mean_jct_s"] / row["simulated_mean_jct_s"] - 1.0}
        if "label" in row and kind.split(" ")[0] in kinds:
            groups = [kind] + (["trace (every slice)"] if kind.startswith("trace slice") else [])
            for g in groups:
                per = table.setdefault(g, {}).setdefault(row["label"], {})
                per[(row["scenario"], row["seed"])] = row
    _report(table)


def _recheck(sc, seed: int, plan, row: dict, label: str) -> None:
    """Simulate a cached cell again on this tree and print its cached and new mean JCT."""
    from flowherd.planning.estimate import simulate_plan
    from flowherd.planning.plan import SimCheck

    check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, background=sc.background,
                     fidelity=sc.fidelity, seed=seed, network=sc.network)
    sim = simulate_plan(sc.fabric, sc.jobs, plan, check)
    now = float(sim.mean_jct_s)
    old = row["simulated_mean_jct_s"]
    print(f"  recheck {sc.name[:24]:24s} {label:17s} seed {seed}: cached mean JCT {old:.6f} s, this tree "
          f"{now:.6f} s ({100 * (now / old - 1) if old else 0.0:+.3f}%){'' if now == old else ': STALE'} "
          f"({sim.cpu_s:.1f} CPU-s)", flush=True)


def _repredict(row: dict, plan) -> dict:
    """``row`` (a cached simulation of ``plan``'s signature) with the predicted mean JCT of
    ``plan``: a change of the predictor alone needs no new simulation."""
    pred = float(plan.predicted_mean_jct_s)
    sim = row["simulated_mean_jct_s"]
    row.update(predicted_mean_jct_s=pred, jct_error=pred / sim - 1.0 if sim > 0 else math.nan)
    return row


def _as_run(sc, plan) -> tuple[float, float]:
    """(the model's mean JCT of ``plan`` as the simulator runs it, each job's background term
    probed on its own run under the scenario's network model, `flowherd.planning.estimate.
    run_penalties_s` and `predicted_as_run`; CPU seconds of the probes)."""
    from flowherd.planning.estimate import predicted_as_run, run_penalties_s

    c0 = time.process_time()
    pen = run_penalties_s(sc.fabric, sc.jobs, plan, background=sc.background, routing=sc.routing,
                          network=sc.network, fidelity=sc.fidelity)
    jct = predicted_as_run(sc.fabric, sc.jobs, plan, background=sc.background, routing=sc.routing,
                           penalties_s=pen)
    return (float(jct.mean()) if jct.size else 0.0), time.process_time() - c0


def _paired(a: dict, b: dict, key: str = "simulated_mean_jct_s") -> tuple[np.ndarray, np.ndarray]:
    common = sorted(set(a) & set(b))
    return np.array([a[s][key] for s in common]), np.array([b[s][key] for s in common])


def _report(by_kind: dict) -> None:
    """Per scenario kind: paired differences to the best baseline (95% CI over the replicates:
    seeds on the default, trace windows on the trace), the gain split, congestion vs packed."""
    for kind, rows in sorted(by_kind.items()):
        print(f"\n== {kind}: replicates per variant " + ", ".join(f"{k} {len(v)}" for k, v in rows.items()))
        base = [b for b in BASELINES if b in rows]
        # the best baseline of a replicate: among the baseline placers simulated on it (a run
        # cut short may lack the slow ones on some replicates; the per-baseline lines say so)
        reps = sorted(set.union(*(set(rows[b]) for b in base))) if base else []
        best = {r: min(rows[b][r]["simulated_mean_jct_s"] for b in base if r in rows[b]) for r in reps}
        for label, per in rows.items():
            common = [r for r in reps if r in per]
            if not common:
                continue
            x = np.array([per[r]["simulated_mean_jct_s"] for r in common])
            y = np.array([best[r] for r in common])
            d = x - y
            mean, half = ci95(d)
            err = np.array([per[r]["jct_error"] for r in common])
            ran = [per[r]["jct_error_as_run"] for r in common if "jct_error_as_run" in per[r]]
            le = np.array([per[r]["load_error_median"] for r in common])
            le90 = np.array([per[r]["load_error_p90"] for r in common])
            cg = np.array([per[r]["congested_bytes"] for r in common])
            print(f"  {label:17s}: mean JCT {x.mean():.3f} s; minus best baseline {mean:+.3f} +- "
                  f"{half:.3f} s "
                  f"({100 * (x / y - 1).mean():+.2f}%), better on {int((d < 0).sum())}/{d.size}; predicted "
                  f"vs simulated JCT {100 * err.mean():+.1f}% (max |.| {100 * np.abs(err).max():.1f}%); "
                  f"link load error median {le.mean():.3f} (p90 {le90.mean():.3f}); congested "
                  f"{cg.mean() / 1e9:.3f} GB"
                  + (f"; as run, penalties under the network model: {100 * np.mean(ran):+.1f}% (max |.| "
                     f"{100 * np.abs(ran).max():.1f}%, {len(ran)} replicates)" if ran else ""))
        if "heuristic+pacing" in rows:
            print("  the plan a scenario gets (`flowherd plan`, placement: heuristic): heuristic+pacing "
                  "where the network queues (roce, tcp: `planner.pace` omitted is on), heuristic "
                  "under ideal")
        for mine in ("heuristic", "heuristic+pacing"):
            if mine not in rows:
                continue
            for b in base:
                xa, xb = _paired(rows[mine], rows[b])
                if xa.size:
                    m, h = ci95(xa - xb)
                    rel = 100 * (xa / xb - 1).mean()
                    print(f"  {mine} - {b:8s}: {m:+.3f} +- {h:.3f} s ({rel:+.2f}%), "
                          f"better on {int((xa < xb).sum())}/{xa.size}")
        chain = ["topology", "topology+backfill", "heuristic+ecmp", "heuristic", "heuristic+pacing"]
        if "heuristic+pacing" not in rows:
            chain = chain[:-1]
        if all(c in rows for c in chain):
            parts = []
            for a, b, what in zip(chain, chain[1:], ("schedule", "placement", "routing", "pacing"),
                                  strict=False):
                xa, xb = _paired(rows[a], rows[b])
                m, h = ci95(xa - xb)
                parts.append(f"{what} {m:+.3f} +- {h:.3f} s ({100 * ((xa - xb) / xa).mean():.2f}%)")
            print("  gain over topology (FIFO, scenario routing) split: " + "; ".join(parts))
        if "heuristic+mcf" in rows and "heuristic" in rows:
            xa, xb = _paired(rows["heuristic+mcf"], rows["heuristic"])
            m, h = ci95(xa - xb)
            print(f"  joint vs sequential (placement then MCF): {m:+.3f} +- {h:.3f} s")
        if "heuristic+netcost" in rows and "heuristic" in rows:
            a, b = rows["heuristic+netcost"], rows["heuristic"]
            xa, xb = _paired(a, b)
            m, h = ci95(xa - xb)
            same = sum(a[r]["signature"] == b[r]["signature"] for r in set(a) & set(b))
            print(f"  the network model's cost in the plan (heuristic+netcost - heuristic): {m:+.3f} +- "
                  f"{h:.3f} s; the same plan (GPUs, starts, routes) on {same}/{xa.size}, simulated the "
                  f"same to the last digit on {int((xa == xb).sum())}/{xa.size} (the simulator keeps a "
                  "plan's GPUs, routes and order on every GPU, not its times)")
        if "packed" in rows:
            for label in ("heuristic+ecmp", "heuristic+mcf", "heuristic", "heuristic+pacing"):
                if label not in rows:
                    continue
                cp, ch = _paired(rows["packed"], rows[label], "congested_bytes")
                jp, jh = _paired(rows["packed"], rows[label])
                m, h = ci95(jh - jp)
                ratio = cp.sum() / ch.sum() if ch.sum() > 0 else math.inf
                print(f"  congested (paused+marked+dropped) bytes, packed+ECMP / {label}: {ratio:.1f}x "
                      f"({cp.mean() / 1e9:.3f} vs {ch.mean() / 1e9:.3f} GB); mean JCT {label} - packed "
                      f"{m:+.3f} +- {h:.3f} s")
            _congestion_floor(rows)


def _congestion_floor(rows: dict) -> None:
    """Where the congestion is: the share of each variant's congested bytes in cells at most one
    job was predicted on (its own collectives and the background: no schedule, placement or
    routing of the other jobs removes them), per link tier, and the ratio to packed + ECMP a plan
    would reach with every other congested byte removed (the bound without pacing)."""
    for label in ("packed", "topology", "heuristic+ecmp", "heuristic", "heuristic+pacing"):
        per = rows.get(label, {})
        have = [r for r in per.values() if "congested_bytes_one_job" in r]
        if not have:
            continue
        tot = sum(r["congested_bytes"] for r in have)
        one = sum(r["congested_bytes_one_job"] for r in have)
        tiers = {t: sum(r["congested_bytes_by_tier"][t] for r in have)
                 for t in have[0]["congested_bytes_by_tier"]}
        line = (f"  {label:17s} congested in cells of at most one job: {100 * one / tot if tot else 0:.1f}%; "
                "by tier " + ", ".join(f"{t} {100 * v / tot if tot else 0:.1f}%" for t, v in tiers.items()))
        if label.startswith("heuristic") and "packed" in rows:
            mine = {k: v for k, v in per.items() if "congested_bytes_one_job" in v}
            cp, ch = _paired(rows["packed"], mine, "congested_bytes")
            _, floor = _paired(rows["packed"], mine, "congested_bytes_one_job")
            if floor.sum() > 0:
                line += (f"; packed+ECMP / its one-job bytes (the bound without pacing): "
                         f"{cp.sum() / floor.sum():.2f}x (reached {cp.sum() / max(ch.sum(), 1e-9):.2f}x)")
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=120.0, help="MILP time limit, seconds")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--large-llm", action="store_true", help="only the LLM-era large instance: the plan's "
                    "planning time at 16,384 GPUs and 500 jobs of the Kalos figures against the 60-s budget")
    ap.add_argument("--routes", action="store_true", help="--large-llm: also the routing LP and pacing")
    ap.add_argument("--llm", action="store_true", help="small instances of LLM-era shapes "
                    "(`flowherd.planning.instances.small_llm_instance`) instead of 4-12-GPU ones")
    ap.add_argument("--large", action="store_true", help="only the large instance: the heuristic's planning "
                    "time at 4,096 GPUs and 200 jobs against its 60-s budget")
    ap.add_argument("--simulate", action="store_true", help="only the simulated comparison")
    ap.add_argument("--seeds", type=int, default=5, help="simulation seeds of the default scenario")
    ap.add_argument("--trace-slices", type=int, default=2,
                    help="disjoint slices of the Philly trace, each --seeds windows of TRACE_JOBS jobs")
    ap.add_argument("--first-slice", type=int, default=0, help="first trace slice of the run")
    ap.add_argument("--network", default="roce", help="network model of the simulations (roce, tcp, ideal)")
    ap.add_argument("--scenarios", default="default,trace", help="default, trace, or LLM-era families "
                    "(benchmarks/scenarios/llm_*.yaml: llm_kalos_4to1, llm_kalos_8to1, llm_seren_1to1, "
                    "llm_kalos_rail, llm_inference; "
                    "benchmarks/planner_llm.py)")
    ap.add_argument("--variants", default=None, help="comma-separated labels (default: all)")
    ap.add_argument("--cache", default=None, help="JSON-lines file of finished simulations (resume, report); "
                    "comma-separated: all are read, new rows go to the first")
    ap.add_argument("--report", action="store_true", help="only report what the cache holds")
    ap.add_argument("--by-seed", action="store_true", help="LLM-era families: run seed by seed, every "
                    "variant of each (default: variant by variant, every seed of each)")
    ap.add_argument("--as-run", default="", help="comma-separated labels: also predict each plan as it runs, "
                    "the background terms probed on its jobs' own runs under the network model")
    ap.add_argument("--record", default=None, help="save the figures (LLM-era families: and tables) with "
                    "benchmarks/record.py under this name")
    ap.add_argument("--recheck", type=int, default=0, help="simulate this many cached cells per scenario "
                    "kind again and compare (the cache keys on the plan, not on the simulator)")
    args = ap.parse_args()
    llm = tuple(x for x in args.scenarios.split(",") if x.startswith("llm_"))
    if args.simulate and llm:
        import planner_llm

        table = planner_llm.simulate(llm, seeds=args.seeds, network=args.network,
                                     labels=tuple(args.variants.split(",")) if args.variants else None,
                                     cache=args.cache, report_only=args.report, by_seed=args.by_seed)
        if args.record:
            planner_llm.record_tables(table, args.record)
        return
    if args.simulate:
        run_simulated(tuple(args.scenarios.split(",")), seeds=args.seeds, trace_slices=args.trace_slices,
                      network=args.network, labels=tuple(args.variants.split(",")) if args.variants else None,
                      cache=args.cache, report_only=args.report, first_slice=args.first_slice,
                      as_run=tuple(x for x in args.as_run.split(",") if x), recheck=args.recheck)
        return
    if not args.large and not args.large_llm:
        small = run_small(args.instances, args.time_limit, llm=args.llm)
        if args.record:
            import record

            n_ok, n = int((small["gap"] <= 0.05).sum()), len(small["gap"])
            figures = {"heuristic within 5% of the MILP optimum": record.figure(
                n_ok, f"of {n}", target=f"{n}", met=n_ok == n)}
            for k in ("placement", "routing", "total"):
                r = float(np.median(small[f"speedup_{k}"]))
                figures[f"MILP / heuristic CPU seconds, {k} (median)"] = record.figure(
                    round(r, 3), "x", **({"target": ">= 100", "met": r >= 100} if k == "total" else {}))
            record.save(args.record, figures,
                        notes="MILP vs heuristic on small LLM-era instances with routing")
    if args.large_llm:
        res = run_large_llm(routes=args.routes)
        if args.record:
            import record

            record.save(args.record, {"planning CPU seconds, 16,384 GPUs / 500 jobs": record.figure(
                round(res["cpu_s"], 1), "s", target="<= 60", met=res["cpu_s"] <= LARGE_BUDGET_S),
                "of which the routing LP": record.figure(round(res["routing_cpu_s"], 1), "s")},
                notes="bilevel plan at 16,384 GPUs" + (" with the routing LP and pacing" if args.routes else
                                                        " (placement and schedule; no routing LP)"))
        return
    if args.large or not args.skip_large:
        run_large()


if __name__ == "__main__":
    main()
