"""The heap of transmission ends (`flowherd.engine.flow_heap`) gives the scan's results bit for
bit: the engine's reference cases, a run with thousands of flows in flight (holes in the
active list squeezed out, the heap rebuilt when full of stale entries), and the kernels."""

import json
from pathlib import Path

import numpy as np
import pytest
from exact_cases import digest, run_case

from flowherd.engine import Engine
from flowherd.engine import event_loop as ev
from flowherd.engine.flow_heap import fh_build, fh_push, fh_soonest, fh_take_done, squeeze
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router

DIGESTS = json.loads((Path(__file__).parent / "data" / "engine_digests.json").read_text())["digests"]


class ScanEngine(Engine):
    """The soonest end and the flows that end found by a scan of every active flow (the loop
    before the heap)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._st_i[ev.SCAN] = 1


@pytest.mark.parametrize("case", range(7))  # case 7 is the approximate mode: always the scan
def test_the_scan_and_the_heap_give_the_reference_digests(case):
    assert digest(run_case(case, ScanEngine)) == DIGESTS[case]
    assert digest(run_case(case)) == DIGESTS[case]


def _many(engine_cls, record_flows, network=None):
    rng = np.random.default_rng(5)
    fab = leaf_spine(servers=16, gpus_per_server=4, leaves=4, spines=2, oversubscription=2.0)
    eng = engine_cls(fab, make_router("ecmp", fab, seed=1), record_flows=record_flows, network=network)
    if not record_flows:
        eng._compact_min = 256
    n = fab.num_gpus
    # 40 coflows of 50 flows each, most of them in flight together, and 1,000 background flows:
    # counting kernels under numba's JIT show the loop squeezing 1,274 holes out of the active
    # list without a hand-over (more than its 1,024) and rebuilding the heap about 130 times;
    # twice the flows (the earlier size) took seven times the CPU for the same paths
    for i in range(40):
        src = rng.integers(0, n, 50)
        dst = (src + rng.integers(1, n, 50)) % n
        eng.add_coflow(src, dst, rng.uniform(1e5, 4e7, 50), at_s=float(rng.uniform(0, 1e-3)),
                       name=f"c{i}")
    m = 1000
    src = rng.integers(0, n, m)
    dst = (src + rng.integers(1, n, m)) % n
    routes = eng.router.route(src.astype(np.int32), dst.astype(np.int32), np.arange(m))
    eng.add_flows(src, dst, rng.uniform(1e5, 5e7, m), at_s=np.sort(rng.uniform(0, 5e-3, m)), routes=routes,
                  name="bg")
    for stop in (1e-3, 2e-3, 4e-3):
        eng.run(until_s=stop)
    eng.run()
    return eng


@pytest.mark.parametrize("record_flows", [True, False])
def test_thousands_of_flows_in_flight_end_as_with_the_scan(record_flows):
    a, b = _many(Engine, record_flows), _many(ScanEngine, record_flows)
    ra, rb = a.result(), b.result()
    assert ra.num_events == rb.num_events and ra.num_events > 5000
    assert np.array_equal(ra.coflow_finish_s, rb.coflow_finish_s)
    assert np.array_equal(ra.link_bytes, rb.link_bytes)
    assert np.array_equal(ra.link_busy_s, rb.link_busy_s)


def test_roce_in_the_loop_ends_flows_as_with_the_scan():
    # the congestion model in the loop changes latencies, never transmission ends: the heap
    # (used with the model too) gives the scan's numbers bit for bit
    from flowherd.engine.network import network_from_mapping

    cfg = network_from_mapping({"model": "roce"})
    a, b = _many(Engine, False, cfg), _many(ScanEngine, False, cfg)
    assert a.network.in_loop and b.network.in_loop
    ra, rb = a.result(), b.result()
    assert ra.num_events == rb.num_events and ra.num_events > 5000
    assert a.num_rate_updates == b.num_rate_updates
    assert np.array_equal(ra.coflow_finish_s, rb.coflow_finish_s)
    assert np.array_equal(ra.link_bytes, rb.link_bytes)
    sa, sb = a.network.stats(a.now_s), b.network.stats(b.now_s)
    for name in ("pause_s", "queue_max_bytes", "queue_mean_bytes", "ecn_marked_bytes", "series_t_s",
                 "series_queue_bytes"):
        assert np.array_equal(getattr(sa, name), getattr(sb, name)), name


def test_a_roce_cluster_run_is_the_scans_bit_for_bit(monkeypatch):
    # the benchmark's setting (roce, the exact background rule, phase fidelity) in small
    from flowherd.cluster import simulate as cluster
    from flowherd.engine.network import load_network, use_network
    from flowherd.workload import TrainingJob

    fab = leaf_spine(servers=8, gpus_per_server=8, leaves=2, spines=2, oversubscription=4)
    jobs = [cluster.JobRequest(name=f"j{i}", tenant="t", submit_s=s,
                               spec=TrainingJob(model="llama3-8b", gpus=g, tp=8, iterations=6, name=f"j{i}",
                                                submit_s=s))
            for i, (g, s) in enumerate([(16, 0.0), (24, 0.3), (16, 0.5)])]

    def run():
        with use_network(load_network("roce")):
            res = cluster.simulate_cluster(
                fab, jobs, fidelity="phase", horizon_s=6.0, placer="packed", seed=1,
                background=cluster.BackgroundSpec(load=0.2, max_flows_per_s=200, fast_forward="exact"),
                background_records=True)
        return ([j.iteration_end_s.tobytes() for j in res.jobs], res.background_finish_s.tobytes(),
                res.link_bytes.tobytes(), res.num_events, res.num_rate_updates)

    heap = run()
    monkeypatch.setattr(cluster, "Engine", ScanEngine)
    scan = run()
    assert heap == scan and heap[3] > 1000


def test_the_heap_takes_the_flows_that_end_in_the_order_of_the_active_list():
    txend = np.array([5.0, 1.0, 3.0, 1.0, np.inf, 2.0])
    act = np.array([3, 0, 5, 1, 4, 2, -1, -1], np.int64)  # flow 3 before flow 1 in the list
    apos = np.full(6, -7, np.int64)
    ht, hf = np.empty(16), np.empty(16, np.int64)
    hn = fh_build(act, 6, txend, apos, ht, hf)
    assert hn == 5 and apos.tolist() == [1, 3, 5, 0, 4, 2]
    hn = fh_push(ht, hf, hn, 1.0, 1)  # a second entry of flow 1 with the same end
    txend[0] = 9.0  # flow 0's end moved: its entry at 5.0 is stale
    hn = fh_push(ht, hf, hn, 9.0, 0)
    t, hn = fh_soonest(ht, hf, hn, txend, apos)
    assert t == 1.0
    out = np.empty(8, np.int64)
    m, hn = fh_take_done(ht, hf, hn, txend, apos, 2.0, act, out)
    assert out[:m].tolist() == [3, 5, 1]  # act order (positions 0, 2, 3), flow 1 once
    assert act[:6].tolist() == [-1, 0, -1, -1, 4, 2] and apos[[3, 5, 1]].tolist() == [-1, -1, -1]
    t, hn = fh_soonest(ht, hf, hn, txend, apos)  # 3.0 (flow 2); 5.0 of flow 0 dropped later
    assert t == 3.0
    k = squeeze(act, 6, apos)
    assert k == 3 and act[:3].tolist() == [0, 4, 2] and apos[[0, 4, 2]].tolist() == [0, 1, 2]
    m, hn = fh_take_done(ht, hf, hn, txend, apos, 10.0, act, out)
    assert out[:m].tolist() == [0, 2] and hn == 0
