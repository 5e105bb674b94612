"""The ResNet-50 data-parallel case of benchmarks/astra_compare.py (``--ops resnet50``).

    python benchmarks/astra_resnet.py N FIDELITY [nccl|fabric]    # one flowherd process: prints JSON

The workload is ASTRA-sim 1.0's text file ``Resnet50_DataParallel.txt`` (copied, with its
provenance and licence, in benchmarks/data/astra/), the case of section 7 of
docs/sources/astra_sim_analytical.md. `flowherd.workload.chakra_text` reads it as Chakra's
``TextConverter`` (astra-sim/chakra f37c2bb, ``src/converter/text_converter.py``,
``convert_data_parallel`` with ``num_passes=1``) does, and gives both sides of the comparison the
converter's graph:

* the forward pass layer by layer (each layer's forward compute after the previous layer's);
* then the backward pass from the last layer to the first: a layer's weight-gradient compute
  after the next layer's input-gradient compute (the last layer's after the last forward), its
  weight-gradient AllReduce right after it, and its input-gradient compute after its
  weight-gradient compute (none for the first layer). The weight-update column and the
  forward / input-gradient communication columns (all ``NONE``) are not used by the converter.

Compute times are the file's integers taken as microseconds (Chakra writes them into
``duration_micros``, which ASTRA-sim runs as microseconds), AllReduce sizes as bytes (ASTRA-sim's
``comm_size`` of an AllReduce is the buffer, flowherd's ``size_bytes`` by the nccl-tests
convention too).

flowherd's side (run as a child process by astra_compare.py, start-up included): the graph as a
`flowherd.workload.OpGraph` over N ranks (one stage; each AllReduce over all ranks, group "dp"),
N GPUs around one switch (50 * 2^30 B/s, 1 us per link, as the other cases), every AllReduce a
ring (``CollectiveCache(algorithm="ring")``, as ASTRA-sim's system config runs), walked by
`flowherd.cluster.executor` at ``step`` (`launch_graph`: each AllReduce's steps added when it starts)
or ``collective`` (`add_graph`) fidelity. ASTRA-sim's side: one Chakra ET per rank, byte
for byte what ``TextConverter`` writes (`resnet_ets`). Checked in ASTRA-sim's source tree
(apt-get install python3-protobuf; ``CH=extern/graph_frontend/chakra/schema/protobuf; protoc
et_def.proto --proto_path=$CH --python_out=$CH``), the converter's own files for 8 NPUs:

    from chakra.src.converter.text_converter import TextConverter  # PYTHONPATH=extern/graph_frontend
    TextConverter("Resnet50_DataParallel.txt", "out/resnet", 8, 1).convert()  # in /usr/bin/python3

are `resnet_ets(8)` byte for byte (tests/benchmarks/test_astra_resnet.py holds their sha256), and
ASTRA-sim aware runs them in 1,082,564,952 cycles (astra_sim_analytical.md section 7).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

from flowherd.errors import ConfigError
from flowherd.workload.chakra_text import Layer, read_text_workload, text_ets, text_iteration_graph

WORKLOAD = Path(__file__).resolve().parent / "data" / "astra" / "Resnet50_DataParallel.txt"

def read_workload(path: Path = WORKLOAD) -> tuple[Layer, ...]:
    """The layers of the text workload (`flowherd.workload.chakra_text.read_text_workload`)."""
    try:
        return read_text_workload(path)
    except ConfigError as err:
        raise SystemExit(str(err)) from None


def iteration_graph(layers: tuple[Layer, ...], n: int):
    """One training iteration on `n` data-parallel ranks as an `OpGraph` (module docstring)."""
    return text_iteration_graph(layers, n, name="resnet50")


def simulate(n: int, fidelity: str, path: Path = WORKLOAD, latency_model: str = "nccl") -> dict[str, float]:
    """One iteration on `n` GPUs around one switch: the iteration, its compute-only critical path
    and the difference (exposed communication), seconds. ``latency_model``: "nccl" (NCCL's step
    latencies, as the other cases run) or "fabric" (the paths' 2 us per step only)."""
    import numpy as np

    from flowherd.cluster.executor import CollectiveCache, add_graph, launch_graph, prepare_graph
    from flowherd.engine.core import Engine
    from flowherd.engine.pages import small_pages
    from flowherd.fabric.builder import FabricBuilder
    from flowherd.fabric.core import LinkKind, NodeKind
    from flowherd.routing.policies import make_router
    from flowherd.units import GiB, us

    graph = iteration_graph(read_workload(path), n)
    b = FabricBuilder(f"switch-{n}")
    gpus = b.add_gpus(servers=np.arange(n), gpu_type=["h100"] * n)
    sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
    b.connect(gpus, np.repeat(sw, n), 50 * GiB, 1 * us, LinkKind.NETWORK)
    fab = b.build()
    router = make_router("shortest", fab)
    with small_pages():  # as simulate_collective runs (flowherd.engine.pages)
        prepared = prepare_graph(graph, np.arange(n), CollectiveCache(fab, router, algorithm="ring",
                                                                 latency_model=latency_model))
        engine = Engine(fab, router, record_flows=False)
        ends: list[float] = []
        if fidelity == "step":  # call by call as it runs: all at once is 113 M flows at 1,024 GPUs
            launch_graph(engine, prepared, fidelity="step", at_s=0.0, on_done=lambda _c, t: ends.append(t))
        else:
            add_graph(engine, prepared, fidelity=fidelity, at_s=0.0, on_done=lambda _c, t: ends.append(t))
        engine.run()
    it = ends[0]
    return {"time_s": it, "compute_s": prepared.compute_only_s, "exposed_s": it - prepared.compute_only_s}


def resnet_ets(n: int, path: Path = WORKLOAD) -> Iterator[bytes]:
    """The `n` ranks' Chakra ETs of the workload, byte for byte what ``TextConverter`` writes
    (`flowherd.workload.chakra_text.text_ets`)."""
    return text_ets(path, n)


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3):
        raise SystemExit("usage: astra_resnet.py N FIDELITY [LATENCY_MODEL]")
    print(json.dumps(simulate(int(argv[0]), argv[1], latency_model=argv[2] if len(argv) == 3 else "nccl")))


if __name__ == "__main__":
    main(sys.argv[1:])
