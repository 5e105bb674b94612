"""Reading a directory of Chakra execution traces (one per rank) into plain values.

A Chakra job is a directory with one ET file per rank, named as Chakra's converters and
ASTRA-sim name them: ``<prefix>.<rank>.et`` for ranks ``0 .. n-1`` (ASTRA-sim's
``--workload-configuration`` is the ``<prefix>`` path). Each file is Chakra's protobuf stream
(`flowherd.workload.chakra_schema`): a ``GlobalMetadata`` message, then the nodes.

Process groups. A collective node names its group in the ``pg_name`` attribute. As ASTRA-sim
reads it (``Workload::extract_comm_group``, astra-sim 518bd51): an empty name or ``"0"`` is
every rank; any other name is defined by either

* ``comm_group.json`` in the directory, ASTRA-sim's ``--comm-group-configuration`` format: a
  JSON object from group name to its list of ranks (``{"1": [0, 1, 2, 3]}``); or
* a ``METADATA_NODE`` of a PyTorch-converted trace whose ``inputs.values`` is the list of
  ``{"pg_name": ..., "ranks": [...]}`` PyTorch records at ``process_group:init`` (an empty
  ranks list is every rank), as ``Workload::issue_pytorch_pg_metadata`` reads it.

Node attributes read (names as Chakra's ``ETFeederNode`` reads them): ``comm_type``,
``comm_size``, ``comm_src``, ``comm_dst``, ``comm_tag``, ``pg_name``, ``is_cpu_op``. A node's
dependencies are its ``data_deps`` and its ``ctrl_deps`` together (both must end before it
starts), by node id within the same file.

Everything wrong with the input is one `ConfigError` line naming the file and, where there is
one, the node (id and name): a truncated or undecodable message, a missing rank, a process
group naming a rank the job lacks or not naming the rank that calls it, an unknown group, a
dependency on a node the file lacks, a cycle in the dependencies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from flowherd.errors import ConfigError
from flowherd.workload.chakra_schema import NodeType, message_classes

__all__ = ["ChakraTrace", "EtNode", "RankTrace", "read_trace_dir"]

_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")
COMM_GROUP_FILE = "comm_group.json"
_MAX_RANKS = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class EtNode:
    """One node of a rank's trace, with the attributes flowherd uses.

    Attributes:
        id: The node id in its file.
        name: The node name.
        type: `NodeType`.
        deps: Positions (in the file's node order) of the nodes it waits for.
        duration_micros: ``duration_micros`` of the node.
        comm_type: ``comm_type`` (a `CollectiveCommType` value), or None.
        comm_size: ``comm_size``, bytes (0 if absent).
        pg_name: ``pg_name`` ("" if absent: every rank).
        comm_src, comm_dst: Peers of a send / receive, or None.
        comm_tag: ``comm_tag`` (0 if absent).
    """

    id: int
    name: str
    type: NodeType
    deps: tuple[int, ...] = ()
    duration_micros: int = 0
    comm_type: int | None = None
    comm_size: int = 0
    pg_name: str = ""
    comm_src: int | None = None
    comm_dst: int | None = None
    comm_tag: int = 0

    def where(self, path: str) -> str:
        return f"{path}: node {self.id} {self.name!r}"


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RankTrace:
    """One rank's nodes in file order (dependencies point to positions in ``nodes``)."""

    rank: int
    path: str
    nodes: tuple[EtNode, ...]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ChakraTrace:
    """The traces of all ranks of one job.

    Attributes:
        directory: Where the files are.
        prefix: The files' common prefix.
        ranks: One `RankTrace` per rank, rank ``i`` at index ``i``.
        groups: Process group name -> its ranks (the empty name: every rank).
        group_source: Process group name -> where it was defined (for messages).
    """

    directory: str
    prefix: str
    ranks: tuple[RankTrace, ...]
    groups: Mapping[str, tuple[int, ...]]
    group_source: Mapping[str, str] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def group(self, node: EtNode, rank: RankTrace) -> tuple[int, ...]:
        """The ranks of the process group ``node`` runs on; one clear line if it has none."""
        name = "" if node.pg_name == "0" else node.pg_name
        got = self.groups.get(name)
        if got is None:
            known = ", ".join(repr(k) for k in sorted(self.groups) if k) or "none"
            raise ConfigError(f"{node.where(rank.path)}: process group {node.pg_name!r} is not defined "
                              f"(defined: {known}; define groups in {COMM_GROUP_FILE} or a PyTorch "
                              "process_group:init metadata node)")
        if rank.rank not in got:
            raise ConfigError(f"{node.where(rank.path)}: rank {rank.rank} calls a collective on process "
                              f"group {node.pg_name!r}, whose ranks {list(got)[:16]} do not include it")
        return got


def read_trace_dir(directory: str | Path, *, field_name: str = "chakra") -> ChakraTrace:
    """Read every rank's ET in ``directory`` (module docstring).

    Args:
        directory: The job's trace directory.
        field_name: The scenario field, for messages.

    Raises:
        ConfigError: One line naming the file (and node) of what is wrong.
    """
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"no Chakra trace directory {str(directory)!r} ({field_name}); expected a "
                          "directory of <prefix>.<rank>.et files")
    by_prefix: dict[str, dict[int, Path]] = {}
    for p in sorted(d.iterdir()):
        m = _NAME.match(p.name)
        if m and p.is_file():
            by_prefix.setdefault(m["prefix"], {})[int(m["rank"])] = p
    if not by_prefix:
        raise ConfigError(f"{d}: no Chakra ET files (<prefix>.<rank>.et) in the directory ({field_name})")
    if len(by_prefix) > 1:
        raise ConfigError(f"{d}: ET files of several prefixes ({', '.join(sorted(by_prefix))}); expected "
                          f"one job's files, <prefix>.0.et .. <prefix>.<n-1>.et ({field_name})")
    prefix, files = next(iter(by_prefix.items()))
    n = max(files) + 1
    if n > _MAX_RANKS:
        raise ConfigError(f"{d}: rank {n - 1} is beyond the {_MAX_RANKS} ranks read ({field_name})")
    missing = [r for r in range(n) if r not in files]
    if missing:
        raise ConfigError(f"{d / f'{prefix}.{missing[0]}.et'}: rank {missing[0]} is missing (found "
                          f"{len(files)} of ranks 0..{n - 1}; every rank needs its file)")
    groups: dict[str, tuple[int, ...]] = {"": tuple(range(n))}
    source: dict[str, str] = {"": "every rank"}
    cg = d / COMM_GROUP_FILE
    if cg.is_file():
        _read_comm_groups(cg, n, groups, source)
    ranks = tuple(_read_rank(files[r], r, n, groups, source) for r in range(n))
    return ChakraTrace(directory=str(d), prefix=prefix, ranks=ranks, groups=groups, group_source=source)


def _read_comm_groups(path: Path, n: int, groups: dict[str, tuple[int, ...]], source: dict[str, str]) -> None:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object from group name to a list of ranks, got "
                          f"{type(data).__name__}")
    for name, ranks in data.items():
        _add_group(str(name), ranks, n, groups, source, f"{path}: group {name!r}")


def _add_group(name: str, ranks: object, n: int, groups: dict[str, tuple[int, ...]],
               source: dict[str, str], where: str) -> None:
    if not isinstance(ranks, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
        raise ConfigError(f"{where}: expected a list of integer ranks, got {str(ranks)[:80]}")
    if not ranks:
        ranks = list(range(n))
    bad = [r for r in ranks if not 0 <= r < n]
    if bad:
        raise ConfigError(f"{where} names rank {bad[0]}, but the job has ranks 0..{n - 1} (one ET file each)")
    if len(set(ranks)) != len(ranks):
        raise ConfigError(f"{where} names a rank twice: {ranks[:16]}")
    key = "" if name == "0" else name
    got = tuple(ranks)
    if key in groups and groups[key] != got:
        raise ConfigError(f"{where} is {list(got)[:16]}, but {source[key]} defines it as "
                          f"{list(groups[key])[:16]}")
    groups[key] = got
    source.setdefault(key, where)


def _read_rank(path: Path, rank: int, n: int, groups: dict[str, tuple[int, ...]],
               source: dict[str, str]) -> RankTrace:
    from google.protobuf.message import DecodeError

    cls = message_classes()
    data = path.read_bytes()
    pos, count = 0, 0
    raw: list = []
    meta_seen = False
    while pos < len(data):
        start = pos
        size, pos = _varint(data, pos)
        what = "the global metadata" if not meta_seen else f"node message {count}"
        after = f" (after node {raw[-1].id} {raw[-1].name!r})" if raw else ""
        if size is None or pos + size > len(data):
            left = len(data) - pos
            raise ConfigError(f"{path}: truncated protobuf: {what} at byte {start} announces "
                              f"{size if size is not None else 'an unreadable length of'} bytes, {left} "
                              f"remain{after}")
        msg = cls["Node"]() if meta_seen else cls["GlobalMetadata"]()
        try:
            msg.ParseFromString(data[pos:pos + size])
        except DecodeError as err:
            raise ConfigError(f"{path}: undecodable protobuf: {what} at byte {start}{after}: {err}") from None
        pos += size
        if meta_seen:
            raw.append(msg)
            count += 1
        meta_seen = True
    if not meta_seen:
        raise ConfigError(f"{path}: empty ET file (expected Chakra's GlobalMetadata, then nodes)")
    index: dict[int, int] = {}
    for i, m in enumerate(raw):
        if m.id in index:
            raise ConfigError(f"{path}: node {m.id} {m.name!r}: node id {m.id} appears twice")
        index[m.id] = i
    nodes = []
    for m in raw:
        attrs = {a.name: a for a in m.attr}
        deps = []
        for d in (*m.data_deps, *m.ctrl_deps):
            if d not in index:
                raise ConfigError(f"{path}: node {m.id} {m.name!r}: depends on node {d}, which the file "
                                  "lacks")
            deps.append(index[d])
        node = EtNode(id=int(m.id), name=m.name, type=_node_type(m, path),
                      deps=tuple(sorted(set(deps))),
                      duration_micros=int(m.duration_micros), comm_type=_int(attrs.get("comm_type")),
                      comm_size=_int(attrs.get("comm_size")) or 0,
                      pg_name=_str(attrs.get("pg_name")), comm_src=_int(attrs.get("comm_src")),
                      comm_dst=_int(attrs.get("comm_dst")), comm_tag=_int(attrs.get("comm_tag")) or 0)
        if node.type == NodeType.METADATA_NODE and m.inputs.values:
            _pytorch_groups(m.inputs.values, n, groups, source, node.where(str(path)))
        nodes.append(node)
    _check_acyclic(nodes, str(path))
    return RankTrace(rank=rank, path=str(path), nodes=tuple(nodes))


def _node_type(m, path: Path) -> NodeType:
    try:
        return NodeType(int(m.type))
    except ValueError:
        raise ConfigError(f"{path}: node {m.id} {m.name!r}: unknown node type {int(m.type)} (expected "
                          f"{', '.join(t.name for t in NodeType)})") from None


def _pytorch_groups(values: str, n: int, groups: dict[str, tuple[int, ...]], source: dict[str, str],
                    where: str) -> None:
    # ASTRA-sim strips two characters each side (the converter's quoting) before parsing
    text = values.strip()
    for cand in (text, text[2:-2]):
        try:
            recs = json.loads(cand)
            break
        except json.JSONDecodeError:
            continue
    else:
        return  # metadata of another kind
    if not isinstance(recs, list):
        return
    for rec in recs:
        if isinstance(rec, dict) and "pg_name" in rec:
            _add_group(str(rec["pg_name"]), rec.get("ranks", []), n, groups, source,
                       f"{where}: process group {rec['pg_name']!r}")


def _check_acyclic(nodes: list[EtNode], path: str) -> None:
    state = [0] * len(nodes)  # 0 new, 1 on the stack, 2 done
    for root in range(len(nodes)):
        if state[root]:
            continue
        stack = [(root, iter(nodes[root].deps))]
        state[root] = 1
        while stack:
            i, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[i] = 2
                stack.pop()
            elif state[nxt] == 1:
                loop = [j for j, _ in stack]
                loop = [*loop[loop.index(nxt):], nxt]
                chain = " -> ".join(str(nodes[j].id) for j in loop)
                raise ConfigError(f"{nodes[nxt].where(path)}: the dependencies form a cycle "
                                  f"(node ids {chain}, each waiting for the next)")
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(nodes[nxt].deps)))


def _varint(data: bytes, pos: int) -> tuple[int | None, int]:
    shift, out = 0, 0
    while pos < len(data) and shift < 64:
        b = data[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
    return None, pos


def _int(a) -> int | None:
    if a is None:
        return None
    kind = a.WhichOneof("value")
    if kind is None:
        return 0
    v = getattr(a, kind)
    return int(v) if isinstance(v, int | float) else None


def _str(a) -> str:
    if a is None:
        return ""
    kind = a.WhichOneof("value")
    v = getattr(a, kind) if kind else ""
    return v if isinstance(v, str) else str(v)
