"""The JCT model's second tier: the pods' uplinks to an oversubscribed core."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flowherd.collectives.ops import Op, busbw_factor
from flowherd.fabric.generators import clos3
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.predict import JobProfile, _server_of, core_tier, evaluate, fabric_view, profile_job
from flowherd.workload import TrainingJob

NIC_BYTES_PER_S = 50e9  # 400 Gbps
SERVERS_PER_TOR, TORS_PER_POD, CORE_OVERSUBSCRIPTION = 4, 3, 8


def _two_pods():
    # 2 pods of 3 ToR groups of 4 servers (8 H100, 8 NICs of 400 Gbps each), ToRs at 1:1, 8:1
    # from the pods' spines to the core
    return clos3(servers=24, servers_per_tor=SERVERS_PER_TOR, tors_per_pod=TORS_PER_POD,
                 spines_per_pod=2, cores=2, spine_oversubscription=CORE_OVERSUBSCRIPTION)


def _ring_job(name: str, size_bytes: float, ranks: int = 16, rings: int = 8,
              compute_s: float = 0.01) -> JobProfile:
    """A data-parallel job whose iteration is ``compute_s`` then one ring AllReduce of
    ``size_bytes`` over ``ranks`` GPUs on two servers, as ``rings`` rings (one per NIC), each
    carrying ``size_bytes / rings``: alone, every ring link carries busbw x size / rings at the
    NIC's rate, and each ring crosses a cut between the servers once per direction."""
    ring_s = busbw_factor(Op.ALLREDUCE, ranks) * size_bytes / rings / NIC_BYTES_PER_S
    return JobProfile(name=name, kind="training", world_size=ranks, unit_gpus=8, gpu_type="h100",
                      submit_s=0.0, iterations=10, compute_only_s=compute_s, single_server_s=None,
                      base_s=compute_s, network_s=ring_s, network_busy_s=ring_s,
                      leaf_uplink_bytes=busbw_factor(Op.ALLREDUCE, ranks) * size_bytes)


def test_the_view_holds_each_pods_uplinks_to_the_core():
    v = fabric_view(_two_pods())
    tor_up = SERVERS_PER_TOR * 8 * NIC_BYTES_PER_S  # 1:1
    assert v.num_pods == 2 and core_tier(v)
    np.testing.assert_allclose(v.leaf_uplink_bytes_per_s, tor_up)
    np.testing.assert_allclose(v.pod_uplink_bytes_per_s, TORS_PER_POD * tor_up / CORE_OVERSUBSCRIPTION)


def test_rings_crossing_an_oversubscribed_core_are_slowed_by_the_closed_form_ratio():
    # three ring jobs of two servers each. Across pods (server in ToR j and ToR 3 + j): every ToR
    # uplink carries one job's 8 rings (8 x 50 GB/s of 1.6 TB/s), but each pod's 600 GB/s to the
    # core carries the 3 x 8 rings; shared fairly, a ring gets 600 / 24 = 25 GB/s against its
    # NIC's 50, so each ring, and the AllReduce, takes 50 / 25 = 2.0x its time alone (ring time
    # = busbw x size / rings / bandwidth of the ring's bottleneck link; Patarasuk and Yuan, JPDC
    # 2009). Inside one pod (ToRs 0+1, 0+2, 3+4): no link over its capacity, the rings alone.
    v = fabric_view(_two_pods())
    jobs = [_ring_job(f"r{k}", 1e9) for k in range(3)]

    def on(*servers):
        return np.concatenate([v.gpus_of(s) for s in servers])

    across = [on(4 * j, 4 * (3 + j)) for j in range(3)]
    inside = [on(0, 4), on(1, 8), on(12, 16)]
    a = evaluate(v, jobs, across)
    b = evaluate(v, jobs, inside)
    rings = 3 * 8
    ratio = rings * NIC_BYTES_PER_S / float(v.pod_uplink_bytes_per_s[0])
    assert ratio == pytest.approx(2.0)
    ring_s = jobs[0].network_s
    np.testing.assert_allclose(a.iteration_s - jobs[0].base_s, ratio * ring_s, rtol=1e-12)
    np.testing.assert_allclose(b.iteration_s - jobs[0].base_s, ring_s, rtol=1e-12)
    np.testing.assert_allclose(a.pod_load, 2.0)
    assert a.pods.tolist() == [2, 2, 2] and b.pods.tolist() == [1, 1, 1]
    # one ring job alone across the pods: 8 rings on 600 GB/s, under capacity: not slowed
    one = evaluate(v, jobs[:1], across[:1])
    assert one.iteration_s[0] == pytest.approx(jobs[0].base_s + ring_s)
    # the view without its core tier (the model before it) predicts the rings alone
    flat = dataclasses.replace(v, pod_uplink_bytes_per_s=None)
    np.testing.assert_allclose(evaluate(flat, jobs, across).iteration_s, b.iteration_s)


def test_a_one_pod_fabric_is_predicted_as_without_the_core_tier():
    # a leaf-spine is one pod: no core tier, and every prediction is bit for bit the one of a
    # view without pods (the Kalos families' plans do not move)
    f = leaf_spine(servers=24, gpus_per_server=8, leaves=6, spines=2, oversubscription=8)
    v = fabric_view(f)
    assert v.num_pods == 1 and not core_tier(v) and np.isinf(v.pod_uplink_bytes_per_s).all()
    jobs = [profile_job(TrainingJob(model="llama3-8b", gpus=32, tp=8, pp=1, dp=4, name=f"j{k}",
                                    global_batch=16, iterations=5), v) for k in range(3)]
    gpus = [np.concatenate([v.gpus_of(s) for s in ss]) for ss in ([0, 4, 8, 12], [1, 5, 9, 13],
                                                                   [2, 3, 16, 20])]
    flat = dataclasses.replace(v, leaf_pod=None, pod_uplink_bytes_per_s=None)
    for start in (None, [0.0, 0.3, 0.6]):
        a, b = evaluate(v, jobs, gpus, start_s=start), evaluate(flat, jobs, gpus, start_s=start)
        assert np.array_equal(a.jct_s, b.jct_s) and np.array_equal(a.stretch, b.stretch)
        assert a.stretch.max() > 1.0  # the leaf tier does charge these jobs


def test_the_upper_levels_core_charge_is_the_models_extra_run_time_from_the_core():
    # beside two ring jobs across the pods, a third across them runs 2.0x its rings' time (the
    # closed form above): 10 iterations x 1 ring time more; inside one pod, nothing
    from flowherd.planning.bilevel import core_charge_s

    v = fabric_view(_two_pods())
    jobs = [_ring_job(f"r{k}", 1e9) for k in range(3)]

    def on(*servers):
        return np.concatenate([v.gpus_of(s) for s in servers])

    others = [(jobs[0], on(0, 12)), (jobs[1], on(4, 16))]
    ring_s = jobs[2].network_s
    assert core_charge_s(v, jobs[2], on(8, 20), others) == pytest.approx(10 * ring_s, rel=1e-12)
    assert core_charge_s(v, jobs[2], on(8, 9), others) == 0.0
    flat = fabric_view(leaf_spine(servers=24, gpus_per_server=8, leaves=6, spines=2, oversubscription=8))
    assert core_charge_s(flat, jobs[2], np.concatenate([flat.gpus_of(0), flat.gpus_of(4)]), []) == 0.0


def test_server_map_of_a_view_made_where_a_freed_view_was_is_its_own():
    """Each GPU's server is cached per view object: a view freed and another made at its address
    (CPython reuses it at once for an object of the same size: a 32-GPU fabric's temporary view,
    then a 24-GPU one's) must get its own map, not the freed view's."""
    fa = leaf_spine(servers=4, gpus_per_server=8, leaves=2, spines=1, oversubscription=1)
    fb = leaf_spine(servers=6, gpus_per_server=4, leaves=2, spines=1, oversubscription=1)
    a, b = fabric_view(fa), fabric_view(fb)
    want = np.repeat(np.arange(6), 4)[np.argsort(b.gpu_order)]  # server of each GPU of fb
    assert np.array_equal(want, np.asarray(fb.gpu_server))
    for _ in range(20):
        va = dataclasses.replace(a, pod_uplink_bytes_per_s=None)
        assert _server_of(va).size == 32
        del va
        vb = dataclasses.replace(b, pod_uplink_bytes_per_s=None)
        assert np.array_equal(_server_of(vb), want)
        del vb
