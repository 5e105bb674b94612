"""NCCL's NVLS, NVLSTree and PAT algorithms as schedules (registered in `ALGORITHMS`).

* ``nvls`` (one server, AllReduce / ReduceScatter / AllGather): NVLink SHARP. For AllReduce each
  GPU ``g`` has the NVSwitch reduce shard ``g`` of every GPU's buffer (``multimem.ld_reduce``)
  and multicasts the result back (``multimem.st``): every GPU's link to the switch carries
  ``S + S/m`` each way, whatever ``m`` (ReduceScatter / AllGather: one of the two halves,
  ``S`` one way and ``S/m`` the other). flowherd's flows run between GPUs, so the switch's
  loads are carried by all-pairs GPU flows sized to put exactly those bytes on every GPU link:
  on an NVSwitch star the GPU links are the only links, so the times are the same. NVLS moves
  data at ``nvlsEfficiency`` (tuning.cc; 0.85 on Hopper) of NCCL's NVLink rate (20.6 of 25 GB/s
  per link, topo.h): run as NCCL runs it, that is a rate limit from NCCL's model
  (`flowherd.collectives.calibrate`), not more bytes.
* ``nvlstree`` (several servers, AllReduce): NVLS inside each server (a ReduceScatter onto the
  ``m`` heads, one per NIC), NCCL's double binary tree across the servers among the heads of
  each rail, each rail carrying ``S/m``, then the NVLS AllGather (src/device/all_reduce.h,
  ``runTreeSplit`` over ``nvls->treeUp``; heads from ``ncclTopoSearchTryNvls``).
* ``pat`` (AllGather / ReduceScatter at one GPU per server): Parallel Aggregated Trees
  (NCCL 2.23+, src/device/prims_simple.h ``patReduce``/``patCopy``), log2(n) steps with
  doubling distances, which has the link loads of recursive doubling / halving; built here
  with `halving_doubling`'s steps.
"""

from __future__ import annotations

import numpy as np

from flowherd.collectives.algorithms import (
    ALGORITHMS,
    _Builder,
    _check_chunks,
    _unsupported,
    halving_doubling,
    server_grid,
)
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule
from flowherd.collectives.trees import tree_wavefronts
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric

_NVLS_OPS = (Op.ALLREDUCE, Op.REDUCESCATTER, Op.ALLGATHER)


def _all_pairs_in(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All ordered pairs of distinct ranks within each row of `grid`."""
    m = grid.shape[1]
    i, j = np.divmod(np.arange(m * m), m)
    off = i != j
    return grid[:, i[off]].ravel(), grid[:, j[off]].ravel()


def _switch_load(b: _Builder, grid: np.ndarray, link_bytes: float, deps=None, pairs=None) -> int:
    """A step putting `link_bytes` on every GPU's up and down link of its server's NVSwitch
    (``pairs``: `_all_pairs_in` of the grid, if the caller has it)."""
    m = grid.shape[1]
    src, dst = _all_pairs_in(grid) if pairs is None else pairs
    size = link_bytes / (m - 1)
    return b.chain(src, dst, size) if deps is None else b.add(src, dst, size, deps)



@ALGORITHMS.register("nvls")
def nvls(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
         chunks: int | None = None, channels: int | None = None) -> Schedule:
    """NVLink SHARP on one server (module docstring): AllReduce ``S (1 + 1/m)`` per GPU link
    each way; ReduceScatter / AllGather ``S`` on the busier direction."""
    if coll.op not in _NVLS_OPS:
        raise _unsupported(coll, "nvls", _NVLS_OPS)
    if fabric is None:
        raise ConfigError("algorithm 'nvls' needs the fabric (its NVSwitch) (fabric)")
    b = _Builder(coll, "nvls", protocol, fabric, family="nvls")
    grid = server_grid(coll, fabric)
    if grid.shape[0] != 1:
        raise ConfigError(f"algorithm 'nvls' runs inside one server; the collective spans "
                          f"{grid.shape[0]} servers (use 'nvlstree') (algorithm)")
    m, size = coll.n, float(coll.size_bytes)
    if m > 1:
        up = size * (1 + 1 / m) if coll.op == Op.ALLREDUCE else size
        _switch_load(b, grid, up)
    return b.build()


@ALGORITHMS.register("nvlstree")
def nvlstree(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
             chunks: int | None = None, channels: int | None = None) -> Schedule:
    """NVLS inside the servers, a double binary tree per rail across them (AllReduce)."""
    if coll.op != Op.ALLREDUCE:
        raise _unsupported(coll, "nvlstree", (Op.ALLREDUCE,))
    if fabric is None:
        raise ConfigError("algorithm 'nvlstree' needs the fabric (fabric)")
    b = _Builder(coll, "nvlstree", protocol, fabric, family="nvlstree")
    grid = server_grid(coll, fabric)
    g, m = grid.shape
    size = float(coll.size_bytes)
    if coll.n == 1:
        return b.build()
    # NCCL pipelines the three phases chunk by chunk: chunk k's tree waits for its NVLS
    # ReduceScatter and for chunk k-1's tree step; its NVLS AllGather for its tree's last step.
    # Up to 64 chunks (MAX_CHUNKS; NCCL's are 32-256 KiB, enqueue.cc): with 16, the tree's fill
    # and drain over 32 servers cost the step fidelity 23% at 4 GiB (5% with 64)
    c = min(_check_chunks(chunks, size / m), 64)
    intra = size * (1 + 1 / m) / 2  # each half
    waves = tree_wavefronts(g, 1) if g > 1 else []
    prev_rs, prev_wave, prev_ag = None, [None] * len(waves), None
    pairs = _all_pairs_in(grid)  # every chunk's NVLS steps have the same flows
    for _ in range(c):
        rs = None
        if m > 1:  # NVLS ReduceScatter of the chunk onto local rank a (rail a) of every server
            rs = _switch_load(b, grid, intra / c, deps=() if prev_rs is None else (prev_rs,),
                              pairs=pairs)
            prev_rs = rs
        last = rs
        for w, (src, dst) in enumerate(waves):  # double binary tree per rail, across servers
            deps = tuple(d for d in (last, prev_wave[w]) if d is not None)
            last = b.add(grid[src, :].ravel(), grid[dst, :].ravel(), size / (2 * m * c), deps)
            prev_wave[w] = last
        if m > 1:  # NVLS AllGather of the reduced chunk
            deps = tuple(d for d in (last, prev_ag) if d is not None)
            prev_ag = _switch_load(b, grid, intra / c, deps=deps, pairs=pairs)
    return b.build()


@ALGORITHMS.register("pat")
def pat(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
        chunks: int | None = None, channels: int | None = None) -> Schedule:
    """PAT AllGather / ReduceScatter: log2(n) steps of doubling distance (module docstring)."""
    ops = (Op.ALLGATHER, Op.REDUCESCATTER)
    if coll.op not in ops:
        raise _unsupported(coll, "pat", ops)
    sched = halving_doubling(coll, fabric=fabric, protocol=protocol, chunks=chunks)
    b = _Builder(coll, "pat", protocol, fabric, family="pat")
    # same flows, NCCL's PAT latencies
    gpus = np.asarray(coll.gpus)
    rank_of = {int(gp): r for r, gp in enumerate(gpus)}
    for st in sched.steps:
        b.add([rank_of[int(x)] for x in st.src_gpu], [rank_of[int(x)] for x in st.dst_gpu],
              st.size_bytes, st.deps)
    return b.build()
