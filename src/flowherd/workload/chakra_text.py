"""ASTRA-sim 1.0's text workloads (data parallel), as Chakra's ``TextConverter`` turns them into ETs.

ASTRA-sim 1.0 described a training iteration as a text file: ``DATA`` (the parallelism), the
number of layers, then one line of 12 columns per layer. Chakra's ``TextConverter``
(mlcommons/chakra ``src/converter/text_converter.py``, ``convert_data_parallel``; checked at
astra-sim/chakra f37c2bb with ``num_passes=1``) writes one ET per rank from it:

* the forward pass layer by layer (each layer's forward compute after the previous layer's);
* then the backward pass from the last layer to the first: a layer's weight-gradient compute
  after the next layer's input-gradient compute (the last layer's after the last forward), its
  weight-gradient AllReduce right after it, and its input-gradient compute after its
  weight-gradient compute (none for the first layer). The weight-update column and the forward /
  input-gradient communication columns are not used by the converter.

Compute times are the file's integers taken as microseconds (Chakra writes them into
``duration_micros``, which ASTRA-sim runs as microseconds); AllReduce sizes are bytes.

`text_ets` writes the converter's files byte for byte; `text_iteration_graph` is the same
iteration as an `OpGraph` directly (one stage, every AllReduce over all ranks, group "dp").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from flowherd.errors import ConfigError
from flowherd.workload.chakra_schema import CollectiveCommType, NodeType, message_classes
from flowherd.workload.opgraph import OpGraph

__all__ = ["Layer", "read_text_workload", "text_ets", "text_iteration_graph"]

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


def read_text_workload(path: str | Path) -> tuple[Layer, ...]:
    """The layers of a ``DATA`` text workload; one `ConfigError` line (file:line) on anything else."""
    lines = Path(path).read_text().splitlines()
    if len(lines) < 2 or not lines[0].split() or lines[0].split()[0] != "DATA":
        got = lines[0].split()[0] if lines and lines[0].split() else ""
        raise ConfigError(f"{path}:1: the parallelism must be DATA (the only one read here), got {got!r}")
    try:
        num = int(lines[1].strip())
    except ValueError:
        raise ConfigError(f"{path}:2: the number of layers must be an integer, got {lines[1].strip()!r}") \
            from None
    rows = [(i + 3, line.split()) for i, line in enumerate(lines[2:]) if line.strip()]
    if len(rows) != num:
        raise ConfigError(f"{path}:2: {num} layers announced, {len(rows)} layer lines follow")
    layers = []
    for lineno, col in rows:
        if len(col) != 12:
            raise ConfigError(f"{path}:{lineno}: a layer line has 12 columns, got {len(col)}")
        for k, what in _INT_COLUMNS.items():
            if not col[k].isdigit():
                raise ConfigError(f"{path}:{lineno}: column {k} ({what}) must be a non-negative "
                                  f"integer, got {col[k]!r}")
        if col[9] != "ALLREDUCE":
            raise ConfigError(f"{path}:{lineno}: column 9 (weight-gradient comm type) must be "
                              f"ALLREDUCE for data parallelism, got {col[9]!r}")
        layers.append(Layer(name=col[0], fwd_micros=int(col[2]), ig_micros=int(col[5]),
                            wg_micros=int(col[8]), wg_comm=col[9], wg_comm_bytes=int(col[10])))
    return tuple(layers)


def text_iteration_graph(layers: tuple[Layer, ...], n: int, *, name: str = "text") -> OpGraph:
    """One training iteration on ``n`` data-parallel ranks as an `OpGraph` (module docstring)."""
    from flowherd.collectives.ops import Collective, Op
    from flowherd.units import us
    from flowherd.workload.opgraph import GraphBuilder

    ranks = tuple(range(n))
    b = GraphBuilder(f"{name}-dp-{n}", n, [ranks])
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


def text_ets(path: str | Path, n: int) -> Iterator[bytes]:
    """The ``n`` ranks' Chakra ETs of a text workload, byte for byte what ``TextConverter``
    (f37c2bb, ``num_passes=1``) writes: the global metadata (schema "1.0.2-chakra.0.0.4" and the
    input file's text), then the nodes in its order, with its names and ``data_deps``
    (``COMP_NODE`` with ``duration_micros``, ``COMM_COLL_NODE`` with ``comm_type`` ALL_REDUCE and
    ``comm_size``). The ETs differ only in the node ids: the converter's id counter runs on from
    one rank's file to the next."""
    from flowherd.workload.chakra_write import encode_messages

    cls = message_classes()
    A, Node = cls["AttributeProto"], cls["Node"]
    layers = read_text_workload(path)
    with open(path) as f:  # text mode, as the converter reads it (CRLF read as "\n")
        text = f.read()
    meta = cls["GlobalMetadata"](attr=[A(name="schema", string_val="1.0.2-chakra.0.0.4"),
                                       A(name="input_file", string_val=text)])
    comp, coll = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE)
    nid = 0
    for _ in range(n):
        out = [meta]
        prev: list[int] = []
        for layer in layers:
            out.append(Node(id=nid, name=f"COMP_NODE_{layer.name}_FWD", type=comp, data_deps=prev,
                            duration_micros=layer.fwd_micros))
            prev, nid = [nid], nid + 1
        for idx, layer in enumerate(reversed(layers)):
            wg = nid
            out.append(Node(id=wg, name=f"COMP_NODE_{layer.name}_BWD_WG", type=comp, data_deps=prev,
                            duration_micros=layer.wg_micros))
            out.append(Node(id=wg + 1, name=f"COMM_COLL_NODE_{layer.name}_{layer.wg_comm}", type=coll,
                            data_deps=[wg],
                            attr=[A(name="comm_type", int64_val=int(CollectiveCommType.ALL_REDUCE)),
                                  A(name="comm_size", int64_val=layer.wg_comm_bytes)]))
            nid += 2
            if idx != len(layers) - 1:
                out.append(Node(id=nid, name=f"COMP_NODE_{layer.name}_BWD_IG", type=comp, data_deps=[wg],
                                duration_micros=layer.ig_micros))
                prev, nid = [nid], nid + 1
        yield encode_messages(out)
