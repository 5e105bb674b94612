"""Hardening through the command line: outputs checked before running, data printed as text, long
runs not silent, one-line usage errors that echo the value."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from flowherd.cli import main, simulate_cmd

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
TINY = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0


def _write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_job_and_tenant_names_are_printed_as_text_not_markup(tmp_path, capsys):
    data = copy.deepcopy(TINY)
    data["workload"]["jobs"][0]["name"] = "[/bold]"
    data["workload"]["jobs"][1]["tenant"] = "[link=file:///etc/passwd]clickme[/link]"
    data["name"] = "[red]tiny"
    assert main(["simulate", _write(tmp_path, data)]) == 0
    out = capsys.readouterr().out
    assert "[/bold]" in out  # a closing tag without an opening one is shown, not a crash
    assert "[link=file:///etc/passwd]clickme[/link]" in out  # shown as typed, not a hidden hyperlink
    assert "\x1b]8;" not in out  # no OSC 8 terminal hyperlink
    assert "[red]tiny: 3 jobs" in out


def test_an_unwritable_out_fails_before_the_simulation(tmp_path, capsys, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the simulation ran before --out was checked")

    monkeypatch.setattr(simulate_cmd, "_simulate", boom)
    scen = _write(tmp_path, TINY)
    (tmp_path / "file").write_text("x")
    for out, msg in ((tmp_path / "file", "is a file, not a directory (--out)"),
                     (tmp_path / "file" / "sub", "cannot create directory"),
                     (Path("/proc/no/such"), "cannot create directory '/proc/no/such' (--out)")):
        assert main(["simulate", scen, "--json", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and msg in err, err


def test_a_writable_out_gets_the_results_and_the_json_is_printed(tmp_path, capsys):
    out = tmp_path / "new" / "dir"
    assert main(["simulate", _write(tmp_path, TINY), "--json", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["jobs_total"] == 3
    assert {p.name for p in out.iterdir()} >= {"result.json", "jobs.csv", "scenario.yaml", "results.duckdb"}
    assert not [p for p in out.iterdir() if p.name.startswith(".flowherd-probe")]


def test_a_long_run_off_a_terminal_prints_progress_with_a_time_estimate(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(simulate_cmd, "PROGRESS_FIRST_S", 0.0)
    monkeypatch.setattr(simulate_cmd, "PROGRESS_EVERY_S", 0.0)
    data = copy.deepcopy(TINY)
    data["workload"]["jobs"][0]["iterations"] = 10**12  # valid; ends at the horizon
    assert main(["simulate", _write(tmp_path, data), "--json"]) == 0
    cap = capsys.readouterr()
    lines = [ln for ln in cap.err.splitlines() if ln.startswith("simulating tiny (first-fit): ")]
    assert len(lines) >= 2, cap.err
    assert all("of the 2 s horizon after" in ln for ln in lines)
    assert any("left at this pace" in ln and "about" in ln for ln in lines)
    pct = [float(ln.split(": ", 1)[1].split("%")[0]) for ln in lines]
    assert pct == sorted(pct) and pct[-1] <= 100
    assert json.loads(cap.out)["jobs_total"] == 3  # stdout holds only the JSON


@pytest.mark.parametrize(("argv", "expect"), [
    (["simulate", "{d}"], "is a directory; expected a YAML file"),
    (["simulate", "{s}", "--seed", str(2**63)], "got 9223372036854775808 (--seed)"),
    (["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "sixteen", "--fabric", "x"],
     "invalid value 'sixteen' for --gpus"),
    (["collective", "--op", "allreduce", "--size", "1e30GiB", "--gpus", "4", "--fabric",
      "dgx-superpod-h100-1su"],
     "size must be at most 1 PiB, got '1e30GiB' (--size)"),
])
def test_cli_flag_errors_are_one_line(tmp_path, capsys, argv, expect):
    scen = _write(tmp_path, TINY)
    assert main([a.replace("{d}", str(tmp_path)).replace("{s}", scen) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and expect in err, err


def test_help_and_no_arguments_still_show_the_help(capsys):
    assert main(["--help"]) == 0
    assert "simulate" in capsys.readouterr().out
    assert main(["simulate", "--help"]) == 0
    assert "--seed" in capsys.readouterr().out
