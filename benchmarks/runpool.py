"""Benchmark runs in child processes: one process per run, at most ``workers`` at a time.

`run_all` runs ``function(task)`` for every task, each in a fresh Python process
(``python runpool.py --child ...``), and yields an `Outcome` per run as it ends: its result, or
why there is none. A run whose process dies (killed by a signal: the kernel's OOM killer sends
SIGKILL when memory runs out; or an exception in the run) is one `Outcome` with ``failure`` set,
one line, and the other runs go on: a benchmark keeps every run that finished. (A
`concurrent.futures.ProcessPoolExecutor` cannot: a worker killed by a signal breaks the whole
pool, every run not yet returned fails with ``BrokenProcessPool``, and which run killed it is not
said.)

Each `Outcome` carries its process's peak resident memory (``VmHWM`` since its exec, which the
child reports with its result; for a child that dies, the larger of `os.wait4`'s ``ru_maxrss``,
which keeps the parent's size at the fork, and the most seen at a poll) and its CPU seconds
(`os.wait4`'s rusage: imports and the run), so that a benchmark can say what each run cost.
A fresh process per run also gives back each run's memory to the system when it ends (a reused
worker keeps its heap's high-water mark).
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "describe_death", "run_all"]

#: Seconds between two polls of the running children.
POLL_S = 0.2


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One run's end.

    Attributes:
        task: The task it ran.
        result: What the function returned (None when the run failed).
        failure: None, or one line saying what ended the run without a result.
        peak_rss_bytes: Peak resident memory of its process, bytes (module docstring).
        cpu_s: CPU seconds of its process (user + system).
    """

    task: Any
    result: Any = None
    failure: str | None = None
    peak_rss_bytes: int = 0
    cpu_s: float = 0.0


def _oom_kills() -> int | None:
    """The ``oom_kill`` count of this process's cgroup (v2 ``memory.events``: processes of the
    cgroup killed by any OOM killer), None where it cannot be read."""
    try:
        rel = Path("/proc/self/cgroup").read_text().strip().split("\n")[0].split("::", 1)[1]
        for line in (Path("/sys/fs/cgroup") / rel.lstrip("/") / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, IndexError, ValueError):
        return None
    return None


def describe_death(status: int, peak_rss_bytes: int, oom_before: int | None, oom_after: int | None) -> str:
    """What a ``os.wait4`` status of a process that left no result says, in words."""
    gb = f"{peak_rss_bytes / 1e9:.1f} GB peak resident"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if oom_before is not None and oom_after is not None and oom_after > oom_before:
            return f"killed by {name} by the kernel's OOM killer (memory.events oom_kill rose) at {gb}"
        if sig == signal.SIGKILL:
            return (f"killed by SIGKILL at {gb} (the kernel's OOM killer ends a process this way when "
                    "memory runs out)")
        return f"killed by {name} at {gb}"
    return f"exited with code {os.WEXITSTATUS(status)} without a result at {gb}"


@dataclass(slots=True)
class _Child:
    task: Any
    proc: subprocess.Popen
    out: Path
    oom_before: int | None
    stopped_at: int = 0  # resident bytes at which the child was stopped over ``max_rss_bytes``
    sampled_peak: int = 0  # the most resident bytes seen at a poll


def _rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` now, bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _start(ref: tuple[str, str, str], task: Any, tmp: Path, i: int) -> _Child:
    inp, out = tmp / f"{i}.task", tmp / f"{i}.out"
    inp.write_bytes(pickle.dumps(task))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", *ref, str(inp), str(out)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    return _Child(task=task, proc=proc, out=out, oom_before=_oom_kills())


def _finish(c: _Child, status: int, ru: Any, tmp: Path, i: int, max_rss_bytes: float | None) -> Outcome:
    c.proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    peak, cpu = max(int(ru.ru_maxrss) * 1024, c.sampled_peak), float(ru.ru_utime + ru.ru_stime)
    got = None
    if c.out.is_file():
        try:
            got = pickle.loads(c.out.read_bytes())
        except (pickle.UnpicklingError, EOFError):
            got = None
    if got is not None and got[-1] is not None:  # the child's own peak since its exec
        peak = int(got[-1])
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and got is not None and got[0] == "ok":
        return Outcome(task=c.task, result=got[1], peak_rss_bytes=peak, cpu_s=cpu)
    if c.stopped_at:
        what = (f"stopped at {c.stopped_at / 1e9:.1f} GB resident, over the limit of "
                f"{max_rss_bytes / 1e9:.1f} GB (--max-rss)")
        return Outcome(task=c.task, failure=what, peak_rss_bytes=peak, cpu_s=cpu)
    if got is not None and got[0] == "error":
        msg, tb = got[1], got[2]
        if tb:
            path = tmp.parent / f"flowherd-run-{os.getpid()}-{i}.traceback.txt"
            path.write_text(tb)
            msg += f" (its traceback: {path})"
        return Outcome(task=c.task, failure=msg, peak_rss_bytes=peak, cpu_s=cpu)
    return Outcome(task=c.task, failure=describe_death(status, peak, c.oom_before, _oom_kills()),
                   peak_rss_bytes=peak, cpu_s=cpu)


def run_all(function: Callable[[Any], Any], tasks: list[Any], workers: int,
            max_rss_bytes: float | None = None) -> Iterator[Outcome]:
    """``function(task)`` for every task, each in its own process, at most ``workers`` at once;
    an `Outcome` per task as it ends (in the order they end).

    ``function`` must be a module-level function: the child imports its file's module by name,
    the file's directory first on its ``sys.path``.
    A child whose resident memory exceeds ``max_rss_bytes`` (sampled every `POLL_S`) is killed
    and its run fails with the figure: one run that grows stops before the machine's OOM killer
    picks a process (which may be another user's). Interrupted (Ctrl-C), the running children
    are killed before the interrupt goes on.
    """
    src = Path(function.__code__.co_filename).resolve()
    ref = (str(src.parent), src.stem, function.__name__)
    todo = list(enumerate(tasks))[::-1]
    running: dict[int, tuple[int, _Child]] = {}
    with tempfile.TemporaryDirectory(prefix="flowherd-runs-") as d:
        tmp = Path(d)
        try:
            while todo or running:
                while todo and len(running) < max(workers, 1):
                    i, t = todo.pop()
                    c = _start(ref, t, tmp, i)
                    running[c.proc.pid] = (i, c)
                ended = []
                for pid, (i, c) in running.items():
                    got, status, ru = os.wait4(pid, os.WNOHANG)
                    if got == pid:
                        ended.append(pid)
                        yield _finish(c, status, ru, tmp, i, max_rss_bytes)
                    elif not c.stopped_at:
                        rss = _rss_bytes(pid)
                        c.sampled_peak = max(c.sampled_peak, rss)
                        if max_rss_bytes is not None and rss > max_rss_bytes:  # before the machine runs out
                            c.stopped_at = rss
                            c.proc.kill()
                for pid in ended:
                    del running[pid]
                if not ended:
                    time.sleep(POLL_S)
        finally:
            for _i, c in running.values():
                if c.proc.returncode is None:
                    c.proc.kill()
                    c.proc.wait()


def _peak_rss_bytes() -> int | None:
    """This process's peak resident memory since its exec, bytes (``VmHWM``; None where not read).
    `os.wait4`'s ``ru_maxrss`` keeps the parent's size at the fork across the exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        return None
    return None


def _child(argv: list[str]) -> int:
    """``--child DIR MODULE FUNCTION TASK_FILE OUT_FILE``: run one task, write its result."""
    where, module, name, inp, out = argv
    sys.path.insert(0, where)
    try:
        fn = getattr(importlib.import_module(module), name)
        result: tuple = ("ok", fn(pickle.loads(Path(inp).read_bytes())))
        code = 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # every failure of the run becomes one line for the parent
        from flowherd.errors import FlowherdError

        text = " ".join(str(e).split()) or type(e).__name__
        if isinstance(e, FlowherdError):  # one clear line already
            result = ("error", text, "")
        else:
            result = ("error", f"{type(e).__name__}: {text}", traceback.format_exc())
        code = 1
    tmp = Path(out + ".part")
    tmp.write_bytes(pickle.dumps((*result, _peak_rss_bytes())))
    tmp.replace(out)
    return code


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child":
    sys.exit(_child(sys.argv[2:]))
