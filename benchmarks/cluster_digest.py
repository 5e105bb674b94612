"""A digest of a `benchmarks/cluster.py` run, to compare two trees bit for bit (prints one line).

    PYTHONPATH=src python benchmarks/cluster_digest.py --scale a --horizon 600 --bg-mode exact

The sha256 (first 16 hex digits) of every job's iteration end times, the link bytes, the
background flows' finish times and the utilization series, with the run's events, rate
updates and CPU seconds. Same scenario as `cluster.py` (its job mix, placer, seed, network
``roce``); two trees that print the same digest gave the same run to the last bit.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np

from cluster import SCALES, job_mix
from flowherd.cluster.simulate import BackgroundSpec, simulate_cluster
from flowherd.engine.network import load_network, use_network
from flowherd.fabric.generators import leaf_spine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="a", choices=sorted(SCALES))
    ap.add_argument("--horizon", type=float, default=600.0)
    ap.add_argument("--bg-mode", default="exact", choices=["exact", "sampled", "mean", "spread"])
    ap.add_argument("--network", default="roce")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    servers, leaves, spines, num_jobs = SCALES[args.scale]
    fab = leaf_spine(servers=servers, gpus_per_server=8, leaves=leaves, spines=spines)
    jobs = [j for j in job_mix(num_jobs, 3600.0, args.seed, None) if j.submit_s < args.horizon]
    cpu0 = time.process_time()
    with use_network(load_network(args.network)):
        res = simulate_cluster(fab, jobs, fidelity="phase", horizon_s=args.horizon, placer="packed",
                               seed=args.seed, background=BackgroundSpec(load=0.2, max_flows_per_s=50.0,
                                                                         fast_forward=args.bg_mode),
                               background_records=True)
    h = hashlib.sha256()
    for j in res.jobs:
        h.update(np.asarray(j.iteration_end_s, np.float64).tobytes())
    for a in (res.link_bytes, res.background_finish_s, res.util_by_tier):
        h.update(np.asarray(a, np.float64).tobytes())
    print(f"({args.scale}) {args.horizon:g} s {args.bg_mode} {args.network}: digest {h.hexdigest()[:16]}, "
          f"events {res.num_events}, rate updates {res.num_rate_updates}, "
          f"CPU {time.process_time() - cpu0:.1f} s")


if __name__ == "__main__":
    main()
