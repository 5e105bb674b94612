"""Max-min fair rates: optimality certificate, capacity, kernel vs reference, closed forms."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowherd.engine.fairshare import max_min_rates, max_min_rates_reference
from flowherd.errors import ConfigError

REL = 1e-9


@st.composite
def flow_sets(draw, weighted=True, prioritized=True):
    """Random CSR incidences: F flows over L links, fractional shares, mixed capacities."""
    num_links = draw(st.integers(1, 8))
    num_flows = draw(st.integers(1, 25))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    ptr = [0]
    link, frac = [], []
    for _ in range(num_flows):
        k = int(rng.integers(0, min(4, num_links) + 1))
        ls = rng.choice(num_links, size=k, replace=False)
        link.extend(ls.tolist())
        frac.extend(rng.choice([1.0, 1.0, 0.5, 0.25, rng.uniform(0.05, 1.0)], size=k).tolist())
        ptr.append(len(link))
    cap = rng.choice([1.0, 2.5, 10.0, 7.3], size=num_links) * 1e9
    weight = rng.choice([1.0, 2.0, 0.5, 3.7], size=num_flows) if weighted else None
    prio = rng.integers(0, 3, size=num_flows) if prioritized else None
    return (np.array(ptr), np.array(link, dtype=np.int64), np.array(frac), cap, weight, prio)


def _loads(ptr, link, frac, cap, rates, mask=None):
    flow_of = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    use = np.ones(len(link), bool) if mask is None else mask[flow_of]
    r = np.where(np.isfinite(rates), rates, 0.0)[flow_of]
    return np.bincount(link[use], weights=(r * frac)[use], minlength=len(cap))


@settings(max_examples=300, deadline=None)
@given(flow_sets())
def test_rates_never_exceed_capacity(fs):
    ptr, link, frac, cap, w, p = fs
    rates = max_min_rates(ptr, link, frac, cap, weight=w, priority=p)
    assert np.all(_loads(ptr, link, frac, cap, rates) <= cap * (1 + REL))
    assert np.all(rates >= 0)


@settings(max_examples=300, deadline=None)
@given(flow_sets())
def test_every_flow_has_a_bottleneck_where_its_weighted_rate_is_largest(fs):
    """Max-min optimality certificate (Bertsekas & Gallager, Data Networks, 2nd ed., §6.5.2):
    an allocation is max-min fair iff every flow has a saturated link on which its rate is the
    largest. Weighted: largest rate/weight. Strict priority: saturated counting the flow's class
    and the classes before it; largest among its own class."""
    ptr, link, frac, cap, w, p = fs
    rates = max_min_rates(ptr, link, frac, cap, weight=w, priority=p)
    num_flows = len(ptr) - 1
    w = np.ones(num_flows) if w is None else w
    p = np.zeros(num_flows, int) if p is None else p
    norm = rates / w
    for f in range(num_flows):
        links = link[ptr[f]:ptr[f + 1]]
        if links.size == 0:
            assert rates[f] == np.inf
            continue
        load = _loads(ptr, link, frac, cap, rates, mask=p <= p[f])
        ok = False
        for lnk in links:
            if load[lnk] < cap[lnk] * (1 - REL):
                continue
            peers = [g for g in range(num_flows) if p[g] == p[f] and lnk in link[ptr[g]:ptr[g + 1]]]
            if norm[f] >= max(norm[g] for g in peers) * (1 - REL):
                ok = True
                break
        assert ok, f"flow {f} (rate {rates[f]}) has no bottleneck link"


@settings(max_examples=200, deadline=None)
@given(flow_sets())
def test_kernel_matches_progressive_filling_reference(fs):
    ptr, link, frac, cap, w, p = fs
    fast = max_min_rates(ptr, link, frac, cap, weight=w, priority=p)
    ref = max_min_rates_reference(ptr, link, frac, cap, weight=w, priority=p)
    assert np.array_equal(np.isinf(fast), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(fast[fin], ref[fin], rtol=1e-9, atol=1e-9 * cap.max())


def test_kernel_matches_reference_on_a_large_random_instance():
    """DESIGN.md's worst case: 5 links per flow, three capacities (many bottleneck levels)."""
    rng = np.random.default_rng(7)
    num_flows, num_links = 2000, 400
    ptr = np.arange(0, 5 * num_flows + 1, 5)
    link = np.concatenate([rng.choice(num_links, 5, replace=False) for _ in range(num_flows)])
    frac = rng.choice([1.0, 0.5], size=link.size)
    cap = rng.choice([100e9, 400e9, 900e9], size=num_links)
    w = rng.uniform(0.5, 2.0, num_flows)
    fast = max_min_rates(ptr, link, frac, cap, weight=w)
    ref = max_min_rates_reference(ptr, link, frac, cap, weight=w)
    np.testing.assert_allclose(fast, ref, rtol=1e-12)


def test_n_flows_on_one_link_each_get_an_nth():
    """Closed form: n equal flows on one link of capacity B get B/n each."""
    for n in (1, 2, 3, 7, 64):
        rates = max_min_rates(np.arange(n + 1), np.zeros(n, int), np.ones(n), [400e9])
        np.testing.assert_allclose(rates, 400e9 / n, rtol=1e-15)


def test_parking_lot_gives_the_short_flows_the_leftover():
    """Classic parking lot: A over links 0 and 1, B over 0 (B0 = 1), C over 1 (B1 = 2).
    Link 0 is the bottleneck of A and B at 1/2 each; C takes the 3/2 left on link 1."""
    rates = max_min_rates([0, 2, 3, 4], [0, 1, 0, 1], [1.0] * 4, [1.0, 2.0])
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5])


def test_weights_split_a_bottleneck_in_proportion():
    """Weighted max-min: weights 2 and 1 on one link of capacity B give 2B/3 and B/3."""
    rates = max_min_rates([0, 1, 2], [0, 0], [1.0, 1.0], [3e9], weight=[2.0, 1.0])
    np.testing.assert_allclose(rates, [2e9, 1e9])


def test_split_flow_counts_only_its_fraction_on_each_path():
    """A flow sprayed half/half over links 0 and 1 next to a single-path flow on link 0
    (both capacity 1): level t with 0.5 t + t = 1 on link 0 gives t = 2/3 for both."""
    rates = max_min_rates([0, 2, 3], [0, 1, 0], [0.5, 0.5, 1.0], [1.0, 1.0])
    np.testing.assert_allclose(rates, [2 / 3, 2 / 3])


def test_strict_priority_serves_the_high_class_first():
    """Priority 0 takes the whole link; priority 1 gets exactly 0; a class-1 flow elsewhere
    still gets its own link."""
    rates = max_min_rates([0, 1, 2, 3], [0, 0, 1], [1.0] * 3, [5.0, 2.0], priority=[0, 1, 1])
    assert rates[0] == 5.0 and rates[1] == 0.0 and rates[2] == 2.0


def test_flow_without_links_gets_infinite_rate():
    rates = max_min_rates([0, 0, 1], [0], [1.0], [1.0])
    assert rates[0] == np.inf and rates[1] == 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(ptr=[0, 2], link=[0], frac=[1.0], capacity=[1.0]), "link"),
        (dict(ptr=[0, 1], link=[3], frac=[1.0], capacity=[1.0]), "link"),
        (dict(ptr=[0, 1], link=[0], frac=[1.5], capacity=[1.0]), "frac"),
        (dict(ptr=[0, 1], link=[0], frac=[1.0], capacity=[0.0]), "capacity"),
        (dict(ptr=[0, 1], link=[0], frac=[1.0], capacity=[1.0], weight=[np.nan]), "weight"),
        (dict(ptr=[0, 1], link=[0], frac=[1.0], capacity=[1.0], priority=[0.5]), "priority"),
    ],
)
def test_bad_input_names_the_argument(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        max_min_rates(**kwargs)


def _star_all_to_all(n, rng):
    """Every GPU of a one-switch star to every other: flow (i, j) on uplink i and downlink j.
    Every link at one level, so the levels rise by an ulp at a time as flows freeze and the
    heap's keys go stale again and again (the 1,024-GPU AllToAll's case, issue 17)."""
    s, d = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    m = s != d
    link = np.stack([2 * s[m], 2 * d[m] + 1], axis=1).reshape(-1)
    ptr = np.arange(0, link.size + 1, 2)
    w = rng.choice([1.0, 1.0, 2.0, 0.5], size=ptr.size - 1)
    return ptr, link, np.ones(link.size), np.full(2 * n, 50.0 * 2**30), w


def test_neither_a_full_heap_nor_the_by_link_copy_changes_a_rate():
    """`_fill` from a heap of one entry (it grows at nearly every push, `_drain` returning to
    `_fill` each time), with `_drain`'s by-link copy made at the first re-queue or never, gives
    the very rates of the heap that never fills."""
    from flowherd.engine.fairshare import Scratch, _fill_from

    rng = np.random.default_rng(3)
    ptr, link, frac, cap, w = _star_all_to_all(24, rng)
    prio = rng.integers(0, 2, ptr.size - 1)
    flows = np.argsort(prio, kind="mergesort").astype(np.int64)
    out = []
    for room, copy_after in ((1, -1), (flows.size + 1, -1), (1, 0), (flows.size + 1, 1 << 62)):
        rates = np.zeros(flows.size)
        _fill_from(flows, ptr[:-1].copy(), ptr[1:].copy(), link, frac, w, prio, cap, rates,
                   Scratch(cap.size).pos, room, copy_after)
        out.append(rates)
    for rates in out[1:]:
        assert np.array_equal(rates, out[0])
    np.testing.assert_allclose(out[0], max_min_rates_reference(ptr, link, frac, cap, weight=w,
                                                               priority=prio), rtol=1e-9)


def test_links_numbered_alike_by_sort_and_by_scan():
    """The links a call touches are numbered in id order by a sort when they are few among
    the fabric's, by a scan of their marks when many: idle links added to the fabric (the sort)
    leave every rate as it was (the scan), bit for bit."""
    rng = np.random.default_rng(5)
    ptr, link, frac, cap, w = _star_all_to_all(12, rng)
    dense = max_min_rates(ptr, link, frac, cap, weight=w)
    wide = np.concatenate([cap, np.full(40 * cap.size, 1e12)])
    assert np.array_equal(max_min_rates(ptr, link, frac, wide, weight=w), dense)
    assert np.array_equal(max_min_rates(ptr, link * 41, frac, np.repeat(cap, 41), weight=w), dense)
