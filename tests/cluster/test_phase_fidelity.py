"""`phase` fidelity: fast-forward of isolated jobs agrees with `collective` fidelity."""

import numpy as np
import pytest

from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
from flowherd.fabric.generators import leaf_spine
from flowherd.workload import TrainingJob


def train(name: str, gpus: int, iterations: int, submit_s: float = 0.0, **kw) -> JobRequest:
    # compute at 45% of the peak: the timings these scenarios (who overlaps whom, when) were built on
    kw.setdefault("efficiency", 0.45)
    spec = TrainingJob(model="llama3-8b", gpus=gpus, tp=8, iterations=iterations, name=name, **kw)
    return JobRequest(name=name, tenant=name[0], spec=spec, submit_s=submit_s)


@pytest.fixture(scope="module")
def fab():
    # 3 leaves of 2 servers, one spine, uplinks oversubscribed 2:1: jobs on different leaves
    # meet on the spine's links
    return leaf_spine(servers=6, gpus_per_server=8, leaves=3, spines=1, oversubscription=2)


C_ARRIVES_S = 1.95


@pytest.fixture(scope="module")
def interrupted(fab):
    # a: one server (NVLink only); b: servers 1-2 (leaf 0 -> leaf 1); c arrives mid-run on
    # servers 3-4 (leaf 1 -> leaf 2) and shares the spine -> leaf 1 link with b; arriving at 1.95 s
    # its gradient AllReduces meet b's (at 1.9 or 2.05 s, with the optimizer step in every
    # iteration, the two jobs' AllReduces interleave without ever meeting: same period, other
    # phase; 1.9 s met before the TP collectives took NCCL's NVLink speed, 360 of 450 GB/s)
    jobs = [train("a", 8, 40), train("b", 16, 40), train("c", 16, 30, submit_s=C_ARRIVES_S)]
    return {f: simulate_cluster(fab, jobs, horizon_s=60.0, fidelity=f) for f in ("collective", "phase")}


def test_phase_agrees_with_collective_within_2_percent_on_jct(interrupted):
    coll, ph = interrupted["collective"], interrupted["phase"]
    for a, b in zip(coll.jobs, ph.jobs, strict=True):
        assert a.finish_s is not None and b.finish_s is not None
        assert b.finish_s - b.start_s == pytest.approx(a.finish_s - a.start_s, rel=0.02), a.name
        assert len(b.iteration_end_s) == len(a.iteration_end_s)


def test_phase_fast_forwards_isolated_jobs_and_cuts_windows_short(interrupted):
    ph = interrupted["phase"]
    a, b, c = (ph.job(x) for x in "abc")
    assert a.fast_forwarded_iterations == 40  # NVLink only: never disturbed
    # b ran alone until c arrived, then shared the spine link with c until one of them left
    assert 0 < b.fast_forwarded_iterations < 40
    assert b.iteration_end_s[b.fast_forwarded_iterations - 1] <= C_ARRIVES_S + b.solo_iteration_s
    assert c.fast_forwarded_iterations < 30
    # the shared part was slower than alone (the closed forms of test_cluster check by how much)
    assert b.iteration_s.max() > 1.05 * b.solo_iteration_s
    assert ph.num_coflows < interrupted["collective"].num_coflows / 2


def test_phase_credits_fast_forwarded_bytes_to_the_links(interrupted):
    coll, ph = interrupted["collective"], interrupted["phase"]
    assert ph.link_bytes.sum() == pytest.approx(coll.link_bytes.sum(), rel=1e-6)
    assert np.allclose(ph.link_bytes, coll.link_bytes, rtol=1e-6, atol=1.0)


def test_an_isolated_job_is_exact(fab):
    jobs = [train("solo", 16, 25)]
    coll = simulate_cluster(fab, jobs, horizon_s=30.0, fidelity="collective").job("solo")
    ph = simulate_cluster(fab, jobs, horizon_s=30.0, fidelity="phase").job("solo")
    assert ph.fast_forwarded_iterations == 25
    assert ph.finish_s == pytest.approx(coll.finish_s, rel=1e-9)
    assert ph.solo_iteration_s == pytest.approx(coll.iteration_s[0], rel=1e-9)
    assert np.allclose(ph.iteration_end_s, coll.iteration_end_s, rtol=1e-9)


def test_unfinished_fast_forward_reports_iterations_up_to_the_horizon(fab):
    jobs = [train("long", 8, 10_000)]
    ph = simulate_cluster(fab, jobs, horizon_s=10.0, fidelity="phase").job("long")
    coll = simulate_cluster(fab, jobs, horizon_s=10.0, fidelity="collective").job("long")
    assert ph.finish_s is None and coll.finish_s is None
    assert len(ph.iteration_end_s) == len(coll.iteration_end_s)
    assert ph.iteration_end_s[-1] <= 10.0


def test_exact_background_rule_keeps_phase_equal_to_collective(fab):
    jobs = [train("a", 8, 20), train("b", 16, 20)]
    bg = BackgroundSpec(load=0.2, max_flows_per_s=200)
    coll = simulate_cluster(fab, jobs, horizon_s=10.0, fidelity="collective", background=bg, seed=5)
    ph = simulate_cluster(fab, jobs, horizon_s=10.0, fidelity="phase", background=bg, seed=5)
    for x in "ab":
        assert ph.job(x).finish_s == pytest.approx(coll.job(x).finish_s, rel=0.02)
    assert ph.job("a").fast_forwarded_iterations == 20  # background never crosses NVLink


def test_sampled_background_rule_fast_forwards_network_jobs_close_to_collective(fab):
    # "sampled" is an approximation (BackgroundSpec docstring); on this scenario it stays
    # within 9% of collective fidelity while fast-forwarding most iterations (measured with the
    # optimizer step in every iteration: -5.9%, +0.3%, -3.8% for seeds 1, 2, 3; seed 1 -8.2%
    # since NCCL's channel rate is a rate limit, not more bytes on the links the background shares)
    jobs = [train("b", 16, 100)]
    coll = simulate_cluster(fab, jobs, horizon_s=60.0, fidelity="collective", seed=1,
                            background=BackgroundSpec(load=0.2, max_flows_per_s=100))
    ph = simulate_cluster(fab, jobs, horizon_s=60.0, fidelity="phase", seed=1,
                          background=BackgroundSpec(load=0.2, max_flows_per_s=100, fast_forward="sampled",
                                                    sample_every_s=2.0))
    c, p = coll.job("b"), ph.job("b")
    assert p.finish_s == pytest.approx(c.finish_s, rel=0.09)
    assert p.finish_s == pytest.approx(p.start_s + p.iteration_s.sum(), rel=1e-9)
    assert p.fast_forwarded_iterations > 70
    assert c.finish_s > 1.1 * 100 * p.solo_iteration_s  # the background does slow the job down


@pytest.mark.parametrize("seed", [1, 3])
def test_mean_background_rule_fast_forwards_network_jobs_close_to_exact(fab, seed):
    # "mean" (BackgroundSpec docstring): a job alone among stationary background fast-forwards
    # at its mean iteration time among it (probed once); against the exact rule (phase fidelity
    # with "exact", which equals collective fidelity for this network job). Measured, seeds 1, 2, 3:
    # -0.64%, -0.00%, -0.34% on the job's run time, with 4.6x fewer events
    jobs = [train("b", 16, 100)]
    exact = simulate_cluster(fab, jobs, horizon_s=60.0, fidelity="phase", seed=seed,
                             background=BackgroundSpec(load=0.2, max_flows_per_s=100))
    mean = simulate_cluster(fab, jobs, horizon_s=60.0, fidelity="phase", seed=seed,
                            background=BackgroundSpec(load=0.2, max_flows_per_s=100, fast_forward="mean"))
    e, m = exact.job("b"), mean.job("b")
    assert m.finish_s - m.start_s == pytest.approx(e.finish_s - e.start_s, rel=0.02)
    assert mean.num_events < exact.num_events / 3
    assert m.fast_forwarded_iterations == 100 and e.fast_forwarded_iterations < 10
    assert m.finish_s - m.start_s > 1.1 * 100 * m.solo_iteration_s  # the background slows it


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mean_rule_probes_the_background_the_job_meets_not_empty_links(fab, seed):
    # Long-lived background (5 aggregated flows per second at 20% load: each flow lasts seconds,
    # so the flows in flight take that long to build up from the empty start) and a job that
    # starts at 60 s, among a stationary background. The "mean" rule's probe starts a warm-up
    # before the job's start (`JobRun._probe_mean`); a probe on empty links at time 0 measured
    # -22.6%, -28.6%, -13.6% on the job's run time against the exact rule (seeds 1-3), the
    # warm-up -4.7%, -7.5%, -2.6%.
    jobs = [train("b", 16, 100, submit_s=60.0)]
    kw = dict(horizon_s=150.0, fidelity="phase", seed=seed)
    exact = simulate_cluster(fab, jobs, background=BackgroundSpec(load=0.2, max_flows_per_s=5), **kw)
    mean = simulate_cluster(fab, jobs, background=BackgroundSpec(load=0.2, max_flows_per_s=5,
                                                                 fast_forward="mean"), **kw)
    e, m = exact.job("b"), mean.job("b")
    assert m.fast_forwarded_iterations == 100
    assert m.finish_s - m.start_s == pytest.approx(e.finish_s - e.start_s, rel=0.10)
