"""Names from data reach the terminal shown, never acted on (flowherd.sanitize.shown).

Every command that prints a name from a scenario, a trace or a file path is run with names that
hold what a terminal would act on: ESC sequences (ANSI clear-screen, OSC window title, an OSC 8
hyperlink), the one-character C1 CSI, NUL, backspace, carriage return, and the bidi overrides
and isolates of CVE-2021-42574. The output (not a terminal: rich adds no escape of its own) must
hold none of those characters, and the names must still be there, escaped.
"""

import copy
import re
from pathlib import Path

import pytest
import yaml

from flowherd.cli import main, simulate_cmd
from flowherd.cli.progress import Heartbeat
from flowherd.sanitize import file_component, shown

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
TINY = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0

#: What a terminal acts on: C0 controls but newline, DEL, C1 controls, bidi overrides/isolates.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
HOSTILE = {
    "job": "a\x1b[2J\x1b[31mred",
    "tenant": "lab\u202eexe.txt\x00",
    "scenario": "tiny\x1b]0;pwned\x07",
    "link": "c\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "c1": "d\x9b2Jback\x08\rover\u2066iso\u2069",
}


def _hostile_scenario(tmp_path: Path) -> Path:
    data = copy.deepcopy(TINY)
    data["name"] = HOSTILE["scenario"]
    data["workload"]["jobs"][0]["name"] = HOSTILE["job"]
    data["workload"]["jobs"][1]["tenant"] = HOSTILE["tenant"]
    data["workload"]["jobs"][2]["name"] = HOSTILE["link"]
    data["workload"]["jobs"][1]["name"] = HOSTILE["c1"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _clean(text: str) -> None:
    found = RAW.search(text)
    assert found is None, (found.group(), text[max(0, found.start() - 60):found.start() + 20])


def test_shown_escapes_what_a_terminal_acts_on_and_keeps_the_rest():
    for name in HOSTILE.values():
        out = shown(name)
        assert RAW.search(out) is None and out.isprintable()
    assert shown("\x1b[2J") == "\\x1b[2J" and shown("a\u202eb") == "a\\u202eb" and shown("x\x00") == "x\\x00"
    assert shown("Zürich-ü 東京 job_1 [bold]") == "Zürich-ü 東京 job_1 [bold]"


def test_file_component_is_one_safe_path_component():
    for name in [*HOSTILE.values(), "../../etc/passwd", "/abs", ".hidden", "-rf", "", "a" * 500]:
        out = file_component(name)
        assert out and "/" not in out and out not in (".", "..") and out[0] not in ".-"
        assert out.isascii() and out.isprintable() and len(out) <= 100


def test_simulate_table_progress_and_paths_show_names_escaped(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(simulate_cmd, "PROGRESS_FIRST_S", 0.0)
    monkeypatch.setattr(simulate_cmd, "PROGRESS_EVERY_S", 0.0)
    out_dir = tmp_path / "out\x1b[2J"
    assert main(["simulate", str(_hostile_scenario(tmp_path)), "--out", str(out_dir)]) == 0
    cap = capsys.readouterr()
    _clean(cap.out + cap.err)
    assert "a\\x1b[2J\\x1b[31mred" in cap.out and "lab\\u202eexe.txt\\x00" in cap.out
    assert "tiny\\x1b]0;pwned\\x07: 3 jobs" in cap.out
    assert "simulating tiny\\x1b]0;pwned\\x07 (first-fit)" in cap.err  # the progress line
    assert "results written to " in cap.out and "out\\x1b[2J" in cap.out


def test_plan_table_shows_names_escaped(tmp_path, capsys):
    assert main(["plan", str(_hostile_scenario(tmp_path)), "--method", "packed",
                 "--out", str(tmp_path / "p\u202e.json")]) == 0
    cap = capsys.readouterr()
    _clean(cap.out + cap.err)
    assert "a\\x1b[2J" in cap.out and "p\\u202e.json" in cap.out


def test_fabric_name_from_a_file_is_shown_escaped(tmp_path, capsys):
    path = tmp_path / "f.yaml"
    path.write_text(yaml.safe_dump({"kind": "leaf-spine", "name": "fab\x1b]0;x\x07", "servers": 4,
                                    "leaves": 2, "spines": 2}))
    assert main(["fabric", str(path)]) == 0
    cap = capsys.readouterr()
    _clean(cap.out + cap.err)
    assert "fab\\x1b]0;x\\x07" in cap.out


def test_error_lines_show_names_escaped(tmp_path, capsys):
    data = copy.deepcopy(TINY)
    data["workload"]["jobs"][1]["name"] = data["workload"]["jobs"][0]["name"] = "dup\x1b[2J\u202e"
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert err.count("\n") == 1 and "twice" in err and "dup\\x1b[2J\\u202e" in err
    # a path with control characters, in an error about a missing file
    assert main(["simulate", str(tmp_path / "no\x1b]0;t\x07.yaml")]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert err.count("\n") == 1 and "no\\x1b]0;t\\x07.yaml" in err


def test_a_trace_job_id_is_shown_escaped(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\nj\x1b[2Jx,0,100,8\nk\u202eb,1,100,8\n")
    data = copy.deepcopy(TINY)
    data["workload"] = {"jobs": [], "traces": [{"path": str(trace)}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path)]) == 0
    cap = capsys.readouterr()
    _clean(cap.out + cap.err)
    assert "j\\x1b[2Jx" in cap.out and "k\\u202eb" in cap.out


@pytest.mark.parametrize("name", list(HOSTILE.values()))
def test_heartbeat_lines_show_names_escaped(name):
    import io

    buf = io.StringIO()
    Heartbeat("demo", stream=buf).line(f"{name}: 10% of the horizon")
    _clean(buf.getvalue().rstrip("\n"))
    assert shown(name) in buf.getvalue()
