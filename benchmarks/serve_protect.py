"""Inference beside training: what holding training collectives back (and routing them around
KV-cache transfers) buys the service's SLO attainment, and what it costs the training jobs.

On a training-beside-inference family (default benchmarks/scenarios/serve_beside_training.yaml:
a disaggregated OPT-13B chat service with DistServe's objectives whose prefill and decode servers
sit on different leaves of an 8:1 leaf-spine, beside two pretraining jobs whose data-parallel
traffic crosses the same uplinks) under the ``buffer`` grant, for every seed, the same scenario
runs with:

* ``none``: no control; ``adaptive``: adaptive routing (the literature baseline that, like
  kv-guard's paths, only moves training flows to other paths);
* ``kv-guard paths``: the `kv-guard` policy routing training pairs around the KV transfers, never
  holding;
* ``kv-guard alpha=a``: the same, also holding a training collective while the KV bytes waiting on
  its most shared link are at most the threshold ``max(B, s C) + a B`` (`flowherd.control.kvguard`:
  the optimal rule of docs/rl-structure.md, ``a`` the training seconds a second of KV delay is
  worth), for each ``a`` of ``--alphas``;
* ``kv-guard hold alpha=a``: holding only, default routes (buffering alone): the trade-off curve
  (SLO attainment against training mean JCT) as the hold threshold varies;
* ``bound``: the service alone (every training job removed, the background kept): no policy that
  acts on the training jobs' traffic can do better for the service, since the best it can do is
  to make that traffic vanish from the KV transfers' links.

Per arm: the service's TTFT attainment (share of requests within the objective's time) and SLO
attainment (TTFT and TPOT), its p99 TTFT and on how many seeds both 99th percentiles are within
their objectives, the training jobs' mean JCT (a job unfinished at the horizon counted to it),
each with a 95% CI over seeds and paired against ``none``; then where the TTFT goes (waiting,
prefill, the KV transfer's tail after the prefill) and how often kv-guard held. The headline
checks the criterion: attainment up by >= 20 points at <= 5% training JCT cost. ``--room`` runs
only no control and the service alone. Seeds 0-4 develop; 5-9 (the default) are held out.

    PYTHONPATH=src python benchmarks/serve_protect.py --figure docs/serve_beside_training.png \
        --name serve_beside_training
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import resource
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SCENARIO = HERE / "scenarios" / "serve_beside_training.yaml"


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def arms(alphas: list[float], room: bool = False) -> list[tuple[str, dict | None]]:
    """(label, kv-guard parameters) of every arm; None: no control or ``adaptive`` (adaptive
    routing, the baseline that also moves only paths); "bound": the service alone. ``room``: only
    no control and the bound (how much any policy could add)."""
    if room:
        return [("none", None), ("bound (service alone)", None)]
    out: list[tuple[str, dict | None]] = [("none", None), ("adaptive", None),
                                          ("kv-guard paths", {"hold": False})]
    for a in alphas:
        out.append((f"kv-guard alpha={a:g}", {"alpha": a}))
    for a in alphas:
        out.append((f"kv-guard hold alpha={a:g}", {"alpha": a, "paths": False}))
    out.append(("bound (service alone)", None))
    return out


def run_seed(cfg: dict) -> dict:
    """Every arm on one seed: per arm the service's and the training jobs' figures."""
    from flowherd.control import make_controller
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import load_scenario

    c0 = _cpu_s()
    sc = load_scenario(cfg["scenario"], seed=cfg["seed"])
    out = {"seed": cfg["seed"], "arms": {}}
    for label, params in arms(cfg["alphas"], cfg["room"]):
        scen, ctrl = sc, None
        if label.startswith("bound"):
            scen = dataclasses.replace(sc, jobs=tuple(j for j in sc.jobs if j.name in sc.slos))
        elif label == "adaptive":
            ctrl = make_controller("adaptive")
        elif params is not None:
            ctrl = make_controller("kv-guard", max_hold_s=cfg["max_hold_s"], **params)
        r = run_scenario(scen, solo=False, controller=ctrl)
        svc = r.summary["services"]
        parts = _ttft_parts([rec.service for rec in r.cluster.jobs if rec.service is not None])
        train = [min(j["jct_s"], sc.horizon_s - j["submit_s"]) if j["jct_s"] is not None
                 else sc.horizon_s - j["submit_s"] for j in r.jobs if j["kind"] == "training"]
        out["arms"][label] = {
            "ttft_attainment": float(np.mean([s["ttft_attainment"] for s in svc])),
            "slo_attainment": float(np.mean([s["slo_attainment"] for s in svc])),
            "p99_ttft_s": float(np.max([s["p99_ttft_s"] for s in svc])),
            "slo_met": bool(all(s["slo_met"] for s in svc)),
            **parts,
            "holds": getattr(ctrl, "holds", 0),
            "held_s": getattr(ctrl, "held_s", 0.0),
            "train_jct_s": float(np.mean(train)) if train else math.nan,
            "warnings": r.summary["warnings"],
        }
    out["cpu_s"] = _cpu_s() - c0
    print(f"seed {cfg['seed']}: " + "; ".join(f"{k} {v['ttft_attainment']:.3f}/{v['train_jct_s']:.3f} s"
                                             for k, v in out["arms"].items()), flush=True)
    return out


def _ttft_parts(records: list) -> dict[str, float]:
    """Where the time to first token goes, mean over the requests served by the horizon, seconds:
    waiting (batch window and a busy prefill replica), the prefill, and the KV transfer's tail after
    the prefill (the cache streams layer by layer during it); and the tail's 99th percentile."""
    wait, pre, tail = [], [], []
    for rec in records:
        b = rec.batch
        ok = ~np.isnan(rec.first_token_s)
        wait.append((rec.prefill_start_s[b] - rec.arrival_s)[ok])
        pre.append((rec.prefill_end_s[b] - rec.prefill_start_s[b])[ok])
        tail.append((rec.first_token_s - rec.prefill_end_s[b])[ok])
    cat = [np.concatenate(x) if x else np.zeros(0) for x in (wait, pre, tail)]
    if not cat[0].size:
        return {"wait_s": math.nan, "prefill_s": math.nan, "kv_tail_s": math.nan, "p99_kv_tail_s": math.nan}
    return {"wait_s": float(cat[0].mean()), "prefill_s": float(cat[1].mean()),
            "kv_tail_s": float(cat[2].mean()), "p99_kv_tail_s": float(np.percentile(cat[2], 99))}


def _ci(x) -> tuple[float, float]:
    from flowherd.experiments.stats import mean_ci95

    a = [float(v) for v in x if not math.isnan(v)]
    if len(a) < 2:
        return (a[0] if a else math.nan), 0.0
    return mean_ci95(a)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--seeds", type=int, nargs="+", default=[5, 6, 7, 8, 9],
                    help="seeds (0-4 develop the policy; 5-9, the default, are held out for the result)")
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.0, 1.0, 4.0, 16.0, math.inf],
                    help="KV-delay weights of the hold threshold max(B, sC) + alpha B (inf: always hold)")
    ap.add_argument("--max-hold", type=float, default=0.05, help="longest hold of a collective, seconds")
    ap.add_argument("--room", action="store_true",
                    help="only no control and the service alone: the room any policy has, before any runs")
    ap.add_argument("--jobs", type=int, default=1, choices=[1, 2])
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--name", default="serve_protect", help="result file name (benchmarks/results/NAME.json)")
    args = ap.parse_args(argv)

    import record

    t0, c0 = time.perf_counter(), _cpu_s()
    cfgs = [{"scenario": str(args.scenario), "seed": s, "alphas": args.alphas, "max_hold_s": args.max_hold,
             "room": args.room} for s in args.seeds]
    if args.jobs == 1:
        res = [run_seed(c) for c in cfgs]
    else:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            res = pool.map(run_seed, cfgs)
    labels = [a for a, _ in arms(args.alphas, args.room)]
    base = {k: np.array([r["arms"]["none"][k] for r in res]) for k in ("ttft_attainment", "slo_attainment",
                                                                          "train_jct_s")}
    print(f"\n== inference beside training on {args.scenario.name}, grant buffer, seeds {args.seeds} ==")
    head = (f"{'arm':<26} {'TTFT att. %':>14} {'vs none (pts)':>15} {'SLO att. %':>12} {'p99 TTFT ms':>12} "
            f"{'train JCT s':>13} {'vs none %':>14} {'p99 met':>8}")
    print(head)
    rows, best = [], None
    for label in labels:
        att = np.array([r["arms"][label]["ttft_attainment"] for r in res])
        slo = np.array([r["arms"][label]["slo_attainment"] for r in res])
        p99 = np.array([r["arms"][label]["p99_ttft_s"] for r in res])
        jct = np.array([r["arms"][label]["train_jct_s"] for r in res])
        met_n = sum(bool(r["arms"][label]["slo_met"]) for r in res)
        a, ah = _ci(100 * att)
        d, dh = _ci(100 * (att - base["ttft_attainment"]))
        s, _ = _ci(100 * slo)
        j, jh = _ci(jct)
        c, ch = (math.nan, 0.0) if label.startswith("bound") else _ci(100 * (jct / base["train_jct_s"] - 1))
        print(f"{label:<26} {a:>7.2f} +-{ah:<5.2f} {d:>+7.2f} +-{dh:<5.2f} {s:>12.2f} "
              f"{1e3 * np.mean(p99):>12.1f} "
              f"{j:>6.3f} +-{jh:<5.3f} {c:>+6.2f} +-{ch:<5.2f} {met_n:>4d}/{len(res)}")
        rows.append([label, round(a, 3), round(ah, 3), round(d, 3), round(dh, 3), round(s, 3),
                     round(1e3 * float(np.mean(p99)), 2), round(j, 4), round(jh, 4),
                     None if math.isnan(c) else round(c, 3), round(ch, 3), met_n])
        if label.startswith("kv-guard") and c <= 5.0 and (best is None or d > best[1]):
            best = (label, d, dh, c, ch)
    print("\nwhere the time to first token goes (mean over requests and seeds, ms) and kv-guard's holds:")
    print(f"{'arm':<26} {'waiting':>8} {'prefill':>8} {'KV tail':>8} {'p99 KV tail':>12} {'holds':>7} "
          f"{'held s':>8}")
    parts = []
    for label in labels:
        m = {k: float(np.mean([r["arms"][label][k] for r in res]))
             for k in ("wait_s", "prefill_s", "kv_tail_s", "p99_kv_tail_s", "holds", "held_s")}
        print(f"{label:<26} {1e3 * m['wait_s']:>8.1f} {1e3 * m['prefill_s']:>8.1f} "
              f"{1e3 * m['kv_tail_s']:>8.1f} {1e3 * m['p99_kv_tail_s']:>12.1f} {m['holds']:>7.0f} "
              f"{m['held_s']:>8.2f}")
        ms = [round(1e3 * m[k], 2) for k in ("wait_s", "prefill_s", "kv_tail_s", "p99_kv_tail_s")]
        parts.append([label, *ms, round(m["holds"], 1), round(m["held_s"], 3)])
    warn = sorted({w for r in res for a in r["arms"].values() for w in a["warnings"]})
    for w in warn:
        print(f"warning: {w}")
    gap_b, gap_bh = _ci(100 * (np.array([r["arms"][labels[-1]]["ttft_attainment"] for r in res])
                               - base["ttft_attainment"]))
    print(f"\nroom: the service alone is {gap_b:+.2f} +-{gap_bh:.2f} points of TTFT attainment above no "
          "control "
          "(an upper bound on what any policy acting on the training traffic can add)")
    met = best is not None and best[1] - best[2] >= 20.0
    if best is not None:
        print(f"best arm within 5% training JCT cost: {best[0]}: {best[1]:+.2f} +-{best[2]:.2f} points at "
              f"{best[3]:+.2f} +-{best[4]:.2f}% training JCT (criterion: >= +20 points: "
              f"{'met' if met else 'not met'})")
    # one process: its own clock holds every seed; a pool: the workers' seeds plus this process
    cpu = _cpu_s() - c0 + (sum(r["cpu_s"] for r in res) if args.jobs > 1 else 0.0)
    print(f"CPU {cpu:.0f} s ({time.perf_counter() - t0:.0f} s wall)")
    figures = {
        "best TTFT attainment gain at <= 5% training JCT cost": record.figure(
            round(best[1], 3) if best else math.nan, "points", ci95=round(best[2], 3) if best else None,
            target=">= +20 points", met=bool(met)),
        "room: service alone vs none": record.figure(round(gap_b, 3), "points", ci95=round(gap_bh, 3)),
        "whole run": record.figure(round(cpu, 1), "CPU-s"),
    }
    cols = ["arm", "TTFT attainment %", "ci95", "vs none (points)", "ci95", "SLO attainment %",
            "p99 TTFT (ms, mean over seeds)", "training mean JCT (s)", "ci95", "training JCT vs none (%)",
            "ci95", "seeds with both p99 within the SLO"]
    record.save(args.name, figures, tables=[record.table(
        f"{args.scenario.name}, buffer grant, seeds {args.seeds}", cols, rows), record.table(
        "time to first token by part (ms, mean over requests and seeds) and kv-guard's holds (per seed)",
        ["arm", "waiting", "prefill", "KV tail after prefill", "p99 KV tail", "holds", "held (s)"], parts)],
        notes="kv-guard (flowherd.control.kvguard) against no control; the bound is the service alone")
    if args.figure is not None:
        _figure(res, labels, args, base)
        print(f"figure: {args.figure}")
    return 0


def _figure(res: list[dict], labels: list[str], args, base) -> None:
    """TTFT attainment against training mean JCT: no control, adaptive, the two kv-guard sweeps
    (each point annotated with its alpha), the bound, and the 5% training-cost line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.8, 4.0))
    pt = {label: (float(np.mean([r["arms"][label]["train_jct_s"] for r in res])),
                  100 * float(np.mean([r["arms"][label]["ttft_attainment"] for r in res])))
          for label in labels}
    ax.plot(*pt["none"], "o", color="k", label="no control")
    if "adaptive" in pt:
        ax.plot(*pt["adaptive"], "D", color="C3", label="adaptive routing")
    ax.axvline(1.05 * float(np.mean(base["train_jct_s"])), color="0.6", ls=":", lw=1,
               label="5% training JCT cost")
    for pre, mk, col, name in (("kv-guard alpha=", "o", "C0", "kv-guard (paths + hold), alpha varied"),
                               ("kv-guard hold alpha=", "s", "C1", "kv-guard hold only, alpha varied")):
        arm = [(label[len(pre):], *pt[label]) for label in labels if label.startswith(pre)]
        if not arm:
            continue
        ax.plot([a[1] for a in arm], [a[2] for a in arm], "-" + mk, color=col, ms=4, lw=0.8, label=name)
        for a, x, y in arm:
            ax.annotate(a, (x, y), textcoords="offset points", xytext=(4, -9 if mk == "o" else 4),
                        fontsize=6, color=col)
    if "kv-guard paths" in pt:
        ax.plot(*pt["kv-guard paths"], "^", color="C2", label="kv-guard paths only")
    bound = next((label for label in labels if label.startswith("bound")), None)
    if bound is not None:
        ax.axhline(pt[bound][1], color="k", ls="--", lw=1, label="bound: the service alone")
    ax.set_xlabel("training jobs' mean JCT (s), mean over seeds")
    ax.set_ylabel("TTFT attainment (% of requests)")
    ax.set_title(f"{args.scenario.stem}, seeds {args.seeds[0]}-{args.seeds[-1]}: SLO attainment against "
                 "training JCT as kv-guard's hold threshold varies", fontsize=8)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.figure, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
