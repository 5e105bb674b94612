"""Concurrent-traffic estimation: traffic matrices, link profiles, per-job traffic and time profile."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.planning.traffic import TrafficMatrix, job_traffic, link_profile, network_pairs
from flowherd.workload.training import TrainingJob

TINY = dict(name="tiny", layers=4, hidden=1024, heads=8, ffn_hidden=4096, vocab=32000)


def test_traffic_matrix_rejects_bad_input_naming_the_field():
    with pytest.raises(ConfigError, match="size_bytes"):
        TrafficMatrix(src=np.array([0]), dst=np.array([1]), size_bytes=np.array([-1.0]))
    with pytest.raises(ConfigError, match="equal lengths"):
        TrafficMatrix(src=np.array([0, 1]), dst=np.array([1]), size_bytes=np.array([1.0]))
    with pytest.raises(ConfigError, match="integer"):
        TrafficMatrix(src=np.array([0.5]), dst=np.array([1]), size_bytes=np.array([1.0]))


def test_aggregated_merges_duplicates_and_drops_self_pairs():
    t = TrafficMatrix(src=np.array([0, 0, 2, 1]), dst=np.array([1, 1, 2, 0]),
                      size_bytes=np.array([1.0, 2.0, 5.0, 4.0]))
    a = t.aggregated()
    got = sorted(zip(a.src.tolist(), a.dst.tolist(), a.size_bytes.tolist(), strict=True))
    assert got == [(0, 1, 3.0), (1, 0, 4.0)]


def test_link_profile_conserves_bytes_times_hops():
    # leaf-spine, GPUs on different leaves: 6 links per path (GPU-NIC-leaf-spine-leaf-NIC-GPU);
    # spraying halves the bytes over the two spines, so total link bytes = size * 6
    f = leaf_spine(servers=4, leaves=2, spines=2)
    t = TrafficMatrix(src=np.array([0]), dst=np.array([3]), size_bytes=np.array([10.0]))
    prof = link_profile(f, t, "spray")
    assert prof.sum() == pytest.approx(60.0)
    assert sorted(set(np.round(prof, 9).tolist())) == [0.0, 5.0, 10.0]
    ecmp = link_profile(f, t, "ecmp")
    assert ecmp.sum() == pytest.approx(60.0) and ecmp.max() == pytest.approx(10.0)
    assert np.count_nonzero(ecmp) == 6


def test_job_traffic_allreduce_of_two_moves_twice_the_size():
    # AllReduce over 2 ranks moves 2S bytes in total whatever the algorithm (ring: 2 steps of S/2
    # each way; tree: S up, S down), so each group's bytes are twice its nccl-tests size.
    f = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    job = TrainingJob(model=TINY, gpus=4, tp=2, gpu="h100", seq_len=1024)
    jt = job_traffic(job, [0, 1, 4, 5], f)
    sizes = job.iteration_graph().bytes_by_group()
    assert set(jt.phases) == {"tp", "dp"}
    for grp in ("tp", "dp"):
        assert jt.phases[grp].total_bytes() == pytest.approx(2 * sizes[grp])
    tp = jt.phases["tp"]
    assert np.all(f.gpu_server[tp.src] == f.gpu_server[tp.dst])  # TP groups stay in a server
    dp = jt.phases["dp"]
    assert np.all(f.gpu_server[dp.src] != f.gpu_server[dp.dst])  # the DP peers are a server apart
    assert jt.network(f).total_bytes() == pytest.approx(2 * sizes["dp"])


def test_job_traffic_time_profile_is_consistent():
    f = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    job = TrainingJob(model=TINY, gpus=8, tp=2, pp=2, gpu="h100", seq_len=1024)
    jt = job_traffic(job, range(8), f)
    assert set(jt.phases) == {"tp", "pp", "dp"}
    assert jt.iteration_s > jt.compute_only_s > 0
    for grp, frac in jt.active_fraction.items():
        assert 0 < frac <= 1
        assert jt.comm_busy_s[grp] == pytest.approx(frac * jt.iteration_s)
    # the DP AllReduce of a stage waits for its backward pass: it cannot be active all the time
    assert jt.active_fraction["dp"] < 1
    assert jt.mean_rate().total_bytes() == pytest.approx(jt.total().total_bytes() / jt.iteration_s)


def test_job_traffic_rejects_gpus_outside_the_fabric():
    f = leaf_spine(servers=2, gpus_per_server=2, leaves=1, spines=1)
    job = TrainingJob(model=TINY, gpus=4, tp=2, gpu="h100", seq_len=1024)
    with pytest.raises(ConfigError, match="GPU 9"):
        job_traffic(job, [0, 1, 2, 9], f)


def test_job_link_profile_averages_to_the_iteration_bytes():
    # rate while active x active fraction x iteration time = the group's bytes on the link
    f = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    job = TrainingJob(model=TINY, gpus=8, tp=2, pp=2, gpu="h100", seq_len=1024)
    jt = job_traffic(job, range(8), f)
    prof = jt.link_profile(f, "spray")
    assert set(prof) == set(jt.phases)
    for grp, (rate, frac) in prof.items():
        per_iteration = link_profile(f, jt.phases[grp], "spray")
        assert rate * frac * jt.iteration_s == pytest.approx(per_iteration, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("wire", [False, True])
def test_network_pairs_are_job_traffics_scale_out_pairs_bit_for_bit(wire):
    # the routing LP's fast path: the same pairs and the same sums as the full time profile, on
    # GPUs scattered so that TP, PP and DP groups cross servers in several ways
    f = leaf_spine(servers=8, gpus_per_server=2, leaves=2, spines=2)
    job = TrainingJob(model=TINY, gpus=8, tp=2, pp=2, gpu="h100", seq_len=1024)
    for gpus in ([0, 1, 2, 3, 4, 5, 6, 7], [0, 3, 4, 7, 9, 10, 12, 15], [1, 2, 5, 6, 8, 11, 13, 14]):
        ref = job_traffic(job, gpus, f).network(f, wire=wire)
        got = network_pairs(job, gpus, f, wire=wire)
        assert ref.num_pairs > 0
        assert np.array_equal(got.src, ref.src) and np.array_equal(got.dst, ref.dst)
        assert np.array_equal(got.size_bytes, ref.size_bytes)
        assert np.all(f.gpu_server[got.src] != f.gpu_server[got.dst])


def test_network_pairs_of_a_job_inside_one_server_are_empty_and_bad_gpus_are_named():
    f = leaf_spine(servers=2, gpus_per_server=4, leaves=1, spines=1)
    job = TrainingJob(model=TINY, gpus=4, tp=2, gpu="h100", seq_len=1024)
    assert network_pairs(job, [0, 1, 2, 3], f).num_pairs == 0
    assert network_pairs(job, [0, 1, 4, 5], f).num_pairs > 0
    with pytest.raises(ConfigError, match="GPU 9"):
        network_pairs(job, [0, 1, 2, 9], f)
