"""Every registered controller, and the literature baselines on hand-built cases."""

import math

import numpy as np
import pytest

from flowherd.cluster.control_api import (
    DECISION_KINDS,
    GRANTS,
    CoflowState,
    Controller,
    DecisionPoint,
    JobState,
    NetworkView,
    validate,
)
from flowherd.control import CONTROLLERS, make_controller
from flowherd.control.baselines import (
    cassini_shifts,
    crux_order,
    decide_adaptive,
    decide_cassini,
    decide_crux,
    decide_sincronia,
    decide_varys,
    rank_to_class,
    sincronia_order,
    varys_order,
)
from flowherd.errors import ConfigError, UnknownNameError

GBps = 1e9


# ---- synthetic views and the shared invariant checker -------------------------------------------
def synthetic_case(seed: int, kind: str = "collective") -> tuple[DecisionPoint, NetworkView]:
    """A random view (jobs with periodic windows sharing links, active coflows, background) and a
    decision point of ``kind`` for one of its jobs."""
    rng = np.random.default_rng(seed)
    num_links = int(rng.integers(6, 20))
    cap = rng.choice([12.5, 25.0, 50.0], size=num_links) * GBps
    util = rng.uniform(0, 1, num_links) * (rng.uniform(size=num_links) < 0.7)
    jobs = {}
    for j in range(int(rng.integers(1, 5))):
        period = float(rng.uniform(0.1, 1.0))
        w = int(rng.integers(1, 4))
        offs = np.sort(rng.uniform(0, 0.8 * period, w))
        durs = rng.uniform(0.01, 0.2, w) * period
        jobs[f"j{j}"] = JobState(
            name=f"j{j}", num_gpus=int(rng.choice([8, 16, 64])),
            period_s=None if rng.uniform() < 0.15 else period,
            iteration_start_s=float(rng.uniform(0, 2)), comm_offsets_s=offs, comm_durations_s=durs,
            slack_s=float(rng.choice([0.0, rng.uniform(0, 0.1)])),
            recent_iteration_s=np.full(3, period), compute_flops_per_iteration=float(rng.uniform(1e14, 1e16)),
            comm_bytes_per_iteration=float(rng.choice([0.0, rng.uniform(1e8, 1e10)])),
            link_idx=rng.choice(num_links, size=int(rng.integers(1, 5)), replace=False),
            comm_rate_bytes_per_s=None if rng.uniform() < 0.5 else float(rng.uniform(1, 50) * GBps))
    coflows = []
    for c in range(int(rng.integers(0, 6))):
        lk = rng.choice(num_links, size=int(rng.integers(1, 4)), replace=False)
        rem = rng.uniform(1e6, 1e9, lk.size)
        owner = rng.choice([*jobs, None])
        coflows.append(CoflowState(name=f"c{c}", job=owner, remaining_bytes=float(rem.sum()), link_idx=lk,
                                   link_remaining_bytes=rem, priority=int(rng.integers(0, 3))))
    view = NetworkView(now_s=2.0 + float(rng.uniform()), link_capacity_bytes_per_s=cap, link_utilization=util,
                       coflows=tuple(coflows), jobs=jobs, history_window_s=5.0)
    job = str(rng.choice(list(jobs)))
    if kind != "collective":
        return DecisionPoint(kind=kind, now_s=view.now_s, job=None if kind == "tick" else job), view
    pairs = int(rng.integers(1, 5))
    cands = tuple(tuple(rng.choice(num_links, size=int(rng.integers(1, 4)), replace=False)
                        for _ in range(int(rng.integers(1, 4)))) for _ in range(pairs))
    lk = rng.choice(num_links, size=int(rng.integers(1, 5)), replace=False)
    point = DecisionPoint(kind="collective", now_s=view.now_s, job=job, group=str(rng.choice(["tp", "dp"])),
                          task=f"{job}/ar", size_bytes=1e8, link_idx=lk,
                          link_bytes=rng.uniform(1e6, 1e8, lk.size),
                          src_gpu=np.arange(pairs), dst_gpu=np.arange(pairs) + 8,
                          candidate_paths=cands if rng.uniform() < 0.8 else (),
                          phase_s=float(rng.uniform(0, 0.5)))
    return point, view


def _snapshot(point, view):
    return ([a.copy() for a in (point.link_idx, point.link_bytes, view.link_utilization)]
            + [c.link_remaining_bytes.copy() for c in view.coflows])


def check_controller(ctrl: Controller, point: DecisionPoint, view: NetworkView) -> None:
    """A controller's decision is valid, deterministic across resets, and leaves its inputs alone."""
    assert isinstance(ctrl, Controller)
    before = _snapshot(point, view)
    ctrl.reset(0)
    d1 = ctrl.decide(point, view)
    validate(d1, point)
    ctrl.reset(0)
    d2 = ctrl.decide(point, view)
    assert d1 == d2
    for a, b in zip(before, _snapshot(point, view), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", list(CONTROLLERS))
@pytest.mark.parametrize("seed", range(12))
def test_every_controller_returns_valid_decisions(name, seed):
    ctrl = make_controller(name)
    assert ctrl.name == name
    for kind in DECISION_KINDS:
        check_controller(ctrl, *synthetic_case(seed, kind))


def test_registry_holds_the_baselines_and_flowherds_controllers():
    assert {"none", "adaptive", "cassini", "crux", "sincronia", "varys", "threshold"} <= set(CONTROLLERS)
    with pytest.raises(UnknownNameError, match="did you mean 'cassini'"):
        make_controller("casini")
    with pytest.raises(ConfigError, match="does not take parameters"):
        make_controller("varys", theta=0.3)
    with pytest.raises(ConfigError, match="controller must be a name"):
        make_controller(42)
    assert make_controller("threshold", theta=0.7).params.theta == 0.7


# ---- adaptive -----------------------------------------------------------------------------------
def _view(num_links, util=None, cap=None, coflows=(), jobs=None, now_s=0.0, levers="priority"):
    """A view under the ``priority`` grant (every lever: what the ordering baselines need)."""
    cap = np.full(num_links, 10 * GBps) if cap is None else cap
    return NetworkView(now_s=now_s, link_capacity_bytes_per_s=cap,
                       link_utilization=np.zeros(num_links) if util is None else np.asarray(util, float),
                       coflows=tuple(coflows), jobs=jobs or {}, levers=GRANTS[levers])


def test_adaptive_takes_the_least_loaded_path_and_spreads_its_pairs():
    # paths: 0 = links {0, 1}, 1 = links {2, 3}; link 1 is 90% busy, link 2 30%
    paths = (np.array([0, 1]), np.array([2, 3]))
    p = DecisionPoint(kind="collective", now_s=0.0, job="a", src_gpu=[0, 1, 2], dst_gpu=[4, 5, 6],
                      candidate_paths=(paths, paths, paths))
    d = decide_adaptive(p, _view(4, util=[0.1, 0.9, 0.3, 0.0]))
    # pair 0: max 0.3 < 0.9 -> path 1; pair 1: path 1 now 1.3 vs 0.9 -> path 0; pair 2: 1.3 vs 1.9 -> 1
    assert d.path_choice == (1, 0, 1)


# ---- cassini ------------------------------------------------------------------------------------
def _periodic_job(name, period_s, window_s, links, start_s=0.0, comm_bytes=1e9):
    return JobState(name=name, num_gpus=8, period_s=period_s, iteration_start_s=start_s,
                    comm_offsets_s=[0.0], comm_durations_s=[window_s], link_idx=links,
                    comm_bytes_per_iteration=comm_bytes, compute_flops_per_iteration=1e15, slack_s=0.0)


@pytest.mark.parametrize("window_frac", [0.1, 0.25, 0.5])
def test_cassini_puts_two_identical_jobs_half_a_period_apart(window_frac):
    # Closed form (CASSINI, NSDI'24, Sec. 4 on the unit circle): two jobs of period T with one
    # window w <= T/2 on a shared link interleave without overlap for any relative shift in
    # [w, T - w]; the most robust, T/2, keeps the largest gap on both sides.
    T = 0.4
    a = _periodic_job("a", T, window_frac * T, [0, 1])
    b = _periodic_job("b", T, window_frac * T, [1, 2])
    s = cassini_shifts([a, b], np.full(3, 10 * GBps))
    rel = (s["b"] - s["a"]) % T
    assert rel == pytest.approx(T / 2, abs=1e-12)


def test_cassini_shift_removes_the_overlap_of_windows():
    T, w = 1.0, 0.3
    jobs = [_periodic_job(n, T, w, [0], comm_bytes=c) for n, c in (("a", 3e9), ("b", 2e9), ("c", 1e9))]
    s = cassini_shifts(jobs, np.full(1, 10 * GBps))
    starts = sorted(v % T for v in s.values())
    gaps = np.diff([*starts, starts[0] + T])
    assert gaps.min() >= w - 1e-9  # 3 windows of 0.3 fit on a circle of 1.0 without overlap
    assert s["a"] == 0.0  # the job sending most is the reference


def test_cassini_separates_jobs_of_different_periods_on_their_common_circle():
    # periods 1.0 and 0.5: the circle's perimeter is their LCM, 1.0 (CASSINI Sec. 4); a window of
    # 0.25 per 1.0 and one of 0.125 per 0.5 fit without overlap (b's shifts in [0.25, 0.375])
    a = _periodic_job("a", 1.0, 0.25, [0], comm_bytes=2e9)
    b = _periodic_job("b", 0.5, 0.125, [0], comm_bytes=1e9)
    s = cassini_shifts([a, b], np.ones(1))
    t = np.linspace(0, 1.0, 4001, endpoint=False)
    on_a = np.mod(t - s["a"], 1.0) < 0.25
    on_b = np.mod(t - s["b"], 0.5) < 0.125
    assert not np.any(on_a & on_b)
    assert 0.25 - 1e-9 <= s["b"] % 0.5 <= 0.375 + 1e-9


def test_cassini_unified_circle_over_the_lcm_worked_by_hand():
    # CASSINI (NSDI'24, Sec. 4.1): jobs of iteration times 40 and 60 ms on one link go on a circle
    # of their LCM, 120 ms. Job a (sends most: the reference, shift 0) communicates [0, 10) ms of
    # every 40: busy [0, 10), [40, 50), [80, 90). Job b communicates 10 ms of every 60, at s and
    # s + 60; (s + 60) mod 40 = (s + 20) mod 40, so both its windows clear a's when s mod 40 and
    # (s + 20) mod 40 are both in [10, 30]: s mod 20 = 10, i.e. s in {10, 30, 50} ms of [0, 60).
    # A circle of one period (60 ms: a seen at 0 and 40 only) would also accept s = 20, whose
    # second window [80, 90) meets a's third; on the 120-ms circle no overlap is left.
    a = _periodic_job("a", 0.040, 0.010, [0], comm_bytes=2e9)
    b = _periodic_job("b", 0.060, 0.010, [0], comm_bytes=1e9)
    s = cassini_shifts([a, b], np.ones(1), num_shifts=24)
    assert s["a"] == 0.0
    assert min(abs(s["b"] - v) for v in (0.010, 0.030, 0.050)) < 1e-9
    t = np.linspace(0, 0.120, 12001, endpoint=False)
    assert not np.any((np.mod(t, 0.040) < 0.010) & (np.mod(t - s["b"], 0.060) < 0.010))


def test_cassini_traverses_the_affinity_graph_from_the_largest_sender():
    # CASSINI (NSDI'24, Sec. 4.2): jobs a-b share link 0, b-c link 1, a and c share nothing. The
    # traversal fixes a (sends most), shifts b against a on link 0, then c against b on link 1:
    # every pair that shares a link ends half a period apart, and a and c (no shared link) may
    # coincide. Windows of a quarter period.
    T, w = 0.4, 0.1
    a = _periodic_job("a", T, w, [0], comm_bytes=3e9)
    b = _periodic_job("b", T, w, [0, 1], comm_bytes=2e9)
    c = _periodic_job("c", T, w, [1], comm_bytes=1e9)
    s = cassini_shifts([a, b, c], np.ones(2))
    assert s["a"] == 0.0
    assert (s["b"] - s["a"]) % T == pytest.approx(T / 2)
    assert (s["c"] - s["b"]) % T == pytest.approx(T / 2)


def test_sincronia_scales_the_weights_of_the_coflows_left_worked_by_hand():
    # Sincronia (SIGCOMM'18, Alg. 1, BSSI), weights 1, p = bytes on links 0 and 1:
    #   c0 = (3, 0), c1 = (1, 2), c2 = (2, 1.5)
    # step 3: loads (6, 3.5): bottleneck 0; w/p there: c0 1/3, c1 1, c2 1/2 -> c0 last;
    #         scale: w1 = 1 - 1 * 1/3 = 2/3, w2 = 1 - 1 * 2/3 = 1/3
    # step 2: loads (3, 3.5): bottleneck 1; w/p: c1 (2/3)/2 = 1/3, c2 (1/3)/1.5 = 2/9 -> c2 last
    # order: c1, c2, c0. Without the scaling step c1 (1/2 < 2/3) would go last of the two.
    p = np.array([[3.0, 0.0], [1.0, 2.0], [2.0, 1.5]])
    assert sincronia_order(p).tolist() == [1, 2, 0]


def test_cassini_leaves_jobs_on_disjoint_links_alone():
    s = cassini_shifts([_periodic_job("a", 1.0, 0.3, [0]), _periodic_job("b", 1.0, 0.3, [1])], np.ones(2))
    assert s == {}


def test_cassini_delays_the_second_job_by_its_shift_then_not_again():
    T, w = 0.4, 0.1
    a = _periodic_job("a", T, w, [0], comm_bytes=2e9)
    b = _periodic_job("b", T, w, [0], comm_bytes=1e9)
    view = _view(1, util=[1.0], jobs={"a": a, "b": b}, now_s=0.0)
    pb = DecisionPoint(kind="collective", now_s=0.0, job="b", link_idx=[0], link_bytes=[1e9], phase_s=0.0)
    d = decide_cassini(pb, view)
    assert d.delay_s == pytest.approx(T / 2)
    # once b's iterations start T/2 later it is aligned: no more delay
    b2 = _periodic_job("b", T, w, [0], start_s=T / 2, comm_bytes=1e9)
    view2 = _view(1, jobs={"a": a, "b": b2}, now_s=T / 2)
    assert decide_cassini(DecisionPoint(kind="collective", now_s=T / 2, job="b", link_idx=[0],
                                        link_bytes=[1e9], phase_s=0.0), view2) is None
    # the reference job is never delayed
    assert decide_cassini(DecisionPoint(kind="collective", now_s=0.0, job="a", link_idx=[0],
                                        link_bytes=[1e9], phase_s=0.0), view) is None


# ---- crux ---------------------------------------------------------------------------------------
def test_crux_intensity_divides_compute_by_the_busiest_link_time_not_by_all_bytes():
    # Crux (SIGCOMM'24) Definition 2, worked by hand: job A computes 4e15 FLOPs per iteration and
    # sends 4 GB over four 10 GB/s links, 1 GB on each: t_A = 1 GB / 10 GB/s = 0.1 s, I_A = 4e16;
    # job B computes 3e15 and sends 2 GB, all on one link: t_B = 0.2 s, I_B = 1.5e16. A first,
    # where compute over total bytes (A 1e6, B 1.5e6 FLOPs per byte) would put B first.
    a = JobState(name="A", num_gpus=8, compute_flops_per_iteration=4e15, comm_bytes_per_iteration=4e9,
                 busiest_link_s=1e9 / (10 * GBps))
    b = JobState(name="B", num_gpus=8, compute_flops_per_iteration=3e15, comm_bytes_per_iteration=2e9,
                 busiest_link_s=2e9 / (10 * GBps))
    assert a.gpu_intensity_flops_per_s == pytest.approx(4e16)
    assert b.gpu_intensity_flops_per_s == pytest.approx(1.5e16)
    assert crux_order([b, a]) == ["A", "B"]
    view = _view(1, jobs={"A": a, "B": b})
    pa = DecisionPoint(kind="collective", now_s=0.0, job="A", link_idx=[0], link_bytes=[1e9])
    assert decide_crux(pa, view).priority == 0
    assert decide_crux(DecisionPoint(kind="collective", now_s=0.0, job="B", link_idx=[0], link_bytes=[1e9]),
                       view).priority == 1


def test_crux_ranks_by_gpu_intensity_and_avoids_more_intense_traffic():
    def job(n, flops):
        return JobState(name=n, num_gpus=8, compute_flops_per_iteration=flops, comm_bytes_per_iteration=1e9,
                        busiest_link_s=0.1)

    jobs = {"lo": job("lo", 1e14), "mid": job("mid", 1e15), "hi": job("hi", 1e16)}
    # "hi" sends on link 0, "lo" on link 1; "mid" chooses between path {0} and path {1}
    cof = [CoflowState(name="h", job="hi", remaining_bytes=5e9, link_idx=[0], link_remaining_bytes=[5e9]),
           CoflowState(name="l", job="lo", remaining_bytes=9e9, link_idx=[1], link_remaining_bytes=[9e9])]
    view = _view(2, util=[0.5, 0.5], coflows=cof, jobs=jobs)
    paths = ((np.array([0]), np.array([1])),)

    def at(name):
        return decide_crux(DecisionPoint(kind="collective", now_s=0.0, job=name, src_gpu=[0], dst_gpu=[1],
                                         candidate_paths=paths), view)

    assert [at(n).priority for n in ("hi", "mid", "lo")] == [0, 1, 2]
    assert at("mid").path_choice == (1,)  # below "lo" traffic, which it outranks, not "hi"'s
    assert at("hi").path_choice == (0,)  # nothing at least as intense anywhere: first path
    assert at("lo").path_choice == (1,)  # its own bytes do not count against it, "hi"'s on link 0 do


# ---- sincronia and varys ------------------------------------------------------------------------
def test_sincronia_orders_the_bottleneck_largest_coflow_last():
    # one bottleneck (link 0, 10 bytes in all); Sincronia (SIGCOMM'18, Alg. 1) puts the coflow with
    # the most bytes on it (smallest weight per byte) last, whatever its other links carry
    p = np.array([[2.0, 0.0, 0.0], [5.0, 0.0, 1.0], [3.0, 4.0, 0.0]])
    order = sincronia_order(p)
    assert order[-1] == 1
    assert sorted(order.tolist()) == [0, 1, 2]
    # with the largest weight it is no longer the cheapest to delay
    assert sincronia_order(p, weights=np.array([1.0, 10.0, 1.0]))[-1] != 1


def test_sincronia_gives_the_bottleneck_largest_collective_the_lowest_priority():
    cof = [CoflowState(name=f"c{i}", job=None, remaining_bytes=b, link_idx=[0], link_remaining_bytes=[b])
           for i, b in enumerate((1e8, 2e8, 3e8))]
    view = _view(1, coflows=cof)
    big = DecisionPoint(kind="collective", now_s=0.0, job="x", link_idx=[0], link_bytes=[9e8])
    small = DecisionPoint(kind="collective", now_s=0.0, job="x", link_idx=[0], link_bytes=[1e7])
    assert decide_sincronia(big, view).priority == 3  # last of 4
    assert decide_sincronia(small, view).priority == 0


def test_varys_order_is_smallest_effective_bottleneck_first():
    # SEBF (Varys, SIGCOMM'14, Sec. 5.1): Gamma_c = max_l bytes_cl / cap_l.
    cap = np.array([10.0, 5.0, 20.0])
    p = np.array([[10.0, 0.0, 30.0],   # Gamma = max(1, 0, 1.5) = 1.5
                  [0.0, 10.0, 0.0],    # Gamma = 2.0
                  [5.0, 2.0, 10.0],    # Gamma = max(0.5, 0.4, 0.5) = 0.5
                  [40.0, 0.0, 0.0]])   # Gamma = 4.0 (most bytes on one link is not what counts)
    assert varys_order(p, cap).tolist() == [2, 0, 1, 3]
    # bytes alone would order 2 (17), 1 (10)... differently: Gamma, not size, decides
    assert np.argsort(p.sum(axis=1), kind="stable").tolist() != [2, 0, 1, 3]


def test_varys_ranks_the_pending_collective_by_its_bottleneck():
    cap = np.array([10 * GBps, 1 * GBps])
    cof = [CoflowState(name="a", job=None, remaining_bytes=5e9, link_idx=[0], link_remaining_bytes=[5e9])]
    view = _view(2, cap=cap, coflows=cof)
    # 1e9 bytes on the 1 GB/s link: Gamma 1 s > 0.5 s of the active one -> second
    slow = DecisionPoint(kind="collective", now_s=0.0, job="x", link_idx=[1], link_bytes=[1e9])
    fast = DecisionPoint(kind="collective", now_s=0.0, job="x", link_idx=[0], link_bytes=[1e9])
    assert decide_varys(slow, view).priority == 1
    assert decide_varys(fast, view).priority == 0


def test_rank_to_class_preserves_order_and_range():
    for n in (1, 5, 8, 9, 100):
        cls = [rank_to_class(r, n) for r in range(n)]
        assert cls == sorted(cls) and cls[0] == 0 and cls[-1] <= 7 and (n > 8 or cls == list(range(n)))
    assert math.isclose(rank_to_class(99, 100), 7)


def test_cassini_controller_shifts_once_per_set_of_jobs():
    """CASSINI (NSDI'24, Sec. 4.3) delays a job's iterations once when the job set changes; asked
    again at every collective it must not add the shift again."""
    from flowherd.control import make_controller

    T, w = 0.4, 0.1
    a = _periodic_job("a", T, w, [0], comm_bytes=2e9)
    b = _periodic_job("b", T, w, [0], comm_bytes=1e9)
    view = _view(1, util=[1.0], jobs={"a": a, "b": b}, now_s=0.0)
    c = make_controller("cassini")
    c.reset(0)
    pb = DecisionPoint(kind="collective", now_s=0.0, job="b", link_idx=[0], link_bytes=[1e9], phase_s=0.0)
    assert c.decide(pb, view).delay_s == pytest.approx(T / 2)
    assert c.decide(pb, view) is None  # same jobs: no second shift, even though b looks unaligned
    c3 = _periodic_job("c", T, w, [0], comm_bytes=0.5e9)
    view3 = _view(1, util=[1.0], jobs={"a": a, "b": b, "c": c3}, now_s=0.0)
    shifts = cassini_shifts([a, b, c3], np.full(1, 1.0))
    d = c.decide(DecisionPoint(kind="collective", now_s=0.0, job="c", link_idx=[0], link_bytes=[1e9],
                               phase_s=0.0), view3)
    assert (d.delay_s if d else 0.0) == pytest.approx(shifts.get("c", 0.0))
