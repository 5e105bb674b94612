"""Sizes, rates and times: parsing and printing at the edges, constants inside.

Inside flowherd every quantity is in bytes, seconds or bytes per second, and names carry
the unit (``size_bytes``, ``latency_s``, ``capacity_bytes_per_s``). Human units appear only
in YAML, on the command line and in reports, and pass through this module.

Binary prefixes (``KiB``, ``MiB``, ``GiB``) are powers of 2; decimal ones (``KB``, ``MB``,
``GB``) are powers of 10. A rate in bits (``Gbps``, ``Gb/s``) is converted to bytes per second.

>>> parse_size("1GiB")
1073741824
>>> parse_size("64KB")
64000
>>> parse_rate("400Gbps")
50000000000.0
>>> parse_rate("900GB/s")
900000000000.0
>>> parse_time("2us")
2e-06
>>> format_size(64 * MiB)
'64 MiB'
"""

from __future__ import annotations

import math
import re

from flowherd.errors import ConfigError

# sizes, in bytes
B = 1
KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB, PiB = 2**10, 2**20, 2**30, 2**40, 2**50
# rates, in bytes per second
bps = 1 / 8
Kbps, Mbps, Gbps, Tbps = 1e3 / 8, 1e6 / 8, 1e9 / 8, 1e12 / 8
GBps, TBps = 1e9, 1e12
# times, in seconds
ns, us, ms, s = 1e-9, 1e-6, 1e-3, 1.0
minute, hour, day = 60.0, 3600.0, 86400.0
# FLOP/s
TFLOPS, PFLOPS = 1e12, 1e15

_SIZE_UNITS = {
    "": B, "b": B, "byte": B, "bytes": B,
    "k": KB, "kb": KB, "m": MB, "mb": MB, "g": GB, "gb": GB, "t": TB, "tb": TB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
}
_RATE_UNITS = {
    "bps": bps, "b/s": bps,
    "kbps": Kbps, "kb/s": Kbps, "mbps": Mbps, "mb/s": Mbps,
    "gbps": Gbps, "gb/s": Gbps, "tbps": Tbps, "tb/s": Tbps,
    "bytes/s": 1.0, "b/s_bytes": 1.0,
    "kbytes/s": 1e3, "mbytes/s": 1e6, "gbytes/s": 1e9,
}
# Case matters for rates: "Gb/s"/"Gbps" are bits, "GB/s"/"GBps" are bytes.
_RATE_BYTE_UNITS = {
    "B/s": 1.0, "Bps": 1.0,
    "KB/s": 1e3, "KBps": 1e3, "MB/s": 1e6, "MBps": 1e6,
    "GB/s": 1e9, "GBps": 1e9, "TB/s": 1e12, "TBps": 1e12,
    "KiB/s": KiB, "MiB/s": MiB, "GiB/s": GiB,
}
_TIME_UNITS = {
    "": s, "s": s, "sec": s, "second": s, "seconds": s,
    "ns": ns, "us": us, "µs": us, "ms": ms,
    "m": minute, "min": minute, "minute": minute, "minutes": minute,
    "h": hour, "hr": hour, "hour": hour, "hours": hour, "d": day, "day": day, "days": day,
}
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµ/_]*)\s*$")


def _split(text: str | float | int, what: str, field: str | None) -> tuple[float, str]:
    if isinstance(text, bool):
        raise ConfigError(_msg(what, text, field, "a number with a unit"))
    if isinstance(text, int | float):
        return float(text), ""
    m = _QUANTITY.match(str(text))
    if not m:
        raise ConfigError(_msg(what, text, field, "a number with a unit"))
    return float(m.group(1)), m.group(2)


def _msg(what: str, value: object, field: str | None, expected: str) -> str:
    where = f" ({field})" if field else ""
    return f"malformed {what} {_shown(value)}{where}: expected {expected}"


# Upper bounds of what any input may say: far above every real fabric, job and horizon (the largest
# collective of a 100,000-GPU job is a few TiB; links run at 1.6 Tbps), far below what would
# overflow an int64 or allocate until the machine runs out of memory.
MAX_SIZE_BYTES = PiB
MAX_RATE_BYTES_PER_S = 1e15  # 8 Pbps
MAX_TIME_S = 1e9  # about 32 years


def _check(value: float, what: str, text: object, field: str | None, allow_zero: bool,
           limit: float | None = None, shown_limit: str = "") -> None:
    where = f" ({field})" if field else ""
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ConfigError(f"{what} must be {bound}, got {_shown(text)}{where}")
    if limit is not None and value > limit:
        raise ConfigError(f"{what} must be at most {shown_limit}, got {_shown(text)}{where}")


def _shown(text: object) -> str:
    r = repr(text)
    return r if len(r) <= 60 else r[:60] + "..."


def parse_size(text: str | float | int, *, field: str | None = None) -> int:
    """Parse a size such as ``"1GiB"``, ``"64KB"`` or ``4096`` into bytes (an int)."""
    value, unit = _split(text, "size", field)
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise ConfigError(_msg("size", text, field, "units B, KB, MB, GB, KiB, MiB, GiB, TiB"))
    _check(value * factor, "size", text, field, allow_zero=True, limit=MAX_SIZE_BYTES, shown_limit="1 PiB")
    return round(value * factor)


def parse_nccl_size(text: str | float | int, *, field: str | None = None) -> int:
    """Parse a size as nccl-tests' ``-b``, ``-e`` and ``-i`` read it: a bare ``K``, ``M`` or ``G``
    is a power of 1,024 (``parsesize`` in nccl-tests' ``src/common.cu``: "M=Mebibytes and
    G=Gibibytes"); a unit with ``B`` keeps flowherd's meaning (``KB`` 10**3, ``KiB`` 2**10).

    >>> parse_nccl_size("1G"), parse_nccl_size("64K"), parse_nccl_size("8"), parse_nccl_size("1GB")
    (1073741824, 65536, 8, 1000000000)
    """
    value, unit = _split(text, "size", field)
    binary = {"k": KiB, "m": MiB, "g": GiB}.get(unit.lower()) if len(unit) == 1 else None
    if binary is None:
        return parse_size(text, field=field)
    _check(value * binary, "size", text, field, allow_zero=True, limit=MAX_SIZE_BYTES, shown_limit="1 PiB")
    return round(value * binary)


def parse_rate(text: str | float | int, *, field: str | None = None) -> float:
    """Parse a rate such as ``"400Gbps"`` (bits) or ``"900GB/s"`` (bytes) into bytes per second.

    A bare number is taken as bytes per second.
    """
    value, unit = _split(text, "rate", field)
    if unit == "":
        factor = 1.0
    elif unit in _RATE_BYTE_UNITS:
        factor = _RATE_BYTE_UNITS[unit]
    else:
        factor = _RATE_UNITS.get(unit.lower())
        if factor is None:
            raise ConfigError(
                _msg("rate", text, field, "units Gbps or Gb/s (bits), GB/s or GBps (bytes)")
            )
    _check(value * factor, "rate", text, field, allow_zero=False, limit=MAX_RATE_BYTES_PER_S,
           shown_limit="8 Pbps (1e15 bytes/s)")
    return value * factor


def parse_time(text: str | float | int, *, field: str | None = None) -> float:
    """Parse a duration such as ``"2us"``, ``"1.5h"`` or ``0.01`` (seconds) into seconds."""
    value, unit = _split(text, "time", field)
    factor = _TIME_UNITS.get(unit) or _TIME_UNITS.get(unit.lower())
    if factor is None:
        raise ConfigError(_msg("time", text, field, "units ns, us, ms, s, min, h, d"))
    _check(value * factor, "time", text, field, allow_zero=True, limit=MAX_TIME_S,
           shown_limit="1e9 s (about 32 years)")
    return value * factor


def _fmt(value: float, steps: list[tuple[float, str]]) -> str:
    for factor, name in steps:
        if abs(value) >= factor:
            x = value / factor
            return f"{x:.3g} {name}" if x != int(x) else f"{int(x)} {name}"
    factor, name = steps[-1]
    return f"{value / factor:.3g} {name}"


def format_size(size_bytes: float) -> str:
    """Print a size with a binary prefix: ``format_size(3 * GiB) == '3 GiB'``."""
    return _fmt(size_bytes, [(PiB, "PiB"), (TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"), (1, "B")])


def format_rate(bytes_per_s: float) -> str:
    """Print a rate in bits per second: ``format_rate(50e9) == '400 Gbps'``."""
    return _fmt(bytes_per_s, [(Tbps, "Tbps"), (Gbps, "Gbps"), (Mbps, "Mbps"), (Kbps, "Kbps"),
                              (bps, "bps")])


def format_time(seconds: float) -> str:
    """Print a duration: ``format_time(2e-6) == '2 us'``."""
    return _fmt(seconds, [(hour, "h"), (minute, "min"), (s, "s"), (ms, "ms"), (us, "us"),
                          (ns, "ns")])


def format_seconds(seconds: float) -> str:
    """Print a job-scale duration always in seconds (terminal tables and reports agree on the unit).

    >>> format_seconds(94.21), format_seconds(1234.5), format_seconds(0.0421)
    ('94.2 s', '1,234 s', '0.0421 s')
    """
    if abs(seconds) >= 1000:
        return f"{seconds:,.0f} s"
    if abs(seconds) >= 1:
        return f"{seconds:.3g} s" if abs(seconds) < 100 else f"{seconds:.0f} s"
    return f"{seconds:.3g} s"
