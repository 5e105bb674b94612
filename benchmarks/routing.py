"""Routing speed: 100k random GPU pairs on a 16,384-GPU leaf-spine and on a 3-tier fat-tree.

Run: ``.venv/bin/python benchmarks/routing.py [--flows 100000] [--k 32]``. Prints seconds per
phase (index build, first batch with cold caches, second batch warm) per router.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import record
from flowherd.fabric.generators import fat_tree, leaf_spine
from flowherd.routing import make_router, path_count, path_index


def bench(fabric, flows: int, routers: list[str], spray_flows: int | None = None) -> list[list]:
    """Print and return rows: fabric, router, phase, flows, seconds, links per flow."""
    t0 = time.perf_counter()
    idx = path_index(fabric)
    t_index = time.perf_counter() - t0
    print(f"{fabric.name}: {fabric.num_gpus} GPUs, {fabric.num_nodes} nodes, "
          f"{fabric.num_directed_links} directed links; mode {idx.mode}; index {t_index:.2f} s")
    rows = [[fabric.name, "path index", "build", 0, round(t_index, 3), ""]]
    rng = np.random.default_rng(1)
    src = rng.integers(0, fabric.num_gpus, flows)
    dst = rng.integers(0, fabric.num_gpus, flows)
    key = rng.integers(0, 2**16, flows)
    for name in routers:
        r = make_router(name, fabric, seed=7)
        n = spray_flows if name == "spray" and spray_flows else flows
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            routes = r.route(src[:n], dst[:n], key[:n])
            dt = time.perf_counter() - t0
            print(f"  {name:9s} {label}: {n} flows in {dt:.2f} s "
                  f"({routes.link.size / n:.1f} links per flow)")
            rows.append([fabric.name, name, label, n, round(dt, 3), round(routes.link.size / n, 1)])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=32)
    args = ap.parse_args()
    ls = leaf_spine(servers=2048, gpus_per_server=8, leaves=256, spines=64)
    rows = bench(ls, args.flows, ["ecmp", "shortest", "spray"])
    ft = fat_tree(k=args.k)
    # spray on a big fat-tree puts ~(k/2)^2 * 2 links in every flow: fewer flows keep memory small
    rows += bench(ft, args.flows, ["ecmp", "spray"], spray_flows=10_000 if args.k > 32 else None)
    t0 = time.perf_counter()
    n = path_count(ft, 0, ft.num_gpus - 1)
    print(f"  path_count across pods of the k={args.k} fat-tree: {n} "
          f"(expected (k/2)^2 = {(args.k // 2) ** 2}) in {time.perf_counter() - t0:.3f} s")
    warm = {(r[0], r[1]): r[4] for r in rows if r[2] == "warm"}
    figures = {f"{router} on {fab}, {args.flows:,} pairs warm": record.figure(t, "s wall")
               for (fab, router), t in warm.items()}
    figures[f"path count across pods, k={args.k} fat-tree"] = record.figure(
        n, "paths", target=f"== (k/2)^2 = {(args.k // 2) ** 2}", met=n == (args.k // 2) ** 2)
    use = resource.getrusage(resource.RUSAGE_SELF)
    figures["whole run"] = record.figure(round(use.ru_utime + use.ru_stime, 1), "CPU-s")
    record.save("routing", figures, tables=[record.table(
        "routing speed (cold: first batch, caches empty; warm: the same batch again)",
        ["fabric", "router", "phase", "flows", "time (s)", "links per flow"], rows)])


if __name__ == "__main__":
    main()
