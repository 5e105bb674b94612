"""flowherd: plan, control and simulate the collective traffic of LLM jobs on a shared fabric.

Importing the package reads no files and no argv; heavy optional dependencies are imported
only by the modules that need them.
"""

from flowherd.errors import (
    ConfigError,
    FlowherdError,
    InfeasibleError,
    SimulationError,
    SolverError,
    UnknownNameError,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "FlowherdError",
    "InfeasibleError",
    "SimulationError",
    "SolverError",
    "UnknownNameError",
    "__version__",
]
