"""The `flowherd` command: thin wrappers over the packages.

Every `FlowherdError` reaches the user as one line on stderr (exit code 2), never a traceback.
"""

from __future__ import annotations

import sys

import typer

from flowherd.errors import FlowherdError

app = typer.Typer(
    name="flowherd",
    help="Plan, control and simulate the collective traffic of LLM jobs on a shared fabric.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # Each command lives in its own module; importing it adds it to `app`.
    from flowherd.cli import commands  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    _register()
    try:
        app(args=argv, standalone_mode=False)
    except FlowherdError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except typer.Exit as exc:  # raised by --help and friends
        return exc.exit_code
    except Exception as err:  # click usage errors print themselves
        import click

        if isinstance(err, click.ClickException):
            err.show()
            return err.exit_code
        if isinstance(err, click.exceptions.Abort):
            print("aborted", file=sys.stderr)
            return 1
        raise
    return 0
