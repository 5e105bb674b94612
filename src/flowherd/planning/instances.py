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


def small_llm_instance(seed: int, *, servers: int = 24, leaves: int = 4, oversubscription: float = 8,
                       max_jobs: int = 8) -> tuple[Fabric, list[TrainingJob]]:
    """A small LLM-era instance on which placement is a decision: servers of 8 H100 under
    ``leaves`` leaves (6 servers each by default) at 8:1, jobs of 16-48 GPUs, all submitted at
    once, drawn until the next would not fit (at most ``max_jobs``), so that they fill most of the
    fabric and several must span leaves: Llama 3 8B as NeMo trains it (TP 1, CP 2: one pipeline
    stage, its data-parallel ring crosses every leaf it spans) on 16, 24, 40 or 48 GPUs, and the
    32-GPU recipes (Llama 3 70B TP 4 PP 4 CP 2, Mixtral 8x7B PP 4 EP 8, GPT-3 175B TP 4 PP 8), 2-6
    iterations each. Sizes of 3 and 5 servers do not tile leaves of 6: which jobs share which
    leaves sets their slow-down."""
    from flowherd.workload.llm_cluster import recipe_shape

    rng = np.random.default_rng(seed)
    fabric = leaf_spine(servers=servers, gpus_per_server=8, leaves=leaves, spines=2,
                        oversubscription=oversubscription)
    jobs: list[TrainingJob] = []
    total = 0
    while len(jobs) < max_jobs:
        n = int(rng.choice([16, 24, 32, 40, 48]))
        if total + n > fabric.num_gpus:
            break
        models = ["llama3-8b"] if n != 32 else ["llama3-70b", "mixtral-8x7b", "gpt3-175b"]
        model = models[int(rng.integers(len(models)))]
        shape = recipe_shape(model, n)
        total += n
        jobs.append(TrainingJob(model=model, gpus=n, name=f"j{len(jobs)}", global_batch=max(8, shape["pp"])
                                * shape["dp"], iterations=int(rng.integers(2, 7)), **shape))
    return fabric, jobs
