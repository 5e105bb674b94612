"""The few sparse-matrix and graph-search operations a fabric's checks and its path index
need, in plain numpy.

`Fabric.check_connected` and `flowherd.routing.path_index` (its Clos tables and its routing
mode) run on every fabric, a small collective's included; scipy.sparse costs about 0.3 s of
import, more than that collective's routing. The operations here give the numbers scipy.sparse
gives (a test compares them): `Csr` keeps scipy's canonical form (per row, ascending unique
columns), `Csr.matvec` adds in scipy's order (csr_matvec: column order, from 0.0), and products
of counts are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Csr", "bfs_hops", "hop", "out_links", "ranges", "reachable"]


def ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + lens[i])`` over i."""
    lens = np.asarray(lens, dtype=np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.cumsum(lens) - lens
    return np.repeat(np.asarray(starts, dtype=np.int64) - offs, lens) + np.arange(total)


@dataclass(frozen=True, slots=True, eq=False)
class Csr:
    """A sparse matrix in canonical compressed-sparse-row form.

    Attributes:
        ptr: ``int64[rows + 1]``; row i's entries are ``[ptr[i], ptr[i + 1])``.
        col: ``int64[nnz]``, ascending and unique within each row.
        val: ``float64[nnz]``.
        ncol: Number of columns.
    """

    ptr: np.ndarray
    col: np.ndarray
    val: np.ndarray
    ncol: int

    @classmethod
    def from_coo(cls, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray,
                 shape: tuple[int, int]) -> Csr:
        """Entries (rows[i], cols[i], vals[i]); duplicates summed (scipy's csr_matrix((v, (r, c))))."""
        nrow, ncol = shape
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        vals = np.asarray(vals, dtype=np.float64)
        key = rows * ncol + cols
        order = np.argsort(key, kind="stable")
        key, vals = key[order], vals[order]
        first = np.ones(key.size, dtype=bool)
        first[1:] = key[1:] != key[:-1]
        starts = np.flatnonzero(first)
        val = np.add.reduceat(vals, starts) if starts.size else np.zeros(0)
        key = key[starts]
        r = key // ncol if ncol else key
        ptr = np.zeros(nrow + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=nrow), out=ptr[1:])
        return cls(ptr, key - r * ncol, val, ncol)

    @property
    def nrow(self) -> int:
        return len(self.ptr) - 1

    def row_nnz(self) -> np.ndarray:
        """Entries per row."""
        return np.diff(self.ptr)

    def rows_of_entries(self) -> np.ndarray:
        """Row of each entry."""
        return np.repeat(np.arange(self.nrow), self.row_nnz())

    def take(self, rows: np.ndarray) -> Csr:
        """The rows `rows`, in that order (``m[rows]``)."""
        rows = np.asarray(rows, dtype=np.int64)
        lens = self.ptr[rows + 1] - self.ptr[rows]
        idx = ranges(self.ptr[rows], lens)
        ptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        return Csr(ptr, self.col[idx], self.val[idx], self.ncol)

    def binary(self) -> Csr:
        """The same support with every value 1."""
        return Csr(self.ptr, self.col, np.ones(self.col.size), self.ncol)

    def matmul(self, other: Csr) -> Csr:
        """``self @ other`` (exact for the integer-valued counts the path index multiplies)."""
        lens = other.ptr[self.col + 1] - other.ptr[self.col]
        idx = ranges(other.ptr[self.col], lens)
        rows = np.repeat(self.rows_of_entries(), lens)
        vals = np.repeat(self.val, lens) * other.val[idx]
        return Csr.from_coo(rows, other.col[idx], vals, (self.nrow, other.ncol))

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``self @ x``, each row summed in column order from 0.0 as scipy's csr_matvec does
        (bit for bit: the path index hashes rows with it)."""
        lens = self.row_nnz()
        order = np.argsort(-lens, kind="stable")  # rows still summing at step p: a prefix
        lens_sorted = lens[order]
        start = self.ptr[:-1][order]
        acc = np.zeros(self.nrow)
        for p in range(int(lens_sorted[0]) if lens_sorted.size else 0):
            live = int(np.searchsorted(-lens_sorted, -p, side="left"))
            e = start[:live] + p
            acc[:live] += self.val[e] * x[self.col[e]]
        y = np.empty(self.nrow)
        y[order] = acc
        return y

    def col_sums(self) -> np.ndarray:
        """Sum of each column (``m.sum(axis=0)``)."""
        return np.bincount(self.col, weights=self.val, minlength=self.ncol)


def out_links(tail: np.ndarray, head: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Links tail -> head as a CSR by tail, for `hop`: (pointer ``int64[n + 1]``, heads)."""
    tail = np.asarray(tail, dtype=np.int64)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tail, minlength=n), out=ptr[1:])
    return ptr, np.asarray(head, dtype=np.int64)[np.argsort(tail, kind="stable")]


def hop(search: np.ndarray, node: np.ndarray, links: tuple[np.ndarray, np.ndarray],
        n: int) -> tuple[np.ndarray, np.ndarray]:
    """One hop of many searches at once: the distinct (search, node) pairs one link (`links`,
    `out_links`) beyond the pairs (`search`, `node`), ascending."""
    ptr, heads = links
    lens = ptr[node + 1] - ptr[node]
    key = np.repeat(search, lens) * n + heads[ranges(ptr[node], lens)]
    # distinct by marking: linear in searches x nodes, where np.unique sorts (or hashes) the
    # pairs, several times slower on a large fabric
    mark = np.zeros((int(search.max()) + 1 if search.size else 0) * n, dtype=bool)
    mark[key] = True
    key = np.flatnonzero(mark)
    return key // n, key % n


def bfs_hops(tail: np.ndarray, head: np.ndarray, n: int, sources: np.ndarray) -> np.ndarray:
    """Fewest links from each source to each node over directed links tail -> head:
    ``float64[len(sources), n]``, inf where unreachable (scipy's unweighted shortest_path)."""
    sources = np.asarray(sources, dtype=np.int64)
    links = out_links(tail, head, n)
    dist = np.full((sources.size, n), np.inf)
    search, node = np.arange(sources.size), sources
    dist[search, node] = 0.0
    hops = 0
    while node.size:  # breadth first, every search at once: each (search, node) expanded once
        hops += 1
        search, node = hop(search, node, links, n)
        fresh = np.isinf(dist[search, node])
        search, node = search[fresh], node[fresh]
        dist[search, node] = hops
    return dist


def reachable(tail: np.ndarray, head: np.ndarray, n: int, source: int) -> np.ndarray:
    """``bool[n]``: the nodes reached from `source` over directed links tail -> head."""
    return np.isfinite(bfs_hops(tail, head, n, np.array([source]))[0])
