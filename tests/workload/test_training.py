"""Training op graphs: closed-form traffic volumes, 1F1B schedule, overlap, granularity, rank mapping."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from graph_checks import passes_and_step

from flowherd.collectives.ops import Op, busbw_factor
from flowherd.errors import ConfigError, UnknownNameError
from flowherd.workload import ModelShape, TaskKind, TrainingJob, rank_to_gpu

A = 2  # bf16 bytes


def gpt_job(**kw):
    base = dict(model="gpt3-175b", gpus=32, tp=4, pp=4, dp=2, seq_len=2048, micro_batch=2, global_batch=32)
    return TrainingJob(**{**base, **kw})


def test_megatron_gpt_volumes_equal_closed_forms():
    """Per iteration, summing nccl-tests sizes over all groups:

    * TP (Shoeybi et al. 2019, section 3): 4 AllReduce of b*s*h*2 bytes per layer per micro-batch
      (2 forward, 2 backward), in each of the dp TP-group columns: 4 * L * m * b*s*h*2 * dp;
    * PP (Narayanan et al. SC'21, section 4.1): 2 * (p - 1) sends of b*s*h*2 bytes per micro-batch per
      pipeline replica: 2 * (p - 1) * m * b*s*h*2 * dp;
    * DP: BF16 gradients, params / (tp * pp) * 2 bytes per rank, tp * pp groups: params * 2, plus the
      last stage's copy of the tied word embedding (V * h * 2) and the AllReduce of the two copies'
      gradients between the first and last stage (Megatron-LM ``_allreduce_word_embedding_grads``):
      V * h / tp * 2 bytes in each of the tp * dp embedding groups.
    """
    j = gpt_job()
    b, s, h, L, m, dp, p, V = 2, 2048, 12288, 96, j.micro_batches, 2, 4, j.model.vocab
    assert m == 8
    vol = j.iteration_graph("layer").bytes_by_group()
    assert vol["tp"] == pytest.approx(4 * L * m * b * s * h * A * dp, rel=1e-12)
    assert vol["pp"] == pytest.approx(2 * (p - 1) * m * b * s * h * A * dp, rel=1e-12)
    assert vol["dp"] == pytest.approx((j.model.num_params() + V * h) * A + dp * V * h * A, rel=1e-12)
    assert set(vol) == {"tp", "pp", "dp"}


def test_dp_bytes_per_rank_are_stage_params_over_tp():
    j = gpt_job()
    g = j.iteration_graph("layer")
    per_stage = np.zeros(j.pp)
    for t in g.tasks:
        if t.group == "dp" and not t.name.startswith("embedding/"):
            c = t.collectives[0]
            assert c.op == Op.ALLREDUCE and c.n == j.dp
            assert len(t.collectives) == j.tp  # one DP group per TP rank of the stage
            per_stage[t.stage] += t.count * c.size_bytes
    m = j.model
    expected = [sum(m.layer_params(i) for i in j.stage_layers(s)) for s in range(j.pp)]
    expected[0] += m.embedding_params()
    expected[-1] += m.head_params() + m.vocab * m.hidden  # the tied embedding's copy (Megatron)
    np.testing.assert_allclose(per_stage, np.array(expected) / j.tp * A, rtol=1e-12)
    # on average (params + the copy) / (tp * pp) * 2 bytes per rank
    assert per_stage.mean() == pytest.approx((m.num_params() + m.vocab * m.hidden) / (j.tp * j.pp) * A,
                                             rel=1e-12)


def test_tied_embedding_grads_are_allreduced_between_first_and_last_stage():
    # Megatron-LM finalize_model_grads -> _allreduce_word_embedding_grads: one AllReduce per (dp, tp)
    # position between the first and the last pipeline rank, of V * h / tp gradient elements, after
    # both stages' DP sync and before their optimizer step; none without pp or without tied embeddings
    j = gpt_job()
    g = j.iteration_graph("stage")
    tied = [t for t in g.tasks if t.name.startswith("embedding/")]
    assert len(tied) == 1
    t = tied[0]
    first, last = set(j.rank_grid()[0].ravel().tolist()), set(j.rank_grid()[-1].ravel().tolist())
    assert len(t.collectives) == j.tp * j.dp
    for c in t.collectives:
        assert c.op == Op.ALLREDUCE and c.n == 2 and len(set(c.gpus) & first) == 1 == len(set(c.gpus) & last)
        assert c.size_bytes == pytest.approx(j.model.vocab * j.model.hidden / j.tp * A, rel=1e-12)
    steps = [u for u in g.tasks if u.name.endswith("/optimizer")]
    assert all((t.id in u.deps) == (u.stage in (0, j.pp - 1)) for u in steps)
    flat = gpt_job(pp=1, dp=8).iteration_graph("stage")
    assert not [t for t in flat.tasks if t.name.startswith("embedding/")]
    untied = TrainingJob(model="llama3-8b", gpus=8, tp=2, pp=4, global_batch=8, seq_len=1024)
    assert not [t for t in untied.iteration_graph("stage").tasks if t.name.startswith("embedding/")]


def test_fp32_gradients_double_dp_bytes():
    v2 = gpt_job().iteration_graph().bytes_by_group()["dp"]
    v4 = gpt_job(grad_bytes=4).iteration_graph().bytes_by_group()["dp"]
    assert v4 == pytest.approx(2 * v2)


def test_sequence_parallel_replaces_allreduce_by_reducescatter_and_allgather_of_same_bytes():
    # Korthikanti et al. 2022, section 4.2.2: an AllReduce = ReduceScatter + AllGather of the same buffer.
    plain = gpt_job().iteration_graph().bytes_by_group_op()
    sp = gpt_job(sequence_parallel=True).iteration_graph().bytes_by_group_op()
    assert ("tp", Op.ALLREDUCE) not in sp
    assert sp[("tp", Op.REDUCESCATTER)] == pytest.approx(plain[("tp", Op.ALLREDUCE)])
    assert sp[("tp", Op.ALLGATHER)] == pytest.approx(plain[("tp", Op.ALLREDUCE)])


def test_recompute_repeats_forward_tp_traffic():
    plain = gpt_job().iteration_graph().bytes_by_group()["tp"]
    rc = gpt_job(activation_recompute=True).iteration_graph().bytes_by_group()["tp"]
    assert rc == pytest.approx(1.5 * plain)  # 6 instead of 4 AllReduce per layer


CONFIGS = [
    dict(model="llama3-70b", gpus=64, tp=8, pp=2, cp=2, sequence_parallel=True, zero_stage=1, seq_len=8192,
         global_batch=16),
    dict(model="mixtral-8x7b", gpus=32, tp=2, pp=2, ep=4, zero_stage=2, global_batch=32,
         sequence_parallel=True),
    dict(model="deepseek-v3", gpus=64, tp=2, pp=4, ep=8, global_batch=32, seq_len=1024),
    dict(model="llama3-8b", gpus=16, zero_stage=3, global_batch=32, activation_recompute=True),
    dict(model="llama3-8b", gpus=8, tp=2, pp=4, cp=1, global_batch=3, micro_batch=1, dp=1),
    dict(model="llama3-8b", gpus=1, global_batch=2),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_merged_graph_keeps_bytes_per_group_and_op(cfg):
    j = TrainingJob(**cfg)
    fine, coarse = j.iteration_graph("layer"), j.iteration_graph("stage")
    a, b = fine.bytes_by_group_op(), coarse.bytes_by_group_op()
    assert a.keys() == b.keys()
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-12)
    if j.zero_stage == 3:  # FSDP gathers layer by layer: a task per layer at both granularities
        assert len(coarse) == len(fine)
    else:
        assert len(coarse) < len(fine) or len(fine) < 60
    np.testing.assert_allclose(coarse.compute_s_by_stage(), fine.compute_s_by_stage(), rtol=1e-12)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_compute_time_accounts_for_all_iteration_flops(cfg):
    j = TrainingJob(**cfg, efficiency=0.45)
    g = j.iteration_graph("stage")
    # every stage task runs on tp*dp*cp ranks; FLOPs = duration * rate * ranks of the stage (the
    # optimizer step is memory-bound: no FLOPs of the count)
    flops = sum(t.duration_s * j.gpu.peak_bf16_flops * j.efficiency * len(g.stage_ranks[t.stage])
                for t in g.tasks if t.kind == TaskKind.COMPUTE and t.phase != "step")
    assert flops == pytest.approx(j.iteration_flops(), rel=1e-9)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_collectives_stay_inside_their_parallel_group(cfg):
    j = TrainingJob(**cfg)
    g = j.iteration_graph("stage")
    grid = j.rank_grid()  # (pp, dp, cp, tp)
    coords = {int(r): c for c, r in np.ndenumerate(grid)}
    for t in g.tasks:
        for c in t.collectives:
            pts = [coords[r] for r in c.gpus]
            same = [len({p[i] for p in pts}) == 1 for i in range(4)]  # pp, dp, cp, tp
            if t.group == "tp":
                assert same[:3] == [True, True, True] and c.n == j.tp
            elif t.group == "cp":
                assert same[0] and same[1] and same[3] and c.n == j.cp
            elif t.group == "ep":
                assert same[0] and same[2] and same[3] and c.n == j.ep
                assert len({p[1] // j.ep for p in pts}) == 1  # consecutive DP indices
            elif t.group == "pp":
                assert c.op == Op.SENDRECV and abs(pts[0][0] - pts[1][0]) == 1 and same[1:] == [True] * 3
            elif t.group in ("dp", "zero"):
                assert same[0] and same[3]


def test_one_f_one_b_order_per_stage():
    # PipeDream-Flush (Narayanan et al. SC'21, section 2.2.1): stage p does min(pp-p-1, m) warm-up forwards.
    j = TrainingJob(model="llama3-8b", gpus=4, pp=4, global_batch=6)
    g = j.iteration_graph("stage")
    for p in range(4):
        seq = [(t.phase, t.micro_batch) for t in g.tasks
               if t.kind == TaskKind.COMPUTE and t.stage == p and t.phase in ("fwd", "bwd")]
        seq = [k for k, _ in itertools.groupby(seq)]  # last micro-batch's backward is split into buckets
        warm = min(3 - p, 6)
        expected = [("fwd", i) for i in range(warm)]
        for i in range(6 - warm):
            expected += [("fwd", warm + i), ("bwd", i)]
        expected += [("bwd", i) for i in range(6 - warm, 6)]
        assert seq == expected


def _ancestors(g, tid):
    seen, stack = set(), [tid]
    while stack:
        for d in g.tasks[stack.pop()].deps:
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return seen


def test_pipeline_dependencies_cross_stages_through_sends():
    j = TrainingJob(model="llama3-8b", gpus=3, pp=3, global_batch=4)
    g = j.iteration_graph("stage")
    comp = {(t.stage, t.phase, t.micro_batch): t.id for t in g.tasks if t.kind == TaskKind.COMPUTE}
    for mb in range(4):
        fwd2 = _ancestors(g, comp[(2, "fwd", mb)])
        assert comp[(1, "fwd", mb)] in fwd2 and comp[(0, "fwd", mb)] in fwd2
        bwd0 = _ancestors(g, min(t.id for t in g.tasks if (t.stage, t.phase, t.micro_batch) == (0, "bwd", mb)
                                 and t.kind == TaskKind.COMPUTE))
        assert comp[(2, "fwd", mb)] in bwd0
        assert any(g.tasks[a].group == "pp" and g.tasks[a].phase == "bwd" for a in bwd0)


def test_pipeline_critical_path_equals_1f1b_closed_form():
    # Uniform stages, compute only: 1F1B takes (m + p - 1) * (t_f + t_b) (Narayanan et al. SC'21, eq. 1:
    # bubble fraction (p - 1) / m). vocab=2 makes the logit layer negligible.
    shape = ModelShape(name="u", layers=8, hidden=1024, heads=8, ffn_hidden=4096, vocab=2)
    m, p = 6, 4
    j = TrainingJob(model=shape, gpus=p, pp=p, global_batch=m, seq_len=1024, efficiency=0.45)
    g = j.iteration_graph("layer")
    passes, step0 = passes_and_step(g)
    # stage 0 ends last; its optimizer step follows its last backward
    assert g.critical_path_s() - step0 == pytest.approx((m + p - 1) * passes[0] / m, rel=1e-4)


def test_dp_buckets_overlap_with_backward():
    # DDP (Li et al., VLDB 2020): bucket k starts when its layers' backward is done, not after the pass.
    j = TrainingJob(model="llama3-8b", gpus=8, dp=8, global_batch=16, bucket_bytes=25 * 2**20)
    g = j.iteration_graph("layer")
    buckets = [t for t in g.tasks if t.group == "dp"]
    bwd_last = [t.id for t in g.tasks if t.kind == TaskKind.COMPUTE and t.phase == "bwd"
                and t.micro_batch == j.micro_batches - 1]
    assert len(buckets) >= 32  # every Llama-3 8B layer is > 25 MiB of BF16 gradients
    first_dep = max(d for d in buckets[0].deps if g.tasks[d].kind == TaskKind.COMPUTE)
    assert first_dep == bwd_last[0] < bwd_last[-1]
    # buckets are chained: each waits for the previous one
    for prev, cur in itertools.pairwise(buckets):
        assert prev.id in cur.deps
    # the overlap shortens the iteration against syncing after the whole backward
    t_comm = 1e-3
    overlapped = g.critical_path_s(lambda t: t_comm)
    total_comm = t_comm * len(buckets)
    assert overlapped < g.critical_path_s() + total_comm - 0.5 * total_comm


def test_bucket_cap_groups_small_layers():
    # layers of ~2.1 MB with a 4.4 MiB cap: a bucket closes after the layer that reaches the cap
    shape = ModelShape(name="s", layers=16, hidden=256, heads=8, ffn_hidden=1024, vocab=1000)
    cap = int(4.4 * 2**20)
    j = TrainingJob(model=shape, gpus=2, dp=2, global_batch=2, bucket_bytes=cap)
    dp = [t for t in j.iteration_graph("layer").tasks if t.group == "dp"]
    layer_bytes = shape.layer_params(0) * A
    assert 2 * layer_bytes < cap < 3 * layer_bytes
    head = shape.head_params() * A
    assert head + 2 * layer_bytes >= cap
    assert dp[0].collectives[0].size_bytes == pytest.approx(head + 2 * layer_bytes)  # last 2 layers + head
    assert dp[1].collectives[0].size_bytes == pytest.approx(3 * layer_bytes)
    assert len(dp) == 6  # 2 + 3 + 3 + 3 + 3 + (2 layers + embedding)
    assert sum(t.collectives[0].size_bytes for t in dp) == pytest.approx(shape.num_params() * A)


def test_zero3_moves_one_and_a_half_times_dp_traffic():
    # Rajbhandari et al. SC'20, section 7.2: DP moves 2 Psi per rank (AllReduce), ZeRO-3 3 Psi
    # (AllGather forward, AllGather backward, ReduceScatter); here with one micro-batch.
    def wire(job):
        g = job.iteration_graph("stage")
        return sum(t.count * c.size_bytes * busbw_factor(c.op, c.n) for t in g.tasks for c in t.collectives)

    base = dict(model="llama3-8b", gpus=8, global_batch=8)
    plain = wire(TrainingJob(**base))
    assert wire(TrainingJob(**base, zero_stage=3)) == pytest.approx(1.5 * plain, rel=1e-12)
    assert wire(TrainingJob(**base, zero_stage=1)) == pytest.approx(plain, rel=1e-12)


def test_zero3_gathers_every_micro_batch_and_prefetches():
    j = TrainingJob(model="llama3-8b", gpus=4, zero_stage=3, global_batch=12)  # m = 3
    g = j.iteration_graph("layer")
    vol = g.bytes_by_group()
    psi = j.model.num_params()
    assert vol["zero"] == pytest.approx(2 * 3 * psi * A)
    assert vol["dp"] == pytest.approx(3 * psi * A)
    ags = [t for t in g.tasks if t.group == "zero" and t.micro_batch == 0 and t.phase == "fwd"]
    comp = [t for t in g.tasks if t.kind == TaskKind.COMPUTE and t.micro_batch == 0 and t.phase == "fwd"]
    # the gather of layer 2 does not wait for the compute of layer 1 (one-layer prefetch)
    assert comp[1].id not in _ancestors(g, ags[2].id)
    assert ags[2].id in comp[2].deps


def test_expert_alltoall_volume_closed_form():
    # GShard / DeepSpeed-MoE: per MoE layer and micro-batch, dispatch + combine forward and backward;
    # each rank sends tokens * top_k * h * 2 bytes; summed over the dp/ep EP-group columns of a stage.
    j = TrainingJob(model="mixtral-8x7b", gpus=16, tp=2, ep=4, global_batch=16, seq_len=4096)
    m = j.model
    vol = j.iteration_graph("stage").bytes_by_group()
    b, s = 1, 4096
    expected = 4 * m.num_moe_layers * j.micro_batches * (j.dp // j.ep) * j.tp * (b * s / j.tp) * m.top_k \
        * m.hidden * A
    assert vol["ep"] == pytest.approx(expected, rel=1e-12)


def test_expert_gradients_reduce_over_expert_data_parallel_group():
    j = TrainingJob(model="mixtral-8x7b", gpus=16, ep=4, global_batch=16)
    dp_tasks = [t for t in j.iteration_graph("stage").tasks if t.group == "dp"]
    sizes = {c.n for t in dp_tasks for c in t.collectives}
    assert sizes == {16, 4}  # dense over all dp ranks, experts over dp / ep
    assert j.iteration_graph().bytes_by_group()["dp"] == pytest.approx(j.model.num_params() * A)


def test_context_parallel_ring_volume():
    # Ring attention: forward AllGather of K,V, backward AllGather + ReduceScatter (dK, dV), per layer.
    j = TrainingJob(model="llama3-8b", gpus=8, tp=2, cp=4, global_batch=1, seq_len=32768)
    m = j.model
    vol = j.iteration_graph("stage").bytes_by_group()
    kv = 32768 * m.kv_heads * (m.head_dim + m.v_head_dim) / j.tp * A
    assert vol["cp"] == pytest.approx(3 * m.layers * kv * j.dp * j.tp, rel=1e-12)
    # TP buffers hold the sequence shard s / cp
    assert vol["tp"] == pytest.approx(4 * m.layers * (32768 / 4) * m.hidden * A * j.cp, rel=1e-12)


def test_graph_dependencies_point_backwards_and_reach_the_end():
    g = TrainingJob(**CONFIGS[0]).iteration_graph("layer")
    arr = g.arrays()
    assert np.all(arr["dep_indices"] < np.repeat(np.arange(len(g)), np.diff(arr["dep_indptr"])))
    assert len(_ancestors(g, len(g) - 1)) == len(g) - 1  # the last task joins everything


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(gpus=30, tp=4, pp=2, dp=4), "parallelism"),
        (dict(gpus=32, tp=3), "parallelism"),
        (dict(gpus=48, tp=48), "tp"),
        (dict(gpus=8, ep=2), "ep"),
        (dict(gpus=8, zero_stage=4), "zero_stage"),
        (dict(gpus=8, efficiency=0.0), "efficiency"),
        (dict(gpus=8, global_batch=12), "global_batch"),
        (dict(gpus=8, cp=3, dp=1, tp=1, pp=1), "parallelism"),
        (dict(gpus=0), "gpus"),
        (dict(gpus=8, param_bytes=0), "param_bytes"),
        (dict(gpus=8, grad_accumulation="fp16"), "grad_accumulation"),
    ],
)
def test_bad_training_spec_names_the_field(kw, field):
    with pytest.raises(ConfigError, match=rf"\({field}\)"):
        TrainingJob(model="llama3-8b", **kw)


def test_ep_must_divide_dp():
    with pytest.raises(ConfigError, match=r"ep must divide dp=2.*\(ep\)"):
        TrainingJob(model="mixtral-8x7b", gpus=8, tp=4, ep=4)


def test_unknown_model_in_job_is_reported():
    with pytest.raises(UnknownNameError, match="model"):
        TrainingJob(model="llama-9000", gpus=8)


def test_tp_groups_stay_inside_servers():
    j = TrainingJob(model="llama3-70b", gpus=32, tp=4, pp=2, dp=4)
    rng = np.random.default_rng(3)
    servers = [1, 4, 6, 9]  # four whole 8-GPU servers, given in a shuffled order
    gpus = rng.permutation(np.concatenate([np.arange(s * 8, s * 8 + 8) for s in servers]))
    mp = rank_to_gpu(j, gpus, 8)
    assert sorted(mp.tolist()) == sorted(gpus.tolist())
    for group in j.rank_grid().reshape(-1, j.tp):
        assert len({int(mp[r]) // 8 for r in group}) == 1
    # Megatron order: PP outermost, so each pipeline stage (16 ranks) fills two whole servers
    assert len({int(g) // 8 for g in mp[:16]}) == 2


def test_fragmented_placement_keeps_whole_tp_groups_in_servers():
    j = TrainingJob(model="llama3-8b", gpus=8, tp=2)
    gpus = [0, 1, 2, 8, 9, 10, 16, 17]  # servers get 3, 3, 2 GPUs
    mp = rank_to_gpu(j, gpus, 8)
    servers = (mp // 8).reshape(-1, 2)
    assert sum(len(set(row)) == 1 for row in servers.tolist()) == 3  # 3 of 4 intra-server: the best possible


def test_rank_to_gpu_rejects_wrong_count_and_duplicates():
    j = TrainingJob(model="llama3-8b", gpus=4, tp=2)
    with pytest.raises(ConfigError, match=r"needs 4 GPUs, got 3 \(gpus\)"):
        rank_to_gpu(j, [0, 1, 2], 8)
    with pytest.raises(ConfigError, match="distinct"):
        rank_to_gpu(j, [0, 1, 1, 2], 8)


def test_estimate_iteration_is_at_least_compute_and_uses_nvlink_for_tp():
    j = TrainingJob(model="llama3-8b", gpus=8, tp=8, global_batch=2)
    g = j.iteration_graph()
    compute = g.critical_path_s()
    est = j.estimate_iteration_s(8)
    tp_bytes = g.bytes_by_group()["tp"]  # one TP group: all calls serial
    bw = j.gpu.scaleup_bytes_per_s
    assert est == pytest.approx(compute + tp_bytes * busbw_factor(Op.ALLREDUCE, 8) / bw, rel=1e-9)


def test_job_from_mapping_flattens_parallelism_and_names_bad_keys():
    from flowherd.workload import training_job_from_mapping

    j = training_job_from_mapping({"name": "a", "model": "llama3-8b", "gpus": 16,
                                   "parallelism": {"tp": 8, "pp": 1, "dp": 2}, "global_batch": 32})
    assert (j.tp, j.pp, j.dp, j.micro_batches) == (8, 1, 2, 16)
    with pytest.raises(ConfigError, match=r"did you mean 'seq_len'.*\(job\.seqlen\)"):
        training_job_from_mapping({"model": "llama3-8b", "gpus": 8, "seqlen": 10})
    with pytest.raises(ConfigError, match=r"\(job\.parallelism\.zz\)"):
        training_job_from_mapping({"model": "llama3-8b", "gpus": 8, "parallelism": {"zz": 2}})
    with pytest.raises(ConfigError, match=r"\(parallelism\)"):
        training_job_from_mapping({"model": "llama3-8b", "gpus": 16, "parallelism": {"tp": 8, "dp": 4}})


def test_single_bucket_syncs_after_the_whole_backward():
    # bucket_bytes = inf: iteration = compute + one AllReduce (the "compute plus ring AllReduce" baseline)
    j = TrainingJob(model="llama3-8b", gpus=8, global_batch=16, bucket_bytes=float("inf"))
    g = j.iteration_graph("layer")
    (ar,) = [t for t in g.tasks if t.group == "dp"]
    assert ar.collectives[0].size_bytes == pytest.approx(j.model.num_params() * A)
    t_ar = 0.05
    assert g.critical_path_s(lambda t: t_ar) == pytest.approx(g.critical_path_s() + t_ar)


_MOE = ModelShape(name="moe", layers=7, hidden=256, heads=8, kv_heads=2, ffn_hidden=512, vocab=1000,
                  experts=8, top_k=2, first_dense_layers=1, moe_every=2)


def test_any_valid_spec_keeps_bytes_and_flops_across_granularities():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None)
    @given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 3, 7]), cp=st.sampled_from([1, 2]),
           dp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4]), zero=st.integers(0, 3),
           sp=st.booleans(), rc=st.booleans(), m=st.integers(1, 5),
           bucket=st.sampled_from([1e5, 1e6, float("inf")]), v=st.sampled_from([1, 2]))
    def check(tp, pp, cp, dp, ep, zero, sp, rc, m, bucket, v):
        if dp % ep or (v > 1 and (pp == 1 or pp * v > _MOE.layers or m < pp)):
            return
        j = TrainingJob(model=_MOE, gpus=tp * pp * cp * dp, tp=tp, pp=pp, cp=cp, dp=dp, ep=ep,
                        zero_stage=zero, sequence_parallel=sp, activation_recompute=rc,
                        global_batch=m * dp, seq_len=256, bucket_bytes=bucket, efficiency=0.45,
                        virtual_stages=v)
        fine, coarse = j.iteration_graph("layer"), j.iteration_graph("stage")
        a, b = fine.bytes_by_group_op(), coarse.bytes_by_group_op()
        assert a.keys() == b.keys()
        for k in a:
            assert b[k] == pytest.approx(a[k], rel=1e-9)
        flops = sum(t.duration_s * j.gpu.peak_bf16_flops * j.efficiency * len(coarse.stage_ranks[t.stage])
                    for t in coarse.tasks if t.kind == TaskKind.COMPUTE and t.phase != "step")
        assert flops == pytest.approx(j.iteration_flops(), rel=1e-9)
        # per-layer cutting exposes more overlap, never less
        assert fine.critical_path_s() <= coarse.critical_path_s() * (1 + 1e-9)

    check()


def test_scenario_attention_key_reaches_the_job_and_slows_its_layers():
    # a job's YAML may say which attention kernels the run used (flash by default)
    from flowherd.experiments.scenario import scenario_from_mapping

    def job(extra):
        sc = scenario_from_mapping({
            "name": "a", "fabric": {"kind": "leaf-spine", "servers": 1, "gpus_per_server": 8, "gpu": "a100",
                       "leaves": 1, "spines": 1},
            "workload": {"jobs": [{"name": "j", "model": "llama3-8b", "gpus": 8, "parallelism": {"tp": 8},
                                   "global_batch": 2, "seq_len": 4096, **extra}]}})
        return sc.jobs[0]

    flash, unfused = job({}), job({"attention": "unfused"})
    assert (flash.attention, unfused.attention) == ("flash", "unfused")
    assert unfused.iteration_graph().compute_s_by_stage()[0] > flash.iteration_graph().compute_s_by_stage()[0]
    with pytest.raises(ConfigError, match="attention"):
        job({"attention": "sdpa"})
