"""Inference services in a cluster run: requests, continuous-batching decode, KV transfers the
controller sees, capacity, and the KV-transfer model against a published measurement."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.executor import CollectiveCache, add_graph, prepare_graph
from flowherd.cluster.simulate import JobRequest, simulate_cluster
from flowherd.engine.core import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.workload import InferenceJob, TrainingJob, rank_to_gpu

MiB, GiB = 2**20, 2**30


def service(rate: float = 2.0, **kw) -> InferenceJob:
    base = dict(model="llama3-70b", tp=8, instances=1, disaggregated=True, decode_instances=1,
                request_rate_per_s=rate, duration_s=3.0, output_tokens=16, efficiency=0.45)
    return InferenceJob(**{**base, **kw})


def run(spec, *, horizon_s=20.0, seed=0, extra=(), controller=None, servers=2):
    fab = leaf_spine(servers=servers, gpus_per_server=8, leaves=2 if servers > 2 else 1,
                     spines=2 if servers > 2 else 1)
    jobs = [JobRequest(name="svc", tenant="s", spec=spec, submit_s=0.0), *extra]
    return simulate_cluster(fab, jobs, horizon_s=horizon_s, seed=seed, controller=controller)


def test_every_request_gets_its_tokens_in_order_and_the_service_ends():
    res = run(service())
    sv = res.job("svc").service
    assert res.job("svc").finish_s is not None
    assert len(sv.arrival_s) > 0 and np.all(np.diff(sv.arrival_s) >= 0)
    assert np.all(sv.first_token_s >= sv.arrival_s)
    assert np.all(sv.last_token_s > sv.first_token_s)
    # a request's first token needs its batch closed, its prefill and its KV transfer
    b = sv.batch
    assert np.all(sv.first_token_s >= sv.batch_close_s[b])
    assert np.all(sv.kv_end_s >= sv.prefill_end_s) and np.all(sv.prefill_end_s > sv.prefill_start_s)
    assert np.all(sv.prefill_start_s >= sv.batch_close_s - 1e-12)
    assert np.array_equal(sv.first_token_s, sv.kv_end_s[b])


def test_continuous_batching_decodes_a_lone_request_at_the_one_sequence_step_time():
    # at a trickle each request decodes alone: (out - 1) steps of one sequence, each the step's
    # time alone (decode_graph of 1 sequence, 1 step, on the replica's NVLink)
    spec = service(rate=0.3, duration_s=20.0, output_tokens=33)
    res = run(spec, horizon_s=60.0, seed=3)
    sv = res.job("svc").service
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1)
    gpus = np.asarray(res.job("svc").gpus)
    cache = CollectiveCache(fab, make_router("ecmp", fab))
    g = prepare_graph(spec.decode_graph(1, replica=0, steps=1), rank_to_gpu(spec, gpus, 8), cache)
    eng = Engine(fab, make_router("ecmp", fab))
    add_graph(eng, g, fidelity="collective")
    eng.run()
    alone = (sv.batch_close_s[1:] - sv.batch_close_s[:-1]).min() > 32 * eng.now_s  # no overlap
    assert alone
    tpot = (sv.last_token_s - sv.first_token_s) / 32
    assert tpot == pytest.approx(np.full(tpot.size, eng.now_s), rel=1e-9)


def _step_alone(spec, gpus, n=1):
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1)
    cache = CollectiveCache(fab, make_router("ecmp", fab))
    g = prepare_graph(spec.decode_graph(n, replica=0, steps=1), rank_to_gpu(spec, np.asarray(gpus), 8), cache)
    eng = Engine(fab, make_router("ecmp", fab))
    add_graph(eng, g, fidelity="collective")
    eng.run()
    return eng.now_s


def test_decode_replica_takes_at_most_max_batch_requests_a_step():
    # a burst of requests on one decode replica holding at most 4: it needs ceil(n / 4) rounds of
    # 63 steps, each at least one sequence's step time; holding them all, far fewer
    kw = dict(rate=60.0, duration_s=1.0, output_tokens=64, batch_window_s=0.0, max_batch=1)
    small = run(service(**kw), horizon_s=60.0).job("svc")
    sv = small.service
    n = sv.arrival_s.size
    t1 = _step_alone(service(**kw), small.gpus)
    span = sv.last_token_s.max() - sv.first_token_s.min()
    assert span >= n * 63 * t1 * (1 - 1e-9)  # max_batch 1: one request a step, one after the other
    big = run(service(**{**kw, "max_batch": 64}), horizon_s=60.0).job("svc").service
    assert big.last_token_s.max() - big.first_token_s.min() < span / 4


def test_capacity_flags_an_overloaded_service_and_metrics_warn():
    from flowherd.experiments.metrics import job_metrics, run_metrics

    spec = service(rate=400.0, duration_s=0.5)
    res = run(spec, horizon_s=3.0)
    rec = res.job("svc")
    assert rec.service.capacity_per_s < 400.0 and rec.service.overloaded
    jobs = [job_metrics(rec, solo_iteration_s=None, horizon_s=3.0)]
    w = run_metrics(res, jobs)["warnings"]
    assert len(w) == 1 and "overloaded" in w[0] and "400/s" in w[0]
    light = run(service(rate=1.0)).job("svc").service
    assert not light.overloaded and light.capacity_per_s > 1.0


def test_comm_share_of_a_service_counts_no_queueing():
    from flowherd.experiments.metrics import job_metrics

    # the same steps, lightly and heavily loaded: batches wait for the replica, their steps do not
    # change, so the share stays while the batch latency grows
    light = run(service(rate=1.0, duration_s=3.0), horizon_s=60.0).job("svc")
    heavy = run(service(rate=30.0, duration_s=3.0, max_batch=1, batch_window_s=0.0),
                horizon_s=60.0).job("svc")
    ml = job_metrics(light, solo_iteration_s=None, horizon_s=60.0)
    mh = job_metrics(heavy, solo_iteration_s=None, horizon_s=60.0)
    assert mh["mean_iteration_s"] > 3 * ml["mean_iteration_s"]  # queueing
    assert mh["comm_share"] == pytest.approx(ml["comm_share"], abs=0.05)
    assert 0 < ml["comm_share"] < 0.5


class _Watcher:
    name = "watcher"

    def __init__(self):
        self.seen = []

    def reset(self, seed):
        self.seen.clear()

    def decide(self, point, view):
        if point.kind == "collective":
            self.seen.append((point.now_s, view.transfers))
        return None


def test_a_controller_sees_the_kv_transfers_in_flight_and_expected():
    w = _Watcher()
    train = JobRequest(name="tr", tenant="t", submit_s=0.0,
                       spec=TrainingJob(model="llama3-8b", gpus=16, tp=8, iterations=40))
    res = run(service(rate=8.0, duration_s=3.0), extra=[train], controller=w, servers=4, horizon_s=10.0)
    sv = res.job("svc").service
    views = [(t, x) for t, xs in w.seen for x in xs]
    assert views, "no KV transfer was ever listed"
    for t, x in views:
        assert x.job == "svc" and x.remaining_bytes > 0 and x.link_idx.size
        b = int(x.name.split("/b")[1].split("/")[0])
        if x.started:  # in flight: its prefill is over, its transfer is not
            assert sv.prefill_end_s[b] - 1e-9 <= t <= sv.kv_end_s[b] + 1e-9
            assert x.remaining_bytes <= 8 * spec_kv(b, sv) * 1.01
        else:  # expected: its prefill has begun
            assert sv.prefill_start_s[b] - 1e-9 <= t <= sv.prefill_end_s[b] + 1e-9
            assert x.start_s == pytest.approx(sv.prefill_end_s[b], abs=1e-3)


def spec_kv(b, sv):
    n = int(np.sum(sv.batch == b))
    return service().kv_bytes(n) / 8


# ---- the KV-cache size against a published figure --------------------------------------------------
# DistServe (Zhong et al., OSDI'24, section 2.3): "the KV cache of a single 512-token request on
# OPT-66B is approximately 1.13GB" (OPT-66B: 64 layers, hidden 9,216, 72 heads of 128, no grouped
# KV heads; FP16): 2 x 64 x 9,216 x 2 bytes = 2.25 MiB per token, 1.125 GiB for 512 tokens.
OPT_66B = {"name": "opt-66b", "layers": 64, "hidden": 9216, "heads": 72, "kv_heads": 72, "head_dim": 128,
           "ffn_hidden": 36864, "vocab": 50272}


def test_kv_bytes_match_distserve_opt66b():
    j = InferenceJob(model=OPT_66B, tp=8, disaggregated=True, decode_instances=1, prompt_tokens=512)
    assert j.kv_bytes(1) == 2 * 64 * 9216 * 2 * 512
    assert j.kv_bytes(1) / GiB == pytest.approx(1.13, abs=0.01)  # the paper's "approximately 1.13GB"
    assert j.kv_transfer_graph(1).bytes_by_group()["kv"] == pytest.approx(j.kv_bytes(1))
