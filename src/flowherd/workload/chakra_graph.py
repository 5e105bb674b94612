"""A job's Chakra traces (`ChakraTrace`) as one `OpGraph` over its ranks.

Each rank's trace is its own DAG; the ranks meet in their communication. The graph joins them:

* **Collectives.** On each process group, the ``k``-th ``COMM_COLL_NODE`` of every member rank
  is the same call (NCCL matches calls on a communicator by issue order; the trace's node order
  is that order). The call is one communication task that starts when every member's
  dependencies have ended (a collective cannot finish before its last rank joins) and ends for
  all at once. The members must agree on type and size.
* **Point to point.** The ``k``-th ``COMM_SEND_NODE`` from rank ``a`` to ``b`` with tag ``t`` is
  the ``k``-th ``COMM_RECV_NODE`` on ``b`` from ``a`` with tag ``t`` (how ASTRA-sim's
  ``front_end_sim_send/recv`` pair them): one SendRecv transfer task after both sides'
  dependencies.
* **Compute.** ``COMP_NODE``: ``duration_micros`` on its rank. Ranks whose traces are identical
  apart from their peers and groups (the replicas of data parallelism, the ranks of a pipeline
  stage) run their compute in lock step, so their nodes at the same position are one task on
  the stage of those ranks, and their concurrent collectives one task of several concurrent
  calls (the `OpGraph` model). That keeps a 1,024-rank data-parallel trace as small as one rank's.
* ``METADATA_NODE``, ``MEM_LOAD_NODE``, ``MEM_STORE_NODE``, ``INVALID_NODE``: zero-time steps that
  keep the dependencies through them (flowherd models no remote memory).
* Dependencies: ``data_deps`` and ``ctrl_deps`` alike.

Sizes (Chakra's ``comm_size`` as ASTRA-sim runs it, ``Sys::generate_*``): ALL_REDUCE,
REDUCE_SCATTER, BROADCAST and REDUCE the buffer, ALL_TO_ALL the per-rank send buffer (the
nccl-tests sizes of `flowherd.collectives.ops`); ALL_GATHER the per-rank contribution, so
flowherd's AllGather is ``n * comm_size``; BARRIER a zero-byte AllReduce (latency only).
GATHER, SCATTER and REDUCE_SCATTER_BLOCK, which ASTRA-sim does not run either, are refused.

A trace whose ranks wait for each other in a circle (rank 0 receives from 1 before sending to
it, and rank 1 likewise) is refused as a cycle in the dependencies, naming a node on it.

Re-use at another scale (`rescale`): a purely data-parallel trace (every rank's trace the same,
every collective over all ranks, no send/receive) runs at another data-parallel width ``N`` as
the same per-rank graph with every collective over ``N`` ranks: an approximation that holds
when the per-replica work is fixed (weak scaling: each replica keeps its micro-batches, the
global batch grows) and the gradient buffers do not depend on the width (plain data parallelism,
ZeRO-0; sharded optimizers shrink their shards with the width and are not rescaled correctly).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from flowherd.collectives.ops import Collective, Op
from flowherd.errors import ConfigError
from flowherd.units import us
from flowherd.workload.chakra_read import ChakraTrace, EtNode, RankTrace
from flowherd.workload.chakra_schema import CollectiveCommType as CT
from flowherd.workload.chakra_schema import NodeType
from flowherd.workload.opgraph import GraphBuilder, OpGraph, Task, TaskKind

__all__ = ["rescale", "trace_graph"]

_OPS = {CT.ALL_REDUCE: Op.ALLREDUCE, CT.REDUCE_SCATTER: Op.REDUCESCATTER, CT.ALL_GATHER: Op.ALLGATHER,
        CT.ALL_TO_ALL: Op.ALLTOALL, CT.BROADCAST: Op.BROADCAST, CT.REDUCE: Op.REDUCE,
        CT.BARRIER: Op.ALLREDUCE}
_P2P = (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)


class _Sets:
    """Union-find over integer keys."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        p = self.parent
        while p[x] != x:
            p[x] = p[p[x]]
            x = p[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _signature(rt: RankTrace) -> tuple:
    return tuple((n.type, n.duration_micros, n.deps, n.comm_type, n.comm_size) for n in rt.nodes)


def trace_graph(trace: ChakraTrace, *, name: str = "chakra") -> OpGraph:
    """The job's iteration as an `OpGraph` over its ranks (module docstring).

    Raises:
        ConfigError: One line naming the file and node of what cannot run (mismatched calls, an
            unsupported collective, ranks that wait for each other in a cycle).
    """
    n = trace.world_size
    sig_class: dict[tuple, int] = {}
    cls = [sig_class.setdefault(_signature(rt), len(sig_class)) for rt in trace.ranks]
    members: list[list[int]] = [[] for _ in sig_class]
    for r, c in enumerate(cls):
        members[c].append(r)
    rep = [trace.ranks[m[0]] for m in members]  # each class's first rank
    base = [0]
    for c in range(len(rep)):
        base.append(base[-1] + len(rep[c].nodes))
    sets = _Sets(base[-1])

    def key(r: int, i: int) -> int:
        return base[cls[r]] + i

    # collectives: the k-th call on a group is one call
    calls: dict[tuple[str, int], list[int]] = defaultdict(list)
    for rt in trace.ranks:
        for i, node in enumerate(rt.nodes):
            if node.type == NodeType.COMM_COLL_NODE:
                trace.group(node, rt)  # defined, and this rank a member
                calls[(_pg(node), rt.rank)].append(i)
    instances: list[tuple[int, Collective]] = []  # (a key of the call, the call)
    for pg in dict.fromkeys(pg for pg, _ in calls):
        ranks = trace.groups[pg]
        first = trace.ranks[ranks[0]]
        ref = calls[(pg, ranks[0])]
        for r in ranks:
            mine = calls.get((pg, r), [])
            if len(mine) != len(ref):
                short, long_ = (trace.ranks[r], first) if len(mine) < len(ref) else (first, trace.ranks[r])
                k = min(len(mine), len(ref))
                extra = long_.nodes[(calls[(pg, long_.rank)])[k]]
                raise ConfigError(f"{extra.where(long_.path)}: collective call {k} on process group "
                                  f"{_pgname(pg)} has no partner on rank {short.rank} ({short.path} makes "
                                  f"{k} calls on it, rank {long_.rank} more): the ranks would wait forever")
        for k, i0 in enumerate(ref):
            a = first.nodes[i0]
            for r in ranks[1:]:
                i = calls[(pg, r)][k]
                b = trace.ranks[r].nodes[i]
                if (b.comm_type, b.comm_size) != (a.comm_type, a.comm_size):
                    raise ConfigError(f"{b.where(trace.ranks[r].path)}: collective call {k} on process group "
                                      f"{_pgname(pg)} is {_ctname(b)} of {b.comm_size} bytes, but rank "
                                      f"{ranks[0]} calls {_ctname(a)} of {a.comm_size} bytes "
                                      f"({a.where(first.path)})")
                sets.union(key(ranks[0], i0), key(r, i))
            instances.append((key(ranks[0], i0), _collective(a, ranks, first.path)))
    # point to point: the k-th send a -> b (tag t) is the k-th receive on b from a (tag t)
    sends: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    recvs: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for rt in trace.ranks:
        for i, node in enumerate(rt.nodes):
            if node.type in _P2P:
                src, dst = _peers(node, rt, n)
                side = sends if node.type == NodeType.COMM_SEND_NODE else recvs
                side[(src, dst, node.comm_tag)].append(i)
    for k3 in sorted(set(sends) | set(recvs)):
        src, dst, tag = k3
        s_list, r_list = sends.get(k3, []), recvs.get(k3, [])
        if len(s_list) != len(r_list):
            if len(s_list) > len(r_list):
                side, lst, other = trace.ranks[src], s_list, "receive on rank"
            else:
                side, lst, other = trace.ranks[dst], r_list, "send from rank"
            node = side.nodes[lst[min(len(s_list), len(r_list))]]
            peer = dst if side.rank == src else src
            raise ConfigError(f"{node.where(side.path)}: no matching {other} {peer} (tag {tag}): rank {src} "
                              f"sends {len(s_list)} times to rank {dst}, rank {dst} receives {len(r_list)} "
                              "times from it")
        for i_s, i_r in zip(s_list, r_list, strict=True):
            a, b = trace.ranks[src].nodes[i_s], trace.ranks[dst].nodes[i_r]
            if a.comm_size != b.comm_size:
                raise ConfigError(f"{b.where(trace.ranks[dst].path)}: receives {b.comm_size} bytes from "
                                  f"rank {src}, which sends {a.comm_size} ({a.where(trace.ranks[src].path)})")
            sets.union(key(src, i_s), key(dst, i_r))
            instances.append((key(src, i_s), Collective(op=Op.SENDRECV, gpus=(src, dst),
                                                        size_bytes=float(a.comm_size))))
    return _build(trace, name, members, rep, base, sets, instances)


def _build(trace: ChakraTrace, name: str, members: list[list[int]], rep: list[RankTrace], base: list[int],
           sets: _Sets, instances: list[tuple[int, Collective]]) -> OpGraph:
    n = trace.world_size
    total = base[-1]
    root = [sets.find(x) for x in range(total)]
    where = [(c, i) for c in range(len(rep)) for i in range(len(rep[c].nodes))]
    comps = sorted(set(root))
    cid = {r: j for j, r in enumerate(comps)}
    calls: list[list[Collective]] = [[] for _ in comps]
    for k, coll in instances:
        calls[cid[root[k]]].append(coll)
    preds: list[set[int]] = [set() for _ in comps]
    for c, rt in enumerate(rep):
        for i, node in enumerate(rt.nodes):
            me = cid[root[base[c] + i]]
            for d in node.deps:
                other = cid[root[base[c] + d]]
                if other == me:  # a call that waits for its own partner's node: never starts
                    _deadlock(rep[c].nodes[i], rep[c].path)
                preds[me].add(other)
    order = _topo(preds)
    if order is None:
        c, i = where[comps[_on_cycle(preds)]]
        _deadlock(rep[c].nodes[i], rep[c].path)
    b = GraphBuilder(name, n, [tuple(m) for m in members])
    new_id: dict[int, int] = {}
    for j in order:
        c, i = where[comps[j]]
        node = rep[c].nodes[i]
        deps = [new_id[p] for p in preds[j]]
        colls = tuple(x for x in calls[j] if x.n > 1)
        if node.type in (NodeType.COMM_COLL_NODE, *_P2P) and colls:
            op0 = colls[0].op
            b.comm(node.name or f"node{node.id}", colls, deps, group=_group(colls, node, n), stage=c,
                   phase="sendrecv" if op0 == Op.SENDRECV else op0.value)
            new_id[j] = len(b.tasks) - 1
        else:
            dur = node.duration_micros * us if node.type == NodeType.COMP_NODE else 0.0
            new_id[j] = b.compute(node.name or f"node{node.id}", dur, deps, stage=c, phase="compute")
    return b.build()


def _deadlock(node: EtNode, path: str) -> None:
    raise ConfigError(f"{node.where(path)}: the ranks' traces wait for each other in a cycle (a deadlock "
                      "across ranks): this node's call needs a peer whose own dependencies wait, through "
                      "the other ranks, for this node")


def _topo(preds: list[set[int]]) -> list[int] | None:
    n = len(preds)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [len(p) for p in preds]
    for j, ps in enumerate(preds):
        for p in ps:
            succ[p].append(j)
    ready = [j for j in range(n) if indeg[j] == 0]
    ready.reverse()
    out = []
    while ready:
        j = ready.pop()
        out.append(j)
        for s in sorted(succ[j], reverse=True):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return out if len(out) == n else None


def _on_cycle(preds: list[set[int]]) -> int:
    """A component on a cycle: walk predecessors among the components left by Kahn's algorithm."""
    n = len(preds)
    indeg = [len(p) for p in preds]
    succ: list[list[int]] = [[] for _ in range(n)]
    for j, ps in enumerate(preds):
        for p in ps:
            succ[p].append(j)
    done = [False] * n
    ready = [j for j in range(n) if indeg[j] == 0]
    while ready:
        j = ready.pop()
        done[j] = True
        for s in succ[j]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    j = next(k for k in range(n) if not done[k])
    visited: set[int] = set()
    while j not in visited:  # every node left has a predecessor left: walking them ends on a cycle
        visited.add(j)
        j = next(p for p in sorted(preds[j]) if not done[p])
    return j


def _pg(node: EtNode) -> str:
    return "" if node.pg_name == "0" else node.pg_name


def _pgname(pg: str) -> str:
    return repr(pg) if pg else "'' (every rank)"


def _ctname(node: EtNode) -> str:
    try:
        return CT(node.comm_type).name
    except (ValueError, TypeError):
        return f"comm_type {node.comm_type}"


def _collective(node: EtNode, ranks: tuple[int, ...], path: str) -> Collective:
    if node.comm_type is None:
        raise ConfigError(f"{node.where(path)}: a COMM_COLL_NODE needs a comm_type attribute")
    try:
        ct = CT(node.comm_type)
    except ValueError:
        raise ConfigError(f"{node.where(path)}: unknown comm_type {node.comm_type} (expected "
                          f"{', '.join(t.name for t in CT)})") from None
    op = _OPS.get(ct)
    if op is None:
        raise ConfigError(f"{node.where(path)}: collective {ct.name} is not run (supported: "
                          f"{', '.join(t.name for t in _OPS)})")
    size = 0.0 if ct == CT.BARRIER else float(node.comm_size)
    if ct == CT.ALL_GATHER:
        size *= len(ranks)
    return Collective(op=op, gpus=ranks, size_bytes=size)


def _peers(node: EtNode, rt: RankTrace, n: int) -> tuple[int, int]:
    send = node.type == NodeType.COMM_SEND_NODE
    src = rt.rank if send and node.comm_src is None else node.comm_src
    dst = rt.rank if not send and node.comm_dst is None else node.comm_dst
    what = "comm_dst" if send else "comm_src"
    peer = dst if send else src
    if peer is None:
        raise ConfigError(f"{node.where(rt.path)}: a {'send' if send else 'receive'} needs its peer rank "
                          f"({what})")
    if (src if send else dst) != rt.rank:
        raise ConfigError(f"{node.where(rt.path)}: a {'send' if send else 'receive'} on rank {rt.rank} "
                          f"names {'comm_src' if send else 'comm_dst'} {src if send else dst}")
    if not 0 <= peer < n or peer == rt.rank:
        raise ConfigError(f"{node.where(rt.path)}: {what} {peer} is not another rank of the job (ranks "
                          f"0..{n - 1})")
    return int(src), int(dst)


def _group(colls: tuple[Collective, ...], node: EtNode, n: int) -> str:
    """A traffic label for controllers and reports: "pp" for send/receive, "ep" for AllToAll,
    "dp" for calls over all ranks or strided groups, "tp" for groups of consecutive ranks."""
    c = colls[0]
    if c.op == Op.SENDRECV:
        return "pp"
    if c.op == Op.ALLTOALL:
        return "ep"
    g = sorted(c.gpus)
    if len(g) < n and g[-1] - g[0] == len(g) - 1:
        return "tp"
    return "dp"


def rescale(graph: OpGraph, trace: ChakraTrace, ranks: int, *, field: str = "ranks") -> OpGraph:
    """The graph of a purely data-parallel trace at data-parallel width ``ranks`` (module
    docstring: an approximation, weak scaling).

    Raises:
        ConfigError: If the trace is not purely data parallel (naming why).
    """
    n = trace.world_size
    if ranks == n:
        return graph
    if ranks < 1:
        raise ConfigError(f"{field} must be >= 1, got {ranks} ({field})")
    if len(graph.stage_ranks) != 1:
        raise ConfigError(f"{trace.directory}: the ranks' traces differ ({len(graph.stage_ranks)} kinds of "
                          f"rank), so the trace is not purely data parallel and runs only on its {n} ranks "
                          f"({field} {ranks})")
    world = tuple(range(ranks))
    tasks: list[Task] = []
    for t in graph.tasks:
        if t.kind == TaskKind.COMM:
            c = t.collectives[0]
            if len(t.collectives) != 1 or c.op == Op.SENDRECV or len(c.gpus) != n:
                raise ConfigError(f"{trace.directory}: task {t.name!r} is not a collective over all {n} "
                                  f"ranks, so the trace is not purely data parallel and runs only on its "
                                  f"{n} ranks ({field} {ranks})")
            size = c.size_bytes * ranks / n if c.op == Op.ALLGATHER else c.size_bytes
            t = replace(t, collectives=(Collective(op=c.op, gpus=world, size_bytes=size, root=c.root),))
        tasks.append(t)
    return OpGraph(name=graph.name, world_size=ranks, stage_ranks=(world,), tasks=tuple(tasks))
