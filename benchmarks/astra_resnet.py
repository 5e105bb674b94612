"""The ResNet-50 data-parallel case of benchmarks/astra_compare.py (``--ops resnet50``).

    python benchmarks/astra_resnet.py N FIDELITY [nccl|fabric]    # one flowherd process: prints JSON

The workload is ASTRA-sim 1.0's text file ``Resnet50_DataParallel.txt`` (copied, with its
provenance and licence, in benchmarks/data/astra/), the case of section 7 of
../shared/data/peers/astra_sim_analytical.md. This module reads it as Chakra's ``TextConverter``
(astra-sim/chakra f37c2bb, ``src/converter/text_converter.py``, ``convert_data_parallel`` with
``num_passes=1``) does, and gives both sides of the comparison the converter's graph:

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
from dataclasses import dataclass
from pathlib import Path

WORKLOAD = Path(__file__).resolve().parent / "data" / "astra" / "Resnet50_DataParallel.txt"

_INT_COLUMNS = {2: "forward compute time", 4: "forward comm size", 5: "input-gradient compute time",
                7: "input-gradient comm size", 8: "weight-gradient compute time",
                10: "weight-gradient comm size", 11: "weight-update time"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One layer line of an ASTRA-sim 1.0 text workload (the columns the DATA converter uses).

    Attributes:
        name: Layer name (column 0).
        fwd_micros: Forward compute time (column 2).
        ig_micros: Input-gradient compute time (column 5).
        wg_micros: Weight-gradient compute time (column 8).
        wg_comm: Weight-gradient collective (column 9): "ALLREDUCE".
        wg_comm_bytes: Its size (column 10).
    """

    name: str
    fwd_micros: int
    ig_micros: int
    wg_micros: int
    wg_comm: str
    wg_comm_bytes: int


def read_workload(path: Path = WORKLOAD) -> tuple[Layer, ...]:
    """The layers of a ``DATA`` text workload; one clear line on anything else."""
    lines = Path(path).read_text().splitlines()
    if len(lines) < 2 or not lines[0].split() or lines[0].split()[0] != "DATA":
        got = lines[0].split()[0] if lines and lines[0].split() else ""
        raise SystemExit(f"{path}:1: the parallelism must be DATA (the only one read here), got {got!r}")
    try:
        num = int(lines[1].strip())
    except ValueError:
        raise SystemExit(f"{path}:2: the number of layers must be an integer, got {lines[1].strip()!r}") \
            from None
    rows = [(i + 3, line.split()) for i, line in enumerate(lines[2:]) if line.strip()]
    if len(rows) != num:
        raise SystemExit(f"{path}:2: {num} layers announced, {len(rows)} layer lines follow")
    layers = []
    for lineno, col in rows:
        if len(col) != 12:
            raise SystemExit(f"{path}:{lineno}: a layer line has 12 columns, got {len(col)}")
        for k, what in _INT_COLUMNS.items():
            if not col[k].isdigit():
                raise SystemExit(f"{path}:{lineno}: column {k} ({what}) must be a non-negative "
                                 f"integer, got {col[k]!r}")
        if col[9] != "ALLREDUCE":
            raise SystemExit(f"{path}:{lineno}: column 9 (weight-gradient comm type) must be "
                             f"ALLREDUCE for data parallelism, got {col[9]!r}")
        layers.append(Layer(name=col[0], fwd_micros=int(col[2]), ig_micros=int(col[5]),
                            wg_micros=int(col[8]), wg_comm=col[9], wg_comm_bytes=int(col[10])))
    return tuple(layers)


def iteration_graph(layers: tuple[Layer, ...], n: int):
    """One training iteration on `n` data-parallel ranks as an `OpGraph` (module docstring)."""
    from flowherd.collectives.ops import Collective, Op
    from flowherd.units import us
    from flowherd.workload.opgraph import GraphBuilder

    ranks = tuple(range(n))
    b = GraphBuilder(f"resnet50-dp-{n}", n, [ranks])
    prev = None
    for layer in layers:
        prev = b.compute(f"{layer.name}/fwd", layer.fwd_micros * us, [prev], stage=0, phase="fwd")
    for idx, layer in enumerate(reversed(layers)):
        wg = b.compute(f"{layer.name}/bwd_wg", layer.wg_micros * us, [prev], stage=0, phase="bwd")
        b.comm(f"{layer.name}/allreduce", (Collective(op=Op.ALLREDUCE, gpus=ranks,
                                                      size_bytes=layer.wg_comm_bytes),),
               [wg], group="dp", stage=0, phase="bwd")
        if idx != len(layers) - 1:
            prev = b.compute(f"{layer.name}/bwd_ig", layer.ig_micros * us, [wg], stage=0,
                             phase="bwd")
    return b.build()


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


# Chakra ET encoding (protobuf wire format, as chakra's protolib.encodeMessage writes it)

def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(num: int, wire: int, payload: bytes | int) -> bytes:
    key = _varint(num << 3 | wire)
    if wire == 0:
        return key + _varint(int(payload))
    return key + _varint(len(payload)) + payload


def _node(node_id: int, name: str, node_type: int, deps: tuple[int, ...], duration_micros: int = 0,
          attrs: tuple[tuple[str, int], ...] = ()) -> bytes:
    # proto3: fields at their default (id 0, duration 0, no deps) are not written; oneof
    # members (the attributes' int64_val, field 9) are, even 0; data_deps (field 5) packed
    msg = (_field(1, 0, node_id) if node_id else b"") + _field(2, 2, name.encode()) \
        + _field(3, 0, node_type)
    if deps:
        msg += _field(5, 2, b"".join(_varint(d) for d in deps))
    if duration_micros:
        msg += _field(7, 0, duration_micros)
    for key, val in attrs:
        msg += _field(10, 2, _field(1, 2, key.encode()) + _field(9, 0, val))
    return _varint(len(msg)) + msg


def resnet_ets(n: int, path: Path = WORKLOAD) -> Iterator[bytes]:
    """The `n` ranks' Chakra ETs of the workload, byte for byte what ``TextConverter`` (f37c2bb,
    ``num_passes=1``) writes: the global metadata (schema "1.0.2-chakra.0.0.4" and the input
    file's text), then the nodes in its order, with its names and ``data_deps`` (``COMP_NODE`` = 4
    with ``duration_micros``, ``COMM_COLL_NODE`` = 7 with ``comm_type`` ALL_REDUCE = 0 and
    ``comm_size``). The ETs differ only in the node ids: the converter's id counter runs on from
    one rank's file to the next."""
    layers = read_workload(path)
    with open(path) as f:  # text mode, as the converter reads it (CRLF read as "\n")
        text = f.read()

    def sattr(key: str, val: str) -> bytes:
        return _field(2, 2, _field(1, 2, key.encode()) + _field(29, 2, val.encode()))

    meta = sattr("schema", "1.0.2-chakra.0.0.4") + sattr("input_file", text)
    nid = 0
    for _ in range(n):
        out = [_varint(len(meta)) + meta]
        prev: tuple[int, ...] = ()
        for layer in layers:
            out.append(_node(nid, f"COMP_NODE_{layer.name}_FWD", 4, prev, layer.fwd_micros))
            prev, nid = (nid,), nid + 1
        for idx, layer in enumerate(reversed(layers)):
            wg = nid
            out.append(_node(wg, f"COMP_NODE_{layer.name}_BWD_WG", 4, prev, layer.wg_micros))
            out.append(_node(wg + 1, f"COMM_COLL_NODE_{layer.name}_{layer.wg_comm}", 7, (wg,),
                             attrs=(("comm_type", 0), ("comm_size", layer.wg_comm_bytes))))
            nid += 2
            if idx != len(layers) - 1:
                out.append(_node(nid, f"COMP_NODE_{layer.name}_BWD_IG", 4, (wg,), layer.ig_micros))
                prev, nid = (nid,), nid + 1
        yield b"".join(out)


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3):
        raise SystemExit("usage: astra_resnet.py N FIDELITY [LATENCY_MODEL]")
    print(json.dumps(simulate(int(argv[0]), argv[1], latency_model=argv[2] if len(argv) == 3 else "nccl")))


if __name__ == "__main__":
    main(sys.argv[1:])
