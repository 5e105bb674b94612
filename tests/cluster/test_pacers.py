"""Host pacers (flowherd.cluster.pacing): a GPU pair's rate cap as a private link, exact under
max-min, invisible to the congestion models except as the flows' line rate."""

import numpy as np
import pytest

from flowherd.cluster.pacing import make_pacing
from flowherd.cluster.simulate import JobRequest, simulate_cluster
from flowherd.engine.core import Engine
from flowherd.engine.network import network_from_mapping
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import MB, Gbps, us
from flowherd.workload.training import TrainingJob

LINE = 100 * Gbps


def _fabric(hosts=4, leaves=2, uplink_over=2.0):
    # 1 GPU per host, 100G NICs; 2 hosts per leaf and oversubscription 2: one 100G uplink a leaf
    return leaf_spine(servers=hosts, gpus_per_server=1, leaves=leaves, spines=1,
                      nic_bandwidth_bytes_per_s=LINE, nvlink_bandwidth_bytes_per_s=None,
                      oversubscription=uplink_over, link_latency_s=1 * us)


def _run(fab, flows, caps=None, network=None):
    base = make_router("shortest", fab)
    if caps:
        p = make_pacing(fab, caps)
        eng = Engine(p.fabric, p.router(base), network=network)
    else:
        eng = Engine(fab, base, network=network)
    ids = [eng.add_coflow(np.array([s]), np.array([d]), np.array([size])) for s, d, size in flows]
    eng.run()
    return eng, ids


def test_a_paced_flow_alone_runs_at_its_cap():
    fab = _fabric()
    size = 10 * MB
    cap = 0.3 * LINE
    eng, (c,) = _run(fab, [(0, 2, size)], {(0, 2): cap})
    assert eng.coflow_finish_s(c) == pytest.approx(size / cap + 4 * us, rel=1e-9)  # 4 hops of 1 us


def test_the_pacer_is_a_bottleneck_like_any_link_under_max_min():
    # two flows share leaf0's 100G uplink; one is capped at a quarter of it: max-min gives the
    # other the remaining three quarters (water filling); the capped one keeps its cap after
    fab = _fabric()
    size = 10 * MB
    eng, (a, b) = _run(fab, [(0, 2, size), (1, 3, size)], {(0, 2): 0.25 * LINE})
    t_b = size / (0.75 * LINE) + 4 * us
    assert eng.coflow_finish_s(b) == pytest.approx(t_b, rel=1e-9)
    assert eng.coflow_finish_s(a) == pytest.approx(size / (0.25 * LINE) + 4 * us, rel=1e-9)


def test_a_cap_above_the_max_min_rate_changes_nothing():
    fab = _fabric()
    flows = [(0, 2, 8 * MB), (1, 3, 5 * MB), (2, 0, 3 * MB)]
    ref, r_ids = _run(fab, flows)
    eng, ids = _run(fab, flows, {(0, 2): 2 * LINE, (1, 3): 1.5 * LINE})
    for x, y in zip(r_ids, ids, strict=True):
        assert eng.coflow_finish_s(y) == pytest.approx(ref.coflow_finish_s(x), rel=1e-12)


@pytest.mark.parametrize("model", ["roce", "tcp"])
def test_pacing_at_the_uplink_share_removes_the_queue_and_the_pacer_never_congests(model):
    # two hosts of leaf 0 send to leaf 1 at line rate over one uplink of line rate: the uplink
    # port queues and marks; paced at 45% each they arrive slower than it drains: no queue
    fab = _fabric()
    cfg = network_from_mapping({"model": model, "pfc_xoff": "50KB", "pfc_xon": "40KB"})
    flows = [(0, 2, 20 * MB), (1, 3, 20 * MB)]
    raw, _ = _run(fab, flows, network=cfg)
    st = raw.network.stats(raw.now_s)
    assert st.queue_max_bytes.max() > 0 and st.ecn_marked_bytes.sum() > 0
    caps = {(0, 2): 0.45 * LINE, (1, 3): 0.45 * LINE}
    eng, ids = _run(fab, flows, caps, network=cfg)
    sp = eng.network.stats(eng.now_s)
    assert sp.queue_max_bytes.max() == 0.0 and sp.ecn_marked_bytes.sum() == 0.0
    assert sp.pause_s.sum() == 0.0 and sp.drop_bytes.sum() == 0.0
    n = fab.num_directed_links
    assert eng.result().link_bytes[n:].sum() == pytest.approx(40 * MB, rel=1e-12)  # both pacers carried
    # each ends at its cap's time plus what the model adds to a fresh flow (setup, slow start)
    for c in ids:
        assert eng.coflow_finish_s(c) >= 20 * MB / (0.45 * LINE)


def test_a_cluster_run_with_caps_no_flow_reaches_is_the_unpaced_run():
    fab = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=1, nic_bandwidth_bytes_per_s=LINE,
                     oversubscription=2.0, link_latency_s=1 * us)
    job = TrainingJob(name="a", model="llama3-8b", gpus=4, dp=4, seq_len=512, micro_batch=1,
                      global_batch=4, iterations=2)
    req = [JobRequest(name="a", tenant="t", spec=job, submit_s=0.0)]
    pins = {"a": [0, 2, 4, 6]}  # one GPU a server: every data-parallel hop crosses the network
    ref = simulate_cluster(fab, req, horizon_s=600.0, router="ecmp", placements=pins)
    caps = {(a, b): 10 * LINE for a in pins["a"] for b in pins["a"] if a != b}
    paced = simulate_cluster(fab, req, horizon_s=600.0, router="ecmp", placements=pins,
                             pacing=make_pacing(fab, caps))
    assert paced.jobs[0].finish_s == pytest.approx(ref.jobs[0].finish_s, rel=1e-12)
    slow = {k: 0.1 * LINE for k in caps}
    slowed = simulate_cluster(fab, req, horizon_s=600.0, router="ecmp", placements=pins,
                              pacing=make_pacing(fab, slow))
    assert slowed.jobs[0].finish_s > ref.jobs[0].finish_s * 1.5


@pytest.mark.parametrize(("caps", "field"), [({(0, 0): 1e9}, "(0, 0)"), ({(0, 99): 1e9}, "(0, 99)"),
                                             ({(0, 1): -1.0}, "-1.0"), ({(0, 1): float("inf")}, "inf")])
def test_bad_pacing_is_one_clear_error(caps, field):
    with pytest.raises(ConfigError, match=r"pacing") as err:
        make_pacing(_fabric(), caps)
    assert field in str(err.value)


def test_pacing_of_another_fabric_is_refused():
    p = make_pacing(_fabric(hosts=8), {(0, 5): 1e9})
    job = TrainingJob(name="a", model="llama3-8b", gpus=2, dp=2, seq_len=512, micro_batch=1,
                      global_batch=2, iterations=1)
    with pytest.raises(ConfigError, match="pacing was made for a fabric"):
        simulate_cluster(_fabric(), [JobRequest(name="a", tenant="t", spec=job, submit_s=0.0)],
                         horizon_s=10.0, pacing=p)
