"""Progress for long commands: a rich bar on a terminal, one plain line a minute elsewhere.

Off a terminal (CI logs, pipes, `make demo > log`) a bar draws nothing, so a long run would look
dead; `Heartbeat` prints one line when asked and at most one a minute in between.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

#: Seconds between two plain progress lines off a terminal.
LINE_EVERY_S = 60.0


class Heartbeat:
    """Plain progress lines: `tick` prints when `every_s` passed since the last line.

    Args:
        label: Prefix of every line (``"demo"``, ``"train"``).
        every_s: Least seconds between two lines printed by `tick`.
        stream: Where the lines go (default stderr).
        clock: Wall clock, seconds (a test passes a fake one).

    >>> import io
    >>> t = [0.0]
    >>> out = io.StringIO()
    >>> hb = Heartbeat("demo", every_s=60, stream=out, clock=lambda: t[0])
    >>> hb.tick("1/9 runs")          # less than a minute since the start: silent
    False
    >>> t[0] = 61.0
    >>> hb.tick("2/9 runs")
    True
    >>> out.getvalue()
    'demo: 2/9 runs (1 min 1 s elapsed)\\n'
    """

    def __init__(self, label: str, *, every_s: float = LINE_EVERY_S, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.every_s = every_s
        self.stream = stream
        self.clock = clock
        self.start_s = clock()
        self.last_s = self.start_s

    def elapsed_s(self) -> float:
        return self.clock() - self.start_s

    def line(self, what: str) -> None:
        """Print one line now."""
        self.last_s = self.clock()
        out = self.stream if self.stream is not None else sys.stderr
        from flowherd.sanitize import shown  # what may hold names from data

        print(shown(f"{self.label}: {what} ({format_elapsed(self.last_s - self.start_s)} elapsed)"),
              file=out, flush=True)

    def tick(self, what: str) -> bool:
        """Print `what` if `every_s` passed since the last line; True if it printed."""
        if self.clock() - self.last_s < self.every_s:
            return False
        self.line(what)
        return True


def format_elapsed(seconds: float) -> str:
    """Wall time for people: ``"45 s"``, ``"3 min 5 s"``, ``"1 h 2 min"``.

    >>> format_elapsed(45.2), format_elapsed(185), format_elapsed(3725)
    ('45 s', '3 min 5 s', '1 h 2 min')
    """
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"


def is_terminal(console: Any) -> bool:
    """Whether rich draws live bars on `console` (not in a pipe, a file or CI)."""
    return bool(getattr(console, "is_terminal", False))
