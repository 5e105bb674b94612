"""A full disk loses no result and leaves no half-written file (flowherd.atomic).

On a full file system (a small tmpfs filled to the last byte when this runs as root; elsewhere
every rename-into-place fails with ENOSPC, which is where a full disk shows up), `flowherd
simulate --out DIR --json` still prints its JSON, saves the run in a temporary directory and
says in one line which path could not be written and why; `flowherd report --out` leaves no
partial PNG.
"""

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from flowherd import atomic
from flowherd.cli import main

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
TINY = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0


@pytest.fixture
def full_dir(tmp_path, monkeypatch):
    """A directory on a full file system: a filled tmpfs as root, else ENOSPC on every file
    written under it."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode == 0
    if mounted:
        try:
            with open(mnt / "fill", "wb", buffering=0) as fh:  # every block of it
                while True:
                    fh.write(b"\0" * 4096)
        except OSError as err:
            if err.errno != errno.ENOSPC:
                subprocess.run(["umount", str(mnt)], check=True)
                raise
    else:
        sync = atomic._sync

        def full(path):
            if Path(path).is_relative_to(mnt):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            sync(path)

        monkeypatch.setattr(atomic, "_sync", full)
    try:
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=True)


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_simulate_on_a_full_disk_prints_the_json_and_keeps_the_run(tmp_path, full_dir, capsys):
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump(TINY))
    out = full_dir / "out"
    assert main(["simulate", str(scen), "--out", str(out), "--json"]) == 1  # 1: the input was fine
    cap = capsys.readouterr()
    result = json.loads(cap.out)
    assert result["jobs_total"] == 3
    line = _one_error_line(cap.err)
    assert f"cannot write '{out}/" in line and "No space left on device (--out)" in line, line
    saved = Path(line.rsplit("saved in ", 1)[1])
    assert json.loads((saved / "result.json").read_text()) == result
    assert (saved / "results.duckdb").is_file()
    assert not [p for p in out.iterdir() if p.name.startswith(".")] if out.exists() else True


def test_report_on_a_full_disk_leaves_no_partial_png(tmp_path, full_dir, capsys, monkeypatch):
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump(TINY))
    assert main(["simulate", str(scen), "--out", str(tmp_path / "run"), "--json"]) == 0
    capsys.readouterr()
    rep = full_dir / "rep"
    assert main(["report", str(tmp_path / "run"), "--out", str(rep)]) == 1
    cap = capsys.readouterr()
    line = _one_error_line(cap.err)
    assert f"cannot write '{rep}/" in line and ".png'" in line and "No space left on device" in line, line
    left = list(rep.iterdir()) if rep.exists() else []
    assert not left, left  # no PNG, whole or partial, and no temporary file


def test_atomic_write_keeps_the_old_file_when_the_new_one_fails(tmp_path, monkeypatch):
    path = tmp_path / "a.json"
    atomic.write_text(path, "old")

    def full(p):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic, "_sync", full)
    with pytest.raises(atomic.WriteError, match=r"cannot write '.*a\.json': No space left on device \(--x\)"):
        atomic.write_text(path, "new", field="--x")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.json"]
