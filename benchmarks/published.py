"""Published training throughputs against flowherd's compute and network model.

Every row is one measured training run turned into a single-job scenario (the fabric of the paper's
cluster, the job's model, parallelism, batch and recomputation exactly as published); flowherd
simulates one iteration on the idle fabric at ``collective`` fidelity and its per-GPU throughput
(tokens per second per GPU = global batch x sequence / iteration / GPUs) is compared with the
published one.

Sources (none of them is Megatron-LM SC'21 Table 1, MegaScale NSDI'24 Table 2, Llama 3 Table 4,
TorchTitan's docs/performance.md or the MLPerf Training v4.0 GPT-3 results, which are reserved for an
external check):

* MosaicML LLM Foundry, "MPT Training Benchmarks", ``scripts/train/benchmarking/README.md``
  (mosaicml/llm-foundry commit 061f2c7ce64e655100286584a7629e2a09f827ba), tables "H100 80GB BF16"
  (3200 Gbps InfiniBand per node) and "A100 80GB with 1600 Gbps node-node interconnect (RoCE)":
  PyTorch FSDP ``FULL_SHARD`` over all GPUs, activation checkpointing as listed (full
  recomputation). Model shapes: ``scripts/train/yamls/pretrain/mpt-*.yaml`` (``d_model``,
  ``n_heads``, ``n_layers``, ``expansion_ratio: 4``, GELU MLP, vocabulary 50,368, tied embeddings,
  no biases, learned positions over the run's sequence and no ALiBi: MPTConfig's defaults, which the
  yamls keep); the table's NumParams column checks them. How the runs were set up, from the same
  repository: ``submit_benchmarks.py`` sets ``attn_impl`` to its ``--attn_impl`` default
  ``triton`` (FlashAttention in Triton), which ``sweep.sh`` does not override; the table's "MP Mode"
  is Composer's FSDP mixed precision (``composer/trainer/dist_strategy.py``): DEFAULT keeps FP32
  parameters (FP32 all-gathers, autocast casting every weight per pass), PURE (the A100 70b rows)
  BF16 ones. 16 rows (8 per GPU type) are the fit set of the sustained fractions; every other row
  of the two BF16 tables with a model of 1b or more and at most 16,384 tokens per sequence (49) is
  held out (marked in the output, counted separately).
* Megatron-LM, A100 80GB on Selene: the MFU table of the Megatron-LM README (NVIDIA/Megatron-LM
  commit 2e90a342f5, "measured using a data parallel size of one") for the configurations of
  Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
  Table 3: 22B TP 8; 175B TP 8 PP 8; 530B TP 8 PP 35; 1T TP 8 PP 64; global batch 4, 64, 280,
  512; sequence parallelism and selective recomputation; vocabulary 51,200, sequence 2048).
* MT-NLG 530B (Smith et al. 2022, arXiv:2201.11990, section 2.4): iteration time 60.1 / 50.2 /
  44.4 s on 280 / 350 / 420 DGX A100 nodes, global batch 1920, TP 8, PP 35, full recomputation
  (only with ``--all``: minutes per row, as the 530B and 1T Megatron rows).
* BLOOM-176B (BigScience, bigscience.notion.site "BigScience 176B Model"): "training throughput:
  about 150 TFLOPs" on 384 A100 80GB, one replica on 48 GPUs (TP 4 x PP 12, BLOOM paper
  arXiv:2211.05100 section 3.4), micro-batch 2, global batch 2048, 4 x 100 Gb/s Omni-Path per node.
  As its launch script ran it (bigscience-workshop/bigscience ``train/tr11-176B-ml/
  tr11-176B-ml.slurm``): Megatron-DeepSpeed on DeepSpeed's pipeline engine (``pipeline_engine:
  deepspeed``: blocking sends, the FP32 gradients all-reduced after the last backward,
  `flowherd.workload.pipeline`), ``ZERO_STAGE=0`` with BF16 ("bf16 must use z0! it implements its
  own zero stage 1 equivalent": BF16_Optimizer, optimizer states partitioned, FP32 accumulation),
  ``--checkpoint-activations``, ALiBi (no rotary, no learned positions), ``--embed-layernorm``,
  vocabulary padded to 250,880, tied embeddings (their gradients all-reduced between the first
  and last stage). ``--pp-partition-method 'type:transformer|embedding'`` balances 72 layers (70
  blocks and the two embeddings) over 12 stages: 5 blocks on the first and last stage, 6 on the
  others; flowherd's even split (6 on the first ten, 5 on the last two) has the same slowest stage.

* NeMo 24.07 performance summary (NVIDIA/NeMo ``docs/source/performance/performance_summary.md``,
  commit 070a0bb168d4): pre-training on DGX-H100 at FP8 (Transformer Engine), every row with a
  model flowherd can shape (GPT3 5B / 20B / 175B, Llama 2 7B / 13B / 70B, Llama 3 8B / 70B; the
  Nemotron rows are left out: squared-ReLU MLPs and shapes the table does not give), TP / PP / CP
  / VP / MBS / GBS as published, Megatron-Core's distributed optimizer (``distributed_fused_adam``
  in NeMo-Framework-Launcher's conf/training yamls), no activation recomputation
  (``activations_checkpoint_granularity: null`` there), sequence parallelism with TP > 1, cuDNN's
  fused attention (Transformer Engine's choice on Hopper, ``attention: cudnn``) and, with CP,
  Transformer Engine's ring (`flowherd.workload.context_parallel`). All held out; the 512-GPU
  GPT3-175B row only with ``--all``.

* Megatron-Core r0.8.0 on H100 (NVIDIA/Megatron-LM README at f2e5db402c, "New scaling figures on H100
  GPUs"): the weak-scaling table (1.7B on 48 GPUs to 462B on 6,144, per-GPU model TFLOP/s) and the
  strong-scaling figure (the 177B model at batch 1152 from 96 to 4,608 GPUs, read off the figure's
  points; the ends match the text's "MFU from 47% to 42%"). The runs overlap DP, TP and PP
  communication as the README lists; micro-batch, interleaving depth, recomputation and dropout are not
  published (the choices are at ``_mcore``). All held out; rows above 1,152 GPUs only with ``--all``.

* Eager PyTorch FSDP: the PyTorch blog "Maximizing training throughput using PyTorch FSDP" (Team
  PyTorch at IBM and at Meta, 2024-03-13), Table 1: Llama 2 7B on 128 A100 (400 Gbps per node) and 96
  H100 (800 Gbps per node), 2 sequences of 4,096 tokens per GPU, no activation checkpointing, SDPA's
  FlashAttention-2, no ``torch.compile``; IBM's fms-fsdp (its README: "7b | 128 * A100 | HSDP"; BF16
  parameters and reductions, fms_fsdp/policies/mixed_precision.py). Held out.

Each job runs on its framework (`flowherd.workload.frameworks`): the LLM Foundry rows on eager PyTorch
FSDP (``pytorch``: Composer with torch 2.0, no compile), BLOOM on ``deepspeed``, NeMo's on ``nemo``, the
Megatron rows on ``megatron`` (which reduces BF16 gradients in FP32), the fms-fsdp rows on ``pytorch``
with hybrid sharding (``fsdp_shard: 8``). Scaling series (``Row.series``: the Megatron-Core weak- and
strong-scaling runs and LLM Foundry's 8-64 GPU MPT-1b and MPT-13b rows) print the published and
simulated throughput ratio from their smallest to their largest point; every row prints its
exposed-communication share (1 - compute critical path / iteration, `flowherd.experiments.metrics`).
``--series`` runs only those.

What is fitted on what: the GPU-level ``sustained_fraction`` of `flowherd.workload.compute` is
fitted per GPU type (least squares on the log error) on the 8 LLM Foundry fit rows of that type
(A100 0.949, H100 0.862); every other constant comes from kernel measurements or from the ported
NCCL model (the SMs NCCL's blocks hold beside FSDP's layers: `compute.comm_interference_s`), and
the held-out LLM Foundry rows, the Megatron-LM rows and BLOOM are not fitted on.

What the frameworks really do (read in their sources, not guessed): the LLM Foundry runs used the
``mosaicml/pytorch:2.0.1`` image (``sweep.sh`` at the commit above; ``setup.py``: torch < 2.1.1)
and ``activation_checkpointing_reentrant: false``; torch 2.0's ``checkpoint(use_reentrant=False)``
is ``_checkpoint_without_reentrant``, which reruns the whole wrapped block at the first unpack (the
early-stopping recomputation that skips the ops after the last saved tensor came with torch 2.1),
so full recomputation repeats every op of each MPT block, as modelled. Megatron-DeepSpeed's
TFLOP/s (BLOOM) is ``24 * 4 * B s L h^2 (1 + s / 6h + V / 16Lh)`` with checkpointing, which equals
flowherd's hardware FLOPs of the same run (4 passes of every layer, 3 of the logits).

Known residuals (measured with the command below: 74 of the 88 default rows within 10%, 8 beyond 20%;
each row beyond 10% is printed with what it lacks, measured: its error with communication free;
docs/fidelity.md groups them by cause):

* Megatron-Core r0.8.0 on H100 (BF16): with communication free the kernels alone run 18-38% faster than
  published on every row, where the NeMo FP8 and LLM Foundry BF16 H100 rows fit; the settings the README
  leaves out (micro-batch, interleaving depth, recomputation, dropout) are not fitted
  (``--micro-batch-size`` has no default in megatron/training/arguments.py; recomputation defaults to
  none, ``--attention-dropout`` and ``--hidden-dropout`` to 0.1). The data-parallel wire bound of the
  PP = 1 rows (`published_bounds`, printed as its own table) says the same from the other side: the
  published iterations leave room for kernels at most 1.14-1.23x flowherd's time, never less than 1x
  except GPT-32B at micro-batch 1 (0.81x: its FP32 gradients, 47/48 of 15.8 GB per GPU through one
  400 Gb/s NIC, hide at most behind the last of 4 backwards), which is why that row runs micro-batch 2
  (-2.9%; at 1 it was -19.0% with 35.6% of the iteration exposed). The strong-scaling trend holds (96 ->
  1,152 GPUs 0.972 against 0.971; with --all 96 -> 4,608), the weak-scaling one 48 -> 768 GPUs 1.017
  against 1.027.
* Eager PyTorch FSDP (IBM's fms-fsdp, Llama 2 7B, hybrid sharding): A100 +16.1%, H100 +24.5%, the
  kernels alone +18% / +27%: flowherd's eager kernels are optimistic there, more on H100, while the
  LLM Foundry rows (eager FSDP over FP32 weights and Triton attention, which the sustained fractions
  were fitted on) fit.
* LLM Foundry's MPT-1b runs lose 3.5% per GPU from 16 to 64 GPUs at the same micro-batch; flowherd
  keeps them flat (its exposed communication stays under 1%): no straggler or jitter measurement is
  modelled.
* MPT-30b at 8,192 tokens on 8 GPUs runs 20% (H100) and 30% (A100) slower than modelled, far below
  its own 4,096-token rows (-6..-7%), with its communication under 0.5% of the iteration: 30b FSDP on
  8 GPUs holds FP32 weights, FP32 gradients and Adam's two FP32 moments (``decoupled_adamw`` in
  mpt-30b.yaml: 16 bytes x 3.75e9 parameters = 60 GB of the 80) before any activation or gathered
  layer; no measured cost of running PyTorch's caching allocator at its limit is modelled.
* BLOOM +9.6% (kernels alone about +21%) against its logged 104.70 s per iteration and "TFLOPs: 149.77"
  (bigscience train/tr11-176B-ml/README.md, iteration 85,376; the same FLOP count as flowherd's). Its
  ``CUDA_LAUNCH_BLOCKING=1`` is not the cause: the same README says it "makes a tiny impact or no impact
  at all to the throughput", and even 10 us of host gap on each of the ~400 kernels of a micro-batch on
  one stage is under 1% of that stage's 0.5 s. A100 MPT-70b on 32 GPUs +10.9%. NeMo GPT3-5B at TP 1 +12.0%
  (its yamls run hidden and attention dropout 0.1, but cuDNN's fused attention pays 3% of the
  attention's time for it on Hopper in Megatron's sbhd layout:
  github.com/NVIDIA/TransformerEngine/issues/3312, H200, 4 x 4096 tokens, head dim 128, forward +
  backward 0.594 -> 0.614 ms; under 1% of this row's iteration), Llama 3 8B with CP 2 +9.4%; the larger
  NeMo rows within -6..+7%.

Usage::

    PYTHONPATH=src python benchmarks/published.py            # the default rows, a few minutes
    PYTHONPATH=src python benchmarks/published.py --gpu a100 # one GPU type
    PYTHONPATH=src python benchmarks/published.py --all      # also 280-6144 GPU rows (minutes each)
    PYTHONPATH=src python benchmarks/published.py --series --all  # the scaling series only
    PYTHONPATH=src python benchmarks/published.py --profile "MPT-7b s=2048 8xH100"  # op by op
    PYTHONPATH=src python benchmarks/published.py --source Megatron-Core --set recompute=full  # what if
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

import published_bounds as pb  # benchmarks/published_bounds.py
import record  # benchmarks/record.py
from flowherd.cluster.executor import CollectiveCache, add_graph, prepare_graph
from flowherd.engine.core import Engine
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.routing.policies import make_router
from flowherd.workload import compute as cm
from flowherd.workload.opgraph import TaskKind
from flowherd.workload.training import Granularity, rank_to_gpu

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
# the strong-scaling series shares its 2304-GPU point with the weak-scaling table
SERIES_EXTRA = {STRONG: "GPT-177B TP8 PP6 VP8 2304xH100"}


def scenario(row: Row) -> dict:
    """The single-job scenario of a row."""
    servers = max(1, row.gpus // 8)
    leaves = next(k for k in range(max(1, servers // 16), 0, -1) if servers % k == 0)
    return {
        "name": f"published-{row.gpu}",
        "fabric": {"kind": "leaf-spine", "servers": servers, "gpus_per_server": 8, "gpu": row.gpu,
                   "leaves": leaves, "spines": leaves, "oversubscription": 1, "link_latency": "1us",
                   "nic_bandwidth": row.nic, "nvlink_bandwidth": NVLINK[row.gpu]},
        "workload": {"jobs": [{
            "name": "job", "model": row.model, "gpus": row.gpus,
            "parallelism": {"tp": row.tp, "pp": row.pp, "dp": row.dp, "cp": row.cp,
                            "virtual_stages": row.virtual_stages,
                            "sequence_parallel": row.sequence_parallel, "zero": row.zero, "fsdp": row.fsdp,
                            "fsdp_shard": row.fsdp_shard},
            "recompute": row.recompute, "attention": row.attention, "param_bytes": row.param_bytes,
            "grad_bytes": row.grad_bytes, "grad_accumulation": row.grad_accumulation,
            "pipeline_engine": row.pipeline_engine, "framework": row.framework,
            "tp_comm_overlap": row.tp_comm_overlap, "overlap_param_gather": row.overlap_param_gather,
            "overlap_grad_reduce": row.overlap_grad_reduce,
            "precision": row.precision, "micro_batch": row.micro_batch,
            "global_batch": row.global_batch, "seq_len": row.seq_len, "iterations": 1,
        }]},
        "simulation": {"fidelity": "collective", "horizon": "10h"},
    }


def simulate(row: Row) -> dict:
    """flowherd's iteration time, tokens/s/GPU, MFU, HFU and hardware TFLOP/s of a row."""
    run = run_scenario(scenario_from_mapping(scenario(row)), solo=False)
    job = run.jobs[0]
    it = job["mean_iteration_s"]
    peak = {"h100": 989e12, "a100": 312e12}[row.gpu]
    return {"iteration_s": it, "tokens": row.global_batch * row.seq_len / (it * row.gpus), "mfu": job["mfu"],
            "hfu": job["hfu"], "tflops": job["hfu"] * peak / 1e12, "model_tflops": job["mfu"] * peak / 1e12,
            "comm_share": job["comm_share"]}


def error(row: Row, got: dict, *, compute_only: bool = False) -> float:
    """The throughput error of a simulated row (an iteration time's inverse); ``compute_only``: as if
    its communication took no time (the compute critical path alone)."""
    mine = got[row.metric]
    if compute_only:  # every metric but the iteration time is a throughput
        f = 1.0 - got["comm_share"]
        mine = mine * f if row.metric == "iteration_s" else mine / f
    return row.published / mine - 1 if row.metric == "iteration_s" else mine / row.published - 1


def published_iteration_s(row: Row) -> float:
    """The iteration time a row's published figure implies."""
    job = scenario_from_mapping(scenario(row)).jobs[0]
    if row.metric == "iteration_s":
        return row.published
    if row.metric == "tokens":
        return row.global_batch * row.seq_len / (row.published * row.gpus)
    peak = {"h100": 989e12, "a100": 312e12}[row.gpu]
    flops = {"model_tflops": job.model_flops(), "tflops": job.iteration_flops()}.get(row.metric)
    if flops is not None:
        return flops / (row.published * 1e12 * row.gpus)
    flops = job.model_flops() if row.metric == "mfu" else job.iteration_flops()
    return flops / (row.published * peak * row.gpus)


def wire_bound(row: Row) -> list | None:
    """The data-parallel wire bound of a row (`published_bounds`): micro-batches, least reduce-scatter
    and all-gather time, least iteration with flowherd's kernels, the published iteration, and the
    largest factor on flowherd's kernel times the published figure leaves; None where it does not
    apply."""
    b = pb.dp_wire_bound(scenario_from_mapping(scenario(row)).jobs[0], pb.nic_rate(row.nic))
    if b is None:
        return None
    pub = published_iteration_s(row)
    return [row.label, b.micro_batches, round(b.reduce_s, 3), round(b.gather_s, 3), round(b.iteration_s(), 3),
            round(pub, 3), round(pb.kernel_scale_for(b, pub), 3)]


def missing(row: Row, got: dict) -> str:
    """What a row beyond 10% lacks, as the simulation measures it: whether its kernels alone already
    miss the published throughput (communication free), or only the exposed communication does."""
    err, bare = error(row, got), error(row, got, compute_only=True)
    bound = wire_bound(row)
    if bound is not None and bound[-1] < 1.0:
        return (f"setting: at micro-batch {row.micro_batch} the data-parallel bytes alone leave the "
                f"published {bound[5]:.3f} s room only for kernels {bound[-1]:.2f}x flowherd's time (least "
                f"iteration {bound[4]:.3f} s with them): the run's unpublished micro-batch is larger")
    if err > 0.10 and bare > 0.10:
        return (f"compute: with communication free the kernels alone run {bare:+.1%} against the published "
                f"throughput (exposed communication {got['comm_share']:.1%}): a cost of the run's kernels or "
                "its host is not modelled")
    if err > 0.10:
        return (f"communication: the kernels alone give {bare:+.1%}, the {got['comm_share']:.1%} of exposed "
                "communication is too little")
    if bare < -0.10:
        return f"compute: the kernels alone run {bare:+.1%}, slower than published"
    return (f"communication: {got['comm_share']:.1%} of the iteration exposed; with it free the row "
            f"would be {bare:+.1%}")


def profile(row: Row) -> None:
    """Print a row's kernels op by op and its simulated iteration task group by task group."""
    sc = scenario_from_mapping(scenario(row))
    job, fab = sc.jobs[0], sc.fabric
    m, g = job.model, job.gpu
    kw = dict(micro_batch=job.micro_batch, seq_len=job.seq_len, tp=job.tp, cp=job.cp)
    ops = cm.layer_ops(m, 0, g, ep=job.ep, sequence_parallel=job.sequence_parallel, attention=job.attention,
                       param_bytes=job.param_bytes, precision=job.precision, **kw)
    head = cm.head_ops(m, g, param_bytes=job.param_bytes, **kw)
    k = cm.kernel_model(g).sustained_fraction
    print(f"{row.label}: one micro-batch on one rank, kernels in isolation (sustained_fraction {k} "
          f"divides them in the run)")
    print(f"{'op':<18} {'GFLOP':>9} {'fwd ms':>9} {'fwd TFLOP/s':>12} {'bwd ms':>9} {'share':>6}")
    total = sum(o.fwd_s + o.bwd_s for o in ops) * m.layers + sum(o.fwd_s + o.bwd_s for o in head)
    for where, group, n in (("layer", ops, m.layers), ("head", head, 1)):
        for o in group:
            rate = f"{o.flops / o.fwd_s / 1e12:.0f}" if o.flops else "-"
            print(f"{where + '/' + o.name:<18} {o.flops / 1e9:>9.1f} {o.fwd_s * 1e3:>9.3f} {rate:>12} "
                  f"{o.bwd_s * 1e3:>9.3f} {n * (o.fwd_s + o.bwd_s) / total:>6.1%}")
    rtr = make_router(sc.routing, fab, seed=sc.seed)
    gps = int(np.bincount(fab.gpu_server).max())
    mapping = rank_to_gpu(job, np.arange(job.gpus), gps, gpu_server=fab.gpu_server)
    graph = job.iteration_graph(Granularity.STAGE)
    eng = Engine(fab, rtr, record_flows=False)
    ids: list[int] = []
    add_graph(eng, prepare_graph(graph, mapping, CollectiveCache(fab, rtr)), fidelity="collective",
              at_s=0.0, task_ids=ids)
    eng.run()
    fin = np.array([eng.coflow_finish_s(i) for i in ids])
    agg: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for t in graph.tasks:  # a task lasts from its last dependency's end to its own end
        ready = max((fin[d] for d in t.deps), default=0.0)
        a = agg[(t.group or "compute", t.phase)]
        a[0] += 1
        a[1] += t.duration_s if t.kind == TaskKind.COMPUTE else fin[t.id] - ready
        a[2] += t.total_bytes
    it, crit = float(eng.now_s), graph.critical_path_s()
    print(f"iteration {it * 1e3:.1f} ms, compute critical path {crit * 1e3:.1f} ms: communication "
          f"exposes {(it - crit) * 1e3:.1f} ms ({1 - crit / it:.1%})")
    print(f"{'group/phase':<18} {'tasks':>6} {'busy ms':>10} {'GB':>9}  (stage 0 and all stages alike)")
    for (grp, ph), (n, busy, size) in sorted(agg.items()):
        print(f"{grp + '/' + ph:<18} {n:>6} {busy * 1e3:>10.1f} {size / 1e9:>9.2f}")


def _fmt(metric: str, x: float) -> str:
    return {"tokens": f"{x:.0f} tok/s", "mfu": f"{x:.1%} MFU", "hfu": f"{x:.1%} HFU",
            "tflops": f"{x:.0f} TFLOP/s", "model_tflops": f"{x:.0f} TFLOP/s",
            "iteration_s": f"{x:.1f} s/it"}[metric]


def _throughput(row: Row, x: float) -> float:
    """Per-GPU throughput of a metric value (an iteration time's inverse)."""
    return 1.0 / x if row.metric == "iteration_s" else x


def series_table(rows: list[Row], got: list[dict]) -> list[list]:
    """Per scaling series: published and simulated throughput ratio from the smallest to the largest
    point (GPUs), and the difference in points."""
    by: dict[str, list[tuple[Row, dict]]] = defaultdict(list)
    for r, g in zip(rows, got, strict=True):
        if r.series:
            by[r.series].append((r, g))
        for name, label in SERIES_EXTRA.items():
            if r.label.startswith(label):
                by[name].append((r, g))
    expected: dict[str, int] = defaultdict(int)
    for r in ROWS:
        expected[r.series] += 1
        for name, label in SERIES_EXTRA.items():
            expected[name] += r.label.startswith(label)
    out = []
    for name, pts in by.items():
        if len(pts) < 2:
            continue
        if len(pts) < expected[name]:
            name = f"{name} [partial: --all for every point]"
        pts.sort(key=lambda t: t[0].gpus)
        (r0, g0), (r1, g1) = pts[0], pts[-1]
        pub = _throughput(r1, r1.published) / _throughput(r0, r0.published)
        sim = _throughput(r1, g1[r1.metric]) / _throughput(r0, g0[r0.metric])
        out.append([name, len(pts), r0.gpus, r1.gpus, round(pub, 3), round(sim, 3),
                    round(100 * (sim - pub), 1), round(g0["comm_share"], 3), round(g1["comm_share"], 3)])
    return out


def settings(pairs: list[str]) -> dict:
    """``FIELD=VALUE`` pairs as `Row` replacements, each value of its field's type (``none`` for None)."""
    fields = {f.name: f for f in dataclasses.fields(Row)}
    out: dict = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or key not in fields or key in ("source", "label", "model", "published", "metric"):
            raise SystemExit(f"--set: expected FIELD=VALUE with FIELD a run setting of Row, got {pair!r}")
        kind = str(fields[key].type)
        if text.lower() == "none":
            out[key] = None
        elif kind.startswith("bool"):
            out[key] = text.lower() in ("1", "true", "yes", "on")
        elif kind.startswith("int"):
            out[key] = int(text)
        else:
            out[key] = text
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=sorted(NVLINK), help="only the rows of one GPU type")
    ap.add_argument("--source", help="only rows whose source contains this text")
    ap.add_argument("--series", action="store_true", help="only the rows of the scaling series")
    ap.add_argument("--all", action="store_true",
                    help="also the rows that take minutes each (Megatron 530B and 1T, MT-NLG, scaling rows "
                         "above 1,152 GPUs)")
    ap.add_argument("--set", metavar="FIELD=VALUE", action="append", default=[],
                    help="run the selected rows with a setting replaced (a Row field: micro_batch, recompute,"
                         " virtual_stages...); repeatable; such runs are not recorded")
    ap.add_argument("--profile", metavar="LABEL",
                    help="print the op-by-op breakdown of the first row whose label contains LABEL")
    args = ap.parse_args()
    if args.profile:
        profile(next(r for r in ROWS if args.profile in r.label))
        return
    changes = settings(args.set)
    rows = [r for r in ROWS if (args.gpu is None or r.gpu == args.gpu) and (args.all or not r.slow)
            and (args.source is None or args.source.lower() in r.source.lower())
            and (not args.series or r.series or any(r.label.startswith(x) for x in SERIES_EXTRA.values()))]
    rows = [dataclasses.replace(r, **changes) for r in rows]
    t0 = time.perf_counter()
    errors, got, printed = [], [], []
    print(f"{'source':<66} {'configuration':<66} {'published':>15} {'flowherd':>15} {'error':>7} {'MFU':>6} "
          f"{'exposed':>7}")
    for r in rows:
        t_row = time.perf_counter()
        g = simulate(r)
        got.append(g)
        mine = g[r.metric]
        err = error(r, g)  # of the throughput: an iteration time is its inverse
        errors.append(err)
        printed.append([r.source, r.label, _fmt(r.metric, r.published), _fmt(r.metric, mine),
                        round(100 * err, 1), round(g["mfu"], 3), round(g["comm_share"], 3)])
        print(f"{r.source:<66} {r.label:<66} {_fmt(r.metric, r.published):>15} {_fmt(r.metric, mine):>15} "
              f"{err:>+7.1%} {g['mfu']:>6.1%} {g['comm_share']:>7.1%} {time.perf_counter() - t_row:>5.0f} s",
              flush=True)
    within = sum(abs(e) <= 0.10 for e in errors)
    beyond = sum(abs(e) > 0.20 for e in errors)
    worst = max(errors, key=abs)
    gpus = sorted({r.gpu for r in rows})
    held = [e for r, e in zip(rows, errors, strict=True) if r.held_out]
    print(f"{within} of {len(rows)} rows within 10% (throughput), {beyond} beyond 20%; "
          f"worst error {worst:+.1%}; "
          f"held out (not fitted on): {sum(abs(e) <= 0.10 for e in held)} of {len(held)} within 10%; "
          f"GPU types: {', '.join(gpus)}; {time.perf_counter() - t0:.0f} s")
    off = [(r, g) for r, g in zip(rows, got, strict=True) if abs(error(r, g)) > 0.10]
    if off:
        print("\nrows beyond 10%: what is missing, measured")
    for r, g in off:
        print(f"  {r.label:<66} {error(r, g):>+7.1%}  {missing(r, g)}")
    bounds = [b for b in (wire_bound(r) for r in rows) if b is not None]
    if bounds:
        print(f"\n{'data-parallel wire bound (PP = 1, distributed optimizer)':<66} {'micro':>5} {'RS s':>6} "
              f"{'AG s':>6} {'least it':>8} {'published':>9} {'kernels <=':>10}")
    for label, m, rs, ag, least, pub, scale in bounds:
        print(f"{label:<66} {m:>5} {rs:>6.3f} {ag:>6.3f} {least:>8.3f} {pub:>9.3f} {scale:>9.2f}x")
    series = series_table(rows, got)
    if series:
        print(f"\n{'scaling series':<62} {'points':>6} {'GPUs':>12} {'published':>9} {'flowherd':>9} "
              f"{'diff':>6} {'exposed':>13}")
    for name, n, g0, g1, pub, sim, diff, c0, c1 in series:
        print(f"{name:<62} {n:>6} {f'{g0}->{g1}':>12} {pub:>9.3f} {sim:>9.3f} {diff:>+5.1f}p "
              f"{f'{c0:.1%}->{c1:.1%}':>13}")
    if args.gpu is None and args.source is None and not changes:
        name = "published" + ("_all" if args.all else "") + ("_series" if args.series else "")
        figures = {
            "rows within 10%": record.figure(within, f"of {len(rows)}", target=">= 90%",
                                             met=within >= 0.9 * len(rows)),
            "rows beyond 20%": record.figure(beyond, f"of {len(rows)}", target="0", met=beyond == 0),
            "worst throughput error": record.figure(round(100 * worst, 1), "%"),
        }
        for s_name, _, g0, g1, *_, diff, _, _ in series:
            whole = "partial" not in s_name
            figures[f"{s_name} {g0}->{g1} GPUs: throughput ratio, flowherd - published"] = record.figure(
                diff, "points", target="|diff| <= 3" if whole else None,
                met=abs(diff) <= 3 if whole else None)
        record.save(name, figures, tables=[
            record.table("rows", ["source", "configuration", "published", "flowherd", "error %", "MFU",
                                  "exposed communication share"], printed),
            record.table("rows beyond 10%: what is missing", ["configuration", "error %", "missing"],
                         [[r.label, round(100 * error(r, g), 1), missing(r, g)] for r, g in off]),
            record.table("scaling series", ["series", "points", "smallest GPUs", "largest GPUs",
                                            "published ratio", "flowherd ratio", "diff (points)",
                                            "exposed share smallest", "exposed share largest"], series),
            record.table("data-parallel wire bound (PP = 1, distributed optimizer)",
                         ["configuration", "micro-batches", "least reduce-scatter s", "least all-gather s",
                          "least iteration s with flowherd's kernels", "published iteration s",
                          "largest factor on flowherd's kernel times"], bounds)],
            notes="Per-GPU throughput of published training runs against flowherd's simulation of each run "
                  "on its idle fabric; exposed share = 1 - compute critical path / iteration.")


if __name__ == "__main__":
    main()
