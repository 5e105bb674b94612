"""The benchmarks' result files and the README generated from them (benchmarks/record.py)."""

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import record  # noqa: E402
import summarize  # noqa: E402


def test_saved_record_round_trips_into_the_summary(tmp_path):
    path = record.save("demo_bench", {"mean JCT": record.figure(1.5, "s", ci95=0.25, target="<= 2 s",
                                                                 met=True)},
                       tables=[record.table("runs", ["method", "JCT (s)"], [["a", 1.5]])],
                       argv=["benchmarks/demo_bench.py", "--seeds", "5"], directory=tmp_path)
    data = json.loads(path.read_text())
    assert data["benchmark"] == "demo_bench"
    assert data["command"].endswith("demo_bench.py --seeds 5")
    assert data["figures"]["mean JCT"] == {"value": 1.5, "unit": "s", "ci95": 0.25,
                                          "target": "<= 2 s", "met": True}
    (tmp_path / "rows_for_reuse.json").write_text("[1, 2]")
    text = summarize.render(tmp_path)
    assert "## demo_bench" in text
    assert "| mean JCT | 1.5 +- 0.25 s | <= 2 s | met |" in text
    assert "| a | 1.5 |" in text
    assert "`rows_for_reuse.json`" in text  # raw rows are listed, not summarized


def test_save_leaves_no_temporary_file(tmp_path):
    record.save("x", {"n": 1}, argv=["x.py"], directory=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_dirty_means_the_top_level_sources_changed(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "src").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "c")
    assert not record.sources_dirty(tmp_path / "benchmarks")
    (tmp_path / "src" / "m.py").write_text("x = 2\n")
    # asked from benchmarks/, as save() asks: the top-level src/ is what counts
    assert record.sources_dirty(tmp_path / "benchmarks")
