"""SIGINT and SIGTERM stop a long command within 5 s, keep what finished and say where
(flowherd.cli.interrupt): the demo and a sweep are interrupted part-way in a subprocess, their
finished runs must be in the store, one line must say so, and --resume must finish the rest."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from flowherd.errors import caused_by_interrupt

ROOT = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((ROOT / "scenarios" / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0
CMD = [sys.executable, "-c", "import sys; from flowherd.cli import main; sys.exit(main())"]


def _stored(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def _interrupt(argv, cwd: Path, sig: int, after: str,
               deadline_s: float = 600) -> tuple[int, str, float, list[int]]:
    """Run flowherd, send `sig` once stdout or stderr matches `after`; exit code, stderr, the
    seconds from the signal to the exit, and the process's children when the signal went."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out_path, err_path = cwd / "out.txt", cwd / "err.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([*CMD, *argv], cwd=cwd, stdout=out, stderr=err, env=env)
        t0 = time.monotonic()
        while proc.poll() is None and time.monotonic() - t0 < deadline_s:
            if re.search(after, out_path.read_text() + err_path.read_text()):
                break
            time.sleep(0.1)
        assert proc.poll() is None, err_path.read_text()[-2000:]
        children = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                   text=True).stdout.split()]
        sent = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=60)
        finally:
            proc.kill()
        stop_s = time.monotonic() - sent
    return code, err_path.read_text(), stop_s, children


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return ""


def test_an_interrupt_inside_compiled_code_is_recognised():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise SystemError("returned a result with an exception set") from inner
    except SystemError as err:
        assert caused_by_interrupt(err)
    assert not caused_by_interrupt(ValueError("x"))


@pytest.mark.slow
def test_sigterm_stops_an_inline_sweep_keeps_its_runs_and_resume_finishes_it(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    axes = {"workload.jobs[0].iterations": list(range(1, 9))}
    sweep = {"name": "slow", "base": "s.yaml", "seeds": 1, "axes": axes}
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(sweep))
    code, err, stop_s, _ = _interrupt(["sweep", "w.yaml", "--inline", "--out", "o"], tmp_path,
                                      signal.SIGTERM, r"\[2/8\]")
    assert code == 128 + signal.SIGTERM and stop_s < 5, (code, stop_s, err[-1500:])
    lines = [ln for ln in err.splitlines() if "interrupted" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err[-1500:]
    kept = int(re.search(r"interrupted: (\d+) of 8 runs are stored in o/results\.duckdb", lines[0]).group(1))
    assert kept >= 2 and _stored(tmp_path / "o" / "results.duckdb") == kept
    assert "--resume runs the rest" in lines[0]
    res = subprocess.run([*CMD, "sweep", "w.yaml", "--inline", "--out", "o", "--resume"], cwd=tmp_path,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                         timeout=600)
    assert res.returncode == 0 and f"{kept} already stored" in res.stdout, res.stderr[-1500:]
    assert _stored(tmp_path / "o" / "results.duckdb") == 8


@pytest.mark.slow
def test_sigint_into_the_demo_stops_within_5_s_and_keeps_the_finished_runs(tmp_path):
    # the first finished simulation prints "[1/10] ..."; on a quiet machine it ends in about 30 s
    code, err, stop_s, workers = _interrupt(["demo", "--out", "demo", "--seeds", "2"], tmp_path,
                                            signal.SIGINT, r"\[1/10\]")
    assert code == 128 + signal.SIGINT and stop_s < 5, (code, stop_s, err[-1500:])
    lines = [ln for ln in err.splitlines() if "interrupted" in ln]
    assert len(lines) == 1 and "Traceback" not in err, err[-1500:]
    m = re.search(r"demo interrupted: (\d+) of 10 simulations finished and are stored in "
                  r"demo/results\.duckdb", lines[0])
    assert m is not None and int(m.group(1)) >= 1, lines[0]
    assert _stored(tmp_path / "demo" / "results.duckdb") == int(m.group(1))
    assert "--resume runs the rest" in lines[0]
    # no worker of its pool is left running (a zombie no one reaps in a container is not running)
    assert workers
    time.sleep(2)
    assert not [p for p in workers if _running(p)], [(p, _cmdline(p)) for p in workers if _running(p)]


@pytest.mark.slow
def test_ray_workers_hold_their_runs_to_max_memory(tmp_path):
    """--max-memory reaches the Ray workers: a limit the points fit in but no run does makes every
    run fail in its worker with the figure, the limit and the field."""
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(TINY))
    sweep = {"name": "m", "base": "s.yaml", "seeds": 1, "axes": {"workload.jobs[0].iterations": [1, 2]}}
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(sweep))
    res = subprocess.run([*CMD, "sweep", "w.yaml", "--out", "o", "--max-memory", "100KiB"], cwd=tmp_path,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                         timeout=600)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-1500:]
    con = duckdb.connect(str(tmp_path / "o" / "results.duckdb"), read_only=True)
    errors = [r[0] for r in con.execute("SELECT error FROM runs").fetchall()]
    con.close()
    assert len(errors) == 2, errors
    # refused in the worker (the fabric alone is 260 KiB), naming the limit it was given
    assert all(e.startswith("ConfigError") and "--max-memory is 100 KiB" in e for e in errors), errors
