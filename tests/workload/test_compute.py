"""The compute model: cited GEMM measurements, recomputation FLOPs, optimizer step, MFU and HFU."""

from __future__ import annotations

import itertools

import pytest

from flowherd.errors import ConfigError
from flowherd.workload import GPUS, ModelShape, TaskKind, TrainingJob, get_model
from flowherd.workload import compute as cm
from flowherd.workload.gpus import get_gpu

# OpenXLA matmul_interpolator_data.h, sm_90 (H100 SXM), bf16 x bf16 -> bf16, TFLOP/s
# (tensorflow/tensorflow commit 372d578bb861cc5804e56d37d93aec931a59762c): the training-sized shapes
# (batch * m >= 1024, n, k >= 512) the H100 constants were fitted to; the last row is the MAMF of
# H100 SXM (Bekman, ml-engineering, compute/accelerator/README.md).
H100 = [(1, 4096, 512, 512, 238.8), (1, 4096, 1024, 512, 343.7), (1, 2048, 2048, 2048, 632.0),
        (1, 4096, 4096, 4096, 783.3), (1, 4096, 2048, 512, 447.0), (1, 1024, 1024, 2048, 350.0),
        (1, 1024, 512, 2048, 220.0), (1, 4096, 512, 1024, 370.8), (1, 1024, 2048, 2048, 524.3),
        (1, 2048, 512, 2048, 347.7), (1, 2048, 1024, 2048, 523.3), (2, 4096, 4096, 2048, 763.0),
        (2, 4096, 2048, 4096, 783.2), (2, 4096, 1024, 4096, 750.6), (2, 4096, 512, 4096, 729.7),
        (1, 2048, 2048, 13312, 794.5)]
# A100 SXM: MAMF (same table; torch 2.6 and CUDA 12.1 runs) and cuBLAS 4096^3 (DefTruth/CUDA-Learn-Notes)
A100 = [(1, 1024, 10240, 5120, 271.2), (1, 6912, 16384, 2048, 267.9), (1, 4096, 4096, 4096, 238.8)]


@pytest.mark.parametrize(("gpu", "rows"), [("h100", H100), ("a100", A100)])
def test_gemm_model_reproduces_cited_measurements_within_10_percent(gpu, rows):
    g = GPUS[gpu]
    for b, m, n, k, tflops in rows:
        got = 2 * b * m * n * k / cm.gemm_time_s(m, n, k, g, batch=b) / 1e12
        assert got == pytest.approx(tflops, rel=0.10), (b, m, n, k)


def test_gemm_is_memory_bound_when_thin():
    g = GPUS["h100"]
    m, n, k = 65536, 64, 64  # arithmetic intensity far below the ridge point
    t = cm.gemm_time_s(m, n, k, g)
    assert t == pytest.approx(2 * (m * k + k * n + m * n) / g.memory_bytes_per_s
                              + cm.kernel_model(g).gemm_overhead_s, rel=1e-12)


def test_optimizer_step_time_is_bytes_over_hbm_bandwidth():
    # Adam, mixed precision: 16 bytes read + 14 written per parameter of the rank's shard
    j = TrainingJob(model="llama3-8b", gpus=8, tp=2, dp=4, zero_stage=1, global_batch=8)
    (step,) = [t for t in j.iteration_graph().tasks if t.name == "s0/optimizer"]
    shard = j.model.num_params() / j.tp / j.dp
    assert step.duration_s == pytest.approx(shard * 30 / j.gpu.memory_bytes_per_s, rel=1e-12)
    plain = TrainingJob(model="llama3-8b", gpus=8, tp=2, dp=4, global_batch=8)
    (step0,) = [t for t in plain.iteration_graph().tasks if t.name == "s0/optimizer"]
    assert step0.duration_s == pytest.approx(4 * step.duration_s, rel=1e-12)  # unsharded states


def _compute_s(job):
    return sum(t.duration_s * len(g.stage_ranks[t.stage]) for g in [job.iteration_graph()] for t in g.tasks
               if t.kind == TaskKind.COMPUTE and t.phase in ("fwd", "bwd"))


_GPT = ModelShape(name="gpt", layers=8, hidden=2048, heads=16, ffn_hidden=8192, vocab=50000, gated_mlp=False)


@pytest.mark.parametrize("eff", [0.5, None])
def test_recomputation_adds_exactly_its_flops(eff):
    # Korthikanti et al. 2022: per iteration 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) model FLOPs;
    # full recomputation repeats each layer's forward: 96 B s l h^2 (1 + s/(6h) + V/(16 l h));
    # selective repeats the attention core forward, 4 B s^2 h per layer
    B, s, L, h, V = 8, 2048, 8, 2048, 50000
    kw = dict(model=_GPT, gpus=4, tp=2, pp=2, global_batch=B, seq_len=s, efficiency=eff)
    none, sel, full = (TrainingJob(**kw, recompute=r) for r in ("none", "selective", "full"))
    assert none.model_flops() == pytest.approx(72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h)))
    hw_full = 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    assert full.iteration_flops() == pytest.approx(hw_full)
    assert sel.iteration_flops() - none.iteration_flops() == pytest.approx(4 * B * s**2 * h * L)
    assert full.model_flops() == sel.model_flops() == none.model_flops()
    base = _compute_s(none)
    if eff is not None:  # GPU-seconds at the override rate carry exactly the added FLOPs
        rate = none.gpu.peak_bf16_flops * eff
        assert _compute_s(full) - base == pytest.approx((full.iteration_flops() - none.model_flops()) / rate)
        assert _compute_s(sel) - base == pytest.approx((sel.iteration_flops() - none.model_flops()) / rate)
    else:  # the compute model: full adds the layers' forward kernels, selective the attention core's
        lt = cm.layer_times(_GPT, 0, none.gpu, micro_batch=1, seq_len=s, tp=2)
        ranks_mb = 4 * B  # ranks x micro-batches, each running l / pp layers
        assert _compute_s(full) - base == pytest.approx(ranks_mb * (L / 2) * lt.fwd_s)
        assert _compute_s(sel) - base == pytest.approx(ranks_mb * (L / 2) * lt.attn_core_fwd_s)


def test_full_recomputation_repeats_forward_tp_collectives_selective_does_not():
    kw = dict(model=_GPT, gpus=4, tp=4, global_batch=2, seq_len=2048)
    vol = {r: TrainingJob(**kw, recompute=r).iteration_graph().bytes_by_group()["tp"]
           for r in ("none", "selective", "full")}
    assert vol["selective"] == vol["none"] and vol["full"] == pytest.approx(1.5 * vol["none"])


def test_mfu_and_hfu_divide_flops_by_time_gpus_and_peak():
    j = TrainingJob(model="llama3-8b", gpus=8, recompute="full", global_batch=16)
    t = 2.0
    assert j.mfu(t) == pytest.approx(j.model_flops() / (t * 8 * j.gpu.peak_bf16_flops))
    assert j.hfu(t) > j.mfu(t)


def test_compute_model_lands_between_attention_and_gemm_efficiency():
    # a dense layer's forward is mostly GEMMs (~ 80% of the peak on H100) and some flash attention
    # (~ 55%) and memory-bound kernels: its achieved fraction lies below the GEMM plateau
    j = TrainingJob(model="llama3-70b", gpus=8, tp=8, global_batch=1, seq_len=8192)
    m = j.model
    lt = cm.layer_times(m, 0, j.gpu, micro_batch=1, seq_len=8192, tp=8, sequence_parallel=True)
    flops = 8192 * (m.attention_matmul_flops() + m.mlp_flops(0) + m.attention_score_flops(8192) / 2) / 8
    frac = flops / lt.fwd_s / j.gpu.peak_bf16_flops
    assert 0.5 < frac < cm.kernel_model(j.gpu).gemm_peak_fraction


@pytest.mark.parametrize(("gpu", "mamf_tflops"), [("h100", 794.5), ("a100", 271.2)])
def test_no_gemm_is_modelled_faster_than_the_maximum_achievable_matmul(gpu, mamf_tflops):
    # MAMF (Bekman, ml-engineering, compute/accelerator/README.md) is the best of a search over
    # shapes: training-sized GEMMs up to 64k tokens and 64k wide may not beat it
    g = GPUS[gpu]
    sizes = [1024, 2048, 4096, 8192, 16384, 65536]
    best = max(2 * m * n * k / cm.gemm_time_s(m, n, k, g) for m in sizes for n in sizes for k in sizes)
    assert best / 1e12 <= mamf_tflops
    assert best / 1e12 >= 0.95 * mamf_tflops  # and the plateau is that level, not below it


def test_unfused_attention_moves_the_score_matrix_through_hbm():
    # Megatron-LM before flash attention: Q K^T writes the s x s scores, the fused softmax and the
    # dropout read and write them, P V reads them (13 bytes per BF16 score): at least that over
    # the HBM bandwidth, and slower than flash attention, which keeps the scores on chip
    g = GPUS["a100"]
    m = ModelShape(name="gpt-22b", layers=48, hidden=6144, heads=64, ffn_hidden=24576, vocab=51200,
                   gated_mlp=False)
    s, tp = 2048, 8
    kw = dict(micro_batch=1, seq_len=s, tp=tp)
    (unf,) = [o for o in cm.layer_ops(m, 0, g, attention="unfused", **kw) if o.name == "attention"]
    (fla,) = [o for o in cm.layer_ops(m, 0, g, **kw) if o.name == "attention"]
    scores = m.heads / tp * s * s
    assert unf.fwd_s >= 13 * scores / g.memory_bytes_per_s
    assert unf.bwd_s >= 2 * 13 * scores / g.memory_bytes_per_s
    assert unf.fwd_s > 3 * fla.fwd_s
    assert unf.flops == pytest.approx(2 * fla.flops)  # no causal skipping
    with pytest.raises(ConfigError, match=r"\(attention\)"):
        TrainingJob(model=m, gpus=8, tp=8, global_batch=1, attention="fused")


def test_unfused_alibi_broadcasts_its_bias_into_the_scores_before_q_kt():
    # Megatron-DeepSpeed (BLOOM) passes ALiBi as baddbmm's input with beta = 1: the bias is written
    # over the whole score tensor and read back by the GEMM as its C operand, 2 + 2 bytes per BF16
    # score in the forward; the bias has no gradient, so the backward is unchanged
    g = GPUS["a100"]
    shape = dict(name="bloom-like", layers=70, hidden=14336, heads=112, ffn_hidden=4 * 14336, vocab=250880,
                 gated_mlp=False)
    alibi, rope = ModelShape(**shape, rotary=False), ModelShape(**shape)
    s, tp, b = 2048, 4, 2
    kw = dict(micro_batch=b, seq_len=s, tp=tp, attention="unfused")
    (a,) = [o for o in cm.layer_ops(alibi, 0, g, **kw) if o.name == "attention"]
    (r,) = [o for o in cm.layer_ops(rope, 0, g, **kw) if o.name == "attention"]
    scores = b * alibi.heads / tp * s * s
    km = cm.kernel_model(g)
    extra = 4 * scores / (g.memory_bytes_per_s * km.hbm_fraction) + km.kernel_overhead_s
    assert a.fwd_s - r.fwd_s == pytest.approx(extra, rel=1e-9)
    assert a.bwd_s == pytest.approx(r.bwd_s)
    assert a.kernels == r.kernels + 1
    # learned positions (GPT-3) or flash attention (ALiBi inside the kernel) add nothing
    (f,) = [o for o in cm.layer_ops(alibi, 0, g, micro_batch=b, seq_len=s, tp=tp) if o.name == "attention"]
    (fr,) = [o for o in cm.layer_ops(rope, 0, g, micro_batch=b, seq_len=s, tp=tp) if o.name == "attention"]
    assert f.fwd_s == fr.fwd_s
    gpt = ModelShape(**shape, learned_positions=2048)
    (lp,) = [o for o in cm.layer_ops(gpt, 0, g, **kw) if o.name == "attention"]
    assert lp.fwd_s == r.fwd_s


def _bwd_s(job):
    return sum(t.duration_s for t in job.iteration_graph().tasks
               if t.kind == TaskKind.COMPUTE and t.phase == "bwd" and t.stage == 0)


def test_fp32_weights_under_autocast_cast_every_weight_in_each_pass():
    # torch.amp autocast over FP32 weights (Composer's FSDP mixed_precision DEFAULT): each forward
    # reads 4 and writes 2 bytes per weight element, the cast's backward reads 2 and writes 4
    g, kw = GPUS["a100"], dict(micro_batch=2, seq_len=2048, tp=2)
    base = {o.name: o for o in cm.layer_ops(_GPT, 0, g, **kw)}
    fp32 = {o.name: o for o in cm.layer_ops(_GPT, 0, g, param_bytes=4, **kw)}
    assert "weight-cast" not in base and set(fp32) - set(base) == {"weight-cast"}
    cast = fp32["weight-cast"]
    weights = _GPT.layer_dense_params(0) / 2
    assert cast.fwd_s == cast.bwd_s == pytest.approx(cm.memory_time_s(weights * 6, g, kernels=4))
    lt, lt32 = (cm.layer_times(_GPT, 0, g, param_bytes=pb, **kw) for pb in (None, 4))
    k = cm.kernel_model(g).sustained_fraction
    assert lt32.fwd_s - lt.fwd_s == pytest.approx(cast.fwd_s / k)
    assert lt32.bwd_s - lt.bwd_s == pytest.approx(cast.bwd_s / k)


def test_fsdp_gathers_parameters_in_their_own_dtype():
    kw = dict(model=_GPT, gpus=4, fsdp=True, global_batch=4, seq_len=1024)
    bf16, fp32 = (TrainingJob(**kw, param_bytes=pb).iteration_graph().bytes_by_group() for pb in (None, 4))
    assert fp32["zero"] == pytest.approx(2 * bf16["zero"])  # all-gathers of FP32 weights
    assert fp32["dp"] == pytest.approx(bf16["dp"])  # reduce-scatters stay in grad_bytes


def test_fsdp_prepares_each_gradient_before_its_reduce_scatter(monkeypatch):
    # PyTorch FSDP _post_backward_hook / _reduce_grad: cast to the reduce dtype (FP32 -> BF16: 4 + 2
    # bytes per element) and pre-divide in place (2 + 2), once per layer and micro-batch; the
    # interference of the gathers is a rule of its own (test_fsdp_layer_passes_pay_...)
    monkeypatch.setattr(cm, "comm_interference_s", lambda *a, **k: 0.0)
    kw = dict(model=_GPT, gpus=4, global_batch=8, seq_len=1024, param_bytes=4)
    z2, z3 = TrainingJob(**kw, zero_stage=2), TrainingJob(**kw, fsdp=True)
    g = z3.gpu
    per_layer = cm.fsdp_grad_prep_s(_GPT.layer_dense_params(0), g, param_bytes=4, grad_bytes=2)
    assert per_layer == pytest.approx(cm.memory_time_s(_GPT.layer_dense_params(0) * 10, g, kernels=2)
                                      / cm.kernel_model(g).sustained_fraction)
    units = [_GPT.layer_dense_params(i) for i in range(_GPT.layers)]
    units[0] += _GPT.embedding_params()  # FSDP units: the first layer holds the embedding,
    units[-1] += _GPT.head_params()  # the last the output head
    per_mb = sum(cm.fsdp_grad_prep_s(x, g, param_bytes=4, grad_bytes=2) for x in units)
    assert _bwd_s(z3) - _bwd_s(z2) == pytest.approx(z3.micro_batches * per_mb)


def test_deepspeed_bf16_optimizer_adds_every_micro_batch_gradient_into_fp32():
    # DeepSpeed pipeline engine: update_hp_grads after each backward, hp.add_(lp.to(fp32)): reads
    # 2 + 4 + 4 and writes 4 + 4 bytes per parameter of the rank (here tp 2: half a layer each)
    kw = dict(model=_GPT, gpus=4, tp=2, pp=2, global_batch=8, seq_len=1024)
    fused, buf = TrainingJob(**kw), TrainingJob(**kw, grad_accumulation="fp32-buffer")
    g = buf.gpu
    layers0 = list(buf.stage_layers(0))
    params = [_GPT.layer_dense_params(i) / 2 for i in layers0]
    params[0] += _GPT.embedding_params() / 2
    per_mb = sum(cm.grad_accumulation_s(x, g) for x in params)
    assert cm.grad_accumulation_s(1e9, g) == pytest.approx(
        cm.memory_time_s(18e9, g, kernels=2) / cm.kernel_model(g).sustained_fraction)
    assert _bwd_s(buf) - _bwd_s(fused) == pytest.approx(buf.micro_batches * per_mb)


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_flashattention2_reproduces_the_papers_measurements_by_sequence_length(gpu):
    # FlashAttention-2 (Dao, ICLR 2024) figures 4d / 7d: forward + backward, causal, head dim 128,
    # batch x seqlen = 16k tokens, 16 heads; its benchmark counts 4 b s^2 a d / 2 forward FLOPs and
    # 2.5x that backward. flowherd's count (`attention_time_s`): the unmasked forward 4 s^2 d a, halved
    # inside for the mask, backward 2x it
    g = GPUS[gpu]
    for s, tflops in zip(cm.FA2_SEQ_LENS, cm.FA2_MEASURED_TFLOPS[gpu], strict=True):
        b, a, d = 16384 // s, 16, 128
        fwd = 4 * b * s * s * a * d  # unmasked
        t = (cm.attention_time_s(fwd, s, g, kernel="flash2")
             + cm.attention_time_s(2 * fwd, s, g, backward=True, kernel="flash2"))
        assert 3.5 * fwd / 2 / t / 1e12 == pytest.approx(tflops, rel=0.03), s
    # the ramp is the measured one: 512 tokens run at about half the 16k speed on both GPUs
    assert cm.FA2_MEASURED_TFLOPS[gpu][0] / cm.FA2_MEASURED_TFLOPS[gpu][-1] < 0.55


def test_h100_over_a100_flashattention2_is_the_measured_ratio_not_the_headline():
    # the measured H100 / A100 ratio of FlashAttention-2 is 1.65-1.74 by sequence (figures 7d / 4d);
    # the headline "up to 335 vs 230 TFLOP/s" (1.46) was what the H100 constants were scaled by before
    h, a = GPUS["h100"], GPUS["a100"]
    for s in (2048, 16384):
        t_a, t_h = (cm.attention_time_s(1e12, s, g, kernel="flash2") for g in (a, h))
        ratio = t_a / t_h
        assert 1.6 < ratio < 1.8, s


@pytest.mark.parametrize("gpu", ["a100", "h100"])
def test_triton_flash_attention_runs_at_the_published_fraction_of_flashattention2(gpu):
    # Dao 2023 (FlashAttention-2), section 4.1: FA2 is 1.3-1.5x faster than FlashAttention in Triton
    # forward and ~2x backward (flowherd: 1.4 and 2.0 of FlashAttention-2's time)
    g = GPUS[gpu]
    flops, s = 1e12, 4096
    ovh = cm.kernel_model(g).kernel_overhead_s
    for backward, slow in ((False, 1.4), (True, 2.0)):
        tri = cm.attention_time_s(flops, s, g, backward=backward, kernel="triton") - ovh
        fa2 = cm.attention_time_s(flops, s, g, backward=backward, kernel="flash2") - ovh
        assert tri == pytest.approx(slow * fa2, rel=1e-12)
    kw = dict(micro_batch=1, seq_len=s, tp=1)
    tri = {o.name: o for o in cm.layer_ops(_GPT, 0, g, attention="triton", **kw)}
    fla = {o.name: o for o in cm.layer_ops(_GPT, 0, g, **kw)}
    assert tri["attention"].fwd_s > fla["attention"].fwd_s and tri["qkv"] == fla["qkv"]


def test_comm_interference_is_nccl_sm_share_of_the_overlap():
    # one CUDA block per NCCL channel (NCCL's NCCL_MAX_NCHANNELS documentation): a compute task beside
    # a collective loses channels / SMs of the overlap, the shorter of the two
    g = GPUS["h100"]
    km = cm.kernel_model(g)
    bw = g.scaleup_bytes_per_s * km.nccl_ring_fraction
    assert km.sm_count == 132 and cm.kernel_model(GPUS["a100"]).sm_count == 108  # whitepapers
    short = cm.comm_interference_s(1.0, 0.1 * bw, g)  # the collective is the shorter
    assert short == pytest.approx(km.nccl_channels / km.sm_count * 0.1, rel=1e-12)
    long_ = cm.comm_interference_s(0.05, 0.1 * bw, g)  # the compute task is
    assert long_ == pytest.approx(km.nccl_channels / km.sm_count * 0.05, rel=1e-12)
    assert cm.comm_interference_s(1.0, 0.0, g) == 0.0 == cm.comm_interference_s(0.0, 1e9, g)


@pytest.mark.parametrize("ranks,servers,allreduce", [(8, 1, False), (16, 2, False), (64, 8, False),
                                                     (48, 6, True), (2, 2, False)])
def test_ring_latency_is_nccls_tuning_model(ranks, servers, allreduce):
    # the ring / Simple latency of ncclTopoTuneModel (NCCL 2.30.7 src/graph/tuning.cc, ported in
    # flowherd.collectives.tuning) for an InfiniBand communicator: the same number, step by step
    from flowherd.collectives.ops import Op
    from flowherd.collectives.tuning import Arch, Comm, Graph, tune

    g = Graph(n_channels=16, bw_intra=20.0, bw_inter=20.0)
    comm = Comm(n_ranks=ranks, n_nodes=servers, arch=Arch.HOPPER, graphs={"ring": g, "tree": g},
                n_channels=16, local_ranks=ranks // servers)
    op = Op.ALLREDUCE if allreduce else Op.ALLGATHER
    want_us = tune(comm).latency_us[(op, "ring", "simple")]
    got = cm.nccl_ring_latency_s(ranks, servers, allreduce=allreduce)
    assert got == pytest.approx(want_us * 1e-6, rel=1e-12)


def test_ring_latency_grows_with_the_ring():
    # base 8.4 us; NVLink steps 3.4 us; network steps 14 us (tuning.cc baseLat / hwLat, ring Simple)
    assert cm.nccl_ring_latency_s(8) == pytest.approx((8.4 + 7 * 3.4) * 1e-6)
    assert cm.nccl_ring_latency_s(64, 8) == pytest.approx((8.4 + 56 * 3.4 + 7 * 14.0) * 1e-6)
    assert cm.nccl_ring_latency_s(1) == 0.0
    g = GPUS["h100"]
    km = cm.kernel_model(g)
    # a collective shorter than the compute beside it: the SMs are held through its latency too
    bw = min(g.scaleup_bytes_per_s * km.nccl_ring_fraction, 8 * g.nic_bytes_per_s * km.nccl_net_fraction)
    got = cm.comm_interference_s(1.0, 0.1 * bw, g, across_servers=True, ranks=64, servers=8, collectives=2)
    want = km.nccl_channels / km.sm_count * (0.1 + 2 * cm.nccl_ring_latency_s(64, 8))
    assert got == pytest.approx(want, rel=1e-12)
    two = cm.comm_interference_s(1.0, 0.1 * bw, g, across_servers=True, ranks=16, servers=2, collectives=2)
    assert got > two


@pytest.mark.parametrize("gpu", ["h100", "a100"])
def test_interference_constants_are_the_ported_nccl_models_ring_on_one_server(gpu):
    from flowherd.collectives import select
    from flowherd.fabric.generators import leaf_spine

    g = GPUS[gpu]
    km = cm.kernel_model(g)
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1,
                     nvlink_bandwidth_bytes_per_s=g.scaleup_bytes_per_s, gpu_type=gpu)
    size = 1e9
    s = select(fab, list(range(8)), "allgather", size)
    assert (s.algorithm, s.channels) == ("ring", km.nccl_channels)
    busbw = size * 7 / 8 / s.predicted_time_s
    assert busbw / g.scaleup_bytes_per_s == pytest.approx(km.nccl_ring_fraction, rel=0.02)


def test_fsdp_layer_passes_pay_the_interference_of_their_gathers():
    # FSDP over 8 GPUs against the same job on 1 GPU (no gathers): every layer's forward is longer by
    # exactly the interference of gathering one layer's parameters (7/8 of them sent per GPU)
    m = ModelShape(name="u", layers=4, hidden=4096, heads=32, ffn_hidden=16384, vocab=2)
    kw = dict(model=m, fsdp=True, seq_len=2048, micro_batch=1)
    one = TrainingJob(gpus=1, global_batch=1, **kw).iteration_graph()
    eight = TrainingJob(gpus=8, global_batch=8, **kw).iteration_graph()
    g = GPUS["h100"]

    def fwd(graph):
        return [t.duration_s for t in graph.tasks if t.kind == TaskKind.COMPUTE and t.phase == "fwd"]

    base, got = fwd(one), fwd(eight)
    gather = m.layer_dense_params(1) * 2 * 7 / 8
    # one all-gather on an 8-GPU ring in one server: its NCCL latency included
    assert got[1] - base[1] == pytest.approx(cm.comm_interference_s(base[1], gather, g, ranks=8), rel=1e-9)
    assert got[1] > base[1]


def test_fsdp_layers_pay_the_longer_ring_of_more_servers():
    # the same FSDP layer on 16 and 64 GPUs (2 and 8 servers): the bytes each GPU moves barely change,
    # the ring's NCCL latency grows by 6 network and 42 NVLink steps per collective, and the SMs are
    # held through it: one gather beside the forward, a gather and a reduce-scatter beside the backward
    m = ModelShape(name="u", layers=4, hidden=2048, heads=16, ffn_hidden=8192, vocab=2)
    kw = dict(model=m, fsdp=True, seq_len=2048, micro_batch=20)
    g = GPUS["h100"]
    km = cm.kernel_model(g)

    def passes(n):
        graph = TrainingJob(gpus=n, global_batch=20 * n, **kw).iteration_graph()
        return {ph: [t.duration_s for t in graph.tasks if t.kind == TaskKind.COMPUTE and t.phase == ph]
                for ph in ("fwd", "bwd")}

    small, large = passes(16), passes(64)
    gather = m.layer_dense_params(1) * 2
    lat = cm.nccl_ring_latency_s(64, 8) - cm.nccl_ring_latency_s(16, 2)
    share = km.nccl_channels / km.sm_count
    bw = min(g.scaleup_bytes_per_s * km.nccl_ring_fraction, 8 * g.nic_bytes_per_s * km.nccl_net_fraction)
    bytes_delta = gather * (63 / 64 - 15 / 16) / bw
    assert large["fwd"][1] - small["fwd"][1] == pytest.approx(share * (lat + bytes_delta), rel=1e-6)
    assert large["bwd"][1] - small["bwd"][1] == pytest.approx(share * (2 * lat + 2 * bytes_delta), rel=1e-6)


@pytest.mark.parametrize("zero", [0, 1])
def test_ddp_buckets_take_sms_from_the_backward_beside_them(zero):
    # DDP / ZeRO-1 over 8 GPUs against 1 GPU: in the syncing backward each bucket (here one layer:
    # 4096^2 * 12 * 2 bytes > 25 MiB) runs beside the bucket before it, whose gradient all-reduce
    # (2 (n-1)/n of it sent per GPU; a reduce-scatter under ZeRO-1, (n-1)/n) takes NCCL's SMs; the
    # first bucket has nothing in flight
    m = ModelShape(name="u", layers=4, hidden=4096, heads=32, ffn_hidden=16384, vocab=2)
    kw = dict(model=m, seq_len=2048, micro_batch=1, zero_stage=zero)
    one = TrainingJob(gpus=1, global_batch=1, **kw).iteration_graph()
    eight = TrainingJob(gpus=8, global_batch=8, **kw).iteration_graph()
    g = GPUS["h100"]

    def bwd(graph):
        return [t.duration_s for t in graph.tasks if t.kind == TaskKind.COMPUTE and t.phase == "bwd"]

    base, got = bwd(one), bwd(eight)
    assert len(base) == len(got) == m.layers
    assert got[0] == pytest.approx(base[0], rel=1e-12)  # the last layer (and head): no bucket before it
    sent = m.layer_dense_params(2) * 2 * (2 if zero == 0 else 1) * 7 / 8
    want = cm.comm_interference_s(base[2], sent, g, ranks=8, allreduce=zero == 0)
    assert got[2] - base[2] == pytest.approx(want, rel=1e-9)
    assert got[2] > base[2]
    fwd = [[t.duration_s for t in gr.tasks if t.kind == TaskKind.COMPUTE and t.phase == "fwd"]
           for gr in (one, eight)]
    assert fwd[0] == pytest.approx(fwd[1], rel=1e-12)  # nothing overlaps the forward under DDP


# Bekman, ml-engineering compute/accelerator/README.md, MAMF table, FP8 (float8_e4m3fn): H100 SXM
# 1402.6 TFLOP/s at 1024 x 9216 x 14336 (torch 2.7.0), H200 SXM 1453.4 at 1280 x 4096 x 12032, B200 SXM
# 3432.5 at 15360 x 4096 x 3072 (torch 2.7.1)
FP8_MAMF = [("h100", 1024, 9216, 14336, 1402.6), ("h200", 1280, 4096, 12032, 1453.4),
            ("b200", 15360, 4096, 3072, 3432.5)]


@pytest.mark.parametrize(("gpu", "m", "n", "k", "tflops"), FP8_MAMF)
def test_fp8_gemm_reproduces_the_fp8_mamf_within_10_percent(gpu, m, n, k, tflops):
    g = GPUS[gpu]
    got = 2 * m * n * k / cm.gemm_time_s(m, n, k, g, precision="fp8") / 1e12
    assert got == pytest.approx(tflops, rel=0.10)
    bf16 = 2 * m * n * k / cm.gemm_time_s(m, n, k, g) / 1e12
    assert 1.6 < got / bf16 < 2.0  # the FP8 peak is twice BF16's, its plateau a little lower


def test_fp8_needs_fp8_tensor_cores():
    with pytest.raises(ConfigError, match=r"'a100'.*\(precision\)"):
        cm.gemm_time_s(4096, 4096, 4096, GPUS["a100"], precision="fp8")
    with pytest.raises(ConfigError, match=r"\(precision\)"):
        TrainingJob(model=_GPT, gpus=8, gpu="a100", tp=8, global_batch=8, precision="fp8")
    with pytest.raises(ConfigError, match=r"\(precision\)"):
        TrainingJob(model=_GPT, gpus=8, tp=8, global_batch=8, precision="fp16")


def test_fp8_runs_the_projections_in_fp8_and_pays_their_casts():
    # Transformer Engine: QKV, attention output and MLP GEMMs in FP8; attention core and logits in
    # BF16; every FP8 GEMM's input (forward) and output gradient (backward) cast-transposed, 4 B/element
    g = GPUS["h100"]
    kw = dict(micro_batch=1, seq_len=4096, tp=1)
    bf = {o.name: o for o in cm.layer_ops(_GPT, 0, g, **kw)}
    f8 = {o.name: o for o in cm.layer_ops(_GPT, 0, g, precision="fp8", **kw)}
    for name in ("qkv", "attn-out", "mlp-up", "mlp-down"):
        assert 1.3 < bf[name].fwd_s / f8[name].fwd_s < 2.0, name  # k = 2048: below the FP8 plateau
        assert f8[name].flops == bf[name].flops
    assert f8["attention"] == bf["attention"] and f8["elementwise"] == bf["elementwise"]
    assert "fp8-cast" not in bf
    h, t, ffn = _GPT.hidden, 4096, _GPT.ffn_hidden
    o_in = _GPT.heads * _GPT.v_head_dim
    qkv_out = (_GPT.attention_params() - o_in * h) / h
    up = _GPT.mlp_matrices - 1
    assert f8["fp8-cast"].fwd_s == pytest.approx(cm.memory_time_s(4 * t * (h + o_in + h + ffn), g, kernels=4))
    assert f8["fp8-cast"].bwd_s == pytest.approx(cm.memory_time_s(4 * t * (qkv_out + h + up * ffn + h), g,
                                                                  kernels=4))
    jb = TrainingJob(model=_GPT, gpus=8, seq_len=4096, global_batch=8)
    j8 = TrainingJob(model=_GPT, gpus=8, seq_len=4096, global_batch=8, precision="fp8")
    assert j8.estimate_iteration_s() < jb.estimate_iteration_s()
    assert j8.model_flops() == jb.model_flops()  # MFU counts the same FLOPs over the BF16 peak


def test_scenario_precision_reaches_the_job_and_bad_values_name_the_field():
    from flowherd.experiments.scenario import scenario_from_mapping

    def sc(precision):
        return scenario_from_mapping({
            "fabric": {"kind": "leaf-spine", "servers": 1, "gpus_per_server": 8, "leaves": 1, "spines": 1},
            "workload": {"jobs": [{"name": "j", "model": "llama3-8b", "gpus": 8, "precision": precision,
                                   "global_batch": 8}]}})

    assert sc("fp8").jobs[0].precision == "fp8" and sc("bf16").jobs[0].precision == "bf16"
    with pytest.raises(ConfigError, match="precision"):
        sc("fp4")


def test_fp8_gemm_rises_with_k_as_the_measured_sweep():
    # tilelang's FP8 GEMM sweep on H800 SXM (H100's SM and FP8 peak), M = N = 8192: the model's
    # throughput relative to its value at K = 16384 follows the measured one within 10% (the level is
    # cuBLAS's MAMF, ~10% below tilelang's kernels: test_fp8_gemm_reproduces_the_fp8_mamf_within_10_percent)
    g = GPUS["h100"]

    def rate(k):
        return 2 * 8192 * 8192 * k / cm.gemm_time_s(8192, 8192, k, g, precision="fp8")

    k_ref, t_ref = cm.FP8_K_SWEEP[-1]
    for k, tflops in cm.FP8_K_SWEEP:
        assert rate(k) / rate(k_ref) == pytest.approx(tflops / t_ref, rel=0.10), k
    assert rate(256) / rate(16384) < 0.45  # a short reduction wastes most of an FP8 GEMM


@pytest.mark.parametrize("kernel", ["flash", "cudnn"])
def test_h100_flashattention3_and_cudnn_reproduce_the_fa3_figures(kernel):
    # FlashAttention-3 (Shah et al. 2024) figure 5 (forward, causal, head dim 128) and figure 6
    # (backward, head dim 128, no mask, times FlashAttention-2's causal / unmasked backward ratio),
    # H100 SXM5 BF16, 16k tokens per batch: the H100 "flash" kernel is FlashAttention-3, "cudnn"
    # cuDNN's fused attention; the benchmark counts 4 b s^2 a d / 2 forward FLOPs with the mask and
    # 2.5x that backward (flowherd: the unmasked count, backward 2x)
    g = GPUS["h100"]
    fwd_meas, bwd_meas = cm.FA3_MEASURED_TFLOPS[kernel]
    ratio = cm.causal_backward_ratio()
    bwd_meas = [b * r for b, r in zip(bwd_meas, ratio, strict=True)]
    for s, f_t, b_t in zip(cm.FA2_SEQ_LENS, fwd_meas, bwd_meas, strict=True):
        b, a, d = 16384 // s, 16, 128
        fwd = 4 * b * s * s * a * d
        t_f = cm.attention_time_s(fwd, s, g, kernel=kernel)
        t_b = cm.attention_time_s(2 * fwd, s, g, backward=True, kernel=kernel)
        assert fwd / 2 / t_f / 1e12 == pytest.approx(f_t, rel=0.03), s
        assert 2.5 * fwd / 2 / t_b / 1e12 == pytest.approx(b_t, rel=0.03), s
    # and the kernels differ: FlashAttention-3 pulls ahead at long sequences (figure 5)
    t16 = [cm.attention_time_s(1e12, 16384, g, kernel=k) for k in ("flash", "cudnn")]
    assert t16[0] < t16[1]


def test_fa3_backward_panel_is_unmasked_and_the_causal_ratio_follows_fa2():
    # FlashAttention-2's bars in FA3's figure 6 (214 TFLOP/s at 512 tokens) beat its causal forward
    # in figure 5 (191) and the causal backward its own figure 7d implies (2.5 / (3.5/163 - 1/191) =
    # 154): the panel has no mask. The ratio rises to 1 with the length (the masked diagonal blocks
    # weigh less)
    r = cm.causal_backward_ratio()
    assert r[0] == pytest.approx(154.0 / 214, rel=0.01)
    assert all(a < b for a, b in itertools.pairwise(r)) and r[-1] == 1.0


def test_cudnn_attention_without_a_measurement_is_flashattention2():
    # Transformer Engine prefers cuDNN's FusedAttention only on Hopper+ (get_attention_backend); A100
    # has no cuDNN measurement here and runs FlashAttention-2's constants
    g = GPUS["a100"]
    for backward in (False, True):
        assert (cm.attention_time_s(1e12, 4096, g, backward=backward, kernel="cudnn")
                == cm.attention_time_s(1e12, 4096, g, backward=backward, kernel="flash2"))


def test_context_parallel_ring_merges_cost_their_bytes():
    # Transformer Engine's AttnFuncWithCPAndKVP2P: cp ring steps, each a flash kernel whose partial
    # output is merged (flash_attn_fwd_out_correction: read the step's output, read and write the
    # result) and whose backward's dq and dk, dv are added the same way; on the slowest rank every
    # step covers all t query rows, its key/value rows t at step 0 and t / 2 after. Llama 3 8B, cp 2
    g = GPUS["h100"]
    m = TrainingJob(model="llama3-8b", gpus=2, cp=2, global_batch=2, seq_len=8192).model
    kw = dict(micro_batch=1, seq_len=8192, attention="cudnn")
    one = {o.name: o for o in cm.layer_ops(m, 0, g, cp=1, **kw)}
    two = {o.name: o for o in cm.layer_ops(m, 0, g, cp=2, **kw)}
    assert "cp-merge" not in one
    t, d = 4096, m.head_dim
    fwd_el = 2 * t * m.heads * d
    bwd_el = 2 * t * m.heads * d + (t + t / 2) * m.kv_heads * 2 * d
    assert two["cp-merge"].fwd_s == pytest.approx(cm.memory_time_s(3 * 2 * fwd_el, g, kernels=2), rel=1e-12)
    assert two["cp-merge"].bwd_s == pytest.approx(cm.memory_time_s(3 * 2 * bwd_el, g, kernels=4), rel=1e-12)
    # the attention kernels do half the FLOPs per rank at the unsplit rate, plus one launch per step
    ovh = cm.kernel_model(g).kernel_overhead_s
    assert two["attention"].flops == pytest.approx(one["attention"].flops / 2, rel=1e-12)
    assert two["attention"].fwd_s - 2 * ovh == pytest.approx((one["attention"].fwd_s - ovh) / 2, rel=1e-12)


def test_flash2_is_fa2_on_h100_and_the_flash_kernel_on_a100():
    # SDPA's flash backend is FlashAttention-2: on H100 slower than FlashAttention-3 (the "flash"
    # constants, FA3 paper figures 5-6), on A100 the same kernel as "flash" (FA2 paper figure 4)
    m = get_model("llama3-8b")

    def attn(gpu: str, kernel: str) -> float:
        ops = cm.layer_ops(m, 0, get_gpu(gpu), micro_batch=1, seq_len=4096, attention=kernel)
        return next(o.fwd_s for o in ops if o.name == "attention")

    assert attn("h100", "flash2") > 1.3 * attn("h100", "flash")
    assert attn("a100", "flash2") == pytest.approx(attn("a100", "flash"))
