"""Placers: first-fit takes the lowest free ids; packed uses the fewest servers, then leaves."""

import numpy as np
import pytest

from flowherd.cluster.placement import PLACERS, FirstFitPlacer, PackedPlacer, make_placer, server_leaf
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric.generators import leaf_spine
from flowherd.workload import TrainingJob


def job(n: int) -> TrainingJob:
    return TrainingJob(model="llama3-8b", gpus=n, tp=1)


@pytest.fixture(scope="module")
def fab():
    # 8 servers of 4 GPUs, 2 servers per leaf (4 leaves)
    return leaf_spine(servers=8, gpus_per_server=4, leaves=4, spines=2)


def test_server_leaf_groups_servers_by_their_leaf(fab):
    leaf = server_leaf(fab)
    assert leaf.shape == (8,)
    assert len(set(leaf.tolist())) == 4
    assert leaf[0] == leaf[1] and leaf[2] == leaf[3] and leaf[0] != leaf[2]


def test_first_fit_takes_lowest_free_ids(fab):
    free = np.ones(fab.num_gpus, bool)
    free[[0, 2, 5]] = False
    got = FirstFitPlacer().place(job(4), free, fab)
    assert got.tolist() == [1, 3, 4, 6]


def test_every_placer_returns_none_when_too_few_gpus_are_free(fab):
    free = np.zeros(fab.num_gpus, bool)
    free[:3] = True
    for name in PLACERS:
        assert make_placer(name).place(job(4), free, fab) is None


def test_every_placer_returns_distinct_free_gpus(fab):
    rng = np.random.default_rng(1)
    for name in PLACERS:
        p = make_placer(name)
        for _ in range(20):
            free = rng.random(fab.num_gpus) < 0.6
            n = int(rng.integers(1, max(2, free.sum())))
            got = p.place(job(n), free, fab)
            assert got is not None and len(got) == n
            assert len(set(got.tolist())) == n and free[got].all()


def test_packed_fits_a_small_job_in_the_fullest_server_that_holds_it(fab):
    free = np.ones(fab.num_gpus, bool)
    free[0:2] = False  # server 0 has 2 free
    free[4:5] = False  # server 1 has 3 free
    got = PackedPlacer().place(job(3), free, fab)
    assert set(fab.gpu_server[got].tolist()) == {1}
    got = PackedPlacer().place(job(2), free, fab)
    assert set(fab.gpu_server[got].tolist()) == {0}


def test_packed_uses_fewest_servers_and_leaves(fab):
    free = np.ones(fab.num_gpus, bool)
    # leave 1 free GPU on servers 0, 2, 4 (one per leaf 0, 1, 2) and servers 6-7 fully free
    for s in (0, 2, 4):
        free[4 * s + 1: 4 * s + 4] = False
    free[4:8] = False  # server 1 full
    free[12:16] = False  # server 3 full
    free[20:24] = False  # server 5 full
    got = PackedPlacer().place(job(8), free, fab)
    # first-fit would scatter over 5 servers; packed takes the two free servers of leaf 3
    assert sorted(set(fab.gpu_server[got].tolist())) == [6, 7]
    ff = FirstFitPlacer().place(job(8), free, fab)
    assert len(set(fab.gpu_server[ff].tolist())) > 2


def test_unknown_placer_names_the_closest():
    with pytest.raises(UnknownNameError, match="first-fit"):
        make_placer("first-fti")
    with pytest.raises(ConfigError, match="placer"):
        make_placer(42)


def test_spread_takes_whole_servers_one_leaf_after_the_other(fab):
    # 12 GPUs = 3 servers of 4: one server in each of three leaves (never two in one leaf while a
    # leaf has none), so every ring of the job crosses the spine
    free = np.ones(fab.num_gpus, bool)
    got = make_placer("spread").place(job(12), free, fab)
    servers = np.unique(fab.gpu_server[got])
    assert got.size == 12 and servers.size == 3
    leaf = server_leaf(fab)
    assert np.unique(leaf[servers]).size == 3
    # a job that fits in a server stays in one (best fit, as packed)
    free[[0, 1]] = False  # server 0 has 2 free GPUs left
    one = make_placer("spread").place(job(2), free, fab)
    assert np.unique(fab.gpu_server[one]).size == 1 and set(one.tolist()) == {2, 3}


def test_a_placer_reused_on_a_fabric_made_where_a_freed_one_was_places_as_a_new_one():
    """The packed placer caches each server's leaf per fabric object: a fabric freed and another
    made at its address (CPython reuses it at once for an object of the same size) must get its
    own leaves, so the reused placer places as a new one does."""
    reused = PackedPlacer()
    rng = np.random.default_rng(0)
    for _ in range(10):
        fa = leaf_spine(servers=4, gpus_per_server=8, leaves=2, spines=1, oversubscription=1)
        assert reused.place(job(8), np.ones(32, bool), fa) is not None
        del fa
        fb = leaf_spine(servers=8, gpus_per_server=8, leaves=4, spines=1, oversubscription=1)
        free = np.repeat(rng.random(8) < 0.6, 8) | (np.arange(64) >= 48)  # servers 6, 7 free at least
        for n in (8, 16, 24):
            got, want = reused.place(job(n), free, fb), PackedPlacer().place(job(n), free, fb)
            assert (got is None and want is None) or np.array_equal(got, want)
        del fb
