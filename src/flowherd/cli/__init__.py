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
    from flowherd.cli.checks import error_line, usage_error_line

    _register()
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        # not standalone: usage errors come here as exceptions and are printed as one line
        rv = app(args=args, standalone_mode=False)
    except FlowherdError as err:
        print(error_line(err), file=sys.stderr)
        return 2
    except Exception as err:  # click's usage errors (a bad flag value, a missing argument)
        line = usage_error_line(err, args)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return rv if isinstance(rv, int) else 0
