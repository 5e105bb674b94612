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
  Schedule: 1F1B (PipeDream-Flush, Narayanan et al. SC'21 section 2.2.1): stage ``p`` runs
  ``min(pp - p - 1, m)`` warm-up forwards, then alternates one forward and one backward, then drains.
  Sends are asynchronous: the sender continues, the receiver waits for the send.
* DP (Li et al., "PyTorch Distributed", VLDB 2020): gradients are accumulated over micro-batches and
  synchronized during the last micro-batch's backward in buckets of ``bucket_bytes`` (DDP's
  ``bucket_cap_mb = 25``, i.e. 25 MiB); layers fill buckets in backward order, a bucket holds whole
  layers and closes once it reaches the cap, and bucket ``k`` starts when the backward of its last
  layer is done and bucket ``k - 1`` has finished. Convention: gradients are reduced in ``grad_bytes``
  (default 2, BF16); per rank a stage's gradients are ``params_stage / tp * grad_bytes`` (routed experts
  ``/ (tp * ep)``), i.e. ``params / (tp * pp) * grad_bytes`` on average.
* ZeRO (Rajbhandari et al., SC'20, section 7): stage 1-2: the gradient buckets are ReduceScatter instead
  of AllReduce and the updated parameters are AllGathered after the optimizer step (same 2x volume as
  DP); stage 3 (= FSDP): per micro-batch each layer's parameters are AllGathered before its forward and
  again before its backward (prefetched one layer ahead) and its gradients ReduceScattered after its
  backward (3x volume).
* EP (Lepikhin et al., GShard 2020; Rajbhandari et al., DeepSpeed-MoE 2022): per MoE layer and
  micro-batch an AllToAll dispatch and combine in forward and their two transposes in backward. Each
  rank sends ``tokens * top_k * h * a`` bytes (``size_bytes``; ``1 / ep`` of it to each EP rank), where
  a TP rank dispatches its ``1 / tp`` share of the ``b * s_c`` tokens (as with sequence parallelism).
* CP (ring attention; Liu et al. 2023, Megatron-core context parallelism): per layer and micro-batch the
  K/V chunks travel around the ring in forward (an AllGather of ``b * s * kv_width / tp * a`` bytes,
  overlapped with the attention compute) and in backward K/V plus their gradients (an AllGather and a
  ReduceScatter of that size).

Compute: FLOPs from `ModelShape` (Narayanan et al. SC'21 appendix), backward = 2x forward (+1x with
recomputation), split evenly over the ``tp * cp`` ranks of a stage's replica; a task lasts
``flops / (peak_bf16_flops * efficiency)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from flowherd.collectives.ops import Collective, Op, busbw_factor
from flowherd.errors import ConfigError, SimulationError
from flowherd.units import MiB
from flowherd.workload.gpus import GpuSpec, get_gpu
from flowherd.workload.models import ModelShape, get_model
from flowherd.workload.opgraph import GraphBuilder, OpGraph, Task, TaskKind


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
        activation_recompute: Full recomputation (backward repeats the forward and its TP/EP traffic).
        seq_len: Tokens per sequence.
        micro_batch: Sequences per micro-batch per replica.
        global_batch: Sequences per iteration; a multiple of ``micro_batch * dp``. Defaults to
            ``2 * pp`` micro-batches per replica.
        iterations: Iterations the job runs.
        efficiency: Fraction of the GPU's peak FLOP/s achieved (MFU-like), in (0, 1].
        dtype_bytes: Bytes per activation / parameter element (2: BF16).
        grad_bytes: Bytes per gradient element in the DP reduction (2: BF16; 4: FP32).
        bucket_bytes: DDP bucket cap (25 MiB as PyTorch); ``math.inf`` makes one bucket per stage,
            i.e. the gradient sync starts after the whole backward pass (no overlap).
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
    seq_len: int = 4096
    micro_batch: int = 1
    global_batch: int | None = None
    iterations: int = 1
    efficiency: float = 0.45
    dtype_bytes: int = 2
    grad_bytes: int = 2
    bucket_bytes: float = 25 * MiB
    submit_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", get_model(self.model))
        object.__setattr__(self, "gpu", get_gpu(self.gpu))
        w = f"job {self.name!r}"
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
        if self.global_batch is None:
            object.__setattr__(self, "global_batch", self.micro_batch * self.dp * 2 * self.pp)
        _pos_int(self.global_batch, "global_batch", w)
        if self.global_batch % (self.micro_batch * self.dp):
            raise ConfigError(
                f"{w}: global_batch must be a multiple of micro_batch*dp = {self.micro_batch * self.dp}, "
                f"got {self.global_batch} (global_batch)"
            )
        if not (isinstance(self.efficiency, int | float) and 0 < self.efficiency <= 1):
            raise ConfigError(f"{w}: efficiency must be in (0, 1], got {self.efficiency!r} (efficiency)")
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

    def stage_layers(self, stage: int) -> range:
        """Layers of pipeline stage ``stage``; layers are split as evenly as possible, the first
        ``layers % pp`` stages taking one more (as ``numpy.array_split``)."""
        q, r = divmod(self.model.layers, self.pp)
        start = stage * q + min(stage, r)
        return range(start, start + q + (stage < r))

    def rank_grid(self) -> np.ndarray:
        """Ranks as an array of shape ``(pp, dp, cp, tp)`` (Megatron order, module docstring)."""
        return np.arange(self.world_size).reshape(self.pp, self.dp, self.cp, self.tp)

    def iteration_flops(self) -> float:
        """FLOPs of one iteration over all GPUs: ``(3 or 4) * forward FLOPs * global_batch * seq_len``."""
        passes = 4 if self.activation_recompute else 3
        return passes * self.model.forward_flops_per_token(self.seq_len) * self.global_batch * self.seq_len

    def iteration_graph(self, granularity: Granularity | str = Granularity.STAGE) -> OpGraph:
        """The op graph of one iteration (module docstring)."""
        try:
            g = Granularity(granularity)
        except ValueError:
            raise ConfigError(
                f"granularity must be 'layer' or 'stage', got {granularity!r} (granularity)"
            ) from None
        return _IterationBuilder(self, g).build()

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


def _pos_int(value: Any, field: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {field} must be a positive integer, got {value!r} ({field})")


class _IterationBuilder:
    """Builds the 1F1B iteration graph; one instance per call."""

    def __init__(self, job: TrainingJob, granularity: Granularity):
        self.job = job
        self.gran = granularity
        j, m = job, job.model
        self.R = j.rank_grid()
        self.b = GraphBuilder(f"{j.name}/iteration", j.world_size,
                              [self.R[p].ravel() for p in range(j.pp)])
        self.rate = j.gpu.peak_bf16_flops * j.efficiency
        self.tokens = j.micro_batch * j.seq_len  # per replica per micro-batch
        self.s_c = j.seq_len // j.cp
        self.act_bytes = j.micro_batch * self.s_c * m.hidden * j.dtype_bytes  # per rank, one TP call
        if m.kv_lora_rank:  # MLA materializes per-head K (with rope part) and V
            kv_width = m.heads * (m.head_dim + m.rope_head_dim + m.v_head_dim)
        else:
            kv_width = m.kv_heads * (m.head_dim + m.v_head_dim)
        self.cp_bytes = j.micro_batch * j.seq_len * kv_width / j.tp * j.dtype_bytes
        self.a2a_bytes = j.micro_batch * self.s_c / j.tp * m.top_k * m.hidden * j.dtype_bytes
        self._coll_cache: dict[tuple, tuple[Collective, ...]] = {}
        self._groups_cache: dict[tuple[int, str], np.ndarray] = {}
        self.units = [self._stage_units(p) for p in range(j.pp)]
        self.last: list[tuple[int, ...]] = [() for _ in range(j.pp)]
        self.zero_tail: list[int | None] = [None] * j.pp
        self.dp_tail: list[int | None] = [None] * j.pp
        self.dangling: list[list[int]] = [[] for _ in range(j.pp)]
        self.buckets = [self._buckets(p) for p in range(j.pp)] if j.zero_stage < 3 else None

    # ---- per-stage quantities -------------------------------------------------------------
    def _stage_units(self, p: int) -> dict[str, np.ndarray]:
        j, m = self.job, self.job.model
        layers = list(j.stage_layers(p))
        fwd = np.array([m.attention_matmul_flops() + m.attention_score_flops(j.seq_len) + m.mlp_flops(i)
                        for i in layers])
        dense = np.array([m.layer_dense_params(i) for i in layers], dtype=np.float64)
        expert = np.array([m.layer_expert_params(i) for i in layers], dtype=np.float64)
        if p == j.pp - 1:
            fwd[-1] += m.logit_flops()
            dense[-1] += m.head_params()
        if p == 0:
            dense[0] += m.embedding_params()
        return {
            "fwd_s": fwd * self.tokens / (j.tp * j.cp) / self.rate,
            "dense_loc": dense / j.tp,
            "expert_loc": expert / (j.tp * j.ep),
            "moe": np.array([m.layer_is_moe(i) for i in layers], dtype=bool),
        }

    def _buckets(self, p: int) -> list[list[int]]:
        """DDP buckets of stage ``p``: lists of unit indices in backward order."""
        u = self.units[p]
        per_unit = (u["dense_loc"] + u["expert_loc"]) * self.job.grad_bytes
        out: list[list[int]] = []
        cur: list[int] = []
        acc = 0.0
        for k in reversed(range(len(per_unit))):
            cur.append(k)
            acc += per_unit[k]
            if acc >= self.job.bucket_bytes:
                out.append(cur)
                cur, acc = [], 0.0
        if cur:
            out.append(cur)
        return out

    # ---- rank groups and collectives ------------------------------------------------------
    def _groups(self, p: int, kind: str) -> np.ndarray:
        key = (p, kind)
        if key not in self._groups_cache:
            j, r = self.job, self.R[p]
            if kind == "tp":
                g = r.reshape(-1, j.tp)
            elif kind == "cp":
                g = r.transpose(0, 2, 1).reshape(-1, j.cp)
            elif kind == "dp":
                g = r.transpose(2, 0, 1).reshape(j.tp, j.dp * j.cp)
            else:
                e = r.reshape(j.dp // j.ep, j.ep, j.cp, j.tp)
                if kind == "ep":
                    g = e.transpose(0, 2, 3, 1).reshape(-1, j.ep)
                else:  # "edp": expert data-parallel
                    g = e.transpose(1, 3, 0, 2).reshape(j.ep * j.tp, -1)
            self._groups_cache[key] = g
        return self._groups_cache[key]

    def _colls(self, p: int, kind: str, op: Op, size: float) -> tuple[Collective, ...]:
        key = (p, kind, op, size)
        if key not in self._coll_cache:
            groups = self._groups(p, kind)
            if groups.shape[1] < 2 or size <= 0:
                self._coll_cache[key] = ()
            else:
                self._coll_cache[key] = tuple(
                    Collective(op=op, gpus=tuple(row.tolist()), size_bytes=size) for row in groups
                )
        return self._coll_cache[key]

    def _param_colls(self, p: int, op: Op, dense: float, expert: float) -> tuple[Collective, ...]:
        return self._colls(p, "dp", op, dense) + self._colls(p, "edp", op, expert)

    # ---- chunks ---------------------------------------------------------------------------
    def _chunks(self, p: int, phase: str, mb: int) -> list[list[int]]:
        n = len(self.units[p]["fwd_s"])
        order = list(range(n)) if phase == "fwd" else list(reversed(range(n)))
        if self.gran == Granularity.LAYER:
            return [[k] for k in order]
        if phase == "bwd" and mb == self.job.micro_batches - 1 and self.buckets is not None:
            return self.buckets[p]
        return [order]

    def _pass(self, p: int, phase: str, mb: int, recv: int | None) -> tuple[int, ...]:
        j, u, b = self.job, self.units[p], self.b
        entry: tuple[int, ...] = (*self.last[p], *(() if recv is None else (recv,)))
        anchor = entry
        last_mb = mb == j.micro_batches - 1
        done_at: dict[int, int] = {}
        tag = f"s{p}/mb{mb}/{phase}"
        for units in self._chunks(p, phase, mb):
            n = len(units)
            n_moe = int(u["moe"][units].sum())
            lbl = f"{tag}/L{units[0]}" if n == 1 else f"{tag}/L{min(units)}-{max(units)}"
            pre = list(entry)
            if j.zero_stage == 3:
                dense = float(u["dense_loc"][units].sum()) * j.dtype_bytes / n
                expert = float(u["expert_loc"][units].sum()) * j.dtype_bytes / n
                colls = self._param_colls(p, Op.ALLGATHER, dense, expert)
                if colls:
                    ag = b.comm(f"{lbl}/zero-ag", colls, (self.zero_tail[p], *anchor), group="zero",
                                stage=p, count=n, micro_batch=mb, phase=phase)
                    self.zero_tail[p] = ag
                    pre.append(ag)
            overlapped = []
            if j.cp > 1:
                cp_ops = [Op.ALLGATHER] if phase == "fwd" else [Op.ALLGATHER, Op.REDUCESCATTER]
                for op in cp_ops:
                    cnt = n * (2 if (op == Op.ALLGATHER and phase == "bwd" and j.activation_recompute) else 1)
                    colls = self._colls(p, "cp", op, self.cp_bytes)
                    overlapped.append(b.comm(f"{lbl}/cp-{op}", colls, entry, group="cp", stage=p,
                                             count=cnt, micro_batch=mb, phase=phase))
            passes = 1.0 if phase == "fwd" else (3.0 if j.activation_recompute else 2.0)
            c = b.compute(lbl, passes * float(u["fwd_s"][units].sum()), pre, stage=p, micro_batch=mb,
                          phase=phase)
            for k in units:
                done_at[k] = c
            tail: tuple[int, ...] = (c, *overlapped)
            reps = 2 if (phase == "bwd" and j.activation_recompute) else 1
            blocking: list[tuple[str, str, Op, float, int]] = []
            if j.tp > 1:
                if j.sequence_parallel:
                    blocking.append(("tp", "tp", Op.ALLGATHER, self.act_bytes, 2 * n * reps))
                    blocking.append(("tp", "tp", Op.REDUCESCATTER, self.act_bytes, 2 * n * reps))
                else:
                    blocking.append(("tp", "tp", Op.ALLREDUCE, self.act_bytes, 2 * n * reps))
            if j.ep > 1 and n_moe:
                blocking.append(("ep", "ep", Op.ALLTOALL, self.a2a_bytes, 2 * n_moe * reps))
            for group, kind, op, size, cnt in blocking:
                colls = self._colls(p, kind, op, size)
                if colls:
                    tail = (b.comm(f"{lbl}/{group}-{op}", colls, tail, group=group, stage=p, count=cnt,
                                   micro_batch=mb, phase=phase),)
            if j.zero_stage == 3 and phase == "bwd":
                dense = float(u["dense_loc"][units].sum()) * j.grad_bytes / n
                expert = float(u["expert_loc"][units].sum()) * j.grad_bytes / n
                colls = self._param_colls(p, Op.REDUCESCATTER, dense, expert)
                if colls:
                    rs = b.comm(f"{lbl}/dp-rs", colls, (c, self.dp_tail[p]), group="dp", stage=p,
                                count=n, micro_batch=mb, phase=phase)
                    self.dp_tail[p] = rs
                    self.dangling[p].append(rs)
            anchor = entry
            entry = tail
        self.last[p] = entry
        if phase == "bwd" and last_mb and self.buckets is not None:
            self._dp_sync(p, done_at)
        return entry

    def _dp_sync(self, p: int, done_at: dict[int, int]) -> None:
        j, u = self.job, self.units[p]
        op = Op.ALLREDUCE if j.zero_stage == 0 else Op.REDUCESCATTER
        for k, bucket in enumerate(self.buckets[p]):
            dense = float(u["dense_loc"][bucket].sum()) * j.grad_bytes
            expert = float(u["expert_loc"][bucket].sum()) * j.grad_bytes
            colls = self._param_colls(p, op, dense, expert)
            if not colls:
                continue
            t = self.b.comm(f"s{p}/dp/bucket{k}", colls, (done_at[bucket[-1]], self.dp_tail[p]),
                            group="dp", stage=p, phase="sync")
            self.dp_tail[p] = t
            self.dangling[p].append(t)

    # ---- schedule -------------------------------------------------------------------------
    def _order(self, p: int) -> list[tuple[str, int]]:
        m, pp = self.job.micro_batches, self.job.pp
        warm = min(pp - p - 1, m)
        order = [("fwd", i) for i in range(warm)]
        for i in range(m - warm):
            order += [("fwd", warm + i), ("bwd", i)]
        order += [("bwd", i) for i in range(m - warm, m)]
        return order

    def _send(self, p: int, q: int, phase: str, mb: int, deps: tuple[int, ...]) -> int:
        j = self.job
        size = self.act_bytes / j.tp
        src, dst = self.R[p].ravel(), self.R[q].ravel()
        key = ("pp", p, q, size)
        if key not in self._coll_cache:
            self._coll_cache[key] = tuple(
                Collective(op=Op.SENDRECV, gpus=(int(a), int(c)), size_bytes=size)
                for a, c in zip(src, dst, strict=True)
            )
        return self.b.comm(f"s{p}->s{q}/mb{mb}/{phase}", self._coll_cache[key], deps, group="pp", stage=p,
                           micro_batch=mb, phase=phase)

    def build(self) -> OpGraph:
        j, b = self.job, self.b
        orders = [self._order(p) for p in range(j.pp)]
        ptr = [0] * j.pp
        sends: dict[tuple[int, str, int], int] = {}
        remaining = sum(len(o) for o in orders)
        while remaining:
            progressed = False
            for p in range(j.pp):
                while ptr[p] < len(orders[p]):
                    phase, mb = orders[p][ptr[p]]
                    src = p - 1 if phase == "fwd" else p + 1
                    recv = None
                    if 0 <= src < j.pp:
                        if (src, phase, mb) not in sends:
                            break
                        recv = sends[(src, phase, mb)]
                    end = self._pass(p, phase, mb, recv)
                    dst = p + 1 if phase == "fwd" else p - 1
                    if 0 <= dst < j.pp:
                        sends[(p, phase, mb)] = self._send(p, dst, phase, mb, end)
                    ptr[p] += 1
                    remaining -= 1
                    progressed = True
            if not progressed:  # 1F1B cannot deadlock; this guards the builder itself
                raise SimulationError(f"pipeline schedule of job {j.name!r} is stuck at {ptr}")
        ends = []
        for p in range(j.pp):
            step = b.compute(f"s{p}/optimizer", 0.0, (*self.last[p], *self.dangling[p]), stage=p,
                             phase="step")
            ends.append(step)
            if 1 <= j.zero_stage <= 2:
                u, nb = self.units[p], len(self.buckets[p])
                dense = float(u["dense_loc"].sum()) * j.dtype_bytes / nb
                expert = float(u["expert_loc"].sum()) * j.dtype_bytes / nb
                colls = self._param_colls(p, Op.ALLGATHER, dense, expert)
                if colls:
                    ends.append(b.comm(f"s{p}/zero-ag-params", colls, (step,), group="zero", stage=p,
                                       count=nb, phase="step"))
        b.compute("iteration-end", 0.0, ends, stage=0, phase="step")
        return b.build()


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
            if key not in ("tp", "pp", "dp", "ep", "cp"):
                raise ConfigError(
                    f"unknown parallelism {key!r}, expected tp, pp, dp, ep or cp ({field}.parallelism.{key})"
                )
            data[key] = value
    known = [f.name for f in dataclasses.fields(TrainingJob)]
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
