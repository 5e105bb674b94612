"""`flowherd fabric`: JSON figures, the table, and one-line errors with exit code 2."""

import json
import subprocess
import sys
from pathlib import Path

from flowherd.cli import main

FLOWHERD = Path(sys.executable).with_name("flowherd")


def test_json_output_for_a_preset(capsys):
    assert main(["fabric", "dgx-superpod-h100-2su", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # SuperPOD H100 Table 4, 2 SU (32 nodes per SU): 16 leaves + 8 spines; 1:1 so half of 512 GPUs x 50 GB/s
    assert out["num_gpus"] == 512 and out["num_servers"] == 64 and out["num_switches"] == 24
    assert out["num_links"] == 2048 and out["num_network_links"] == 1024
    assert out["bisection_bytes_per_s"] == 256 * 50e9
    assert out["diameter_hops"] == 6 and out["name"] == "dgx-superpod-h100-2su"
    assert out["kind"] == "rail-optimized"


def test_table_output_for_a_yaml_file(tmp_path, capsys):
    p = tmp_path / "f.yaml"
    p.write_text("kind: fat-tree\nk: 4\n")
    assert main(["fabric", str(p)]) == 0
    out = capsys.readouterr().out
    assert "fat-tree-k4" in out and "num_switches" in out and "20" in out


def test_unknown_preset_is_one_line_with_exit_code_2(capsys):
    assert main(["fabric", "dgx-superpod-h100-2s"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'dgx-superpod-h100-2su'" in err
    assert "Traceback" not in err


def test_bad_yaml_value_through_the_console_script(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("kind: leaf-spine\nservers: 0\nleaves: 1\nspines: 1\n")
    r = subprocess.run([str(FLOWHERD), "fabric", str(p)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: ") and "(fabric.servers)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
