"""Runs for the benchmarks' failure paths (tests/control/test_benchmark_pool.py): each function is
run in a child process by `benchmarks/runpool.py`."""

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import control


def run_or_die(task: tuple) -> dict:
    """`control.run_one`, except that flowherd's run on seed 1 kills its own process with SIGKILL
    (as the kernel's OOM killer would)."""
    if task[2] == "flowherd" and task[5] == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return control.run_one(task)


def square_or_fail(x: int) -> int:
    """x squared; 3 raises, 4 kills its process with SIGKILL, 5 with SIGTERM, 6 exits with 7."""
    if x == 3:
        raise ValueError("three is not allowed")
    if x == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    if x == 5:
        os.kill(os.getpid(), signal.SIGTERM)
    if x == 6:
        os._exit(7)
    return x * x


def grow(mib: int) -> int:
    """Hold ``mib`` MiB resident for a second, and return it."""
    block = bytearray(mib * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(1.0)
    return mib


_KEPT: list = []  # what a process keeps between runs (as the engine's per-process caches do)


def keep(mib: int) -> int:
    """Keep ``mib`` MiB resident in this process after returning; returns the process's peak
    resident memory since its exec, bytes."""
    import runpool

    block = bytearray(mib * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    _KEPT.append(block)
    return runpool._peak_rss_bytes()
