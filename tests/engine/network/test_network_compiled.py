"""The congestion model's compiled burst passes (flowherd.engine.network.burst_kernels) against the
numpy reference they replaced (tests/engine/network/network_reference.py): the same numbers bit for bit."""

import numpy as np
import pytest
from network_reference import ReferenceModel

from flowherd.cluster.control_types import MARKED_PRIORITY_BASE
from flowherd.engine.core import Engine
from flowherd.engine.network import network_from_mapping
from flowherd.engine.network.burst_kernels import pairwise_sum
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import KB, MB, Gbps, us


def _fabric(hosts, leaves, over, spines=1):
    return leaf_spine(servers=hosts, gpus_per_server=1, leaves=leaves, spines=spines,
                      nic_bandwidth_bytes_per_s=100 * Gbps, nvlink_bandwidth_bytes_per_s=None,
                      oversubscription=over, link_latency_s=1 * us)


def _run(fab, flows, cfg, reference, router="shortest"):
    eng = Engine(fab, make_router(router, fab), network=cfg)
    if reference:
        eng.network.__class__ = ReferenceModel  # the numpy bursts, the rest the same
    ids = [eng.add_coflow(s, d, size, at_s=t, priority=p) for s, d, size, t, p in flows]
    eng.run()
    return eng, ids


def _same(fab, flows, cfg, router="shortest"):
    a, ids = _run(fab, flows, cfg, False, router)
    b, _ = _run(fab, flows, cfg, True, router)
    fa, fb = [a.coflow_finish_s(c) for c in ids], [b.coflow_finish_s(c) for c in ids]
    assert fa == fb  # bit for bit
    sa, sb = a.network.stats(a.now_s), b.network.stats(b.now_s)
    for name in ("pause_s", "drop_bytes", "queue_max_bytes", "queue_mean_bytes", "ecn_marked_bytes",
                 "pause_t_s", "pause_link", "pause_dur_s", "series_t_s", "series_queue_bytes"):
        assert np.array_equal(getattr(sa, name), getattr(sb, name)), name
    assert (sa.num_pauses, sa.num_timeouts) == (sb.num_pauses, sb.num_timeouts)
    return sa


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    rng = np.random.default_rng(1)
    for n in [0, 1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1000, 4099]:
        a = rng.uniform(0, 1e7, n + 5) * 10.0 ** rng.uniform(-6, 6, n + 5)
        idx = rng.permutation(n + 5)[:n]
        assert pairwise_sum(a, idx) == a[idx].sum()


def test_pfc_victim_case_pauses_the_same_as_the_reference():
    # test_network's hand-solvable PFC case: an incast of 7 into host 0, a victim over spine -> leaf 0
    fab = _fabric(16, 2, 1.0)
    cfg = network_from_mapping({"model": "roce", "port_buffer": "1MB", "pfc_xoff": "100KB",
                                "pfc_xon": "80KB"})
    flows = [(15, 1, 20 * MB, 0.0, 0), (2, 3, 20 * MB, 0.0, 0)]
    flows += [(8 + i, 0, 4 * MB, 0.0, 0) for i in range(7)]
    st = _same(fab, flows, cfg)
    assert st.num_pauses >= 1 and st.pause_s.sum() > 0  # the case exercises the pause tree
    # one class paused, the victim in another: PFC per priority
    flows[0] = (15, 1, 20 * MB, 0.0, 0)
    flows[2:] = [(8 + i, 0, 4 * MB, 0.0, MARKED_PRIORITY_BASE) for i in range(7)]
    _same(fab, flows, cfg)


def test_a_pfc_bound_port_holds_its_victims_as_the_reference():
    # tests/engine/network/test_network_dcqcn.py's case: DCQCN's queue for 7 flows above Xoff, the victim held
    fab = _fabric(16, 2, 1.0)
    cfg = network_from_mapping({"model": "roce", "pfc_xoff": "75KB", "pfc_xon": "66808B",
                                "port_buffer": "300KB"})
    flows = [(i, 8, 2 * MB, 0.0, 0) for i in range(1, 8)] + [(0, 15, 2 * MB, 0.0, 0)]
    st = _same(fab, flows, cfg)
    assert st.num_pauses >= 1


def test_lossy_drops_and_timeouts_as_the_reference():
    # test_network's overflow case: 32 first windows into one 100 KB port
    fab = _fabric(40, 4, 0.25)
    cfg = network_from_mapping({"model": "tcp", "port_buffer": f"{int(100 * KB)}B", "ecn_k": "50KB",
                                "min_rto": "5ms"})
    st = _same(fab, [(1 + i, 0, 1 * MB, 0.0, 0) for i in range(32)], cfg)
    assert st.num_timeouts > 0 and st.drop_bytes.sum() > 0


@pytest.mark.parametrize("seed", range(6))
def test_random_traffic_costs_the_same_as_the_reference(seed):
    # staggered incasts and all-to-all pieces over an oversubscribed two-spine fabric (ECMP),
    # shallow PFC thresholds so that pauses spread up to the spines, some flows in marked classes
    rng = np.random.default_rng(seed)
    fab = _fabric(16, 4, 2.0, spines=2)
    model = "roce" if seed % 3 else "tcp"
    cfg = network_from_mapping({"model": model, "port_buffer": "400KB", "pfc_xoff": "60KB",
                                "pfc_xon": "40KB", "ecn_k": "30KB"} if model == "roce" else
                               {"model": model, "port_buffer": "20KB", "ecn_k": "10KB", "min_rto": "1ms"})
    flows = []
    for burst in range(6):
        t = float(rng.uniform(0, 3e-4)) if burst else 0.0
        dst = int(rng.integers(0, 16))
        for s in rng.choice(16, size=int(rng.integers(2, 9)), replace=False).tolist():
            if s != dst:
                prio = MARKED_PRIORITY_BASE if rng.random() < 0.3 else 0
                flows.append((s, dst, float(rng.integers(50_000, 3_000_000)), t, prio))
    st = _same(fab, flows, cfg, router="ecmp")
    assert (st.num_pauses if model == "roce" else st.num_timeouts) > 0  # the mechanisms ran
