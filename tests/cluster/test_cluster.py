"""Multi-tenant cluster simulation: closed forms, fair sharing, queueing, determinism, errors."""

import math

import numpy as np
import pytest

from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric.generators import leaf_spine
from flowherd.units import Gbps
from flowherd.workload import InferenceJob, TrainingJob

NIC = 400 * Gbps  # leaf_spine's default NIC bandwidth, bytes per second


def dp_job(name: str, gpus: int, iterations: int = 3, submit_s: float = 0.0) -> JobRequest:
    """Pure data parallelism, one gradient bucket (synchronized after the whole backward)."""
    spec = TrainingJob(model="llama3-8b", gpus=gpus, tp=1, bucket_bytes=1e15, iterations=iterations,
                       name=name)
    return JobRequest(name=name, tenant="t", spec=spec, submit_s=submit_s)


def grad_bytes(req: JobRequest) -> float:
    # per rank, the whole model's gradients in BF16 (tp = pp = 1): params * grad_bytes
    return req.spec.model.num_params() * req.spec.grad_bytes


def _wire_fraction(fab, gpus, op: str, size: float) -> float:
    """Payload per wire byte of the collective as the simulator runs it (NCCL's channels)."""
    from flowherd.cluster.collective import choose, nccl_channels
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.ops import Collective

    coll = Collective(op=op, gpus=gpus, size_bytes=size)
    algo, proto = choose(fab, coll)
    return build_schedule(coll, algo, fabric=fab, protocol=proto,
                          channels=nccl_channels(fab, coll)).wire_fraction


def test_pure_data_parallel_job_alone_takes_compute_plus_ring_allreduce():
    # Ring AllReduce of S bytes over n ranks moves 2 (n - 1) / n * S through each NIC
    # (Patarasuk & Yuan, JPDC 2009; Thakur et al., IJHPCA 2005): T = C + 2 (n-1)/n S / B.
    fab = leaf_spine(servers=4, gpus_per_server=1, leaves=1, spines=1)
    req = dp_job("a", 4)
    res = simulate_cluster(fab, [req], horizon_s=100.0)
    j = res.job("a")
    n, s = 4, grad_bytes(req)
    # B: the NIC at NCCL's channel speed (2 x 24 of its 50 GB/s, flowherd.collectives.calibrate)
    bw = NIC * _wire_fraction(fab, tuple(range(n)), "allreduce", s)
    expect = j.compute_only_iteration_s + 2 * (n - 1) / n * s / bw
    assert len(j.iteration_s) == 3
    assert np.allclose(j.iteration_s, expect, rtol=0.02)
    assert j.finish_s == pytest.approx(3 * expect, rel=0.02)
    # GPU busy time is the compute of every rank, 3 iterations
    assert j.gpu_busy_s == pytest.approx(3 * 4 * req.spec.iteration_graph().compute_s_by_stage()[0])


def test_two_dp_jobs_over_an_oversubscribed_bottleneck_share_it_fairly():
    # Leaf uplink = 2 NICs * B / 4 (oversubscription 4) / 1 spine = B / 2. Job a on servers 0, 2
    # and job b on servers 1, 3 both cross leaf 0 -> spine and leaf 1 -> spine. Alone, a 2-rank
    # ring sends S each way over an uplink of U: C + S / U; two jobs in lock step get U / 2
    # each (max-min fairness): C + 2 S / U.
    # NCCL's channels move 2 x 24 GB/s through a 50 GB/s NIC (its PCIe counts 48, search.cc):
    # their bytes grow by the ratio, on the shared uplink too (flowherd.collectives.calibrate)
    fab = leaf_spine(servers=4, gpus_per_server=1, leaves=2, spines=1, oversubscription=4)
    a, b = dp_job("a", 2), dp_job("b", 2)
    s = grad_bytes(a)
    u = 2 * NIC / 4 * _wire_fraction(fab, (0, 2), "allreduce", s)
    alone = simulate_cluster(fab, [a], horizon_s=100.0, placements={"a": [0, 2]}).job("a")
    both = simulate_cluster(fab, [a, b], horizon_s=100.0, placements={"a": [0, 2], "b": [1, 3]})
    c = alone.compute_only_iteration_s
    assert np.allclose(alone.iteration_s, c + s / u, rtol=0.02)
    for name in ("a", "b"):
        assert np.allclose(both.job(name).iteration_s, c + 2 * s / u, rtol=0.02)


def test_jobs_queue_fifo_without_backfill_and_start_when_gpus_are_released():
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1)
    mk = lambda name, n, t: JobRequest(  # noqa: E731
        name=name, tenant="t", submit_s=t,
        spec=TrainingJob(model="llama3-8b", gpus=n, tp=4, iterations=2, name=name))
    jobs = [mk("a", 12, 0.0), mk("b", 8, 0.01), mk("c", 4, 0.02)]
    res = simulate_cluster(fab, jobs, horizon_s=100.0)
    a, b, c = (res.job(x) for x in "abc")
    assert a.start_s == 0.0 and a.finish_s is not None
    # b does not fit next to a (4 free); c would, but the queue is FIFO without backfilling
    assert b.start_s == pytest.approx(a.finish_s)
    assert c.start_s == pytest.approx(a.finish_s)
    assert set(b.gpus) & set(a.gpus)  # b got GPUs a released
    assert not set(b.gpus) & set(c.gpus)
    for j in (a, b, c):
        assert j.finish_s == pytest.approx(j.start_s + j.iteration_s.sum())


def _three_jobs():
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1)
    mk = lambda name, n, t: JobRequest(  # noqa: E731
        name=name, tenant="t", submit_s=t,
        spec=TrainingJob(model="llama3-8b", gpus=n, tp=4, iterations=2, name=name))
    return fab, [mk("a", 12, 0.0), mk("b", 8, 0.01), mk("c", 4, 0.02)]


def test_a_plan_keeps_its_order_on_every_gpu_not_the_fifo_queue():
    # a holds GPUs 0-11; b is pinned to 8-15 (four of them a's), c to 12-15 (free).
    fab, jobs = _three_jobs()
    pins = {"a": list(range(12)), "b": list(range(8, 16)), "c": list(range(12, 16))}
    fifo = simulate_cluster(fab, jobs, horizon_s=100.0, placements=pins)
    a = fifo.job("a")
    # FIFO: c waits behind b, which waits for a
    assert fifo.job("b").start_s == pytest.approx(a.finish_s)
    assert fifo.job("c").start_s == pytest.approx(fifo.job("b").finish_s)
    # the plan backfills c before b on GPUs 12-15 (c ends long before a): c starts at once, b
    # follows c and a on their GPUs
    plan = simulate_cluster(fab, jobs, horizon_s=100.0, placements=pins,
                            planned_start={"a": 0.0, "b": a.finish_s, "c": 0.02})
    pa, pb, pc = (plan.job(x) for x in "abc")
    assert pc.start_s == pytest.approx(0.02)
    assert pb.start_s == pytest.approx(max(pa.finish_s, pc.finish_s))
    # the same plan with b planned before c: c may not take GPUs b needs first, though they are free
    later = simulate_cluster(fab, jobs, horizon_s=100.0, placements=pins,
                             planned_start={"a": 0.0, "b": 0.01, "c": 0.02})
    assert later.job("c").start_s == pytest.approx(later.job("b").finish_s)


def test_a_plan_does_not_let_a_late_job_block_jobs_on_other_gpus():
    # b is planned before c but its GPUs are busy; c's GPUs are disjoint from b's: c starts
    fab, jobs = _three_jobs()
    pins = {"a": list(range(12)), "b": list(range(0, 8)), "c": list(range(12, 16))}
    res = simulate_cluster(fab, jobs, horizon_s=100.0, placements=pins,
                           planned_start={"a": 0.0, "b": 0.01, "c": 0.02})
    assert res.job("c").start_s == pytest.approx(0.02)
    assert res.job("b").start_s == pytest.approx(res.job("a").finish_s)


@pytest.mark.parametrize("pins, starts, match", [
    ({"a": [0]}, {"a": 0.0, "b": 0.0}, r"needs every job pinned.*'b'"),
    ({"a": [0], "b": [1]}, {"a": 0.0}, r"lacks jobs \['b'\]"),
    ({"a": [0], "b": [1]}, {"a": 0.0, "b": float("nan")}, r"planned_start\.b"),
    ({"a": [0], "b": [1]}, {"a": 0.0, "b": 0.0, "z": 1.0}, "unknown job 'z'"),
])
def test_bad_plan_orders_get_one_clear_error(pins, starts, match):
    fab = leaf_spine(servers=2, gpus_per_server=1, leaves=1, spines=1)
    with pytest.raises(ConfigError, match=match):
        simulate_cluster(fab, [dp_job("a", 1), dp_job("b", 1)], horizon_s=1.0, placements=pins,
                         planned_start=starts)


def test_unfinished_jobs_and_unstarted_jobs_at_the_horizon():
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1)
    long = JobRequest(name="long", tenant="t", submit_s=0.0,
                      spec=TrainingJob(model="llama3-8b", gpus=16, tp=8, iterations=1000))
    late = JobRequest(name="late", tenant="t", submit_s=0.0,
                      spec=TrainingJob(model="llama3-8b", gpus=8, tp=8, iterations=1))
    res = simulate_cluster(fab, [long, late], horizon_s=2.0)
    assert res.job("long").finish_s is None
    assert 0 < len(res.job("long").iteration_end_s) < 1000
    assert np.all(res.job("long").iteration_end_s <= 2.0)
    assert res.job("late").start_s is None and res.job("late").gpus == ()


def scenario(seed: int, fidelity: str = "collective", records: bool = True):
    fab = leaf_spine(servers=4, gpus_per_server=8, leaves=2, spines=2)
    jobs = [
        JobRequest(name="tr", tenant="t1", submit_s=0.0,
                   spec=TrainingJob(model="llama3-8b", gpus=16, tp=8, iterations=4)),
        JobRequest(name="inf", tenant="t2", submit_s=0.1,
                   spec=InferenceJob(model="llama3-8b", tp=4, instances=2, duration_s=2.0,
                                     request_rate_per_s=5.0, output_tokens=32)),
    ]
    return simulate_cluster(fab, jobs, horizon_s=5.0, fidelity=fidelity, seed=seed,
                            background=BackgroundSpec(load=0.2, max_flows_per_s=300),
                            background_records=records)


def test_same_seed_gives_identical_results_and_another_seed_differs():
    r1, r2, r3 = scenario(3), scenario(3), scenario(4)
    for a, b in zip(r1.jobs, r2.jobs, strict=True):
        assert (a.start_s, a.finish_s, a.gpus) == (b.start_s, b.finish_s, b.gpus)
        assert np.array_equal(a.iteration_end_s, b.iteration_end_s)
    assert np.array_equal(r1.background_finish_s, r2.background_finish_s, equal_nan=True)
    assert np.array_equal(r1.util_by_tier, r2.util_by_tier)
    assert r1.num_events == r2.num_events
    assert not np.array_equal(r1.background_start_s[:5], r3.background_start_s[:5])


@pytest.mark.parametrize("fidelity", ["collective", "phase"])
def test_a_run_without_background_records_is_the_run_with_them(fidelity):
    # background flows reuse the records of finished ones: the same events, rates and times
    a, b = scenario(5, fidelity, records=True), scenario(5, fidelity, records=False)
    assert b.background_finish_s is None and a.background_finish_s is not None
    for x, y in zip(a.jobs, b.jobs, strict=True):
        assert x.iteration_end_s.tobytes() == y.iteration_end_s.tobytes()
    assert a.link_bytes.tobytes() == b.link_bytes.tobytes()
    assert a.util_by_tier.tobytes() == b.util_by_tier.tobytes()
    assert (a.num_events, a.num_rate_updates, a.num_coflows) == (b.num_events, b.num_rate_updates,
                                                                 b.num_coflows)


def test_background_flows_reusing_finished_records_change_nothing(monkeypatch):
    from flowherd.engine.core import Engine

    a = scenario(7, "phase")
    assert a.num_coflows > 0
    plain = Engine.add_flows
    engines = set()

    def fresh(self, *args, reuse=None, **kw):  # every background flow a record of its own
        engines.add(self)
        return plain(self, *args, **kw)

    monkeypatch.setattr(Engine, "add_flows", fresh)
    b = scenario(7, "phase")
    assert a.background_finish_s.tobytes() == b.background_finish_s.tobytes()
    for x, y in zip(a.jobs, b.jobs, strict=True):
        assert x.iteration_end_s.tobytes() == y.iteration_end_s.tobytes()
    assert (a.num_events, a.link_bytes.tobytes()) == (b.num_events, b.link_bytes.tobytes())
    # the coflows the run added: every record of the run without reuse
    (eng,) = engines
    assert a.num_coflows == eng.num_coflows > a.background.flows


def test_the_background_summary_is_the_records_summed():
    from flowherd.cluster.bg_stats import PERCENTILE_RTOL, SIZE_CLASSES_BYTES

    res = scenario(6)
    s, fin = res.background, res.background_finish_s
    done = ~np.isnan(fin)
    fct, size = fin[done] - res.background_start_s[done], res.background_size_bytes[done]
    assert (s.flows, s.finished) == (fin.size, int(done.sum())) and s.finished > 100
    assert s.bytes_offered == pytest.approx(res.background_size_bytes.sum(), rel=1e-12)
    assert s.mean_fct_s() == pytest.approx(fct.mean(), rel=1e-12)
    in_flight = np.minimum(np.nan_to_num(fin, nan=res.horizon_s), res.horizon_s) - res.background_start_s
    assert s.flow_seconds == pytest.approx(in_flight.sum(), rel=1e-12)
    cls = np.searchsorted(np.array(SIZE_CLASSES_BYTES), size, side="right")
    for c in range(len(SIZE_CLASSES_BYTES) + 1):
        got = s.percentile_fct_s(99, c)
        if not np.any(cls == c):
            assert got is None
            continue
        assert int(s.class_count[c]) == int(np.sum(cls == c))
        for q in (0, 50, 99, 100):
            want = np.percentile(fct[cls == c], q)
            assert abs(s.percentile_fct_s(q, c) / want - 1) <= PERCENTILE_RTOL * (1 + 1e-9)
    for q in (1, 50, 90, 99, 99.9):
        assert abs(s.percentile_fct_s(q) / np.percentile(fct, q) - 1) <= PERCENTILE_RTOL * (1 + 1e-9)


def test_inference_job_serves_its_batches_and_ends_after_its_window():
    res = scenario(0)
    j = res.job("inf")
    assert j.kind == "inference" and j.finish_s is not None
    assert j.finish_s >= j.start_s + 2.0
    assert len(j.iteration_end_s) == j.iterations_planned > 0
    assert np.all(np.diff(j.iteration_end_s) >= 0)
    # a batch's latency is at least its own compute (prefill + decode) on the idle path
    assert np.all(j.iteration_s > 0.5 * j.compute_only_iteration_s)


def test_background_keeps_the_offered_load_and_flows_complete_no_faster_than_a_nic():
    res = scenario(1)
    fab_servers, bw = 4, 8 * 400 * Gbps
    offered = res.background_size_bytes.sum() / res.horizon_s / (fab_servers * bw)
    assert res.background_aggregation > 1
    assert offered == pytest.approx(0.2, rel=0.15)  # Poisson count over ~1,500 flows
    done = ~np.isnan(res.background_finish_s)
    assert done.mean() > 0.8
    fct = res.background_finish_s[done] - res.background_start_s[done]
    assert np.all(fct >= res.background_size_bytes[done] / NIC * (1 - 1e-9))
    assert np.all(res.background_src_server != res.background_dst_server)


def test_utilization_bins_add_up_to_the_link_bytes():
    res = scenario(2)
    width = np.diff(res.util_bin_edges_s)
    tier_bytes = (res.util_by_tier * res.util_tier_capacity_bytes_per_s[:, None] * width).sum(axis=1)
    from flowherd.cluster.background import link_tiers as _link_tiers

    fab = leaf_spine(servers=4, gpus_per_server=8, leaves=2, spines=2)
    names, tier = _link_tiers(fab)
    assert names == res.util_tiers
    assert np.allclose(tier_bytes, np.bincount(tier, weights=res.link_bytes, minlength=len(names)))
    assert np.all(res.util_by_tier <= 1 + 1e-9) and np.all(res.util_by_tier >= -1e-12)


def test_step_fidelity_runs_a_job_close_to_collective_on_an_idle_fabric():
    # ring AllReduce loads every NIC alike in every step: the two fidelities agree on an idle
    # fabric (flowherd.cluster.collective docstring)
    fab = leaf_spine(servers=4, gpus_per_server=1, leaves=1, spines=1)
    req = dp_job("a", 4, iterations=1)
    t_step = simulate_cluster(fab, [req], horizon_s=100.0, fidelity="step").job("a").finish_s
    t_coll = simulate_cluster(fab, [req], horizon_s=100.0, fidelity="collective").job("a").finish_s
    assert t_step == pytest.approx(t_coll, rel=0.02)


def test_philly_replay_runs_end_to_end():
    from flowherd.workload import TraceMapping, replay_trace

    specs = replay_trace("philly", max_jobs=12, rule=TraceMapping(max_iterations=20))
    jobs = [JobRequest(name=s.name, tenant=s.tenant, spec=s, submit_s=s.submit_s) for s in specs]
    fab = leaf_spine(servers=4, gpus_per_server=8, leaves=2, spines=2)
    horizon = max(s.submit_s for s in specs) + 600.0
    res = simulate_cluster(fab, jobs, horizon_s=horizon, fidelity="phase")
    assert len(res.jobs) == 12
    assert {j.tenant for j in res.jobs} == {s.tenant for s in specs}
    for j, s in zip(res.jobs, specs, strict=True):
        assert j.finish_s is not None, j.name
        assert j.start_s >= s.submit_s
        assert len(j.iteration_end_s) == s.iterations
        assert j.finish_s == pytest.approx(j.start_s + j.iteration_s.sum(), rel=1e-9)
        assert j.iteration_s.min() >= j.compute_only_iteration_s * (1 - 1e-9)


@pytest.mark.parametrize("bad, match", [
    (dict(horizon_s=0.0), "horizon"),
    (dict(horizon_s=1.0, fidelity="fluid"), "fidelity"),
    (dict(horizon_s=1.0, placer="best"), "placer"),
    (dict(horizon_s=1.0, router="ecmpp"), "router"),
    (dict(horizon_s=1.0, placements={"zz": [0]}), "placements"),
    (dict(horizon_s=1.0, placements={"a": [0, 0]}), r"placements\.a"),
])
def test_bad_arguments_get_one_clear_error(bad, match):
    fab = leaf_spine(servers=2, gpus_per_server=1, leaves=1, spines=1)
    with pytest.raises(ConfigError, match=match):
        simulate_cluster(fab, [dp_job("a", 2)], **bad)


def test_bad_jobs_get_one_clear_error():
    fab = leaf_spine(servers=2, gpus_per_server=1, leaves=1, spines=1)
    with pytest.raises(ConfigError, match="needs 4 GPUs but the fabric has 2"):
        simulate_cluster(fab, [dp_job("a", 4)], horizon_s=1.0)
    with pytest.raises(ConfigError, match="unique"):
        simulate_cluster(fab, [dp_job("a", 1), dp_job("a", 1)], horizon_s=1.0)
    with pytest.raises(ConfigError, match="submit_s"):
        JobRequest(name="x", tenant="t", spec=dp_job("a", 1).spec, submit_s=-1.0)
    with pytest.raises(ConfigError, match=r"background\.load"):
        BackgroundSpec(load=1.5)
    with pytest.raises(UnknownNameError):
        simulate_cluster(fab, [dp_job("a", 1)], horizon_s=1.0, fidelity="phse")
    assert math.isfinite(simulate_cluster(fab, [dp_job("a", 1)], horizon_s=100.0).job("a").finish_s)


def test_background_below_the_flow_cap_is_not_aggregated():
    from flowherd.workload import FlowSizeCDF

    fab = leaf_spine(servers=2, gpus_per_server=2, leaves=1, spines=1)
    bg = BackgroundSpec(load=0.01, cdf="web_search", max_flows_per_s=1e7)
    res = simulate_cluster(fab, [], horizon_s=0.05, background=bg, seed=3)
    cdf = FlowSizeCDF.load("web_search")
    assert res.background_aggregation == 1
    assert len(res.background_size_bytes) > 20
    assert res.background_size_bytes.min() >= max(1.0, cdf.size_bytes[0])
    assert res.background_size_bytes.max() <= cdf.size_bytes[-1]
    assert np.all(np.diff(res.background_start_s) >= 0)
