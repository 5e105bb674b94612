"""`launch_graph` (tasks added as their dependencies end) against `add_graph` (all at once)."""

import numpy as np
import pytest

from flowherd.cluster.executor import CollectiveCache, add_graph, launch_graph, prepare_graph
from flowherd.collectives.ops import Collective, Op
from flowherd.engine.core import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.workload.opgraph import GraphBuilder


def _graph():
    # two AllReduces overlapping each other and a compute branch, then a join
    b = GraphBuilder("g", 8, [tuple(range(8))])
    c0 = b.compute("c0", 1e-4, [], stage=0)
    a1 = b.comm("a1", (Collective(op=Op.ALLREDUCE, gpus=range(8), size_bytes=64 * 2**20),), [c0],
                group="dp", stage=0)
    c1 = b.compute("c1", 2e-4, [c0], stage=0)
    a2 = b.comm("a2", (Collective(op=Op.ALLREDUCE, gpus=range(4), size_bytes=16 * 2**20),), [c1],
                group="dp", stage=0, count=2)
    b.compute("c2", 1e-4, [a1, a2], stage=0)
    return b.build()


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_launched_graph_ends_when_add_graph_does(fidelity):
    fab = leaf_spine(servers=8, leaves=2, spines=2)
    rtr = make_router("ecmp", fab, seed=0)
    pg = prepare_graph(_graph(), np.arange(8), CollectiveCache(fab, rtr, algorithm="ring"))
    ends = {}
    for how in (add_graph, launch_graph):
        eng = Engine(fab, rtr, record_flows=False)
        how(eng, pg, fidelity=fidelity, at_s=1e-3, on_done=lambda _c, t, h=how: ends.setdefault(h, t))
        if how is launch_graph:  # nothing but the start marker before it runs
            assert eng.num_coflows == 1
        eng.run()
    assert ends[add_graph] > 1e-3 + 4e-4  # the compute chain alone is shorter: comm counts
    assert ends[launch_graph] == pytest.approx(ends[add_graph], rel=1e-12)


def test_an_empty_graph_ends_at_its_start():
    fab = leaf_spine(servers=2, leaves=1, spines=1)
    rtr = make_router("ecmp", fab, seed=0)
    pg = prepare_graph(GraphBuilder("e", 2, [(0, 1)]).build(), np.arange(2), CollectiveCache(fab, rtr))
    eng = Engine(fab, rtr)
    ends = []
    launch_graph(eng, pg, fidelity="step", at_s=0.5, on_done=lambda _c, t: ends.append(t))
    eng.run()
    assert ends == [0.5]
