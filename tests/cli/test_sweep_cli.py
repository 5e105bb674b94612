"""`flowherd sweep` / `flowherd report`: the 3 x 3 x 3-seed sweep, kill -9 and --resume, bad input."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.cli import main
from flowherd.experiments.store import ResultStore

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
CLI = "import sys; from flowherd.cli import main; sys.exit(main(sys.argv[1:]))"


def _sweep_file(tmp_path: Path, **over) -> Path:
    tiny = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
    tiny["simulation"]["horizon"] = "5s"  # the jobs end by then; less background traffic to simulate
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    data = yaml.safe_load((SCENARIOS / "sweep_tiny.yaml").read_text())
    data.update(over)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _rows(store_dir: Path) -> dict[str, list]:
    with ResultStore(store_dir, read_only=True) as st:
        return {t: st.table_rows(t) for t in ("runs", "jobs", "links", "tenants")}


def _finished_at(store_dir: Path) -> dict[str, object]:
    with ResultStore(store_dir, read_only=True) as st:
        return {r["run_id"]: r["finished_at"] for r in st.query("SELECT run_id, finished_at FROM runs")}


def _run_cli(args: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True,
                          timeout=timeout_s, start_new_session=True)


def _group_gone(pgid: int, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_sweep_killed_with_sigkill_and_resumed_equals_uninterrupted_run(tmp_path):
    pytest.importorskip("ray", reason="the sweep extra (ray) is not installed")
    sweep = _sweep_file(tmp_path, batch=1)
    total = 27
    # the uninterrupted reference, run in-process (the same per-run code without Ray, so that the
    # test also shows Ray's results equal the plain ones)
    ref = _run_cli(["sweep", str(sweep), "--out", str(tmp_path / "ref"), "--inline"])
    assert ref.returncode == 0, ref.stderr
    assert f"{total} ok, 0 failed, 0 already stored, of {total} runs" in ref.stdout
    ref_rows = _rows(tmp_path / "ref")
    assert len(ref_rows["runs"]) == total and len(ref_rows["jobs"]) == 3 * total

    # the same sweep, killed with SIGKILL once about half of the runs are stored
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", CLI, "sweep", str(sweep), "--out", str(out),
                             "--num-cpus", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        seen = 0
        for line in proc.stderr:
            m = re.match(r"\[(\d+)/(\d+)\] ", line)
            if m:
                seen = int(m.group(1))
                if seen >= total // 2:
                    break
        assert seen >= total // 2, "the sweep ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
        proc.stdout.close()
        # Ray's own reaper ends the local instance when its driver dies; make sure nothing stays
        if not _group_gone(proc.pid, 20):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    before = _finished_at(out)
    assert total // 2 <= len(before) < total

    res = _run_cli(["sweep", str(sweep), "--out", str(out), "--num-cpus", "2", "--resume"])
    assert res.returncode == 0, res.stderr
    # nothing finished is repeated: exactly the missing runs ran, the stored ones kept their rows
    assert f"{total - len(before)} ok, 0 failed, {len(before)} already stored" in res.stdout
    after = _finished_at(out)
    assert {k: after[k] for k in before} == before
    assert _rows(out) == ref_rows


def test_sweep_and_report_commands_write_the_store_and_the_report(tmp_path):
    pytest.importorskip("matplotlib", reason="the report extra is not installed")
    sweep = _sweep_file(tmp_path, axes={"workload.background.load": [0.0, 0.3]}, seeds=1)
    out = tmp_path / "res"
    assert main(["sweep", str(sweep), "--out", str(out), "--inline"]) == 0
    with ResultStore(out, read_only=True) as st:
        assert sorted(r["status"] for r in st.runs()) == ["ok", "ok"]
    # without --resume a second execution into the same store is refused (it would mix runs)
    assert main(["sweep", str(sweep), "--out", str(out), "--inline"]) == 2
    assert main(["sweep", str(sweep), "--out", str(out), "--inline", "--resume"]) == 0
    assert main(["report", str(out / "results.duckdb"), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.html").stat().st_size > 1_000_000  # plotly inlined
    assert (tmp_path / "rep" / "jct_cdf.png").is_file()


def test_bad_sweep_input_is_one_line_naming_the_field(tmp_path):
    sweep = _sweep_file(tmp_path, axes={"placement.methd": ["packed"]})
    res = _run_cli(["sweep", str(sweep), "--out", str(tmp_path / "x"), "--inline"], timeout_s=60)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "placement.methd" in lines[0] and "'method'" in lines[0]
    res = _run_cli(["report", str(tmp_path / "nothing")], timeout_s=60)
    assert res.returncode == 2 and "no result store" in res.stderr and "Traceback" not in res.stderr
