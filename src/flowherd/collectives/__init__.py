"""Collectives: operations, algorithms turning one into a schedule of steps, cost models, and
NCCL 2.30's tuning model with the (algorithm, protocol, channels) selector built on it."""

from flowherd.collectives import nvls as _nvls  # noqa: F401  (registers nvls, nvlstree, pat)
from flowherd.collectives.algorithms import ALGORITHMS, build_schedule
from flowherd.collectives.nccl import PROTOCOLS, Protocol
from flowherd.collectives.ops import Collective, Op, busbw_factor
from flowherd.collectives.schedule import Schedule, Step
from flowherd.collectives.selector import Selection, select

__all__ = ["ALGORITHMS", "PROTOCOLS", "Collective", "Op", "Protocol", "Schedule", "Selection",
           "Step", "build_schedule", "busbw_factor", "select"]
