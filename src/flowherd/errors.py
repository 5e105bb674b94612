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


def check_fields(field: str, mapping: Iterable[Any], known: Sequence[str]) -> None:
    """Raise one clear `ConfigError` for the first key of `mapping` that is not in `known`:
    ``unknown field 'ecn_kk' (network.ecn_kk); did you mean 'ecn_k'?; expected one of: ...``."""
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown field {key!r} ({field}.{key}){hint}; expected one of: "
                              f"{', '.join(known)}")


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
