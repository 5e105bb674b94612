"""Controllers in the cluster simulator: decisions applied, closed forms, faults handled."""

import numpy as np
import pytest
from scripted import Fixed, Raises

from flowherd.cluster.control_api import Decision
from flowherd.cluster.simulate import JobRequest, simulate_cluster
from flowherd.control import make_controller
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.units import Gbps
from flowherd.workload import TrainingJob

NIC = 400 * Gbps  # leaf_spine's default NIC bandwidth, bytes per second
PINS = {"a": [0, 2], "b": [1, 3]}


def dp_job(name: str, iterations: int = 6) -> JobRequest:
    """Pure data parallelism on 2 GPUs, one gradient bucket (synchronized after the backward)."""
    spec = TrainingJob(model="llama3-8b", gpus=2, tp=1, bucket_bytes=1e15, iterations=iterations, name=name)
    return JobRequest(name=name, tenant="t", spec=spec, submit_s=0.0)


def _backward_end_s(name: str) -> float:
    """When the first iteration's compute reaches the gradient AllReduce: the compute-only critical
    path without the optimizer step that follows the AllReduce."""
    g = dp_job(name).spec.iteration_graph()
    return g.critical_path_s() - max(t.duration_s for t in g.tasks if t.name.endswith("/optimizer"))


def _wire_fraction(size: float) -> float:
    """Payload per wire byte of the jobs' gradient AllReduce as the simulator runs it."""
    from flowherd.cluster.collective import choose, nccl_channels
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.ops import Collective

    fab, coll = _fabric(), Collective(op="allreduce", gpus=(0, 2), size_bytes=size)
    algo, proto = choose(fab, coll)
    return build_schedule(coll, algo, fabric=fab, protocol=proto,
                          channels=nccl_channels(fab, coll)).wire_fraction


def _fabric():
    # leaf uplink U = 2 NICs * B / 4 (oversubscription 4) / 1 spine = B / 2; jobs a (servers 0, 2)
    # and b (servers 1, 3) both cross it (tests/cluster/test_cluster.py, fair-sharing case)
    return leaf_spine(servers=4, gpus_per_server=1, leaves=2, spines=1, oversubscription=4)


def _run(controller=None, jobs=None, horizon_s=100.0, **kw):
    jobs = jobs or [dp_job("a"), dp_job("b")]
    pins = {k: v for k, v in PINS.items() if k in {j.name for j in jobs}}
    return simulate_cluster(_fabric(), jobs, horizon_s=horizon_s, placements=pins, controller=controller,
                            **kw)


@pytest.mark.parametrize("fidelity", ["collective", "step", "phase"])
def test_no_op_controller_reproduces_the_uncontrolled_run(fidelity):
    free, ctl = _run(None, fidelity=fidelity), _run(make_controller("none"), fidelity=fidelity)
    for n in "ab":
        np.testing.assert_allclose(ctl.job(n).iteration_s, free.job(n).iteration_s, rtol=1e-12)
    np.testing.assert_allclose(ctl.link_bytes, free.link_bytes, rtol=1e-9)
    # one collective per simulated iteration (6 of each job, fast-forwarded ones are not asked
    # about), 2 arrivals, 2 departures
    ff = sum(j.fast_forwarded_iterations for j in ctl.jobs)
    assert fidelity == "phase" or ff == 0
    assert ctl.controller == "none" and ctl.num_decisions == 2 * 6 - ff + 4
    assert free.num_decisions == 0 and not ctl.controller_issues


@pytest.mark.parametrize(("name", "grant"), [("sincronia", "priority"), ("varys", "priority"),
                                             ("crux", "priority"), ("cassini", "buffer")])
def test_ordering_and_shifting_interleave_two_lockstep_jobs(name, grant):
    # Closed form. Each iteration is compute C then an AllReduce of S bytes that crosses the shared
    # uplink U (a 2-rank ring sends S each way). In lock step they share U: C + 2 S / U. Served one
    # after the other (priorities) or shifted apart (time shifts), and since S / U <= C here, they
    # interleave: after the first iteration each takes its solo time C + S / U.
    free = _run(None)
    res = _run(make_controller(name), levers=grant)
    c = free.job("a").compute_only_iteration_s
    s = dp_job("a").spec.model.num_params() * dp_job("a").spec.grad_bytes
    # NCCL's channels move 2 x 24 GB/s through a 50 GB/s NIC: their bytes take 50 / 48 of U
    # (flowherd.collectives.calibrate)
    u = 2 * NIC / 4 * _wire_fraction(s)
    assert s / u <= c
    assert np.allclose(free.job("a").iteration_s, c + 2 * s / u, rtol=0.02)
    for n in "ab":
        assert np.allclose(res.job(n).iteration_s[1:], c + s / u, rtol=0.02)
    assert not res.controller_issues


def test_delay_of_a_critical_collective_lengthens_the_iteration_by_it():
    # one DP AllReduce per iteration, on the critical path (no slack): every iteration + d
    base = _run(None, jobs=[dp_job("a")]).job("a").iteration_s
    d = 0.125
    got = _run(Fixed(Decision(delay_s=d)), jobs=[dp_job("a")]).job("a").iteration_s
    np.testing.assert_allclose(got, base + d, rtol=1e-9)


@pytest.mark.parametrize("bad", [Raises(), Fixed(Decision(delay_s=-1.0), "negative"),
                                 Fixed(Decision(priority=-2), "negprio")])
def test_faulty_controller_is_skipped_and_reported_with_its_point(bad):
    free = _run(None)
    res = _run(bad, on_controller_error="skip")
    for n in "ab":
        np.testing.assert_allclose(res.job(n).iteration_s, free.job(n).iteration_s, rtol=1e-12)
    assert len(res.controller_issues) == 12  # every collective of 6 iterations of 2 jobs
    first = res.controller_issues[0]
    assert first.kind == "collective" and first.job in ("a", "b") and first.action == "skip"
    assert first.now_s == pytest.approx(_backward_end_s("a"), rel=1e-6)
    assert first.task.startswith(f"{first.job}/it0/")
    assert res.stopped_at_s is None


def test_faulty_controller_stops_the_run_cleanly_with_what_it_had():
    res = _run(Raises(), on_controller_error="stop")
    assert res.stopped_at_s == pytest.approx(_backward_end_s("a"), rel=1e-6)
    assert len(res.controller_issues) == 1 and res.controller_issues[0].action == "stop"
    for n in "ab":
        j = res.job(n)
        assert j.finish_s is None and j.iteration_s.size == 0  # stopped inside the first iteration
    # the records end with the utilization bin the fault fell in, consistently
    assert res.util_bin_edges_s[-1] <= 100.0 and res.util_by_tier.shape[1] == res.util_bin_edges_s.size - 1
    assert res.util_bin_edges_s[-1] >= res.stopped_at_s


def test_bad_on_controller_error_is_a_config_error():
    with pytest.raises(ConfigError, match="on_controller_error"):
        _run(make_controller("none"), on_controller_error="ignore")


def test_marked_traffic_goes_before_background_and_unmarked_shares_with_it():
    # DiffServ semantics of ControlHook: a job given a priority class is served before unmarked
    # traffic, so with background it runs exactly as without any; a controller that marks nothing
    # leaves the run as it is without a controller.
    from flowherd.cluster.simulate import BackgroundSpec

    bg = BackgroundSpec(load=0.05, max_flows_per_s=100.0)
    jobs = [dp_job("a", iterations=3)]
    kw = {"jobs": jobs, "horizon_s": 10.0}
    alone = _run(None, **kw).job("a").iteration_s
    free = _run(None, background=bg, **kw).job("a").iteration_s
    assert alone.size == free.size == 3
    assert free.mean() > alone.mean() * 1.01  # background slows the unmarked job down
    unmarked = _run(make_controller("none"), background=bg, **kw).job("a").iteration_s
    np.testing.assert_allclose(unmarked, free, rtol=1e-12)
    marked = _run(Fixed(Decision(priority=3)), background=bg, levers="priority", **kw).job("a").iteration_s
    np.testing.assert_allclose(marked, alone, rtol=1e-9)
    # with classes granted but not above the background, class 0 shares with it as unmarked traffic
    level = _run(Fixed(Decision(priority=0)), background=bg, levers={"priority_classes": 4}, **kw)
    np.testing.assert_allclose(level.job("a").iteration_s, free, rtol=1e-12)


@pytest.mark.parametrize(("grant", "decision", "lever"), [
    ("buffer", Decision(priority=0), "priority"), ("buffer", Decision(weight=2.0), "weight"),
    ("weighted", Decision(priority=1), "priority"), ({"delay": False}, Decision(delay_s=0.1), "delay"),
    ({"priority_classes": 2}, Decision(priority=2), "priority")])
def test_a_decision_outside_the_grant_is_refused_counted_and_not_applied(grant, decision, lever):
    free = _run(None)
    res = _run(Fixed(decision), levers=grant)
    for n in "ab":
        np.testing.assert_allclose(res.job(n).iteration_s, free.job(n).iteration_s, rtol=1e-12)
    assert len(res.controller_issues) == 12 and all(i.refused for i in res.controller_issues)
    assert all("refused" in i.message and lever in i.message for i in res.controller_issues)
    # the same decision inside a grant that has the lever is applied, not refused
    ok = _run(Fixed(decision), levers="priority" if lever != "delay" else "buffer")
    assert not ok.controller_issues


def test_the_view_tells_the_controller_its_grant():
    rec = Fixed(None)
    _run(rec, levers="weighted")
    assert rec.views and all(v.levers.name == "weighted" and v.levers.weights for v in rec.views)
