"""What a run may use: the memory limit and the events limit its cost estimate is held to.

The memory limit is the least of what this process can still get:

* ``MemAvailable`` of ``/proc/meminfo`` (memory the kernel can give without swapping);
* the cgroup's ``memory.max`` less its ``memory.current`` (a container's limit, cgroup v2);
* the address-space limit (``ulimit -v``, ``RLIMIT_AS``) less what this process already maps
  (``VmSize``): past it every allocation fails, whatever the machine has.

``--max-memory SIZE`` (any command that runs something) replaces that figure: an estimate is
deliberately pessimistic, and the user may know better. The flag sets `MAX_MEMORY_ENV` in the
environment, so that the processes a command starts (a sweep's Ray workers, the demo's pool)
hold their runs to the same limit. ``--max-events N`` does the same for `MAX_EVENTS`, the events
a run, a sweep or a collective may be estimated to take (at the few microseconds of CPU an event
costs, the default is about a day).
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from flowherd.errors import ConfigError
from flowherd.units import GiB, KiB, format_size, parse_size

__all__ = ["MAX_EVENTS", "MAX_EVENTS_ENV", "MAX_MEMORY_ENV", "MemoryLimit", "events_limit", "memory_limit",
           "set_limits"]

MAX_MEMORY_ENV = "FLOWHERD_MAX_MEMORY"
MAX_EVENTS_ENV = "FLOWHERD_MAX_EVENTS"
#: Events (flow arrivals and departures of the simulator) a command may be estimated to take:
#: at about 7.5 us of CPU per background flow measured (2 events), 10^10 events is about 10 CPU-hours.
MAX_EVENTS = 10**10


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryLimit:
    """The memory a command may use, and what sets it.

    Attributes:
        limit_bytes: Bytes.
        source: What the figure is, for a message (``"this machine has 21 GiB available"``).
    """

    limit_bytes: int
    source: str


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * KiB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            cap = fh.read().strip()
        if cap == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as fh:
            used = int(fh.read().strip())
        return max(0, int(cap) - used)
    except (OSError, ValueError):
        return None


def _address_space_room() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    mapped = int(line.split()[1]) * KiB
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - mapped)


def memory_limit() -> MemoryLimit:
    """The memory limit of this process (module docstring).

    Raises:
        ConfigError: A malformed `MAX_MEMORY_ENV`.
    """
    override = os.environ.get(MAX_MEMORY_ENV)
    if override:
        try:
            value = int(override)
        except ValueError:
            raise ConfigError(f"malformed {MAX_MEMORY_ENV}={override[:40]!r}: expected a number of bytes "
                              "(--max-memory)") from None
        return MemoryLimit(limit_bytes=value, source=f"--max-memory is {format_size(value)}")
    found = [(v, s) for v, s in (
        (_meminfo_available(), "this machine has {} available"),
        (_cgroup_room(), "this container's cgroup leaves {}"),
        (_address_space_room(), "the address-space limit (ulimit -v) leaves this process {}"),
    ) if v is not None]
    if not found:
        return MemoryLimit(limit_bytes=16 * GiB,
                           source=f"{format_size(16 * GiB)} assumed (no memory figure found)")
    value, source = min(found)
    return MemoryLimit(limit_bytes=value, source=source.format(format_size(value)))


def events_limit() -> int:
    """The events limit (`MAX_EVENTS`, or ``--max-events`` through `MAX_EVENTS_ENV`)."""
    override = os.environ.get(MAX_EVENTS_ENV)
    if override:
        try:
            return int(override)
        except ValueError:
            raise ConfigError(f"malformed {MAX_EVENTS_ENV}={override[:40]!r}: expected a count "
                              "(--max-events)") from None
    return MAX_EVENTS


def set_limits(max_memory: str | None, max_events: int | None) -> None:
    """Apply ``--max-memory`` and ``--max-events`` to this process and the ones it starts.

    Raises:
        ConfigError: A size that does not parse or is not positive, a count below 1.
    """
    if max_memory is not None:
        value = parse_size(max_memory, field="--max-memory")
        if value <= 0:
            raise ConfigError(f"max memory must be positive, got {max_memory!r} (--max-memory)")
        os.environ[MAX_MEMORY_ENV] = str(int(value))
    if max_events is not None:
        if max_events < 1:
            raise ConfigError(f"max events must be at least 1, got {max_events} (--max-events)")
        os.environ[MAX_EVENTS_ENV] = str(int(max_events))
