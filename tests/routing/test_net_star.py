"""GPUs straight on a switch (ASTRA-sim's ``Switch``): their pairs are routed without a search, to
the very routes the per-pair search gives (`PathIndex.net_star_pairs`)."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.routing import make_router, path_index
from flowherd.units import GBps, us


def _switches(n: int, *, per_switch: int, double_first: bool = False, nvswitch: bool = False) -> Fabric:
    """n one-GPU servers (two-GPU servers on an NVSwitch if `nvswitch`), each GPU on a switch
    of its own group of `per_switch`; the switches in a line (so pairs across switches take
    more hops); GPU 0 with two parallel cables if `double_first` (two paths: not a star)."""
    b = FabricBuilder("gpus-on-switches")
    gpus_per_server = 2 if nvswitch else 1
    gpus = b.add_gpus(servers=np.arange(n) // gpus_per_server, gpu_type=["h100"] * (n // gpus_per_server))
    if nvswitch:
        nvs = b.add_nodes(NodeKind.NVSWITCH, n // 2, tier=1)
        b.connect(gpus, np.repeat(nvs, 2), 450 * GBps, 0.1 * us, LinkKind.NVLINK)
    k = -(-n // per_switch)
    sw = b.add_nodes(NodeKind.SWITCH, k, tier=2)
    b.connect(gpus, np.repeat(sw, per_switch)[:n], 50 * GBps, 1 * us, LinkKind.NETWORK)
    if double_first:
        b.connect(gpus[:1], sw[:1], 50 * GBps, 1.5 * us, LinkKind.NETWORK)
    if k > 1:
        b.connect(sw[:-1], sw[1:], 100 * GBps, 2 * us, LinkKind.NETWORK)
    return b.build()


CASES = {
    "one switch": lambda: _switches(16, per_switch=16),
    "three switches": lambda: _switches(12, per_switch=4),
    "a doubled cable": lambda: _switches(8, per_switch=8, double_first=True),
    "nvswitch servers": lambda: _switches(8, per_switch=4, nvswitch=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("router", ["shortest", "ecmp", "spray"])
def test_the_routes_of_gpus_on_a_switch_are_the_searchs_bit_for_bit(case, router):
    f = CASES[case]()
    n = f.num_gpus
    s, d = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    key = np.arange(s.size) * 7919
    fast = make_router(router, f, seed=3).route(s, d, key)
    idx = path_index(f)
    stars = idx.net_star_pairs(s, d) & (s != d)
    hub = idx.net_star_hub
    try:  # the same router with the shortcut off: every pair searched (`PathIndex.dag`)
        idx.net_star_hub = np.full_like(hub, -1)
        idx._dag_cache.clear()
        slow = make_router(router, f, seed=3).route(s, d, key)
    finally:
        idx.net_star_hub = hub
    for name in ("ptr", "link", "frac", "latency_s"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    # the shortcut did apply (and only where the path is single: GPU 0's two cables are two paths)
    server = np.asarray(f.gpu_server)
    expected = {"one switch": n * (n - 1), "three switches": 12 * 3, "a doubled cable": 6 * 7,
                "nvswitch servers": int(np.sum((s // 4 == d // 4) & (server[s] != server[d])))}[case]
    assert int(stars.sum()) == expected
    assert np.all(np.diff(fast.ptr)[stars] == 2)
