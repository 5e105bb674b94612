"""Simulation: the flow-level discrete-event engine and its max-min fair-share kernel."""

from flowherd.sim.engine import Engine
from flowherd.sim.fairshare import max_min_rates, max_min_rates_reference
from flowherd.sim.results import SimResult

__all__ = ["Engine", "SimResult", "max_min_rates", "max_min_rates_reference"]
