"""Sweep files: a base scenario, the fields swept and the seeds, checked and turned into runs.

A sweep file (YAML)::

    name: oversub-vs-load
    base: default                  # an embedded scenario, a YAML path (relative to this file) or a mapping
    set:                           # optional: fields set alike in every point (not swept, no column)
      simulation.horizon: 2min
    axes:                          # dotted scenario field paths; list items as ``jobs[0]``
      fabric.oversubscription: [1, 2, 4]
      workload.background.load: [0.0, 0.2]
      placement.method: [first-fit, packed]
    seeds: 3                       # or an explicit list: [1, 2, 3]
    # points: [{placement.method: packed, fabric.oversubscription: 2}, ...]   # instead of the product
    batch: 0                       # runs per Ray task; 0 picks it from the number of runs and CPUs

Each point is the base scenario with the point's values set, and is identified by the sha256 of
its canonical JSON (keys sorted, seed left out). A run is one point under one seed; its id is
``<point hash[:16]>-s<seed>`` and it is the unit of storage: the driver process writes each run in
one transaction as soon as it ends (`flowherd.experiments.sweep.run_sweep`).

Checked before any run: the file is read strictly (`flowherd.experiments.loading`); ``name``
becomes the directory ``runs/<name>`` when no ``--out`` is given, so it must be one path component
(letters, digits, ``.``, ``_``, ``-``; no ``/`` or ``..``); seeds are integers in 0..2**63-1 (the
store's 64-bit integers); at most `MAX_RUNS` runs; every axis path is checked against the schema,
including the keys of the free-form ``fabric`` mapping, and every point's scenario is validated.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flowherd.errors import ConfigError
from flowherd.experiments import loading
from flowherd.experiments.runs import MAX_SEED, Point, Run, canonical_hash

__all__ = ["MAX_RUNS", "PROGRESS_EVERY_S", "Sweep", "load_sweep", "set_field", "sweep_from_mapping"]


#: Seconds between two calls of `sweep_from_mapping`'s progress while it makes the points.
PROGRESS_EVERY_S = 2.0

# a sweep's runs are listed up front (and each is a row of the store): a million is far beyond any
# sweep this tool is for, and still a list of a few hundred MB
MAX_RUNS = 1_000_000
# a name becomes the directory runs/<name> when --out is not given: no separators, no "..", no
# leading dot or dash
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class _SweepModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "sweep"
    base: str | dict[str, Any]
    fixed: dict[str, Any] = Field(default_factory=dict, alias="set")
    axes: dict[str, list[Any]] = Field(default_factory=dict)
    seeds: int | list[int] = 1
    points: list[dict[str, Any]] | None = None
    batch: int = Field(0, ge=0)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v) or ".." in v:
            raise ValueError("a sweep name becomes a directory under runs/: expected letters, digits, "
                             "'.', '_' or '-' (no '/' or '..'), starting with a letter or digit, at most "
                             "100 characters")
        return v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, int) and not 1 <= v <= MAX_RUNS:
            raise ValueError(f"seeds must be a count in 1..{MAX_RUNS:,} or a list of integers")
        if isinstance(v, list) and (not v or len(set(v)) != len(v)):
            raise ValueError("seeds must be a non-empty list of distinct integers")
        if isinstance(v, list):
            bad = [x for x in v if not 0 <= x <= MAX_SEED]
            if bad:
                raise ValueError(f"seeds must be integers in 0..2**63-1 (stored as 64-bit integers), got "
                                 f"{loading.clip(bad[0])}")
        return v

    @field_validator("axes")
    @classmethod
    def _axes(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"axis {key!r} has no values")
        return v


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """A validated sweep: its points and seeds (module docstring)."""

    name: str
    points: tuple[Point, ...]
    seeds: tuple[int, ...]
    batch: int

    @property
    def runs(self) -> tuple[Run, ...]:
        """Every run, point-major (all seeds of the first point first)."""
        return tuple(Run(point=p, seed=s) for p in self.points for s in self.seeds)


# ---- building points ------------------------------------------------------------------------------
_PART = re.compile(r"^([A-Za-z_][\w-]*)((?:\[\d+\])*)$")


def _parse_path(path: str, field: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in path.split("."):
        m = _PART.match(piece)
        if not m:
            raise ConfigError(f"axis {path!r} is not a dotted field path like 'fabric.oversubscription' or "
                              f"'workload.jobs[0].iterations' ({field})")
        parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return parts


def _check_fabric_key(key: str, path: str, field: str, base_fabric: Any) -> None:
    from flowherd.fabric.spec import KIND_KEYS, FabricSpec

    kind = base_fabric.get("kind", "leaf-spine") if isinstance(base_fabric, Mapping) else "preset"
    allowed = KIND_KEYS.get(kind, tuple(FabricSpec.model_fields))
    if key in allowed:
        return
    close = difflib.get_close_matches(key, list(allowed), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"axis {path!r}: unknown field {key!r} of a {kind} fabric{hint}; expected one of "
                      f"{', '.join(allowed)} ({field})")


def _check_schema(parts: list[str | int], path: str, field: str, base_fabric: Any = None) -> None:
    """Check the path's named fields against the scenario schema, where the schema knows them."""
    from pydantic import BaseModel as _BM

    from flowherd.experiments.scenario import ScenarioModel

    model: type[_BM] | None = ScenarioModel
    for i, part in enumerate(parts):
        if model is None:
            if parts[:i] == ["fabric"] and isinstance(part, str):
                _check_fabric_key(part, path, field, base_fabric)
            if i >= 1 and parts[i - 1] == "serving" and isinstance(part, str):
                from flowherd.experiments.scenario import check_serving_key

                try:
                    check_serving_key(part, field)
                except ConfigError as err:
                    raise ConfigError(f"axis {path!r}: {err}") from None
            return  # free-form below here (controller.params), checked when the scenario is built
        if isinstance(part, int):
            continue
        fields = model.model_fields
        if part not in fields:
            close = difflib.get_close_matches(part, list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"axis {path!r}: unknown scenario field {part!r}{hint}; expected one of "
                              f"{', '.join(fields)} ({field})")
        ann = fields[part].annotation
        cands = [ann, *getattr(ann, "__args__", ())]
        for c in list(cands):
            cands.extend(getattr(c, "__args__", ()))
        model = next((c for c in cands if isinstance(c, type) and issubclass(c, _BM)), None)


def set_field(mapping: Mapping[str, Any], path: str, value: Any, *, field: str = "axes") -> dict[str, Any]:
    """A deep copy of `mapping` with the dotted `path` set to `value` (missing mappings are created).

    >>> set_field({"fabric": {"servers": 4}}, "fabric.oversubscription", 2)
    {'fabric': {'servers': 4, 'oversubscription': 2}}
    >>> set_field({"workload": {"jobs": [{"iterations": 3}]}}, "workload.jobs[0].iterations", 9)
    {'workload': {'jobs': [{'iterations': 9}]}}
    """
    parts = _parse_path(path, field)
    out = copy.deepcopy(dict(mapping))
    node: Any = out
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = path if last else ".".join(str(p) for p in parts[: i + 1])
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                size = len(node) if isinstance(node, list) else "no"
                raise ConfigError(f"axis {path!r}: index {part} is out of range (the base has {size} "
                                  f"items) ({field})")
        elif not isinstance(node, dict):
            raise ConfigError(f"axis {path!r}: {where!r} is not a mapping in the base scenario, got "
                              f"{type(node).__name__} ({field})")
        if last:
            node[part] = value
        else:
            nxt = parts[i + 1]
            if isinstance(part, str) and part not in node:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
    return out


def _with_value(mapping: dict[str, Any], path: str, value: Any, field: str) -> dict[str, Any]:
    """`set_field` that copies only the containers on `path` and shares the rest with `mapping`:
    a million points of a sweep hold one base scenario, not a million copies of it (a point's
    mapping is never changed in place: `Run.scenario` hands out deep copies)."""
    parts = _parse_path(path, field)
    out = dict(mapping)
    parent: Any = out
    for i, part in enumerate(parts[:-1]):
        child = parent[part] if isinstance(part, int) or part in parent else None
        if child is None or not isinstance(child, dict | list):
            return set_field(mapping, path, value, field=field)  # the slow path says what is wrong
        copied = dict(child) if isinstance(child, dict) else list(child)
        nxt = parts[i + 1]
        if isinstance(nxt, int) and (not isinstance(copied, list) or nxt >= len(copied)):
            return set_field(mapping, path, value, field=field)
        if isinstance(nxt, str) and not isinstance(copied, dict):
            return set_field(mapping, path, value, field=field)
        parent[part] = copied
        parent = copied
    parent[parts[-1]] = value
    return out


def _base_mapping(base: str | dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
    from flowherd.experiments.scenario import EMBEDDED, read_scenario_mapping

    if isinstance(base, dict):
        return copy.deepcopy(base)
    if base in EMBEDDED:
        return read_scenario_mapping(base)
    path = Path(base)
    if not path.is_absolute() and base_dir is not None and (base_dir / path).is_file():
        path = base_dir / path
    try:
        return read_scenario_mapping(path)
    except ConfigError as err:
        raise ConfigError(f"{err} [in base]") from None


def _from_validation(err: ValidationError) -> ConfigError:
    e = err.errors()[0]
    where = ".".join(str(p) for p in e["loc"]) or "sweep"
    if e["type"] == "extra_forbidden":
        key = str(e["loc"][-1])
        known = [f.alias or n for n, f in _SweepModel.model_fields.items()]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return ConfigError(f"unknown sweep field {key!r} ({where}){hint}; expected one of: "
                           f"{', '.join(known)}")
    if e["type"] == "missing":
        return ConfigError(f"missing required sweep field ({where})")
    return ConfigError(f"invalid value {loading.clip(e.get('input'))} ({where}): {e['msg']}")


def sweep_from_mapping(data: Mapping[str, Any], *, base_dir: Path | None = None,
                       progress: Callable[[int, int], None] | None = None) -> Sweep:
    """Validate a sweep mapping and expand its points (module docstring).

    The points' memory is estimated before they are made (`flowherd.experiments.cost.sweep_cost`)
    and refused over the limit; a product of axes is validated one axis value at a time (the
    schema has no rule across fields, so a point is valid when each of its values is), not point
    by point.

    Args:
        data: The sweep mapping.
        base_dir: Directory that a relative ``base`` path is resolved against (the sweep file's).
        progress: Called as ``progress(points_made, points)`` about every `PROGRESS_EVERY_S`
            seconds while the points are made (a million take minutes).

    Raises:
        ConfigError: A bad field, an axis path that is not a scenario field, an empty axis, both
            ``axes`` and ``points`` empty, duplicate points, points that would not fit in memory.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"a sweep must be a mapping, got {type(data).__name__} (sweep)")
    try:
        m = _SweepModel.model_validate(dict(data))
    except ValidationError as err:
        raise _from_validation(err) from None
    base = _base_mapping(m.base, base_dir)
    for path, value in m.fixed.items():  # the same for every point: part of the base, not a column
        _check_schema(_parse_path(path, f"set.{path}"), path, f"set.{path}", base.get("fabric"))
        base = set_field(base, path, value, field=f"set.{path}")
    if m.points is not None:
        if not m.points:
            raise ConfigError("points must list at least one point, got [] (points)")
        if m.axes:
            raise ConfigError("give either axes (cross product) or points (explicit list), not both (axes)")
        n_points = len(m.points)
    else:
        keys = list(m.axes)
        n_points = math.prod(len(m.axes[k]) for k in keys)
        if n_points > MAX_RUNS:
            raise ConfigError(f"the axes make {n_points:,} points; expected at most {MAX_RUNS:,} runs in a "
                              "sweep (axes)")
    n_seeds = m.seeds if isinstance(m.seeds, int) else len(m.seeds)
    if n_points * n_seeds > MAX_RUNS:
        raise ConfigError(f"{n_points:,} points x {n_seeds:,} seeds = {n_points * n_seeds:,} "
                          f"runs; expected at most {MAX_RUNS:,} (seeds)")
    from flowherd.experiments import cost

    cost.check(cost.sweep_cost(n_points, n_seeds, base), f"sweep {m.name!r}")  # before the points exist
    if m.points is not None:
        assignments: Any = [dict(p) for p in m.points]
        where = [f"points[{i}]" for i in range(len(assignments))]
    else:
        assignments = (dict(zip(keys, combo, strict=True))
                       for combo in itertools.product(*(m.axes[k] for k in keys)))
        where = [f"axes.{k}" for k in keys] if keys else ["axes"]
        for k in keys:  # each value once, alone on the base: the schema has no rule across fields
            _check_schema(_parse_path(k, f"axes.{k}"), k, f"axes.{k}", base.get("fabric"))
            for value in m.axes[k]:
                _check_point(set_field(base, k, value, field=f"axes.{k}"), {k: value}, "axes")
    checked: set[str] = set(m.axes)
    points: list[Point] = []
    seen: dict[str, int] = {}
    next_s = time.monotonic() + PROGRESS_EVERY_S
    for i, params in enumerate(assignments):
        if progress is not None and time.monotonic() >= next_s:
            progress(i, n_points)
            next_s = time.monotonic() + PROGRESS_EVERY_S
        scen = base
        for path, value in params.items():
            field = where[i] if m.points is not None else f"axes.{path}"
            if path not in checked:
                _check_schema(_parse_path(path, field), path, field, base.get("fabric"))
                checked.add(path)
            scen = _with_value(scen, path, value, field)
        if m.points is not None:
            _check_point(scen, params, where[i])
        h = canonical_hash(scen)
        if h in seen:
            raise ConfigError(f"points {seen[h]} and {i} give the same scenario ({params}); remove one "
                              f"({'points' if m.points is not None else 'axes'})")
        seen[h] = i
        points.append(Point(params=params, scenario=scen, hash=h))
    seeds = tuple(range(m.seeds)) if isinstance(m.seeds, int) else tuple(m.seeds)
    return Sweep(name=m.name, points=tuple(points), seeds=seeds, batch=m.batch)


def _check_point(scen: Mapping[str, Any], params: Mapping[str, Any], field: str) -> None:
    """Validate a point's scenario against the schema (no building), so that a bad value fails
    the sweep before any run rather than each run of it."""
    from flowherd.experiments.scenario import ScenarioModel
    from flowherd.experiments.scenario import _from_validation as scenario_error

    try:
        ScenarioModel.model_validate(dict(scen))
    except ValidationError as err:
        raise ConfigError(f"point {loading.clip(dict(params))}: {scenario_error(err)} ({field})") from None


def load_sweep(path: str | Path, *, progress: Callable[[int, int], None] | None = None) -> Sweep:
    """Read and validate a sweep YAML file (`progress` as `sweep_from_mapping`'s)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"no sweep file {loading.clip(str(path))} (expected a YAML file with base, axes, "
                          "seeds)")
    data = loading.read_yaml_file(p, what="sweep")
    return sweep_from_mapping(data, base_dir=p.parent, progress=progress)
