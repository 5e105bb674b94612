"""Baseline placers and the planner's JCT model."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.placers import PLANNERS
from flowherd.planning.plan import make_plan
from flowherd.planning.predict import evaluate, fabric_view, profile_job
from flowherd.workload import TrainingJob


def _job(name, n, tp=1, iters=3):
    return TrainingJob(model="llama3-8b", gpus=n, tp=tp, name=name, seq_len=2048,
                       global_batch=n // tp * 2, iterations=iters)


def test_registry_holds_the_cli_methods():
    assert set(PLANNERS) == {"random", "packed", "topology", "hetero", "milp", "heuristic", "arnold",
                             "bilevel", "monkeytree"}


def test_packed_is_first_fit():
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2)
    plan = make_plan(f, [_job("a", 3), _job("b", 3)], method="packed")
    assert plan.jobs[0].gpus == (0, 1, 2) and plan.jobs[1].gpus == (3, 4, 5)


def test_topology_uses_fewest_servers_and_leaves():
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2)
    plan = make_plan(f, [_job("a", 3), _job("b", 3), _job("c", 8)], method="topology")
    srv = [set(np.asarray(j.gpus) // 4) for j in plan.jobs]
    assert len(srv[0]) == len(srv[1]) == 1  # a 3-GPU job never straddles servers
    assert {s // 2 for s in srv[2]} in ({0}, {1})  # the 8-GPU job inside one leaf (2 servers a leaf)


def test_hetero_puts_each_job_on_its_gpu_type():
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2,
                   gpu_type=["a100", "h100", "a100", "h100"])
    ja = TrainingJob(model="llama3-8b", gpus=4, name="on-a100", gpu="a100", seq_len=2048, global_batch=8)
    jh = TrainingJob(model="llama3-8b", gpus=8, name="on-h100", gpu="h100", seq_len=2048, global_batch=16)
    plan = make_plan(f, [ja, jh], method="hetero")
    assert {int(g) // 4 for g in plan.jobs[0].gpus} <= {0, 2}
    assert {int(g) // 4 for g in plan.jobs[1].gpus} == {1, 3}


def test_model_orders_spreads_one_server_fastest_then_leaf_then_leaves():
    # the model's monotonicity: a tighter placement is never slower (stretch >= 1, NVLink > NIC)
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=4)
    v = fabric_view(f)
    p = profile_job(_job("a", 4), v)
    one = evaluate(v, [p], [np.arange(4)]).iteration_s[0]
    leaf = evaluate(v, [p], [np.array([0, 1, 4, 5])]).iteration_s[0]
    spread = evaluate(v, [p], [np.array([0, 1, 8, 9])]).iteration_s[0]
    assert one < leaf <= spread
    assert leaf == pytest.approx(p.multi_server_s)


def test_contention_stretch_equals_leaf_load_closed_form():
    # two jobs spread over the same two leaves: rho = (r1 + r2) / C; stretch = max(1, rho);
    # iteration = base + network + busy * (stretch - 1) (compute hides no more than at stretch 1)
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=8)
    v = fabric_view(f)
    p1, p2 = profile_job(_job("a", 4), v), profile_job(_job("b", 4), v)
    res = evaluate(v, [p1, p2], [np.array([0, 1, 8, 9]), np.array([4, 5, 12, 13])])
    rho = (p1.offered_bytes_per_s + p2.offered_bytes_per_s) / v.leaf_uplink_bytes_per_s[0]
    assert res.stretch[0] == pytest.approx(max(1.0, rho))
    sigma = max(1.0, rho)
    assert res.iteration_s[0] == pytest.approx(p1.base_s + p1.network_s
                                               + p1.stretch_slope_s * (sigma - 1.0))
    alone = evaluate(v, [p1], [np.array([0, 1, 8, 9])])
    assert alone.iteration_s[0] < res.iteration_s[0]  # sharing the uplinks slows it down


def test_time_overlap_scales_the_concurrent_load():
    # a job that overlaps another for none of its time sees no load from it
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=8)
    v = fabric_view(f)
    p1, p2 = profile_job(_job("a", 4), v), profile_job(_job("b", 4), v)
    g = [np.array([0, 1, 8, 9]), np.array([4, 5, 12, 13])]
    apart = evaluate(v, [p1, p2], g, start_s=[0.0, 1e6])
    alone = evaluate(v, [p1], g[:1])
    assert apart.iteration_s[0] == pytest.approx(alone.iteration_s[0])


def _simulated_iteration_s(f, jobs, gpus, router="spray"):
    from flowherd.cluster.simulate import JobRequest, simulate_cluster

    reqs = [JobRequest(name=j.name, tenant="t", spec=j, submit_s=0.0) for j in jobs]
    res = simulate_cluster(f, reqs, fidelity="collective", horizon_s=1e4, router=router,
                           placements={j.name: g for j, g in zip(jobs, gpus, strict=True)})
    return np.array([np.median(r.iteration_s) for r in res.jobs])


@pytest.mark.parametrize("gpus", [[[0, 1, 2, 3]], [list(range(8))], [[0, 1, 2, 3, 8, 9, 10, 11]]])
def test_uncontended_prediction_matches_simulation(gpus):
    # one server, one leaf, two leaves of a 1:1 leaf-spine: the simulator (collective fidelity)
    # gives the critical path with NCCL-like collective times; the model times each collective
    # with the same collective model alone, so it is within 1 % (measured: 0.0-0.1 %)
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=1)
    jobs = [_job("a", len(gpus[0]), iters=3)]
    v = fabric_view(f)
    pred = evaluate(v, [profile_job(jobs[0], v)], [np.array(gpus[0])]).iteration_s
    sim = _simulated_iteration_s(f, jobs, gpus)
    assert pred == pytest.approx(sim, rel=0.01)


def test_contended_prediction_within_fifteen_percent_of_simulation():
    # two jobs spread over the same two leaves of an 8:1 leaf-spine, spraying routes (the routing
    # the model assumes). NCCL 2.30 runs these DP AllReduces as trees whose channels move 0.73
    # of the NIC's rate: a rate limit (`flowherd.collectives.calibrate`), which does not bind on
    # the oversubscribed uplink; the model takes each collective's cut bytes from that same
    # schedule (a ring's busbw cut gave +16 % on the same jobs) and its base + network + busy
    # (stretch - 1) gives: same jobs -0.2 %; different TP: the TP-1 job +20 %, the TP-2 job +37 %
    # (rho counts both jobs' peak loads as always overlapping, which the TP-2 job's short
    # collectives are not: a known limit of the peak-load estimate; +0.6 % / +40 % while the
    # simulator sent the cap as 1.36x the bytes, on the uplink too)
    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=8)
    v = fabric_view(f)
    gpus = [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]]
    for jobs, check, rel in (([_job("a", 8, iters=3), _job("b", 8, iters=3)], [0, 1], 0.15),
                             ([_job("a", 8, iters=3), _job("b", 8, tp=2, iters=6)], [0], 0.25)):
        pred = evaluate(v, [profile_job(j, v) for j in jobs], [np.array(g) for g in gpus]).iteration_s
        sim = _simulated_iteration_s(f, jobs, gpus)
        alone = evaluate(v, [profile_job(jobs[0], v)], [np.array(gpus[0])]).iteration_s[0]
        assert pred[check] == pytest.approx(sim[check], rel=rel)
        assert pred[1] == pytest.approx(sim[1], rel=0.40)
        assert pred[0] > alone * 1.2  # the contention is real, not within the tolerance


@pytest.mark.parametrize("tp", [1, 2])
def test_leaf_uplink_bytes_are_the_simulated_schedules_cross_leaf_wire_bytes(tp):
    # the bytes the simulator's executor puts on the wire between the two leaves per iteration
    # (every collective's NCCL schedule, protocol and per-channel cap: `CollectiveCache`), for
    # the job on one server of each leaf, are what the model offers to the uplinks
    from flowherd.cluster.executor import CollectiveCache
    from flowherd.collectives.ops import Collective
    from flowherd.planning.predict import _graph
    from flowherd.routing.policies import make_router
    from flowherd.workload.training import rank_to_gpu

    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=8)
    v = fabric_view(f)
    job = _job("a", 8, tp=tp)
    gpus = np.array([0, 1, 2, 3, 8, 9, 10, 11])
    leaf = np.asarray(f.gpu_server) // 2
    mapping = rank_to_gpu(job, gpus, 4, gpu_server=np.asarray(f.gpu_server))
    cache = CollectiveCache(f, make_router("spray", f))
    out = np.zeros(2)
    for t in _graph(job).tasks:
        for c in t.collectives:
            on = tuple(int(g) for g in mapping[list(c.gpus)])
            p = cache.plan(Collective(op=c.op, gpus=on, size_bytes=c.size_bytes, root=c.root))
            if p is not None:
                a, b = leaf[p.src], leaf[p.dst]
                out += t.count * np.array([p.wire_bytes[(a == 0) & (b == 1)].sum(),
                                           p.wire_bytes[(a == 1) & (b == 0)].sum()])
    assert out.min() > 0
    assert profile_job(job, v).leaf_uplink_bytes == pytest.approx(out.max(), rel=1e-9)


def test_background_penalty_is_the_probes_slowdown():
    # with background the profile's spread iteration grows by what the simulator measures for
    # the job alone among that background on the canonical servers; inside one server no change
    from flowherd.cluster.simulate import BackgroundSpec
    from flowherd.planning.predict import background_penalty_s

    f = leaf_spine(servers=4, gpus_per_server=4, leaves=2, spines=2, oversubscription=2)
    v = fabric_view(f)
    bg = BackgroundSpec(load=0.3, cdf="web_search", max_flows_per_s=200)
    job = _job("a", 8)
    plain, with_bg = profile_job(job, v), profile_job(job, v, bg)
    assert plain.background_s == 0.0
    assert with_bg.background_s == pytest.approx(background_penalty_s(job, v, bg))
    assert with_bg.background_s > 0.02 * plain.multi_server_s
    spread = np.array([0, 1, 2, 3, 8, 9, 10, 11])
    assert (evaluate(v, [with_bg], [spread]).iteration_s[0] - evaluate(v, [plain], [spread]).iteration_s[0]
            == pytest.approx(with_bg.background_s))
    small = _job("s", 4)
    assert profile_job(small, v, bg).background_s == 0.0
    assert evaluate(v, [profile_job(small, v, bg)], [np.arange(4)]).iteration_s[0] == pytest.approx(
        evaluate(v, [profile_job(small, v)], [np.arange(4)]).iteration_s[0])


def test_overloaded_serving_job_predicted_with_its_backlog():
    # 8 requests/s against a replica that decodes batches one after another: the simulator's end
    # over 4 seeds (10.7-12.4 s for a 10 s window) is matched within 10 % of its mean, where the
    # window alone (10 s) would be the naive prediction
    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.workload import InferenceJob

    f = leaf_spine(servers=2, gpus_per_server=4, leaves=1, spines=1)
    job = InferenceJob(model="llama3-8b", gpu="h100", name="s", tp=2, instances=1, request_rate_per_s=8,
                       duration_s=10, output_tokens=64, prompt_tokens=512, max_batch=8)
    ends = [simulate_cluster(f, [JobRequest(name="s", tenant="t", spec=job, submit_s=0.0)], horizon_s=1000,
                             seed=seed, placements={"s": [0, 1]}).jobs[0].finish_s for seed in range(4)]
    pred = profile_job(job, fabric_view(f)).fixed_duration_s
    assert pred == pytest.approx(np.mean(ends), rel=0.10)
    assert np.mean(ends) > 10.4  # the backlog is real


def test_profiles_are_per_fabric_not_per_server_shape():
    # same servers (one per leaf), GPUs and NIC / NVLink speeds, uplinks oversubscribed 4:1: the
    # collectives (timed on the fabric itself) take longer, so a profile cached for one fabric
    # must not serve the other (a longer link latency would not do: NCCL's latency holds the paths')
    import flowherd.planning.predict as predict

    job = TrainingJob(model="llama3-8b", gpus=8, tp=2, name="j", seq_len=2048, global_batch=8, iterations=3)
    fast = leaf_spine(servers=4, gpus_per_server=4, leaves=4, spines=2)
    slow = leaf_spine(servers=4, gpus_per_server=4, leaves=4, spines=2, oversubscription=4)
    a = profile_job(job, fabric_view(fast))
    b = profile_job(job, fabric_view(slow))
    predict._PROFILES.clear()
    fresh = profile_job(job, fabric_view(slow))
    assert b.base_s == fresh.base_s and b.network_s == fresh.network_s
    assert b.base_s + b.network_s > a.base_s + a.network_s
