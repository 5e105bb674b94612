"""The isolated bound: no controller beats it (flowherd.control.bound)."""

import numpy as np
import pytest

from flowherd.cluster.simulate import JobRequest, simulate_cluster
from flowherd.control import make_controller
from flowherd.control.bound import IterationBound, coflow_bound_s, isolated_jct_s, queue_bound_jct_s
from flowherd.engine.network import use_network
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.fabric import leaf_spine

# one tp 8 x dp 2 job over two leaves and four spines: its 8 DP flows per direction cross the
# leaf-spine tier, where ECMP hashes them onto the 4 spines unevenly
ONE_JOB = {"name": "t", "seed": 0,
           "fabric": {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "gpu": "h100",
                      "nic_bandwidth": "100Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 2, "spines": 4,
                      "oversubscription": 1, "link_latency": "1us"},
           "workload": {"jobs": [{"name": "a", "model": "llama3-8b", "gpus": 16,
                                  "parallelism": {"tp": 8, "dp": 2}, "seq_len": 4096, "micro_batch": 1,
                                  "global_batch": 4, "iterations": 4,
                                  "submit": "0s"}]},
           "placement": {"method": "spread"}, "network": "roce",
           "simulation": {"fidelity": "collective", "horizon": "60s", "routing": "ecmp"}}


def test_a_coflow_needs_its_bytes_over_its_busiest_unavoidable_link():
    fab = leaf_spine(servers=4, gpus_per_server=1, leaves=2, spines=2, nic_bandwidth_bytes_per_s=1e9)
    # 2 GB from GPU 0 (leaf 0) to GPU 2 (leaf 1): its 1 GB/s NIC carries it all (2 s); the leaf's
    # two uplinks (1:1: 2 x 1 GB/s of NICs over 2 spines, 1 GB/s each) split it and do not bind
    assert coflow_bound_s(fab, [0], [2], [2e9]) == pytest.approx(2.0, rel=1e-6)
    # two senders on leaf 0 to two receivers on leaf 1, 1 GB each: each NIC 1 s, and the 2 GB
    # over the leaf's 2 GB/s of uplinks 1 s
    assert coflow_bound_s(fab, [0, 1], [2, 3], [1e9, 1e9]) == pytest.approx(1.0, rel=1e-6)
    memo: dict = {}
    a = coflow_bound_s(fab, [0, 1], [2, 3], [1e9, 3e9], memo=memo)
    assert coflow_bound_s(fab, [0, 1], [2, 3], [2e9, 6e9], memo=memo) == pytest.approx(2 * a)


def test_no_path_controller_beats_the_bound_where_it_beats_the_ecmp_solo_time():
    # the ECMP solo time (the old "isolated bound") is beaten by choosing paths; the LP bound is not
    for seed in (0, 2):
        sc = scenario_from_mapping({**ONE_JOB, "seed": seed})
        req = [JobRequest(name=j.name, tenant=j.tenant, spec=j, submit_s=0.0) for j in sc.jobs]
        per = {}
        for name in ("none", "adaptive", "flowherd"):
            with use_network(sc.network):
                r = simulate_cluster(sc.fabric, req, placer="spread", fidelity="collective", horizon_s=60.0,
                                     router="ecmp", seed=seed,
                                     controller=None if name == "none" else make_controller(name))
            per[name] = (np.asarray(r.jobs[0].iteration_s), r.jobs[0].gpus)
        bound = IterationBound(sc.fabric).job_s(sc.jobs[0], per["none"][1])
        assert per["adaptive"][0].mean() < 0.9 * per["none"][0].mean()  # paths beat ECMP alone
        for name, (it, _) in per.items():
            assert it.min() >= bound * (1 - 1e-9), name
        assert per["adaptive"][0].min() == pytest.approx(bound, rel=0.02)  # and the bound is tight


def test_a_job_that_never_started_is_bounded_by_its_compute_alone():
    sc = scenario_from_mapping(ONE_JOB)
    b = IterationBound(sc.fabric)
    spec = sc.jobs[0]
    assert b.job_s(spec, None) == pytest.approx(spec.iteration_graph().critical_path_s())
    assert b.job_s(spec, None) < b.job_s(spec, tuple(range(16)))


def test_isolated_and_queue_bounds_censor_at_the_horizon_and_keep_the_fifo_queue():
    # a: 8 GPUs, 10 x 1 s from 0; b: 8 GPUs from 1 s, 20 x 1 s; 8 GPUs in all, horizon 25 s
    jobs = [{"submit_s": 0.0, "gpus": 8, "iterations": 10, "iteration_s": 1.0},
            {"submit_s": 1.0, "gpus": 8, "iterations": 20, "iteration_s": 1.0},
            {"submit_s": 30.0, "gpus": 8, "iterations": 1, "iteration_s": 1.0}]  # after the horizon
    assert isolated_jct_s(jobs, 25.0) == pytest.approx((10.0 + 20.0) / 2)
    assert queue_bound_jct_s(jobs, 25.0, 8) == pytest.approx((10.0 + 24.0) / 2)  # b waits for a
