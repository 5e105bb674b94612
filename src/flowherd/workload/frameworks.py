"""Training frameworks: what a job's framework changes in its kernels, recomputation and overlap.

The same model and parallelism run differently under Megatron-LM, NeMo, DeepSpeed and PyTorch's own
FSDP / torchtitan. A job names its framework (``framework:`` in YAML, `TrainingJob.framework`);
`FRAMEWORKS` maps the name to a `Framework`, whose fields are read from each framework's source or
documentation:

* **Kernels** (``fused_kernels``). Megatron-LM, NeMo (Megatron-Core with Transformer Engine) and
  Megatron-DeepSpeed fuse the layer's elementwise work: one kernel per norm (Apex / TE
  ``FusedRMSNorm`` / ``FusedLayerNorm``), fused rotary embedding (``apply_rope_fusion``), fused bias /
  SwiGLU activation (``bias_activation_fusion``); their vocabulary-parallel cross-entropy is a chain
  of FP32 passes over the logits (``CE_MEGATRON_*_BYTES``). Eager
  PyTorch (FSDP / torchtitan without ``torch.compile``) runs them as separate ATen kernels
  (`eager_elementwise_bytes`): ``nn.RMSNorm`` is ATen's composite ``rms_norm`` (cast to FP32, ``pow``,
  ``mean``, ``rsqrt``, ``mul``, cast back, ``mul`` by the weight: aten/src/ATen/native/layer_norm.cpp,
  ``rms_norm_symint``), torchtitan's rotary embedding goes through complex FP32 tensors
  (``apply_rotary_emb``: ``xq.float()``, ``view_as_complex``, complex ``*``, ``view_as_real``,
  ``type_as``; torchtitan/models/llama3/model/model.py, pytorch/torchtitan@8a6c9fe6e), SwiGLU is
  ``F.silu(w1(x)) * w3(x)`` (two kernels), grouped-query K/V are expanded by ``repeat_kv`` (a copy),
  and the loss is ``cross_entropy(pred.float(), ...)`` (an FP32 copy of the logits first). LayerNorm
  and GELU are single native kernels in eager mode too, so GPT-style models lose little.
* **Selective recomputation** (``selective``). Megatron's ``--recompute-granularity selective``
  recomputes the attention core only (Korthikanti et al. 2022 section 5; Megatron-DeepSpeed and NeMo
  inherit it). torchtitan's ``selective_ac_option = "op"`` (its default for Llama 3 8B,
  train_configs/llama3_8b.toml) saves the outputs of the ops in ``_save_list`` (``aten.mm``, SDPA,
  ``reduce_scatter``, ``max``) "except every second mm" and recomputes everything else
  (torchtitan/distributed/activation_checkpoint.py, ``_get_custom_policy``, same commit): in a Llama
  block's order ``wq, wk, wv, wo, w1, w3, w2`` the second, fourth and sixth matmul (``wk``, ``wo``,
  ``w3``) and every norm, rotary and activation kernel run again before the backward
  (`per_op_recompute_linears`).
* **Pipeline sends** (``blocking_p2p``). Megatron-Core's non-interleaved 1F1B waits for every send and
  receive (``p2p_communication._communicate`` with ``wait_on_reqs=True``, then
  ``torch.cuda.synchronize()`` under ``batch_p2p_sync``; megatron/training/arguments.py forces
  ``overlap_p2p_comm = False`` "since non-interleaved schedule does not support overlapping p2p
  communication"), so a stage's next pass starts once its send is delivered; the interleaved schedule
  overlaps them (``--no-overlap-p2p-communication`` is opt-out; NVIDIA/Megatron-LM@d98e8a64dd).
  DeepSpeed's pipeline engine blocks always (`flowherd.workload.pipeline`).
* **Tensor-parallel overlap** (``tp_comm_overlap``): Transformer Engine's userbuffers
  (``--tp-comm-overlap``, opt-in in Megatron-LM; NeMo's ``ub_tp_comm_overlap``, set per model in
  NeMo-Framework-Launcher's conf/training yamls, false in llama2_70b.yaml): the sequence-parallel
  all-gathers and reduce-scatters run in chunks beside the GEMMs that consume or produce them
  (`flowherd.workload.pipeline`).
* **Gradient buckets** (``overlap_grad_reduce``, `Framework.bucket_bytes`): the data-parallel
  reduction starts bucket by bucket during the last backward. Megatron-Core's DDP caps a bucket at
  ``max(40000000, 1000000 * dp_size)`` parameters and, without ``--overlap-grad-reduce``, makes one
  bucket of everything (``bucket_size = None``: reduced after the backward;
  megatron/core/distributed/distributed_data_parallel.py); the framework default here is the
  overlapped one, as the Megatron-LM README's scaling runs and NeMo's recipes run it. NeMo's
  ``distributed_fused_adam`` (Apex) buckets ``bucket_cap_mb: 125`` (llama2_70b.yaml); PyTorch DDP
  ``bucket_cap_mb = 25``; DeepSpeed's ``reduce_bucket_size`` 5e8 elements (deepspeed/runtime/zero/
  config.py ``ZERO_REDUCE_BUCKET_SIZE_DEFAULT``).
* **Parameter all-gather overlap** (``overlap_param_gather``): with the distributed optimizer
  (ZeRO-1), Megatron's ``--overlap-param-gather`` (opt-in) and NeMo's ``overlap_param_sync: true``
  (llama2_70b.yaml's ``optim``) start each bucket's all-gather of the updated weights after the
  optimizer step and make only the next forward of that bucket's layers wait for it, instead of
  the whole next iteration.
* **Gradient reduction dtype** (``fp32_grad_reduce``): Megatron-LM with BF16 accumulates and
  reduces the gradients in FP32 unless told otherwise (megatron/training/arguments.py: "bfloat16
  requires gradient accumulation and all-reduce to be done in fp32", ``accumulate_allreduce_grads_in_fp32
  = True``, which training.py passes to ``DistributedDataParallelConfig(grad_reduce_in_fp32=...)``;
  NVIDIA/Megatron-LM@d98e8a64dd): a job on ``megatron`` with 2-byte activations reduces 4-byte
  gradients unless ``grad_bytes`` says otherwise. NeMo sets it per model (``optim.grad_sync_dtype``),
  PyTorch FSDP by ``reduce_dtype``, DeepSpeed by its optimizer: 2 bytes unless stated.

Unknown names get the closest match (`flowherd.registry.Registry`).
"""

from __future__ import annotations

from dataclasses import dataclass

from flowherd.registry import Registry
from flowherd.units import MiB
from flowherd.workload.models import ModelShape

__all__ = ["FRAMEWORKS", "MEGATRON_BUCKET_PARAMS", "MEGATRON_BUCKET_PARAMS_PER_RANK", "Framework",
           "eager_elementwise_bytes", "get_framework", "per_op_recompute_linears"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    """How one training framework runs a transformer (module docstring).

    Attributes:
        name: Registry name.
        fused_kernels: Fused norm, rotary, activation and loss kernels (Megatron / TE); False: eager
            ATen kernels (`eager_elementwise_bytes`).
        selective: What ``recompute: selective`` repeats: "attention-core" (Megatron) or "per-op"
            (PyTorch's per-op selective checkpointing as torchtitan configures it).
        blocking_p2p: Whether a 1F1B (non-interleaved) pipeline stage waits for its sends.
        tp_comm_overlap: Default of `TrainingJob.tp_comm_overlap`.
        overlap_param_gather: Default of `TrainingJob.overlap_param_gather`.
        overlap_grad_reduce: Default of `TrainingJob.overlap_grad_reduce`.
        bucket: How the gradient buckets are capped: "megatron" (``max(4e7, 1e6 * dp)``
            parameters) or "bytes" (``bucket_cap_bytes``).
        bucket_cap_bytes: The cap of a "bytes" bucket.
        pipeline_engine: The pipeline engine a job of this framework runs by default.
        fp32_grad_reduce: Whether BF16 gradients are reduced in FP32 by default (module docstring).
        source: Where the fields were read.
    """

    name: str
    fused_kernels: bool = True
    selective: str = "attention-core"
    blocking_p2p: bool = True
    tp_comm_overlap: bool = False
    overlap_param_gather: bool = False
    overlap_grad_reduce: bool = True
    bucket: str = "megatron"
    bucket_cap_bytes: float = 25 * MiB
    pipeline_engine: str = "megatron"
    fp32_grad_reduce: bool = False
    source: str = ""

    def bucket_bytes(self, *, dp: int, grad_bytes: int) -> float:
        """The gradient bucket cap of a data-parallel group of ``dp`` ranks, bytes."""
        if self.bucket == "megatron":
            return max(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_RANK * dp) * grad_bytes
        return self.bucket_cap_bytes


_MEGATRON = "NVIDIA/Megatron-LM@d98e8a64dd: megatron/training/arguments.py, p2p_communication.py"
_NEMO = "NVIDIA/NeMo-Framework-Launcher conf/training/llama/llama2_70b.yaml (optim, ub_tp_comm_overlap)"
_TITAN = "pytorch/torchtitan@8a6c9fe6e: distributed/activation_checkpoint.py, models/llama3/model/model.py"

# megatron/core/distributed/distributed_data_parallel.py: bucket_size = max(40000000, 1000000 * dp)
MEGATRON_BUCKET_PARAMS = 40_000_000
MEGATRON_BUCKET_PARAMS_PER_RANK = 1_000_000

FRAMEWORKS: Registry[Framework] = Registry("framework", {
    "megatron": Framework(name="megatron", fp32_grad_reduce=True, source=_MEGATRON),
    "nemo": Framework(name="nemo", overlap_param_gather=True, bucket="bytes", bucket_cap_bytes=125 * MiB,
                      source=_NEMO),
    # Megatron-DeepSpeed: Megatron's fused kernels and selective recomputation on DeepSpeed's engine
    "deepspeed": Framework(name="deepspeed", pipeline_engine="deepspeed", bucket="bytes",
                           bucket_cap_bytes=500_000_000 * 2,
                           source="microsoft/Megatron-DeepSpeed; deepspeed/runtime/pipe/engine.py"),
    "torchtitan": Framework(name="torchtitan", fused_kernels=False, selective="per-op", blocking_p2p=False,
                            bucket="bytes", source=_TITAN),
    # PyTorch FSDP / DDP in eager mode (fms-fsdp, LLM Foundry, Hugging Face): ATen kernels; PyTorch's
    # selective checkpointing API with torchtitan's per-op policy; DDP's 25 MiB buckets
    "pytorch": Framework(name="pytorch", fused_kernels=False, selective="per-op", blocking_p2p=False,
                         bucket="bytes", source=_TITAN),
})
FRAMEWORKS.add("fsdp", FRAMEWORKS["pytorch"])
FRAMEWORKS.add("eager", FRAMEWORKS["pytorch"])


def get_framework(name: str | Framework) -> Framework:
    """The `Framework` of a registry name (or the framework itself)."""
    return name if isinstance(name, Framework) else FRAMEWORKS[name]


# Bytes per element moved by eager ATen kernels (read + write, BF16 tensors upcast to FP32 where the
# source casts), forward pass; the backward is charged twice the forward, as for the fused kernels.
# RMSNorm, ATen rms_norm_symint: to(float) 2+4, pow 4+4, mean 4, mul 4+4, type_as 4+2, weight mul 2+2
RMSNORM_EAGER_BYTES = 36
RMSNORM_EAGER_KERNELS = 7
# torchtitan apply_rotary_emb per element of Q and K: xq.float() 2+4, complex mul 4+4, type_as 4+2
ROPE_EAGER_BYTES = 20
ROPE_EAGER_KERNELS = 6  # cast, multiply and cast back, for Q and for K
# SwiGLU per element of the FFN width: silu(w1 x) 2+2, silu * (w3 x) 4+2
SWIGLU_EAGER_BYTES = 10
# cross_entropy(pred.float()) per logit: the FP32 copy 2+4, log_softmax 4+4 (forward); the backward
# writes the FP32 gradient 4, log_softmax backward 4+4+4, and casts it to BF16 4+2
CE_EAGER_FWD_BYTES = 14
CE_EAGER_BWD_BYTES = 22
# Megatron-Core's vocab_parallel_cross_entropy (megatron/core/tensor_parallel/cross_entropy.py,
# NVIDIA/Megatron-LM@cf1d4d12a7, the default without --cross-entropy-loss-fusion) per logit: .float()
# 2+4, max 4, in-place subtract 4+4, in-place exp 4+4, sum 4, in-place divide 4+4 (forward);
# grad_input.mul_(grad_output) 4+4 and the cast back to BF16 4+2 (backward)
CE_MEGATRON_FWD_BYTES = 38
CE_MEGATRON_BWD_BYTES = 14


def eager_elementwise_bytes(model: ModelShape, *, tokens: float, tokens_sp: float, tp: int, act_width: float,
                            up: int, permute: float, dtype_bytes: int) -> tuple[float, int]:
    """Forward bytes and kernels of a layer's non-GEMM, non-attention kernels in eager PyTorch.

    ``tokens`` the rank's tokens, ``tokens_sp`` those its norms and residual adds see (``tokens / tp``
    under sequence parallelism), ``act_width`` the rank's FFN width, ``up`` the MLP's input matrices
    (2 gated, 1 GELU), ``permute`` MoE permutation elements per token. Gated (SwiGLU) models are the
    Llama family, with RMSNorm and rotary embeddings; the others run LayerNorm and GELU, which are
    single native kernels in eager mode as in the fused frameworks (module docstring).
    """
    h, a = model.hidden, dtype_bytes
    rope_elems = (model.heads + model.kv_heads) * model.head_dim / tp if model.rotary else 0.0
    if model.gated_mlp:
        norms = 2 * RMSNORM_EAGER_BYTES * h * tokens_sp
        act = SWIGLU_EAGER_BYTES * act_width * tokens
        kernels = 2 * RMSNORM_EAGER_KERNELS + 2
    else:
        norms = 2 * 2 * a * h * tokens_sp
        act = (up + 1) * act_width * a * tokens
        kernels = 3
    rope = ROPE_EAGER_BYTES * rope_elems * tokens
    kernels += ROPE_EAGER_KERNELS if rope_elems else 0
    # repeat_kv: grouped-query K and V expanded to every query head (read the KV heads, write all)
    groups = model.heads // model.kv_heads
    kv = 2 * (model.kv_heads + model.heads) * model.head_dim / tp * a * tokens if groups > 1 else 0.0
    kernels += 2 if groups > 1 else 0
    residual = 2 * 3 * h * a * tokens_sp
    return norms + act + rope + kv + residual + permute * a * tokens, kernels + 2


def per_op_recompute_linears(model: ModelShape, moe: bool) -> dict[str, float]:
    """The share of each GEMM op of `flowherd.workload.compute.layer_ops` that per-op selective
    checkpointing recomputes (module docstring): the even-numbered matmuls of a block in forward
    order: a gated (Llama) block's ``wq, wk, wv, wo, w1, w3, w2``, where ``qkv`` counts as its three
    projections (K's share of its FLOPs when ``wk`` is recomputed) and ``mlp-up`` as ``w1`` and
    ``w3`` (half of it); a GPT / MPT block's fused ``Wqkv, out, up, down``. MoE layers count only
    their attention projections (the expert GEMMs are grouped, not ``aten.mm``)."""
    q = model.heads * model.head_dim
    kv = model.kv_heads * model.head_dim
    if model.gated_mlp:  # Llama: separate wq, wk, wv (torchtitan's Attention)
        names: list[tuple[str, float | None]] = [("qkv", q), ("qkv", kv), ("qkv", kv), ("attn-out", None)]
        mlp: list[tuple[str, float | None]] = [("mlp-up", 0.5), ("mlp-up", 0.5), ("mlp-down", None)]
    else:  # GPT / MPT: one fused Wqkv, then out, up, down
        names, mlp = [("qkv", None), ("attn-out", None)], [("mlp-up", None), ("mlp-down", None)]
    if not moe:
        names += mlp
    out: dict[str, float] = {}
    for k, (op, w) in enumerate(names, start=1):
        if k % 2:
            continue
        share = 1.0 if w is None else (w / (q + 2 * kv) if op == "qkv" else w)
        out[op] = out.get(op, 0.0) + share
    return out
