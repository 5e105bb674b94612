"""SIGINT and SIGTERM: a long command stops within seconds, keeps what finished and says where.

`handle_signals` (entered by `flowherd.cli.main` around every command) makes SIGTERM behave as
SIGINT: both raise ``KeyboardInterrupt`` in the main thread, so one code path stops a command
whichever came (a scheduler's ``kill``, a terminal's Ctrl-C). A command that holds finished work
(the demo's runs, a sweep's) catches it, stops its workers at once instead of waiting for them,
and raises `flowherd.errors.Interrupted` with what it kept and where: one line, exit code 128 +
the signal. Anything else interrupted prints one line too (``flowherd: interrupted``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["handle_signals", "last_signal", "stop_pool"]

_received: list[int] = []  # the signal that interrupted this process (signals are process-wide)


def _raise(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def last_signal() -> int:
    """The signal that raised the last ``KeyboardInterrupt`` (SIGINT if none was seen)."""
    return _received[-1] if _received else int(signal.SIGINT)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM raise ``KeyboardInterrupt`` (main thread only; elsewhere
    a no-op, as Python allows handlers only there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    _received.clear()
    for s in old:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def stop_pool(pool: Any) -> None:
    """Stop a `concurrent.futures.ProcessPoolExecutor` now: queued work cancelled, its worker
    processes killed (their simulations hold nothing to save), no waiting for them."""
    procs = list(getattr(pool, "_processes", {}).values())  # the executor offers no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.kill()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(timeout=2.0)
