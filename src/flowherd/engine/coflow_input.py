"""Checks of what is handed to `flowherd.engine.core.Engine.add_coflow`: one clear line per error.

The engine's hot path never re-checks: these run once per coflow (or once per batch of
coflows, `Engine.add_flows`), and routes already checked are remembered by identity.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.routing.base import Routes

__all__ = ["as_1d", "check_flows", "check_routes", "check_timing", "check_weight"]


def as_1d(name: str, value: Any, dtype: Any) -> np.ndarray:
    """``value`` as a 1-d array of ``dtype`` (a scalar becomes one entry); integers must be whole."""
    arr = np.atleast_1d(np.asarray(value))
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be a scalar or a 1-d array, got shape {arr.shape} ({name})")
    if np.issubdtype(np.dtype(dtype), np.integer):
        if (arr.size and not np.issubdtype(arr.dtype, np.integer)
                and not (np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)))):
            raise ConfigError(f"{name} must hold integers, got {arr[:4]!r} ({name})")
    elif not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ConfigError(f"{name} must be real numbers, got {arr.dtype} ({name})")
    return arr.astype(dtype)


def check_flows(src, dst, size_bytes, num_gpus: int, what: str) -> tuple[np.ndarray, ...]:
    """``int64`` src and dst GPU ids and ``float64`` sizes of equal length (broadcast)."""
    src_a = as_1d("src", src, np.int64)
    dst_a = as_1d("dst", dst, np.int64)
    size_a = as_1d("size_bytes", size_bytes, np.float64)
    try:
        src_a, dst_a, size_a = (np.array(a) for a in np.broadcast_arrays(src_a, dst_a, size_a))
    except ValueError:
        raise ConfigError(
            f"src, dst and size_bytes must have equal lengths, got {src_a.size}, {dst_a.size} "
            f"and {size_a.size} (src, dst, size_bytes of {what})") from None
    for nm, arr in (("src", src_a), ("dst", dst_a)):
        bad = np.flatnonzero((arr < 0) | (arr >= num_gpus))
        if bad.size:
            raise ConfigError(f"{nm} must be GPU ids in 0..{num_gpus - 1}, got {arr[bad[0]]} "
                              f"({nm}[{bad[0]}] of {what})")
    bad = np.flatnonzero(~(size_a >= 0) | ~np.isfinite(size_a))
    if bad.size:
        raise ConfigError(f"size_bytes must be finite and >= 0, got {size_a[bad[0]]!r} "
                          f"(size_bytes[{bad[0]}] of {what})")
    return src_a, dst_a, size_a


def check_timing(at_s, delay_s, priority, what: str) -> None:
    """Start time, delay and priority class of a coflow."""
    if at_s is not None and not (math.isfinite(at_s) and at_s >= 0):
        raise ConfigError(f"at_s must be a finite time >= 0 or None, got {at_s!r} (at_s of {what})")
    if not (math.isfinite(delay_s) and delay_s >= 0):
        raise ConfigError(f"delay_s must be finite and >= 0, got {delay_s!r} (delay_s of {what})")
    if isinstance(priority, bool) or not isinstance(priority, int | np.integer):
        raise ConfigError(f"priority must be an int, got {priority!r} (priority of {what})")


def check_weight(weight, n: int, what: str) -> None:
    """A coflow's weight: one number, or one per flow (``n``), finite and > 0."""
    if isinstance(weight, float | int) and not isinstance(weight, bool):
        ok = math.isfinite(weight) and weight > 0
    else:
        w = np.asarray(weight, dtype=np.float64)
        ok = bool(np.all(np.isfinite(w) & (w > 0)))
    if not ok:
        raise ConfigError(f"weight must be finite and > 0, got {weight!r} (weight of {what})")
    if np.ndim(weight) and np.shape(weight) != (n,):  # per-flow weights (sim.collective)
        raise ConfigError(f"weight must be a number or one per flow ({n}), got shape "
                          f"{np.shape(weight)} (weight of {what})")


def check_routes(routes: Routes, n: int, num_links: int, what: str) -> tuple[np.ndarray, ...]:
    """The arrays of ``routes`` (``link`` int64, ``frac``, ``ptr`` int64, ``latency_s``) after
    checking they describe ``n`` flows over links ``0 .. num_links - 1``."""
    ptr = np.asarray(routes.ptr, dtype=np.int64)
    if ptr.shape != (n + 1,):
        raise ConfigError(f"routes must have one row per flow ({n}), got {ptr.size - 1} "
                          f"(routes of {what})")
    if ptr[0] != 0 or np.any(np.diff(ptr) < 0):
        raise ConfigError(f"routes.ptr must start at 0 and not decrease, got {ptr[:8]!r} "
                          f"(routes of {what})")
    nnz = int(ptr[-1])
    lnk = np.asarray(routes.link, dtype=np.int64)
    frc = np.asarray(routes.frac, dtype=np.float64)
    lat = np.asarray(routes.latency_s, dtype=np.float64)
    if lnk.shape != (nnz,) or frc.shape != (nnz,) or lat.shape != (n,):
        raise ConfigError(f"routes.link/frac must have {nnz} entries and latency_s {n}, got "
                          f"{lnk.shape}, {frc.shape}, {lat.shape} (routes of {what})")
    bad = np.flatnonzero((lnk < 0) | (lnk >= num_links))
    if bad.size:
        raise ConfigError(f"routes.link must be link ids in 0..{num_links - 1}, got "
                          f"{lnk[bad[0]]} (routes.link[{bad[0]}] of {what})")
    bad = np.flatnonzero(~(frc > 0) | ~(frc <= 1))
    if bad.size:
        raise ConfigError(f"routes.frac must lie in (0, 1], got {frc[bad[0]]!r} "
                          f"(routes.frac[{bad[0]}] of {what})")
    bad = np.flatnonzero(~(lat >= 0) | ~np.isfinite(lat))
    if bad.size:
        raise ConfigError(f"routes.latency_s must be finite and >= 0, got {lat[bad[0]]!r} "
                          f"(routes.latency_s[{bad[0]}] of {what})")
    return lnk, frc, ptr, lat
