"""The congestion model's hooks inside the engine's event loop (`flowherd.engine.event_loop`,
`flowherd.engine.network.packed.loop_rates` / ``loop_done``, the bursts too) against the same
model's Python hooks (`NetworkModel.on_rates` / ``on_done``, called between re-entries of the
loop): the same numbers bit for bit, hand-overs (DCQCN's table, full record buffers, pause
records that do not fit, the start-loss memo's growth) included."""

import numpy as np
import pytest

from flowherd.cluster.control_types import MARKED_PRIORITY_BASE
from flowherd.engine.core import Engine
from flowherd.engine.network import NetworkModel, network_from_mapping
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.units import Gbps, us


class _PythonHooks(NetworkModel):
    """The model with its hooks called from Python (a subclass is never run in the loop)."""


def _fabric():
    return leaf_spine(servers=16, gpus_per_server=1, leaves=4, spines=2,
                      nic_bandwidth_bytes_per_s=100 * Gbps, nvlink_bandwidth_bytes_per_s=None,
                      oversubscription=2.0, link_latency_s=1 * us)


def _flows(seed):
    rng = np.random.default_rng(seed)
    flows = []
    for burst in range(30):  # enough that most bursts meet DCQCN's table filled
        t = float(rng.uniform(0, 1.5e-3)) if burst else 0.0
        dst = int(rng.integers(0, 16))
        for s in rng.choice(16, size=int(rng.integers(2, 9)), replace=False).tolist():
            if s != dst:
                prio = MARKED_PRIORITY_BASE if rng.random() < 0.3 else 0
                flows.append((s, dst, float(rng.integers(50_000, 3_000_000)), t, prio))
    return flows


def _run(fab, flows, cfg, python_hooks, small, memo_slots=2):
    eng = Engine(fab, make_router("ecmp", fab), network=cfg)
    net = eng.network
    if python_hooks:
        net.__class__ = _PythonHooks
    if small:  # room for a step's changes only, a few pause records, a memo of a few slots: the
        # loop hands its buffers over often, bursts' pause records too, and the memo grows
        room = 2 * fab.num_directed_links + 3
        net._ser_t, net._ser_l, net._ser_q = np.zeros(room), np.zeros(room, np.int64), np.zeros(room)
        net._pz_t, net._pz_l, net._pz_d = np.zeros(3), np.zeros(3, np.int64), np.zeros(3)
        net._mk_i, net._mk_f = np.zeros(5 * memo_slots, np.int64), np.zeros(2 * memo_slots)
    assert net.in_loop is not python_hooks
    ids = [eng.add_coflow(s, d, size, at_s=t, priority=p) for s, d, size, t, p in flows]
    eng.run(until_s=2e-4)  # resumed: a hand-over at the run's end changes nothing
    eng.run()
    return eng, ids


@pytest.mark.parametrize("seed", range(4))
def test_hooks_in_the_loop_cost_what_the_python_hooks_cost(seed):
    fab = _fabric()
    cfg = network_from_mapping({"model": "roce", "port_buffer": "400KB", "pfc_xoff": "60KB",
                                "pfc_xon": "40KB", "ecn_k": "30KB"})
    flows = _flows(seed)
    a, ids = _run(fab, flows, cfg, False, seed % 2 == 1, 2 if seed == 1 else 1024)
    b, _ = _run(fab, flows, cfg, True, False)
    assert [a.coflow_finish_s(c) for c in ids] == [b.coflow_finish_s(c) for c in ids]
    assert a.num_rate_updates == b.num_rate_updates
    sa, sb = a.network.stats(a.now_s), b.network.stats(b.now_s)
    for name in ("pause_s", "drop_bytes", "queue_max_bytes", "queue_mean_bytes", "ecn_marked_bytes",
                 "pause_t_s", "pause_link", "pause_dur_s", "series_t_s", "series_link",
                 "series_queue_bytes"):
        assert np.array_equal(getattr(sa, name), getattr(sb, name)), name
    assert (sa.num_pauses, sa.num_timeouts) == (sb.num_pauses, sb.num_timeouts)
    assert sa.num_pauses > 0 and sa.series_t_s.size > 0  # the mechanisms ran


def test_tcp_keeps_the_python_hooks():
    fab = _fabric()
    eng = Engine(fab, make_router("ecmp", fab), network=network_from_mapping({"model": "tcp"}))
    assert not eng.network.in_loop
