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


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")]


def test_preset_fabric_prints_nccl_tests_columns_and_units(capsys):
    code, out, _ = _run(capsys, "--op", "alltoall", "--algo", "direct", "--size", "1MiB", "--gpus", "8",
                        "--fabric", "dgx1")
    assert code == 0
    header = [line for line in out.splitlines() if line.startswith("#  ")]
    # nccl-tests' writeResultHeader (src/util.cu): the column names, then their units
    assert header[-2].split()[1:10] == ["size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                                        "#wrong"]
    assert header[-1].split()[1:] == ["(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)"]
    (row,) = _table(out)
    # 1 MiB of floats to 8 ranks: 32,768 elements each; no reduction, no root; no data checked
    assert row[:5] == ["1048576", "32768", "float", "none", "-1"] and row[8:10] == ["N/A", "direct"]
    assert float(row[7]) == pytest.approx(float(row[6]) * 7 / 8, abs=0.01)
    assert "Avg bus bandwidth" in out and "in-place" in out


def test_a_size_sweep_runs_the_sizes_nccl_tests_runs(capsys, fabric_file):
    # -b 8 -e 1G -f 2: 8, 16, ..., 2**30 bytes (nccl-tests' TimeTest loop); G is 2**30 as in its parsesize
    code, out, _ = _run(capsys, "--op", "allreduce", "-b", "8", "-e", "1G", "-f", "2", "--gpus", "8",
                        "--fabric", fabric_file, "--fidelity", "collective")
    assert code == 0
    rows = _table(out)
    assert [int(r[0]) for r in rows] == [8 * 2**k for k in range(28)]
    assert [int(r[1]) for r in rows] == [2 * 2**k for k in range(28)]  # float elements
    for r in rows:
        assert float(r[7]) == pytest.approx(float(r[6]) * 2 * 7 / 8, rel=0.01, abs=0.015)  # 2 decimals
    # the time column is microseconds: the JSON of the largest size says the same in seconds
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1G", "--gpus", "8", "--fabric", fabric_file,
                        "--fidelity", "collective", "--json")
    d = json.loads(out)
    assert d["size_bytes"] == 2**30 and d["count"] == 2**28
    assert float(rows[-1][5]) == pytest.approx(d["time_s"] * 1e6, abs=0.01)


def test_increments_and_a_json_line_per_size(capsys, fabric_file):
    code, out, _ = _run(capsys, "--op", "allreduce", "-b", "1M", "-e", "4M", "-i", "1M", "--gpus", "8",
                        "--fabric", fabric_file, "--fidelity", "collective", "--json")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["size_bytes"] for d in lines] == [2**20, 2 * 2**20, 3 * 2**20, 4 * 2**20]


def test_split_ops_round_the_size_as_nccl_tests_does(capsys, fabric_file):
    # AllGatherGetCollByteCount (nccl-tests src/all_gather.cu): per rank (count / n) rounded down to
    # 16 bytes' worth of elements; size = that x n x type bytes. 1000 B of floats on 8 ranks: 31 -> 28
    code, out, _ = _run(capsys, "--op", "allgather", "--size", "1000", "--gpus", "8", "--fabric",
                        fabric_file, "--fidelity", "collective", "--json")
    d = json.loads(out)
    assert code == 0 and (d["size_bytes"], d["count"], d["redop"], d["root"]) == (896, 28, "none", -1)
    code, out, _ = _run(capsys, "--op", "broadcast", "--size", "64K", "--gpus", "8", "-r", "3", "-d", "half",
                        "--fabric", fabric_file, "--fidelity", "collective", "--json")
    d = json.loads(out)
    assert (d["size_bytes"], d["count"], d["type"], d["root"]) == (65536, 32768, "half", 3)


def test_suffixes_with_b_keep_flowherds_units(capsys, fabric_file):
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1GB", "--gpus", "8", "--fabric", fabric_file,
                        "--fidelity", "collective", "--json")
    assert code == 0 and json.loads(out)["size_bytes"] == 10**9


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
    (["--op", "allreduce", "--size", "1G", "-b", "8", "--gpus", "4"], "not both (--size)"),
    (["--op", "allreduce", "-b", "1G", "-e", "1M", "--gpus", "4"], "must not exceed the largest"),
    (["--op", "allreduce", "-b", "1", "-e", "1G", "-i", "1", "--gpus", "4"], "more than 1000 sizes"),
    (["--op", "allreduce", "-b", "8", "-e", "1G", "-f", "0", "--gpus", "4"], "(-f/--stepfactor)"),
    (["--op", "allreduce", "-b", "8", "-d", "flaot", "--gpus", "4"], "did you mean 'float'"),
    (["--op", "allreduce", "-b", "8", "--redop", "summ", "--gpus", "4"], "did you mean 'sum'"),
    (["--op", "broadcast", "-b", "8", "-r", "4", "--gpus", "4"], "got 4 (-r/--root)"),
    (["--op", "allreduce", "-b", "8x", "--gpus", "4"], "(-b/--minbytes)"),
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


def test_the_64_gpu_collective_prints_the_figures_of_the_unbatched_schedule(capsys):
    # the start-up shortcuts (the schedule built and checked once, its steps added as one batch,
    # imports deferred) must not move a digit: the figures of the schedule run step by step
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
    (row,) = _table(out)
    assert row == ["1073741824", "268435456", "float", "sum", "-1", "6025.05", "178.21", "350.86", "N/A",
                   "nvlstree", "simple", "16"]
    code, out, _ = _run(capsys, "--op", "allreduce", "--size", "1GiB", "--gpus", "64", "--fabric",
                        "dgx-superpod-h100-1su", "--fidelity", "collective", "--json")
    assert code == 0 and json.loads(out)["time_s"] == 0.005957897846153847
