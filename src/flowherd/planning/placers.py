"""Planner methods: baseline placers and the entries of the MILP and the heuristic.

Every method is found by name in `PLANNERS` (`flowherd plan --method NAME`) and places a *batch*
of jobs (the queued jobs that fit now, `flowherd.planning.plan.make_plan`) into the free GPUs:

* ``random``: each job gets GPUs drawn uniformly from the free ones (any type);
* ``packed``: first fit: the lowest free GPU ids (fills servers in order, fragments included);
* ``topology``: fewest servers, then fewest leaves (`flowherd.cluster.placement.PackedPlacer`: best
  fit in one server, else the leaves with most free GPUs first);
* ``hetero``: ``topology`` restricted to the servers whose GPU type is the job's (``job.gpu``);
  a job whose type the fabric lacks, or has too few of, fits nowhere;
* ``milp``: `flowherd.planning.milp` (exact, small instances);
* ``heuristic``: `flowherd.planning.heuristic` (greedy + large-neighbourhood search).

Baselines place jobs one after another in submission order; ``hetero``, ``milp`` and
``heuristic`` honour GPU types and keep tensor-parallel groups inside servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flowherd.errors import InfeasibleError, SolverError
from flowherd.planning.batch import BatchResult
from flowherd.planning.groups import packed_place, type_mask
from flowherd.planning.heuristic import heuristic_batch
from flowherd.planning.predict import FabricView, JobProfile
from flowherd.registry import Registry

__all__ = ["PLANNERS", "BatchResult", "Planner", "type_mask"]




class Planner:
    """Base of planner methods: one-by-one placement with `place_one`; subclasses may override."""

    name = "planner"
    typed = False  # honours job GPU types

    def check(self, view: FabricView, p: JobProfile) -> None:
        """Raise `InfeasibleError` if ``p`` fits nowhere on the idle fabric."""
        n_all = len(view.gpu_order)
        if self.typed:
            ok = np.array([t == p.gpu_type for t in view.server_type])
            cap = view.server_capacity[ok]
            have = int((cap // p.unit_gpus * p.unit_gpus).sum())
            if have < p.world_size:
                raise InfeasibleError(
                    f"job {p.name!r} needs {p.world_size} GPUs of type {p.gpu_type!r} in groups of "
                    f"{p.unit_gpus}, but the fabric has {int(cap.sum())} of that type "
                    f"(types: {sorted(set(view.server_type))}); it fits nowhere")
        elif p.world_size > n_all:
            raise InfeasibleError(f"job {p.name!r} needs {p.world_size} GPUs but the fabric has {n_all}; "
                                  "it fits nowhere")

    def place_one(self, view: FabricView, p: JobProfile, free: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray | None:
        raise NotImplementedError

    def place_batch(self, view: FabricView, batch: Sequence[JobProfile], free: np.ndarray,
                    running: Sequence[tuple[JobProfile, np.ndarray]], *, rng: np.random.Generator,
                    time_limit_s: float | None = None, server_slack: np.ndarray | None = None,
                    background_bytes: np.ndarray | None = None, shuffle: bool = False,
                    congestion: Any = None) -> BatchResult:
        """Place ``batch`` into the ``free`` GPUs (``running`` jobs hold the others).

        ``server_slack``, ``background_bytes``, ``shuffle`` and ``congestion``
        (`flowherd.planning.heuristic.heuristic_batch`) are used by the heuristic only; the
        baselines and the MILP ignore them.
        """
        out: list[np.ndarray | None] = []
        for p in batch:
            g = self.place_one(view, p, free, rng)
            if g is None:
                break
            free[g] = False
            out.append(g)
        return BatchResult(placements=tuple(out))


class RandomPlanner(Planner):
    name = "random"

    def place_one(self, view, p, free, rng):
        idx = np.flatnonzero(free)
        if idx.size < p.world_size:
            return None
        return np.sort(rng.choice(idx, size=p.world_size, replace=False))


class PackedFirstFit(Planner):
    name = "packed"

    def place_one(self, view, p, free, rng):
        idx = np.flatnonzero(free)
        return idx[:p.world_size] if idx.size >= p.world_size else None


class TopologyPlanner(Planner):
    name = "topology"

    def _place(self, view, p, free):
        return packed_place(view, p.world_size, free)

    def place_one(self, view, p, free, rng):
        return self._place(view, p, free)


class HeteroPlanner(TopologyPlanner):
    name = "hetero"
    typed = True

    def place_one(self, view, p, free, rng):
        return self._place(view, p, free & type_mask(view, p.gpu_type))




class MilpPlanner(Planner):
    name = "milp"
    typed = True

    def place_batch(self, view, batch, free, running, *, rng, time_limit_s=None, server_slack=None,
                    background_bytes=None, shuffle=False, congestion=None):
        from flowherd.planning.milp import solve_batch  # HiGHS loads only when asked for

        return solve_batch(view, batch, free, running, time_limit_s=time_limit_s)


class HeuristicPlanner(Planner):
    name = "heuristic"
    typed = True

    def place_batch(self, view, batch, free, running, *, rng, time_limit_s=None, server_slack=None,
                    background_bytes=None, shuffle=False, congestion=None):
        from flowherd.planning.milp import lp_bound  # HiGHS loads only when asked for

        try:
            bound = lp_bound(view, batch, free, running, time_limit_s=30.0)
        except (SolverError, InfeasibleError):
            bound = None
        # the search stops early once it meets the LP bound (then the placement is optimal)
        res = heuristic_batch(view, batch, free.copy(), running, rng=rng, time_limit_s=time_limit_s,
                              target_cost=bound, server_slack=server_slack,
                              background_bytes=background_bytes, shuffle=shuffle, congestion=congestion)
        return BatchResult(placements=res.placements, lower_bound=bound, status=res.status)


PLANNERS: Registry[type[Planner]] = Registry("planner", {
    "random": RandomPlanner, "packed": PackedFirstFit, "topology": TopologyPlanner,
    "hetero": HeteroPlanner, "milp": MilpPlanner, "heuristic": HeuristicPlanner,
})


class ArnoldPlanner(Planner):
    """Arnold (He et al., NeurIPS'25): whole servers, the job's DP groups (pipeline stages) and
    pipelines spread over as few leaves as its MIP's trade-off allows (`flowherd.planning.groups.
    arnold_counts`, weight 0.5 each); a job smaller than a server: best fit in one server, as
    ``topology``. Routes by the scenario's routing (ECMP), as the cluster does."""

    name = "arnold"
    typed = True

    def place_one(self, view, p, free, rng):
        from flowherd.planning.groups import (
            arnold_counts,
            counts_to_gpus,
            free_whole_servers,
            job_groups,
            leaf_room,
        )

        g = job_groups(p, view.gpus_per_server)
        mask = free & type_mask(view, p.gpu_type)
        if g.servers == 0:
            return packed_place(view, p.world_size, mask)
        whole = free_whole_servers(view, free, p.gpu_type)
        counts = arnold_counts(leaf_room(view, whole), g.servers, g.stage_servers)
        if counts is None:
            return packed_place(view, p.world_size, mask)
        return counts_to_gpus(view, whole, counts)


class BilevelPlanner(Planner):
    """The plan's upper level (`flowherd.planning.bilevel`): communication groups kept in the
    smallest fabric unit, candidates scored by the lower level's routing LP."""

    name = "bilevel"
    typed = True

    def place_batch(self, view, batch, free, running, *, rng, time_limit_s=None, server_slack=None,
                    background_bytes=None, shuffle=False, congestion=None):
        from flowherd.planning.bilevel import place_groups

        return place_groups(view, batch, free.copy(), running, congestion=congestion)


class MonkeyTreePlanner(TopologyPlanner):
    """MonkeyTree (arXiv 2602.08296) as a baseline: the topology placement, then its migration
    rule in the timeline: at every job start and end, when a leaf's ring-weighted fragmented
    segments exceed what its uplinks carry, the minimum-move ILP defragments the running jobs,
    whatever the stalls cost (`flowherd.planning.migration`; `make_plan` turns it on for this
    method). Routes by the scenario's routing (ECMP)."""

    name = "monkeytree"


PLANNERS.add("arnold", ArnoldPlanner)
PLANNERS.add("bilevel", BilevelPlanner)
PLANNERS.add("monkeytree", MonkeyTreePlanner)
