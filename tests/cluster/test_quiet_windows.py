"""Exact fast-forward among background flows (`flowherd.cluster.quiet`) and the engine's
flow bookkeeping it relies on (held flows, dropped flows renumbered)."""

import numpy as np
import pytest

from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
from flowherd.engine import Engine
from flowherd.engine import event_loop as ev
from flowherd.engine.hold import hold_flows, resume_flows
from flowherd.errors import ConfigError, SimulationError
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.base import Routes
from flowherd.workload import TrainingJob

FAB = leaf_spine(servers=16, gpus_per_server=8, leaves=4, spines=2)
# three tp-8 jobs whose DP rings cross NICs that long background flows (few, aggregated: 3 a
# second over the fabric, each about 400 GB) share for seconds at a time
JOBS = [JobRequest(name=f"j{i}", tenant="t", submit_s=s,
                   spec=TrainingJob(model="llama3-8b", gpus=g, tp=8, iterations=it, name=f"j{i}",
                                    submit_s=s))
        for i, (g, s, it) in enumerate([(16, 0.0, 150), (16, 5.0, 100), (32, 8.0, 60)])]


def _run(quiet: bool, compact_min: int | None = None, horizon_s: float = 40.0):
    import flowherd.cluster.simulate as cluster

    orig = cluster.Engine

    class Small(orig):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            if compact_min is not None:
                self._st_i[ev.COMPACT_MIN] = compact_min

    cluster.Engine = Small
    try:
        return simulate_cluster(FAB, JOBS, fidelity="phase", horizon_s=horizon_s, placer="packed", seed=3,
                                background=BackgroundSpec(load=0.2, max_flows_per_s=3, fast_forward="exact",
                                                          quiet_windows=quiet),
                                background_records=True)
    finally:
        cluster.Engine = orig


def _close(a, b, rtol=1e-9):
    for x, y in zip(a.jobs, b.jobs, strict=True):
        assert len(x.iteration_end_s) == len(y.iteration_end_s), x.name
        np.testing.assert_allclose(x.iteration_end_s, y.iteration_end_s, rtol=rtol, atol=0)
    np.testing.assert_array_equal(np.isnan(a.background_finish_s), np.isnan(b.background_finish_s))
    m = ~np.isnan(a.background_finish_s)
    np.testing.assert_allclose(a.background_finish_s[m], b.background_finish_s[m], rtol=rtol, atol=0)
    np.testing.assert_allclose(a.link_bytes, b.link_bytes, rtol=1e-9, atol=1.0)


def test_dropping_finished_flows_leaves_no_stale_state_for_new_flows():
    # a flow added into a row a dropped flow left kept that flow's bottleneck pointer, a link it
    # does not cross: at 16 s a NIC flow stayed at 25 GB/s where max-min gives it 33 GB/s, and
    # background flows ended seconds apart depending on when flows were dropped
    often, never = _run(False, compact_min=64), _run(False, compact_min=1 << 40)
    _close(often, never)


def test_quiet_windows_give_the_times_of_simulating_every_iteration():
    quiet, every = _run(True), _run(False)
    _close(quiet, every)
    # and they did fast-forward among the background (else this test could not fail)
    assert quiet.jobs[0].fast_forwarded_iterations > every.jobs[0].fast_forwarded_iterations + 10
    assert quiet.num_events < every.num_events


def test_quiet_windows_survive_flows_dropped_while_held():
    _close(_run(True, compact_min=64), _run(False, compact_min=1 << 40))


def test_quiet_windows_must_be_a_bool():
    with pytest.raises(ConfigError, match="quiet_windows"):
        BackgroundSpec(load=0.1, quiet_windows="yes")


def _one_link(link: int) -> Routes:
    return Routes(ptr=np.array([0, 1]), link=np.array([link]), frac=np.array([1.0]),
                  latency_s=np.array([0.0]))


def test_a_held_flow_pauses_and_resumes_with_the_bytes_left_it_is_given():
    fab = leaf_spine(servers=2, leaves=1, spines=1)
    eng = Engine(fab, router=None)
    c = eng.add_coflow(0, 1, 64e9, routes=_one_link(0))  # 64 GB/s: 1 s alone
    handle = {}

    def hold(_c, _t):
        handle["h"] = hold_flows(eng, np.flatnonzero(eng._f.coflow[:eng._f.count] == c))

    def resume(_c, _t):
        resume_flows(eng, handle["h"], np.array([16e9]))  # "sent" 16 GB while held

    eng.add_coflow(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), at_s=0.25, on_done=hold)
    eng.add_coflow(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), at_s=2.0, on_done=resume)
    eng.run()
    # 16 GB by 0.25 s, held to 2 s, 16 GB fewer: 32 GB left at 64 GB/s
    assert eng.coflow_finish_s(c) == pytest.approx(2.5, rel=1e-12)
    assert eng.link_bytes_now()[0] == pytest.approx(48e9, rel=1e-12)  # what it sent on the link


def test_resuming_outside_a_listener_is_refused():
    fab = leaf_spine(servers=2, leaves=1, spines=1)
    eng = Engine(fab, router=None)
    eng.add_coflow(0, 1, 64e9, routes=_one_link(0))
    eng.run(until_s=0.5)
    h = hold_flows(eng, eng._active.copy())
    with pytest.raises(SimulationError, match="on_done listener"):
        resume_flows(eng, h, np.zeros(1))
