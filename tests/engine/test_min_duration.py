"""A coflow's least duration (`Engine.add_coflow(min_duration_s=)`, NCCL's channel rate as a
rate limit): alone one-by-one and in a batch it ends at start + least duration when its flows
are faster, at its flows' end when they are slower, and a pure delay lasts its least duration."""

import numpy as np
import pytest
from test_engine import B, star, star_routes

from flowherd.engine import Engine
from flowherd.engine.coflow_batch import BatchCoflow, make_batch
from flowherd.errors import ConfigError
from flowherd.units import MiB

S = 64 * MiB
T_FLOW = S / B + 4e-6  # one flow alone on `star`: S/B plus two links' latency (closed form)


@pytest.mark.parametrize("least", [0.0, 0.5 * T_FLOW, 2.0 * T_FLOW])
def test_one_by_one_and_batched_end_at_the_later_of_flows_and_least_duration(least):
    fab = star(4)
    single = Engine(fab, None)
    c = single.add_coflow(np.array([0]), np.array([1]), np.array([S]), routes=star_routes([(0, 1)]),
                          min_duration_s=least)
    d = single.add_coflow(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), after=(c,),
                          min_duration_s=least)
    single.run()
    batched = Engine(fab, None)
    batch = make_batch([BatchCoflow(src=np.array([0]), dst=np.array([1]), size_bytes=np.array([S]),
                                    routes=star_routes([(0, 1)]), min_duration_s=least),
                        BatchCoflow(deps=(0,), min_duration_s=least)])
    c0 = batched.add_coflows(batch)
    batched.run()
    want = max(T_FLOW, least)
    assert single.coflow_finish_s(c) == pytest.approx(want, rel=1e-9)
    assert single.coflow_finish_s(d) == pytest.approx(want + least, rel=1e-9)  # a pure delay
    assert batched.coflow_finish_s(c0) == single.coflow_finish_s(c)
    assert batched.coflow_finish_s(c0 + 1) == single.coflow_finish_s(d)


def test_the_least_duration_leaves_the_link_to_a_competitor():
    """A capped coflow keeps the rate the link gives it: a second flow sharing its link ends
    as under max-min without the cap (both at B/2 until the first ends), whatever the cap."""
    fab = star(4)
    ends = []
    for least in (0.0, 3.0 * T_FLOW):
        eng = Engine(fab, None)
        eng.add_coflow(np.array([0]), np.array([1]), np.array([S]), routes=star_routes([(0, 1)]),
                       min_duration_s=least)
        other = eng.add_coflow(np.array([2]), np.array([1]), np.array([S]), routes=star_routes([(2, 1)]))
        eng.run()
        ends.append(eng.coflow_finish_s(other))
    assert ends[0] == ends[1]
    assert ends[0] == pytest.approx(2 * S / B + 4e-6, rel=1e-6)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_bad_least_duration_is_one_clear_error(bad):
    fab = star(2)
    with pytest.raises(ConfigError, match="min_duration_s"):
        Engine(fab, None).add_coflow(0, 1, S, routes=star_routes([(0, 1)]), min_duration_s=bad)
    with pytest.raises(ConfigError, match="min_duration_s"):
        make_batch([BatchCoflow(min_duration_s=bad)])
