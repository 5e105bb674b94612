"""The one exception tree of flowherd.

A message says what was wrong, what was expected, what came, and where:
``"link capacity must be positive, got -1 (fabric.links[3])"``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any


class FlowherdError(Exception):
    """Base of every error flowherd raises on purpose."""


class ConfigError(FlowherdError, ValueError):
    """A scenario, fabric or CLI value is malformed or out of range."""


#: An unknown key lists the known ones only when there are at most this many; otherwise the
#: message names the nearest one and says where the list is (a list of 21 job fields made a
#: 331-character line).
MAX_LISTED_FIELDS = 8


def unknown_field(key: object, where: str, known: Sequence[str], *,
                  listing: str = "docs/scenario-schema.md lists them") -> ConfigError:
    """One short line for an unknown key: the nearest known key, and the known keys themselves
    only when they are few (`MAX_LISTED_FIELDS`).

    >>> str(unknown_field("iteratons", "j", [f"f{i}" for i in range(20)] + ["iterations"], listing="docs"))
    "unknown field 'iteratons' (j); did you mean 'iterations'? (expected one of 21 fields; docs)"
    >>> str(unknown_field("x", "a.x", ["b", "c"]))
    "unknown field 'x' (a.x); expected one of: b, c"
    """
    known = list(known)
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if len(known) <= MAX_LISTED_FIELDS:
        return ConfigError(f"unknown field {key!r} ({where}){hint}; expected one of: {', '.join(known)}")
    nearest = difflib.get_close_matches(str(key), known, n=1, cutoff=0)
    near = f"; the nearest is {nearest[0]!r}" if nearest and not close else ""
    return ConfigError(f"unknown field {key!r} ({where}){hint}{near} (expected one of {len(known)} fields; "
                       f"{listing})")


def check_fields(field: str, mapping: Iterable[Any], known: Sequence[str]) -> None:
    """Raise one clear `ConfigError` for the first key of `mapping` that is not in `known`
    (`unknown_field`): ``unknown field 'ecn_kk' (network.ecn_kk); did you mean 'ecn_k'? ...``."""
    for key in mapping:
        if key not in known:
            raise unknown_field(key, f"{field}.{key}", known)


class UnknownNameError(ConfigError, KeyError):
    """A name (preset, algorithm, router, controller ...) that no registry holds."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(f"unknown {kind} {name!r}{hint} (expected one of: {', '.join(known)})")
        self.kind = kind
        self.name = name
        self.known = tuple(known)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class InfeasibleError(FlowherdError):
    """A request that no solution satisfies (a job that fits nowhere, demands no routing carries)."""


class SolverError(FlowherdError):
    """An LP/MILP solver failed for a reason other than infeasibility."""


class SimulationError(FlowherdError):
    """The simulator reached a state it cannot continue from."""


class WriteError(FlowherdError):
    """An output could not be written (a full disk, a read-only file system, no permission);
    the message names the path and the cause. The command line exits with 1 for it, not 2:
    the input was fine."""


def caused_by_interrupt(err: BaseException) -> bool:
    """Whether `err` is, or was raised because of, a ``KeyboardInterrupt`` (a Ctrl-C or SIGTERM
    that arrived in a callback of compiled code comes out as a ``SystemError`` caused by it)."""
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


class Interrupted(FlowherdError):
    """SIGINT or SIGTERM stopped a long command; the message says what was kept and where.

    Attributes:
        exit_code: 128 + the signal's number, as a shell reports a process the signal ended.
    """

    def __init__(self, message: str, *, signum: int = 2):
        super().__init__(message)
        self.exit_code = 128 + signum
