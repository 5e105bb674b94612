"""Offline planning.

Lower level: concurrent-traffic estimation (`traffic`), the multi-commodity-flow routing LP
(`mcf`), TE-CCL-style collective synthesis (`teccl`, the ``mcf`` collective algorithm) and the
FLASH-style Birkhoff-von Neumann AllToAll (`bvn`, the ``bvn`` algorithm; both join
`flowherd.collectives.algorithms.ALGORITHMS` via `register_collective_algorithms`). Upper level:
placers, MILP, heuristic and plans (their own modules); the plan's pacing lever, per-pair rate
caps at the rate the plan assumed (`pacing`). On LLM clusters: a job's communication groups and the
placements that keep them inside one leaf (`groups`, Arnold's MIP among them) and the plan's upper
level that scores those placements with the routing LP (`bilevel`).
"""

from flowherd.planning.bvn import BvnDecomposition, birkhoff_von_neumann, bvn
from flowherd.planning.mcf import LpResult, McfSolution, route_min_max_utilization, solve_lp
from flowherd.planning.teccl import (
    SYNTHESIZERS,
    Synthesis,
    mcf,
    register_collective_algorithms,
    synthesize_allgather,
    synthesize_alltoall,
)
from flowherd.planning.traffic import JobTraffic, TrafficMatrix, job_traffic, link_profile

__all__ = [
    "SYNTHESIZERS",
    "BvnDecomposition",
    "JobTraffic",
    "LpResult",
    "McfSolution",
    "Synthesis",
    "TrafficMatrix",
    "birkhoff_von_neumann",
    "bvn",
    "job_traffic",
    "link_profile",
    "mcf",
    "register_collective_algorithms",
    "route_min_max_utilization",
    "solve_lp",
    "synthesize_allgather",
    "synthesize_alltoall",
]
