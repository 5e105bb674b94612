"""The package keeps numpy's BLAS on one thread unless the environment says otherwise
(`flowherd/__init__.py`): a simulation never calls BLAS in parallel, and OpenBLAS's idle helper
threads spin CPU time away (0.12 of the 0.76 CPU-s of a 1,024-GPU ring AllReduce at step
fidelity, `benchmarks/astra_compare.py --floor 1024`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PROBE = ("import flowherd, numpy, os; print(os.environ['OPENBLAS_NUM_THREADS'], "
         "[l.split()[1] for l in open('/proc/self/status') if l.startswith('Threads:')][0])")


def _run(extra: dict[str, str], code: str = PROBE) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env.update(PYTHONPATH=str(SRC), **extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="counts threads in /proc")
def test_importing_flowherd_first_leaves_numpy_one_thread():
    assert _run({}) == ["1", "1"]


def test_the_environment_wins():
    assert _run({"OPENBLAS_NUM_THREADS": "3"})[0] == "3"
