"""Engine runs whose results must stay the same bit for bit (`test_engine_exact.py`): random
coflow DAGs on a leaf-spine under ECMP, with weights, priorities, callbacks that add coflows,
stops and resumes, single-flow batches (background), dropped flow records and the approximate
completion mode. `digest` hashes every coflow's start and finish and every link's bytes and busy
time; ``data/engine_digests.json`` holds the digests the engine gave before its event loop was
compiled (the per-event Python loop, issue 17)."""

from __future__ import annotations

import hashlib

import numpy as np

from flowherd.engine import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router

NUM_CASES = 8


def digest(eng: Engine) -> str:
    r = eng.result()
    h = hashlib.sha256()
    for a in (r.coflow_start_s, r.coflow_finish_s, r.link_bytes, r.link_busy_s,
              np.array([r.now_s, r.makespan_s, r.num_events, r.num_rate_updates], np.float64)):
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()


def run_case(case: int, engine_cls=Engine) -> Engine:
    """Case ``case`` (0 .. NUM_CASES - 1) run to its end on a fresh ``engine_cls``."""
    rng = np.random.default_rng(1000 + case)
    fab = leaf_spine(servers=8, gpus_per_server=4, leaves=2, spines=2,
                     oversubscription=float([1.0, 3.0, 8.0][case % 3]))
    router = make_router("ecmp", fab, seed=case)
    eng = engine_cls(fab, router, record_flows=case % 2 == 0,
                     completion_rtol=1e-3 if case == 7 else 0.0)
    if not eng.record_flows:
        eng._compact_min = 16  # drop finished flows often
    n = fab.num_gpus
    ids: list[int] = []

    def add(t0: float | None = None) -> int:
        k = int(rng.integers(0, 7))
        src = rng.integers(0, n, k)
        dst = (src + rng.integers(1, n, k)) % n
        size = rng.choice([0.0, 1e5, 4e6, 3e7], k) * rng.uniform(0.5, 1.5, k)
        after = tuple(int(a) for a in rng.choice(ids, min(len(ids), int(rng.integers(0, 3))),
                                                  replace=False)) if ids else ()
        w = float(rng.choice([1.0, 2.0, 0.5])) if case % 4 == 1 else 1.0
        prio = int(rng.integers(0, 2)) if case in (3, 6) else 0
        c = eng.add_coflow(src, dst, size, at_s=t0, after=after, delay_s=float(rng.uniform(0, 2e-4)),
                           weight=w, priority=prio, key=rng.integers(0, 4, k), name=f"c{len(ids)}")
        ids.append(c)
        return c

    for _ in range(40):
        add(float(rng.uniform(0, 5e-3)))
    # callbacks that add coflows (a job's next iteration), some chained
    left = [25]

    def again(_c: int, t: float) -> None:
        if left[0] > 0:
            left[0] -= 1
            c = add(t)
            eng.add_coflow(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), after=(c,),
                           delay_s=1e-5, on_done=again)

    for _ in range(3):
        eng.add_coflow(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0),
                       at_s=float(rng.uniform(0, 1e-3)), on_done=again)
    if case >= 4:  # a batch of single flows (background)
        m = 60
        src = rng.integers(0, n, m)
        dst = (src + rng.integers(1, n, m)) % n
        routes = router.route(src.astype(np.int32), dst.astype(np.int32), np.arange(m))
        eng.add_flows(src, dst, rng.uniform(1e5, 5e7, m), at_s=np.sort(rng.uniform(0, 2e-2, m)),
                      routes=routes, name="bg")
    for stop in np.sort(rng.uniform(0, 2e-2, 4)).tolist():  # stops and resumes
        eng.run(until_s=max(stop, eng.now_s))
        add()
    eng.run()
    return eng
