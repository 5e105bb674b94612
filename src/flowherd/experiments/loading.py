"""Reading user files safely, and refusing what cannot fit before it is built.

Everything a user hands flowherd (scenario, sweep and fabric YAML files) passes through here
before pydantic sees it:

* the file must be a regular text file of at most `MAX_FILE_BYTES` (a directory, a binary file or
  a huge file is one `ConfigError`, not a ``UnicodeDecodeError`` or a ``MemoryError``);
* YAML is parsed with duplicate keys refused (not last-one-wins) and with the number of values
  the document expands to through aliases capped at `MAX_YAML_VALUES` (a "billion laughs" file
  is a few hundred bytes that expand to 10^9 values: every later step, even printing it, would
  walk all of them);
* `clip` caps what an error message echoes of a value.

The size checks estimate a scenario's memory from its counts before anything is allocated and
refuse, with the figure and the limit, what exceeds the memory available on this machine.
"""

from __future__ import annotations

import difflib
import math
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.experiments import budget
from flowherd.units import KiB, MiB, format_size

__all__ = [
    "BYTES_PER_GPU",
    "BYTES_PER_JOB",
    "MAX_ECHO_CHARS",
    "MAX_FILE_BYTES",
    "MAX_YAML_VALUES",
    "available_memory_bytes",
    "check_fabric_size",
    "check_workload_size",
    "clip",
    "fabric_gpu_count",
    "fit_trace_rows",
    "load_yaml",
    "read_text_file",
    "read_yaml_file",
    "short_unknown",
]

MAX_FILE_BYTES = 16 * MiB
MAX_YAML_VALUES = 1_000_000
MAX_ECHO_CHARS = 120
# Memory of a run per GPU of its fabric and per job, bytes. Measured with tracemalloc on the
# peak of whole runs (build + simulate, collective fidelity): 8,192 GPUs and 10 jobs peaked at
# 40 MB (about 4.9 KB per GPU); 8,192 GPUs and 200 jobs at 155 MB (about 0.75 MB per job). Rounded
# up: the estimate is for refusing what cannot fit, not for planning a machine.
BYTES_PER_GPU = 8 * KiB
BYTES_PER_JOB = 1 * MiB

_repr = reprlib.Repr()
_repr.maxstring = MAX_ECHO_CHARS
_repr.maxother = MAX_ECHO_CHARS
_repr.maxlist = _repr.maxdict = _repr.maxtuple = _repr.maxset = 6
_repr.maxlevel = 3


def clip(value: object, limit: int = MAX_ECHO_CHARS) -> str:
    """A repr of `value` of at most about `limit` characters (deep and long values elided).

    >>> clip("x" * 1000)[:10], len(clip("x" * 1000)) < 130
    ("'xxxxxxxxx", True)
    >>> clip({"a": [1, 2, 3]})
    "{'a': [1, 2, 3]}"
    """
    text = _repr.repr(value)
    return text if len(text) <= limit + 3 else text[:limit] + "..."


# ---- files ------------------------------------------------------------------------------------------
def read_text_file(path: str | Path, *, what: str, expected: str = "a YAML file") -> str:
    """The UTF-8 text of a regular file of at most `MAX_FILE_BYTES`.

    Args:
        path: The file.
        what: What the file is, for the message (``"scenario"``).
        expected: What was expected instead, for the message.

    Raises:
        ConfigError: Missing, a directory, too large, unreadable, or not UTF-8 text.
    """
    p = Path(path)
    name = clip(str(path))
    if p.is_dir():
        raise ConfigError(f"{what} {name} is a directory; expected {expected}")
    if not p.is_file():
        raise ConfigError(f"no {what} file {name} (expected {expected})")
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(f"{what} file {name} has {format_size(size)}; expected {expected} of at "
                              f"most {format_size(MAX_FILE_BYTES)}")
        data = p.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read {what} file {name}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} file {name} is not text (byte 0x{data[err.start]:02x} at offset "
                          f"{err.start} is not UTF-8); expected {expected}") from None
    if "\x00" in text:
        raise ConfigError(f"{what} file {name} is not text (a NUL byte at offset {text.index(chr(0))}); "
                          f"expected {expected}")
    return text


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: object, line: int, first: int):
        super().__init__(f"duplicate key {clip(key)} at line {line} (first at line {first}); "
                         "expected each key once in a mapping")


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml's safe loader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base" may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base loader says so
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _DuplicateKey(key, line, first)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(obj: Any, memo: dict[int, int]) -> int:
    """Values `obj` stands for once every alias is expanded (shared objects counted per use)."""
    if not isinstance(obj, dict | list):
        return 1
    key = id(obj)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias (&a [*a]) counts once and ends the walk
    n = 1
    children = obj.values() if isinstance(obj, dict) else obj
    for child in children:
        n += _expanded_size(child, memo)
        if n > MAX_YAML_VALUES:
            break
    memo[key] = n
    return n


def _yaml_problem(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        what = err.problem or err.context or "syntax error"
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return " ".join(str(what).split())[:200] + where
    return str(err).splitlines()[0][:300] if str(err) else "syntax error"


def load_yaml(text: str, *, source: str, what: str) -> Any:
    """Parse YAML `text` strictly (module docstring); `source` and `what` name it in errors.

    >>> load_yaml("a: 1\\nb: [2, 3]", source="x.yaml", what="scenario")
    {'a': 1, 'b': [2, 3]}
    """
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} {source} is not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(f"{what} {source} is nested too deeply to read; expected a YAML mapping of a "
                          "few levels") from None
    try:
        size = _expanded_size(data, {})
    except RecursionError:
        raise ConfigError(f"{what} {source} is nested too deeply to read; expected a YAML mapping of a "
                          "few levels") from None
    if size > MAX_YAML_VALUES:
        raise ConfigError(f"{what} {source} expands to more than {MAX_YAML_VALUES:,} values through YAML "
                          "aliases (*name); expected a plain document (a 'billion laughs' file?)")
    return data


def read_yaml_file(path: str | Path, *, what: str, mapping: bool = True) -> Any:
    """`read_text_file` then `load_yaml`; with `mapping`, the document must be a mapping."""
    text = read_text_file(path, what=what)
    source = clip(str(path))
    data = load_yaml(text, source=source, what=what)
    if mapping and not isinstance(data, dict):
        raise ConfigError(f"{what} {source} must be a YAML mapping, got {type(data).__name__}")
    return data


def short_unknown(err: UnknownNameError, field: str, listing: str) -> ConfigError:
    """A one-line message for an unknown name of a long registry: the near miss and where the
    full list is (`listing`, e.g. ``flowherd fabric --list``), instead of every name."""
    close = difflib.get_close_matches(err.name, list(err.known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {err.kind} {clip(err.name)} ({field}){hint} (`{listing}` lists all "
                       f"{len(err.known)})")


# ---- sizes -------------------------------------------------------------------------------------------
def available_memory_bytes() -> int:
    """Memory a run may still use, bytes (`flowherd.experiments.budget.memory_limit`: the least of
    ``MemAvailable``, the cgroup's room and the address-space limit's, or ``--max-memory``)."""
    return budget.memory_limit().limit_bytes


def _int(mapping: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    v = mapping.get(key, default)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def fabric_gpu_count(fabric: Any) -> tuple[int, str] | None:
    """GPUs a fabric mapping would build and how that count comes about, or None if unknown.

    None for a preset (a known, fixed size) and for counts that are not positive integers (the
    fabric's own validation names those).

    >>> fabric_gpu_count({"kind": "leaf-spine", "servers": 10**9, "gpus_per_server": 8})
    (8000000000, '1,000,000,000 servers x 8 GPUs')
    """
    if not isinstance(fabric, Mapping):
        return None
    kind = fabric.get("kind", "leaf-spine")
    gps = _int(fabric, "gpus_per_server", 1)
    if gps is None:
        return None
    if kind == "fat-tree":
        k = _int(fabric, "k")
        if k is None:
            return None
        servers, how = k**3 // 4, f"k={k:,} (k^3/4 servers)"
    elif kind in ("leaf-spine", "rail-optimized", "clos3"):
        n = _int(fabric, "servers")
        if n is None:
            return None
        servers, how = n, f"{n:,} servers"
    elif kind == "alibaba-lingjun":  # the mapping's fixed 847 hosts
        servers, how = 847, "847 Lingjun hosts"
    else:
        return None
    return servers * gps, f"{how} x {gps:,} GPUs"


def _refuse(what: str, need_bytes: float, field: str) -> None:
    have = available_memory_bytes()
    if need_bytes > have:
        limit = budget.memory_limit()
        source = limit.source if limit.limit_bytes == have else f"{format_size(have)} available"
        raise ConfigError(f"{what} needs about {format_size(need_bytes)} of memory; {source} "
                          f"(--max-memory overrides) ({field})")


def check_fabric_size(fabric: Any, *, field: str = "fabric") -> None:
    """Refuse a fabric mapping whose estimated memory exceeds what is available, before it is built.

    Raises:
        ConfigError: With the GPU count, the estimate and the limit, naming `field`.
    """
    got = fabric_gpu_count(fabric)
    if got is None:
        return
    gpus, how = got
    gpu_bytes = gpus * BYTES_PER_GPU
    leaves = spines = 0
    if isinstance(fabric, Mapping) and fabric.get("kind", "leaf-spine") == "leaf-spine":
        leaves, spines = _int(fabric, "leaves") or 0, _int(fabric, "spines") or 0
    link_bytes = leaves * spines * KiB
    if link_bytes > gpu_bytes:  # the switches drive it: name the field that does
        key = "leaves" if leaves >= spines else "spines"
        _refuse(f"a fabric of {leaves:,} leaves x {spines:,} spines ({leaves * spines:,} leaf-spine links)",
                gpu_bytes + link_bytes, f"{field}.{key}")
        return
    key = "k" if isinstance(fabric, Mapping) and fabric.get("kind") == "fat-tree" else "servers"
    _refuse(f"a fabric of {how} = {gpus:,} GPUs", gpu_bytes + link_bytes, f"{field}.{key}")


def check_workload_size(workload: Any, fabric_gpus: int, *, field: str = "workload") -> None:
    """Refuse a workload that cannot run: a job larger than the fabric, or more jobs than memory holds.

    Args:
        workload: The validated workload model (``jobs``, ``arrivals`` with ``rate``, ``until``,
            ``start`` and a ``mix`` of jobs).
        fabric_gpus: GPUs of the built fabric.
        field: Where the workload sits, for messages.

    Raises:
        ConfigError: Naming the job or arrival field, the figure and the limit.
    """
    from flowherd.units import parse_time
    from flowherd.workload import parse_rate_per_s

    def fits(job: Any, where: str) -> None:
        p = job.parallelism
        need = job.gpus if job.gpus is not None else p.tp * p.pp * (p.dp or 1) * p.cp
        if job.kind == "training" and need > fabric_gpus:
            raise ConfigError(f"job {clip(job.name)} asks for {need:,} GPUs but the fabric has "
                              f"{fabric_gpus:,} ({where}.gpus)")

    for i, job in enumerate(workload.jobs):
        fits(job, f"{field}.jobs[{i}]")
    expected = float(len(workload.jobs))
    for i, a in enumerate(workload.arrivals):
        where = f"{field}.arrivals[{i}]"
        for k, job in enumerate(a.mix):
            fits(job, f"{where}.mix[{k}]")
        rate = parse_rate_per_s(a.rate, field=f"{where}.rate")
        span = parse_time(a.until, field=f"{where}.until") - parse_time(a.start, field=f"{where}.start")
        n = rate * max(0.0, span)
        expected += n
        if math.isfinite(n) and n * BYTES_PER_JOB <= available_memory_bytes():
            continue
        _refuse(f"{where} brings about {n:,.0f} jobs (rate {clip(a.rate)} over {span:g} s), which at "
                f"about {format_size(BYTES_PER_JOB)} each", n * BYTES_PER_JOB, f"{where}.rate")
    _refuse(f"a workload of about {expected:,.0f} jobs at about {format_size(BYTES_PER_JOB)} each",
            expected * BYTES_PER_JOB, f"{field}.arrivals")


def fit_trace_rows(rows: Sequence[Any], fabric_gpus: int, *, field: str, horizon_s: float = math.inf,
                   time_scale: float = 1.0) -> list[Any]:
    """Trace rows (``job_id``, ``num_gpus``, ``submit_time_s``) checked against the fabric before
    they become jobs (a job's rank grid is allocated per GPU, so 10^9 GPUs would not fit in memory).

    A row asking for more GPUs than the fabric has is an error when it is submitted before the
    horizon (as it would be later), and is left out when it is submitted at or after it (such
    jobs are dropped anyway; it is never the first row, so the others' rebased submit times, as
    `flowherd.workload.map_trace_jobs` computes them, do not change).

    Raises:
        ConfigError: Naming the row's job, its GPUs and the fabric's, or the memory the rows need.
    """
    t0 = min((r.submit_time_s for r in rows), default=0.0)
    out = []
    for r in rows:
        if r.num_gpus > fabric_gpus:
            if (r.submit_time_s - t0) * time_scale >= horizon_s:
                continue
            raise ConfigError(f"trace job {clip(r.job_id)} asks for {r.num_gpus:,} GPUs (after gpu_scale) "
                              f"but the fabric has {fabric_gpus:,} ({field}.path)")
        out.append(r)
    _refuse(f"{len(out):,} trace jobs at about {format_size(BYTES_PER_JOB)} each",
            len(out) * BYTES_PER_JOB, f"{field}.max_jobs")
    return out
