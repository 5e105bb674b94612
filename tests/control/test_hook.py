"""The simulator side of the protocol (`ControlHook`) on the engine: decisions applied, faults
reported with their decision point, runs that stop or skip as configured."""

import numpy as np
import pytest
from scripted import Fixed, Raises

from flowherd.cluster.control_api import ControlHook, Decision
from flowherd.cluster.executor import PreparedGraph, PreparedTask, add_graph
from flowherd.control import make_controller
from flowherd.engine.core import Engine
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router

_NO = np.zeros(0, np.int64)


def _setup():
    # 4 servers of 1 GPU, 2 leaves, 2 spines: GPU 0 -> GPU 3 crosses the spine layer, 2 paths
    fab = leaf_spine(servers=4, leaves=2, spines=2)
    rtr = make_router("ecmp", fab, seed=0)
    src, dst = np.array([0, 1]), np.array([3, 2])
    size = np.array([2e9, 2e9])
    comm = PreparedTask(deps=(0,), delay_s=1e-5, src=src, dst=dst, size_bytes=size, weight=np.ones(2),
                        routes=rtr.route(src.astype(np.int32), dst.astype(np.int32), np.zeros(2, np.int64)))
    comp0 = PreparedTask(deps=(), delay_s=0.01, src=_NO, dst=_NO, size_bytes=np.zeros(0), weight=np.zeros(0),
                         routes=None)
    comp2 = PreparedTask(deps=(1,), delay_s=0.02, src=_NO, dst=_NO, size_bytes=np.zeros(0),
                         weight=np.zeros(0), routes=None)
    side = PreparedTask(deps=(0,), delay_s=0.5, src=_NO, dst=_NO, size_bytes=np.zeros(0), weight=np.zeros(0),
                        routes=None)  # a long compute branch: the comm task has slack
    graph = PreparedGraph(tasks=(comp0, comm, comp2, side), sinks=(2, 3),
                          footprint_links=np.unique(comm.routes.link), compute_only_s=0.51, gpu_busy_s=0.53)
    return fab, rtr, graph


def _run(controller, *, on_error="skip", iterations=3):
    fab, rtr, graph = _setup()
    eng = Engine(fab, rtr)
    hook = ControlHook(controller, fab, eng, on_error=on_error)
    hook.job_started("j", now_s=0.0, num_gpus=4, compute_flops_per_iteration=1e15,
                     comm_bytes_per_iteration=4e9, link_idx=graph.footprint_links)
    ends = []

    def nxt(_c, t):
        ends.append(t)
        if len(ends) < iterations:
            hook.add_graph(graph, job="j", fidelity="collective", name=f"j/it{len(ends)}", on_done=nxt)

    hook.add_graph(graph, job="j", fidelity="collective", name="j/it0", on_done=nxt)
    eng.run()
    return hook, eng, ends


def test_walked_graph_ends_when_add_graph_does():
    fab, rtr, graph = _setup()
    eng = Engine(fab, rtr)
    ends = []
    add_graph(eng, graph, fidelity="collective", on_done=lambda _c, t: ends.append(t))
    eng.run()
    _, _, walked = _run(make_controller("none"), iterations=1)
    assert walked[0] == pytest.approx(ends[0], rel=1e-12)


def test_delay_is_applied_and_the_view_learns_the_period():
    base = _run(make_controller("none"))[2]
    ctrl = Fixed(Decision(delay_s=0.1))
    hook, _, ends = _run(ctrl)
    # the comm task has about 0.4 s of slack behind the 0.5 s side branch: a 0.1 s delay does not
    # lengthen the iteration
    assert np.allclose(np.diff([0.0, *ends]), np.diff([0.0, *base]))
    coll = [p for p in ctrl.points if p.kind == "collective"]
    assert len(coll) == 3 and coll[0].phase_s == pytest.approx(0.01)
    assert coll[0].candidate_paths and all(len(c) == 2 for c in coll[0].candidate_paths)
    v = ctrl.views[-1]
    assert v.jobs["j"].period_s == pytest.approx(base[0])
    # critical-path slack: the side branch ends at 0.51 s, the comm chain (0.01 compute, 1e-5 latency,
    # both flows' 4e9 bytes on one 50 GB/s link, 0.02 compute) at 0.11001 s
    assert v.jobs["j"].slack_s == pytest.approx(0.51 - (0.01 + 1e-5 + 4e9 / 50e9 + 0.02), rel=1e-9)
    # the window is recorded where it ran: 0.01 s + the 0.1 s delay into the iteration
    assert v.jobs["j"].comm_offsets_s[0] == pytest.approx(0.11)
    assert hook.num_decisions >= 4 and not hook.issues


def test_delay_beyond_slack_lengthens_the_iteration_by_the_excess():
    base = _run(make_controller("none"), iterations=1)[2][0]
    ends = _run(Fixed(Decision(delay_s=1.0)), iterations=1)[2][0]
    assert base == pytest.approx(0.51)
    # the comm chain now ends at 0.01 + 1.0 + (1e-5 latency + 4e9 B / 50 GB/s) + 0.02 (past the slack)
    # plus the engine's path latency of the last byte (6 hops of 1 us)
    assert ends == pytest.approx(0.01 + 1.0 + 1e-5 + 4e9 / 50e9 + 0.02, abs=1e-5)


def test_path_choice_routes_the_flows_on_the_chosen_path():
    runs = {k: _run(Fixed(Decision(path_choice=(k, k))), iterations=1) for k in (0, 1)}
    for k, (hook, eng, _) in runs.items():
        cands = hook._candidates(np.array([0, 1]), np.array([3, 2]))
        chosen = set(cands[0][k].tolist()) | set(cands[1][k].tolist())
        assert set(np.flatnonzero(eng.link_bytes_now()).tolist()) == chosen
    used = [set(np.flatnonzero(runs[k][1].link_bytes_now()).tolist()) for k in (0, 1)]
    assert used[0] != used[1]  # two spines


@pytest.mark.parametrize("bad", [Raises(), Fixed(Decision(delay_s=-1.0), "negative"),
                                 Fixed(Decision(path_choice=(0, 7)), "nopath")])
def test_faulty_controller_is_skipped_and_reported(bad):
    base = _run(make_controller("none"))[2]
    hook, _, ends = _run(bad, on_error="skip")
    assert ends == pytest.approx(base)  # as if it had decided nothing
    assert len(hook.issues) == 3
    issue = hook.issues[0]
    assert issue.kind == "collective" and issue.job == "j" and issue.task == "j/it0/t1"
    assert issue.now_s == pytest.approx(0.01) and issue.action == "skip"
    assert ("boom" in issue.message) or ("delay_s" in issue.message) or ("path_choice[1]" in issue.message)


def test_faulty_controller_stops_the_run_cleanly():
    hook, eng, ends = _run(Raises(), on_error="stop")
    assert hook.stopped_at_s == pytest.approx(0.01)
    assert ends == [] and len(hook.issues) == 1 and hook.issues[0].action == "stop"
    assert eng.num_active_flows == 0  # nothing launched after the fault


def test_hook_rejects_bad_configuration():
    fab, rtr, _ = _setup()
    with pytest.raises(ConfigError, match="on_error"):
        ControlHook(make_controller("none"), fab, Engine(fab, rtr), on_error="ignore")
    with pytest.raises(ConfigError, match="has no 'name'"):
        ControlHook(object(), fab, Engine(fab, rtr))


def test_the_view_tells_each_job_its_busiest_scale_out_link_time():
    # Crux's t_j (SIGCOMM'24, Eq. 2): the iteration's bytes per link over its capacity, the
    # largest over the network links (NVLink excluded), on the default routes
    from flowherd.fabric.core import LinkKind

    c = Fixed(None)
    _run(c, iterations=1)
    fab, _, graph = _setup()
    comm = graph.tasks[1]
    lens = np.diff(comm.routes.ptr)
    lb = np.bincount(comm.routes.link, weights=np.repeat(comm.size_bytes, lens) * comm.routes.frac,
                     minlength=fab.num_directed_links)
    net = fab.link_kind == LinkKind.NETWORK
    want = float((lb[net] / fab.link_capacity_bytes_per_s[net]).max())
    got = c.views[-1].jobs["j"].busiest_link_s
    assert got == pytest.approx(want) and want >= 2e9 / (400e9 / 8)  # at least one NIC's 2 GB
