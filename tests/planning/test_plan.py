"""Plan value, JSON round trip, the planning timeline and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.errors import ConfigError, InfeasibleError, UnknownNameError
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.plan import Plan, capacity_bound, make_plan
from flowherd.workload import TrainingJob


def _fabric(**kw):
    return leaf_spine(servers=kw.pop("servers", 4), gpus_per_server=4, leaves=2, spines=2,
                      oversubscription=kw.pop("oversubscription", 4), **kw)


def _job(name, n, tp=1, iters=3, submit_s=0.0):
    return TrainingJob(model="llama3-8b", gpus=n, tp=tp, name=name, seq_len=2048,
                       global_batch=n // tp * 2, iterations=iters, submit_s=submit_s)


def test_plan_json_round_trip_keeps_every_field(tmp_path):
    plan = make_plan(_fabric(), [_job("a", 8, 2), _job("b", 4)], method="topology")
    path = tmp_path / "plan.json"
    plan.to_json(path)
    back = Plan.from_json(path)
    assert back.placements() == plan.placements()
    assert back.objective == pytest.approx(plan.objective)
    assert back.lower_bound == pytest.approx(plan.lower_bound)
    assert [j.rank_to_gpu for j in back.jobs] == [j.rank_to_gpu for j in plan.jobs]
    assert back.predicted_mean_jct_s == pytest.approx(plan.predicted_mean_jct_s)


def test_plan_from_json_names_missing_field():
    with pytest.raises(ConfigError, match="objective"):
        Plan.from_dict({"method": "x", "jobs": [], "lower_bound": 0, "gap": 0, "solve_s": 0})


def test_every_method_places_disjoint_gpus_of_the_right_size():
    jobs = [_job("a", 8, 2), _job("b", 4), _job("c", 2)]
    for method in ("random", "packed", "topology", "hetero", "milp", "heuristic"):
        plan = make_plan(_fabric(), jobs, method=method, time_limit_s=10)
        used = [g for j in plan.jobs for g in j.gpus]
        assert len(used) == len(set(used)) == 14, method
        assert [len(j.gpus) for j in plan.jobs] == [8, 4, 2], method
        assert plan.lower_bound <= plan.objective + 1e-9, method
        assert 0.0 <= plan.gap <= 1.0, method


def test_jobs_that_do_not_fit_together_start_when_gpus_free_up():
    # 16 GPUs; two 12-GPU jobs cannot run together: the second starts at the first's predicted end
    plan = make_plan(_fabric(), [_job("a", 12), _job("b", 12)], method="heuristic")
    a, b = plan.jobs
    assert a.start_s == 0.0
    assert b.start_s == pytest.approx(a.predicted_jct_s)
    assert b.predicted_jct_s > b.predicted_iteration_s * 3  # queueing counted in its JCT


def test_heuristic_backfills_without_delaying_the_head():
    # 16 GPUs. a (12 GPUs) runs; b (12) cannot start until a ends; c (4 GPUs, 1 iteration) and d
    # (4 GPUs, 30 iterations) come after b. EASY backfilling: b's shadow time is a's end, when
    # 4 + 12 GPUs are free, 4 more than b needs. c fits now and ends before the shadow time (with
    # the overrun margin): it starts at once. d, when c ends, would outlast the shadow time but
    # fits in the 4 extra GPUs: it starts then too. FIFO starts c and d after b.
    jobs = [_job("a", 12), _job("b", 12, submit_s=0.01), _job("c", 4, iters=1, submit_s=0.02),
            _job("d", 4, iters=30, submit_s=0.03)]
    bf = {j.name: j for j in make_plan(_fabric(), jobs, method="heuristic").jobs}
    fifo = {j.name: j for j in make_plan(_fabric(), jobs, method="heuristic", backfill=False).jobs}
    assert bf["c"].start_s == pytest.approx(0.02)
    assert fifo["c"].start_s >= fifo["b"].start_s > 0.02
    assert bf["c"].predicted_jct_s * 1.25 < bf["b"].start_s
    assert bf["d"].start_s == pytest.approx(bf["c"].start_s + bf["c"].predicted_jct_s)
    assert 0.03 + bf["d"].predicted_jct_s > bf["b"].start_s  # d ends after b starts
    # the head's promised start is FIFO's, on GPUs the backfilled jobs leave it
    assert bf["b"].start_s == pytest.approx(fifo["b"].start_s)
    assert not set(bf["b"].gpus) & set(bf["d"].gpus)
    plan = make_plan(_fabric(), jobs, method="heuristic")
    assert plan.info["schedule"] == "backfill" and plan.objective < make_plan(
        _fabric(), jobs, method="heuristic", backfill=False).objective


def test_a_backfilled_plan_runs_in_the_simulator_as_planned_and_cuts_mean_jct():
    from flowherd.cluster.simulate import JobRequest, simulate_cluster

    # 16 GPUs: a (12) runs, b (16) waits for all of them, c (4, one iteration) fits beside a now.
    # FIFO puts c on GPUs b holds, after b; the backfilled plan runs c at once, b unmoved.
    jobs = [_job("a", 12), _job("b", 16, submit_s=0.01), _job("c", 4, iters=1, submit_s=0.02)]
    reqs = [JobRequest(name=j.name, tenant="t", spec=j, submit_s=j.submit_s) for j in jobs]
    sims = {}
    for backfill in (True, False):
        plan = make_plan(_fabric(), jobs, method="heuristic", backfill=backfill)
        sims[backfill] = simulate_cluster(_fabric(), reqs, horizon_s=600.0, placements=plan.placements(),
                                          planned_start=plan.planned_starts(), router="spray")
        # the simulator starts every job when the plan does (spraying on a leaf-spine is the
        # model's routing, so the predicted run times are the simulated ones)
        for j in plan.jobs:
            assert sims[backfill].job(j.name).start_s == pytest.approx(j.start_s, rel=0.02, abs=1e-3), j.name
    assert sims[True].job("c").start_s == pytest.approx(0.02)
    assert sims[False].job("c").start_s >= sims[False].job("b").finish_s - 1e-9
    assert sims[True].job("b").start_s == pytest.approx(sims[False].job("b").start_s, rel=0.02)
    jct = {b: np.mean([r.finish_s - r.submit_s for r in res.jobs]) for b, res in sims.items()}
    assert jct[True] < 0.8 * jct[False]


def test_backfilling_never_takes_gpus_the_head_needs_past_its_shadow_time():
    # as above with one extra GPU fewer: b needs 16 of the 16 GPUs at a's end, so d (which would
    # outlast a) may not start before b, and c starts only because it ends in time
    jobs = [_job("a", 12), _job("b", 16, submit_s=0.01), _job("c", 4, iters=1, submit_s=0.02),
            _job("d", 4, iters=30, submit_s=0.03)]
    bf = {j.name: j for j in make_plan(_fabric(), jobs, method="heuristic").jobs}
    assert bf["c"].start_s == pytest.approx(0.02)
    assert bf["d"].start_s >= bf["b"].start_s + bf["b"].predicted_iteration_s


def test_baseline_placers_keep_fifo_unless_asked_to_backfill():
    jobs = [_job("a", 12), _job("b", 12, submit_s=0.01), _job("c", 4, iters=1, submit_s=0.02)]
    fifo = make_plan(_fabric(), jobs, method="topology")
    assert fifo.info["schedule"] == "fifo"
    starts = {j.name: j.start_s for j in fifo.jobs}
    assert starts["c"] >= starts["b"] > 0.02
    bf = make_plan(_fabric(), jobs, method="topology", backfill=True)
    assert {j.name: j.start_s for j in bf.jobs}["c"] == pytest.approx(0.02)


def test_the_heuristics_queue_runs_the_least_work_first():
    # 16 GPUs. a (16) runs; b (16, 3 iterations) and then c, d (8 GPUs, 1 iteration each) queue
    # behind it. Nothing can backfill beside a (no GPU is free) and, in submission order, b takes
    # every GPU at a's end: c and d wait for b. Least work first (GPUs x least run time, the
    # order of the SRPT relaxation `capacity_bound` solves) runs c and d at a's end, then b: b's
    # JCT grows by one short run, c's and d's shrink by b's whole run.
    jobs = [_job("a", 16), _job("b", 16, submit_s=0.01), _job("c", 8, iters=1, submit_s=0.02),
            _job("d", 8, iters=1, submit_s=0.03)]
    work = make_plan(_fabric(), jobs, method="heuristic")
    fifo = make_plan(_fabric(), jobs, method="heuristic", order="fifo")
    assert (work.info["order"], fifo.info["order"]) == ("work", "fifo")
    w = {j.name: j for j in work.jobs}
    f = {j.name: j for j in fifo.jobs}
    a_end = w["a"].predicted_jct_s
    assert w["c"].start_s == pytest.approx(a_end) and w["d"].start_s == pytest.approx(a_end)
    assert w["b"].start_s == pytest.approx(a_end + w["c"].predicted_iteration_s, rel=1e-6)
    assert f["b"].start_s == pytest.approx(a_end) and f["c"].start_s >= f["b"].start_s + 2 * f[
        "b"].predicted_iteration_s
    assert work.objective < fifo.objective - 0.2 * w["b"].predicted_iteration_s
    # the baseline placers keep FIFO; backfill=True gives them the heuristic's whole schedule
    assert make_plan(_fabric(), jobs, method="topology").info["order"] == "fifo"
    bf = make_plan(_fabric(), jobs, method="topology", backfill=True)
    assert bf.info["order"] == "work" and bf.objective == pytest.approx(work.objective)
    with pytest.raises(ConfigError, match=r"queue order .*'sjf' \(order\)"):
        make_plan(_fabric(), jobs, method="heuristic", order="sjf")


def test_capacity_bound_is_srpt_on_the_fluid_cluster():
    # One GPU; A needs 4 GPU-s from t=0, B 1 GPU-s from t=1. Shortest remaining work first on
    # the fluid relaxation (optimal for 1|r_j, pmtn|sum C_j, Schrage 1968): A runs 0-1 (3 left),
    # B runs 1-2, A ends at 5: JCTs 5 and 1, mean 3 (FIFO would give 4 and 4).
    assert capacity_bound(np.array([0.0, 1.0]), np.array([4.0, 1.0]), 1) == pytest.approx(3.0)
    # all released at once on G GPUs: completions are the running sums of the sorted work / G
    assert capacity_bound(np.zeros(3), np.array([30.0, 10.0, 20.0]), 10) == pytest.approx((1 + 3 + 6) / 3)
    assert capacity_bound(np.zeros(0), np.zeros(0), 4) == 0.0


def test_plan_bound_counts_the_queueing_a_full_cluster_cannot_avoid():
    # two jobs that each need all 16 GPUs: one must wait for the other, so the mean JCT is at least
    # 1.5 times one job's floor run time (the per-job floor alone says 1)
    plan = make_plan(_fabric(), [_job("a", 16), _job("b", 16)], method="heuristic")
    floor = min(j.predicted_jct_s for j in plan.jobs)
    assert plan.lower_bound == pytest.approx(1.5 * floor)
    assert plan.lower_bound <= plan.objective + 1e-9
    assert plan.gap < 0.01  # one after the other is optimal here


def test_job_larger_than_fabric_is_infeasible_naming_it():
    with pytest.raises(InfeasibleError, match="'huge'"):
        make_plan(_fabric(), [_job("ok", 4), _job("huge", 32)], method="heuristic")


def test_job_of_missing_gpu_type_is_infeasible_for_typed_methods():
    j = TrainingJob(model="llama3-8b", gpus=4, name="a100-job", gpu="a100", seq_len=2048, global_batch=8)
    for method in ("hetero", "milp", "heuristic"):
        with pytest.raises(InfeasibleError, match="'a100-job'"):
            make_plan(_fabric(), [j], method=method)
    assert len(make_plan(_fabric(), [j], method="packed").jobs[0].gpus) == 4  # untyped baseline


def test_unknown_method_suggests_closest():
    with pytest.raises(UnknownNameError, match="heuristic"):
        make_plan(_fabric(), [_job("a", 4)], method="heuristc")


def test_bad_time_limit_names_the_option():
    with pytest.raises(ConfigError, match="--time-limit"):
        make_plan(_fabric(), [_job("a", 4)], method="milp", time_limit_s=-1)


def test_same_seed_same_random_plan():
    jobs = [_job("a", 6), _job("b", 5)]
    p1 = make_plan(_fabric(), jobs, method="random", seed=3)
    p2 = make_plan(_fabric(), jobs, method="random", seed=3)
    p3 = make_plan(_fabric(), jobs, method="random", seed=4)
    assert p1.placements() == p2.placements()
    assert p1.placements() != p3.placements()
    assert np.isfinite(p1.objective)


def test_a_job_slowed_by_a_later_neighbour_holds_its_gpus_until_its_progress_ends():
    # fluid progress: A runs alone for 1 s, then B shares a leaf's uplinks with it; A's end is
    # 1 + (work left after 1 s alone) x (its run time with B), not its run time alone, and the
    # job queued for A's GPUs starts then
    from flowherd.planning.predict import evaluate, fabric_view, profile_job

    f = leaf_spine(servers=6, gpus_per_server=4, leaves=3, spines=2, oversubscription=8)
    jobs = [_job("f0", 4, iters=400), _job("a", 8, iters=6), _job("b", 8, iters=40, submit_s=1.0),
            _job("f1", 4, iters=400, submit_s=1.2), _job("d", 8, iters=2, submit_s=1.5)]
    plan = make_plan(f, jobs, method="packed")
    by = {j.name: j for j in plan.jobs}
    srv = {n: sorted({g // 4 for g in by[n].gpus}) for n in by}
    assert srv["a"] == [1, 2] and srv["b"] == [3, 4] and srv["d"] == [1, 2]  # A, B share leaf 1
    v = fabric_view(f)
    pa, pb = profile_job(jobs[1], v), profile_job(jobs[2], v)
    alone = evaluate(v, [pa], [np.array(by["a"].gpus)]).duration_s[0]
    both = evaluate(v, [pa, pb], [np.array(by["a"].gpus), np.array(by["b"].gpus)]).duration_s[0]
    assert both > 1.2 * alone  # the contention is real
    end_a = 1.0 + (1.0 - 1.0 / alone) * both
    assert by["d"].start_s == pytest.approx(end_a, rel=1e-9)


def test_the_heuristic_places_jobs_submitted_a_moment_apart_as_one_batch():
    # two trainings at 0 s and two at 0.1 s, each needing 3 of the 2-server leaves' servers, and a
    # 2-server service: placed apart, the service takes one leaf and two trainings share one;
    # placed together (LOOKAHEAD_SHARE), every training has its leaf and a half to itself
    from flowherd.workload import InferenceJob

    f = leaf_spine(servers=16, gpus_per_server=4, leaves=8, spines=2, oversubscription=4)
    serve = InferenceJob(model="llama3-8b", gpu="h100", name="s", tp=4, instances=1, disaggregated=True,
                         decode_instances=1, request_rate_per_s=1, duration_s=5, output_tokens=8,
                         prompt_tokens=256, max_batch=4)
    train = [_job(n, 12, tp=4, iters=20, submit_s=0.0 if n in "ab" else 0.1) for n in "abcd"]
    plan = make_plan(f, [train[0], train[1], serve, train[2], train[3]], method="heuristic", seed=0)
    leaves = {j.name: frozenset(g // 8 for g in j.gpus) for j in plan.jobs}
    shared = [(x, y) for x in "abcd" for y in "abcd" if x < y and leaves[x] & leaves[y]]
    assert shared == []
    assert all(j.start_s == pytest.approx(t.submit_s) for j, t in zip(
        [j for j in plan.jobs if j.name in "abcd"], train, strict=True))
