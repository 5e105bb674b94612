"""Training jobs: the parallelism spec and the op graph of one iteration.

Rank layout (Megatron-LM order, ``megatron/core/parallel_state.py``): TP innermost, then CP, then DP
(EP is carved out of DP), PP outermost::

    rank = t + tp * (c + cp * (d + dp * p))       t < tp, c < cp, d < dp, p < pp

so a TP group is ``tp`` consecutive ranks and `rank_to_gpu` keeps it inside one server.
Expert parallelism follows DeepSpeed-MoE / Megatron-core with expert-tensor-parallel = ``tp``: the
``ep`` ranks of an EP group are ``ep`` consecutive DP indices (``d = e_dp * ep + e``), so **ep must
divide dp** and the experts of a layer are split ``experts / ep`` per rank (**ep must divide
experts**); expert gradients are reduced over the ``dp / ep`` "expert data-parallel" ranks (times cp).

Message sizes (``a`` = ``dtype_bytes``, ``b`` micro-batch, ``s`` sequence, ``h`` hidden, ``s_c = s / cp``),
nccl-tests convention (`flowherd.collectives.ops`):

* TP, Megatron (Shoeybi et al. 2019, section 3; Narayanan et al. SC'21, section 3.3): per layer and
  micro-batch 2 AllReduce in forward and 2 in backward, each of ``b * s_c * h * a`` bytes. With sequence
  parallelism (Korthikanti et al. 2022, section 4.2.2) each AllReduce becomes a ReduceScatter plus an
  AllGather of the same buffer (same bytes on the wire). Activation recomputation (Korthikanti 2022,
  section 5) repeats the forward collectives in the backward pass.
* PP (Narayanan et al. SC'21, section 4.1, scatter/gather optimization): per micro-batch one activation
  send forward and one gradient send backward across each of the ``pp - 1`` stage boundaries, each
  ``b * s_c * h * a`` bytes per pipeline, split into ``tp`` SendRecv of ``1 / tp`` (one per TP rank).
  With ``virtual_stages = V`` every micro-batch crosses ``pp * V - 1`` chunk boundaries instead
  (Megatron's interleaved schedule, `flowherd.workload.pipeline`).
* DP (Li et al., "PyTorch Distributed", VLDB 2020): gradients are accumulated over micro-batches and
  synchronized during the last micro-batch's backward in buckets of ``bucket_bytes`` (DDP's
  ``bucket_cap_mb = 25``, i.e. 25 MiB); layers fill buckets in backward order, a bucket holds whole
  layers and closes once it reaches the cap, and bucket ``k`` starts when the backward of its last
  layer is done and bucket ``k - 1`` has finished. Convention: gradients are reduced in ``grad_bytes``
  (default 2, BF16); per rank a stage's gradients are ``params_stage / tp * grad_bytes`` (routed experts
  ``/ (tp * ep)``), i.e. ``params / (tp * pp) * grad_bytes`` on average.
* ZeRO (Rajbhandari et al., SC'20, section 7; DeepSpeed ``stage_1_and_2.py`` / ``stage3.py``): stage 1:
  the gradient buckets are ReduceScatter instead of AllReduce, at the last micro-batch, and the updated
  parameters are AllGathered after the optimizer step (same 2x volume as DP; Megatron's distributed
  optimizer does the same); stage 2: gradients are partitioned as they are produced, so every
  micro-batch's backward ReduceScatters its buckets (DeepSpeed without ``no_sync``); stage 3 (=
  PyTorch FSDP ``FULL_SHARD``, ``fsdp: true``): per micro-batch each layer's parameters are
  AllGathered before its forward and again before its backward (prefetched one layer ahead,
  ``BACKWARD_PRE`` and ``limit_all_gathers``: layer ``k + 1``'s gather runs while layer ``k``
  computes, so the graph keeps one task per layer at either granularity) and its gradients
  ReduceScattered after its backward (3x volume; gathers in ``param_bytes``, 4 for FSDP over FP32
  weights, reductions in ``grad_bytes``). The optimizer
  states are sharded over the data-parallel ranks from stage 1 on.
* EP (Lepikhin et al., GShard 2020; Rajbhandari et al., DeepSpeed-MoE 2022): per MoE layer and
  micro-batch an AllToAll dispatch and combine in forward and their two transposes in backward. Each
  rank sends ``tokens * top_k * h * a`` bytes (``size_bytes``; ``1 / ep`` of it to each EP rank), where
  a TP rank dispatches its ``1 / tp`` share of the ``b * s_c`` tokens (as with sequence parallelism).
* CP (ring attention; Liu et al. 2023, Megatron-core context parallelism): per layer and micro-batch the
  K/V chunks travel around the ring in forward (an AllGather of ``b * s * kv_width / tp * a`` bytes,
  overlapped with the attention compute) and in backward K/V plus their gradients (an AllGather and a
  ReduceScatter of that size).

Compute (`flowherd.workload.compute`): every GEMM, attention, norm and elementwise kernel of a layer
timed on the job's GPU type from fitted, cited kernel measurements; with an explicit ``efficiency`` a
pass lasts ``flops / (peak_bf16_flops * efficiency)`` instead (FLOPs from `ModelShape`, Narayanan et
al. SC'21 appendix, backward = 2x forward). Recomputation (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models"): ``full`` repeats every layer's forward
(not the output head) and its TP/EP collectives before the backward; ``selective`` repeats only
the attention core (``Q K^T``, softmax, ``P V``: section 5), without extra traffic.
Schedules (1F1B, interleaved) and the optimizer step: `flowherd.workload.pipeline`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from flowherd.collectives.ops import busbw_factor
from flowherd.errors import ConfigError
from flowherd.units import MiB
from flowherd.workload.compute import ATTENTION, PRECISIONS, fp8_peak_flops, layer_ops
from flowherd.workload.frameworks import FRAMEWORKS, per_op_recompute_linears
from flowherd.workload.gpus import GpuSpec, get_gpu
from flowherd.workload.models import ModelShape, get_model
from flowherd.workload.opgraph import OpGraph, Task, TaskKind
from flowherd.workload.pipeline import build_iteration


class Granularity(StrEnum):
    """How finely an iteration is cut: a chunk of tasks per layer, or per (stage, micro-batch, phase)."""

    LAYER = "layer"
    STAGE = "stage"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingJob:
    """A training job: model, hardware, parallelism and batch.

    Attributes:
        model: A catalog name, a `ModelShape`, or a mapping that builds one.
        gpus: Total GPUs; must equal ``tp * pp * dp * cp``.
        gpu: GPU catalog name or `GpuSpec`.
        name, tenant: Labels.
        tp, pp, dp, ep, cp: Tensor, pipeline, data, expert and context parallel sizes; ``dp`` defaults to
            ``gpus / (tp * pp * cp)``. ``ep`` divides ``dp`` and the model's ``experts``.
        zero_stage: 0 (plain DP), 1, 2, or 3 (= FSDP).
        sequence_parallel: Megatron sequence parallelism (TP AllReduce -> ReduceScatter + AllGather).
        activation_recompute: Old spelling of ``recompute="full"``.
        recompute: "none", "selective" (attention core) or "full" (module docstring).
        attention: The attention kernels, "flash" (default; FlashAttention-3 on H100), "triton"
            (FlashAttention in Triton), "cudnn" (cuDNN's fused attention, Transformer Engine's
            choice on Hopper) or "unfused" (Megatron-LM before flash attention;
            `flowherd.workload.compute`).
        virtual_stages: Megatron's virtual pipeline stages per rank (1: plain 1F1B); needs
            ``layers >= pp * virtual_stages`` and, if > 1, at least ``pp`` micro-batches.
        first_stage_layers, last_stage_layers: Megatron's ``num_layers_in_first/last_pipeline_stage``
            (uneven split; the other stages share the rest evenly). Without them layers are split
            over the ``pp * virtual_stages`` model chunks as evenly as possible, the first chunks
            taking one more (as ``numpy.array_split``), where Megatron would require divisibility.
        fsdp: PyTorch FSDP full sharding, i.e. ``zero_stage=3``.
        fsdp_shard: Hybrid sharding (PyTorch FSDP's ``HYBRID_SHARD``, torchtitan's
            ``data_parallel_shard_degree``): parameters, gradients and optimizer states are sharded
            over groups of ``fsdp_shard`` consecutive data-parallel ranks and replicated across the
            ``dp / fsdp_shard`` groups; each layer's all-gather and reduce-scatter stay inside its
            shard group and its reduced shard is then all-reduced across the replicas (FSDP's
            ``_post_backward_hook`` -> ``_reduce_grad``: ``reduce_scatter_tensor`` over the shard
            group, then ``all_reduce`` over the inter-node group; torch/distributed/fsdp/
            _runtime_utils.py). None (default): one shard group of all ``dp`` ranks. Needs ZeRO-3 /
            FSDP, ``cp == 1`` and ``ep == 1``, and must divide ``dp``.
        seq_len: Tokens per sequence.
        micro_batch: Sequences per micro-batch per replica.
        global_batch: Sequences per iteration; a multiple of ``micro_batch * dp``. Defaults to
            ``2 * pp`` micro-batches per replica.
        iterations: Iterations the job runs.
        efficiency: An explicit fraction of the GPU's peak FLOP/s for every pass, in (0, 1]; None
            (default): the compute model of `flowherd.workload.compute`.
        dtype_bytes: Bytes per activation / parameter element (2: BF16).
        precision: The GEMMs' number format, "bf16" (default) or "fp8" (Transformer Engine's FP8
            projections; `flowherd.workload.compute`); activations and communication stay in
            ``dtype_bytes``.
        grad_bytes: Bytes per gradient element in the DP reduction (2: BF16; 4: FP32); None: 4
            for a job that names ``framework: megatron`` with 2-byte activations (Megatron-LM reduces
            BF16 gradients in FP32, `flowherd.workload.frameworks`), else 2.
        param_bytes: Bytes per element of the weights the framework keeps and (ZeRO-3 / FSDP)
            all-gathers; None (default): ``dtype_bytes``. 4 is PyTorch FSDP with FP32 parameters
            under autocast (Composer's ``mixed_precision: DEFAULT``): every forward casts the weights
            to ``dtype_bytes`` and every backward casts their gradients back
            (`flowherd.workload.compute.layer_ops`).
        grad_accumulation: How gradients are summed over micro-batches: "fused" (default; Megatron's
            ``gradient_accumulation_fusion``, the weight-gradient GEMM adds into the FP32 main
            gradient; DDP/FSDP accumulate in place) or "fp32-buffer" (DeepSpeed's ``BF16_Optimizer``:
            its pipeline engine calls ``update_hp_grads`` after every micro-batch's backward, a
            separate cast-and-add of each BF16 gradient into an FP32 buffer;
            `flowherd.workload.compute.grad_accumulation_s`).
        pipeline_engine: Whose pipeline engine runs the schedule: "megatron" (default; sends are
            asynchronous, gradients reduced in buckets during the last backward) or "deepspeed"
            (DeepSpeed's ``PipelineEngine``, as Megatron-DeepSpeed runs it: blocking sends, the
            data-parallel AllReduce of the gradients after the pipeline's last backward;
            `flowherd.workload.pipeline`). Needs ``zero_stage <= 1`` and ``virtual_stages == 1``
            (DeepSpeed's pipeline has neither ZeRO-2/3 nor interleaving).
        bucket_bytes: Gradient bucket cap, bytes; None: the named framework's (Megatron-Core
            ``max(4e7, 1e6 * dp)`` parameters, PyTorch DDP 25 MiB, NeMo 125 MiB;
            `flowherd.workload.frameworks`), 25 MiB when none is named; ``math.inf`` makes one
            bucket per stage, i.e. the gradient sync starts after the whole backward pass.
        overlap_grad_reduce: Reduce the gradients bucket by bucket during the last backward (True)
            or in one bucket after it (False: Megatron without ``--overlap-grad-reduce``); None: the
            framework's default.
        framework: The training framework, a `flowherd.workload.frameworks.FRAMEWORKS` name
            ("megatron", "nemo", "deepspeed", "torchtitan", "pytorch" / "fsdp" / "eager"): its
            kernels (fused or eager), what ``recompute: selective`` repeats, whether 1F1B sends
            block, its gradient buckets and the defaults of the overlap switches below. None
            (default): Megatron-LM's, with PyTorch DDP's 25 MiB buckets (`DDP_BUCKET_BYTES`).
        tp_comm_overlap: Transformer Engine's userbuffers overlap of the sequence-parallel TP
            collectives with the GEMMs (`flowherd.workload.pipeline`); needs
            ``sequence_parallel``. None: the framework's default.
        overlap_param_gather: ZeRO-1's all-gather of the updated weights overlapped with the next
            forward, bucket by bucket (Megatron's ``--overlap-param-gather``); None: the
            framework's default.
        cp_comm: How context parallelism exchanges K/V: "p2p" (Transformer Engine's ring, the
            default) or "all-gather" (every rank gathers the whole sequence's K/V before its
            attention and reduce-scatters their gradients: TE's ``cp_comm_type="all_gather"``, Llama
            3's context parallelism; `flowherd.workload.pipeline`).
        submit_s: Submission time, seconds.
    """

    model: ModelShape
    gpus: int
    gpu: GpuSpec = "h100"  # type: ignore[assignment]
    name: str = "job"
    tenant: str = "default"
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    ep: int = 1
    cp: int = 1
    zero_stage: int = 0
    sequence_parallel: bool = False
    activation_recompute: bool = False
    recompute: str = "none"
    attention: str = "flash"
    virtual_stages: int = 1
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    fsdp: bool = False
    fsdp_shard: int | None = None
    seq_len: int = 4096
    micro_batch: int = 1
    global_batch: int | None = None
    iterations: int = 1
    efficiency: float | None = None
    dtype_bytes: int = 2
    precision: str = "bf16"
    grad_bytes: int | None = None
    param_bytes: int | None = None
    grad_accumulation: str = "fused"
    pipeline_engine: str | None = None
    bucket_bytes: float | None = None
    framework: str | None = None
    tp_comm_overlap: bool | None = None
    overlap_param_gather: bool | None = None
    overlap_grad_reduce: bool | None = None
    cp_comm: str = "p2p"
    submit_s: float = 0.0
    _chunk_layers: tuple[range, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", get_model(self.model))
        object.__setattr__(self, "gpu", get_gpu(self.gpu))
        w = f"job {self.name!r}"
        if self.grad_bytes is None:  # the named framework's reduction dtype (`Framework.fp32_grad_reduce`)
            known = isinstance(self.framework, str) and self.framework in FRAMEWORKS
            fw0 = FRAMEWORKS[self.framework] if known else None
            wide = fw0 is not None and fw0.fp32_grad_reduce and self.dtype_bytes == 2
            object.__setattr__(self, "grad_bytes", 4 if wide else 2)
        for f in ("gpus", "tp", "pp", "ep", "cp", "seq_len", "micro_batch", "iterations", "dtype_bytes",
                  "grad_bytes"):
            _pos_int(getattr(self, f), f, w)
        rest = self.tp * self.pp * self.cp
        if self.dp is None:
            if self.gpus % rest:
                raise ConfigError(
                    f"{w}: tp*pp*cp = {self.tp}*{self.pp}*{self.cp} = {rest} must divide gpus, got "
                    f"gpus={self.gpus} (parallelism)"
                )
            object.__setattr__(self, "dp", self.gpus // rest)
        _pos_int(self.dp, "dp", w)
        if rest * self.dp != self.gpus:
            raise ConfigError(
                f"{w}: tp*pp*dp*cp = {self.tp}*{self.pp}*{self.dp}*{self.cp} = {rest * self.dp} must equal "
                f"gpus={self.gpus} (parallelism)"
            )
        m = self.model
        if self.pp > m.layers:
            raise ConfigError(f"{w}: pp must be <= layers={m.layers}, got {self.pp} (pp)")
        if m.heads % self.tp:
            raise ConfigError(f"{w}: tp must divide the model's heads={m.heads}, got {self.tp} (tp)")
        if self.seq_len % self.cp:
            raise ConfigError(f"{w}: cp must divide seq_len={self.seq_len}, got {self.cp} (cp)")
        if self.ep > 1:
            if not m.is_moe:
                raise ConfigError(f"{w}: ep > 1 needs an MoE model, {m.name!r} has no experts (ep)")
            if self.dp % self.ep:
                raise ConfigError(f"{w}: ep must divide dp={self.dp}, got {self.ep} (ep)")
            if m.experts % self.ep:
                raise ConfigError(f"{w}: ep must divide the model's experts={m.experts}, got {self.ep} (ep)")
        if self.zero_stage not in (0, 1, 2, 3) or isinstance(self.zero_stage, bool):
            raise ConfigError(f"{w}: zero_stage must be 0, 1, 2 or 3, got {self.zero_stage!r} (zero_stage)")
        if self.fsdp:
            if self.zero_stage not in (0, 3):
                raise ConfigError(
                    f"{w}: fsdp shards like zero_stage 3, got zero_stage={self.zero_stage} (fsdp)")
            object.__setattr__(self, "zero_stage", 3)
        if self.fsdp_shard is not None:
            _pos_int(self.fsdp_shard, "fsdp_shard", w)
            if self.zero_stage != 3 or self.cp != 1 or self.ep != 1 or self.dp % self.fsdp_shard:
                raise ConfigError(f"{w}: fsdp_shard (hybrid sharding) needs fsdp (zero_stage 3), cp = ep = 1 "
                                  f"and to divide dp={self.dp}, got fsdp_shard={self.fsdp_shard}, zero_stage="
                                  f"{self.zero_stage}, cp={self.cp}, ep={self.ep} (fsdp_shard)")
        if self.recompute not in RECOMPUTE:
            raise ConfigError(f"{w}: recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r} "
                              "(recompute)")
        if self.attention not in ATTENTION:
            raise ConfigError(f"{w}: attention must be one of {', '.join(ATTENTION)}, got {self.attention!r} "
                              "(attention)")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"{w}: precision must be one of {', '.join(PRECISIONS)}, "
                              f"got {self.precision!r} (precision)")
        if self.precision == "fp8" and self.efficiency is None:
            fp8_peak_flops(self.gpu)  # ConfigError on a GPU without FP8 tensor cores
        if self.activation_recompute:
            if self.recompute == "selective":
                raise ConfigError(f"{w}: activation_recompute means recompute='full', got recompute="
                                  f"{self.recompute!r} (recompute)")
            object.__setattr__(self, "recompute", "full")
        object.__setattr__(self, "activation_recompute", self.recompute == "full")
        _pos_int(self.virtual_stages, "virtual_stages", w)
        object.__setattr__(self, "_chunk_layers", _split_layers(self, w))
        if self.global_batch is None:
            object.__setattr__(self, "global_batch", self.micro_batch * self.dp * 2 * self.pp)
        _pos_int(self.global_batch, "global_batch", w)
        if self.global_batch % (self.micro_batch * self.dp):
            raise ConfigError(
                f"{w}: global_batch must be a multiple of micro_batch*dp = {self.micro_batch * self.dp}, "
                f"got {self.global_batch} (global_batch)"
            )
        if self.virtual_stages > 1 and self.pp == 1:
            raise ConfigError(f"{w}: virtual_stages > 1 needs pp > 1 (Megatron interleaves pipeline stages), "
                              f"got pp=1, virtual_stages={self.virtual_stages} (virtual_stages)")
        if self.virtual_stages > 1 and self.micro_batches < self.pp:
            # Megatron's interleaved schedule (schedules.py) needs micro-batch groups of pp to m
            raise ConfigError(
                f"{w}: with virtual_stages > 1 the micro-batches per replica (global_batch / "
                f"(micro_batch * dp) = {self.micro_batches}) must be at least pp={self.pp} (virtual_stages)"
            )
        if self.param_bytes is None:
            object.__setattr__(self, "param_bytes", self.dtype_bytes)
        _pos_int(self.param_bytes, "param_bytes", w)
        if self.grad_accumulation not in GRAD_ACCUMULATION:
            raise ConfigError(f"{w}: grad_accumulation must be one of {', '.join(GRAD_ACCUMULATION)}, got "
                              f"{self.grad_accumulation!r} (grad_accumulation)")
        named = self.framework is not None
        if not named:
            object.__setattr__(self, "framework", "megatron")
        if not isinstance(self.framework, str) or self.framework not in FRAMEWORKS:
            close = difflib.get_close_matches(str(self.framework), list(FRAMEWORKS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{w}: framework must be one of {', '.join(FRAMEWORKS)}, got "
                              f"{self.framework!r}{hint} (framework)")
        fw = FRAMEWORKS[self.framework]
        if self.pipeline_engine is None:
            object.__setattr__(self, "pipeline_engine", fw.pipeline_engine)
        for f in ("tp_comm_overlap", "overlap_param_gather", "overlap_grad_reduce"):
            v = getattr(self, f)
            if v is None:
                object.__setattr__(self, f, getattr(fw, f))
            elif not isinstance(v, bool):
                raise ConfigError(f"{w}: {f} must be true or false, got {v!r} ({f})")
        if self.tp_comm_overlap and self.tp > 1 and not self.sequence_parallel:
            raise ConfigError(f"{w}: tp_comm_overlap needs sequence_parallel (Transformer Engine overlaps "
                              "the sequence-parallel all-gathers and reduce-scatters), got "
                              "sequence_parallel=False (tp_comm_overlap)")
        if self.cp_comm not in CP_COMM:
            raise ConfigError(f"{w}: cp_comm must be one of {', '.join(CP_COMM)}, got {self.cp_comm!r} "
                              "(cp_comm)")
        if self.pipeline_engine not in PIPELINE_ENGINES:
            raise ConfigError(f"{w}: pipeline_engine must be one of {', '.join(PIPELINE_ENGINES)}, got "
                              f"{self.pipeline_engine!r} (pipeline_engine)")
        if self.pipeline_engine == "deepspeed" and (self.zero_stage > 1 or self.virtual_stages > 1):
            raise ConfigError(f"{w}: DeepSpeed's pipeline engine runs neither ZeRO-2/3 nor virtual stages, "
                              "got "
                              f"zero_stage={self.zero_stage}, virtual_stages={self.virtual_stages} "
                              "(pipeline_engine)")
        if self.efficiency is not None and not (
                isinstance(self.efficiency, int | float) and 0 < self.efficiency <= 1):
            raise ConfigError(f"{w}: efficiency must be in (0, 1], got {self.efficiency!r} (efficiency)")
        if self.bucket_bytes is None:
            cap = (fw.bucket_bytes(dp=self.dp * self.cp, grad_bytes=self.grad_bytes) if named
                   else DDP_BUCKET_BYTES)
            object.__setattr__(self, "bucket_bytes", cap if self.overlap_grad_reduce else math.inf)
        if not (isinstance(self.bucket_bytes, int | float) and self.bucket_bytes > 0):
            raise ConfigError(f"{w}: bucket_bytes must be positive, got {self.bucket_bytes!r} (bucket_bytes)")
        if not (math.isfinite(self.submit_s) and self.submit_s >= 0):
            raise ConfigError(f"{w}: submit_s must be non-negative, got {self.submit_s!r} (submit_s)")

    # ---- derived sizes ---------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.gpus

    @property
    def micro_batches(self) -> int:
        """Micro-batches per replica per iteration, ``global_batch / (micro_batch * dp)``."""
        return self.global_batch // (self.micro_batch * self.dp)

    def chunk_layers(self, chunk: int) -> range:
        """Layers of model chunk ``chunk`` (``v * pp + p``: virtual stage ``v`` of rank ``p``)."""
        return self._chunk_layers[chunk]

    def stage_layers(self, stage: int) -> list[int]:
        """Layers held by pipeline rank ``stage`` (all its virtual stages), in order."""
        return [i for v in range(self.virtual_stages) for i in self.chunk_layers(v * self.pp + stage)]

    def rank_grid(self) -> np.ndarray:
        """Ranks as an array of shape ``(pp, dp, cp, tp)`` (Megatron order, module docstring)."""
        return np.arange(self.world_size).reshape(self.pp, self.dp, self.cp, self.tp)

    def model_flops(self) -> float:
        """Model FLOPs of one iteration over all GPUs (the MFU numerator): ``3 * forward FLOPs``
        (Narayanan et al. SC'21 eq. 3 for GPT shapes), recomputation not counted."""
        return 3.0 * self.model.forward_flops_per_token(self.seq_len) * self.global_batch * self.seq_len

    def iteration_flops(self) -> float:
        """Hardware FLOPs of one iteration over all GPUs (the HFU numerator): model FLOPs plus what
        recomputation repeats: every layer's forward (``full``; 96 instead of 72 in Korthikanti et
        al. 2022's ``B s l h^2`` count), the attention core's forward (``selective`` under Megatron)
        or per-op checkpointing's matmuls (``selective`` under PyTorch;
        `flowherd.workload.frameworks`)."""
        m, s = self.model, self.seq_len
        tokens = self.global_batch * s
        if self.recompute == "full":
            extra = m.forward_flops_per_token(s) - m.logit_flops()
        elif self.recompute == "selective" and FRAMEWORKS[self.framework].selective == "per-op":
            extra = 0.0
            for moe in {m.layer_is_moe(i) for i in range(m.layers)}:
                i = next(k for k in range(m.layers) if m.layer_is_moe(k) == moe)
                share = per_op_recompute_linears(m, moe)
                ops = layer_ops(m, i, self.gpu, micro_batch=1, seq_len=s, ep=self.ep)
                n = sum(m.layer_is_moe(k) == moe for k in range(m.layers))
                extra += n * sum(o.flops * share.get(o.name, 0.0) for o in ops) / s
        elif self.recompute == "selective":
            extra = m.layers * m.attention_score_flops(s)
        else:
            extra = 0.0
        return self.model_flops() + extra * tokens

    def mfu(self, iteration_s: float) -> float:
        """Model FLOPs utilization at ``iteration_s`` seconds per iteration."""
        return self.model_flops() / (iteration_s * self.gpus * self.gpu.peak_bf16_flops)

    def hfu(self, iteration_s: float) -> float:
        """Hardware FLOPs utilization at ``iteration_s`` seconds per iteration."""
        return self.iteration_flops() / (iteration_s * self.gpus * self.gpu.peak_bf16_flops)

    def iteration_graph(self, granularity: Granularity | str = Granularity.STAGE) -> OpGraph:
        """The op graph of one iteration (module docstring)."""
        try:
            g = Granularity(granularity)
        except ValueError:
            raise ConfigError(
                f"granularity must be 'layer' or 'stage', got {granularity!r} (granularity)"
            ) from None
        return build_iteration(self, g == Granularity.LAYER)

    def estimate_iteration_s(self, gpus_per_server: int = 8) -> float:
        """Iteration time of the job alone on an ideal network, seconds.

        Critical path of the ``stage`` graph with each collective timed by its nccl-tests bus
        bandwidth: ``count * busbw_factor * size_bytes / bw``, ``bw`` the GPU's scale-up bandwidth
        for calls inside ``gpus_per_server`` consecutive ranks, its NIC bandwidth otherwise.
        A modelling estimate (no latency, no contention), used to turn trace durations into iterations.
        """
        spec = self.gpu
        per_call: dict[int, float] = {}  # the builder shares collective tuples between tasks

        def comm_s(task: Task) -> float:
            key = id(task.collectives)
            if key not in per_call:
                worst = 0.0
                for c in task.collectives:
                    local = min(c.gpus) // gpus_per_server == max(c.gpus) // gpus_per_server
                    bw = spec.scaleup_bytes_per_s if local else spec.nic_bytes_per_s
                    worst = max(worst, busbw_factor(c.op, c.n) * c.size_bytes / bw)
                per_call[key] = worst
            return task.count * per_call[key]

        return self.iteration_graph(Granularity.STAGE).critical_path_s(comm_s)


RECOMPUTE = ("none", "selective", "full")
DDP_BUCKET_BYTES = 25 * MiB  # PyTorch DDP's bucket_cap_mb = 25: the bucket of a job that names no framework
CP_COMM = ("p2p", "all-gather")
GRAD_ACCUMULATION = ("fused", "fp32-buffer")
PIPELINE_ENGINES = ("megatron", "deepspeed")
PARALLELISM_KEYS = ("tp", "pp", "dp", "ep", "cp", "virtual_stages", "sequence_parallel", "zero", "fsdp",
                    "fsdp_shard")


def _split_layers(job: TrainingJob, where: str) -> tuple[range, ...]:
    """Layers of each of the ``pp * V`` model chunks, in chunk order (`TrainingJob` docstring)."""
    L, pp, V = job.model.layers, job.pp, job.virtual_stages
    if pp * V > L:
        raise ConfigError(f"{where}: pp * virtual_stages must be <= layers={L}, got {pp}*{V} = {pp * V} "
                          "(virtual_stages)")
    first, last = job.first_stage_layers, job.last_stage_layers
    if first is None and last is None:
        q, r = divmod(L, pp * V)
        sizes = [q + (c < r) for c in range(pp * V)]
    else:
        for f, val in (("first_stage_layers", first), ("last_stage_layers", last)):
            if val is not None:
                _pos_int(val, f, where)
                if val % V:
                    raise ConfigError(
                        f"{where}: {f} must be a multiple of virtual_stages={V}, got {val} ({f})")
        if pp == 1:
            raise ConfigError(f"{where}: first/last_stage_layers need pp > 1 (first_stage_layers)")
        rest = L - (first or 0) - (last or 0)
        inner = pp - (first is not None) - (last is not None)
        per = rest // inner if inner else 0
        if rest < 0 or (inner and (rest % inner or per % V or per < V)) or (not inner and rest):
            raise ConfigError(
                f"{where}: the {rest} layers left by first/last_stage_layers must split evenly over the "
                f"other {inner} stages in multiples of virtual_stages={V} (first_stage_layers)")
        stage = [per] * pp
        if first is not None:
            stage[0] = first
        if last is not None:
            stage[-1] = last
        sizes = [stage[c % pp] // V for c in range(pp * V)]
    out, start = [], 0
    for c in range(pp * V):  # chunk c = v * pp + p holds the c-th slice of the layers
        out.append(range(start, start + sizes[c]))
        start += sizes[c]
    return tuple(out)


def _pos_int(value: Any, field: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {field} must be a positive integer, got {value!r} ({field})")


def rank_to_gpu(job: Any, gpus: Sequence[int] | np.ndarray, gpus_per_server: int, *,
                gpu_server: np.ndarray | None = None) -> np.ndarray:
    """Map ranks to GPUs: ``mapping[rank]`` is the GPU node id of ``rank``.

    Ranks are already in Megatron order (TP innermost, then CP, then DP/EP, PP outermost; module
    docstring), so consecutive ranks should share a server. The given GPUs are sorted by (server, id);
    each server contributes ``floor(n_s / tp) * tp`` GPUs as whole TP groups, in server order, and the
    leftovers of all servers (a fragmented placement) form the remaining groups. Hence every TP group
    lies inside one server whenever each server's share is a multiple of ``tp`` (e.g. ``tp`` divides
    ``gpus_per_server`` and whole servers are given).

    Args:
        job: A `TrainingJob` or `InferenceJob` (anything with ``tp`` and ``world_size``).
        gpus: ``world_size`` distinct GPU node ids (a placement).
        gpus_per_server: GPUs per server, used when ``gpu_server`` is not given (server = id // it).
        gpu_server: Optional server of every GPU node id (``Fabric.gpu_server``).
    """
    g = np.asarray(gpus, dtype=np.int64).ravel()
    if len(g) != job.world_size:
        raise ConfigError(
            f"job {job.name!r} needs {job.world_size} GPUs, got {len(g)} (gpus)"
        )
    if len(np.unique(g)) != len(g) or (len(g) and g.min() < 0):
        raise ConfigError(f"job {job.name!r}: GPU ids must be distinct and non-negative (gpus)")
    if gpu_server is not None:
        server = np.asarray(gpu_server)[g]
    else:
        if gpus_per_server < 1:
            raise ConfigError(f"gpus_per_server must be >= 1, got {gpus_per_server} (gpus_per_server)")
        server = g // gpus_per_server
    order = np.lexsort((g, server))
    g, server = g[order], server[order]
    tp = job.tp
    whole: list[np.ndarray] = []
    frag: list[np.ndarray] = []
    bounds = np.flatnonzero(np.diff(server)) + 1
    for block in np.split(g, bounds):
        k = len(block) // tp * tp
        whole.append(block[:k])
        frag.append(block[k:])
    return np.concatenate(whole + frag).astype(np.int64)


def training_job_from_mapping(data: Mapping[str, Any], *, field: str = "job") -> TrainingJob:
    """Build a `TrainingJob` from a mapping; unknown keys raise `ConfigError` naming them.

    A nested ``parallelism: {tp, pp, dp, ep, cp}`` mapping is flattened into the job's fields.
    """
    import dataclasses
    import difflib

    data = dict(data)
    par = data.pop("parallelism", None)
    if par is not None:
        if not isinstance(par, Mapping):
            raise ConfigError(
                f"parallelism must be a mapping of tp/pp/dp/ep/cp, got {par!r} ({field}.parallelism)"
            )
        for key, value in par.items():
            if key not in PARALLELISM_KEYS:
                raise ConfigError(f"unknown parallelism {key!r}, expected one of "
                                  f"{', '.join(PARALLELISM_KEYS)} "
                                  f"({field}.parallelism.{key})")
            data["zero_stage" if key == "zero" else key] = value
    known = [f.name for f in dataclasses.fields(TrainingJob) if f.init]
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown training job field {key!r}{hint} ({field}.{key})")
    try:
        return TrainingJob(**data)
    except TypeError as e:
        raise ConfigError(f"training job is missing a field: {e} ({field})") from None


__all__ = ["Granularity", "TaskKind", "TrainingJob", "rank_to_gpu", "training_job_from_mapping"]
