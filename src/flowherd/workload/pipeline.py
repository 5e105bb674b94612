"""The op graph of one training iteration: Megatron-LM's pipeline schedules and their traffic.

`build_iteration` turns a `flowherd.workload.TrainingJob` into an `OpGraph` (the traffic sizes and
their sources are in `flowherd.workload.training`'s docstring). The schedule is Megatron-LM's
(``megatron/core/pipeline_parallel/schedules.py``, NVIDIA/Megatron-LM commit d98e8a64dd):

* ``virtual_stages == 1``: 1F1B (PipeDream-Flush, Narayanan et al. SC'21 section 2.2.1,
  ``forward_backward_pipelining_without_interleaving``): stage ``p`` runs ``min(pp - p - 1, m)``
  warm-up forwards, then alternates one forward and one backward, then drains.
* ``virtual_stages = V > 1``: the interleaved schedule (SC'21 section 2.2.2,
  ``forward_backward_pipelining_with_interleaving``). The layers are cut into ``pp * V`` model
  chunks; rank ``p`` holds chunks ``p, p + pp, ..., p + (V - 1) pp`` (its virtual stages
  ``v = 0 .. V-1``). A rank runs ``m * V`` forwards and as many backwards in the order of
  ``get_schedule_table``: groups of ``N`` consecutive micro-batches, for each virtual stage in
  turn (backwards visit the virtual stages in reverse), ``N = pp`` (Megatron's default
  ``microbatch_group_size_per_vp_stage``) when ``pp`` divides ``m``, else ``N = m`` (one group;
  Megatron refuses a last group smaller than ``pp``). Warm-up forwards:
  ``min(2 (pp - p - 1) + (V - 1) N, m V)`` (``get_pp_rank_microbatches``), then 1F1B steps (one
  forward, one backward), then the remaining backwards. The bubble shrinks ``V`` times, to
  ``(pp - 1) / (m V)`` of the ideal, for ``V`` times the point-to-point traffic.
* Point-to-point: forward activations go from virtual stage ``(p, v)`` to ``(p + 1, v)``, and from
  the last rank to ``(0, v + 1)``; gradients go the reverse way. Sends are asynchronous (the sender
  continues, the receiver waits for the send).

Optimizer step: after its last backward and its gradient reduction, every stage runs Adam over its
shard (`flowherd.workload.compute.optimizer_step_s`); ZeRO-1/2 then AllGather the updated
parameters.

Tied embeddings over a pipeline (``pp > 1``): the last stage holds its own copy of the word
embedding for the output projection (a parameter of that stage, in its gradient sync and
optimizer), and before the optimizer step the two copies' gradients are AllReduced over the
embedding group, the first and last pipeline rank of every (data, context, tensor) position
(Megatron-LM ``finalize_model_grads`` -> ``_allreduce_word_embedding_grads``, after the DP sync;
DeepSpeed's pipeline engine ``_exec_reduce_tied_grads``, the ``ReduceTiedGrads`` instruction of
its ``TrainSchedule``): ``vocab * hidden / tp * grad_bytes`` bytes.

DeepSpeed's pipeline engine (``pipeline_engine="deepspeed"``, deepspeed/runtime/pipe/engine.py,
schedule.py, p2p.py; what Megatron-DeepSpeed and BLOOM ran):

* the same 1F1B order (``TrainSchedule``), but every send is blocking: ``p2p.send`` asserts
  ``async_op == False`` and calls ``torch.distributed.send``, so the sender's next pass waits for
  the transfer (here: the sender's next task depends on its send);
* the gradients are reduced only at the end of the batch (``ReduceTiedGrads``, ``ReduceGrads``,
  ``OptimizerStep`` after the last backward), by AllReduce over the data-parallel ranks even when
  the optimizer states are partitioned (BF16_Optimizer, DeepSpeed's ZeRO-1 for BF16:
  ``_exec_reduce_grads`` -> ``_bf16_reduce_grads`` -> ``buffered_allreduce_fallback`` in buffers of
  ``MEMORY_OPT_ALLREDUCE_SIZE`` = 5e8 elements), so none of it overlaps the backward; with
  ``zero_stage=1`` the step then AllGathers the updated weights (``BF16_Optimizer.update_lp_params``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flowherd.collectives.ops import Collective, Op
from flowherd.errors import SimulationError
from flowherd.workload import compute as cm
from flowherd.workload.frameworks import get_framework, per_op_recompute_linears
from flowherd.workload.opgraph import GraphBuilder, OpGraph

__all__ = ["DEEPSPEED_ALLREDUCE_ELEMENTS", "build_iteration", "schedule_order"]

# deepspeed/runtime/engine.py: MEMORY_OPT_ALLREDUCE_SIZE, the elements per buffer of the pipeline
# engine's gradient all-reduce (buffered_allreduce_fallback)
DEEPSPEED_ALLREDUCE_ELEMENTS = 500_000_000
# transformer_engine/pytorch/module/base.py (NVIDIA/TransformerEngine@d0067d0da), initialize_ub's
# get_default_config: "num_sm": 16 for the "pipeline" and "bulk" overlap methods (1 for
# "ring_exchange", which moves data with the copy engines), "num_splits": 4 for "pipeline"
UB_SMS = 16
UB_PIPELINE_SPLITS = 4


def schedule_order(pp: int, p: int, m: int, virtual_stages: int) -> list[tuple[str, int, int]]:
    """The ``(phase, micro_batch, virtual_stage)`` order of pipeline rank ``p`` (module docstring)."""
    V = virtual_stages
    if V == 1:
        warm = min(pp - p - 1, m)
        order = [("fwd", i, 0) for i in range(warm)]
        for i in range(m - warm):
            order += [("fwd", warm + i, 0), ("bwd", i, 0)]
        return order + [("bwd", i, 0) for i in range(m - warm, m)]
    group = pp if m % pp == 0 else m
    table: list[tuple[int, int]] = []  # get_schedule_table
    for start in range(0, m, group):
        stop = m if start + group >= m else start + group
        table += [(mb, v) for v in range(V) for mb in range(start, stop)]
    total = m * V
    warm = min(2 * (pp - p - 1) + (V - 1) * group, total)

    def fwd(k: int) -> tuple[str, int, int]:
        return ("fwd", table[k][0], table[k][1])

    def bwd(k: int) -> tuple[str, int, int]:
        return ("bwd", table[k][0], V - 1 - table[k][1])

    order = [fwd(k) for k in range(warm)]
    for k in range(total - warm):
        order += [fwd(warm + k), bwd(k)]
    return order + [bwd(k) for k in range(total - warm, total)]


def build_iteration(job: Any, layer_granularity: bool) -> OpGraph:
    """The op graph of one iteration of ``job`` (a `TrainingJob`)."""
    return _Builder(job, layer_granularity).build()


class _Builder:
    """Builds one iteration graph; one instance per call."""

    def __init__(self, job: Any, layer_granularity: bool):
        self.job = j = job
        self.fine = layer_granularity
        m = j.model
        self.V = j.virtual_stages
        self.R = j.rank_grid()
        self.b = GraphBuilder(f"{j.name}/iteration", j.world_size, [self.R[p].ravel() for p in range(j.pp)])
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
        self._lt: dict[int, cm.LayerTimes] = {}
        self.fw = get_framework(j.framework)
        self._per_op: dict[bool, float] = {}
        self.units = {(p, v): self._units(p, v) for p in range(j.pp) for v in range(self.V)}
        self.last: list[tuple[int, ...]] = [() for _ in range(j.pp)]
        self.zero_tail: list[int | None] = [None] * j.pp
        self.dp_tail: list[int | None] = [None] * j.pp
        self.dangling: list[list[int]] = [[] for _ in range(j.pp)]
        # DeepSpeed's pipeline engine: all-reduce after the last backward (module docstring)
        self._deepspeed_sync = j.pipeline_engine == "deepspeed"
        # sends that hold the sender until delivered: DeepSpeed's engine, and Megatron's 1F1B without
        # interleaving (`flowherd.workload.frameworks`)
        self.blocking_sends = self._deepspeed_sync or (self.V == 1 and self.fw.blocking_p2p)
        self.buckets = ({k: self._buckets(k) for k in self.units} if j.zero_stage < 3 else None)
        # ZeRO-1/2 with overlap_param_gather: (stage, virtual stage, unit) -> the all-gather of its
        # bucket's updated weights, which the first forward of those layers waits for
        self.param_ag: dict[tuple[int, int, int], int] | None = None
        if 1 <= j.zero_stage <= 2 and j.overlap_param_gather and not self._deepspeed_sync:
            self.param_ag = self._param_gathers()

    # ---- per-chunk quantities --------------------------------------------------------------
    def _layer_times(self, i: int) -> cm.LayerTimes:
        j = self.job
        key = i if j.model.layer_is_moe(i) else -1  # dense layers are all alike
        if key not in self._lt:
            self._lt[key] = cm.layer_times(j.model, i, j.gpu, micro_batch=j.micro_batch, seq_len=j.seq_len,
                                           tp=j.tp, cp=j.cp, ep=j.ep, sequence_parallel=j.sequence_parallel,
                                           dtype_bytes=j.dtype_bytes, attention=j.attention,
                                           param_bytes=j.param_bytes, precision=j.precision,
                                           framework=j.framework, cp_ring=j.cp_comm == "p2p")
        return self._lt[key]

    def _per_op_flops(self, i: int) -> float:
        """Forward FLOPs per token of layer ``i`` that per-op checkpointing recomputes on a rank."""
        j, m = self.job, self.job.model
        moe = m.layer_is_moe(i)
        if moe not in self._per_op:
            share = per_op_recompute_linears(m, moe)
            ops = cm.layer_ops(m, i, j.gpu, micro_batch=1, seq_len=j.seq_len, tp=j.tp, ep=j.ep)
            self._per_op[moe] = sum(o.flops * share.get(o.name, 0.0) for o in ops) / j.seq_len
        return self._per_op[moe]

    def _param_gathers(self) -> dict[tuple[int, int, int], int]:
        """The all-gathers of the updated weights at the start of the iteration, bucket by bucket in
        forward order (Megatron's ``--overlap-param-gather``: the previous step's gathers run while
        the forward of the layers before them computes)."""
        j, out = self.job, {}
        for p in range(j.pp):
            prev = None
            for v in range(self.V):
                u = self.units[(p, v)]
                for k, bucket in reversed(list(enumerate(self.buckets[(p, v)]))):
                    dense = float(u["dense_loc"][bucket].sum()) * j.param_bytes
                    expert = float(u["expert_loc"][bucket].sum()) * j.param_bytes
                    colls = self._param_colls(p, Op.ALLGATHER, dense, expert)
                    if not colls:
                        continue
                    vt = f"v{v}/" if self.V > 1 else ""
                    prev = self.b.comm(f"s{p}/{vt}zero-ag/bucket{k}", colls, (prev,), group="zero", stage=p,
                                       phase="step")
                    for unit in bucket:
                        out[(p, v, unit)] = prev
        return out

    def _units(self, p: int, v: int) -> dict[str, np.ndarray]:
        j, m = self.job, self.job.model
        layers = list(j.chunk_layers(v * j.pp + p))
        first, last = p == 0 and v == 0, p == j.pp - 1 and v == self.V - 1
        n = len(layers)
        dense = np.array([m.layer_dense_params(i) for i in layers], dtype=np.float64)
        expert = np.array([m.layer_expert_params(i) for i in layers], dtype=np.float64)
        if last and n:
            dense[-1] += m.head_params()
            if m.tied_embeddings and j.pp > 1:  # the last stage's copy of the word embedding
                dense[-1] += m.vocab * m.hidden
        if first and n:
            dense[0] += m.embedding_params()
        tokens = j.micro_batch * j.seq_len / (j.tp * j.cp)  # a rank's share of the FLOPs
        attn = np.array([m.attention_score_flops(j.seq_len) for _ in layers]) * tokens
        fwd_flops = np.array([m.attention_matmul_flops() + m.attention_score_flops(j.seq_len) + m.mlp_flops(i)
                              for i in layers]) * tokens
        if j.efficiency is not None:  # the explicit override: every pass at one fraction of the peak
            rate = j.gpu.peak_bf16_flops * j.efficiency
            fwd = fwd_flops / rate
            bwd = 2.0 * fwd
            core = attn / rate
            if self.fw.selective == "per-op":  # the share of each matmul per-op checkpointing repeats
                core = np.array([self._per_op_flops(i) for i in layers]) * tokens / rate
            if last and n:
                head = m.logit_flops() * tokens / rate
                fwd[-1] += head
                bwd[-1] += 2.0 * head
        else:
            lt = [self._layer_times(i) for i in layers]
            fwd = np.array([x.fwd_s for x in lt])
            bwd = np.array([x.bwd_s for x in lt])
            core = np.array([x.selective_fwd_s for x in lt])
            if j.tp_comm_overlap and j.tp > 1:
                # the GEMMs that run beside userbuffers' 16-SM reduce-scatters and bulk overlaps lose
                # those SMs (TE's initialize_ub: num_sm 16 with set_sm_margin for "pipeline" and "bulk")
                km = cm.kernel_model(j.gpu)
                fwd = fwd + UB_SMS / km.sm_count * np.array([x.tp_overlap_fwd_s for x in lt])
                bwd = bwd + UB_SMS / km.sm_count * np.array([x.tp_overlap_bwd_s for x in lt])
            if last and n:
                h = cm.head_times(m, j.gpu, micro_batch=j.micro_batch, seq_len=j.seq_len, tp=j.tp, cp=j.cp,
                                  dtype_bytes=j.dtype_bytes, param_bytes=j.param_bytes, framework=j.framework)
                fwd[-1] += h.fwd_s
                bwd[-1] += h.bwd_s
            if j.grad_accumulation == "fp32-buffer":  # a cast-and-add per layer after each backward
                bwd = bwd + np.array([cm.grad_accumulation_s(x, j.gpu, dtype_bytes=j.dtype_bytes)
                                      for x in dense / j.tp + expert / (j.tp * j.ep)])
            if j.zero_stage == 3:  # FSDP's gradient preparation before every reduce-scatter
                bwd = bwd + np.array([cm.fsdp_grad_prep_s(x, j.gpu, param_bytes=j.param_bytes,
                                                          grad_bytes=j.grad_bytes)
                                      for x in dense / j.tp + expert / (j.tp * j.ep)])
                # each layer's pass runs beside the next layer's prefetched all-gather (and, in the
                # backward, a reduce-scatter of the gradients, and under hybrid sharding the all-reduce
                # of the reduced shard across the replicas): NCCL's blocks take SMs from it
                shard, edp = self._groups(p, "shard"), self._groups(p, "edp")
                fr = [(g.shape[1] - 1) / g.shape[1] for g in (shard, edp)]
                gather = (dense / j.tp * fr[0] + expert / (j.tp * j.ep) * fr[1]) * j.param_bytes
                scatter = gather * j.grad_bytes / j.param_bytes
                rc_fwd = np.array([x.fwd_s for x in lt]) if j.recompute == "full" else 0.0
                far, ring = self._far(p, "shard"), self._ring(p, "shard")
                fwd = fwd + np.array([cm.comm_interference_s(t, x, j.gpu, across_servers=far, **ring)
                                      for t, x in zip(fwd, gather, strict=True)])
                bwd = bwd + np.array([cm.comm_interference_s(t, x, j.gpu, across_servers=far, collectives=2,
                                                             **ring)
                                      for t, x in zip(bwd + rc_fwd, gather + scatter, strict=True)])
                if j.fsdp_shard is not None and j.dp > j.fsdp_shard:
                    r = j.dp // j.fsdp_shard
                    ar = dense / j.tp / j.fsdp_shard * j.grad_bytes * 2 * (r - 1) / r
                    far_r, ring_r = self._far(p, "replica"), self._ring(p, "replica")
                    bwd = bwd + np.array([cm.comm_interference_s(t, x, j.gpu, across_servers=far_r,
                                                                 allreduce=True, **ring_r)
                                          for t, x in zip(bwd + rc_fwd, ar, strict=True)])
        # recomputation (Korthikanti et al. 2022): full repeats each layer's forward (not the
        # output head) before its backward; selective repeats the attention core only
        if j.recompute == "full":
            rc = np.array([x.fwd_s for x in lt]) if j.efficiency is None else fwd_flops / rate
        elif j.recompute == "selective":
            rc = core
        else:
            rc = np.zeros(n)
        return {"fwd_s": fwd, "bwd_s": bwd + rc, "dense_loc": dense / j.tp,
                "expert_loc": expert / (j.tp * j.ep),
                "moe": np.array([m.layer_is_moe(i) for i in layers], bool)}

    def _buckets(self, key: tuple[int, int]) -> list[list[int]]:
        """DDP buckets of one chunk: lists of unit indices in backward order."""
        u = self.units[key]
        per_unit = (u["dense_loc"] + u["expert_loc"]) * self.job.grad_bytes
        cap = self.job.bucket_bytes
        if self._deepspeed_sync:
            cap = DEEPSPEED_ALLREDUCE_ELEMENTS * self.job.grad_bytes
        out: list[list[int]] = []
        cur: list[int] = []
        acc = 0.0
        for k in reversed(range(len(per_unit))):
            cur.append(k)
            acc += per_unit[k]
            if acc >= cap:
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
            elif kind in ("shard", "replica"):  # hybrid sharding (`TrainingJob.fsdp_shard`)
                n = j.fsdp_shard or j.dp * j.cp
                g = r.transpose(2, 0, 1).reshape(j.tp, (j.dp * j.cp) // n, n)
                g = g.reshape(-1, n) if kind == "shard" else g.transpose(0, 2, 1).reshape(-1, g.shape[1])
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

    def _fsdp_colls(self, p: int, op: Op, dense: float, expert: float) -> tuple[Collective, ...]:
        """ZeRO-3 / FSDP's per-layer collectives: over the shard groups under hybrid sharding."""
        if self.job.fsdp_shard is None:
            return self._param_colls(p, op, dense, expert)
        return self._colls(p, "shard", op, dense)

    # ---- passes ----------------------------------------------------------------------------
    def _chunks(self, key: tuple[int, int], phase: str, mb: int) -> list[list[int]]:
        n = len(self.units[key]["fwd_s"])
        order = list(range(n)) if phase == "fwd" else list(reversed(range(n)))
        if self.fine or self.job.zero_stage == 3:
            # ZeRO-3 / FSDP gathers one unit (a layer) at a time, prefetched while the unit
            # before it computes: the overlap exists only with a task per layer
            return [[k] for k in order]
        if phase == "bwd" and self.buckets is not None and self._syncs(mb) and not self._deepspeed_sync:
            return self.buckets[key]
        if phase == "fwd" and mb == 0 and self.param_ag is not None:  # wait bucket by bucket
            return [list(reversed(bk)) for bk in reversed(self.buckets[key])]
        return [order] if n else []

    def _syncs(self, mb: int) -> bool:
        """Whether the backward of micro-batch ``mb`` reduces gradients: the last one, or every
        one under ZeRO-2 (DeepSpeed partitions gradients as the backward produces them)."""
        return mb == self.job.micro_batches - 1 or self.job.zero_stage == 2

    def _pass(self, p: int, v: int, phase: str, mb: int, recv: int | None) -> tuple[int, ...]:
        j, u, b = self.job, self.units[(p, v)], self.b
        entry: tuple[int, ...] = (*self.last[p], *(() if recv is None else (recv,)))
        anchor = entry
        done_at: dict[int, int] = {}
        tag = f"s{p}/v{v}/mb{mb}/{phase}" if self.V > 1 else f"s{p}/mb{mb}/{phase}"
        reps = 2 if (phase == "bwd" and j.recompute == "full") else 1
        syncing = phase == "bwd" and self.buckets is not None and self._syncs(mb)
        prev_bucket: list[int] = []
        chunks = self._chunks((p, v), phase, mb)
        # the first forward after the step waits bucket by bucket for the updated weights, and the
        # next bucket's all-gather runs beside each bucket's layers (Megatron-LM's distributed
        # optimizer dispatches it in a forward pre-hook): NCCL's blocks take SMs from them as well
        gathering = (phase == "fwd" and mb == 0 and self.param_ag is not None and j.efficiency is None)
        for ci, units in enumerate(chunks):
            n = len(units)
            n_moe = int(u["moe"][units].sum())
            lbl = f"{tag}/L{units[0]}" if n == 1 else f"{tag}/L{min(units)}-{max(units)}"
            pre = list(entry)
            if j.zero_stage == 3:
                dense = float(u["dense_loc"][units].sum()) * j.param_bytes / n
                expert = float(u["expert_loc"][units].sum()) * j.param_bytes / n
                colls = self._fsdp_colls(p, Op.ALLGATHER, dense, expert)
                if colls:
                    ag = b.comm(f"{lbl}/zero-ag", colls, (self.zero_tail[p], *anchor), group="zero",
                                stage=p, count=n, micro_batch=mb, phase=phase)
                    self.zero_tail[p] = ag
                    pre.append(ag)
            if self.param_ag is not None and phase == "fwd" and mb == 0:
                pre += [self.param_ag[(p, v, k)] for k in units if (p, v, k) in self.param_ag]
            overlapped = []
            blocking: list[tuple[str, Op, float, int]] = []
            if j.cp > 1:
                cp_ops = [Op.ALLGATHER] if phase == "fwd" else [Op.ALLGATHER, Op.REDUCESCATTER]
                for op in cp_ops:
                    again = op == Op.ALLGATHER and phase == "bwd" and j.recompute != "none"
                    cnt = n * (2 if again else 1)
                    if j.cp_comm == "all-gather":  # the attention waits for the whole K/V
                        blocking.append(("cp", op, self.cp_bytes, cnt))
                        continue
                    colls = self._colls(p, "cp", op, self.cp_bytes)
                    overlapped.append(b.comm(f"{lbl}/cp-{op}", colls, entry, group="cp", stage=p,
                                             count=cnt, micro_batch=mb, phase=phase))
            dur = float(u["fwd_s" if phase == "fwd" else "bwd_s"][units].sum())
            if syncing and j.efficiency is None and prev_bucket:
                # the previous bucket's DP collective runs beside this bucket's backward: NCCL's
                # blocks take SMs from it, as from FSDP's layers (`compute.comm_interference_s`)
                dur += cm.comm_interference_s(dur, self._bucket_bus_bytes(p, u, prev_bucket), j.gpu,
                                              across_servers=self._dp_far(p), allreduce=j.zero_stage == 0,
                                              **self._ring(p, "dp"))
            if gathering and ci + 1 < len(chunks):
                dur += cm.comm_interference_s(dur, self._param_bus_bytes(p, u, chunks[ci + 1]), j.gpu,
                                              across_servers=self._dp_far(p), **self._ring(p, "dp"))
            prev_bucket = units
            c = b.compute(lbl, dur, pre, stage=p, micro_batch=mb, phase=phase)
            for k in units:
                done_at[k] = c
            tail: tuple[int, ...] = (c, *overlapped)
            if j.tp > 1 and j.tp_comm_overlap:
                # Transformer Engine's userbuffers (module docstring): the all-gathers and
                # reduce-scatters run beside the GEMMs; the forward's "pipeline" reduce-scatters
                # (attention output, MLP down) finish one of their UB_PIPELINE_SPLITS chunks after it
                both = (self._colls(p, "tp", Op.ALLGATHER, self.act_bytes)
                        + self._colls(p, "tp", Op.REDUCESCATTER, self.act_bytes))
                if both:
                    tail = (*tail, b.comm(f"{lbl}/tp-overlap", both, pre, group="tp", stage=p,
                                          count=2 * n * reps, micro_batch=mb, phase=phase))
                    if phase == "fwd":
                        blocking.append(("tp", Op.REDUCESCATTER, self.act_bytes / UB_PIPELINE_SPLITS, 2 * n))
            elif j.tp > 1:
                if j.sequence_parallel:
                    blocking.append(("tp", Op.ALLGATHER, self.act_bytes, 2 * n * reps))
                    blocking.append(("tp", Op.REDUCESCATTER, self.act_bytes, 2 * n * reps))
                else:
                    blocking.append(("tp", Op.ALLREDUCE, self.act_bytes, 2 * n * reps))
            if j.ep > 1 and n_moe:
                blocking.append(("ep", Op.ALLTOALL, self.a2a_bytes, 2 * n_moe * reps))
            for kind, op, size, cnt in blocking:
                colls = self._colls(p, kind, op, size)
                if colls:
                    tail = (b.comm(f"{lbl}/{kind}-{op}", colls, tail, group=kind, stage=p, count=cnt,
                                   micro_batch=mb, phase=phase),)
            if j.zero_stage == 3 and phase == "bwd":
                dense = float(u["dense_loc"][units].sum()) * j.grad_bytes / n
                expert = float(u["expert_loc"][units].sum()) * j.grad_bytes / n
                colls = self._fsdp_colls(p, Op.REDUCESCATTER, dense, expert)
                if colls:
                    rs = b.comm(f"{lbl}/dp-rs", colls, (c, self.dp_tail[p]), group="dp", stage=p,
                                count=n, micro_batch=mb, phase=phase)
                    self.dp_tail[p] = rs
                    self.dangling[p].append(rs)
                    if j.fsdp_shard is not None:  # the reduced shard, all-reduced across the replicas
                        ar = self._colls(p, "replica", Op.ALLREDUCE, dense / j.fsdp_shard)
                        if ar:
                            t = b.comm(f"{lbl}/dp-ar", ar, (rs,), group="dp", stage=p, count=n,
                                       micro_batch=mb, phase=phase)
                            self.dp_tail[p] = t
                            self.dangling[p].append(t)
            anchor = entry
            entry = tail
        self.last[p] = entry
        if phase == "bwd" and self.buckets is not None and self._syncs(mb):
            self._dp_sync(p, v, mb, done_at)
        return entry

    def _dp_far(self, p: int) -> bool:
        """Whether stage ``p``'s data-parallel groups span servers (8 GPUs a server)."""
        return self._far(p, "dp")

    def _far(self, p: int, kind: str) -> bool:
        """Whether stage ``p``'s groups of ``kind`` span servers (8 GPUs a server)."""
        g = self._groups(p, kind)
        return bool(g.shape[1] > 1 and np.any(g.min(axis=1) // 8 != g.max(axis=1) // 8))

    def _ring(self, p: int, kind: str) -> dict[str, int]:
        """The ring of stage ``p``'s groups of ``kind`` as `compute.comm_interference_s` takes it:
        its GPUs and the servers they sit on (8 GPUs a server)."""
        g = self._groups(p, kind)
        return {"ranks": int(g.shape[1]), "servers": int(np.unique(g[0] // 8).size)}

    def _bucket_share(self, p: int, u: dict[str, np.ndarray], bucket: list[int]) -> float:
        """Elements of a bucket one GPU moves in a data-parallel collective, ``(n-1)/n`` of them
        over its dense (DP group) and expert (expert-DP group) parameters."""
        fr = [(g.shape[1] - 1) / g.shape[1] for g in (self._groups(p, "dp"), self._groups(p, "edp"))]
        return float(u["dense_loc"][bucket].sum()) * fr[0] + float(u["expert_loc"][bucket].sum()) * fr[1]

    def _bucket_bus_bytes(self, p: int, u: dict[str, np.ndarray], bucket: list[int]) -> float:
        """What one GPU sends for a DDP bucket's gradient collective (nccl-tests bus bytes): an
        all-reduce ``2 (n-1)/n`` of the bucket, a reduce-scatter (ZeRO-1/2) ``(n-1)/n``."""
        k = 2.0 if self.job.zero_stage == 0 else 1.0
        return k * self.job.grad_bytes * self._bucket_share(p, u, bucket)

    def _param_bus_bytes(self, p: int, u: dict[str, np.ndarray], bucket: list[int]) -> float:
        """What one GPU receives of a bucket's all-gather of updated weights (ZeRO-1/2 with
        ``overlap_param_gather``; nccl-tests bus bytes, ``(n-1)/n`` of the bucket)."""
        return self.job.param_bytes * self._bucket_share(p, u, bucket)

    def _dp_sync(self, p: int, v: int, mb: int, done_at: dict[int, int]) -> None:
        j, u = self.job, self.units[(p, v)]
        op = Op.ALLREDUCE if (j.zero_stage == 0 or self._deepspeed_sync) else Op.REDUCESCATTER
        vt = f"v{v}/" if self.V > 1 else ""
        mt = f"mb{mb}/" if j.zero_stage == 2 else ""
        for k, bucket in enumerate(self.buckets[(p, v)]):
            dense = float(u["dense_loc"][bucket].sum()) * j.grad_bytes
            expert = float(u["expert_loc"][bucket].sum()) * j.grad_bytes
            colls = self._param_colls(p, op, dense, expert)
            if not colls:
                continue
            # DeepSpeed reduces after the whole backward (its last unit, the chunk's first layer)
            ready = done_at[0] if self._deepspeed_sync else done_at[bucket[-1]]
            t = self.b.comm(f"s{p}/{vt}{mt}dp/bucket{k}", colls, (ready, self.dp_tail[p]),
                            group="dp", stage=p, micro_batch=mb if j.zero_stage == 2 else None, phase="sync")
            self.dp_tail[p] = t
            self.dangling[p].append(t)

    def _tied_embedding_sync(self) -> int | None:
        """The AllReduce of the tied word embedding's gradients between the first and the last
        stage (module docstring), after both stages' last backward and gradient sync; None when
        the job has no such pair."""
        j, m = self.job, self.job.model
        if j.pp < 2 or not m.tied_embeddings:
            return None
        first, last = self.R[0].ravel(), self.R[j.pp - 1].ravel()
        size = m.vocab * m.hidden / j.tp * j.grad_bytes
        colls = tuple(Collective(op=Op.ALLREDUCE, gpus=(int(a), int(c)), size_bytes=size)
                      for a, c in zip(first, last, strict=True))
        deps = (*self.last[0], *self.dangling[0], *self.last[j.pp - 1], *self.dangling[j.pp - 1])
        return self.b.comm("embedding/tied-ar", colls, deps, group="dp", stage=0, phase="sync")

    # ---- schedule -------------------------------------------------------------------------
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

    def _peer(self, p: int, v: int, phase: str, out: bool) -> tuple[int, int] | None:
        """The virtual stage that ``(p, v)`` sends to (``out``) or receives from in ``phase``."""
        pp, V = self.job.pp, self.V
        step = 1 if (phase == "fwd") == out else -1
        q, w = p + step, v
        if q == pp:
            q, w = 0, v + 1
        elif q < 0:
            q, w = pp - 1, v - 1
        return (q, w) if 0 <= w < V else None

    def build(self) -> OpGraph:
        j, b = self.job, self.b
        orders = [schedule_order(j.pp, p, j.micro_batches, self.V) for p in range(j.pp)]
        ptr = [0] * j.pp
        sends: dict[tuple[int, int, str, int], int] = {}
        remaining = sum(len(o) for o in orders)
        while remaining:
            progressed = False
            for p in range(j.pp):
                while ptr[p] < len(orders[p]):
                    phase, mb, v = orders[p][ptr[p]]
                    src = self._peer(p, v, phase, out=False)
                    recv = None
                    if src is not None:
                        if (*src, phase, mb) not in sends:
                            break
                        recv = sends[(*src, phase, mb)]
                    end = self._pass(p, v, phase, mb, recv)
                    dst = self._peer(p, v, phase, out=True)
                    if dst is not None:
                        sends[(p, v, phase, mb)] = sent = self._send(p, dst[0], phase, mb, end)
                        if self.blocking_sends:  # the sender's next pass waits (module docstring)
                            self.last[p] = (*self.last[p], sent)
                    ptr[p] += 1
                    remaining -= 1
                    progressed = True
            if not progressed:  # Megatron's schedules cannot deadlock; this guards the builder itself
                raise SimulationError(f"pipeline schedule of job {j.name!r} is stuck at {ptr}")
        ends = []
        tied = self._tied_embedding_sync()
        for p in range(j.pp):
            if tied is not None and p in (0, j.pp - 1):
                self.dangling[p].append(tied)
            us = [self.units[(p, v)] for v in range(self.V)]
            dense = sum(float(u["dense_loc"].sum()) for u in us)
            expert = sum(float(u["expert_loc"].sum()) for u in us)
            shard = dense + expert
            if j.fsdp_shard is not None:  # sharded over one shard group, replicated across them
                shard = dense / j.fsdp_shard
            elif j.zero_stage >= 1:  # optimizer states sharded over the (expert) data-parallel ranks
                shard = dense / (j.dp * j.cp) + expert / max(1, j.dp * j.cp // j.ep)
            step = b.compute(f"s{p}/optimizer", cm.optimizer_step_s(shard, j.gpu),
                             (*self.last[p], *self.dangling[p]), stage=p, phase="step")
            ends.append(step)
            if 1 <= j.zero_stage <= 2 and self.param_ag is None:
                nb = sum(len(self.buckets[(p, v)]) for v in range(self.V))
                colls = self._param_colls(p, Op.ALLGATHER, dense * j.param_bytes / nb,
                                          expert * j.param_bytes / nb)
                if colls:
                    ends.append(b.comm(f"s{p}/zero-ag-params", colls, (step,), group="zero", stage=p,
                                       count=nb, phase="step"))
        b.compute("iteration-end", 0.0, ends, stage=0, phase="step")
        return b.build()
