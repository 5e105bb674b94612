"""Checks of command-line input and output paths, run before any work starts.

A command that would run for minutes and then fail to write its result checks the place first;
values the user typed are parsed here into one `ConfigError` naming the flag, the value and what
was expected; data (job and tenant names) reaches the terminal as text, never as rich markup.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError, UnknownNameError

__all__ = ["check_count", "check_out_dir", "check_out_file", "check_seed", "error_line", "load_fabric_arg",
           "plain", "short_unknown", "usage_error_line"]

MAX_MESSAGE_CHARS = 600


def check_seed(seed: object, field: str = "seed") -> int:
    """`flowherd.experiments.runs.check_seed` (imported on use: hashlib, json and copy are not
    a small collective's start-up)."""
    from flowherd.experiments.runs import check_seed as _check_seed

    return _check_seed(seed, field)


# flowherd.experiments.loading imports yaml (0.03 s of start-up): only when a message needs it
def clip(value: object) -> str:
    """`flowherd.experiments.loading.clip`: a short repr of `value` for a message."""
    from flowherd.experiments.loading import clip as _clip

    return _clip(value)


def short_unknown(err: UnknownNameError, field: str, listing: str) -> ConfigError:
    """`flowherd.experiments.loading.short_unknown`: one line for an unknown name of a long registry."""
    from flowherd.experiments.loading import short_unknown as _short_unknown

    return _short_unknown(err, field, listing)


def error_line(err: BaseException | str) -> str:
    """``error: <message>`` on one line, at most about `MAX_MESSAGE_CHARS` characters, every
    control and bidi character shown escaped (`flowherd.sanitize.shown`)."""
    from flowherd.sanitize import shown

    text = shown(" ".join(str(err).split()))
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... ({len(text) - MAX_MESSAGE_CHARS:,} more characters)"
    return f"error: {text}"


def _flag_value(param: Any, args: list[str]) -> str | None:
    for opt in getattr(param, "opts", ()):
        for i, a in enumerate(args):
            if a == opt and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(opt + "="):
                return a[len(opt) + 1:]
    return None


def usage_error_line(err: BaseException, args: list[str]) -> str | None:
    """One line for a click usage error (None for any other exception): the flag, the value typed
    and what was expected, and where the help is; the help itself when no arguments were given."""
    import typer

    # typer >= 0.2x vendors click: its usage errors derive from typer.TyperException (older typer:
    # from click.ClickException); both have format_message
    usage = [typer.TyperException] if hasattr(typer, "TyperException") else []
    try:
        import click

        usage.append(click.ClickException)
    except ImportError:  # pragma: no cover - typer without click
        pass
    if not isinstance(err, tuple(usage)) or not hasattr(err, "format_message"):
        return None
    if type(err).__name__ == "NoArgsIsHelpError":  # `flowherd` alone: the help, as click prints it
        return err.format_message()
    ctx = getattr(err, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    param = getattr(err, "param", None)
    if type(err).__name__ == "MissingParameter" and param is not None:
        name = (getattr(param, "opts", None) or [param.name])[0]
        kind = "option" if str(name).startswith("-") else "argument"
        return error_line(f"missing {kind} {str(name).upper() if kind == 'argument' else name}{where}")
    if isinstance(err, typer.BadParameter) and param is not None:
        hint = "/".join(getattr(param, "opts", ())) or param.name
        value = _flag_value(param, args)
        got = f" {clip(value)}" if value is not None else ""
        message = err.message.removeprefix("Input should be ")
        return error_line(f"invalid value{got} for {hint}: expected {message}{where}")
    return error_line(f"{err.format_message()}{where}")


def plain(value: object) -> Any:
    """`value` as a rich ``Text``: printed as it is (``[/bold]`` in a job name stays ``[/bold]``),
    control and bidi characters shown escaped (`flowherd.sanitize.shown`: an ANSI or OSC
    sequence in a job name is shown, not run by the terminal)."""
    from rich.text import Text

    from flowherd.sanitize import shown

    return Text(shown(value))


def _writable_dir(d: Path, flag: str, what: str) -> None:
    import tempfile  # here only: random and its seeding are no command's start-up

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


def load_fabric_arg(text: str, flag: str = "fabric") -> Any:
    """A fabric from a preset name or a YAML file given on the command line (`load_fabric`), the
    file read strictly (`flowherd.experiments.loading`), its size checked before it is built, and
    an unknown preset told in one short line.

    Raises:
        ConfigError: A bad file, a fabric too large for this machine, an unknown preset.
    """
    path = Path(text)
    try:
        if path.suffix.lower() in (".yaml", ".yml") or "/" in text or path.exists():
            from flowherd.experiments.loading import check_fabric_size, read_yaml_file
            from flowherd.fabric.spec import fabric_from_mapping

            data = read_yaml_file(path, what="fabric")
            if set(data) == {"fabric"}:
                data = data["fabric"]
            check_fabric_size(data)
            return fabric_from_mapping(data, field="fabric")
        # a preset name: what `load_fabric` does with one (build, check), without the YAML
        # schema's pydantic (a tenth of a second of import)
        from flowherd.fabric.presets import PRESETS

        fabric = PRESETS[text]()
        try:
            fabric.check_connected()
        except ConfigError as err:
            raise ConfigError(f"{err} (fabric)") from None
        return fabric
    except UnknownNameError as err:
        if err.kind == "fabric preset":
            raise short_unknown(err, flag, "flowherd fabric --list") from None
        raise
