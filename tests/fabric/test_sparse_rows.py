"""`flowherd.fabric.sparse_rows` gives scipy.sparse's numbers, bit for bit.

The path index hashes rows with `Csr.matvec` and compares its breadth-first distances with the
up-down ones; the fabric's connectivity check is a search each way. Each is checked against
the scipy operation it replaces, on random sparse matrices and digraphs.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

from flowherd.fabric.sparse_rows import Csr, bfs_hops, reachable


def _random_coo(rng, nrow, ncol, nnz, *, counts=True):
    rows = rng.integers(0, nrow, nnz)
    cols = rng.integers(0, ncol, nnz)
    vals = rng.integers(1, 4, nnz).astype(float) if counts else np.ones(nnz)
    return rows, cols, vals


def _same(ours: Csr, theirs: sp.csr_matrix) -> None:
    theirs = theirs.tocsr()
    theirs.sum_duplicates()
    theirs.sort_indices()
    assert np.array_equal(ours.ptr, theirs.indptr)
    assert np.array_equal(ours.col, theirs.indices)
    assert np.array_equal(ours.val, theirs.data)


@pytest.mark.parametrize("seed", range(5))
def test_csr_matches_scipy_construction_rows_and_products(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    r, c, v = _random_coo(rng, n, n, 4 * n)  # duplicates included: summed
    ours = Csr.from_coo(r, c, v, (n, n))
    theirs = sp.csr_matrix((v, (r, c)), shape=(n, n))
    _same(ours, theirs)
    rows = rng.integers(0, n, n // 2)
    _same(ours.take(rows), theirs[rows])
    _same(ours.matmul(ours), theirs @ theirs)
    _same(ours.take(rows).matmul(ours).matmul(ours), theirs[rows] @ theirs @ theirs)
    assert np.array_equal(ours.col_sums(), np.asarray(theirs.sum(axis=0)).ravel())


@pytest.mark.parametrize("seed", range(5))
def test_matvec_is_scipys_bit_for_bit(seed):
    # the row hashes must be equal floats, not close ones: np.unique groups rows by them
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(20, 400))
    r, c, v = _random_coo(rng, n, n, 30 * n)
    ours = Csr.from_coo(r, c, v, (n, n))
    theirs = sp.csr_matrix((v, (r, c)), shape=(n, n))
    theirs.sort_indices()
    x = rng.random(n)
    assert np.array_equal(ours.matvec(x), theirs @ x)
    assert np.array_equal(ours.binary().matvec(x), (theirs > 0).astype(float) @ x)


def test_empty_matrices_work():
    m = Csr.from_coo(np.zeros(0), np.zeros(0), np.zeros(0), (3, 4))
    assert np.array_equal(m.row_nnz(), [0, 0, 0])
    assert np.array_equal(m.matvec(np.ones(4)), np.zeros(3))
    assert m.matmul(Csr.from_coo(np.zeros(0), np.zeros(0), np.zeros(0), (4, 2))).nrow == 3


@pytest.mark.parametrize("seed", range(6))
def test_bfs_hops_are_scipys_unweighted_shortest_paths(seed):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(2, 80))
    tail, head = rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n)  # sparse: some unreachable
    sources = rng.choice(n, min(n, 7), replace=False)
    graph = sp.csr_matrix((np.ones(tail.size), (tail, head)), shape=(n, n))
    want = shortest_path(graph, unweighted=True, indices=sources)
    got = bfs_hops(tail, head, n, sources)
    assert np.array_equal(got, want)
    assert np.isinf(got).any() or n < 10  # the sparse graphs do leave nodes unreachable


@pytest.mark.parametrize("seed", range(6))
def test_reachable_agrees_with_strong_components(seed):
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(2, 60))
    tail, head = rng.integers(0, n, int(1.5 * n)), rng.integers(0, n, int(1.5 * n))
    graph = sp.csr_matrix((np.ones(tail.size), (tail, head)), shape=(n, n))
    _, labels = connected_components(graph, directed=True, connection="strong")
    with_0 = reachable(tail, head, n, 0) & reachable(head, tail, n, 0)
    assert np.array_equal(with_0, labels == labels[0])
