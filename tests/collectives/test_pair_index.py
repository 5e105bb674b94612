"""`schedule.pair_index`: the distinct (src, dst) pairs of a schedule's flows, marked in an
array where they are few, sorted where not: the same pairs and indices either way."""

import numpy as np

from flowherd.collectives.schedule import pair_index


def _by_unique(src, dst):
    width = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    uniq, inv = np.unique(src.astype(np.int64) * width + dst, return_inverse=True)
    return uniq, inv.reshape(-1), width


def test_marked_pairs_are_numpy_unique_bit_for_bit():
    rng = np.random.default_rng(0)
    for n, flows in ((8, 100), (64, 5000), (1024, 300_000)):  # all three marked in an array
        src = rng.integers(0, n, flows).astype(np.int32)
        dst = rng.integers(0, n, flows).astype(np.int32)
        got, want = pair_index(src, dst), _by_unique(src, dst)
        assert got[2] == want[2]
        assert got[0].dtype == want[0].dtype and np.array_equal(got[0], want[0])
        assert got[1].dtype == want[1].dtype and np.array_equal(got[1], want[1])


def test_sparse_pairs_of_a_wide_fabric_are_sorted_not_marked():
    src = np.array([5000, 3, 3, 5000], np.int32)
    dst = np.array([7, 9000, 9000, 7], np.int32)
    uniq, inv, width = pair_index(src, dst)
    assert width == 9001
    assert np.array_equal(uniq, [3 * 9001 + 9000, 5000 * 9001 + 7])
    assert np.array_equal(inv, [1, 0, 0, 1])


def test_no_flows_no_pairs():
    uniq, inv, width = pair_index(np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert uniq.size == 0 and inv.size == 0 and width == 1
