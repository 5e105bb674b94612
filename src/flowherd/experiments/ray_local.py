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

from flowherd.errors import ConfigError

__all__ = ["RAY_MIN_ADDRESS_SPACE_BYTES", "check_address_space", "limits_env", "ray_messages_to",
           "start_local_ray"]

# Ray reads this when `ray._private.ray_constants` is imported: with it off, a node started for
# 127.0.0.1 keeps 127.0.0.1 (on Linux Ray otherwise replaces a loopback node IP with the address
# of the default route, and binds its runtime-env agent there); with the node IP on loopback the
# GCS, the raylet, every worker's gRPC server and both agents bind to loopback only
# (ray/_private/services.py resolve_ip_for_localhost, get_node_ip_address; measured with Ray 2.x:
# before, the GCS, raylet and workers listened on "::" and the runtime-env agent on the external
# address).
_RAY_LOCAL_ONLY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
_RAY_TMP_PREFIX = "flowherd-ray-"
#: Address space a local Ray instance needs per process (its raylet and workers reserve it up
#: front): Ray 2.60 with 2 CPUs starts under ``ulimit -v`` of 10 GiB and not of 8 GiB, where it
#: fails after 35 s with "The current node timed out during startup" (measured).
RAY_MIN_ADDRESS_SPACE_BYTES = 10 * 2**30


def check_address_space() -> None:
    """Refuse to start a local Ray instance under an address-space limit it cannot start in.

    Raises:
        ConfigError: Naming the limit and what to do instead.
    """
    import resource

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < RAY_MIN_ADDRESS_SPACE_BYTES:
        raise ConfigError(f"a local Ray instance needs an address space of about "
                          f"{RAY_MIN_ADDRESS_SPACE_BYTES // 2**30} GiB per process, and this one is limited "
                          f"to {soft / 2**30:.1f} GiB (ulimit -v); raise the limit, or run the sweep in this "
                          "process with --inline")


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


def limits_env() -> dict[str, str]:
    """``--max-memory`` and ``--max-events`` as the environment of every Ray worker."""
    from flowherd.experiments.budget import MAX_EVENTS_ENV, MAX_MEMORY_ENV

    return {k: os.environ[k] for k in (MAX_MEMORY_ENV, MAX_EVENTS_ENV) if os.environ.get(k)}


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
def start_local_ray(num_cpus: int | None = None, memory_bytes: int | None = None) -> Iterator[Path]:
    """A fresh local Ray instance bound to 127.0.0.1, removed with its temporary directory on exit.

    Every Ray process of the instance (GCS, raylet, workers, dashboard and runtime-env agents)
    listens on loopback only, the dashboard is off, and Ray's temporary directory lives in a fresh
    ``flowherd-ray-<pid>-*`` directory of the system temp dir (short: Ray's Unix socket paths must
    stay under 108 bytes), deleted after `ray.shutdown`. Its workers inherit ``--max-memory`` and
    ``--max-events`` (`flowherd.experiments.budget`), and `memory_bytes` is the memory Ray
    schedules tasks into (each task asks for its runs' estimate).

    Raises:
        ConfigError: An address-space limit Ray cannot start in (`check_address_space`), or any
            failure of Ray's start-up, in one line.

    Yields:
        The temporary directory.
    """
    check_address_space()
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
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                     _node_ip_address="127.0.0.1", _temp_dir=str(tmp), log_to_driver=False,
                     logging_level=logging.WARNING, _memory=memory_bytes,
                     runtime_env={"env_vars": limits_env()} if limits_env() else None)
        except Exception as err:  # Ray's start-up failures are many exception types
            text = str(err).strip().splitlines()
            first = " ".join(text[0].split())[:300] if text else type(err).__name__
            raise ConfigError(f"could not start a local Ray instance: {first}; run the sweep in this "
                              "process with --inline") from None
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
