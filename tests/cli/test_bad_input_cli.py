"""Bad inputs, each through the command line: one line on stderr, exit code 2, no traceback."""

import pytest
import yaml

from flowherd.cli import main

GOOD = {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 1, "leaves": 2, "spines": 2}
# one uplink per leaf, two spines, no NVLink: rail 0 and rail 1 never meet
DISCONNECTED = {"kind": "rail-optimized", "servers": 2, "gpus_per_server": 2, "servers_per_su": 2,
                "spines": 2, "leaf_uplinks": 1, "nvlink_bandwidth": None}


def _yaml(tmp_path, data):
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _one_line_error(capsys, argv, expected):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert expected in err, err


def test_negative_capacity(capsys, tmp_path):
    path = _yaml(tmp_path, {**GOOD, "nic_bandwidth": "-400Gbps"})
    _one_line_error(capsys, ["fabric", path], "rate must be positive, got '-400Gbps' (fabric.nic_bandwidth)")


def test_unknown_preset_with_a_near_miss(capsys):
    _one_line_error(capsys, ["fabric", "dgx-superpod-h100-1sux"], "did you mean 'dgx-superpod-h100-1su'")


@pytest.mark.parametrize("command", ["fabric", "collective"])
def test_disconnected_fabric(capsys, tmp_path, command):
    path = _yaml(tmp_path, DISCONNECTED)
    collective = ["collective", "--op", "allreduce", "--algo", "ring", "--size", "1MiB", "--gpus", "4"]
    argv = ["fabric", path] if command == "fabric" else [*collective, "--fabric", path]
    _one_line_error(capsys, argv, "is disconnected")


def test_more_gpus_than_the_fabric_has(capsys, tmp_path):
    argv = ["collective", "--op", "allreduce", "--algo", "ring", "--size", "1MiB", "--gpus", "5",
            "--fabric", _yaml(tmp_path, GOOD)]
    _one_line_error(capsys, argv, "--gpus must be in 1..4")


def test_malformed_size(capsys, tmp_path):
    argv = ["collective", "--op", "allreduce", "--algo", "ring", "--size", "12XB", "--gpus", "4",
            "--fabric", _yaml(tmp_path, GOOD)]
    _one_line_error(capsys, argv, "malformed size '12XB' (--size)")
