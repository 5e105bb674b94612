"""Checks of command-line input and output paths, run before any work starts.

A command that would run for minutes and then fail to write its result checks the place first;
values the user typed are parsed here into one `ConfigError` naming the flag, the value and what
was expected; data (job and tenant names) reaches the terminal as text, never as rich markup.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.experiments.loading import clip
from flowherd.experiments.runs import check_seed

__all__ = ["check_count", "check_out_dir", "check_out_file", "check_seed", "plain", "short_unknown"]


def plain(value: object) -> Any:
    """`value` as a rich ``Text``: printed as it is (``[/bold]`` in a job name stays ``[/bold]``)."""
    from rich.text import Text

    return Text(str(value))


def _writable_dir(d: Path, flag: str, what: str) -> None:
    try:
        fd, probe = tempfile.mkstemp(prefix=".flowherd-probe-", dir=d)
    except OSError as err:
        raise ConfigError(f"cannot write in {clip(str(d))} ({flag}): {err.strerror or err}; expected "
                          f"{what}") from None
    os.close(fd)
    os.unlink(probe)


def check_out_dir(path: Path, flag: str = "--out") -> None:
    """Make sure results can be written into directory `path` (created here if absent).

    Raises:
        ConfigError: `path` is a file, or cannot be created or written.
    """
    what = "a directory this process can write"
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{clip(str(path))} is a file, not a directory ({flag}); expected {what}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create directory {clip(str(path))} ({flag}): {err.strerror or err}; "
                          f"expected {what}") from None
    _writable_dir(path, flag, what)


def check_out_file(path: Path, flag: str = "--out", *, suffix: str | None = None) -> None:
    """Make sure file `path` can be written: not a directory, its directory writable (created).

    Raises:
        ConfigError: `path` is a directory, has another suffix than `suffix`, or cannot be written.
    """
    what = f"a {suffix + ' ' if suffix else ''}file path in a directory this process can write"
    if path.is_dir():
        raise ConfigError(f"{clip(str(path))} is a directory ({flag}); expected {what}")
    if suffix is not None and path.suffix != suffix:
        raise ConfigError(f"{clip(str(path))} does not end in {suffix} ({flag}); expected {what}")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{clip(str(parent))} is a file, not a directory ({flag}); expected {what}")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create directory {clip(str(parent))} ({flag}): "
                          f"{err.strerror or err}; expected {what}") from None
    _writable_dir(parent, flag, what)


def check_count(text: str | int, flag: str, *, what: str = "count", minimum: int = 1,
                maximum: int = 10**9) -> int:
    """An integer typed on the command line, in ``minimum..maximum``.

    >>> check_count("16", "--gpus")
    16
    """
    try:
        value = int(str(text).strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"malformed {what} {clip(text)} ({flag}): expected an integer in "
                          f"{minimum}..{maximum:,}") from None
    if not minimum <= value <= maximum:
        raise ConfigError(f"{what} must be in {minimum}..{maximum:,}, got {clip(text)} ({flag})")
    return value


def short_unknown(err: UnknownNameError, field: str, listing: str) -> ConfigError:
    """A one-line message for an unknown name of a long registry: the near miss and where the
    full list is (`listing`, e.g. ``flowherd fabric --list``), instead of every name."""
    close = difflib.get_close_matches(err.name, list(err.known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {err.kind} {clip(err.name)} ({field}){hint} (`{listing}` lists all "
                       f"{len(err.known)})")
