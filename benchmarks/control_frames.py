"""Why delays alone gain little on the mixed-period family: the bursts, and what a frame costs.

For each job of a scenario (default the mixed-period family, `scenarios/control_mixed_periods.yaml`)
this script runs the job alone (roce, its GPUs from the spread placer) and prints its iteration
time ``T``, its *solo burst* ``W`` on the shared uplink (its bytes there per iteration over the
link's capacity), its burst's *span* (first to last byte on the link) and ``W / span``, the share
of its burst during which it keeps the link busy (1: it saturates the link, the condition under
which taking turns cannot lose, `flowherd.control.gate`).

Then the least cost of any *frame*: a schedule in which every job keeps a fixed period
``P_i >= T_i`` (it waits for its slot) and no two jobs' bursts ever overlap. Two periodic
sequences of intervals of lengths ``L_i``, ``L_j`` and periods ``P_i``, ``P_j`` can be kept apart
for ever only if ``L_i + L_j <= gcd(P_i, P_j)`` (their relative offsets run through a coset of
``gcd(P_i, P_j) Z``), so over periods ``P_i = n_i u`` on a grid of units ``u`` the least mean
stretch ``mean_i (P_i / T_i - 1)`` meeting that for every pair, with ``L = W`` (the least link
time of a burst, the weakest form of the condition), is a lower bound on what a frame costs;
it is printed beside no control's measured mean iteration slowdown.

    python benchmarks/control_frames.py
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "control_mixed_periods.yaml"


def solo_bursts(path: Path) -> list[dict]:
    """Each job alone: T, W, span on its busiest scale-out link."""
    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.engine.network import use_network
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.fabric.core import LinkKind

    sc = scenario_from_mapping(read_scenario_mapping(str(path)))
    net = np.asarray(sc.fabric.link_kind) == LinkKind.NETWORK
    cap = np.asarray(sc.fabric.link_capacity_bytes_per_s, dtype=float)
    out = []
    for spec in sc.jobs:
        short = dataclasses.replace(spec, submit_s=0.0, iterations=4)
        with use_network(sc.network):
            req = [JobRequest(name=spec.name, tenant="t", spec=short, submit_s=0.0)]
            r = simulate_cluster(sc.fabric, req, placer=sc.placement, fidelity="collective", horizon_s=2.0,
                                 router=sc.routing, seed=0, link_series=True, utilization_bin_s=1e-4)
        job = r.jobs[0]
        t = float(job.iteration_s[-1])
        per = np.asarray(r.link_bytes, dtype=float) / len(job.iteration_s)
        lk = int(np.flatnonzero(net)[np.argmax(per[net] / cap[net])])
        w = float(per[lk] / cap[lk])
        # the last iteration's busy bins on that link: first to last byte
        edges = np.asarray(r.util_bin_edges_s)
        b = np.asarray(r.link_bin_bytes)[lk]  # (links, bins)
        start, end = float(job.iteration_end_s[-2]), float(job.iteration_end_s[-1])
        busy = np.flatnonzero((b > 0) & (edges[:-1] >= start - 1e-12) & (edges[1:] <= end + 1e-12))
        span = float(edges[busy[-1] + 1] - edges[busy[0]]) if busy.size else math.nan
        out.append({"name": spec.name, "T": t, "W": w, "span": span})
    return out


def least_frame_stretch(jobs: list[dict], *, units: int = 4000, extra: int = 3) -> tuple[float, tuple]:
    """The least mean stretch of a frame (module docstring) over ``units`` grid units, trying
    ``n_i`` from ``ceil(T_i / u)`` to ``extra`` more; (stretch, (u, n))."""
    t = np.array([j["T"] for j in jobs])
    w = np.array([j["W"] for j in jobs])
    best = (math.inf, ())
    for u in np.linspace(t.max() / 200, t.max(), units):
        base = np.ceil(t / u - 1e-12).astype(int)
        for add in itertools.product(range(extra + 1), repeat=len(jobs)):
            n = base + np.array(add)
            cost = float(np.mean(n * u / t - 1))
            if cost >= best[0]:
                continue
            ok = all(w[i] + w[k] <= math.gcd(int(n[i]), int(n[k])) * u + 1e-12
                     for i in range(len(jobs)) for k in range(i + 1, len(jobs)))
            if ok:
                best = (cost, (float(u), tuple(int(x) for x in n)))
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    args = ap.parse_args(argv)
    jobs = solo_bursts(args.scenario)
    print(f"{'job':<6} {'T s':>8} {'W s':>8} {'span s':>8} {'W/span':>7} {'W/T':>6}")
    for j in jobs:
        print(f"{j['name']:<6} {j['T']:>8.4f} {j['W']:>8.4f} {j['span']:>8.4f} {j['W'] / j['span']:>7.2f} "
              f"{j['W'] / j['T']:>6.3f}")
    print(f"duty sum {sum(j['W'] / j['T'] for j in jobs):.3f}")
    cost, (u, n) = least_frame_stretch(jobs)
    print(f"least mean stretch of a frame keeping every pair of bursts apart: {100 * cost:.1f}% "
          f"(unit {1e3 * u:.1f} ms, periods {[round(k * u, 4) for k in n]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
