"""The published training runs `benchmarks/published.py` simulates: each row's source, its run's
settings as the source states them (and the comments say what was taken where it does not), and
the published figure. The sources, the rows held out of the fitting and what each figure means are
in `benchmarks/published.py`'s docstring."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

LLM_FOUNDRY = "LLM Foundry MPT benchmarks (mosaicml/llm-foundry@061f2c7)"
MEGATRON_README = "Korthikanti et al. 2022 Table 3; MFU: Megatron-LM README@2e90a342"
MT_NLG = "Smith et al. 2022 (MT-NLG 530B), section 2.4"
BLOOM = "BigScience BLOOM-176B training page (~150 TFLOP/s)"
NEMO = "NeMo 24.07 performance summary, DGX-H100 FP8 (NVIDIA/NeMo@070a0bb)"
FMS_FSDP = "PyTorch blog 'Maximizing training throughput using PyTorch FSDP' (2024-03-13), Table 1"


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200, **kw) -> dict:
    """A GPT-style shape (GELU MLP of 4h, tied embeddings, biases)."""
    return {"name": name, "layers": layers, "hidden": hidden, "heads": heads, "ffn_hidden": 4 * hidden,
            "vocab": vocab, "gated_mlp": False, "tied_embeddings": True, "biases": True, **kw}


# MPT shapes: scripts/train/yamls/pretrain/mpt-{1b,3b,7b,13b,30b,70b}.yaml (no biases, vocab 50,368;
# n_heads 16 / 20 / 32 / 40 / 56 / 64: head dim 128 throughout, "so that d_head == 128 to satisfy
# FlashAttention", as the 1b and 3b yamls say). Their attn_config sets only attn_impl, so MPTConfig's
# defaults hold (llmfoundry/models/mpt/configuration_mpt.py at the same commit: alibi False,
# learned_pos_emb True): a learned position table of max_seq_len rows, which submit_benchmarks.py sets
# to the run's sequence (`_mpt`). The table's NumParams column shows it: MPT-30b counts 29,975,214,080
# at 2,048 tokens and 30,019,254,272 at 8,192, (8192 - 2048) x 7168 more.
MPT = {k: {"name": f"mpt-{k}", "layers": L, "hidden": h, "heads": a, "ffn_hidden": 4 * h, "vocab": 50368,
           "gated_mlp": False, "tied_embeddings": True}
       for k, (L, h, a) in {"1b": (24, 2048, 16), "3b": (32, 2560, 20), "7b": (32, 4096, 32),
                            "13b": (40, 5120, 40), "30b": (48, 7168, 56), "70b": (80, 8192, 64)}.items()}

# Llama 2 shapes (Touvron et al. 2023, Table 1 / the meta-llama config.json files; NeMo's llama2_*.yaml):
# SwiGLU, RMSNorm, no biases, untied embeddings, vocabulary 32,000; 70B with 8 KV heads
LLAMA2 = {k: {"name": f"llama2-{k}", "layers": L, "hidden": h, "heads": a, "kv_heads": kv, "ffn_hidden": f,
              "vocab": 32000, "gated_mlp": True}
          for k, (L, h, a, kv, f) in {"7b": (32, 4096, 32, 32, 11008), "13b": (40, 5120, 40, 40, 13824),
                                      "70b": (80, 8192, 64, 8, 28672)}.items()}

NVLINK = {"h100": "450GB/s", "a100": "300GB/s"}  # per direction (datasheets, flowherd.workload.gpus)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One published measurement and the run it came from.

    ``metric`` says what was published: "tokens" (tokens/s/GPU), "mfu", "hfu" (fractions), "tflops"
    (hardware TFLOP/s per GPU, recomputation included), "model_tflops" (model TFLOP/s per GPU, the
    MFU numerator) or "iteration_s".
    """

    source: str
    label: str
    gpu: str
    nic: str  # scale-out bandwidth per GPU
    model: dict
    gpus: int
    seq_len: int
    micro_batch: int
    global_batch: int
    published: float
    metric: str
    tp: int = 1
    pp: int = 1
    cp: int = 1
    virtual_stages: int = 1
    sequence_parallel: bool = False
    zero: int = 0
    fsdp: bool = False
    fsdp_shard: int | None = None  # hybrid sharding: GPUs of one FSDP shard group
    recompute: str = "none"
    attention: str = "flash"
    param_bytes: int | None = None  # 4: FP32 weights under autocast (Composer's DEFAULT mixed precision)
    grad_bytes: int | None = None  # None: the framework's (FP32 under Megatron-LM with BF16)
    grad_accumulation: str = "fused"
    pipeline_engine: str | None = None  # None: the framework's
    precision: str = "bf16"
    framework: str = "megatron"
    tp_comm_overlap: bool | None = None  # None: the framework's default (as the next two)
    overlap_param_gather: bool | None = None
    overlap_grad_reduce: bool | None = None
    series: str = ""  # the scaling series the row belongs to, if any
    held_out: bool = False  # not among the rows the sustained fractions were fitted on
    slow: bool = False  # minutes to simulate: only with --all

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)


def _mpt(gpu: str, model: str, s: int, n: int, mbs: int, ga: int, ac: bool, tps: float,
         mp: str = "DEFAULT", held_out: bool = False) -> Row:
    # the table's "MP Mode": Composer's FSDP mixed precision (composer/trainer/dist_strategy.py,
    # mosaicml/composer@029483a4): DEFAULT keeps FP32 parameters (param_dtype None: FP32 all-gathers,
    # autocast casts every weight per forward) and reduces in BF16; PURE keeps BF16 parameters
    rc = ", full recompute" if ac else ""
    label = f"MPT-{model} s={s} {n}x{gpu.upper()} FSDP mbs={mbs} GBS={mbs * ga * n}{rc}"
    return Row(source=LLM_FOUNDRY, label=label,
               gpu=gpu, nic="400Gbps" if gpu == "h100" else "200Gbps",
               model={**MPT[model], "learned_positions": s}, gpus=n, seq_len=s,
               micro_batch=mbs, global_batch=mbs * ga * n, fsdp=True, recompute="full" if ac else "none",
               param_bytes=4 if mp == "DEFAULT" else 2, attention="triton", published=tps, metric="tokens",
               framework="pytorch", held_out=held_out)


ROWS = [
    # LLM Foundry, H100 80GB BF16 (3200 Gbps per node): model, SeqLen, #GPUs, MicroBatchSize, GradAccum,
    # Activation Checkpointing, Throughput (T/s/GPU)
    _mpt("h100", "1b", 2048, 8, 14, 1, False, 45455),
    _mpt("h100", "3b", 2048, 16, 10, 3, False, 24142),
    _mpt("h100", "7b", 2048, 8, 6, 1, False, 10643),
    _mpt("h100", "7b", 8192, 8, 8, 2, True, 6935),
    _mpt("h100", "13b", 2048, 32, 2, 1, False, 4811),
    _mpt("h100", "13b", 4096, 8, 10, 3, True, 4717),
    _mpt("h100", "30b", 2048, 16, 10, 3, True, 2263),
    _mpt("h100", "70b", 2048, 64, 8, 4, True, 1039),
    # LLM Foundry, A100 80GB with 1600 Gbps RoCE per node
    _mpt("a100", "1b", 2048, 8, 14, 4, False, 20513),
    _mpt("a100", "3b", 2048, 8, 10, 2, False, 10811),
    _mpt("a100", "7b", 2048, 8, 6, 2, False, 4641),
    _mpt("a100", "7b", 8192, 8, 8, 2, True, 3206),
    _mpt("a100", "13b", 2048, 8, 2, 3, False, 2262),
    _mpt("a100", "13b", 4096, 8, 10, 3, True, 2060),
    _mpt("a100", "30b", 2048, 8, 3, 21, True, 916),
    _mpt("a100", "70b", 2048, 64, 8, 4, True, 410, mp="PURE"),
    # held out (same tables, other rows; the sustained fractions were not fitted on them)
    *[_mpt("h100", *r, held_out=True) for r in [
        ("13b", 2048, 8, 2, 1, False, 4792), ("13b", 2048, 64, 2, 1, False, 4800),
        ("13b", 1024, 8, 40, 3, True, 5502), ("7b", 4096, 8, 16, 2, True, 8611),
        ("3b", 2048, 64, 6, 3, False, 22525), ("1b", 2048, 64, 20, 1, False, 44402),
        ("30b", 2048, 32, 14, 3, True, 2308), ("70b", 2048, 32, 2, 16, True, 882)]],
    *[_mpt("a100", *r, held_out=True) for r in [
        ("13b", 8192, 8, 5, 3, True, 1795), ("13b", 1024, 8, 40, 3, True, 2330),
        ("7b", 4096, 8, 16, 2, True, 3684), ("3b", 4096, 8, 5, 6, False, 9457),
        ("1b", 4096, 8, 7, 4, False, 17807), ("30b", 4096, 8, 1, 21, True, 814)]],
    _mpt("a100", "70b", 2048, 32, 2, 16, True, 373, mp="PURE", held_out=True),
    # held out: every other row of the two BF16 tables with a model of 1b or more and a sequence of
    # at most 16,384 tokens (the range of the attention measurements of flowherd.workload.compute)
    *[_mpt("h100", *r, held_out=True) for r in [
        ("30b", 8192, 8, 1, 21, True, 1384), ("30b", 4096, 8, 1, 21, True, 1802),
        ("30b", 2048, 8, 3, 21, True, 2002), ("30b", 1024, 8, 6, 21, True, 2084),
        ("13b", 16384, 8, 3, 3, True, 2985), ("13b", 2048, 16, 2, 1, False, 4767),
        ("7b", 1024, 8, 64, 2, True, 10203), ("3b", 16384, 8, 1, 6, False, 11152),
        ("3b", 8192, 8, 3, 6, False, 16578), ("3b", 4096, 8, 5, 6, False, 20964),
        ("3b", 2048, 32, 6, 3, False, 23021), ("3b", 1024, 8, 20, 6, False, 27046),
        ("3b", 512, 8, 40, 6, False, 27965), ("1b", 16384, 8, 2, 4, False, 19649),
        ("1b", 8192, 8, 3, 4, False, 29157), ("1b", 4096, 8, 7, 4, False, 38535),
        ("1b", 2048, 32, 20, 1, False, 45130), ("1b", 2048, 16, 20, 1, False, 46037),
        ("1b", 1024, 8, 18, 4, False, 48910), ("1b", 512, 8, 56, 4, False, 52275)]],
    *[_mpt("a100", *r, held_out=True) for r in [
        ("30b", 8192, 8, 1, 21, True, 574), ("30b", 1024, 8, 6, 21, True, 946),
        ("30b", 512, 8, 12, 21, True, 967), ("13b", 16384, 8, 3, 3, True, 1431),
        ("7b", 16384, 8, 4, 2, True, 2453), ("7b", 1024, 8, 64, 2, True, 4357),
        ("3b", 16384, 8, 1, 6, False, 5529), ("3b", 8192, 8, 3, 6, False, 7695),
        ("3b", 1024, 8, 20, 6, False, 11580), ("3b", 512, 8, 40, 6, False, 12127),
        ("1b", 16384, 8, 2, 4, False, 9956), ("1b", 8192, 8, 3, 4, False, 13814),
        ("1b", 1024, 8, 18, 4, False, 22112), ("1b", 512, 8, 56, 4, False, 23148)]],
    # Megatron-LM, A100 80GB (Selene: 8 x 200 Gb/s HDR per node), sequence parallelism + selective
    # recomputation, data-parallel size 1, micro-batch 1, sequence 2048, vocabulary 51,200
    *[Row(source=MEGATRON_README, label=f"GPT-{name} TP8 PP{pp} {n}xA100 GBS={gbs} SP+selective",
          gpu="a100", nic="200Gbps", model=_gpt(name, L, h, a), gpus=n, seq_len=2048, micro_batch=1,
          global_batch=gbs, tp=8, pp=pp, sequence_parallel=True, recompute="selective", attention="unfused",
          published=mfu, metric="mfu", slow=n > 100)
      for name, L, h, a, pp, n, gbs, mfu in [("22B", 48, 6144, 64, 1, 8, 4, 0.415),
                                             ("175B", 96, 12288, 96, 8, 64, 64, 0.514),
                                             ("530B", 105, 20480, 128, 35, 280, 280, 0.560),
                                             ("1T", 128, 25600, 160, 64, 512, 512, 0.563)]],
    # MT-NLG 530B on Selene (A100 80GB, 200 Gb/s HDR per GPU): TP 8, PP 35, global batch 1920,
    # sequence 2048, full recomputation; iteration time 60.1 / 50.2 / 44.4 s on 280 / 350 / 420 nodes
    *[Row(source=MT_NLG, label=f"MT-NLG-530B TP8 PP35 {n}xA100 GBS=1920 full recompute", gpu="a100",
          nic="200Gbps", model=_gpt("530B", 105, 20480, 128, vocab=50272), gpus=n, seq_len=2048,
          micro_batch=1, global_batch=1920, tp=8, pp=35, recompute="full", attention="unfused", published=it,
          metric="iteration_s", slow=True)
      for n, it in [(2240, 60.1), (2800, 50.2), (3360, 44.4)]],
    # BLOOM-176B on Jean Zay: 384 A100 80GB, 4 x 100 Gb/s Omni-Path per node, TP 4, PP 12, DP 8,
    # micro-batch 2, global batch 2048, ZeRO-1, full recomputation; Megatron-DeepSpeed's TFLOP/s
    # count includes the recomputation. DeepSpeed's BF16_Optimizer (written for this run) adds each
    # micro-batch's BF16 gradients into FP32 buffers (its pipeline engine's _exec_backward_pass calls
    # update_hp_grads) and, after the pipeline's last backward, all-reduces those FP32 gradients over
    # DP (_exec_reduce_grads -> buffered_allreduce_fallback); its sends block (p2p.send, async_op False)
    Row(source=BLOOM, label="BLOOM-176B TP4 PP12 DP8 384xA100 GBS=2048 ZeRO-1 full recompute", gpu="a100",
        nic="50Gbps", model=_gpt("bloom", 70, 14336, 112, vocab=250880, rotary=False), gpus=384, seq_len=2048,
        micro_batch=2, global_batch=2048, tp=4, pp=12, zero=1, recompute="full", attention="unfused",
        grad_bytes=4, grad_accumulation="fp32-buffer", framework="deepspeed", published=150.0,
        metric="tflops"),
    # NeMo 24.07 on DGX-H100 (8 x 400 Gb/s per node), FP8 (Transformer Engine), Megatron-Core's
    # distributed optimizer (ZeRO-1), no activation recomputation, sequence parallelism with TP > 1;
    # tokens/s/GPU as published. Shapes: NeMo-Framework-Launcher conf/training/gpt3/{5b,20b,175b}.yaml
    # (GPT-2 BPE vocabulary padded to 50,304, learned positions, tied embeddings) and the Llama configs
    *[Row(source=NEMO, label=f"{name} TP{tp} PP{pp} CP{cp} VP{vp} {n}xH100 mbs={mbs} GBS={gbs} s={s} FP8",
          gpu="h100", nic="400Gbps", model=shape, gpus=n, seq_len=s, micro_batch=mbs, global_batch=gbs,
          tp=tp, pp=pp, cp=cp, virtual_stages=vp, sequence_parallel=tp > 1, zero=1, precision="fp8",
          attention="cudnn", framework="nemo", published=tps, metric="tokens", held_out=True, slow=n > 128)
      for name, shape, n, gbs, mbs, s, tp, pp, cp, vp, tps in [
          ("GPT3-5B", _gpt("gpt3-5b", 24, 4096, 32, vocab=50304, learned_positions=2048), 64, 2048, 4, 2048,
           1, 1, 1, 1, 22521),
          ("GPT3-20B", _gpt("gpt3-20b", 44, 6144, 48, vocab=50304, learned_positions=2048), 64, 256, 2, 2048,
           2, 1, 1, 1, 5851),
          ("GPT3-175B", _gpt("gpt3-175b", 96, 12288, 96, vocab=50304, learned_positions=2048), 128, 256, 1,
           2048, 4, 8, 1, 6, 726),
          ("GPT3-175B", _gpt("gpt3-175b", 96, 12288, 96, vocab=50304, learned_positions=2048), 512, 2048, 2,
           2048, 4, 8, 1, 6, 782),
          ("LLAMA2-7B", LLAMA2["7b"], 8, 128, 1, 4096, 1, 1, 1, 1, 16847),
          ("LLAMA2-13B", LLAMA2["13b"], 16, 128, 1, 4096, 1, 4, 1, 10, 8646),
          ("LLAMA2-70B", LLAMA2["70b"], 64, 128, 1, 4096, 4, 4, 1, 20, 1707),
          ("LLAMA3-8B", "llama3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12036),
          ("LLAMA3-70B", "llama3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1533)]],
]


# Eager PyTorch FSDP (IBM's fms-fsdp, no torch.compile: "we are working closely with Team PyTorch at Meta
# to get torch.compile"): Llama 2 7B, 4,096 tokens, 2 sequences per GPU, no activation checkpointing,
# SDPA's FlashAttention-2, BF16 mixed precision (fms_fsdp/policies/mixed_precision.py bfSixteen:
# param_dtype, reduce_dtype and buffer_dtype BF16); hybrid sharding inside each 8-GPU node for the 7B
# model (foundation-model-stack/fms-fsdp README, "7b | 128 * A100 | HSDP"). The blog's Table 1: 128 A100
# with 400 Gbps per node, 3,700 tokens/s/GPU (MFU 0.57); 96 H100 with 800 Gbps per node, 7,500 (MFU
# 0.37, "a 10% gap due to network 'peeking' out" in its traces)
ROWS += [Row(source=FMS_FSDP, label=f"Llama2-7B HSDP(8) {n}x{gpu.upper()} mbs=2 s=4096 eager FSDP",
             gpu=gpu, nic=nic, model=LLAMA2["7b"], gpus=n, seq_len=4096, micro_batch=2, global_batch=2 * n,
             fsdp=True, fsdp_shard=8, attention="flash2", param_bytes=2, grad_bytes=2, framework="pytorch",
             published=tps, metric="tokens", held_out=True)
         for gpu, nic, n, tps in [("a100", "50Gbps", 128, 3700), ("h100", "100Gbps", 96, 7500)]]


# Megatron-Core r0.8.0 on H100 (NVIDIA/Megatron-LM README, commit f2e5db402c "New scaling figures on
# H100 GPUs": images/model_table.png for the weak-scaling rows, images/strong_scaling.png for the
# strong-scaling series). GPT shapes with vocabulary 131,072, sequence 4096, untied embeddings (the
# table's model sizes count the output matrix: 7.1B = 12 * 30 * 4096^2 + 2 * 131072 * 4096), learned
# positions (Megatron's default); "fine-grained overlapping of data-parallel (--overlap-grad-reduce
# --overlap-param-gather), tensor-parallel (--tp-comm-overlap) and pipeline-parallel communication":
# the distributed optimizer (ZeRO-1, which --overlap-param-gather needs), sequence parallelism (which
# --tp-comm-overlap needs), Transformer Engine's attention on Hopper (cuDNN). Not stated: the precision
# (BF16: MFU is against the BF16 peak), recomputation (Megatron's default, none, is taken) and the
# micro-batch (--micro-batch-size has no default; 1 is taken unless the data-parallel wire bound of
# published_bounds.py rules it out, as for GPT-32B; `--set` in `main` runs other choices).
# Interleaving is implied ("pipeline-parallel communication ... enabled by default" is the interleaved
# schedule's overlap_p2p_comm; the non-interleaved schedule turns it off), its depth not stated: 2
# layers per model chunk (the chunk of NeMo's GPT-3 175B H100 recipe, 96 layers over PP 8 x VP 6), one
# where a stage's layers are odd.
MEGATRON_H100 = "Megatron-Core r0.8.0 H100 scaling (NVIDIA/Megatron-LM README@f2e5db402c)"
STRONG = "Megatron-Core H100 strong scaling (177B, 96 -> 4608 GPUs)"


def _mcore(name: str, L: int, h: int, a: int, tp: int, pp: int, n: int, gbs: int, tflops: float,
           series: str, mbs: int = 1) -> Row:
    per_stage = L // pp
    vp = 1 if pp == 1 else (per_stage // 2 if per_stage % 2 == 0 else per_stage)
    shape = _gpt(name, L, h, a, vocab=131072, tied_embeddings=False, learned_positions=4096)
    return Row(source=MEGATRON_H100, label=f"GPT-{name} TP{tp} PP{pp} VP{vp} {n}xH100 GBS={gbs}"
               + (f" mbs={mbs}" if mbs != 1 else ""), gpu="h100",
               nic="400Gbps", model=shape,
               gpus=n, seq_len=4096, micro_batch=mbs, global_batch=gbs, tp=tp, pp=pp, virtual_stages=vp,
               sequence_parallel=tp > 1, zero=1, attention="cudnn", tp_comm_overlap=tp > 1,
               overlap_param_gather=True, overlap_grad_reduce=True, published=tflops, metric="model_tflops",
               series=series, held_out=True, slow=n > 1152)


ROWS += [
    # weak scaling: model size, heads, hidden, layers, TP, PP, GPUs (DP 48), batch, per-GPU TFLOP/s
    *[_mcore(*r, series="Megatron-Core H100 weak scaling (1.7B/48 -> 462B/6144 GPUs)") for r in [
        ("1.7B", 24, 2048, 16, 1, 1, 48, 192, 408.8), ("7.1B", 30, 4096, 32, 2, 1, 96, 192, 465.9),
        ("16B", 32, 6144, 48, 4, 1, 192, 192, 489.1), ("70B", 84, 8192, 64, 8, 2, 768, 384, 419.7),
        ("119B", 92, 10240, 80, 8, 4, 1536, 768, 420.5),
        ("177B", 96, 12288, 96, 8, 6, 2304, 1152, 432.8), ("314B", 96, 16384, 128, 8, 8, 3072, 1536, 474.4),
        ("462B", 112, 18432, 144, 8, 16, 6144, 3072, 459.9)]],
    # GPT-32B at micro-batch 2, the smallest the data-parallel wire bound admits (published_bounds.py):
    # at micro-batch 1 its FP32 gradients (16 GB per GPU, reduce-scattered over 48 servers during the
    # last of 4 backwards) and BF16 parameters (gathered during the first forward) leave the published
    # 0.892 s room only for kernels 0.81x flowherd's time, where every other PP = 1 row of the table
    # leaves room for kernels 1.15-1.25x it; at micro-batch 2 the bound admits 1.23x
    _mcore("32B", 48, 7168, 56, 8, 1, 384, 192, 459.6, series="Megatron-Core H100 weak scaling (1.7B/48 -> "
           "462B/6144 GPUs)", mbs=2),
    # strong scaling of the 177B model at batch 1152 (TP 8, PP 6): per-GPU TFLOP/s read off the figure's
    # points (aggregate PFLOP/s on log axes, digitized from the 4737 x 2125 PNG against its grid lines;
    # the ends agree with the text's "MFU from 47% to 42%" and the 2304-GPU point with the table's 432.8
    # within 1%); the 2304-GPU point is the weak-scaling row above
    *[_mcore("177B", 96, 12288, 96, 8, 6, n, 1152, tf, series=STRONG)
      for n, tf in [(96, 463.4), (144, 462.6), (288, 460.2), (576, 457.7), (1152, 450.0), (3072, 426.9),
                    (4608, 416.0)]],
]

# LLM Foundry's H100 table holds weak-scaling series too: the same model, micro-batch and sequence on
# 8 to 64 GPUs
_MPT_SERIES = {("MPT-13b", " mbs=2 "): "LLM Foundry MPT-13b H100 weak scaling (8 -> 64 GPUs)",
               ("MPT-1b", " mbs="): "LLM Foundry MPT-1b H100 weak scaling (8 -> 64 GPUs)"}


def _tag(row: Row) -> Row:
    for (model, mbs), name in _MPT_SERIES.items():
        words = row.label.split()
        if words[:2] == [model, "s=2048"] and words[2] in ("8xH100", "16xH100", "32xH100", "64xH100") \
                and mbs in row.label:
            return dataclasses.replace(row, series=name)
    return row


ROWS = [_tag(r) for r in ROWS]

# LLM Foundry's large-scale H100 BF16 table (mosaicml/llm-foundry@5e85bd62d,
# scripts/train/benchmarking/README.md, "H100 80GB BF16 (Large Scale, >= 128 GPUs)"): the same models
# on 128, 256 and 512 GPUs at one micro-batch per step. How they ran (sweep.py and setup.py at that
# commit): torch 2.1, Composer 0.17, FULL_SHARD for 7b-70b (1b and 3b ran SHARD_GRAD_OP, which flowherd
# does not model: left out), limit_all_gathers, forward prefetch, BACKWARD_PRE, attn_impl "flash"
# (flash-attn 2.4.2, the gpu-flash2 extra) for 7b and 70b and "triton" for 13b and 30b, activation
# checkpointing as the table lists; mixed precision as the table's MP Mode column lists (DEFAULT).
# torch 2.1's non-reentrant checkpoint stops recomputing after the last tensor the backward needs,
# which the full recomputation modelled here (every op of the block, as torch 2.0) overcharges.
LLM_FOUNDRY_LARGE = "LLM Foundry MPT benchmarks, large scale (mosaicml/llm-foundry@5e85bd62d)"
ROWS += [dataclasses.replace(_mpt("h100", model, 2048, n, mbs, 1, ac, tps, held_out=True),
                             source=LLM_FOUNDRY_LARGE, attention=attention,
                             series=f"LLM Foundry MPT-{model} H100 large scale (128 -> 512 GPUs)")
         for model, mbs, ac, attention, by_n in [
             ("7b", 6, False, "flash2", ((128, 10475), (256, 10119), (512, 9670))),
             ("13b", 16, True, "triton", ((128, 5080), (256, 4989), (512, 4952))),
             ("30b", 8, True, "triton", ((128, 2199), (256, 2148), (512, 2115))),
             ("70b", 8, True, "flash2", ((128, 1058), (256, 1035), (512, 1007)))]
         for n, tps in by_n]
# the strong-scaling series shares its 2304-GPU point with the weak-scaling table
SERIES_EXTRA = {STRONG: "GPT-177B TP8 PP6 VP8 2304xH100"}
