"""What every batch placer shares: its result value and the leaf load of running jobs.

Below `placers`, `heuristic` and `milp` (the registry entries call the heuristic and the MILP;
the MILP falls back on the heuristic): none of the three imports one that imports it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flowherd.planning.predict import FabricView, JobProfile, _layout

__all__ = ["BatchResult", "running_leaf_load"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """Placements of a batch: GPU ids per job (None: not placed), and what the method proved.

    Attributes:
        placements: One entry per job of the batch.
        lower_bound: Lower bound on the batch's summed predicted JCT, seconds (None: none).
        status: "optimal", "time_limit", "heuristic" or "baseline".
    """

    placements: tuple[np.ndarray | None, ...]
    lower_bound: float | None = None
    status: str = "baseline"


def running_leaf_load(view: FabricView, running: Sequence[tuple[JobProfile, np.ndarray]]) -> np.ndarray:
    """``float64[L]``: offered load (bytes per second) of running jobs on each leaf's uplinks."""
    load = np.zeros(view.num_leaves)
    for p, g in running:
        s, leaves = _layout(view, np.asarray(g, dtype=np.int64))
        if s == 2:
            load[leaves] += p.offered_bytes_per_s
    return load
