"""`flowherd.engine.network.rates_core`: the event loop's rate update of the congestion model
without allocation gives the reference's numbers (its sorts here; the whole update against the
Python hook's `kernels.rates_pass` in tests/engine/network/test_network_loop.py, and a roce cluster run in
tests/engine/test_flow_heap.py)."""

import numpy as np
import pytest

from flowherd.engine.network.rates_core import _argsort_stable, _sort_ints


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 33, 100, 1000, 5000])
def test_the_merge_sort_is_numpys_stable_argsort(n):
    rng = np.random.default_rng(n)
    keys = rng.integers(0, max(1, n // 4), n).astype(np.int64)  # many ties: stability shows
    order, tmp = np.empty(n, np.int64), np.empty(n, np.int64)
    _argsort_stable(keys, n, order, tmp)
    assert np.array_equal(order, np.argsort(keys, kind="mergesort"))


def test_a_prefix_is_sorted_and_the_rest_untouched():
    keys = np.array([5, 3, 3, 1, 9, 0], np.int64)
    order, tmp = np.full(6, -7, np.int64), np.empty(6, np.int64)
    _argsort_stable(keys, 4, order, tmp)
    assert order.tolist() == [3, 1, 2, 0, -7, -7]


def test_distinct_integers_sorted():
    rng = np.random.default_rng(3)
    a = rng.permutation(10_000).astype(np.int64)[:700]
    out = np.empty(700, np.int64)
    _sort_ints(a, 700, np.empty(700, np.int64), np.empty(700, np.int64), out)
    assert np.array_equal(out, np.sort(a))
