"""Helix-style placement of a served model's layers over mixed GPUs, scored by max flow.

Helix (Mei et al., "Helix: Serving Large Language Models over Heterogeneous GPUs and Network via
Max-Flow", ASPLOS'25) serves one model over GPUs of several types by giving each GPU a contiguous
range of layers and routing every token through a chain of GPUs that together hold all layers.
The serving throughput of a layer assignment is the max flow of a graph (its section 4):

* source -> every GPU holding layer 0; every GPU holding the last layer -> sink;
* a GPU is a node of capacity its token throughput with its layers (split into in/out nodes):
  decode is bound by reading the layers' weights once per batch step: ``batch`` over one layer's
  decode step on the kernel model of `flowherd.workload.compute` (its GEMMs weight-bound at small
  batches), or, with the job's explicit ``efficiency``, the roofline
  ``min(batch * hbm_bytes_per_s / weight_bytes, flops_per_s * efficiency / flops_per_token)``;
* GPU i -> GPU j when i's range ends where j's begins, of capacity the link bandwidth between
  them (NVLink inside a server, the NIC across) over the activation bytes of one token.

Helix chooses the ranges with a MILP; this module uses its max-flow score inside a small search
(a deliberate shortcut, the instances here are small): GPUs are split into ``c`` chains
balanced by compute, each chain's layers are shared out in proportion to its GPUs' throughput
(respecting memory), and the ``c`` with the largest max flow wins. Ranges that meet across chains
let flow cross chains, which is what max flow adds over independent pipelines. networkx computes
the flows (off the hot path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from flowherd.errors import ConfigError, InfeasibleError
from flowherd.fabric.core import Fabric
from flowherd.planning.predict import fabric_view
from flowherd.workload import compute as cm
from flowherd.workload.gpus import GpuSpec, get_gpu
from flowherd.workload.inference import InferenceJob

__all__ = ["HelixPlacement", "helix_place", "helix_throughput"]

# share of HBM a GPU may fill with weights (the rest holds the KV cache and activations)
_WEIGHT_SHARE = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class HelixPlacement:
    """Layer ranges per GPU and the throughput they sustain.

    Attributes:
        gpus: GPU ids that hold layers.
        layer_start, layer_end: ``[start, end)`` layer range of each GPU.
        throughput_tokens_per_s: Max flow from source to sink, tokens per second.
        flow_tokens_per_s: Tokens per second on each GPU-to-GPU edge ``(gpu_i, gpu_j)`` of the flow.
    """

    gpus: tuple[int, ...]
    layer_start: tuple[int, ...]
    layer_end: tuple[int, ...]
    throughput_tokens_per_s: float
    flow_tokens_per_s: dict[tuple[int, int], float]


def _layer_decode_s(job: InferenceJob, spec: GpuSpec) -> float:
    """One (dense) layer's decode step of ``max_batch`` tokens on one GPU, seconds
    (`flowherd.workload.compute.layer_ops` without the attention core)."""
    ops = cm.layer_ops(job.model, 0, spec, micro_batch=job.max_batch, seq_len=1, dtype_bytes=job.dtype_bytes)
    return sum(o.fwd_s for o in ops if o.name != "attention") / cm.kernel_model(spec).sustained_fraction


def _gpu_rates(fabric: Fabric, job: InferenceJob, gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                               np.ndarray, float, float]:
    """Per-GPU (tokens per second for one layer, max layers by memory), server, bytes/layer, act bytes."""
    m = job.model
    layer_bytes = m.num_params() * job.dtype_bytes / m.layers
    layer_flops = 2.0 * m.num_active_params() / m.layers
    rate = np.empty(len(gpus))
    cap = np.empty(len(gpus), np.int64)
    for i, g in enumerate(gpus.tolist()):
        spec = get_gpu(fabric.gpu_type[int(fabric.gpu_server[g])])
        if job.efficiency is None:  # the kernel model: one layer's decode step at the full batch
            rate[i] = job.max_batch / _layer_decode_s(job, spec)
        else:
            rate[i] = min(job.max_batch * spec.memory_bytes_per_s / layer_bytes,
                          spec.peak_bf16_flops * job.efficiency / layer_flops)
        cap[i] = int(_WEIGHT_SHARE * spec.memory_bytes // layer_bytes)
    act = m.hidden * job.dtype_bytes
    return rate, cap, fabric.gpu_server[gpus], layer_bytes, act


def helix_throughput(fabric: Fabric, job: InferenceJob, gpus: Sequence[int], start: Sequence[int],
                     end: Sequence[int]) -> tuple[float, dict[tuple[int, int], float]]:
    """Max-flow throughput (tokens per second) of a given layer assignment, and its GPU-edge flows."""
    g_arr = np.asarray(gpus, dtype=np.int64)
    rate, _, server, _, act = _gpu_rates(fabric, job, g_arr)
    view = fabric_view(fabric)
    nlayers = job.model.layers
    net = nx.DiGraph()
    for i, g in enumerate(g_arr.tolist()):
        k = end[i] - start[i]
        if k <= 0:
            continue
        net.add_edge(("in", g), ("out", g), capacity=rate[i] / k)
        if start[i] == 0:
            net.add_edge("s", ("in", g), capacity=math.inf)
        if end[i] == nlayers:
            net.add_edge(("out", g), "t", capacity=math.inf)
    for i, gi in enumerate(g_arr.tolist()):
        for j, gj in enumerate(g_arr.tolist()):
            if i != j and end[i] == start[j] and end[i] < nlayers and end[j] > start[j] > 0:
                bw = view.nvlink_bytes_per_s if server[i] == server[j] else view.nic_bytes_per_s
                net.add_edge(("out", gi), ("in", gj), capacity=bw / act)
    if "s" not in net or "t" not in net:
        return 0.0, {}
    value, flow = nx.maximum_flow(net, "s", "t")
    edges = {(u[1], v[1]): f for u, d in flow.items() if isinstance(u, tuple) and u[0] == "out"
             for v, f in d.items() if isinstance(v, tuple) and v[0] == "in" and f > 0}
    return float(value), edges


def helix_place(fabric: Fabric, job: InferenceJob, gpus: Sequence[int] | None = None) -> HelixPlacement:
    """Assign ``job``'s layers to ``gpus`` (default: every GPU) to maximize max-flow throughput.

    Args:
        fabric: The fabric (``gpu_type`` per server gives each GPU's spec).
        job: The served model.
        gpus: Candidate GPU ids.

    Returns:
        The best `HelixPlacement` found (module docstring).

    Raises:
        InfeasibleError: the GPUs cannot hold the model's weights even all together.
        ConfigError: bad GPU ids.
    """
    g_arr = np.arange(fabric.num_gpus) if gpus is None else np.asarray(gpus, dtype=np.int64).ravel()
    if (g_arr.size == 0 or g_arr.min() < 0 or g_arr.max() >= fabric.num_gpus
            or np.unique(g_arr).size != g_arr.size):
        raise ConfigError(f"gpus must be distinct GPU ids in 0..{fabric.num_gpus - 1}, got "
                          f"{g_arr.tolist()[:8]} (gpus)")
    g_arr = np.sort(g_arr)
    rate, cap, server, layer_bytes, _ = _gpu_rates(fabric, job, g_arr)
    nlayers = job.model.layers
    if int(cap.sum()) < nlayers:
        raise InfeasibleError(f"job {job.name!r}: {nlayers} layers of {layer_bytes / 2**30:.2f} GiB do not "
                              f"fit in the memory of the {g_arr.size} GPUs given (they hold "
                              f"{int(cap.sum())})")
    best: HelixPlacement | None = None
    order = np.lexsort((g_arr, server))  # chains follow servers: NVLink between neighbours
    for chains in range(1, g_arr.size + 1):
        # deal GPUs to chains by compute, largest first, keeping server order inside a chain
        member = np.full(g_arr.size, -1)
        load = np.zeros(chains)
        room = np.zeros(chains, np.int64)
        for i in sorted(order.tolist(), key=lambda i: -rate[i]):
            c = int(np.argmin(np.where(room >= nlayers, np.inf, load)))
            if room[c] >= nlayers:
                c = int(np.argmin(load))
            member[i] = c
            load[c] += rate[i]
            room[c] += cap[i]
        if np.any(room < nlayers):
            break  # more chains than the memory allows
        start = np.zeros(g_arr.size, np.int64)
        end = np.zeros(g_arr.size, np.int64)
        for c in range(chains):
            idx = [i for i in order.tolist() if member[i] == c]
            share = rate[idx] / rate[idx].sum() * nlayers
            k = np.minimum(np.floor(share).astype(np.int64), cap[idx])
            left = nlayers - int(k.sum())
            for t in np.argsort(-(share - k)).tolist() * (left + 1):
                if left <= 0:
                    break
                if k[t] < cap[idx][t]:
                    k[t] += 1
                    left -= 1
            pos = 0
            for i, kk in zip(idx, k.tolist(), strict=True):
                start[i], end[i] = pos, pos + kk
                pos += kk
        value, flows = helix_throughput(fabric, job, g_arr, start, end)
        if best is None or value > best.throughput_tokens_per_s * (1 + 1e-9):
            best = HelixPlacement(gpus=tuple(g_arr.tolist()), layer_start=tuple(start.tolist()),
                                  layer_end=tuple(end.tolist()), throughput_tokens_per_s=value,
                                  flow_tokens_per_s=flows)
    if best is None:
        raise InfeasibleError(f"job {job.name!r}: no chain of the given GPUs holds all {nlayers} layers")
    return best
