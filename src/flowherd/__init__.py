"""flowherd: plan, control and simulate the collective traffic of LLM jobs on a shared fabric.

Importing the package reads no files and no argv; heavy optional dependencies are imported
only by the modules that need them.

The simulator computes on one thread (parallel runs are separate processes: `flowherd sweep`).
numpy's bundled OpenBLAS starts a helper thread per core when numpy is imported, and each
spins about 0.1 CPU-s waiting for work that flowherd never gives it (a 1,024-GPU ring AllReduce
at step fidelity: 0.12 of its 0.76 CPU-s). So, unless the environment says otherwise,
importing flowherd before numpy sets ``OPENBLAS_NUM_THREADS=1``; a process that imports numpy
first keeps numpy's default, and ``OPENBLAS_NUM_THREADS=N`` set before the start wins either way.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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
