"""The heap of transmission ends (`flowherd.sim.flow_heap`) gives the scan's results bit for bit
(issue 17): the engine's reference cases, a run with thousands of flows in flight (holes in the
active list squeezed out, the heap rebuilt when full of stale entries), and the kernels."""

import json
from pathlib import Path

import numpy as np
import pytest
from exact_cases import digest, run_case

from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.sim import Engine
from flowherd.sim import event_loop as ev
from flowherd.sim.flow_heap import fh_build, fh_push, fh_soonest, fh_take_done, squeeze

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


def _many(engine_cls, record_flows):
    rng = np.random.default_rng(5)
    fab = leaf_spine(servers=16, gpus_per_server=4, leaves=4, spines=2, oversubscription=2.0)
    eng = engine_cls(fab, make_router("ecmp", fab, seed=1), record_flows=record_flows)
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
