"""Compute model: the time of every kernel of a transformer layer on one GPU.

This module lists a layer's ops and times them (`layer_ops`, `head_ops`); the time of one kernel
and the constants fitted per GPU type (`KernelModel`) are `flowherd.workload.kernel_times`', which
this module re-exports. What follows describes both.

Each op of a layer's forward and backward pass on one rank is timed as a roofline plus a fixed cost::

    time = max(flops / (peak * efficiency), bytes / (hbm_bytes_per_s * hbm_fraction)) + overhead_s

* **GEMMs** (the projections the model shape implies: QKV, attention output, MLP up/gate and down,
  router, experts, logits). ``efficiency = gemm_peak_fraction * k / (k + gemm_k_half)``: the
  achieved fraction of the peak rises with the reduction dimension ``k`` (the prologue/epilogue of
  every output tile is amortized over ``k``) towards a plateau; ``overhead_s`` is the fixed cost of
  one GEMM kernel (ramp-up, tail, launch). Backward of ``Y[m, n] = X[m, k] W[k, n]`` is the data
  gradient ``(m, k, n)`` and the weight gradient ``(k, n, m)``.
* **Attention core** (flash attention: ``Q K^T``, softmax, ``P V`` fused): FLOPs of the model's
  count (`ModelShape.attention_score_flops`) halved for the causal mask (flash attention skips
  the masked blocks), at ``attention_fwd_fraction`` / ``attention_bwd_fraction`` of the peak
  times ``s / (s + attention_seq_half)``.
* **Unfused attention** (``attention="unfused"``: Megatron-LM before flash attention, as in
  Korthikanti et al. 2022 and BLOOM): two batched GEMMs per head, ``Q K^T`` (``k`` = head dim)
  and ``P V`` (``k`` = sequence), over the full ``s x s`` scores (no causal skipping), and the
  score matrix through memory: written by ``Q K^T``, read and written by the fused scale-mask-
  softmax, read and written by the attention dropout (plus its 1-byte mask), read by ``P V``
  (13 bytes per score in BF16; the backward moves twice that). A model with neither rotary nor
  learned positions runs ALiBi, which Megatron-DeepSpeed (BLOOM) adds as the ``input`` of
  ``torch.baddbmm(alibi, Q, K^T, beta=1.0)`` (bigscience-workshop/Megatron-DeepSpeed,
  megatron/model/transformer.py, ``ParallelAttention.forward``): the ``[b * heads, 1, s]`` bias is
  broadcast into the full score tensor before the GEMM, which then reads it back as its ``C``
  operand (cuBLAS: ``C = alpha A B + beta C`` in place), 4 more bytes per score in the forward
  (the bias needs no gradient).
* **Triton flash attention** (``attention="triton"``: FlashAttention in Triton, MosaicML MPT's
  ``attn_impl: triton``): the FlashAttention-2 fractions over 1.4 (forward) and 2 (backward).
* **FlashAttention-2** (``attention="flash2"``: PyTorch SDPA's flash backend, FlashAttention-2 up to
  torch 2.6, as eager FSDP stacks such as IBM's fms-fsdp run it): FlashAttention-2's fractions, the
  ``flash`` ones on GPUs whose ``flash`` constants are FlashAttention-2's (A100).
* **cuDNN fused attention** (``attention="cudnn"``: Transformer Engine's ``FusedAttention``, cuDNN's
  ``F16_arbitrary_seqlen`` flash kernel, which TE selects over FlashAttention on Hopper:
  ``get_attention_backend``, "Disabling FlashAttention to give FusedAttention preference on Hopper+
  for performance reasons", transformer_engine/pytorch/attention.py, NVIDIA/TransformerEngine
  commit 001b736048c5; what NeMo / Megatron-Core runs on H100): the ``cudnn_*`` constants; a GPU
  without them runs FlashAttention-2's (TE's choice before Hopper).
* **Weight casts** (``param_bytes`` 4: FP32 weights under autocast): per forward every weight
  matrix is read in FP32 and written in BF16, per backward its gradient the other way round.
* **Elementwise and norm** kernels (RMSNorm/LayerNorm, residual adds, rotary embedding, the MLP
  activation, the loss): bytes read and written at ``hbm_fraction`` of the HBM bandwidth.
* **Optimizer step** (`optimizer_step_s`): Adam is memory-bound over the rank's shard of
  parameters, gradients and optimizer states.
* **Gradient bookkeeping** per micro-batch: PyTorch FSDP's cast and pre-division of every unsharded
  gradient (`fsdp_grad_prep_s`) and DeepSpeed BF16_Optimizer's FP32 accumulation
  (`grad_accumulation_s`), memory-bound.

Fitted constants and their measurements:

* H100 SXM GEMMs: fitted (least squares on log throughput, three free parameters) to the BF16
  measurements of OpenXLA's default matmul performance table for ``sm_90``
  (``xla/service/gpu/model/matmul_interpolator_data.h``, tensorflow/tensorflow commit
  372d578bb861cc5804e56d37d93aec931a59762c, Apache-2.0) restricted to training-sized shapes
  (``batch * m >= 1024``, ``n, k >= 512``; 15 shapes up to 4096 x 4096 x 4096 = 783 TFLOP/s), plus
  the Maximum Achievable Matmul FLOPS of H100 SXM, 794.5 TFLOP/s at 2048 x 2048 x 13312 (S. Bekman,
  "Machine Learning Engineering", compute/accelerator/README.md, MAMF table, torch 2.7). The
  plateau is bounded by that MAMF (0.8033 of the peak): MAMF is the best of a search over shapes,
  so no GEMM may be modelled faster (an unbounded fit put 12288 x 4096 x 16384 at 832 TFLOP/s).
  Every fitted shape is reproduced within 8% (``tests/workload/test_compute.py``).
* A100 SXM GEMMs: an earlier fit of the same form (``k`` half-point 85, kernel cost 6.52 us) with
  the plateau fitted to the A100 measurements (all at the plateau): MAMF 271.2 TFLOP/s at
  1024 x 10240 x 5120 (torch 2.6) and 267.9 at 6912 x 16384 x 2048 (CUDA 12.1; same source) and
  cuBLAS 238.8 TFLOP/s at 4096^3 FP16 with FP32 accumulation (DefTruth/CUDA-Learn-Notes, hgemm
  README); no shape exceeds the A100 MAMF.
* Flash attention: FlashAttention-2 (Dao, ICLR 2024) forward + backward, causal, head dim 128,
  measured by sequence length 512-16k (the paper's figures 4 and 7, also in Dao-AILab/flash-attention
  ``assets/flash2_a100_fwd_bwd_benchmark.png`` and ``flash2_h100_fwd_bwd_benchmark.png``, panel d):
  A100 99, 133, 155, 173, 182, 189 TFLOP/s; H100 163, 221, 265, 294, 308, 328 (FLOPs counted as
  that benchmark does: forward ``4 b s^2 a d / 2``, backward 2.5x it). Fitted (least squares on the
  log, two parameters per GPU, every point within 2%) as ``fraction * s / (s + seq_half)`` with the
  forward / backward split of the A100 constants (0.60 / 0.50 of the peak per flowherd's FLOPs,
  backward = 2x forward): A100 fractions 0.60 / 0.50, ``attention_seq_half`` 485; H100 (the
  ``fa2_*`` constants) 0.3275 / 0.2729, ``fa2_seq_half`` 532.
* FlashAttention-3 (the H100 ``flash`` kernel) and cuDNN (``cudnn``): FlashAttention-3 (Shah et al.,
  NeurIPS 2024, arXiv:2407.08608) figure 5, "Attention forward speed, head dim 128 (H100 80GB
  SXM5)", causal panel, and figure 6, "Attention backward speed, head dim 128", bar labels at
  512-16k tokens (`FA3_MEASURED_TFLOPS`; batch x seqlen = 16k, FLOPs counted as FlashAttention-2's
  benchmark, backward 2.5x forward): FlashAttention-3 forward 292, 423, 521, 579, 602, 616, backward
  316, 424, 501, 542, 559, 561; cuDNN forward 315, 410, 484, 518, 529, 539, backward 305, 408, 465,
  499, 518, 516 TFLOP/s. The backward panel is without the causal mask: its FlashAttention-2 bars
  (214 at 512 tokens) exceed FlashAttention-2's causal forward (191) and the causal backward that
  FlashAttention-2's own figure 7d implies (forward + backward 163 TFLOP/s at 512 tokens:
  ``2.5 / (3.5 / 163 - 1 / 191)`` = 154). The causal backward is taken as the unmasked one times
  FlashAttention-2's causal / unmasked backward ratio by length (`causal_backward_ratio`: 0.72,
  0.80, 0.87, 0.92, 0.94, 1.0; the masked diagonal blocks of a causal kernel cost alike in any
  flash kernel). Fitted per pass (least squares on the log, two parameters each, with the 2 us
  kernel cost; every point within 3%): FlashAttention-3 forward 0.6624 of the peak with half-point
  584 tokens, backward 0.4773 / 780 (per flowherd's FLOPs: the backward x 0.8); cuDNN 0.5673 / 371
  and 0.4361 / 709. (Before: the H100 ``flash`` constants were unfitted
  defaults, 0.55 / 0.45 with a 256-token half-point, and NeMo's H100 rows ran them.) (Before that:
  the H100 FlashAttention-2 fractions were the A100's scaled by FlashAttention-2's headline 335 /
  230 TFLOP/s and the ramp's half-point 256 tokens on both GPUs: the measured H100 / A100 ratio is
  1.65-1.74 by sequence, not 1.46, and both GPUs ramp slower; MPT's H100 rows at 16k tokens ran
  11.5-12.8% faster than modelled.)
* HBM: 80% of the datasheet bandwidth for streaming kernels (the level NVIDIA's STREAM-like
  ``nvbandwidth`` / BabelStream measurements reach on A100 and H100).
* Flash attention in Triton: FlashAttention-2 is "around 1.3-1.5x faster than FlashAttention in
  Triton in the forward pass and around 2x faster in the backward pass" (Dao 2023, section 4.1):
  the GPU's FlashAttention-2 fractions (above) over those factors, on FlashAttention-2's ramp.
* ``sustained_fraction``: what a training run keeps of the kernel speeds measured one kernel at a
  time (host-side gaps between kernels, clocks under sustained load), fitted per GPU type (least
  squares on the log of the throughput error) on the 8 + 8 MosaicML LLM Foundry MPT rows of
  ``benchmarks/published.py`` (1B-70B, FSDP on 8-64 GPUs, FP32 weights under autocast, Triton
  flash attention, as those runs were configured): A100 0.949, H100 0.862. The table's other rows,
  the Megatron-LM rows and BLOOM are not fitted on. (Before `comm_interference_s` the same fit gave
  0.92 / 0.86 and left the runs with much FSDP traffic per token 11-12% faster than measured and
  the long-sequence ones 8-10% slower: one constant absorbed two effects; with it and before the
  measured FlashAttention-2 ramp, 0.939 / 0.877.)
* Communication beside compute (`comm_interference_s`): NCCL's blocks hold ``nccl_channels`` of
  the ``sm_count`` SMs while a collective overlaps a kernel, through its bytes and its ring latency
  (`nccl_ring_latency_s`, which grows with the ring's steps and the servers it crosses) (no fitted
  constant: the SM counts of the whitepapers, the channels, ring bandwidth and latencies of
  flowherd's ported NCCL model). Paid by
  FSDP / ZeRO-3 layers beside their gathers and reduce-scatters, in the backward that syncs
  gradients by each DDP / ZeRO-1/2 bucket beside the previous bucket's all-reduce or
  reduce-scatter, and, with ``overlap_param_gather``, in the first forward by each bucket beside the
  next bucket's all-gather of updated weights (`flowherd.workload.pipeline`).

* FP8 GEMMs (``precision="fp8"``: Transformer Engine's FP8 linear layers, as NeMo / Megatron-Core
  run them): the GPU's dense FP8 peak (`GpuSpec.peak_fp8_flops`) with the plateau at the FP8 MAMF
  of the same table (``float8_e4m3fn``: H100 SXM 1402.6 of 1979 TFLOP/s at 1024 x 9216 x 14336,
  H200 1453.4 at k = 12032, B200 3432.5 of 4500 at k = 3072), operands of 1 byte, and the ``k``
  dependence measured by tilelang's FP8 GEMM sweep on H800 SXM (`FP8_K_HALF`: half the plateau at
  k = 458, against 29 for BF16: an FP8 GEMM needs a much longer reduction to amortize each output
  tile). The plateau is placed so that each MAMF shape is reproduced (cuBLAS's level, which
  Transformer Engine's GEMMs use; tilelang's own kernels run ~10% above it). Only the projections (QKV,
  attention output, MLP, experts) run in FP8; attention, the router and the logits stay BF16
  (Megatron-Core's output layer is not a Transformer Engine module). Each FP8 GEMM's input in the
  forward and its output gradient in the backward pass through a cast-transpose (Transformer
  Engine's ``cast_transpose``: read BF16, write the FP8 tensor and its transpose, 4 bytes per
  element; no fusion with the norm or activation assumed); the FP8 weight copies are cast once per
  iteration (Megatron's ``is_first_microbatch``) and not charged.

GPUs without measurements of their own borrow the constants of the closest part (H200: H100
compute; B200 and MI300X: H100 shape constants and sustained fraction, with their MAMF plateau,
1745 / 2250 and 781.9 / 1307 of the same MAMF table).
"""

from __future__ import annotations

from dataclasses import dataclass

from flowherd.errors import ConfigError
from flowherd.workload.attention_measurements import (
    FA2_MEASURED_TFLOPS,
    FA2_SEQ_LENS,
    FA3_MEASURED_TFLOPS,
    causal_backward_ratio,
)
from flowherd.workload.context_parallel import merge_elements
from flowherd.workload.frameworks import (
    CE_EAGER_BWD_BYTES,
    CE_EAGER_FWD_BYTES,
    CE_MEGATRON_BWD_BYTES,
    CE_MEGATRON_FWD_BYTES,
    Framework,
    eager_elementwise_bytes,
    get_framework,
    per_op_recompute_linears,
)
from flowherd.workload.gpus import GpuSpec
from flowherd.workload.kernel_times import (
    FP8_K_HALF,
    FP8_K_SWEEP,
    KERNEL_MODELS,
    OPTIMIZER_BYTES_PER_PARAM,
    KernelModel,
    attention_time_s,
    comm_interference_s,
    fp8_peak_flops,
    fsdp_grad_prep_s,
    gemm_efficiency,
    gemm_time_s,
    grad_accumulation_s,
    kernel_model,
    memory_time_s,
    nccl_ring_latency_s,
    optimizer_step_s,
)
from flowherd.workload.models import ModelShape

__all__ = [
    "ATTENTION",
    "FA2_MEASURED_TFLOPS",
    "FA2_SEQ_LENS",
    "FA3_MEASURED_TFLOPS",
    "FP8_GEMMS",
    "FP8_K_HALF",
    "FP8_K_SWEEP",
    "KERNEL_MODELS",
    "OPTIMIZER_BYTES_PER_PARAM",
    "PRECISIONS",
    "KernelModel",
    "LayerTimes",
    "OpTime",
    "attention_time_s",
    "causal_backward_ratio",
    "comm_interference_s",
    "fp8_peak_flops",
    "fsdp_grad_prep_s",
    "gemm_efficiency",
    "gemm_time_s",
    "grad_accumulation_s",
    "head_ops",
    "head_times",
    "kernel_model",
    "layer_ops",
    "layer_times",
    "memory_time_s",
    "nccl_ring_latency_s",
    "optimizer_step_s",
]


ATTENTION = ("flash", "unfused", "triton", "cudnn", "flash2")  # attention kernels of `layer_ops`
PRECISIONS = ("bf16", "fp8")  # GEMM precisions of `layer_ops` (module docstring)
FP8_GEMMS = frozenset({"qkv", "attn-out", "mlp-up", "mlp-down", "experts-up", "experts-down", "shared-up",
                       "shared-down"})  # the ops Transformer Engine runs in FP8


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimes:
    """Kernel time of one layer (or the output head) for one micro-batch on one rank, seconds.

    Attributes:
        fwd_s: Forward pass.
        bwd_s: Backward pass (without recomputation).
        attn_core_fwd_s: The forward of the attention core alone (what Megatron's selective
            recomputation repeats, Korthikanti et al. 2022 section 5).
        selective_fwd_s: What the framework's selective recomputation repeats before the backward
            (`flowherd.workload.frameworks`: the attention core, or per-op checkpointing's share).
        tp_overlap_fwd_s, tp_overlap_bwd_s: The GEMMs Transformer Engine's userbuffers overlap with
            a 16-SM reduce-scatter ("pipeline": attention output and MLP down projection, forward)
            or bulk transfer (QKV and MLP up projection, backward); `flowherd.workload.pipeline`.
        kernels: Kernels of the forward pass.
    """

    fwd_s: float
    bwd_s: float
    attn_core_fwd_s: float = 0.0
    selective_fwd_s: float = 0.0
    tp_overlap_fwd_s: float = 0.0
    tp_overlap_bwd_s: float = 0.0
    kernels: int = 0


def _gemm_fb(m: float, n: float, k: float, gpu: GpuSpec, batch: float = 1,
             precision: str = "bf16") -> tuple[float, float]:
    """Forward and backward (data + weight gradient) time of ``[m, k] x [k, n]``."""
    f = gemm_time_s(m, n, k, gpu, batch=batch, precision=precision)
    b = (gemm_time_s(m, k, n, gpu, batch=batch, precision=precision)
         + gemm_time_s(k, n, m, gpu, batch=batch, precision=precision))
    return f, b


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTime:
    """One op of a layer for one micro-batch on one rank, in isolation (no ``sustained_fraction``).

    Attributes:
        name: "qkv", "attn-out", "attention", "mlp-up", "mlp-down", "router", "experts-up",
            "experts-down", "shared-up", "shared-down", "elementwise", "cp-merge", "fp8-cast", "weight-cast",
            "logits", "cross-entropy".
        flops: Forward FLOPs executed (the attention core: half the model's count, flash attention
            skipping the blocks the causal mask hides).
        fwd_s, bwd_s: Forward and backward kernel time, seconds.
        kernels: Kernels of the forward.
    """

    name: str
    flops: float
    fwd_s: float
    bwd_s: float
    kernels: int = 1


def _gemm_op(name: str, m: float, n: float, k: float, gpu: GpuSpec, batch: float = 1,
             precision: str = "bf16") -> OpTime:
    f, b = _gemm_fb(m, n, k, gpu, batch, precision if name in FP8_GEMMS else "bf16")
    return OpTime(name=name, flops=2.0 * batch * m * n * k, fwd_s=f, bwd_s=b)


def _unfused_attention(m: ModelShape, gpu: GpuSpec, *, t: float, seq_len: int, tp: int, micro_batch: int,
                       dtype_bytes: int) -> OpTime:
    """``Q K^T``, scale-mask-softmax, dropout and ``P V`` as separate kernels (module docstring)."""
    qk = m.head_dim + (m.rope_head_dim if m.kv_lora_rank else 0)
    heads = micro_batch * m.heads / tp  # (sequence, head) pairs of the rank, one GEMM each
    rows = t / micro_batch  # query rows per sequence (seq_len / cp)
    f1, b1 = _gemm_fb(rows, seq_len, qk, gpu, heads)
    f2, b2 = _gemm_fb(rows, m.v_head_dim, seq_len, gpu, heads)
    scores = heads * rows * seq_len
    sm = memory_time_s(scores * (6 * dtype_bytes + 1), gpu, kernels=2)
    alibi = not m.rotary and m.learned_positions == 0  # the bias as baddbmm's input (module docstring)
    bias = memory_time_s(scores * 2 * dtype_bytes, gpu, kernels=1) if alibi else 0.0
    flops = 2.0 * scores * (qk + m.v_head_dim)
    return OpTime(name="attention", flops=flops, fwd_s=f1 + f2 + sm + bias, bwd_s=b1 + b2 + 2.0 * sm,
                  kernels=4 + alibi)


def layer_ops(model: ModelShape, layer: int, gpu: GpuSpec, *, micro_batch: int, seq_len: int,
              tp: int = 1, cp: int = 1, ep: int = 1, sequence_parallel: bool = False,
              dtype_bytes: int = 2, attention: str = "flash", param_bytes: int | None = None,
              precision: str = "bf16", framework: str | Framework = "megatron",
              cp_ring: bool = True) -> tuple[OpTime, ...]:
    """The ops of layer ``layer`` for one micro-batch on one rank, timed in isolation.

    ``attention`` is "flash" (fused, causal blocks skipped) or "unfused" (module docstring).
    ``param_bytes`` (default ``dtype_bytes``): bytes per element of the weights the framework keeps;
    when it differs from ``dtype_bytes`` (FP32 weights under autocast) every forward casts each
    weight matrix to the compute dtype and every backward casts its gradient back ("weight-cast").
    ``precision`` "fp8": the projections in FP8 and their operands' cast-transposes ("fp8-cast";
    module docstring). ``framework``: a framework without fused kernels runs the norms, rotary
    embedding and activation as eager ATen kernels (`flowherd.workload.frameworks`). ``cp_ring``
    False: context parallelism by all-gather (one attention kernel over the gathered K/V, no
    ring merges).

    The rank holds ``micro_batch * seq_len / cp`` tokens; its GEMMs are Megatron's column/row
    parallel halves (``n`` or ``k`` divided by ``tp``); norms and residual adds run on ``1 / tp`` of
    the tokens with sequence parallelism and on all of them otherwise.
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r} (precision)")
    h, m = model.hidden, model
    t = micro_batch * seq_len / cp
    o_in = m.heads * m.v_head_dim
    qkv_out = (m.attention_params() - o_in * h) / h
    ops = [_gemm_op("qkv", t, qkv_out / tp, h, gpu, precision=precision)]
    if attention == "unfused":
        ops.append(_unfused_attention(m, gpu, t=t, seq_len=seq_len, tp=tp, micro_batch=micro_batch,
                                      dtype_bytes=dtype_bytes))
    elif attention in ("flash", "triton", "cudnn", "flash2"):
        core = t * m.attention_score_flops(seq_len) / tp
        ring = cp_ring and cp > 1
        extra = (cp - 1) * kernel_model(gpu).kernel_overhead_s if ring else 0.0  # a kernel per ring step
        ops.append(OpTime(name="attention", flops=0.5 * core,
                          fwd_s=attention_time_s(core, seq_len, gpu, kernel=attention) + extra,
                          bwd_s=attention_time_s(2.0 * core, seq_len, gpu, backward=True, kernel=attention)
                          + extra, kernels=cp if ring else 1))
        if ring:  # Transformer Engine's ring merges (`flowherd.workload.context_parallel`)
            qk = m.head_dim + (m.rope_head_dim if m.kv_lora_rank else 0)
            kv = m.heads if m.kv_lora_rank else m.kv_heads  # MLA materializes per-head K and V
            f_el, b_el, f_k, b_k = merge_elements(tokens=t, cp=cp, heads=m.heads / tp, kv_heads=kv / tp,
                                                  qk_dim=qk, v_dim=m.v_head_dim)
            ops.append(OpTime(name="cp-merge", flops=0.0, kernels=f_k,
                              fwd_s=memory_time_s(3 * f_el * dtype_bytes, gpu, kernels=f_k),
                              bwd_s=memory_time_s(3 * b_el * dtype_bytes, gpu, kernels=b_k)))
    else:
        raise ConfigError(f"attention must be one of {', '.join(ATTENTION)}, got {attention!r} (attention)")
    ops.append(_gemm_op("attn-out", t, h, o_in / tp, gpu, precision=precision))
    up = m.mlp_matrices - 1
    if m.layer_is_moe(layer):
        ffn = m.moe_ffn_hidden
        ops.append(_gemm_op("router", t, m.experts, h, gpu))  # replicated over TP ranks, BF16
        local = m.experts // ep
        per_expert = t * ep * m.top_k / m.experts  # token-expert pairs of one local expert
        fp8 = {"precision": precision}
        ops.append(_gemm_op("experts-up", per_expert, up * ffn / tp, h, gpu, batch=local, **fp8))
        ops.append(_gemm_op("experts-down", per_expert, h, ffn / tp, gpu, batch=local, **fp8))
        if m.shared_experts:
            ops.append(_gemm_op("shared-up", t, up * ffn * m.shared_experts / tp, h, gpu, **fp8))
            ops.append(_gemm_op("shared-down", t, h, ffn * m.shared_experts / tp, gpu, **fp8))
        act_width = (m.top_k + m.shared_experts) * ffn / tp
        permute = 2 * 2 * m.top_k * h  # dispatch and combine permutations read and write a row each
    else:
        ffn = m.ffn_hidden
        ops.append(_gemm_op("mlp-up", t, up * ffn / tp, h, gpu, precision=precision))
        ops.append(_gemm_op("mlp-down", t, h, ffn / tp, gpu, precision=precision))
        act_width = ffn / tp
        permute = 0
    # elements read + written per token: 2 norms (2h each), 2 residual adds (3h each), rotary on
    # the local Q and K heads, the activation (gated: reads 2 widths, writes 1; GELU: 1 and 1)
    tok_sp = t / tp if sequence_parallel else t
    if get_framework(framework).fused_kernels:
        rope = 2 * (m.heads + m.kv_heads) * m.head_dim / tp if m.rotary else 0.0
        elems = tok_sp * 10 * h + t * (rope + (up + 1) * act_width + permute)
        ew_bytes, ew_kernels = elems * dtype_bytes, 5
    else:
        ew_bytes, ew_kernels = eager_elementwise_bytes(m, tokens=t, tokens_sp=tok_sp, tp=tp,
                                                       act_width=act_width, up=up, permute=permute,
                                                       dtype_bytes=dtype_bytes)
    ew_f = memory_time_s(ew_bytes, gpu, kernels=ew_kernels)
    ops.append(OpTime(name="elementwise", flops=0.0, fwd_s=ew_f, bwd_s=2.0 * ew_f, kernels=ew_kernels))
    if precision == "fp8":
        # Transformer Engine casts each FP8 GEMM's input (forward) and output gradient (backward):
        # read BF16, write FP8 and its transpose, 4 bytes per element, one kernel per GEMM
        rows = t * (m.top_k + m.shared_experts) if m.layer_is_moe(layer) else t  # MLP / expert rows
        k_in = t * (h + o_in / tp) + rows * (h + ffn / tp)
        n_out = t * (qkv_out / tp + h) + rows * (up * ffn / tp + h)
        n_fp8 = sum(o.name in FP8_GEMMS for o in ops)
        ops.append(OpTime(name="fp8-cast", flops=0.0, fwd_s=memory_time_s(4.0 * k_in, gpu, kernels=n_fp8),
                          bwd_s=memory_time_s(4.0 * n_out, gpu, kernels=n_fp8), kernels=n_fp8))
    if param_bytes is not None and param_bytes != dtype_bytes:
        # autocast (torch.amp) casts each FP32 weight once per forward (read 4, write 2 bytes per
        # element; its cast cache lives for one forward) and autograd's cast backward turns the
        # weight gradient back to FP32 (read 2, write 4); one kernel per weight matrix
        weights = m.layer_dense_params(layer) / tp + m.layer_expert_params(layer) / (tp * ep)
        n_w = sum(o.name not in ("attention", "elementwise", "fp8-cast", "cp-merge") for o in ops)
        cast = memory_time_s(weights * (param_bytes + dtype_bytes), gpu, kernels=n_w)
        ops.append(OpTime(name="weight-cast", flops=0.0, fwd_s=cast, bwd_s=cast, kernels=n_w))
    return tuple(ops)


def layer_times(model: ModelShape, layer: int, gpu: GpuSpec, *, micro_batch: int, seq_len: int,
                tp: int = 1, cp: int = 1, ep: int = 1, sequence_parallel: bool = False,
                dtype_bytes: int = 2, attention: str = "flash", param_bytes: int | None = None,
                precision: str = "bf16", framework: str | Framework = "megatron",
                cp_ring: bool = True) -> LayerTimes:
    """Kernel times of layer ``layer`` for one micro-batch on one rank: the sum of its
    `layer_ops` over the GPU's ``sustained_fraction`` (module docstring); ``selective_fwd_s`` what
    the framework's selective recomputation repeats (`flowherd.workload.frameworks`)."""
    fw = get_framework(framework)
    ops = layer_ops(model, layer, gpu, micro_batch=micro_batch, seq_len=seq_len, tp=tp, cp=cp, ep=ep,
                    sequence_parallel=sequence_parallel, dtype_bytes=dtype_bytes, attention=attention,
                    param_bytes=param_bytes, precision=precision, framework=fw, cp_ring=cp_ring)
    k = 1.0 / kernel_model(gpu).sustained_fraction
    core = next(o.fwd_s for o in ops if o.name == "attention")
    if fw.selective == "per-op":  # every other matmul and every kernel whose output is not saved
        share = per_op_recompute_linears(model, model.layer_is_moe(layer))
        again = sum(o.fwd_s * share.get(o.name, 0.0) for o in ops)
        again += sum(o.fwd_s for o in ops if o.name in ("elementwise", "fp8-cast", "weight-cast", "cp-merge"))
    else:
        again = core
    ub_fwd = sum(o.fwd_s for o in ops if o.name in ("attn-out", "mlp-down", "shared-down"))
    ub_bwd = sum(o.bwd_s for o in ops if o.name in ("qkv", "mlp-up", "shared-up"))
    return LayerTimes(fwd_s=sum(o.fwd_s for o in ops) * k, bwd_s=sum(o.bwd_s for o in ops) * k,
                      attn_core_fwd_s=core * k, selective_fwd_s=again * k, tp_overlap_fwd_s=ub_fwd * k,
                      tp_overlap_bwd_s=ub_bwd * k, kernels=sum(o.kernels for o in ops))


def head_ops(model: ModelShape, gpu: GpuSpec, *, micro_batch: int, seq_len: int, tp: int = 1,
             cp: int = 1, dtype_bytes: int = 2, param_bytes: int | None = None,
             framework: str | Framework = "megatron") -> tuple[OpTime, ...]:
    """The output projection and vocabulary-parallel cross-entropy, timed in isolation
    (``param_bytes``: the weight cast of `layer_ops`, here of the output matrix; ``framework``
    without fused kernels: eager ``cross_entropy`` over an FP32 copy of the logits)."""
    t = micro_batch * seq_len / cp
    logits = _gemm_op("logits", t, model.vocab / tp, model.hidden, gpu)
    n = t * model.vocab / tp
    if get_framework(framework).fused_kernels:  # Megatron's passes over FP32 logits
        ce_op = OpTime(name="cross-entropy", flops=0.0, kernels=6,
                       fwd_s=memory_time_s(CE_MEGATRON_FWD_BYTES * n, gpu, kernels=6),
                       bwd_s=memory_time_s(CE_MEGATRON_BWD_BYTES * n, gpu, kernels=2))
    else:
        ce_op = OpTime(name="cross-entropy", flops=0.0, kernels=3,
                       fwd_s=memory_time_s(CE_EAGER_FWD_BYTES * n, gpu, kernels=3),
                       bwd_s=memory_time_s(CE_EAGER_BWD_BYTES * n, gpu, kernels=3))
    ops = (logits, ce_op)
    if param_bytes is not None and param_bytes != dtype_bytes:
        cast = memory_time_s(model.vocab * model.hidden / tp * (param_bytes + dtype_bytes), gpu)
        ops += (OpTime(name="weight-cast", flops=0.0, fwd_s=cast, bwd_s=cast),)
    return ops


def head_times(model: ModelShape, gpu: GpuSpec, *, micro_batch: int, seq_len: int, tp: int = 1,
               cp: int = 1, dtype_bytes: int = 2, param_bytes: int | None = None,
               framework: str | Framework = "megatron") -> LayerTimes:
    """Output projection and vocabulary-parallel cross-entropy for one micro-batch on one rank."""
    ops = head_ops(model, gpu, micro_batch=micro_batch, seq_len=seq_len, tp=tp, cp=cp,
                   dtype_bytes=dtype_bytes, param_bytes=param_bytes, framework=framework)
    k = 1.0 / kernel_model(gpu).sustained_fraction
    return LayerTimes(fwd_s=sum(o.fwd_s for o in ops) * k, bwd_s=sum(o.bwd_s for o in ops) * k,
                      kernels=sum(o.kernels for o in ops))
