"""Chakra traces of three tenants beside two native jobs on 256 GPUs, under none, adaptive, flowherd.

    python benchmarks/chakra_mix.py --traces          # (re)write the traces only
    python benchmarks/chakra_mix.py --seeds 0 1 2     # the runs: per controller and seed
    python benchmarks/chakra_mix.py --report runs/chakra_mix   # also the first seed's telemetry
                                                               # and `flowherd report` of it

The scenario is benchmarks/scenarios/chakra_mix.yaml; its traces are written reproducibly under
benchmarks/scenarios/chakra_traces/ (not kept in git: this script makes them, byte for byte the
same every time):

* ``resnet50-dp32``: ASTRA-sim 1.0's ``Resnet50_DataParallel.txt`` (benchmarks/data/astra/) as
  Chakra's TextConverter writes it for 32 ranks (`flowherd.workload.chakra_text.text_ets`);
* ``llama8b-tp8pp2dp2`` and ``mixtral-tp8ep4``: native training iterations written as one Chakra ET
  per rank (`flowherd.workload.chakra_write.export_graph`), what a trace of those runs holds.

Every controller runs the same scenario, seeds and background (the background is drawn from the
seed). Printed per controller: mean JCT over the jobs with its 95% CI over the seeds, each job's
mean iteration time, and the change against no control with its paired CI (Student t); the
figures are saved with benchmarks/record.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import record
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import load_scenario, read_scenario_mapping, scenario_from_mapping
from flowherd.experiments.stats import mean_ci95, paired
from flowherd.experiments.sweep import store_run_result
from flowherd.experiments.telemetry import write_telemetry
from flowherd.workload import Granularity, TrainingJob
from flowherd.workload.chakra_text import text_ets
from flowherd.workload.chakra_write import export_graph

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "chakra_mix.yaml"
TRACES = HERE / "scenarios" / "chakra_traces"
RESNET = HERE / "data" / "astra" / "Resnet50_DataParallel.txt"


def write_traces(root: Path = TRACES) -> dict[str, int]:
    """Write the three trace directories; returns their sizes in bytes."""
    d = root / "resnet50-dp32"
    d.mkdir(parents=True, exist_ok=True)
    for r, et in enumerate(text_ets(RESNET, 32)):
        (d / f"resnet50.{r}.et").write_bytes(et)
    gpt = TrainingJob(model="llama3-8b", gpus=32, tp=8, pp=2, seq_len=4096, micro_batch=1, global_batch=8)
    export_graph(gpt.iteration_graph(Granularity.STAGE), root / "llama8b-tp8pp2dp2", prefix="llama8b")
    moe = TrainingJob(model="mixtral-8x7b", gpus=32, tp=8, ep=4, seq_len=4096, micro_batch=1, global_batch=8)
    export_graph(moe.iteration_graph(Granularity.STAGE), root / "mixtral-tp8ep4", prefix="mixtral")
    return {p.name: sum(f.stat().st_size for f in p.iterdir()) for p in sorted(root.iterdir()) if p.is_dir()}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", action="store_true", help="write the traces and stop")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--controllers", nargs="+", default=["none", "adaptive", "flowherd"])
    ap.add_argument("--report", type=Path, default=None,
                    help="store the first seed's runs with their telemetry in this directory and draw "
                         "`flowherd report` there (the busiest links over time by tenant, and by method)")
    args = ap.parse_args(argv)
    sizes = write_traces()
    print("traces: " + ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in sizes.items()))
    if args.traces:
        return
    mean_jct: dict[str, dict[int, float]] = {}
    rows = []
    for ctl in args.controllers:
        mean_jct[ctl] = {}
        for seed in args.seeds:
            src = {**read_scenario_mapping(SCENARIO), "seed": seed, "controller": {"name": ctl}}
            keep = args.report is not None and seed == args.seeds[0]
            if keep:  # telemetry changes no figure of the run (docs/telemetry.md)
                src["simulation"] = {**src["simulation"], "telemetry": True}
            sc = scenario_from_mapping(src, base=SCENARIO.parent)
            t0 = time.process_time()
            r = run_scenario(sc)
            cpu = time.process_time() - t0
            if keep:
                run_id = store_run_result(args.report, src, r, sweep="chakra_mix")
                write_telemetry(r, args.report / "telemetry" / run_id)
            jct = [j["jct_s"] for j in r.jobs]
            mean_jct[ctl][seed] = sum(jct) / len(jct)
            its = {j["name"]: j["mean_iteration_s"] for j in r.jobs}
            rows.append([ctl, seed, round(mean_jct[ctl][seed], 3),
                         *(round(its[n], 4) for n in sorted(its)), round(cpu, 1)])
            print(f"{ctl:9s} seed {seed}: mean JCT {mean_jct[ctl][seed]:.3f} s  "
                  + "  ".join(f"{n} {its[n]:.4f}" for n in sorted(its)) + f"  ({cpu:.1f} CPU-s)",
                  flush=True)
    names = sorted(j.name for j in load_scenario(SCENARIO).jobs)
    figures = {}
    print("\ncontroller  mean JCT (s)        vs none")
    for ctl in args.controllers:
        m, h = mean_ci95(list(mean_jct[ctl].values()))
        line = f"{ctl:10s}  {m:.3f} +- {h:.3f}"
        figures[f"{ctl}: mean JCT"] = record.figure(round(m, 4), "s", ci95=round(h, 4))
        if ctl != "none" and "none" in mean_jct:
            p = paired(mean_jct[ctl], mean_jct["none"])
            line += f"   {p.phrase()}"
            figures[f"{ctl} - none: mean JCT"] = record.figure(round(p.mean, 4), "s",
                                                               ci95=round(p.half_width, 4))
        print(line)
    if args.report is not None:
        from flowherd.report import write_report

        rep = write_report(args.report)
        print(f"report: {rep.html} ({', '.join(p.name for p in rep.figures if 'telemetry' in p.name)})")
    record.save("chakra_mix", figures, tables=[record.table(
        "per controller and seed: mean JCT, each job's mean iteration time (s), CPU seconds",
        ["controller", "seed", "mean JCT s", *names, "CPU s"], rows)],
        notes="three Chakra-trace jobs (ResNet-50 DP, Megatron Llama-3-8B, Mixtral MoE) of three tenants "
              "and two native jobs on a 256-GPU 2:1 leaf-spine under lossless RoCE with 5% background")


if __name__ == "__main__":
    main(sys.argv[1:])
