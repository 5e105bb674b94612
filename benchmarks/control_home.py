"""Each literature baseline under its own paper's levers, and flowherd under the same grant.

`benchmarks/control.py` runs every controller under one common grant; a baseline built for other
levers is then judged on levers it never asked for (Sincronia and Varys order coflows by switch
priorities, MLTCP by congestion-window weights: under ``buffer`` they decide nothing). This script
gives each baseline its *home grant*, the levers its paper acts with, runs flowherd under each of
those grants too, on the same scenario and seeds, and prints per home grant the baseline, flowherd,
their paired difference of mean JCT (95% CI, Student t over the seeds; a CI that holds 0 is a
tie) and what each costs others against no control on the same seed: the background flows' mean
and p99 FCT, and the worst tenant's mean slowdown.

Home grants (`HOME`), as `flowherd.cluster.control_api.Levers` fields:

* CASSINI (NSDI'24): ``delays`` (it shifts iterations in time; no paths, no classes).
* Crux (SIGCOMM'24): ``paths+classes`` (its path selection and 8 priority classes, Sec. 4; the
  classes above the background, as switch queues give them).
* MLTCP (NSDI'25): ``weights`` (its congestion window's aggressiveness as a share weight).
* Sincronia (SIGCOMM'18) and Varys (SIGCOMM'14): ``classes+weights`` (priorities, and Varys'
  rates as weights).

    python benchmarks/control_home.py --scenarios heavy --seeds 5 --json-out home.json
    python benchmarks/control_home.py --reuse home.json --scenarios heavy   # the tables only
    python benchmarks/control_home.py --scenarios heavy --baselines cassini  # one baseline's grant
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import control as bench  # noqa: E402  (the benchmark beside this script)
import runpool  # noqa: E402

HOME: dict[str, dict] = {
    "delays": {"delay": True, "paths": False},
    "paths+classes": {"delay": False, "paths": True, "priority_classes": 8, "above_background": True},
    "weights": {"delay": False, "paths": False, "weights": True},
    "classes+weights": {"delay": False, "paths": False, "weights": True, "priority_classes": 8,
                        "above_background": True},
}
BASELINE_HOME = {"cassini": "delays", "crux": "paths+classes", "mltcp": "weights",
                 "sincronia": "classes+weights", "varys": "classes+weights"}


def tasks_for(level: str, path: Path, seeds: range, network, fidelity: str | None = None,
              baselines: list[str] | None = None) -> list[tuple]:
    """The runs of the home-grant table: no control, each baseline and flowherd under each home
    (``fidelity``: every run's simulation fidelity, None for the scenario's; ``baselines``: only
    these baselines and flowherd under their home grants, None for all)."""
    chosen = {b: g for b, g in BASELINE_HOME.items() if baselines is None or b in baselines}
    out = []
    for sd in seeds:
        out.append((level, path, "none", "none", {}, sd, "buffer", network, True, fidelity))
        for b, g in chosen.items():
            out.append((level, path, b, b, {}, sd, HOME[g], network, True, fidelity))
        for g in HOME:
            if g in chosen.values():
                out.append((level, path, f"flowherd@{g}", "flowherd", {}, sd, HOME[g], network, True,
                            fidelity))
    return out


def _base(label: str) -> str:
    """The registered controller of a row's label (``flowherd@<grant>`` is ``flowherd``)."""
    return label.split("@", 1)[0]


def _key(r: dict) -> tuple:
    return (r["scenario"], r["controller"], r["seed"])


def table(rows: list[dict], level: str) -> list[list]:
    """Per home grant and controller: mean JCT, flowherd - baseline (paired), cost to others."""
    sub = [r for r in rows if r["scenario"] == level]
    none_of = {r["seed"]: r for r in sub if r["controller"] == "none"}
    out = []
    for b, g in BASELINE_HOME.items():
        mine = {r["seed"]: r for r in sub if r["controller"] == f"flowherd@{g}"}
        theirs = {r["seed"]: r for r in sub if r["controller"] == b}
        seeds = sorted(set(mine) & set(theirs) & set(none_of))
        if not seeds:
            continue
        diff = np.array([mine[s]["mean_jct_s"] - theirs[s]["mean_jct_s"] for s in seeds])
        d, h = bench.ci95(diff)
        verdict = ("tie" if math.isfinite(h) and abs(d) <= h
                   else ("flowherd ahead" if d < 0 else "baseline ahead"))
        for lab, rs in ((b, theirs), (f"flowherd@{g}", mine)):
            rl = [rs[s] for s in seeds]
            m, mh = bench.ci95([r["mean_jct_s"] for r in rl])
            nm = np.mean([none_of[s]["mean_jct_s"] for s in seeds])
            worst = np.mean([max(r["tenant_slowdown"].values(), default=math.nan) -
                             max(none_of[r["seed"]]["tenant_slowdown"].values(), default=math.nan)
                             for r in rl
                             if r.get("tenant_slowdown") and none_of[r["seed"]].get("tenant_slowdown")]
                            or [math.nan])
            out.append([g, lab, f"{m:.2f} +-{mh:.2f}", f"{100 * (m / nm - 1):+.1f}%",
                        f"{d:+.2f} +-{h:.2f} ({verdict})" if lab == b else "",
                        bench._paired_change(rl, none_of, "bg_mean_fct_s"),
                        bench._paired_change(rl, none_of, "bg_p99_fct_s"), f"{worst:+.3f}",
                        sum(r.get("refused", 0) or 0 for r in rl)])
    return out


COLUMNS = ["home grant", "controller", "mean JCT s", "vs none", "flowherd - baseline, s",
           "bg mean FCT vs none", "bg p99 FCT vs none", "worst tenant slowdown vs none", "refused"]


def main(argv: list[str] | None = None, run: Callable[[tuple], dict] = bench.run_one) -> int:
    """The table (module docstring); ``run`` makes one run (`control.run_one`). Exit code 0, 2 on bad
    input, 3 when some run ended without a result (one line each; the others kept)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", nargs="+", default=["heavy"],
                    help="light medium heavy, a family or YAML paths")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--baselines", nargs="+", default=None, choices=list(BASELINE_HOME),
                    help="only these baselines, and flowherd under their home grants (default: all)")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--network", default=None)
    ap.add_argument("--fidelity", default=None, choices=["step", "collective", "phase"],
                    help="simulation fidelity of every run (default: the scenario's; control.py --fidelity)")
    ap.add_argument("--max-rss", default=None, help="stop a run whose process grows past this resident "
                    "memory, e.g. 8GB (one line names it; the other runs go on; default: no limit)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--reuse", type=Path, default=None)
    ap.add_argument("--record", default=None,
                    help="save the tables with benchmarks/record.py under this name")
    args = ap.parse_args(argv)
    from flowherd.errors import ConfigError
    from flowherd.units import parse_size

    try:
        max_rss = None if args.max_rss is None else parse_size(args.max_rss, field="--max-rss")
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2

    try:
        levels = {s: bench.scenario_path(s) for s in args.scenarios}
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [t for lvl, p in levels.items()
             for t in tasks_for(lvl, p, seeds, bench.network_arg(args.network) or bench.scenario_network(p),
                                args.fidelity, args.baselines)]
    rows = json.loads(args.reuse.read_text()) if args.reuse else []
    # runs at another fidelity are kept in --json-out, not used
    other = [r for r in rows if r.get("fidelity") != args.fidelity]
    rows = [r for r in rows if r.get("fidelity") == args.fidelity]
    codes = {t[3]: bench.policy_code(t[3]) for t in tasks}  # a changed policy is re-run
    stale = [r for r in rows if r.get("policy_code") not in (None, codes.get(_base(r["controller"])))]
    if stale:
        print(f"  {len(stale)} runs of {args.reuse} were made with another policy code: re-run", flush=True)
        rows = [r for r in rows if r not in stale]
    have = {_key(r) for r in rows}
    todo = [t for t in tasks if (t[0], t[2], t[5]) not in have]
    print(f"{len(tasks)} runs, {len(tasks) - len(todo)} reused, {len(todo)} to run, "
          f"{args.workers} workers", flush=True)
    t0 = time.perf_counter()
    failed: dict[tuple, str] = {}
    for i, out in enumerate(runpool.run_all(run, todo, args.workers, max_rss_bytes=max_rss), 1):
        if out.failure is not None:  # one line; the table pairs each baseline on the seeds it has
            failed[(out.task[0], out.task[5], out.task[2])] = out.failure
            print(f"  run {bench.run_name(out.task)}: {out.failure}", file=sys.stderr, flush=True)
        else:
            rows.append({**out.result, "peak_rss_bytes": out.peak_rss_bytes, "process_cpu_s": out.cpu_s})
            if args.json_out:
                args.json_out.write_text(json.dumps(other + rows, indent=1))
        print(f"  {i}/{len(todo)} runs, {time.perf_counter() - t0:.0f} s", flush=True)
    tables = []
    for lvl in levels:
        t = table(rows, lvl)
        title = (f"{lvl}: each baseline under its home grant, flowherd under the same, seeds {list(seeds)}"
                 + (f", fidelity {args.fidelity}" if args.fidelity else ""))
        lost = sorted((sd, lab) for (lv, sd, lab) in failed if lv == lvl)
        if lost:  # each row pairs a baseline with flowherd and no control on the seeds all three have
            title += (f"; incomplete: {', '.join(f'seed {sd} {lab}' for sd, lab in lost)} ended without a "
                      "result (each pair over the seeds it has)")
        print(f"\n== {title} ==")
        print(" | ".join(COLUMNS))
        for row in t:
            print(" | ".join(str(c) for c in row))
        tables.append((title, t))
    if args.record:
        import record

        record.save(args.record, {}, tables=[record.table(ti, COLUMNS, t) for ti, t in tables],
                    notes="Each literature baseline under the levers its paper acts with, flowherd under the "
                          "same grant; paired 95% CIs over the seeds; cost to others against no control.")
    if failed:
        print(f"{len(failed)} of {len(todo)} runs ended without a result (above); exit code "
              f"{bench.EXIT_INCOMPLETE}", file=sys.stderr)
        return bench.EXIT_INCOMPLETE
    return 0


if __name__ == "__main__":
    sys.exit(main())
