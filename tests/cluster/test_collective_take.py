"""`sim.collective._take`: a schedule's flows' routes gathered from its pairs' routes; routes
of one length are gathered as rows of a 2-d view, the same arrays as the CSR gather."""

import numpy as np
import pytest

from flowherd.cluster.collective import _take
from flowherd.routing.base import Routes


def _csr_gather(routes, rows):
    lo, hi = routes.ptr[rows], routes.ptr[rows + 1]
    ptr = np.zeros(rows.size + 1, np.int64)
    np.cumsum(hi - lo, out=ptr[1:])
    at = np.repeat(lo - ptr[:-1], hi - lo) + np.arange(int(ptr[-1]))
    return ptr, routes.link[at], routes.frac[at], routes.latency_s[rows]


@pytest.mark.parametrize("lengths", [[2] * 40, [1] * 7, [5] * 13, [2, 3, 2, 0, 4] * 6, [0] * 5])
def test_rows_of_one_length_are_gathered_as_the_csr_gather(lengths):
    rng = np.random.default_rng(len(lengths))
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    routes = Routes(ptr=ptr, link=rng.integers(0, 90, int(ptr[-1])).astype(np.int32),
                    frac=rng.uniform(0.1, 1.0, int(ptr[-1])), latency_s=rng.random(len(lengths)))
    rows = rng.integers(0, len(lengths), 200)
    got = _take(routes, rows)
    for a, b in zip((got.ptr, got.link, got.frac, got.latency_s), _csr_gather(routes, rows),
                    strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
