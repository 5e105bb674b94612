"""NCCL's double binary tree: the trees of ``src/graph/trees.cc`` and their pipelined wavefronts.

NVIDIA/nccl ``src/graph/trees.cc`` @ 18a07eee (``ncclGetBtree``, ``ncclGetDtree``): two
complementary binary trees over the ranks, each carrying half the data; the ``tree`` algorithm
(`flowherd.collectives.algorithms`), its NVLSTree variant (`flowherd.collectives.nvls`) and the
cost model (`flowherd.collectives.cost`) all walk them through these functions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nccl_btree", "nccl_dtree", "parent_wavefronts", "tree_depths", "tree_edges", "tree_wavefronts"]


def nccl_btree(n: int) -> np.ndarray:
    """Parent of each rank in NCCL's binary tree (``ncclGetBtree``); the root (0) has -1."""
    parent = np.full(n, -1, dtype=np.int64)
    for rank in range(1, n):
        bit = 1
        while bit < n and not bit & rank:
            bit <<= 1
        up = (rank ^ bit) | (bit << 1)
        if up >= n:
            up = rank ^ bit
        parent[rank] = up
    return parent


def nccl_dtree(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents in NCCL's two trees (``ncclGetDtree``): the btree, and its mirror (n even) or
    its shift by one rank (n odd)."""
    t0 = nccl_btree(n)
    r = np.arange(n)
    if n % 2 == 1:  # shift: rank r plays rank (r-1) mod n of the btree
        p = t0[(r - 1) % n]
        t1 = np.where(p < 0, -1, (p + 1) % n)
    else:  # mirror: rank r plays rank n-1-r
        p = t0[n - 1 - r]
        t1 = np.where(p < 0, -1, n - 1 - p)
    return t0, t1


def tree_depths(parent: np.ndarray) -> np.ndarray:
    """Depth of each rank (root 0)."""
    depth = np.zeros(len(parent), dtype=np.int64)
    for v in range(len(parent)):
        d, u = 0, v
        while parent[u] >= 0:
            u = int(parent[u])
            d += 1
        depth[v] = d
    return depth


def tree_edges(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Edges (child, parent, child depth) of both trees, and the larger depth."""
    kids, pars, deps = [], [], []
    for parent in nccl_dtree(n):
        d = tree_depths(parent)
        v = np.flatnonzero(parent >= 0)
        kids.append(v)
        pars.append(parent[v])
        deps.append(d[v])
    depth = np.concatenate(deps)
    return (np.concatenate(kids), np.concatenate(pars), depth,
            int(depth.max()) if depth.size else 0)


def _wavefronts(child: np.ndarray, parent: np.ndarray, depth: np.ndarray, dmax: int,
                chunks: int) -> list[tuple[np.ndarray, np.ndarray]]:
    # chunk k goes up a child's edge at depth d in wavefront k + D - d, down it in k + D + d - 1
    out = []
    for w in range(chunks + 2 * dmax - 1):
        k_up = w - (dmax - depth)
        k_dn = w - dmax - depth + 1
        up = (k_up >= 0) & (k_up < chunks)
        dn = (k_dn >= 0) & (k_dn < chunks)
        out.append((np.concatenate([child[up], parent[dn]]),
                    np.concatenate([parent[up], child[dn]])))
    return out


def tree_wavefronts(n: int, chunks: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(src rank, dst rank) flows of each wavefront of the pipelined double binary tree.

    In each tree, chunk ``k`` goes up the edge of a child at depth ``d`` in wavefront
    ``k + D - d`` and down it in wavefront ``k + D + d - 1`` (``D`` the largest depth), so
    the root has the whole of chunk ``k`` reduced just before it broadcasts it.
    """
    child, parent, depth, dmax = tree_edges(n)
    return _wavefronts(child, parent, depth, dmax, chunks)


def parent_wavefronts(parents: tuple[np.ndarray, ...], chunks: int
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
    """`tree_wavefronts` for any trees given by their parent arrays (all of one depth ``D``)."""
    kids, pars, deps = [], [], []
    for parent in parents:
        d = tree_depths(parent)
        v = np.flatnonzero(parent >= 0)
        kids.append(v)
        pars.append(parent[v])
        deps.append(d[v])
    child, parent, depth = np.concatenate(kids), np.concatenate(pars), np.concatenate(deps)
    dmax = int(depth.max()) if depth.size else 0
    return _wavefronts(child, parent, depth, dmax, chunks)
