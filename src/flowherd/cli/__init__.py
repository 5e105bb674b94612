"""The `flowherd` command: thin wrappers over the packages.

Every `FlowherdError` reaches the user as one line on stderr (exit code 2; 1 for an output that
could not be written, 128 + the signal for an interrupted command), never a traceback; so does a
missing optional dependency, with the extra that installs it, and a Ctrl-C. Commands are registered
lazily (`flowherd.cli.commands.COMMANDS`): `flowherd --help` and `flowherd --version` import no
command module, and `flowherd COMMAND` imports only COMMAND's.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from flowherd.cli.commands import COMMANDS, missing_extra_hint
from flowherd.cli.params import light_on_parse, use_light_params
from flowherd.errors import FlowherdError, Interrupted, WriteError


def load_command(name: str) -> None:
    """Import the module of command `name` (it registers itself on `app`); unknown names: no-op."""
    entry = COMMANDS.get(name)
    if entry is not None:
        importlib.import_module(entry.module)


def load_all_commands() -> None:
    """Register every command (for callers of `app` that bypass `main`)."""
    for name in COMMANDS:
        load_command(name)


class _Forward(TyperCommand):
    """Stands for a command whose module is not imported: listed by `--help` with its summary;
    invoked (by a caller of `app` that did not go through `main`), it runs it through `main`.

    Typer's own command class, not click's: typer >= 0.2x vendors click, and importing the click
    package beside it would cost 0.05 s of every command's start-up."""

    def __init__(self, name: str) -> None:
        super().__init__(name, help=COMMANDS[name].summary, short_help=COMMANDS[name].summary,
                         add_help_option=False, rich_markup_mode=None,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})

    def invoke(self, ctx: typer.Context) -> None:
        code = main([self.name or "", *ctx.args])
        if code:
            raise typer.Exit(code)


class LazyGroup(TyperGroup):
    """The root group: every command of `COMMANDS` in its order, imported on use only."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        use_light_params(self, ctx)  # the root's own flags (--version, --help)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in COMMANDS:
            cmd = _Forward(cmd_name)
        return light_on_parse(cmd)


def _version(value: bool) -> None:
    if value:
        from flowherd import __version__

        typer.echo(f"flowherd {__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="flowherd",
    cls=LazyGroup,
    help="Plan, control and simulate the collective traffic of LLM jobs on a shared fabric.\n\n"
         "Start with `flowherd demo` (the whole pipeline, a few minutes) or `flowherd simulate default`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: types as TEXT / INTEGER, none on flags, and no rich import for --help
    rich_markup_mode=None,
)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print the version and exit.")) -> None:
    """Plan, control and simulate the collective traffic of LLM jobs on a shared fabric."""


def _command_of(argv: list[str]) -> str | None:
    # the first word that is not an option: the root group takes only flags (--help, --version)
    return next((a for a in argv if not a.startswith("-")), None)


_LIMIT_ENV = ("FLOWHERD_MAX_MEMORY", "FLOWHERD_MAX_EVENTS")  # flowherd.experiments.budget's, unimported

#: The cyclic collector's first threshold while a command runs (CPython's default is 700). A
#: command's start-up makes long-lived objects only (modules, classes, functions): at 700 the
#: collector ran 44 times over them in a 64-GPU `collective` (0.03 of its 0.7 CPU-s),
#: at this threshold 4 times; the cycles a long run leaves are still collected.
GC_THRESHOLD = 10_000


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code.

    Called as the process's entry (``argv`` None) for a command that only prints
    (`CommandEntry.writes_nothing`), it freezes the objects left (`gc.freeze`) once the command
    is done: the interpreter's exit still runs every exit handler and frees every module, but its
    final collections do not walk them (0.06 of a 64-GPU `collective`'s 0.7 CPU-s).
    """
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_THRESHOLD), *old[1:])
    # --max-memory / --max-events reach a command's worker processes through the environment
    # (`flowherd.experiments.budget`): restored after it, for a caller that runs several commands
    env = {k: os.environ.get(k) for k in _LIMIT_ENV}
    try:
        code = _main(argv)
    finally:
        gc.set_threshold(*old)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if argv is None:
        entry = COMMANDS.get(_command_of(sys.argv[1:]) or "")
        if entry is not None and entry.writes_nothing:
            gc.freeze()
    return code


def _main(argv: list[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(args)
    try:
        if command is not None:
            load_command(command)
        # not standalone: usage errors come here as exceptions and are printed as one line
        if command is None:  # --help, --version: nothing to interrupt, nothing more to import
            rv = app(args=args, standalone_mode=False, prog_name="flowherd")
        else:
            from flowherd.cli.interrupt import handle_signals

            with handle_signals():  # SIGTERM as SIGINT: a KeyboardInterrupt, caught below
                rv = app(args=args, standalone_mode=False, prog_name="flowherd")
    except FlowherdError as err:
        from flowherd.cli.checks import error_line  # on error only: --help stays light

        if isinstance(err, Interrupted):  # not an error: what was kept, and where
            print(error_line(err).removeprefix("error: "), file=sys.stderr)
            return err.exit_code
        print(error_line(err), file=sys.stderr)
        return 1 if isinstance(err, WriteError) else 2
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM where no command said more: one line
        from flowherd.cli.interrupt import last_signal

        print("flowherd: interrupted", file=sys.stderr)
        return 128 + last_signal()
    except ModuleNotFoundError as err:
        hint = missing_extra_hint(err.name or "", command)
        if hint is None:
            raise
        print(f"error: {hint}", file=sys.stderr)
        return 2
    except Exception as err:  # click's usage errors (a bad flag value, a missing argument)
        from flowherd.errors import caused_by_interrupt

        if caused_by_interrupt(err):  # click's Abort, or compiled code's SystemError, for a Ctrl-C
            from flowherd.cli.interrupt import last_signal

            print("flowherd: interrupted", file=sys.stderr)
            return 128 + last_signal()
        from flowherd.cli.checks import usage_error_line

        line = usage_error_line(err, args)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except SystemExit as exc:
        code: Any = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return rv if isinstance(rv, int) else 0
