"""Progress off a terminal (CI logs, pipes): one line when there is news, at most one a minute
between; and one unit of time in the terminal tables (seconds, as in the reports)."""

import io

from flowherd.cli.progress import Heartbeat, format_elapsed
from flowherd.cli.simulate_cmd import _fmt
from flowherd.units import format_seconds


def test_heartbeat_prints_at_most_one_line_a_minute_between_news():
    now = [0.0]
    out = io.StringIO()
    beat = Heartbeat("demo", every_s=60, stream=out, clock=lambda: now[0])
    printed = []
    for t in range(0, 300, 5):  # a tick every 5 s for 5 minutes
        now[0] = float(t)
        printed.append(beat.tick(f"t={t}"))
    assert sum(printed) == 4  # at 60, 120, 180, 240 s
    lines = out.getvalue().splitlines()
    assert lines[0] == "demo: t=60 (1 min 0 s elapsed)" and lines[-1].startswith("demo: t=240 ")
    now[0] = 250.0
    beat.line("run 3/5 done")  # news goes out at once and restarts the minute
    now[0] = 300.0
    assert not beat.tick("quiet")
    now[0] = 311.0
    assert beat.tick("still running")


def test_elapsed_and_table_times_read_in_one_unit():
    assert format_elapsed(59.4) == "59 s" and format_elapsed(61) == "1 min 1 s"
    assert format_elapsed(7322) == "2 h 2 min"
    # the terminal's JCTs in seconds, like the report's axes (not minutes)
    assert _fmt(94.21) == "94.2 s" and _fmt(224.3) == "224 s" and _fmt(1234.5) == format_seconds(1234.5)
    assert _fmt(0.0421) == "0.0421 s" and _fmt(None) == "-" and _fmt(3.8, "x") == "3.8"
