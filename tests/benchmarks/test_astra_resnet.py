"""The ResNet-50 data-parallel case of benchmarks/astra_compare.py (benchmarks/astra_resnet.py):
ASTRA-sim 1.0's text workload read as Chakra's TextConverter reads it, and one iteration on
flowherd compute bound as ASTRA-sim finds it (../shared/data/peers/astra_sim_analytical.md §7)."""

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

from flowherd.workload.opgraph import TaskKind

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
_SPEC = importlib.util.spec_from_file_location("astra_resnet", _BENCH / "astra_resnet.py")
resnet = importlib.util.module_from_spec(_SPEC)
sys.modules["astra_resnet"] = resnet  # its dataclass looks its module up
_SPEC.loader.exec_module(resnet)

COMPUTE_US = 1_082_450  # §7: per rank 161 COMP nodes, sum of duration_micros
ALLREDUCE_BYTES = 102_011_648  # §7: 54 ALL_REDUCE nodes, sum of comm_size


def test_the_copied_workload_has_the_recorded_layers_and_totals():
    layers = resnet.read_workload()
    assert len(layers) == 54
    assert (layers[0].name, layers[0].wg_comm_bytes) == ("conv1", 37_632)  # §7: the exposed one
    g = resnet.iteration_graph(layers, 8)
    comp = [t for t in g.tasks if t.kind == TaskKind.COMPUTE]
    comm = [t for t in g.tasks if t.kind == TaskKind.COMM]
    assert len(comp) == 161 and len(comm) == 54
    assert sum(t.duration_s for t in comp) == pytest.approx(COMPUTE_US * 1e-6, rel=1e-12)
    assert g.bytes_by_group() == {"dp": ALLREDUCE_BYTES}


def test_the_graph_has_the_converters_dependencies():
    g = resnet.iteration_graph(resnet.read_workload(), 4)
    by = {t.name: t for t in g.tasks}
    # forward layer after layer; the last layer's weight gradient after the last forward
    assert by["layer_64_1_conv4/fwd"].deps == (by["conv1/fwd"].id,)
    assert by["fc1000/bwd_wg"].deps == (by["fc1000/fwd"].id,)
    # each AllReduce right after its weight gradient, the input gradient after it too, and the
    # previous layer's weight gradient after that input gradient; conv1 has no input gradient
    assert by["fc1000/allreduce"].deps == (by["fc1000/bwd_wg"].id,)
    assert by["fc1000/bwd_ig"].deps == (by["fc1000/bwd_wg"].id,)
    assert by["layer_512_3_conv3/bwd_wg"].deps == (by["fc1000/bwd_ig"].id,)
    assert "conv1/bwd_ig" not in by
    # nothing waits for an AllReduce: the compute is one chain, the whole compute sum
    assert g.critical_path_s() == pytest.approx(COMPUTE_US * 1e-6, rel=1e-12)


def test_the_ets_are_the_text_converters_bytes():
    # sha256 of the files chakra f37c2bb's TextConverter wrote for 8 NPUs (num_passes=1;
    # /usr/bin/python3 with Debian's python3-protobuf 3.21.12): rank 0, and rank 7, whose node
    # ids run on from the other ranks' (7 * 215 nodes before it)
    ets = list(resnet.resnet_ets(8))
    assert hashlib.sha256(ets[0]).hexdigest() == \
        "570d711f515e2b49174d437b04f87aa67a2aa413a1bc48dd06e62d36b392d564"
    assert hashlib.sha256(ets[7]).hexdigest() == \
        "bb9f451e09199cfab40adc653c9c8cebe126ff10fa3ad4cc717977140b5ace26"


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_an_iteration_is_compute_bound(fidelity):
    # ASTRA-sim: 1,082.45 ms of compute plus ~0.1-4 ms exposed (§7); flowherd's exposed part is
    # the last (conv1) AllReduce at NCCL's ring step latencies: above the compute, by < 1%
    r = resnet.simulate(16, fidelity)
    assert r["compute_s"] == pytest.approx(COMPUTE_US * 1e-6, rel=1e-12)
    assert COMPUTE_US * 1e-6 < r["time_s"] < 1.01 * COMPUTE_US * 1e-6


def test_the_exposed_part_is_the_last_allreduces_ring_at_path_latencies():
    # with the paths' latencies only, the conv1 AllReduce (S = 37,632 B) after the last compute
    # takes the textbook ring time 2(n-1) * alpha + 2(n-1)/n * S/B, alpha = 2 links * 1 us,
    # B = 50 * 2^30 B/s (§3's closed form): every other AllReduce has ended under the compute
    n, size = 16, 37_632
    r = resnet.simulate(n, "step", latency_model="fabric")
    ring_s = 2 * (n - 1) * 2e-6 + 2 * (n - 1) / n * size / (50 * 2**30)
    assert r["exposed_s"] == pytest.approx(ring_s, rel=1e-6)


def test_bad_input_names_the_line_and_column(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("DATA\n1\nconv1 -1 13003 NONE 0 12864 NONE 0 x ALLREDUCE 37632 3229\n")
    with pytest.raises(SystemExit, match=r"w.txt:3: column 8 \(weight-gradient compute time\).*'x'"):
        resnet.read_workload(p)
    p.write_text("MODEL\n1\n")
    with pytest.raises(SystemExit, match="must be DATA"):
        resnet.read_workload(p)
