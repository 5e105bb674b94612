"""The compute model: cited GEMM measurements, recomputation FLOPs, optimizer step, MFU and HFU."""

from __future__ import annotations

import pytest

from flowherd.errors import ConfigError
from flowherd.workload import GPUS, ModelShape, TaskKind, TrainingJob
from flowherd.workload import compute as cm

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
