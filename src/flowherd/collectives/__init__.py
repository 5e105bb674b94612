"""Collectives: operations, algorithms turning one into a schedule of steps, cost models, and
the NCCL-like (algorithm, protocol) selector."""

from flowherd.collectives.algorithms import ALGORITHMS, build_schedule
from flowherd.collectives.nccl import PROTOCOLS, Protocol, select
from flowherd.collectives.ops import Collective, Op, busbw_factor
from flowherd.collectives.schedule import Schedule, Step

__all__ = ["ALGORITHMS", "PROTOCOLS", "Collective", "Op", "Protocol", "Schedule", "Step",
           "build_schedule", "busbw_factor", "select"]
