"""Build time, peak memory and summary() time of large rail-optimized 3-tier fabrics.

Usage: .venv/bin/python benchmarks/fabric_build.py [num_gpus ...]   (default 16384 131072)

`build_large_fabric(num_gpus)` is the fabric the engine benchmark reuses: 8-GPU servers (NVLink
450 GB/s per direction) with one 400 Gbps NIC per GPU, radix-128 switches (leaf 64 down / 64 up,
spine 64 / 64, core up to 128 down), SUs of 64 servers (one rail leaf per GPU index), pods of up
to 8 SUs sharing 64 spines, and a core tier dealing every spine's 64 uplinks over its core group;
1:1 at every tier.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import tracemalloc

from flowherd.fabric import Fabric, rail_optimized
from flowherd.fabric.metrics import bisection_bytes_per_s, diameter_hops
from flowherd.units import GBps, Gbps

RADIX = 128


def build_large_fabric(num_gpus: int, *, name: str | None = None) -> Fabric:
    """A 1:1 rail-optimized 3-tier fat tree of `num_gpus` GPUs (a multiple of 512) on radix-128 switches."""
    if num_gpus % 512 or num_gpus < 512:
        raise ValueError(f"num_gpus must be a positive multiple of 512, got {num_gpus}")
    half = RADIX // 2
    servers = num_gpus // 8
    sus = servers // half
    sus_per_pod = next(d for d in (8, 4, 2, 1) if sus % d == 0)
    pods = sus // sus_per_pod
    spines_per_pod = 8 * sus_per_pod
    spine_up = 8 * sus_per_pod * half // spines_per_pod  # = 64: 1:1 at the spine
    # cables per (spine, core) pair: as many as fit in a core's 128 ports across all pods
    pair = max(c for c in (1, 2, 4, 8, 16, 32, 64) if spine_up % c == 0 and pods * c <= RADIX)
    cores = spines_per_pod * (spine_up // pair)
    return rail_optimized(servers=servers, gpus_per_server=8, servers_per_su=half, sus_per_pod=sus_per_pod,
                          spines_per_pod=spines_per_pod, cores=cores, leaf_uplinks=half,
                          nic_bandwidth_bytes_per_s=400 * Gbps, nvlink_bandwidth_bytes_per_s=450 * GBps,
                          name=name or f"rail-3tier-{num_gpus}")


def _peak_rss_mib(num_gpus: int) -> tuple[float, float]:
    """Peak RSS of a child process after imports and after one build (ru_maxrss, MiB)."""
    code = (
        "import resource, json, sys\n"
        f"sys.path.insert(0, {str(__file__.rsplit('/', 1)[0])!r})\n"
        "import fabric_build as fb\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"f = fb.build_large_fabric({num_gpus})\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps([before / 1024, after / 1024]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=600)
    before, after = json.loads(out.stdout)
    return before, after


def main(sizes: list[int]) -> list[dict[str, float]]:
    """Print each size's figures; return them, one dict per size."""
    # ru_maxrss survives fork/exec on Linux: measure in children before this process grows
    rss = {n: _peak_rss_mib(n) for n in sizes}
    rows = []
    for n in sizes:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            f = build_large_fabric(n)
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        bis = bisection_bytes_per_s(f)
        t_bis = time.perf_counter() - t
        t = time.perf_counter()
        dia = diameter_hops(f)
        t_dia = time.perf_counter() - t
        before, after = rss[n]
        tracemalloc.start()
        build_large_fabric(n)
        traced = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        print(f"{f.name}: {f.num_gpus:,} GPUs, {f.num_nodes:,} nodes, {f.num_switches:,} switches, "
              f"{f.num_links:,} cables")
        print(f"  build median of 3: {statistics.median(times):.3f} s  (runs: "
              f"{', '.join(f'{x:.3f}' for x in times)})")
        print(f"  peak RSS: {after:.0f} MiB after build ({before:.0f} MiB after imports); "
              f"tracemalloc peak of one build: {traced:.0f} MiB")
        print(f"  bisection (maxflow): {bis / 1e12:.1f} TB/s in {t_bis:.2f} s; "
              f"expected {n / 2 * 50e9 / 1e12:.1f} TB/s")
        print(f"  diameter: {dia} hops in {t_dia:.2f} s")
        print(f"  summary() total: {t_bis + t_dia:.2f} s")
        rows.append({"gpus": n, "nodes": f.num_nodes, "cables": f.num_links,
                     "build_s": statistics.median(times), "rss_mib": after, "imports_rss_mib": before,
                     "traced_mib": traced, "bisection_tb_per_s": bis / 1e12, "bisection_s": t_bis,
                     "diameter_hops": dia, "diameter_s": t_dia})
    return rows


def table(rows: list[dict[str, float]]) -> dict:
    """The rows of `main` as a `record.table`."""
    import record

    return record.table(
        "rail-optimized 3-tier fabrics (build: median of 3, wall)",
        ["GPUs", "nodes", "cables", "build (s)", "peak RSS (MiB)", "after imports (MiB)",
         "bisection (TB/s)", "maxflow (s)", "diameter (hops)", "diameter (s)"],
        [[r["gpus"], r["nodes"], r["cables"], round(r["build_s"], 3), round(r["rss_mib"]),
          round(r["imports_rss_mib"]), round(r["bisection_tb_per_s"], 1), round(r["bisection_s"], 2),
          r["diameter_hops"], round(r["diameter_s"], 2)] for r in rows])


def save(rows: list[dict[str, float]]) -> None:
    import resource

    import record

    cpu = sum(resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime
              for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    figures = {}
    for r in rows:
        figures[f"build, {r['gpus']:,} GPUs"] = record.figure(round(r["build_s"], 3), "s wall")
        figures[f"peak RSS, {r['gpus']:,} GPUs"] = record.figure(round(r["rss_mib"]), "MiB")
    figures["whole run"] = record.figure(round(cpu, 1), "CPU-s")
    record.save("fabric_build", figures, tables=[table(rows)],
                notes="Peak RSS of a child process that imports flowherd and builds the fabric once "
                      "(ru_maxrss); bisection by max-flow, against n/2 x 50 GB/s for a 1:1 fabric.")


if __name__ == "__main__":
    save(main([int(a) for a in sys.argv[1:]] or [16384, 131072]))
