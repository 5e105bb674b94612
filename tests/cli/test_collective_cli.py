"""`flowherd collective`: the fixed command-line contract."""

from __future__ import annotations

import json

import pytest

from flowherd.cli import main
from flowherd.cluster.collective import simulate_collective
from flowherd.collectives.ops import Collective, busbw_factor
from flowherd.fabric.spec import load_fabric

FABRIC_YAML = """\
kind: leaf-spine
servers: 4
gpus_per_server: 4
leaves: 2
spines: 2
nic_bandwidth: 400Gbps
nvlink_bandwidth: 900GB/s
"""


@pytest.fixture
def fabric_file(tmp_path):
    p = tmp_path / "fab.yaml"
    p.write_text(FABRIC_YAML)
    return str(p)


def _run(capsys, *args):
    code = main(["collective", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_has_the_contract_fields_and_matches_the_library(capsys, fabric_file):
    code, out, _ = _run(capsys, "--op", "allreduce", "--algo", "ring", "--size", "64MiB", "--gpus", "8",
                        "--fabric", fabric_file, "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "algorithm", "protocol",
                "num_gpus", "size_bytes"):
        assert key in d
    assert (d["algorithm"], d["protocol"], d["num_gpus"], d["size_bytes"]) == ("ring", "simple", 8,
                                                                               64 * 2**20)
    assert d["busbw_bytes_per_s"] == pytest.approx(d["algbw_bytes_per_s"] * busbw_factor("allreduce", 8))
    fab = load_fabric(fabric_file)
    lib = simulate_collective(fab, Collective(op="allreduce", gpus=range(8), size_bytes=64 * 2**20),
                              algorithm="ring")
    assert d["time_s"] == pytest.approx(lib.time_s)


def test_packed_fills_servers_and_spread_goes_round_robin(capsys, fabric_file):
    # 4 GPUs packed = one server (NVLink, 900 GB/s); spread = one per server (NICs, 50 GB/s)
    times = {}
    for placement in ("packed", "spread"):
        code, out, _ = _run(capsys, "--op", "allreduce", "--algo", "ring", "--size", "64MiB", "--gpus", "4",
                            "--fabric", fabric_file, "--placement", placement, "--json")
        assert code == 0
        times[placement] = json.loads(out)["time_s"]
    assert times["spread"] > 5 * times["packed"]


def test_auto_reports_the_selected_algorithm(capsys, fabric_file):
    code, out, _ = _run(capsys, "--op", "allreduce", "--algo", "auto", "--size", "4KB", "--gpus", "16",
                        "--fabric", fabric_file, "--routing", "ecmp", "--fidelity", "collective", "--json")
    d = json.loads(out)
    assert code == 0 and (d["algorithm"], d["protocol"]) == ("tree", "ll")
    assert d["size_bytes"] == 4000 and d["fidelity"] == "collective" and d["router"] == "ecmp"


def test_preset_fabric_and_rich_table(capsys):
    code, out, _ = _run(capsys, "--op", "alltoall", "--algo", "direct", "--size", "1MiB", "--gpus", "8",
                        "--fabric", "dgx1")
    assert code == 0
    assert "busbw" in out and "direct / simple" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--op", "allreduce", "--algo", "ring", "--size", "1GiB", "--gpus", "17"], "got 17 (--gpus)"),
    (["--op", "allreduse", "--algo", "ring", "--size", "1GiB", "--gpus", "4"], "did you mean 'allreduce'"),
    (["--op", "allreduce", "--algo", "rng", "--size", "1GiB", "--gpus", "4"], "did you mean 'ring'"),
    (["--op", "allreduce", "--algo", "ring", "--size", "1 gigabyte", "--gpus", "4"], "malformed size"),
    (["--op", "allreduce", "--algo", "tree", "--size", "1GiB", "--gpus", "4", "--placement", "spred"],
     "did you mean 'spread'"),
    (["--op", "alltoall", "--algo", "tree", "--size", "1GiB", "--gpus", "4"], "does not implement op"),
    (["--op", "allreduce", "--size", "1GiB", "--gpus", "4", "--latency-model", "ncl"],
     "did you mean 'nccl'"),
    (["--op", "allreduce", "--size", "1GiB", "--gpus", "4", "--channels", "0"], "got 0 (--channels)"),
])
def test_bad_input_is_one_line_exit_2(capsys, fabric_file, args, message):
    code, _, err = _run(capsys, *args, "--fabric", fabric_file)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_fabric_latency_model_gives_the_ring_closed_form(capsys, tmp_path):
    # ring AllReduce on 64 servers of one GPU behind one switch: 2(n-1)/n S/B + 2(n-1) alpha, with
    # alpha the path's latency (NIC-leaf-NIC, 2 x 1 us) and B the 400 Gb/s NIC (Patarasuk & Yuan)
    p = tmp_path / "ls.yaml"
    p.write_text("kind: leaf-spine\nservers: 64\ngpus_per_server: 1\nleaves: 1\nspines: 1\n"
                 "nic_bandwidth: 400Gbps\n")
    n, size, bw, alpha = 64, 2**30, 50e9, 2e-6
    times = {}
    for model in ("fabric", "nccl"):
        code, out, _ = _run(capsys, "--op", "allreduce", "--algo", "ring", "--size", "1GiB", "--gpus",
                            str(n), "--fabric", str(p), "--latency-model", model, "--json")
        assert code == 0
        d = json.loads(out)
        times[model] = d["time_s"]
        assert d["latency_model"] == model and d["channels"] >= 1
        assert d["predicted_time_s"] > 0
    assert times["fabric"] == pytest.approx(2 * (n - 1) / n * size / bw + 2 * (n - 1) * alpha, rel=1e-3)
    assert times["nccl"] > times["fabric"]
    # nccl: NCCL 2.30's time, the ring's latency counted once (tuning.cc, the paths' inside it)
    assert times["nccl"] == pytest.approx(d["predicted_time_s"], rel=1e-3)


def test_json_prints_channels_and_the_models_time(capsys):
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1GiB", "--gpus", "16",
                        "--fabric", "dgx-superpod-h100-1su", "--fidelity", "collective", "--json")
    d = json.loads(out)
    assert code == 0 and (d["algorithm"], d["channels"]) == ("nvlstree", 16)
    assert d["predicted_time_s"] == pytest.approx(1 / (455e9 / (2**30 * 30 / 16)), rel=0.01)


def test_the_64_gpu_collective_prints_the_figures_it_printed_before_its_start_up_was_cut(capsys):
    # issue 16's start-up work (the schedule built and checked once, its steps added as one batch,
    # imports deferred) must not move a digit: the figures of main at f2f7a89, before that work
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1GiB", "--gpus", "64", "--fabric",
                        "dgx-superpod-h100-1su", "--json")
    assert code == 0
    d = json.loads(out)
    assert (d["algorithm"], d["protocol"], d["channels"], d["num_steps"], d["num_flows"]) == (
        "nvlstree", "simple", 16, 512, 71680)
    assert d["time_s"] == 0.006025054992808827
    assert d["algbw_bytes_per_s"] == 178212783996.42145
    assert d["busbw_bytes_per_s"] == 350856418492.9547
    assert d["predicted_time_s"] == 0.005957897846153846
    assert d["wire_bytes"] == 92341796864.00002
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1GiB", "--gpus", "64", "--fabric",
                        "dgx-superpod-h100-1su")
    assert code == 0
    for shown in ("nvlstree / simple", "6.03 ms", "5.96 ms", "178.21 GB/s (1.43 Tbps)",
                  "350.86 GB/s (2.81 Tbps)", "512 / 71680", "86 GiB"):
        assert shown in out, shown
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1GiB", "--gpus", "64", "--fabric",
                        "dgx-superpod-h100-1su", "--fidelity", "collective", "--json")
    assert code == 0 and json.loads(out)["time_s"] == 0.005957897846153847
