"""The local rate update inside the event loop (`bottleneck.local_core`, work arrays made once
per `run_events` call, no allocation, no reference counts) gives the rates of `local_update`
(its own work arrays, the Python path of a subclass's `_rates`) bit for bit (issue 17)."""

import numpy as np

from flowherd.engine import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router


class PyRates(Engine):
    """Every rate update from Python (`reallocate_local` -> `local_update`)."""

    def _rates(self, started, ended, now):
        super()._rates(started, ended, now)


def _run(engine_cls):
    rng = np.random.default_rng(11)
    fab = leaf_spine(servers=16, gpus_per_server=4, leaves=4, spines=2, oversubscription=2.0)
    eng = engine_cls(fab, make_router("ecmp", fab, seed=2))
    n = fab.num_gpus
    for _ in range(30):  # coflows of 60 flows over a 2:1 fabric: saturated links, shared flows
        src = rng.integers(0, n, 60)
        dst = (src + rng.integers(1, n, 60)) % n
        eng.add_coflow(src, dst, rng.uniform(1e5, 4e7, 60), at_s=float(rng.uniform(0, 2e-3)),
                       weight=float(rng.choice([1.0, 2.5])), priority=int(rng.integers(0, 2)))
    eng.run()
    return eng


def test_the_in_loop_update_gives_the_python_paths_rates_bit_for_bit():
    loop, py = _run(Engine), _run(PyRates)
    a, b = loop.result(), py.result()
    assert a.flow_finish_s.size == 1800
    np.testing.assert_array_equal(a.flow_finish_s, b.flow_finish_s)
    np.testing.assert_array_equal(a.link_bytes, b.link_bytes)
    assert loop.num_rate_updates == py.num_rate_updates > 100
    assert loop.num_flows_reallocated == py.num_flows_reallocated
