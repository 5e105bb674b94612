"""FLASH-style AllToAll: balance inside servers, then incast-free rounds between servers.

The scheme of FLASH (an AllToAll scheduler for multi-server GPU clusters) in three phases:

1. **Intra-server balance** over the fast scale-up links: every GPU ``a`` of server ``A`` cuts
   the bytes it owes each remote GPU ``b`` into ``m`` equal parts (``m`` GPUs per server) and
   hands part ``k`` to its local GPU ``k``. Afterwards local GPU ``k`` of ``A`` holds exactly
   ``M[A, B] / m`` for every server ``B``: the inter-server load is spread evenly over the
   server's NICs whatever the skew of the matrix.
2. **Inter-server rounds**: the server-level matrix ``M`` (bytes from server A to server B) is
   padded to equal line sums and decomposed by Birkhoff-von Neumann into weighted permutations
   (each found by ``scipy.optimize.linear_sum_assignment`` on the positive support). In a round
   every server sends to at most one server and receives from at most one (incast-free); GPU
   ``k`` of ``A`` sends to GPU ``k`` of ``pi(A)`` (rail-aligned). The padding carries nothing:
   a round moves ``min(weight, what is left of M[A, pi(A)])``, so the rounds carry exactly M.
3. **Intra-server delivery**: local GPU ``k`` of ``B`` hands every local GPU ``b`` the parts
   it received for ``b``.

Any number of servers: the decomposition takes at most ``(s - 1)^2 + 1`` permutations of an
``s x s`` matrix (Birkhoff; each costs one ``O(s^3)`` assignment), ``s - 1`` for a uniform
AllToAll. Offered as ``--algo bvn`` and used by ``mcf`` beyond the synthesis LP's scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from flowherd.collectives.algorithms import _Builder, server_grid
from flowherd.collectives.ops import Collective, Op
from flowherd.collectives.schedule import Schedule
from flowherd.errors import ConfigError, SolverError
from flowherd.fabric.core import Fabric

__all__ = ["BvnDecomposition", "birkhoff_von_neumann", "bvn", "pad_to_doubly_balanced"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class BvnDecomposition:
    """A matrix as weighted permutation rounds.

    Attributes:
        perms: ``int64[R, s]``: in round r, row i is matched to column ``perms[r, i]``.
        weights: ``float64[R]``: the weight of each round in the padded matrix.
        carried: ``float64[R, s]``: what round r really carries from row i to ``perms[r, i]``
            (0 on the diagonal and for padding); ``sum_r carried`` placed at ``(i, perms[r, i])``
            equals the input matrix.
        padded: The padded matrix (equal row and column sums) that was decomposed.
    """

    perms: np.ndarray
    weights: np.ndarray
    carried: np.ndarray
    padded: np.ndarray

    @property
    def num_rounds(self) -> int:
        return len(self.weights)

    def reconstruct(self) -> np.ndarray:
        """``sum_r carried[r]`` as a matrix: equals the decomposed matrix."""
        s = self.padded.shape[0]
        out = np.zeros((s, s))
        rows = np.arange(s)
        for r in range(self.num_rounds):
            np.add.at(out, (rows, self.perms[r]), self.carried[r])
        return out


def pad_to_doubly_balanced(matrix: np.ndarray) -> np.ndarray:
    """Add non-negative padding so that every row and column sums to the largest line sum.

    Greedy (the north-west corner rule on the row and column deficits): ``matrix + pad``.
    """
    m = np.asarray(matrix, dtype=np.float64)
    target = max(m.sum(axis=1).max(initial=0.0), m.sum(axis=0).max(initial=0.0))
    rdef = target - m.sum(axis=1)
    cdef = target - m.sum(axis=0)
    out = m.copy()
    i = j = 0
    s = m.shape[0]
    while i < s and j < s:
        if rdef[i] <= 1e-12 * max(target, 1.0):
            i += 1
            continue
        if cdef[j] <= 1e-12 * max(target, 1.0):
            j += 1
            continue
        x = min(rdef[i], cdef[j])
        out[i, j] += x
        rdef[i] -= x
        cdef[j] -= x
    return out


def birkhoff_von_neumann(matrix: np.ndarray, *, rtol: float = 1e-9) -> BvnDecomposition:
    """Decompose a non-negative square matrix into weighted permutations (incast-free rounds).

    Args:
        matrix: ``[s, s]`` non-negative (e.g. bytes from server i to server j).
        rtol: Entries below ``rtol`` times the line sum count as zero.

    Returns:
        The `BvnDecomposition`; its rounds carry exactly ``matrix``.

    >>> d = birkhoff_von_neumann(np.array([[0, 2.0], [1.0, 0]]))
    >>> d.perms.tolist(), np.allclose(d.reconstruct(), [[0, 2], [1, 0]])
    ([[1, 0]], True)
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ConfigError(f"BvN needs a square matrix, got shape {m.shape} (matrix)")
    if np.any(~np.isfinite(m)) or np.any(m < 0):
        raise ConfigError("BvN needs finite non-negative entries (matrix)")
    s = m.shape[0]
    padded = pad_to_doubly_balanced(m)
    rest = padded.copy()
    real = m.copy()
    total = float(padded.sum(axis=1).max(initial=0.0))
    tol = rtol * max(total, 1e-300)
    rows = np.arange(s)
    perms, weights, carried = [], [], []
    limit = (s - 1) ** 2 + 2
    while total > 0 and rest.max() > tol:
        if len(perms) > limit:
            raise SolverError(f"BvN did not converge in {limit} rounds (matrix of {s} servers)")
        support = rest > tol
        # a perfect matching inside the support exists (Birkhoff); prefer large entries
        cost = np.where(support, -rest, total * 1e6 + 1.0)
        _, cols = linear_sum_assignment(cost)
        if not np.all(support[rows, cols]):
            raise SolverError("BvN found no permutation inside the support (matrix not balanced)")
        w = float(rest[rows, cols].min())
        rest[rows, cols] -= w
        rest[rest < tol] = 0.0
        take = np.minimum(real[rows, cols], w)
        take[rows == cols] = 0.0
        real[rows, cols] -= take
        perms.append(cols.astype(np.int64))
        weights.append(w)
        carried.append(take)
    # what rounding left (below tol) goes into the round that already uses the entry
    left = np.argwhere(real > 0)
    for i, j in left:
        for r in range(len(perms)):
            if perms[r][i] == j:
                carried[r][i] += real[i, j]
                real[i, j] = 0.0
                break
    if np.any(real > tol):
        raise SolverError("BvN rounds do not cover the matrix (internal error)")
    if not perms:
        return BvnDecomposition(perms=np.zeros((0, s), np.int64), weights=np.zeros(0),
                                carried=np.zeros((0, s)), padded=padded)
    return BvnDecomposition(perms=np.asarray(perms), weights=np.asarray(weights),
                            carried=np.asarray(carried), padded=padded)


def bvn(coll: Collective, *, fabric: Fabric | None = None, protocol: str = "simple",
        chunks: int | None = None) -> Schedule:
    """FLASH-style AllToAll(v) (module docstring): intra-server balance, BvN rounds, delivery.

    Needs the fabric (to group ranks by server); every server must hold the same number of ranks.
    ``chunks`` is ignored.
    """
    if coll.op not in (Op.ALLTOALL, Op.ALLTOALLV):
        raise ConfigError(f"algorithm 'bvn' does not implement op {coll.op.value!r}; it implements "
                          "alltoall, alltoallv (op, algorithm)")
    if fabric is None:
        raise ConfigError("algorithm 'bvn' needs the fabric to group ranks by server (fabric)")
    b = _Builder(coll, "bvn", protocol, fabric)
    d = coll.pair_matrix_bytes()
    if coll.n < 2:
        return b.build()
    grid = server_grid(coll, fabric)  # [servers, m] rank ids
    g, m = grid.shape
    server_of = np.empty(coll.n, np.int64)
    local_of = np.empty(coll.n, np.int64)
    server_of[grid.ravel()] = np.repeat(np.arange(g), m)
    local_of[grid.ravel()] = np.tile(np.arange(m), g)
    same = server_of[:, None] == server_of[None, :]
    inter = np.where(same, 0.0, d)
    # phase 1 (with the intra-server part of the AllToAll itself): rank a hands local GPU k
    # 1/m of everything it owes other servers, and sends its own server's share directly
    p1 = np.zeros((coll.n, coll.n))
    owe = inter.sum(axis=1) / m  # per rank, bytes to each local GPU
    for srv in range(g):
        ranks = grid[srv]
        p1[np.ix_(ranks, ranks)] += owe[ranks][:, None]
    p1 += np.where(same, d, 0.0)
    np.fill_diagonal(p1, 0.0)
    i, j = np.nonzero(p1)
    last = b.chain(i, j, p1[i, j]) if i.size else None
    # phase 2: BvN rounds on the server matrix, rail-aligned
    big = np.zeros((g, g))
    np.add.at(big, (server_of[:, None].repeat(coll.n, 1), server_of[None, :].repeat(coll.n, 0)), inter)
    dec = birkhoff_von_neumann(big)
    for r in range(dec.num_rounds):
        a = np.flatnonzero(dec.carried[r] > 0)
        if not a.size:
            continue
        to = dec.perms[r][a]
        src = grid[a].ravel()
        dst = grid[to].ravel()
        size = np.repeat(dec.carried[r][a] / m, m)
        last = b.add(src, dst, size, () if last is None else (last,))
    # phase 3: local GPU k of server B hands rank b what it received for b: 1/m of all inbound
    inbound = inter.sum(axis=0) / m
    p3 = np.zeros((coll.n, coll.n))
    for srv in range(g):
        ranks = grid[srv]
        p3[np.ix_(ranks, ranks)] += inbound[ranks][None, :]
    np.fill_diagonal(p3, 0.0)
    i, j = np.nonzero(p3)
    if i.size:
        b.add(i, j, p3[i, j], () if last is None else (last,))
    return b.build()
