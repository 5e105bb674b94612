"""`flowherd sweep` when runs fail: a killed Ray worker's runs are stored as failed, the sweep exits 1,
--resume says how many failed runs it skips and --retry-failed runs them again."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from proc_tree import process_tree

pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.cli import main
from flowherd.experiments.store import ResultStore

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
CLI = "import sys; from flowherd.cli import main; sys.exit(main(sys.argv[1:]))"


def _sweep_file(tmp_path: Path, **over) -> Path:
    tiny = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
    tiny["simulation"]["horizon"] = "5s"
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    data = {"name": "fail", "base": "tiny.yaml", "axes": {"workload.background.load": [0.0, 0.1, 0.2]},
            "seeds": 2, **over}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _busy_worker(root: int) -> int | None:
    """A Ray worker of the sweep that is executing a batch (Ray titles it after the task)."""
    for pid in process_tree(root) - {root}:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(b"ray::_execute_batch"):
            return pid
    return None


def _failed(store_dir: Path) -> list[dict]:
    with ResultStore(store_dir, read_only=True) as st:
        return st.runs(status="failed")


@pytest.mark.slow
def test_a_killed_ray_worker_stores_its_runs_as_failed_and_the_sweep_exits_1(tmp_path):
    pytest.importorskip("ray", reason="the sweep extra (ray) is not installed")
    sweep = _sweep_file(tmp_path, batch=1)
    out = tmp_path / "res"
    argv = [sys.executable, "-c", CLI, "sweep", str(sweep), "--out", str(out), "--num-cpus", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    killed = None
    try:
        end = time.monotonic() + 240
        while killed is None and proc.poll() is None and time.monotonic() < end:
            pid = _busy_worker(proc.pid)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed = pid
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert killed is not None, "no busy worker was found to kill"
    assert proc.returncode == 1, stderr
    assert "5 ok, 1 failed, 0 already stored, of 6 runs" in stdout, stdout + stderr
    assert "1 of 6 runs failed" in stderr and "--retry-failed" in stderr
    (row,) = _failed(out)
    assert row["error"].startswith("Ray task failed") and row["jobs_total"] is None

    # resume: the failed run is skipped, and said so before anything runs; the exit stays 1
    res = subprocess.run([sys.executable, "-c", CLI, "sweep", str(sweep), "--out", str(out), "--resume",
                          "--inline"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 1
    assert "--resume skips 1 run(s) stored as failed; pass --retry-failed" in res.stderr
    assert "0 ok, 0 failed, 6 already stored" in res.stdout
    # and --retry-failed runs it again: now every run is ok
    res = subprocess.run([sys.executable, "-c", CLI, "sweep", str(sweep), "--out", str(out), "--resume",
                          "--retry-failed", "--inline"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "1 ok, 0 failed, 5 already stored" in res.stdout
    assert _failed(out) == []


def test_a_sweep_with_failing_runs_exits_1_in_process(tmp_path, capsys):
    sweep = _sweep_file(tmp_path, axes={"placement.method": ["no-such-placer", "first-fit"]}, seeds=1)
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "r"), "--inline"]) == 1
    cap = capsys.readouterr()
    assert "1 ok, 1 failed" in cap.out and "1 of 2 runs failed" in cap.err
    (row,) = _failed(tmp_path / "r")
    assert "no-such-placer" in row["error"]


def test_sweep_name_outside_runs_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("../escape", "/abs/path", "a/b", ".hidden", "-rf"):
        sweep = _sweep_file(tmp_path, name=name)
        assert main(["sweep", str(sweep), "--inline"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "(name)" in err and repr(name) in err
    assert not (tmp_path / "runs").exists() and not (tmp_path.parent / "escape").exists()
    sweep = _sweep_file(tmp_path, name="ok-name_1.0", axes={"workload.background.load": [0.0]}, seeds=1)
    assert main(["sweep", str(sweep), "--inline"]) == 0
    assert (tmp_path / "runs" / "ok-name_1.0" / "results.duckdb").is_file()
