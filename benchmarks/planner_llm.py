"""The planner on the LLM-era families (`benchmarks/scenarios/llm_*.yaml`), run by
``benchmarks/planner.py --simulate --scenarios llm_kalos_4to1,llm_kalos_8to1,llm_seren_1to1,llm_kalos_rail``
(and ``llm_lingjun_1to1,llm_lingjun_15to1``: the Kalos jobs on the real Lingjun mapping).

Each family is a YAML scenario whose jobs come from `flowherd.workload.llm_cluster` (the Acme
clusters' figures); seed s is another window of the generator (another draw of jobs, background
flows and hashes). Every variant plans the same jobs and runs under the same scheduler (EASY
backfilling in least-work order, `flowherd.planning.timeline`), except ``topology`` (FIFO), the
first step of the split:

* baselines: ``first-fit+backfill`` (lowest free GPU ids), ``topology+backfill`` (fewest servers,
  then fewest leaves), ``arnold+backfill`` (Arnold's MIP over DP-group and pipeline spread,
  `flowherd.planning.groups.arnold_counts`), ``monkeytree+backfill`` (topology placement, then
  MonkeyTree's migration rule and ILP at every job start and end, `flowherd.planning.migration`,
  each moved worker down `MIGRATION_COST_S`), all routed by the scenario's routing (ECMP);
* the plan: ``bilevel`` (group-aligned candidates scored by the routing LP,
  `flowherd.planning.bilevel`) routed by ECMP (``bilevel+ecmp``), by the windowed MCF
  (``bilevel``), paced (``bilevel+pacing``: what a scenario's plan is under roce), and with
  migration as its lever (``bilevel+migration``: MonkeyTree's ILP proposes, the model's predicted
  gain against the stalls at `MIGRATION_COST_S` per moved worker decides).

The gain split over ``topology`` (FIFO): backfilling (-> topology+backfill), placement
(-> bilevel+ecmp), routing (-> bilevel), pacing (-> bilevel+pacing), migration
(-> bilevel+migration); each step's paired mean difference with its 95% CI (Student t over the
seeds). "Isolated": each job's run time alone on the idle fabric by the planner's model (no
queue, no other job, no background), the floor a plan can approach; the gap of a variant is its
mean JCT over that.

Where the gap is (`why`), from each simulated job's record: its queueing (start less submission)
and its run time alone on the idle fabric as the simulator measures it (iterations times its
solo iteration); "queue + alone" is the mean JCT the same starts would give if no job ever met
another job's or the background's traffic: the most a placement, routing or pacing under that
schedule can remove is the variant's mean JCT less it ("sharing"). "Shared" is the share of the
jobs' run time during which a job spread over leaves runs beside another such job on one of its
leaves (their rings then share that leaf's uplinks); on a fabric whose leaves hang from different
aggregation groups (the Lingjun mapping's PSW groups, `leaf_pods`) the same at the pods' level
(their traffic then shares a pod's uplinks to the core). Cells are cached (JSON lines, keyed by
family, seed, label and the plan's signature) so a run can be resumed and reported.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np

from flowherd.planning.view import leaf_pods

FAMILIES = ("llm_kalos_4to1", "llm_kalos_8to1", "llm_seren_1to1", "llm_kalos_rail")
# the Kalos jobs on the real Lingjun mapping (flowherd.fabric.lingjun), full bisection and 15:1 to the core
LINGJUN_FAMILIES = ("llm_lingjun_1to1", "llm_lingjun_15to1")
# the oversubscribed, communication-heavy families (the ones the plan must beat topology+backfill on)
OVERSUBSCRIBED = ("llm_kalos_4to1", "llm_kalos_8to1", "llm_lingjun_15to1")
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
MIGRATION_COST_S = 9.02  # MonkeyTree (arXiv 2602.08296): end-to-end overhead per migrated worker
LLM_VARIANTS = [
    ("topology", "topology", {}),
    ("topology+backfill", "topology", {"backfill": True}),
    ("first-fit+backfill", "packed", {"backfill": True}),
    ("arnold+backfill", "arnold", {"backfill": True}),
    ("bilevel+ecmp", "bilevel", {}),
    ("bilevel", "bilevel", {"routes": True, "pace": False}),
    ("bilevel+pacing", "bilevel", {"routes": True, "pace": True}),
    ("monkeytree+backfill", "monkeytree", {"backfill": True,
                                           "migration_cost_per_worker_s": MIGRATION_COST_S}),
    ("bilevel+migration", "bilevel", {"routes": True, "pace": True,
                                      "migration_cost_per_worker_s": MIGRATION_COST_S}),
]
PRIORITY = ("topology+backfill", "bilevel+pacing", "arnold+backfill", "bilevel+ecmp", "bilevel", "topology",
            "monkeytree+backfill", "bilevel+migration", "first-fit+backfill")
CHAIN = (("topology", "topology+backfill", "backfilling"), ("topology+backfill", "bilevel+ecmp", "placement"),
         ("bilevel+ecmp", "bilevel", "routing"), ("bilevel", "bilevel+pacing", "pacing"),
         ("bilevel+pacing", "bilevel+migration", "migration"))


def _read(cache: str | None) -> dict:
    """Rows of the cache files (comma-separated: all are read; new rows go to the first)."""
    out = {}
    for one in (cache or "").split(","):
        if one and Path(one).exists():
            for line in Path(one).read_text().splitlines():
                if line.strip():
                    r = json.loads(line)
                    out[(r["family"], r["seed"], r["label"])] = r
    return out


def _isolated_mean_s(sc) -> float:
    """Mean over the jobs of their run time alone on the idle fabric by the planner's model."""
    from flowherd.planning.predict import fabric_view, profile_job

    view = fabric_view(sc.fabric)
    out = []
    for j in sc.jobs:
        p = profile_job(j, view)
        if p.fixed_duration_s is not None:
            out.append(p.fixed_duration_s)
        else:
            one = p.single_server_s if p.single_server_s is not None else math.inf
            out.append(p.iterations * min(one, p.base_s + p.network_s))
    return float(np.mean(out)) if out else 0.0


def job_records(sc, plan, res) -> list[list]:
    """Per simulated job: [name, submit_s, start_s, finish_s, iterations, solo_iteration_s (alone on
    the idle fabric, measured by the simulator), the leaves its GPUs span] (None where it did not
    start or end before the horizon)."""
    from flowherd.planning.predict import _server_of, fabric_view

    view = fabric_view(sc.fabric)
    srv = _server_of(view)
    out = []
    for r in res.jobs:
        leaves = sorted({int(x) for x in view.server_leaf[srv[np.asarray(r.gpus, dtype=np.int64)]]}) if len(
            r.gpus) else []
        out.append([r.name, r.submit_s, r.start_s, r.finish_s, int(r.iterations_planned),
                    r.solo_iteration_s, leaves])
    return out


def _signature(plan) -> str:
    import hashlib

    routes = sorted((k, [[list(p), round(w, 9)] for p, w in v]) for k, v in (plan.routes or {}).items())
    pace = sorted((plan.info or {}).get("pacing", {}).items())
    mig = (plan.info or {}).get("migrations", [])
    key = json.dumps([[j.name, list(j.gpus), round(j.start_s, 9)] for j in plan.jobs] + [routes]
                     + ([[[k, round(v, 3)] for k, v in pace]] if pace else []) + ([mig] if mig else []))
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def cell_order(labels: list[str], seeds: int, by_seed: bool = False) -> list[tuple[str, int]]:
    """(label, seed) in run order: variant by variant (``labels``' order), every seed of each; with
    ``by_seed`` seed by seed, every variant of each."""
    if by_seed:
        return [(label, seed) for seed in range(seeds) for label in labels]
    return [(label, seed) for label in labels for seed in range(seeds)]


def simulate(families: tuple[str, ...] = FAMILIES, seeds: int = 10, network: str = "roce",
             labels: tuple[str, ...] | None = None, cache: str | None = None,
             report_only: bool = False, by_seed: bool = False) -> dict:
    """Plan and simulate every variant on every family and seed (module docstring); print the
    tables; return them (per family: label -> {seed: row}). Cells run variant by variant in
    `PRIORITY` order, every seed of each; with ``by_seed`` seed by seed, every variant of each (a
    run cut short then holds every variant on its first seeds)."""
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.planning.estimate import simulate_plan
    from flowherd.planning.plan import SimCheck, make_plan

    done = _read(cache)
    by_sig = {(r["family"], r["seed"], r["signature"]): r for r in done.values()}
    variants = {label: (method, opts) for label, method, opts in LLM_VARIANTS}
    order = [x for x in PRIORITY if x in variants and (not labels or x in labels)]
    if not report_only:
        bases = {fam: read_scenario_mapping(SCENARIOS / f"{fam}.yaml") for fam in families}
        fabrics: dict = {}
        made: dict = {}  # this run's paced plans (the unpaced plan is the paced one without its caps)
        # variant by variant in `PRIORITY` order, every seed of each: a run cut short holds the
        # first variants on every seed (the reference and the plan first: paired comparisons);
        # ``by_seed``: every variant on the first seeds
        for (label, seed), fam in ((c, f) for c in cell_order(order, seeds, by_seed) for f in families):
            if (fam, seed, label) in done:
                continue
            sc = scenario_from_mapping({**bases[fam], "seed": seed, "network": network})
            # one fabric object per family: the planner's job profiles are cached per
            # fabric view and job shape, and the shapes recur from seed to seed
            sc = dataclasses.replace(sc, fabric=fabrics.setdefault(fam, sc.fabric))
            method, opts = variants[label]
            opts = dict(opts)
            c0 = time.process_time()
            paced = made.get((fam, seed, "bilevel+pacing"))
            if label == "bilevel" and paced is not None:
                # the same plan without the pacing caps: `make_plan` computes the caps after
                # the routes and nothing else depends on them, so no second routing LP
                plan = dataclasses.replace(paced, info={k: v for k, v in paced.info.items()
                                                        if k != "pacing"})
            else:
                plan = make_plan(sc.fabric, sc.jobs, method=method, seed=seed,
                                 background=sc.background, window_s=sc.horizon_s / 100,
                                 routing=sc.routing, **opts)
            if label == "bilevel+pacing":
                made[(fam, seed, label)] = plan
            plan_cpu = time.process_time() - c0
            sig = _signature(plan)
            hit = by_sig.get((fam, seed, sig))
            if hit is None:
                check = SimCheck(horizon_s=sc.horizon_s, routing=sc.routing, background=sc.background,
                                 fidelity=sc.fidelity, seed=seed, network=sc.network)
                c1 = time.process_time()
                ran = simulate_plan(sc.fabric, sc.jobs, plan, check)
                mean_s, per_job = ran.mean_jct_s, job_records(sc, plan, ran.cluster)
                sim_cpu = time.process_time() - c1
            else:
                mean_s, sim_cpu, per_job = hit["simulated_mean_jct_s"], 0.0, hit.get("per_job", [])
            iso = _isolated_mean_s(sc)
            pred = float(plan.predicted_mean_jct_s)
            row = {"family": fam, "seed": seed, "label": label, "signature": sig,
                   "simulated_mean_jct_s": mean_s, "predicted_mean_jct_s": pred,
                   "jct_error": pred / mean_s - 1.0 if mean_s > 0 else math.nan,
                   "isolated_mean_s": iso, "plan_cpu_s": plan_cpu, "sim_cpu_s": sim_cpu,
                   "jobs": len(sc.jobs), "network": sc.network.model,
                   "migrations": len(plan.info.get("migrations", [])),
                   "placement_notes": plan.info.get("placement_notes", []), "per_job": per_job}
            done[(fam, seed, label)] = by_sig[(fam, seed, sig)] = row
            if cache:
                with open(cache.split(",")[0], "a") as fh:
                    fh.write(json.dumps(row) + "\n")
            print(f"  {fam} seed {seed} {label:20s}: simulated {mean_s:9.3f} s, predicted "
                  f"{pred:9.3f} s ({100 * row['jct_error']:+.1f}%), isolated {iso:.3f} s; planned "
                  f"{plan_cpu:.1f} CPU-s, "
                  f"simulated {sim_cpu:.1f} CPU-s" + (f"; LP changed {len(row['placement_notes'])} "
                                                     "placements" if row["placement_notes"] else ""),
                  flush=True)
    table: dict = {}
    for (fam, seed, label), r in done.items():
        if fam in families and seed < seeds:
            table.setdefault(fam, {}).setdefault(label, {})[seed] = r
    for fam in families:
        if fam in table:
            report(fam, table[fam])
    return table


def _ci(x: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    if x.size < 2:
        return float(x.mean()) if x.size else math.nan, math.nan
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def paired(rows: dict, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """Simulated mean JCTs of ``a`` and ``b`` on the seeds both have."""
    common = sorted(set(rows.get(a, {})) & set(rows.get(b, {})))
    return (np.array([rows[a][s]["simulated_mean_jct_s"] for s in common]),
            np.array([rows[b][s]["simulated_mean_jct_s"] for s in common]))


def verdict(d: np.ndarray) -> str:
    """"better", "worse" or "tie" from paired differences (a - b): the 95% CI excludes zero or not."""
    m, h = _ci(d)
    if not math.isfinite(h):
        return "n/a"
    return "tie" if abs(m) <= h else ("better" if m < 0 else "worse")


def _by_owner(per_job: list) -> dict[str, list]:
    """Per job (the parts of a migrated one merged): [submit_s, start_s, finish_s, iterations, solo
    iteration s, leaves]."""
    out: dict[str, list] = {}
    for name, submit, start, finish, its, solo, leaves in per_job:
        owner = name.split("~", 1)[0]
        if owner not in out:
            out[owner] = [submit, start, finish, its, solo, set(leaves)]
            continue
        o = out[owner]
        o[2] = None if finish is None or o[2] is None else max(o[2], finish)
        o[3] += its
        o[5] |= set(leaves)
    return out


_PODS: dict[str, np.ndarray | None] = {}


def family_pods(fam: str) -> np.ndarray | None:
    """`leaf_pods` of a family's fabric (None where its file is not found)."""
    if fam not in _PODS:
        from flowherd.experiments.scenario import read_scenario_mapping
        from flowherd.fabric.spec import fabric_from_mapping

        path = SCENARIOS / f"{fam}.yaml"
        _PODS[fam] = (leaf_pods(fabric_from_mapping(read_scenario_mapping(path)["fabric"]))
                      if path.exists() else None)
    return _PODS[fam]


def _shared_share(done: dict, units: dict) -> float:
    """Share of the run time that jobs spread over several ``units`` (their leaves or pods) spend
    beside another such job on a common unit."""
    spread = {k: v for k, v in done.items() if len(units[k]) > 1}
    shared = 0.0
    for k, v in spread.items():
        ivs = sorted((max(v[1], w[1]), min(v[2], w[2])) for q, w in spread.items()
                     if q != k and units[k] & units[q] and min(v[2], w[2]) > max(v[1], w[1]))
        t, cover = -math.inf, 0.0
        for a, b in ivs:  # the union of the overlaps
            if b > t:
                cover += b - max(a, t)
                t = b
        shared += cover
    run = sum(v[2] - v[1] for v in done.values())
    return shared / run if run > 0 else 0.0


def why(row: dict, pods: np.ndarray | None = None) -> dict[str, float]:
    """Where a cell's JCT goes (module docstring): mean queueing, mean run time alone (the
    simulator's solo iterations), queue + alone, sharing (mean JCT less queue + alone), and the
    share of run time spread jobs spend beside another spread job on a common leaf; with ``pods``
    (`leaf_pods`, more than one pod) the same at the pods' level (their uplinks to the core)."""
    jobs = _by_owner(row.get("per_job") or [])
    done = {k: v for k, v in jobs.items() if v[1] is not None and v[2] is not None and v[4] is not None}
    if not done:
        return {}
    queue = np.array([v[1] - v[0] for v in done.values()])
    alone = np.array([v[3] * v[4] for v in done.values()])
    run = np.array([v[2] - v[1] for v in done.values()])
    mean = float(row["simulated_mean_jct_s"])
    out = {"queue_s": float(queue.mean()), "alone_s": float(alone.mean()), "run_s": float(run.mean()),
           "queue_alone_s": float((queue + alone).mean()), "sharing_s": mean - float((queue + alone).mean()),
           "shared_share": _shared_share(done, {k: v[5] for k, v in done.items()})}
    if pods is not None and np.unique(pods).size > 1:
        on_pods = {k: {int(pods[x]) for x in v[5]} for k, v in done.items()}
        out["pod_shared_share"] = _shared_share(done, on_pods)
    return out


def report(fam: str, rows: dict) -> list[list]:
    """Print a family's table: per variant mean JCT, the difference to topology+backfill (95% CI,
    better/tie/worse), predicted vs simulated, the gap to the isolated times; then the split."""
    print(f"\n== {fam}: seeds per variant " + ", ".join(f"{k} {len(v)}" for k, v in rows.items()))
    out = []
    ref = "topology+backfill"
    for label, _, _ in LLM_VARIANTS:
        per = rows.get(label)
        if not per:
            continue
        x = np.array([r["simulated_mean_jct_s"] for r in per.values()])
        err = np.array([r["jct_error"] for r in per.values()])
        iso = np.array([r["isolated_mean_s"] for r in per.values()])
        line = (f"  {label:20s}: mean JCT {x.mean():9.3f} s (isolated {iso.mean():.3f}, gap "
                f"{100 * np.mean(x / iso - 1):+.1f}%); predicted vs simulated {100 * err.mean():+.2f}% "
                f"(max |.| "
                f"{100 * np.abs(err).max():.2f}%)")
        if label != ref and ref in rows:
            xa, xb = paired(rows, label, ref)
            m, h = _ci(xa - xb)
            rel = 100 * np.mean(xa / xb - 1) if xa.size else math.nan
            common = sorted(set(rows[label]) & set(rows[ref]))
            iso_c = np.array([rows[ref][s]["isolated_mean_s"] for s in common])
            gap_a, gap_b = xa - iso_c, xb - iso_c
            closed = 100 * (1 - gap_a.sum() / gap_b.sum()) if gap_b.sum() > 0 else math.nan
            line += (f"; vs {ref} {m:+.3f} +- {h:.3f} s ({rel:+.2f}%, {verdict(xa - xb)}, better on "
                     f"{int((xa < xb).sum())}/{xa.size}; closes {closed:.1f}% of its gap to isolated)")
        print(line)
        out.append([label, float(x.mean()), float(100 * err.mean())])
    parts = []
    for a, b, what in CHAIN:
        if a in rows and b in rows:
            xa, xb = paired(rows, a, b)
            m, h = _ci(xa - xb)
            parts.append(f"{what} {m:+.3f} +- {h:.3f} s ({100 * np.mean((xa - xb) / xa):.2f}%, "
                         f"{verdict(xb - xa)})")
    if parts:
        print("  gain split over topology (FIFO), positive = faster: " + "; ".join(parts))
    for other in ("arnold+backfill", "monkeytree+backfill"):
        for mine in ("bilevel+pacing", "bilevel+migration"):
            if mine in rows and other in rows:
                xa, xb = paired(rows, mine, other)
                m, h = _ci(xa - xb)
                print(f"  {mine} - {other}: {m:+.3f} +- {h:.3f} s ({100 * np.mean(xa / xb - 1):+.2f}%, "
                      f"{verdict(xa - xb)})")
    pods = family_pods(fam)
    for label in ("topology+backfill", "bilevel+pacing"):
        ws = [w for w in (why(r, pods) for r in rows.get(label, {}).values()) if w]
        if ws:
            m = {k: float(np.mean([w[k] for w in ws])) for k in ws[0]}
            jct = float(np.mean([r["simulated_mean_jct_s"] for r in rows[label].values()]))
            print(f"  where {label}'s JCT goes ({len(ws)} seeds): mean JCT {jct:.3f} s = queueing "
                  f"{m['queue_s']:.3f} + alone {m['alone_s']:.3f} + sharing {m['sharing_s']:.3f} s (queue + "
                  f"alone {m['queue_alone_s']:.3f} s; sharing {100 * m['sharing_s'] / jct:.2f}% of the JCT); "
                  "spread jobs beside another spread job on a common leaf "
                  f"{100 * m['shared_share']:.1f}% of the run time"
                  + (f"; spread over pods beside another such job on a common pod "
                     f"{100 * m['pod_shared_share']:.1f}%" if "pod_shared_share" in m else ""))
    if "bilevel+migration" in rows:
        n = [r.get("migrations", 0) for r in rows["bilevel+migration"].values()]
        print(f"  migrations of the plan's lever: {sum(n)} over {len(n)} seeds")
    if "monkeytree+backfill" in rows:
        n = [r.get("migrations", 0) for r in rows["monkeytree+backfill"].values()]
        print(f"  MonkeyTree's migrations: {sum(n)} over {len(n)} seeds")
    notes = [n for r in rows.get("bilevel+pacing", {}).values() for n in r.get("placement_notes", [])]
    if notes:
        print(f"  where the routing LP changed a placement ({len(notes)}): " + " | ".join(notes[:4]))
    return out


def record_tables(table: dict, name: str) -> None:
    """Save the families' headline figures and tables (`benchmarks/record.py`): per family every
    variant against topology+backfill, the gain split, the plan against the Arnold-style and
    MonkeyTree-style baselines, and where the JCT goes."""
    import record

    figures, tables = {}, []
    ref, mine = "topology+backfill", "bilevel+pacing"
    for fam, rows in table.items():
        lines = []
        for label, _, _ in LLM_VARIANTS:
            if label not in rows:
                continue
            x = np.array([r["simulated_mean_jct_s"] for r in rows[label].values()])
            err = np.array([r["jct_error"] for r in rows[label].values()])
            m = h = rel = math.nan
            v = ""
            if label != ref and ref in rows:
                xa, xb = paired(rows, label, ref)
                m, h = _ci(xa - xb)
                rel = 100 * float(np.mean(xa / xb - 1))
                v = verdict(xa - xb)
            lines.append([label, len(x), round(float(x.mean()), 3), round(m, 3), round(h, 3), round(rel, 2),
                          v, round(float(100 * err.mean()), 2), round(float(100 * np.abs(err).max()), 2)])
        seeds = max(len(v) for v in rows.values())
        net = next(iter(next(iter(rows.values())).values()))["network"]
        tables.append(record.table(f"{fam} (seeds 0-{seeds - 1}, network {net})",
                                   ["variant", "seeds", "mean JCT (s)", "minus topology+backfill (s)",
                                    "95% CI (s)", "relative (%)", "verdict", "predicted vs simulated (%)",
                                    "max |error| (%)"], lines))
        split = []
        for a, b, what in CHAIN:
            if a in rows and b in rows:
                xa, xb = paired(rows, a, b)
                m, h = _ci(xa - xb)
                split.append([what, f"{a} -> {b}", len(xa), round(m, 3), round(h, 3),
                              round(100 * float(np.mean((xa - xb) / xa)), 2), verdict(xb - xa)])
        if split:
            tables.append(record.table(f"{fam}: gain split over topology (FIFO), positive = faster",
                                       ["step", "from -> to", "seeds", "gain (s)", "95% CI (s)", "gain (%)",
                                        "verdict"], split))
        why_rows = []
        pods = family_pods(fam)
        for label in (ref, mine):
            ws = [w for w in (why(r, pods) for r in rows.get(label, {}).values()) if w]
            if ws:
                mm = {k: float(np.mean([w[k] for w in ws])) for k in ws[0]}
                jct = float(np.mean([r["simulated_mean_jct_s"] for r in rows[label].values()]))
                why_rows.append([label, len(ws), round(jct, 3), round(mm["queue_s"], 3),
                                 round(mm["alone_s"], 3), round(mm["sharing_s"], 3),
                                 round(100 * mm["sharing_s"] / jct, 2), round(100 * mm["shared_share"], 1)]
                                + ([round(100 * mm["pod_shared_share"], 1)]
                                   if "pod_shared_share" in mm else []))
        if why_rows:
            tables.append(record.table(f"{fam}: where the JCT goes",
                                       ["variant", "seeds", "mean JCT (s)", "queueing (s)", "alone (s)",
                                        "sharing (s)", "sharing (% of JCT)",
                                        "spread beside spread on a leaf (% of run time)"]
                                       + (["spread beside spread on a pod (% of run time)"]
                                          if len(why_rows[0]) > 8 else []), why_rows))
        if mine in rows and ref in rows:
            xa, xb = paired(rows, mine, ref)
            m, h = _ci(xa - xb)
            rel = 100 * float(np.mean(xa / xb - 1))
            figures[f"{fam}: plan - topology+backfill"] = record.figure(
                round(m, 3), "s", ci95=round(h, 3), **({"target": "<= -10%", "met": rel <= -10.0}
                                                       if fam in OVERSUBSCRIBED else {}))
            for other in ("arnold+backfill", "monkeytree+backfill"):
                if other in rows:
                    xa, xb = paired(rows, mine, other)
                    m, h = _ci(xa - xb)
                    figures[f"{fam}: plan - {other}"] = record.figure(round(m, 3), "s", ci95=round(h, 3))
            err = np.array([r["jct_error"] for r in rows[mine].values()])
            worst = float(np.abs(err).max())
            figures[f"{fam}: plan, predicted vs simulated mean JCT, max |error|"] = record.figure(
                round(100 * worst, 2), "%", target="<= 5", met=worst <= 0.05)
    record.save(name, figures, tables=tables)
