"""The run record: one scenario point under one seed, the unit a sweep executes and the store keeps.

It lives below both `flowherd.experiments.sweep` (which makes runs) and
`flowherd.experiments.store` (which writes them), so that neither imports the other.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowherd.errors import ConfigError

__all__ = ["MAX_SEED", "Point", "Run", "canonical_hash", "check_seed"]

# seeds are stored as DuckDB BIGINT (signed 64-bit); numpy takes any non-negative integer
MAX_SEED = 2**63 - 1


def check_seed(seed: object, field: str = "seed") -> int:
    """`seed` as an int if it is an integer in 0..2**63-1, else a `ConfigError` naming `field`.

    >>> check_seed(7)
    7
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        shown = repr(seed) if len(repr(seed)) <= 40 else repr(seed)[:40] + "..."
        raise ConfigError(f"seed must be an integer in 0..2**63-1, got {shown} ({field})")
    return seed


def canonical_hash(scenario: Mapping[str, Any]) -> str:
    """sha256 hex digest of the canonical JSON of a scenario mapping, its ``seed`` left out."""
    body = {k: v for k, v in scenario.items() if k != "seed"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One scenario of a sweep.

    Attributes:
        params: The axis values of this point, by dotted field path.
        scenario: The full scenario mapping (the base with `params` set; its seed is the run's).
        hash: sha256 hex digest of the canonical JSON of `scenario` without its seed.
    """

    params: Mapping[str, Any]
    scenario: Mapping[str, Any]
    hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One point under one seed: the unit that is executed and stored."""

    point: Point
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.point.hash[:16]}-s{self.seed}"

    def scenario(self) -> dict[str, Any]:
        """The scenario mapping with this run's seed."""
        return {**copy.deepcopy(dict(self.point.scenario)), "seed": self.seed}
