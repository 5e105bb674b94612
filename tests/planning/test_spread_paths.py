"""The routing LP's path set of a pair with more shortest paths than it keeps."""

from __future__ import annotations

import numpy as np

from flowherd.fabric.generators import clos3
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.spread_paths import spread_indices, spread_paths
from flowherd.routing.paths import path_count, shortest_paths


def test_the_indices_are_distinct_and_cover_the_set_evenly():
    for n, limit in ((512, 16), (17, 16), (40, 16), (64, 16), (1000, 7)):
        for offset in (0, 5, n - 1):
            idx = spread_indices(n, limit, offset)
            assert len(idx) == limit == len(set(idx)) and all(0 <= i < n for i in idx)
    assert spread_indices(8, 16, 3) == list(range(8))
    # 512 = 8 x 8 x 8 (the choices at the ToR, the PSW and the core switch of a 3-tier Clos
    # between pods), step 33, any offset: every ToR uplink 1-3 times in 16 paths, every last PSW
    # twice, and 16 distinct PSW -> core links and 16 distinct core -> PSW links
    for offset in range(512):
        idx = np.array(spread_indices(512, 16, offset))
        first, middle, last = idx // 64, idx // 8 % 8, idx % 8
        assert np.bincount(first, minlength=8).min() >= 1 and np.bincount(first).max() <= 3
        assert np.bincount(last, minlength=8).tolist() == [2] * 8
        assert len(set(zip(first.tolist(), middle.tolist(), strict=True))) == 16
        assert len(set(zip(middle.tolist(), last.tolist(), strict=True))) == 16


def test_a_pair_across_pods_spreads_over_the_uplinks_of_its_tor_and_its_pod():
    # 2 pods of 2 ToRs, 4 spines per pod, 64 cores in 4 planes of 16 (spine j of a pod links to
    # plane j): between pods 4 x 16 = 64 shortest paths. The first 16 in link-id order all
    # leave the ToR by one of its 4 uplinks (to spine 0); the spread 16 use all 4
    f = clos3(servers=8, gpus_per_server=1, servers_per_tor=2, tors_per_pod=2, spines_per_pod=4, cores=64)
    a, b = 0, 7
    assert path_count(f, a, b) == 64
    every = {tuple(p.tolist()) for p in shortest_paths(f, a, b)}
    first = shortest_paths(f, a, b, limit=16)
    spread = spread_paths(f, a, b, 16)
    assert len({tuple(p.tolist()) for p in spread}) == 16
    assert all(tuple(p.tolist()) in every for p in spread)
    hop = 2  # 0 GPU -> NIC, 1 NIC -> ToR, 2 ToR -> spine, 3 spine -> core
    assert len({int(p[hop]) for p in first}) == 1 and len({int(p[hop + 1]) for p in first}) == 16
    assert len({int(p[hop]) for p in spread}) == 4 and len({int(p[hop + 1]) for p in spread}) == 16
    # the same pair, the same paths (a hash of the pair, no random state)
    assert all(np.array_equal(x, y) for x, y in zip(spread_paths(f, a, b, 16), spread, strict=True))


def test_a_pair_with_few_paths_keeps_them_all_in_link_id_order():
    f = leaf_spine(servers=4, gpus_per_server=1, leaves=2, spines=8)
    got, want = spread_paths(f, 0, 3, 16), shortest_paths(f, 0, 3, limit=16)
    assert len(got) == 8 and all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))
