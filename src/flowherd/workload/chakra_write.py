"""Writing Chakra execution traces: microbenchmarks, and any `OpGraph` as one ET per rank.

The encoding is the one Chakra's generators write (``encodeMessage`` of
``src/third_party/utils/protolib.py``: a varint length, then the message; a ``GlobalMetadata``
first, then the nodes; communication attributes ``is_cpu_op`` (bool), ``comm_type`` and
``comm_size`` (int64), as ASTRA-sim's ``examples/workload/microbenchmarks/generator_scripts``
write them). `microbenchmark` writes those scripts' files byte for byte.

`export_graph` writes an op graph (a native training iteration of `flowherd.workload.TrainingJob`,
for example) as the traces its ranks would record: each rank's compute tasks and its part of every
communication task, in a topological order, each node depending on the nearest earlier tasks the
rank takes part in; a SendRecv is a ``COMM_SEND_NODE`` on the sender and a ``COMM_RECV_NODE`` on
the receiver (tag: the task id); every distinct group of ranks is a process group of
``comm_group.json``. A task of ``count`` calls is ``count`` nodes in a row. Reading the directory
back (`flowherd.workload.chakra_graph.trace_graph`) gives the same work: the round trip that
checks the reader against flowherd's native model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from flowherd.collectives.ops import Op
from flowherd.errors import ConfigError
from flowherd.units import us
from flowherd.workload.chakra_schema import CollectiveCommType as CT
from flowherd.workload.chakra_schema import NodeType, message_classes
from flowherd.workload.opgraph import OpGraph, TaskKind

__all__ = ["encode_messages", "export_graph", "microbenchmark"]

_CT = {Op.ALLREDUCE: CT.ALL_REDUCE, Op.REDUCESCATTER: CT.REDUCE_SCATTER, Op.ALLGATHER: CT.ALL_GATHER,
       Op.ALLTOALL: CT.ALL_TO_ALL, Op.BROADCAST: CT.BROADCAST, Op.REDUCE: CT.REDUCE}
_FILE_NAME = {CT.ALL_REDUCE: "all_reduce", CT.ALL_GATHER: "all_gather", CT.ALL_TO_ALL: "all_to_all",
              CT.REDUCE_SCATTER: "reduce_scatter"}


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def encode_messages(messages: Iterable) -> bytes:
    """Length-delimited protobuf messages, as Chakra's ``protolib.encodeMessage`` writes them."""
    out = bytearray()
    for m in messages:
        body = m.SerializeToString()
        out += _varint(len(body)) + body
    return bytes(out)


def _comm_attrs(cls: dict, comm_type: int, size_bytes: int) -> list:
    A = cls["AttributeProto"]
    return [A(name="is_cpu_op", bool_val=False), A(name="comm_type", int64_val=int(comm_type)),
            A(name="comm_size", int64_val=int(size_bytes))]


def microbenchmark(directory: str | Path, comm_type: CT, npus: int, size_mib: int) -> Path:
    """One collective per rank, as ASTRA-sim's microbenchmark generator scripts write it
    (``generate_all_reduce(npus_count, coll_size)`` ...): ``<dir>/<name>.<rank>.et`` with
    version "0.0.4", a node named ``<name>_<npus>npus_<size>MB`` of ``size_mib * 2**20`` bytes, node
    ids counting on across the ranks' files. Returns the directory."""
    cls = message_classes()
    name = _FILE_NAME[CT(comm_type)]
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for rank in range(npus):
        node = cls["Node"](id=rank, name=f"{name}_{npus}npus_{size_mib}MB", type=int(NodeType.COMM_COLL_NODE))
        node.attr.extend(_comm_attrs(cls, comm_type, size_mib * 1024 * 1024))
        (d / f"{name}.{rank}.et").write_bytes(encode_messages([cls["GlobalMetadata"](version="0.0.4"), node]))
    return d


def export_graph(graph: OpGraph, directory: str | Path, *, prefix: str = "rank") -> Path:
    """Write ``graph`` as one Chakra ET per rank plus ``comm_group.json`` (module docstring).
    Returns the directory."""
    cls = message_classes()
    n = graph.world_size
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[int, ...], str] = {tuple(range(n)): "0"}
    on_rank: list[list[int]] = [[] for _ in range(n)]  # per rank: task ids it takes part in
    for t in graph.tasks:
        ranks = graph.stage_ranks[t.stage] if t.kind == TaskKind.COMPUTE else \
            sorted({r for c in t.collectives for r in c.gpus})
        for r in ranks:
            on_rank[r].append(t.id)
    for rank in range(n):
        mine = set(on_rank[rank])
        near: dict[int, frozenset[int]] = {}  # task -> the nearest tasks of this rank it waits for
        for t in graph.tasks:
            acc: set[int] = set()
            for dep in t.deps:
                acc |= {dep} if dep in mine else near[dep]
            near[t.id] = frozenset(acc)
        last: dict[int, int] = {}  # task id -> its last node id on this rank
        nodes = []
        nid = 0
        for tid in on_rank[rank]:
            t = graph.tasks[tid]
            deps = sorted(last[x] for x in near[tid])
            if t.kind == TaskKind.COMPUTE:
                node = cls["Node"](id=nid, name=t.name, type=int(NodeType.COMP_NODE), data_deps=deps,
                                   duration_micros=round(t.duration_s / us))
                node.attr.append(cls["AttributeProto"](name="is_cpu_op", bool_val=False))
                nodes.append(node)
                last[tid] = nid
                nid += 1
                continue
            for c in t.collectives:
                if rank not in c.gpus:
                    continue
                for k in range(t.count):
                    node = cls["Node"](id=nid, name=f"{t.name}#{k}" if t.count > 1 else t.name,
                                       data_deps=deps)
                    if c.op == Op.SENDRECV:
                        send = c.gpus[0] == rank
                        node.type = int(NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE)
                        A = cls["AttributeProto"]
                        node.attr.extend([A(name="is_cpu_op", bool_val=False),
                                          A(name="comm_src", int32_val=c.gpus[0]),
                                          A(name="comm_dst", int32_val=c.gpus[1]),
                                          A(name="comm_tag", int32_val=tid),
                                          A(name="comm_size", int64_val=round(c.size_bytes))])
                    else:
                        if c.op not in _CT:
                            raise ConfigError(f"task {t.name!r}: {c.op.value} has no Chakra collective type")
                        size = c.size_bytes / c.n if c.op == Op.ALLGATHER else c.size_bytes
                        node.type = int(NodeType.COMM_COLL_NODE)
                        node.attr.extend(_comm_attrs(cls, _CT[c.op], round(size)))
                        pg = groups.setdefault(tuple(c.gpus), str(len(groups)))
                        if pg != "0":
                            node.attr.append(cls["AttributeProto"](name="pg_name", string_val=pg))
                    nodes.append(node)
                    deps = [nid]
                    last[tid] = nid
                    nid += 1
        meta = cls["GlobalMetadata"](version="0.0.4")
        (d / f"{prefix}.{rank}.et").write_bytes(encode_messages([meta, *nodes]))
    (d / "comm_group.json").write_text(json.dumps({pg: list(r) for r, pg in groups.items() if pg != "0"}))
    return d
