"""Inference jobs: prefill and decode steps, request arrivals and batching, disaggregated serving.

An `InferenceJob` serves requests on ``instances`` model replicas of ``tp`` GPUs each (colocated
serving), or, when ``disaggregated``, on a prefill pool of ``instances`` replicas and a decode pool of
``decode_instances`` replicas of ``decode_tp`` GPUs (DistServe, Zhong et al. OSDI'24; Splitwise, Patel
et al. ISCA'24) that receive each request's KV cache from the prefill replica.

Ranks: the prefill (or only) pool's replicas first, replica ``i`` owning ranks
``i * tp .. (i + 1) * tp - 1``, then the decode pool's replicas. Every op graph of the job has one
"stage" per replica (`OpGraph.stage_ranks`), prefill replicas first.

Traffic per step (``a`` = ``dtype_bytes``, ``T`` tokens in the step, ``h`` hidden):

* TP (Megatron inference): 2 AllReduce of ``T * h * a`` bytes per layer;
* EP (MoE, ``ep`` divides ``tp``; experts spread over ``ep`` consecutive ranks of a replica): an
  AllToAll dispatch and combine per MoE layer, each rank sending its ``1 / tp`` share of the tokens to
  ``top_k`` experts: ``T / tp * top_k * h * a`` bytes (GShard / DeepSpeed-MoE, as for training);
* KV transfer (disaggregated): ``kv_cache_bytes_per_token * prompt_tokens`` per request, i.e.
  ``2 * layers * kv_heads * head_dim * seq * a`` (`ModelShape.kv_cache_bytes_per_token`), sent by the
  prefill replica's ranks (each holds ``1 / tp`` of the heads) to the decode replica's ranks, as
  ``lcm(tp, decode_tp)`` point-to-point transfers.

Compute per step is a roofline: ``max(FLOPs / (tp * peak * efficiency), bytes read / (tp * HBM BW))``
with forward FLOPs from `ModelShape` (the attention term at the step's context length) and, for
decode, the bytes of the weights (all of them: a batch of tokens touches most experts) plus the KV
cache read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flowherd.collectives.ops import Collective, Op
from flowherd.errors import ConfigError
from flowherd.workload.gpus import GpuSpec, get_gpu
from flowherd.workload.models import ModelShape, get_model
from flowherd.workload.opgraph import GraphBuilder, OpGraph


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceJob:
    """An LLM serving job.

    Attributes:
        model: Catalog name, `ModelShape` or mapping.
        gpu: GPU catalog name or `GpuSpec`.
        name, tenant: Labels.
        tp: GPUs per (prefill) replica.
        ep: Expert-parallel size inside a replica (divides ``tp``; MoE models only).
        instances: Replicas (colocated), or prefill replicas (disaggregated).
        disaggregated: Separate prefill and decode pools with KV-cache transfers.
        decode_instances: Decode replicas (disaggregated only, >= 1).
        decode_tp: GPUs per decode replica; defaults to ``tp``.
        prompt_tokens: Prompt length per request, tokens.
        output_tokens: Generated tokens per request.
        request_rate_per_s: Mean Poisson arrival rate of requests, per second.
        max_batch: Most requests in one prefill batch and in one decode batch.
        batch_window_s: Longest a request waits for its prefill batch to fill, seconds.
        duration_s: How long the service receives requests, seconds.
        efficiency: Fraction of the peak FLOP/s achieved, in (0, 1].
        dtype_bytes: Bytes per weight / activation / KV element.
        submit_s: Start of the service, seconds.
    """

    model: ModelShape
    gpu: GpuSpec = "h100"  # type: ignore[assignment]
    name: str = "serve"
    tenant: str = "default"
    tp: int = 1
    ep: int = 1
    instances: int = 1
    disaggregated: bool = False
    decode_instances: int = 0
    decode_tp: int | None = None
    prompt_tokens: int = 1024
    output_tokens: int = 256
    request_rate_per_s: float = 1.0
    max_batch: int = 32
    batch_window_s: float = 0.05
    duration_s: float = 600.0
    efficiency: float = 0.45
    dtype_bytes: int = 2
    submit_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", get_model(self.model))
        object.__setattr__(self, "gpu", get_gpu(self.gpu))
        if self.decode_tp is None:
            object.__setattr__(self, "decode_tp", self.tp)
        w = f"job {self.name!r}"
        for f in ("tp", "ep", "instances", "decode_tp", "prompt_tokens", "output_tokens", "max_batch",
                  "dtype_bytes"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{w}: {f} must be a positive integer, got {v!r} ({f})")
        m = self.model
        for f in ("tp", "decode_tp"):
            if m.heads % getattr(self, f):
                raise ConfigError(
                    f"{w}: {f} must divide the model's heads={m.heads}, got {getattr(self, f)} ({f})"
                )
        if self.ep > 1:
            if not m.is_moe:
                raise ConfigError(f"{w}: ep > 1 needs an MoE model, {m.name!r} has no experts (ep)")
            if self.tp % self.ep or self.decode_tp % self.ep or m.experts % self.ep:
                raise ConfigError(
                    f"{w}: ep must divide tp={self.tp}, decode_tp={self.decode_tp} and experts={m.experts}, "
                    f"got {self.ep} (ep)"
                )
        if self.disaggregated:
            if isinstance(self.decode_instances, bool) or not isinstance(self.decode_instances, int) \
                    or self.decode_instances < 1:
                raise ConfigError(
                    f"{w}: a disaggregated job needs decode_instances >= 1, got {self.decode_instances!r} "
                    f"(decode_instances)"
                )
        elif self.decode_instances:
            raise ConfigError(
                f"{w}: decode_instances is for disaggregated jobs, got {self.decode_instances} with "
                f"disaggregated=False (decode_instances)"
            )
        for f, lo in (("request_rate_per_s", 0.0), ("duration_s", 0.0), ("batch_window_s", 0.0),
                      ("submit_s", 0.0)):
            v = getattr(self, f)
            if not (isinstance(v, int | float) and math.isfinite(v) and v >= lo):
                raise ConfigError(f"{w}: {f} must be a non-negative number, got {v!r} ({f})")
        if not (isinstance(self.efficiency, int | float) and 0 < self.efficiency <= 1):
            raise ConfigError(f"{w}: efficiency must be in (0, 1], got {self.efficiency!r} (efficiency)")

    # ---- layout ----------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        decode = self.decode_instances * self.decode_tp if self.disaggregated else 0
        return self.instances * self.tp + decode

    def replica_ranks(self) -> tuple[tuple[int, ...], ...]:
        """Ranks of every replica: prefill (or colocated) replicas first, then decode replicas."""
        out = [tuple(range(i * self.tp, (i + 1) * self.tp)) for i in range(self.instances)]
        base = self.instances * self.tp
        if self.disaggregated:
            out += [tuple(range(base + i * self.decode_tp, base + (i + 1) * self.decode_tp))
                    for i in range(self.decode_instances)]
        return tuple(out)

    def decode_replica(self, i: int) -> int:
        """Stage index of decode replica ``i`` (the colocated replica ``i`` when not disaggregated)."""
        n = self.decode_instances if self.disaggregated else self.instances
        if not 0 <= i < n:
            raise ConfigError(f"job {self.name!r}: decode replica must be in 0..{n - 1}, got {i} (replica)")
        return self.instances + i if self.disaggregated else i

    # ---- requests ----------------------------------------------------------------------------
    def request_arrivals(self, rng: np.random.Generator) -> np.ndarray:
        """Poisson request arrival times in ``[submit_s, submit_s + duration_s)``, seconds."""
        from flowherd.workload.arrivals import poisson_times

        return poisson_times(rng, self.request_rate_per_s, self.submit_s + self.duration_s,
                             start_s=self.submit_s)

    def batch_requests(self, arrivals_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Group arrivals into prefill batches: a batch opens at its first request and closes after
        ``batch_window_s`` or at ``max_batch`` requests. Returns (close times in seconds, sizes)."""
        t = np.sort(np.asarray(arrivals_s, dtype=np.float64))
        starts, sizes = [], []
        i = 0
        while i < len(t):
            j = int(np.searchsorted(t, t[i] + self.batch_window_s, side="right"))
            j = min(j, i + self.max_batch)
            close = t[i] + self.batch_window_s if j - i < self.max_batch else t[j - 1]
            starts.append(close)
            sizes.append(j - i)
            i = j
        return np.asarray(starts), np.asarray(sizes, dtype=np.int64)

    # ---- op graphs -----------------------------------------------------------------------------
    def prefill_graph(self, requests: int, *, replica: int = 0) -> OpGraph:
        """One prefill step of ``requests`` prompts of ``prompt_tokens`` on prefill replica ``replica``."""
        self._check_count(requests, "requests")
        return self._step_graph("prefill", replica, requests)

    def decode_graph(self, batch: int, *, replica: int = 0, steps: int = 1,
                     context_tokens: int | None = None) -> OpGraph:
        """``steps`` decode steps of ``batch`` sequences on decode replica ``replica``, merged into one
        compute task and one task per collective kind (``count`` scaled by ``steps``).

        ``context_tokens`` is the mean context per step; default ``prompt_tokens + output_tokens / 2``.
        """
        self._check_count(batch, "batch")
        self._check_count(steps, "steps")
        return self._step_graph("decode", replica, batch, steps=steps, context_tokens=context_tokens)

    def kv_transfer_graph(self, requests: int, *, src: int = 0, dst: int = 0) -> OpGraph:
        """KV-cache transfer of ``requests`` prompts, prefill replica ``src`` -> decode replica ``dst``."""
        if not self.disaggregated:
            raise ConfigError(f"job {self.name!r}: KV transfers need disaggregated=True (disaggregated)")
        self._check_count(requests, "requests")
        b = GraphBuilder(f"{self.name}/kv", self.world_size, self.replica_ranks())
        self._append_kv(b, requests, src, dst, ())
        return b.build()

    def kv_bytes(self, requests: int = 1) -> float:
        """KV-cache bytes of ``requests`` prompts: ``2 * layers * kv_heads * head_dim * seq * bytes``."""
        return requests * self.prompt_tokens * self.model.kv_cache_bytes_per_token(self.dtype_bytes)

    def batch_graph(self, requests: int, *, prefill_replica: int = 0, decode_replica: int = 0) -> OpGraph:
        """The whole life of a batch of ``requests``: prefill, KV transfer (disaggregated), then
        ``output_tokens`` decode steps of the batch (merged), chained in one op graph.

        Shortcut: the batch decodes on its own (no continuous batching with other batches).
        """
        self._check_count(requests, "requests")
        b = GraphBuilder(f"{self.name}/batch", self.world_size, self.replica_ranks())
        last = self._append_step(b, "prefill", prefill_replica, requests, ())
        if self.disaggregated:
            last = self._append_kv(b, requests, prefill_replica, decode_replica, last)
        self._append_step(b, "decode", decode_replica, requests, last, steps=self.output_tokens)
        return b.build()

    def rounds(self, rng: np.random.Generator) -> list[tuple[float, OpGraph]]:
        """Requests of the whole service as (ready time in seconds, `batch_graph`) pairs: Poisson
        arrivals, grouped by `batch_requests`, batches dealt round-robin to prefill and decode replicas."""
        close, sizes = self.batch_requests(self.request_arrivals(rng))
        n_dec = self.decode_instances if self.disaggregated else self.instances
        out = []
        for k, (t, n) in enumerate(zip(close.tolist(), sizes.tolist(), strict=True)):
            p = k % self.instances
            d = k % n_dec if self.disaggregated else p
            out.append((t, self.batch_graph(int(n), prefill_replica=p, decode_replica=d)))
        return out

    def _step_graph(self, phase: str, replica: int, requests: int, *, steps: int = 1,
                    context_tokens: float | None = None) -> OpGraph:
        b = GraphBuilder(f"{self.name}/{phase}", self.world_size, self.replica_ranks())
        self._append_step(b, phase, replica, requests, (), steps=steps, context_tokens=context_tokens)
        return b.build()

    def _append_step(self, b: GraphBuilder, phase: str, replica: int, requests: int, deps: tuple[int, ...],
                     *, steps: int = 1, context_tokens: float | None = None) -> tuple[int, ...]:
        m, g = self.model, self.gpu
        if phase == "prefill":
            if not 0 <= replica < self.instances:
                raise ConfigError(
                    f"job {self.name!r}: prefill replica must be in 0..{self.instances - 1}, got {replica} "
                    f"(replica)"
                )
            stage, tp = replica, self.tp
            tokens = requests * self.prompt_tokens
            flops = tokens * m.forward_flops_per_token(self.prompt_tokens)
            read = m.num_params() * self.dtype_bytes
        else:
            stage = self.decode_replica(replica)
            tp = self.decode_tp if self.disaggregated else self.tp
            ctx = self.prompt_tokens + self.output_tokens / 2 if context_tokens is None else context_tokens
            tokens = requests
            flops = requests * (2.0 * m.num_active_params() + m.layers * m.attention_score_flops(1) * ctx)
            kv = requests * ctx * m.kv_cache_bytes_per_token(self.dtype_bytes)
            read = m.num_params() * self.dtype_bytes + kv
        compute_s = max(flops / (tp * g.peak_bf16_flops * self.efficiency),
                        read / (tp * g.memory_bytes_per_s))
        r = b.stage_ranks[stage]
        last: tuple[int, ...] = (b.compute(f"r{stage}/{phase}", steps * compute_s, deps, stage=stage,
                                           phase=phase),)
        if tp > 1:
            colls = (Collective(op=Op.ALLREDUCE, gpus=r, size_bytes=tokens * m.hidden * self.dtype_bytes),)
            last = (b.comm(f"r{stage}/{phase}/tp", colls, last, group="tp", stage=stage,
                           count=2 * m.layers * steps, phase=phase),)
        if self.ep > 1 and m.num_moe_layers:
            size = tokens / tp * m.top_k * m.hidden * self.dtype_bytes
            colls = tuple(Collective(op=Op.ALLTOALL, gpus=r[k:k + self.ep], size_bytes=size)
                          for k in range(0, tp, self.ep))
            last = (b.comm(f"r{stage}/{phase}/ep", colls, last, group="ep", stage=stage,
                           count=2 * m.num_moe_layers * steps, phase=phase),)
        return last

    def _append_kv(self, b: GraphBuilder, requests: int, src: int, dst: int,
                   deps: tuple[int, ...]) -> tuple[int, ...]:
        if not 0 <= src < self.instances:
            raise ConfigError(f"job {self.name!r}: src must be in 0..{self.instances - 1}, got {src} (src)")
        s_r, d_r = b.stage_ranks[src], b.stage_ranks[self.decode_replica(dst)]
        n = math.lcm(self.tp, self.decode_tp)
        size = self.kv_bytes(requests) / n
        colls = tuple(Collective(op=Op.SENDRECV, gpus=(s_r[i % self.tp], d_r[i % self.decode_tp]),
                                 size_bytes=size) for i in range(n))
        return (b.comm(f"p{src}->d{dst}/kv", colls, deps, group="kv", stage=src, phase="kv"),)

    def _check_count(self, v: int, field: str) -> None:
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ConfigError(f"job {self.name!r}: {field} must be a positive integer, got {v!r} ({field})")


__all__ = ["InferenceJob"]
