"""A local Ray instance for a sweep: every process on loopback, nothing left behind.

Ray is imported only inside `start_local_ray` (the ``sweep`` extra).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ray_messages_to", "start_local_ray"]

# Ray reads this when `ray._private.ray_constants` is imported: with it off, a node started for
# 127.0.0.1 keeps 127.0.0.1 (on Linux Ray otherwise replaces a loopback node IP with the address
# of the default route, and binds its runtime-env agent there); with the node IP on loopback the
# GCS, the raylet, every worker's gRPC server and both agents bind to loopback only
# (ray/_private/services.py resolve_ip_for_localhost, get_node_ip_address; measured with Ray 2.x:
# before, the GCS, raylet and workers listened on "::" and the runtime-env agent on the external
# address).
_RAY_LOCAL_ONLY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
_RAY_TMP_PREFIX = "flowherd-ray-"


def _remove_stale_ray_dirs(root: Path) -> None:
    """Remove the temporary directories of local Ray instances whose driver process is gone
    (a driver killed with SIGKILL cannot remove its own)."""
    for d in root.glob(f"{_RAY_TMP_PREFIX}*"):
        try:
            pid = int(d.name[len(_RAY_TMP_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:  # another user's live process
            continue


@contextlib.contextmanager
def ray_messages_to(path: Path) -> Iterator[Path]:
    """Send what Ray prints into this process's stdout and stderr (its start-up warnings, such as
    the token-authentication notice) to the file `path` while the block runs, so that a progress
    display drawn on the terminal stays whole.

    Python-level only: the handlers of Ray's loggers and ``sys.stdout`` / ``sys.stderr`` are pointed
    at the file and back. A console that holds the terminal's stream itself (``rich.Console(file=
    sys.stderr)``, made before the block) still draws there.
    """
    terminal = {id(s) for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}
    with open(path, "a", encoding="utf-8") as log, contextlib.redirect_stderr(log), \
            contextlib.redirect_stdout(log):
        moved: dict[logging.StreamHandler, Any] = {}
        for h in _ray_handlers():
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler) \
                    and id(getattr(h, "stream", None)) in terminal:
                moved[h] = h.setStream(log)
        before = _ray_handlers()
        try:
            yield path
        finally:
            for h, stream in moved.items():
                h.setStream(stream)
            for h in _ray_handlers() - before:  # made inside the block, bound to the file
                if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is log:
                    h.setStream(sys.__stderr__)


def _ray_handlers() -> set[logging.Handler]:
    found: set[logging.Handler] = set()
    for name, logger in [("", logging.getLogger()), *logging.Logger.manager.loggerDict.items()]:
        if (name == "" or name == "ray" or name.startswith("ray.")) and isinstance(logger, logging.Logger):
            found.update(logger.handlers)
    return found


@contextlib.contextmanager
def start_local_ray(num_cpus: int | None = None) -> Iterator[Path]:
    """A fresh local Ray instance bound to 127.0.0.1, removed with its temporary directory on exit.

    Every Ray process of the instance (GCS, raylet, workers, dashboard and runtime-env agents)
    listens on loopback only, the dashboard is off, and the session directory lives in a fresh
    ``flowherd-ray-<pid>-*`` directory of the system temp dir (short: Ray's Unix socket paths must
    stay under 108 bytes), deleted after `ray.shutdown`.

    Yields:
        The temporary directory.
    """
    root = Path(tempfile.gettempdir())
    _remove_stale_ray_dirs(root)
    saved = {k: os.environ.get(k) for k in _RAY_LOCAL_ONLY_ENV}
    os.environ.update(_RAY_LOCAL_ONLY_ENV)  # inherited by every process Ray starts
    tmp = Path(tempfile.mkdtemp(prefix=f"{_RAY_TMP_PREFIX}{os.getpid()}-", dir=root))
    import ray
    from ray._private import ray_constants

    was = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # if ray was imported before the variable was set
    try:
        # "local" always starts a fresh instance (never joins one found through RAY_ADDRESS)
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                 _node_ip_address="127.0.0.1", _temp_dir=str(tmp), log_to_driver=False,
                 logging_level=logging.WARNING)
        yield tmp
    finally:
        ray.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = was
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp, ignore_errors=True)
