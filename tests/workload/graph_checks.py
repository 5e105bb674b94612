"""Shared readings of an iteration graph for the training and pipeline tests."""

import numpy as np

from flowherd.workload import TaskKind


def passes_and_step(g) -> tuple[np.ndarray, float]:
    """Forward + backward seconds per stage, and stage 0's optimizer step."""
    passes = np.zeros(len(g.stage_ranks))
    step0 = 0.0
    for t in g.tasks:
        if t.kind == TaskKind.COMPUTE and t.phase in ("fwd", "bwd"):
            passes[t.stage] += t.duration_s
        elif t.kind == TaskKind.COMPUTE and t.name == "s0/optimizer":
            step0 = t.duration_s
    return passes, step0
