"""The `flowherd` policy: SRPT classes, priority-aware paths, the agent's action space."""

import numpy as np
import pytest
from test_cluster_control import NIC, _run, _wire_fraction

from flowherd.cluster.control_api import GRANTS, CoflowState, DecisionPoint, JobState, NetworkView
from flowherd.cluster.simulate import JobRequest
from flowherd.control import make_controller
from flowherd.control.herd import (
    ACTIONS,
    NUM_FEATURES,
    HerdController,
    HerdParams,
    action_mask,
    asks_agent,
    decision_for,
    features,
    srpt_class,
    structured_action,
)
from flowherd.errors import ConfigError
from flowherd.workload import TrainingJob

GBps = 1e9


def _job(name, done, total=10, period=1.0, slack=0.0):
    return JobState(name=name, num_gpus=8, period_s=period, solo_period_s=period, iterations_total=total,
                    iterations_done=done, slack_s=slack)


def _view(jobs, coflows=(), util=None, num_links=4, levers="priority"):
    return NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(num_links, 10 * GBps),
                       link_utilization=np.zeros(num_links) if util is None else np.asarray(util, float),
                       coflows=tuple(coflows), jobs={j.name: j for j in jobs}, levers=GRANTS[levers])


def test_classes_follow_remaining_time_shortest_first():
    # remaining = (total - done) * solo period: c 1 s, a 4 s, b 9 s, d unknown size (last)
    jobs = [_job("a", 6), _job("b", 1), _job("c", 9),
            JobState(name="d", num_gpus=8, period_s=1.0)]
    view = _view(jobs)
    assert [srpt_class(n, view) for n in "cabd"] == [0, 1, 2, 3]
    assert {srpt_class(n, view, num_classes=1) for n in "abcd"} == {0}
    assert jobs[0].remaining_s == pytest.approx(4.0) and jobs[3].remaining_s is None


def test_paths_avoid_links_busy_with_traffic_served_first():
    # pair with two candidate paths: over link 0 or link 1; link 0 carries a class-0 coflow of
    # another job, link 1 a class-5 one. A class-2 transfer goes over link 1 (it would get nothing
    # on link 0 under strict priority), whatever the utilization says (link 1 busier).
    jobs = [_job("me", 5), _job("hi", 8), _job("lo", 0)]
    cof = [CoflowState(name="x", job="hi", remaining_bytes=1e9, link_idx=[0], link_remaining_bytes=[1e9],
                       priority=0),
           CoflowState(name="y", job="lo", remaining_bytes=5e9, link_idx=[1], link_remaining_bytes=[5e9],
                       priority=5)]
    view = _view(jobs, cof, util=[0.5, 1.0, 0, 0])
    p = DecisionPoint(kind="collective", now_s=0.0, job="me", link_idx=[0], link_bytes=[1e8],
                      src_gpu=[0], dst_gpu=[1], candidate_paths=((np.array([0]), np.array([1])),))
    d = decision_for(ACTIONS.index((2, False)), p, view)
    assert d.path_choice == (1,) and d.priority == 2 and d.delay_s == 0
    # as class 6 both coflows are served first: the link with fewer bytes to drain (link 0, 1 GB)
    assert decision_for(ACTIONS.index((6, False)), p, view).path_choice == (0,)


def test_without_classes_paths_go_where_a_new_flow_gets_the_largest_share():
    # two candidate paths, both links fully used (utilization 1, all adaptive routing sees): link 0
    # carries 5 flows, link 1 one; a new flow gets a sixth of link 0 and half of link 1
    jobs = [_job("me", 5)]
    view = NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(4, 10 * GBps),
                       link_utilization=np.array([1.0, 1.0, 0.0, 0.0]), jobs={j.name: j for j in jobs},
                       levers=GRANTS["buffer"], link_flows=[5, 1, 0, 0])
    cands = ((np.array([0]), np.array([1])),) * 3
    p = DecisionPoint(kind="collective", now_s=0.0, job="me", link_idx=[0], link_bytes=[1e8],
                      src_gpu=[0, 0, 0], dst_gpu=[1, 1, 1], candidate_paths=cands)
    d = HerdController().decide(p, view)
    # the first pairs take link 1 (1/2, then 1/3 of it); the third finds 1/4 there, still above
    # link 0's 1/6; with utilization only, the first candidate wins every time
    assert d.path_choice == (1, 1, 1) and d.delay_s == 0 and d.priority is None
    util = HerdController(HerdParams(path_metric="utilization")).decide(p, view)
    assert util.path_choice == (0, 1, 0)
    # link 0 idle: its unused capacity beats any share of a busy link
    idle = NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.full(4, 10 * GBps),
                       link_utilization=np.array([0.0, 1.0, 0.0, 0.0]), jobs={j.name: j for j in jobs},
                       levers=GRANTS["buffer"], link_flows=[0, 1, 0, 0])
    assert HerdController().decide(p, idle).path_choice[0] == 0
    with pytest.raises(ConfigError, match="link_flows"):
        NetworkView(now_s=0.0, link_capacity_bytes_per_s=np.ones(4), link_utilization=np.zeros(4),
                    link_flows=[1, 2])
    # split (an ablation): each pair's bytes over both paths in proportion to the rates there, the
    # earlier pairs' fractions counted: first 1/6 : 1/2 of the link (fractions 1/4, 3/4)
    split = HerdController(HerdParams(path_metric="split")).decide(p, view)
    assert split.path_choice is None and len(split.path_splits) == 3
    np.testing.assert_allclose(split.path_splits[0], (0.25, 0.75))
    # the second pair finds link 0 with 5.25 flows, link 1 with 1.75: rates C/6.25 and C/2.75
    np.testing.assert_allclose(split.path_splits[1], np.array([1 / 6.25, 1 / 2.75]) / (1 / 6.25 + 1 / 2.75))
    with pytest.raises(ConfigError, match="path_metric"):
        HerdParams(path_metric="hops")
    with pytest.raises(ConfigError, match="yield_burst"):
        HerdParams(yield_burst="no")


def test_structured_action_is_the_controllers_decision_and_masks_hold():
    jobs = [_job("a", 2, slack=0.5), _job("b", 7)]
    cof = [CoflowState(name="x", job="b", remaining_bytes=4e9, link_idx=[0], link_remaining_bytes=[4e9],
                       priority=0)]
    view = _view(jobs, cof, util=[1.0, 0, 0, 0])
    p = DecisionPoint(kind="collective", now_s=0.0, job="a", link_idx=[0], link_bytes=[1e9])
    assert asks_agent(p) and not asks_agent(DecisionPoint(kind="arrival", now_s=0.0, job="a"))
    x = features(p, view)
    assert x.shape == (NUM_FEATURES,) and x.dtype == np.float32 and np.all(np.isfinite(x))
    m = action_mask(p, view)
    assert m.all()  # a has slack and b's burst sits on its bottleneck: buffering can delay
    ctl = HerdController(HerdParams(theta=0.5))
    a = structured_action(p, view, ctl.params)
    assert ACTIONS[a] == (1, True)  # a has 8 s left, b 3 s: a is second; contention 1 > 0.5
    assert ctl.decide(p, view) == decision_for(a, p, view, ctl.params)
    assert decision_for(a, p, view).delay_s == pytest.approx(min(4e9 / 10e9, 0.5, 0.5 * 1.0))
    # no slack: buffering masked out
    view0 = _view([_job("a", 2), _job("b", 7)], cof, util=[1.0, 0, 0, 0])
    assert not action_mask(p, view0)[[d for _c, d in ACTIONS]].any()
    with pytest.raises(ConfigError, match="action"):
        decision_for(len(ACTIONS), p, view)
    with pytest.raises(ConfigError, match="num_classes"):
        make_controller("flowherd", num_classes=0)


def test_the_job_with_less_left_gets_its_solo_iteration_time():
    # Closed form (Schrage 1968, SRPT on one server). Two lock-step DP jobs share the uplink U and
    # are communication-bound (S / U > C). Fair sharing gives both C + 2 S / U per iteration;
    # shortest-remaining-first gives the shorter job its solo time C + S / U (it always has the
    # link when it sends) while the longer one fills the gaps, so the short job ends sooner.
    def job(name, iterations):  # 2-GPU pure DP, one bucket, short sequences: little compute
        spec = TrainingJob(model="llama3-8b", gpus=2, tp=1, bucket_bytes=1e15, iterations=iterations,
                           seq_len=256, global_batch=2, micro_batch=1, name=name)
        return JobRequest(name=name, tenant="t", spec=spec, submit_s=0.0)

    free = _run(None, jobs=[job("a", 3), job("b", 8)])
    res = _run(make_controller("flowherd"), jobs=[job("a", 3), job("b", 8)], levers="priority")
    c = free.job("a").compute_only_iteration_s
    s = job("a", 1).spec.model.num_params() * job("a", 1).spec.grad_bytes
    comm = s / (2 * NIC / 4 * _wire_fraction(s))  # U at NCCL's channel speed (test_cluster_control)
    assert comm > c  # communication-bound, or the order could not matter
    np.testing.assert_allclose(free.job("a").iteration_s, c + 2 * comm, rtol=0.02)
    np.testing.assert_allclose(res.job("a").iteration_s, c + comm, rtol=0.02)
    assert res.job("a").finish_s < free.job("a").finish_s
    mean_free = np.mean([free.job(n).finish_s for n in "ab"])
    mean_srpt = np.mean([res.job(n).finish_s for n in "ab"])
    assert mean_srpt < mean_free


@pytest.mark.parametrize("fidelity", ["collective", "phase"])
def test_views_count_every_iteration_done_fast_forwarded_ones_included(fidelity):
    # the remaining time SRPT ranks by needs iterations done, also those a job alone ran as one
    # fast-forwarded delay (phase fidelity), which the controller is never asked about
    from scripted import Fixed
    from test_cluster_control import dp_job

    rec = Fixed(None)
    res = _run(rec, jobs=[dp_job("a", iterations=6)], fidelity=fidelity)
    seen = {p.job: (v.jobs[p.job].iterations_done, v.jobs[p.job].remaining_s)
            for p, v in zip(rec.points, rec.views, strict=True) if p.kind == "departure"}
    assert seen["a"][0] == 6
    ff = res.job("a").fast_forwarded_iterations
    assert (ff > 0) == (fidelity == "phase")
    if ff < 6:  # a walked iteration gave the hook the job's solo period: nothing left
        assert seen["a"][1] == 0.0


def _loaded_job(name, done, bytes_on_link0):
    """A job on link 0 (10 GB/s) of period 1 s putting ``bytes_on_link0`` there per iteration."""
    return JobState(name=name, num_gpus=8, period_s=1.0, solo_period_s=1.0, iterations_total=10,
                    iterations_done=done, link_idx=[0], link_bytes_per_iteration=[bytes_on_link0])


@pytest.mark.parametrize("per_job_bytes, weights", [(6e9, (16.0, 4.0, 1.0)), (3e9, (1.0, 1.0, 1.0))])
def test_under_weights_alone_the_order_is_weighted_shares_on_overloaded_links(per_job_bytes, weights):
    # three jobs, 9, 5 and 2 s left; each puts per_job_bytes per 1-s iteration on link 0 (10 GB/s):
    # 6 GB each offers 1.8 link-seconds per second (overloaded: weights 4^2, 4, 1, shortest first);
    # 3 GB each offers 0.9 (the link carries them all: every weight 1)
    jobs = [_loaded_job("long", 1, per_job_bytes), _loaded_job("mid", 5, per_job_bytes),
            _loaded_job("short", 8, per_job_bytes)]
    view = _view(jobs, levers="weighted")
    ctl = HerdController(HerdParams(balance=False))
    got = [ctl.decide(DecisionPoint(kind="collective", now_s=0.0, job=n, link_idx=[0], link_bytes=[1e9]),
                      view).weight for n in ("short", "mid", "long")]
    assert tuple(got) == weights


def _auto_wait(mode, b_period_s, a_spacing_s):
    """b's wait at its burst origin (5.1 s) under ``buffering: mode``, both jobs' patterns learnt
    from the same onsets: a (period 1 s) has 4 buckets of 1 GB ``a_spacing_s`` apart on link 0 (0.1
    s each at 10 GB/s) and one in flight, b has 4 back-to-back buckets every ``b_period_s``."""
    ctl = HerdController(HerdParams(buffering=mode, balance=False, prioritize=False))
    learners = {id(lr): lr for lr in (ctl.shifter.learner, ctl.gate.learner)}.values()  # auto: one

    def point(job, t):
        return DecisionPoint(kind="collective", now_s=t, job=job, task=f"{job}@{t}", size_bytes=1e9,
                             link_idx=[0], link_bytes=[1e9])

    seen = [("other", -1.0), *(("a", k + b * a_spacing_s) for k in range(5) for b in range(4)),
            *(("b", 5.1 - m * b_period_s + b * 0.1) for m in range(round(5 / b_period_s), 0, -1)
              for b in range(4)),
            ("a", 5.0), ("a", 5.0 + a_spacing_s)]
    for lr in learners:
        for job, t in sorted(seen, key=lambda x: x[1]):
            lr.observe(point(job, t), _view([], levers="buffer"), t)
    t = 5.0 + a_spacing_s
    a_bucket = CoflowState(name="a/x", job="a", remaining_bytes=1e9, link_idx=[0], link_remaining_bytes=[1e9])
    view = NetworkView(now_s=t, link_capacity_bytes_per_s=np.full(4, 10 * GBps), link_utilization=np.zeros(4),
                       coflows=(a_bucket,), levers=GRANTS["buffer"])
    d = ctl.decide(point("b", t), view)
    return 0.0 if d is None else d.delay_s


@pytest.mark.parametrize(("b_period_s", "a_spacing_s", "rule", "shift_gate_s"),
                         [(1.0, 0.15, "shift", (0.3, 0.0)), (2.0, 0.1, "gate", (0.6, 0.3))])
def test_auto_buffering_shifts_where_the_learnt_periods_agree_and_gates_where_they_differ(
        b_period_s, a_spacing_s, rule, shift_gate_s):
    # periods equal: the one-time shift waits for a's burst (its span, 0.55 s from 5.0) plus a
    # quarter of the free time, 0.3 s; the gate's turns never wait for a burst that does not
    # saturate the link (W / span = 0.4 / 0.55). Periods 2x apart: the gate waits for a's 0.3 s
    # left (no margin: no common frame), the shift adds a quarter of b's free time 2 - 0.8 s: 0.6 s
    shift, gate = _auto_wait("shift", b_period_s, a_spacing_s), _auto_wait("gate", b_period_s, a_spacing_s)
    assert (shift, gate) == pytest.approx(shift_gate_s)
    assert _auto_wait("auto", b_period_s, a_spacing_s) == pytest.approx(shift if rule == "shift" else gate)


def test_buffering_and_its_period_tolerance_are_checked():
    with pytest.raises(ConfigError, match=r"buffering must be 'auto', 'gate' or 'shift', got 'both'"):
        HerdParams(buffering="both")
    with pytest.raises(ConfigError, match=r"period_tolerance must be in \[0, 1\].*params.period_tolerance"):
        HerdParams(period_tolerance=-0.1)


def _widest_reference(point, view):
    # the rule over the whole fabric's arrays: per pair the first candidate whose slowest link gives
    # a new flow the most (max of unused capacity and C / (n + 1)), earlier pairs counted
    cap = view.link_capacity_bytes_per_s
    free = cap * (1.0 - view.link_utilization)
    n = view.link_flows.astype(float).copy()
    out = []
    for cands in point.candidate_paths:
        rates = [min(max(free[lk], cap[lk] / (n[lk] + 1.0)) for lk in p) if len(p) else np.inf
                 for p in cands]
        k = int(np.argmax(rates))
        out.append(k)
        for lk in cands[k]:
            free[lk] = max(free[lk] - rates[k], 0.0)
            n[lk] += 1.0
    return tuple(out)


def test_widest_share_reads_only_the_candidate_links_and_chooses_as_over_the_whole_fabric():
    from flowherd.control.herd import _widest_share

    rng = np.random.default_rng(7)
    for _ in range(200):
        num_links = int(rng.integers(4, 40))
        cap = rng.choice([1e9, 5e9, 12.5e9], size=num_links)
        util = rng.uniform(0, 1, num_links) * (rng.uniform(size=num_links) < 0.7)
        view = NetworkView(now_s=0.0, link_capacity_bytes_per_s=cap, link_utilization=util,
                           link_flows=rng.integers(0, 6, num_links), coflows=(), jobs={})
        cands = tuple(tuple(rng.choice(num_links, size=int(rng.integers(1, 5)), replace=False)
                            for _ in range(int(rng.integers(1, 5)))) for _ in range(int(rng.integers(1, 9))))
        point = DecisionPoint(kind="collective", now_s=0.0, job="a", src_gpu=np.arange(len(cands)),
                              dst_gpu=np.arange(len(cands)) + 8, candidate_paths=cands)
        assert _widest_share(point, view) == _widest_reference(point, view)
