"""Seeded planning instances: the small ones the MILP solves exactly, the large ones only the
heuristic handles. Used by `benchmarks/planner.py` and the planner's tests."""

from __future__ import annotations

import numpy as np

from flowherd.fabric.core import Fabric
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.workload import TrainingJob


def _job(rng: np.random.Generator, index: int, gpus: int, tp_choices: list[int],
         iterations: tuple[int, int]) -> TrainingJob:
    tp = int(rng.choice(tp_choices))
    return TrainingJob(model="llama3-8b", gpus=gpus, tp=tp, name=f"j{index}", seq_len=2048,
                       global_batch=gpus // tp * 2, iterations=int(rng.integers(*iterations)))


def small_instance(seed: int, *, servers: int = 8, leaves: int = 4,
                   max_jobs: int = 6) -> tuple[Fabric, list[TrainingJob]]:
    """Servers of 4 GPUs under `leaves` leaves at 16:1, up to `max_jobs` jobs of 4-12 GPUs that fit
    together (several must span leaves)."""
    rng = np.random.default_rng(seed)
    fabric = leaf_spine(servers=servers, gpus_per_server=4, leaves=leaves, spines=2, oversubscription=16)
    jobs: list[TrainingJob] = []
    total = 0
    while len(jobs) < max_jobs:
        n = int(rng.choice([4, 6, 10, 12]))
        if total + n > fabric.num_gpus:
            break
        total += n
        jobs.append(_job(rng, len(jobs), n, [1, 2], (3, 12)))
    return fabric, jobs


def large_instance(seed: int, num_jobs: int = 200) -> tuple[Fabric, list[TrainingJob]]:
    """4,096 GPUs (512 servers of 8, 32 leaves at 2:1) and `num_jobs` jobs of 8-32 GPUs (at most
    the fabric's size in all)."""
    rng = np.random.default_rng(seed)
    fabric = leaf_spine(servers=512, gpus_per_server=8, leaves=32, spines=16, oversubscription=2)
    jobs: list[TrainingJob] = []
    total = 0
    while len(jobs) < num_jobs:
        n = int(rng.choice([8, 8, 16, 16, 24, 32]))
        if total + n > fabric.num_gpus:
            n = 8
            if total + n > fabric.num_gpus:
                break
        total += n
        jobs.append(_job(rng, len(jobs), n, [1, 2, 4, 8], (5, 50)))
    return fabric, jobs
