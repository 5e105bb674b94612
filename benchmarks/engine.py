"""Engine and fair-share kernel speed on a 16,384-GPU fabric (prints figures; not a test).

    .venv/bin/python benchmarks/engine.py [--repeats 3] [--sizes 1000 10000 100000]

* kernel: `max_min_rates` alone on the routes of F random GPU pairs (ECMP over the spines),
  and DESIGN.md's synthetic worst case (5 links per flow, three capacities);
* burst: F flows of random sizes start at once; run until all end (every end is an event);
* steady: F flows kept in flight (each end starts a new random flow, via on_done), for a fixed
  number of events: events per second at F concurrent flows;
* the approximate mode (``Engine(completion_rtol=r)``, ``--rtol``): the same steady runs, and
  its error on the bursts: per-flow completion times against the exact run of the same flows
  (mean and max of |approx - exact| / exact duration).

Routes come from ``flowherd.routing.policies.make_router("ecmp", ...)``, computed before the
timed part. The fabric is the 16,384-GPU rail-optimized 3-tier fat tree of
``benchmarks/fabric_build.py`` (``--fabric leaf-spine`` for a 2,048 x 8 leaf-spine); the run ends
with that script's build time and peak memory of a 131,072-GPU fabric.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from fabric_build import build_large_fabric
from fabric_build import main as fabric_build_main
from flowherd.engine import Engine, max_min_rates
from flowherd.fabric.core import Fabric
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.base import Routes
from flowherd.routing.policies import make_router
from flowherd.units import MiB


def make_fabric(kind: str) -> Fabric:
    if kind == "rail":
        return build_large_fabric(16384)
    return leaf_spine(servers=2048, gpus_per_server=8, leaves=64, spines=32)


def random_pairs(rng, num_gpus, n):
    src = rng.integers(0, num_gpus, n)
    dst = (src + rng.integers(1, num_gpus, n)) % num_gpus
    return src, dst


def random_sizes(rng, n):
    return rng.uniform(1 * MiB, 64 * MiB, n).round()


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_kernel(fabric, router, sizes, repeats):
    print("kernel alone (median of", repeats, "runs)")
    cap = fabric.link_capacity_bytes_per_s
    rng = np.random.default_rng(1)
    for n in sizes:
        src, dst = random_pairs(rng, fabric.num_gpus, n)
        r = router.route(src, dst, np.zeros(n, np.int64))
        max_min_rates(r.ptr, r.link, r.frac, cap)  # compile / warm
        t = median_time(lambda r=r: max_min_rates(r.ptr, r.link, r.frac, cap), repeats)
        ptr = np.arange(0, 5 * n + 1, 5)
        num_links = max(64, n // 5)
        link = rng.integers(0, num_links, 5 * n)
        caps = rng.choice([100e9, 400e9, 900e9], num_links)
        tw = median_time(lambda p=ptr, lk=link, c=caps: max_min_rates(p, lk, np.ones(lk.size), c),
                         repeats)
        print(f"  {n:>7,} flows: fabric ECMP routes {t * 1e3:9.2f} ms   "
              f"synthetic 5 links/flow over {num_links:,} links {tw * 1e3:9.2f} ms")


def bench_burst(fabric, router, n, repeats, rtol=0.0, exact_finish=None):
    """Returns the flows' finish times (for the error of the approximate mode)."""
    rng = np.random.default_rng(2)
    src, dst = random_pairs(rng, fabric.num_gpus, n)
    size = random_sizes(rng, n)
    routes = router.route(src, dst, np.zeros(n, np.int64))
    stats = {}

    def once():
        # one coflow per flow, so that the ends are events of their own
        eng = Engine(fabric, router, record_flows=True, completion_rtol=rtol)
        eng.add_flows(src, dst, size, at_s=np.zeros(n), routes=routes)
        eng.run()
        stats["events"] = eng.num_events
        stats["updates"] = eng.num_rate_updates
        stats["realloc"] = eng.num_flows_reallocated / max(eng.num_rate_updates, 1)
        stats["finish"] = eng.result().flow_finish_s

    t = median_time(once, repeats)
    mode = "exact" if not rtol else f"rtol {rtol:g}"
    err = ""
    if exact_finish is not None:
        e = np.abs(stats["finish"] - exact_finish) / exact_finish  # all start at 0
        err = f"; completion time error mean {e.mean():.2%}, max {e.max():.2%}"
    print(f"  burst  {n:>7,} flows ({mode}): {t:8.2f} s wall, {stats['events']:,} events, "
          f"{stats['updates']:,} rate updates ({stats['realloc']:,.0f} flows re-allocated per "
          f"update), {stats['events'] / t:10,.0f} events/s{err}")
    return stats["finish"]


def bench_steady(fabric, router, n, num_events, repeats, rtol=0.0):
    stats = {}

    def once():
        rng = np.random.default_rng(3)
        eng = Engine(fabric, router, record_flows=False, completion_rtol=rtol)

        # routes of n + a pool of 4096 random pairs, computed up front so that the engine is
        # what is timed (the router's own speed is its owner's benchmark)
        pool = n + 4096
        src, dst = random_pairs(rng, fabric.num_gpus, pool)
        routes = router.route(src, dst, np.zeros(pool, np.int64))
        one = [Routes(ptr=routes.ptr[i:i + 2] - routes.ptr[i],
                      link=routes.link[routes.ptr[i]:routes.ptr[i + 1]],
                      frac=routes.frac[routes.ptr[i]:routes.ptr[i + 1]],
                      latency_s=routes.latency_s[i:i + 1]) for i in range(pool)]

        def add(i):
            eng.add_coflow(src[i:i + 1], dst[i:i + 1], random_sizes(rng, 1), routes=one[i],
                           on_done=refill)

        def refill(_c, _t):
            add(n + int(rng.integers(0, 4096)))

        # one coflow per flow, so that each end is its own event with a callback
        for i in range(n):
            add(i)
        eng.run(until_s=0.0)  # start all: not timed as steady state
        t0 = time.perf_counter()
        c0 = time.process_time()
        e0 = eng.num_events
        u0, r0 = eng.num_rate_updates, eng.num_flows_reallocated
        horizon = 1e-7
        while eng.num_events - e0 < num_events:
            before = eng.num_events
            eng.run(until_s=eng.now_s + horizon)
            got = eng.num_events - before
            # keep chunks to a few events, so that the count stops near num_events
            horizon = horizon * 2 if got < 5 else horizon / 2 if got > 20 else horizon
        stats["wall"] = time.perf_counter() - t0
        stats["cpu"] = time.process_time() - c0
        stats["events"] = eng.num_events - e0
        stats["active"] = eng.num_active_flows
        stats["realloc"] = (eng.num_flows_reallocated - r0) / max(eng.num_rate_updates - u0, 1)

    rates, cpu_rates = [], []
    for _ in range(repeats):
        once()
        rates.append(stats["events"] / stats["wall"])
        cpu_rates.append(stats["events"] / stats["cpu"])
    mode = "exact" if not rtol else f"rtol {rtol:g}"
    # per CPU second too: on a shared machine the wall clock mostly measures the neighbours
    print(f"  steady {n:>7,} flows in flight ({mode}): {stats['events']:,} events per run, median "
          f"{statistics.median(rates):10,.0f} events/s wall, {statistics.median(cpu_rates):10,.0f} per "
          f"CPU second ({stats['active']:,} active at the end; "
          f"{stats['realloc']:,.0f} flows re-allocated per rate update)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--burst-max", type=int, default=10000, help="largest burst run to the end")
    ap.add_argument("--steady-events", type=int, default=2000)
    ap.add_argument("--fabric", choices=["rail", "leaf-spine"], default="rail")
    ap.add_argument("--rtol", type=float, nargs="*", default=[0.01],
                    help="completion_rtol values of the approximate mode (none: exact only)")
    ap.add_argument("--no-kernel", action="store_true", help="skip the kernel-alone figures")
    ap.add_argument("--no-fabric-build", action="store_true", help="skip the fabric-build figures")
    args = ap.parse_args()
    t = time.perf_counter()
    fabric = make_fabric(args.fabric)
    router = make_router("ecmp", fabric, seed=0)
    print(f"fabric {fabric.name}: {fabric.num_gpus:,} GPUs, {fabric.num_directed_links:,} directed "
          f"links; router {router.name} (built in {time.perf_counter() - t:.1f} s)")
    if not args.no_kernel:
        bench_kernel(fabric, router, args.sizes, args.repeats)
    print("engine (median of", args.repeats, "runs)")
    for n in args.sizes:
        num_events = min(args.steady_events, max(100, 20_000_000 // n))
        if n <= args.burst_max:
            exact = bench_burst(fabric, router, n, args.repeats)
            for r in args.rtol:
                bench_burst(fabric, router, n, args.repeats, r, exact)
        bench_steady(fabric, router, n, num_events, args.repeats)
        for r in args.rtol:
            bench_steady(fabric, router, n, num_events, args.repeats, r)
    if not args.no_fabric_build:
        print("fabric build (benchmarks/fabric_build.py)")
        fabric_build_main([131072])


if __name__ == "__main__":
    main()
