"""The engine's rate updates: the bottleneck rule (`flowherd.engine.bottleneck`, the default) and the
closure rule (`flowherd.engine.allocation`: the arrival bound and the threshold that keeps flows below
an event's level untouched), checked against full max-min recomputations."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from flowherd.engine import Engine, max_min_rates
from flowherd.engine.allocation import NO_CLASS, NO_THRESHOLD, arrival_levels, threshold
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.base import Routes
from flowherd.routing.policies import make_router


def _buckets(ptr, link, num_links):
    """Per-link buckets of all flows (what the engine keeps for the active ones)."""
    flow_of = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    order = np.argsort(link, kind="stable")
    b_len = np.bincount(link, minlength=num_links).astype(np.int64)
    b_start = (np.cumsum(b_len) - b_len).astype(np.int64)
    return b_start, b_len, flow_of[order].astype(np.int64), order.astype(np.int64)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_arrival_bound_is_at_most_the_max_min_level(seed):
    """`arrival_levels` bounds a flow's level from below: at its bottleneck ``l`` no flow has a
    higher level, so ``cap_l <= level * sum(weight * frac on l)`` (Bertsekas & Gallager, Data
    Networks, Sec. 6.5.2, the bottleneck characterization of max-min fairness)."""
    rng = np.random.default_rng(seed)
    num_links, num_flows = int(rng.integers(1, 8)), int(rng.integers(1, 30))
    ptr, link, frac = [0], [], []
    for _ in range(num_flows):
        k = int(rng.integers(1, min(4, num_links) + 1))
        link.extend(rng.choice(num_links, size=k, replace=False).tolist())
        frac.extend(rng.choice([1.0, 0.5, 0.25, rng.uniform(0.05, 1.0)], size=k).tolist())
        ptr.append(len(link))
    ptr, link, frac = np.array(ptr), np.array(link, np.int64), np.array(frac)
    cap = rng.choice([1.0, 2.5, 10.0], size=num_links) * 1e9
    w = rng.choice([1.0, 2.0, 0.5], size=num_flows)
    p = rng.integers(0, 2, size=num_flows).astype(np.int64)
    rates = max_min_rates(ptr, link, frac, cap, weight=w, priority=p)
    b_start, b_len, b_flow, b_inc = _buckets(ptr, link, num_links)
    ids = np.arange(num_flows, dtype=np.int64)
    bound = arrival_levels(ids, ptr[:-1], ptr[1:], link, frac, w, p, cap, b_start, b_len, b_flow,
                           b_inc)
    assert np.all(bound <= rates / w * (1 + 1e-12))
    # and it is not vacuous: a flow alone in the top class on its links gets its bound exactly
    top = p == p.min()
    assert np.any(bound[top] > 0)


def test_threshold_is_the_lowest_class_then_the_lowest_level():
    p, t = threshold(1, 5.0, 0, 3.0)
    assert p == 0 and 3.0 * (1 - 1e-8) < t < 3.0
    p, t = threshold(0, 2.0, 0, 3.0)
    assert p == 0 and 2.0 * (1 - 1e-8) < t < 2.0
    assert threshold(NO_CLASS, np.inf, 1, 4.0)[0] == 1
    assert threshold(NO_CLASS, np.inf, NO_CLASS, np.inf) == NO_THRESHOLD


class FullCheckEngine(Engine):
    """After every rate update: the largest difference of the rates from a from-scratch max-min
    allocation of all active flows, as a fraction of the fastest link (a rate left over after
    cancellation, cap - sum of others, is only known to rounding of cap, not of itself)."""

    checks = 0
    max_err = 0.0

    def _check(self):
        f, act = self._f, np.sort(self._active)
        lens = f.hi[act] - f.lo[act]
        idx = np.concatenate([np.arange(f.lo[a], f.hi[a]) for a in act])
        ref = max_min_rates(np.concatenate([[0], np.cumsum(lens)]), self._links.link[idx],
                            self._links.frac[idx], self._ls.cap, weight=f.weight[act],
                            priority=f.prio[act])
        err = np.abs(f.rate[act] - ref) / self._ls.cap.max()
        type(self).max_err = max(type(self).max_err, float(err.max()))
        type(self).checks += 1
        return act

    def _rates(self, started, ended, now):
        super()._rates(started, ended, now)
        act = self._check()
        # every active flow's bottleneck pointer names one of its links, and that link is full
        f, lk = self._f, self._links
        load = self.link_load_bytes_per_s()
        for a in act:
            b = f.bn[a]
            assert b in lk.link[f.lo[a]:f.hi[a]]
            assert load[b] >= self._ls.cap[b] * (1 - 1e-9)

    def _rates_closure(self, seeds, now, thr):
        super()._rates_closure(seeds, now, thr)
        self._check()


def _steady_run(eng_cls, router_name, seed, *, rule="bottleneck", keep_threshold=True):
    fab = leaf_spine(servers=16, gpus_per_server=4, leaves=4, spines=2, oversubscription=2.0)
    router = make_router(router_name, fab, seed=0)
    eng = eng_cls(fab, router)
    eng._rule = rule
    if not keep_threshold:  # the closure rule with every flow re-allocatable at each update
        eng._rates_closure = (lambda seeds, now, thr, _r=eng._rates_closure:
                              _r(seeds, now, NO_THRESHOLD))
    rng = np.random.default_rng(seed)
    n = fab.num_gpus

    def add(_c=None, _t=None):
        if eng.num_coflows >= 600:
            return
        src = rng.integers(0, n, 1)
        dst = (src + rng.integers(1, n, 1)) % n
        eng.add_coflow(src, dst, rng.uniform(1e6, 4e7, 1), weight=float(rng.choice([1.0, 2.0])),
                       priority=int(rng.choice([0, 0, 0, 1])), key=rng.integers(0, 8, 1),
                       on_done=add)

    for _ in range(150):  # far more flows than NICs: every NIC saturated
        add()
    eng.run()
    return eng


def test_rates_stay_max_min_under_both_rules_on_saturated_split_routes():
    """Hundreds of flows in flight over a 2:1 leaf-spine, weights, two priority classes, and
    sprayed (fractional) routes: every incremental update equals the full recomputation under
    the bottleneck rule and under the closure rule; the closure's threshold re-allocates fewer
    flows than the closure without it, and the bottleneck rule fewer than either."""
    for router in ("ecmp", "spray"):
        runs = {}
        for rule in ("bottleneck", "closure"):
            FullCheckEngine.checks, FullCheckEngine.max_err = 0, 0.0
            runs[rule] = _steady_run(FullCheckEngine, router, seed=7, rule=rule)
            assert FullCheckEngine.checks > 500
            assert FullCheckEngine.max_err < 1e-13, (router, rule)
        plain = _steady_run(Engine, router, seed=7, rule="closure", keep_threshold=False)
        moved = {k: e.num_flows_reallocated for k, e in runs.items()}
        assert moved["closure"] < 0.8 * plain.num_flows_reallocated, router
        assert moved["bottleneck"] < 0.8 * moved["closure"], (router, moved)
        # the same run every way: rates agree, so every coflow ends at the same time
        ref = plain.result().coflow_finish_s
        for e in runs.values():
            np.testing.assert_allclose(e.result().coflow_finish_s, ref, rtol=1e-12)


def test_a_new_flow_on_idle_links_starts_at_its_bottleneck_rate():
    """The bound is exact for a flow alone: it takes its narrowest link (64 GB/s PCIe)."""
    fab = leaf_spine(servers=2, leaves=1, spines=1)
    eng = Engine(fab, None)
    one = Routes(ptr=np.array([0, 1]), link=np.array([0]), frac=np.array([1.0]),
                 latency_s=np.array([0.0]))
    eng.add_coflow(0, 1, 64e9, routes=one)
    eng.run(until_s=0.0)
    f = eng._f
    b = arrival_levels(np.array([0]), f.lo, f.hi, eng._links.link, eng._links.frac, f.weight,
                       f.prio, eng._ls.cap, eng._b_start, eng._b_len, eng._b_flow, eng._b_inc)
    assert b[0] == f.rate[0] == fab.link_capacity_bytes_per_s[0]
