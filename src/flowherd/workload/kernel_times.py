"""Kernel model: the time of one GPU kernel (a GEMM, an attention core, a memory-bound kernel, the
optimizer step) from constants fitted per GPU type (`KernelModel`, `KERNEL_MODELS`).

The roofline each kernel follows, the constants and the measurements they are fitted to are
described in `flowherd.workload.compute`'s docstring, which applies these functions to every op of
a transformer layer and re-exports them. They sit apart because they time one kernel and know
nothing of a model's layers: the inference and planning models time their own kernels with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowherd.collectives.tuning import BASE_LATENCY_US, HW_LATENCY_US, NET_OVERHEAD_US
from flowherd.errors import ConfigError
from flowherd.workload.attention_measurements import (
    TRITON_BWD_SLOWDOWN,
    TRITON_FWD_SLOWDOWN,
)
from flowherd.workload.gpus import GpuSpec

__all__ = [
    "FP8_K_HALF",
    "FP8_K_SWEEP",
    "KERNEL_MODELS",
    "OPTIMIZER_BYTES_PER_PARAM",
    "KernelModel",
    "attention_time_s",
    "comm_interference_s",
    "fp8_peak_flops",
    "fsdp_grad_prep_s",
    "gemm_efficiency",
    "gemm_time_s",
    "grad_accumulation_s",
    "kernel_model",
    "memory_time_s",
    "nccl_ring_latency_s",
    "optimizer_step_s",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelModel:
    """Fitted kernel-efficiency constants of one GPU type (`flowherd.workload.compute` docstring).

    Attributes:
        name: GPU catalog name.
        gemm_peak_fraction: Plateau of a GEMM's achieved fraction of the dense BF16 peak.
        gemm_k_half: Reduction size at which a GEMM reaches half its plateau, elements.
        gemm_overhead_s: Fixed cost of one GEMM kernel, seconds.
        attention_fwd_fraction, attention_bwd_fraction: Flash attention's fraction of the peak at
            long sequences, forward and backward.
        attention_seq_half: Sequence length at which flash attention reaches half that, tokens.
        fa2_fwd_fraction, fa2_bwd_fraction, fa2_seq_half: The same for the FlashAttention-2
            kernel where the flash constants are another kernel's (H100: FlashAttention-3); None:
            the flash ones.
        attention_bwd_seq_half: The backward's half-point where it was fitted apart; None: the
            forward's.
        cudnn_fwd_fraction, cudnn_bwd_fraction, cudnn_seq_half, cudnn_bwd_seq_half: The same for
            cuDNN's fused attention (``attention="cudnn"``); None: FlashAttention-2's.
        fp8_peak_fraction: Plateau of an FP8 GEMM's fraction of the dense FP8 peak (the FP8 MAMF);
            None: no FP8 GEMM measurement.
        hbm_fraction: Achieved fraction of the HBM bandwidth of streaming kernels.
        kernel_overhead_s: Fixed cost of one non-GEMM kernel, seconds.
        sustained_fraction: What a training run keeps of the kernel speeds measured in isolation
            (power-limited clocks under sustained load, framework gaps between kernels); scales
            `layer_times` and `head_times`, not the single-kernel functions.
        sm_count: Streaming multiprocessors of the GPU.
        nccl_channels: Channels (one CUDA block each, on one SM) of NCCL's ring on the GPU's
            8-GPU NVLink server (`flowherd.collectives.select`: ring / Simple, 24 on DGX A100 and
            DGX H100).
        nccl_ring_fraction: That ring's bus bandwidth as a fraction of the NVLink bandwidth
            (the same model: 356 of 450 GB/s on DGX H100, 238 of 300 on DGX A100).
        nccl_net_fraction: The bus bandwidth of NCCL's rings across servers as a fraction of the
            server's NICs (the same model, 4 DGX A100 with 8 x 200 Gb/s: 188 of 200 GB/s).
    """

    name: str
    gemm_peak_fraction: float
    gemm_k_half: float = 29.1
    gemm_overhead_s: float = 6.46e-6
    attention_fwd_fraction: float = 0.55
    attention_bwd_fraction: float = 0.45
    attention_seq_half: float = 256.0
    fa2_fwd_fraction: float | None = None
    fa2_bwd_fraction: float | None = None
    fa2_seq_half: float | None = None
    attention_bwd_seq_half: float | None = None
    cudnn_fwd_fraction: float | None = None
    cudnn_bwd_fraction: float | None = None
    cudnn_seq_half: float | None = None
    cudnn_bwd_seq_half: float | None = None
    fp8_peak_fraction: float | None = None
    hbm_fraction: float = 0.8
    kernel_overhead_s: float = 2e-6
    sustained_fraction: float = 0.87
    sm_count: int = 132
    nccl_channels: int = 24
    nccl_ring_fraction: float = 0.79
    nccl_net_fraction: float = 0.94


# FP8 GEMMs reach half their plateau at k = 458 (least squares on the log, every point within 2%, of
# tilelang's FP8 GEMM benchmark on H800 SXM, the H100 SXM's SM and FP8 peak: M = N = 8192, K = 256 ...
# 16384: 569, 858, 1129, 1343, 1467, 1507, 1541 TFLOP/s; benchmark/matmul_fp8/README.md of the tilelang
# fork xwhzz/tilelang@b2acfc3, measured at tilelang 6b1faf71); the plateau sits where the GPU's FP8
# MAMF lands on that curve
FP8_K_HALF = 458.0
FP8_K_SWEEP = ((256, 569), (512, 858), (1024, 1129), (2048, 1343), (4096, 1467), (8192, 1507), (16384, 1541))

# H100 attention kernels fitted to FlashAttention-3's figures 5 and 6 (`flowherd.workload.compute` docstring,
# FA3_MEASURED_TFLOPS): FlashAttention-3 as the H100 "flash" kernel, cuDNN as "cudnn"
_H100_ATTENTION = dict(attention_fwd_fraction=0.6624, attention_seq_half=584.0, attention_bwd_fraction=0.4773,
                       attention_bwd_seq_half=780.0, cudnn_fwd_fraction=0.5673, cudnn_seq_half=371.0,
                       cudnn_bwd_fraction=0.4361, cudnn_bwd_seq_half=709.0)

KERNEL_MODELS: dict[str, KernelModel] = {
    # FlashAttention-2 on H100 and A100: fitted to the FlashAttention-2 paper's figures 7d and 4d
    # (`flowherd.workload.compute` docstring, FA2_MEASURED_TFLOPS)
    "h100": KernelModel(name="h100", gemm_peak_fraction=0.8033, sustained_fraction=0.862,
                        fa2_fwd_fraction=0.3275, fa2_bwd_fraction=0.2729, fa2_seq_half=532.0,
                        fp8_peak_fraction=1402.6 / 1979 * (14336 + FP8_K_HALF) / 14336, **_H100_ATTENTION),
    "h200": KernelModel(name="h200", gemm_peak_fraction=0.8033, sustained_fraction=0.862,
                        fa2_fwd_fraction=0.3275, fa2_bwd_fraction=0.2729, fa2_seq_half=532.0,
                        fp8_peak_fraction=1453.4 / 1979 * (12032 + FP8_K_HALF) / 12032, **_H100_ATTENTION),
    "a100": KernelModel(name="a100", gemm_peak_fraction=0.861, gemm_k_half=85.0, gemm_overhead_s=6.52e-6,
                        attention_fwd_fraction=0.60, attention_bwd_fraction=0.50, attention_seq_half=485.0,
                        sustained_fraction=0.949, sm_count=108),
    "b200": KernelModel(name="b200", gemm_peak_fraction=0.776, sustained_fraction=0.862, sm_count=148,
                        fp8_peak_fraction=3432.5 / 4500 * (3072 + FP8_K_HALF) / 3072),
    "mi300x": KernelModel(name="mi300x", gemm_peak_fraction=0.598, attention_fwd_fraction=0.40,
                          attention_bwd_fraction=0.30, sustained_fraction=0.862, sm_count=304),
}

# Adam with mixed precision (Megatron-LM's optimizer; Rajbhandari et al. SC'20 section 3.1): per
# parameter of the shard it reads the FP32 master weight, the FP32 main gradient and the two FP32
# moments (16 bytes) and writes the master weight, the moments and the BF16 model weight (14 bytes).
OPTIMIZER_BYTES_PER_PARAM = 30.0


def kernel_model(gpu: GpuSpec) -> KernelModel:
    """The constants of ``gpu`` (by catalog name; an unknown GPU gets H100's shape constants)."""
    return KERNEL_MODELS.get(gpu.name.lower(), KERNEL_MODELS["h100"])


def fp8_peak_flops(gpu: GpuSpec) -> float:
    """The GPU's dense FP8 peak, FLOP/s; ConfigError if it has no FP8 tensor cores or no FP8 GEMM
    measurement in `KERNEL_MODELS`."""
    if gpu.peak_fp8_flops is None or kernel_model(gpu).fp8_peak_fraction is None:
        raise ConfigError(f"precision 'fp8' needs a GPU with FP8 tensor cores and an FP8 GEMM measurement, "
                          f"got gpu {gpu.name!r} (precision)")
    return gpu.peak_fp8_flops


def gemm_time_s(m: float, n: float, k: float, gpu: GpuSpec, *, batch: float = 1,
                dtype_bytes: int = 2, precision: str = "bf16") -> float:
    """Time of ``batch`` GEMMs ``[m, k] x [k, n]`` on one GPU, seconds (`flowherd.workload.compute`).

    ``precision`` "fp8": FP8 operands (1 byte) at the FP8 peak and plateau, the output in
    ``dtype_bytes``.
    """
    if min(m, n, k, batch) <= 0:
        return 0.0
    km = kernel_model(gpu)
    flops = 2.0 * batch * m * n * k
    if precision == "fp8":
        peak = fp8_peak_flops(gpu)
        eff = km.fp8_peak_fraction * k / (k + FP8_K_HALF)
        mem = batch * (m * k + k * n + dtype_bytes * m * n) / gpu.memory_bytes_per_s
    else:
        peak = gpu.peak_bf16_flops
        eff = km.gemm_peak_fraction * k / (k + km.gemm_k_half)
        mem = dtype_bytes * batch * (m * k + k * n + m * n) / gpu.memory_bytes_per_s
    return max(flops / (peak * eff), mem) + km.gemm_overhead_s


def gemm_efficiency(m: float, n: float, k: float, gpu: GpuSpec, *, batch: float = 1,
                    precision: str = "bf16") -> float:
    """Achieved fraction of the peak of a GEMM (its FLOPs over its `gemm_time_s`; the FP8 peak for
    ``precision="fp8"``)."""
    peak = fp8_peak_flops(gpu) if precision == "fp8" else gpu.peak_bf16_flops
    return 2.0 * batch * m * n * k / gemm_time_s(m, n, k, gpu, batch=batch, precision=precision) / peak


def memory_time_s(size_bytes: float, gpu: GpuSpec, *, kernels: int = 1) -> float:
    """Time of ``kernels`` streaming kernels moving ``size_bytes`` in all, seconds."""
    km = kernel_model(gpu)
    if size_bytes <= 0:
        return 0.0
    return size_bytes / (gpu.memory_bytes_per_s * km.hbm_fraction) + kernels * km.kernel_overhead_s


def attention_time_s(flops: float, seq_len: int, gpu: GpuSpec, *, backward: bool = False,
                     causal: bool = True, kernel: str = "flash") -> float:
    """Fused-attention time of ``flops`` (the model's count, no causal halving), seconds.

    ``kernel``: "flash" (the GPU's flash constants), "flash2" (FlashAttention-2: the same where
    the GPU has no ``fa2_*`` constants), "triton" (FlashAttention in Triton: the FlashAttention-2
    fractions over `TRITON_FWD_SLOWDOWN` / `TRITON_BWD_SLOWDOWN`) or "cudnn" (cuDNN's fused
    attention: the ``cudnn_*`` constants, FlashAttention-2's where the GPU has none).
    """
    if flops <= 0:
        return 0.0
    km = kernel_model(gpu)
    frac = km.attention_bwd_fraction if backward else km.attention_fwd_fraction
    half = (km.attention_bwd_seq_half or km.attention_seq_half) if backward else km.attention_seq_half
    if kernel == "cudnn" and km.cudnn_fwd_fraction is not None:
        frac = km.cudnn_bwd_fraction if backward else km.cudnn_fwd_fraction
        half = (km.cudnn_bwd_seq_half or km.cudnn_seq_half) if backward else km.cudnn_seq_half
    elif kernel in ("triton", "flash2", "cudnn"):
        fa2 = km.fa2_bwd_fraction if backward else km.fa2_fwd_fraction
        if fa2 is not None:
            frac, half = fa2, km.fa2_seq_half or half
        if kernel == "triton":
            frac /= TRITON_BWD_SLOWDOWN if backward else TRITON_FWD_SLOWDOWN
    frac *= seq_len / (seq_len + half)
    work = flops * (0.5 if causal else 1.0)
    return work / (gpu.peak_bf16_flops * frac) + km.kernel_overhead_s


def optimizer_step_s(params: float, gpu: GpuSpec, *,
                     bytes_per_param: float = OPTIMIZER_BYTES_PER_PARAM) -> float:
    """Adam step over ``params`` parameters of one rank's shard: bytes over HBM bandwidth, seconds."""
    return params * bytes_per_param / gpu.memory_bytes_per_s


def nccl_ring_latency_s(ranks: int, servers: int = 1, *, allreduce: bool = False) -> float:
    """NCCL's latency of one ring collective over ``ranks`` GPUs on ``servers`` servers, Simple
    protocol (the protocol of large calls), seconds: the ring term of ``ncclTopoTuneModel``
    (NVIDIA/nccl ``src/graph/tuning.cc`` at 2.30.7, ported in `flowherd.collectives.tuning`): the base
    latency, then per step inside a server the NVLink hop (at least three times the network overhead
    of an Intel host once the ring leaves the server) and per step across servers the network hop
    (InfiniBand: no plugin latency). An all-gather or reduce-scatter takes ``ranks - 1`` steps,
    ``servers - 1`` of them across servers; an all-reduce twice both. A ring's steps run one after
    the other, so the latency grows with the ring: 32 us on one DGX H100 server, 70 us over two,
    297 us over eight (all-gather)."""
    if ranks < 2:
        return 0.0
    simple = 2  # PROTOCOL_NAMES index of Simple
    k = 2 if allreduce else 1
    steps, far = k * (ranks - 1), k * (max(1, servers) - 1)
    intra = HW_LATENCY_US["nvlink"]["ring"][simple]
    if servers > 1:
        intra = max(intra, 3 * NET_OVERHEAD_US["intel"])
    net = HW_LATENCY_US["net"]["ring"][simple]
    return (BASE_LATENCY_US["ring"][simple] + (steps - far) * intra + far * net) * 1e-6


def comm_interference_s(compute_s: float, comm_bytes: float, gpu: GpuSpec, *,
                        across_servers: bool = False, gpus_per_server: int = 8, ranks: int = 1,
                        servers: int = 1, collectives: int = 1, allreduce: bool = False) -> float:
    """Time a compute task loses to the NCCL kernels that run beside it on the same GPU, seconds.

    An NCCL collective runs one CUDA block per channel, each resident on one SM for the whole call
    (NCCL's ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` documentation: "each channel uses
    one CUDA block"), so while it overlaps a compute task the kernels of that task get
    ``sm_count - nccl_channels`` of the SMs: the task lasts ``nccl_channels / sm_count`` of the
    overlap longer. The overlap is ``compute_s`` or the collectives' time, whichever is shorter,
    each collective timed as NCCL's tuning model times a ring: its latency (`nccl_ring_latency_s`
    over ``ranks`` GPUs on ``servers`` servers; ``ranks`` 1: none) plus its bytes at the ring's bus
    bandwidth (``comm_bytes`` is what the GPU sends in all ``collectives`` of them, nccl-tests bus
    bytes): on one server the NVLink ring's, across servers (``across_servers``) at most that of
    one channel per NIC, ``gpus_per_server`` NICs of the GPU's datasheet speed. The blocks hold
    their SMs through the latency too (they wait on the ring's flags), which is what grows with
    the ring: across servers the bus bandwidth of a DGX ring is about that of its NVLink ring, its
    latency not. A deliberate shortcut: the simulator times compute and communication apart, so the
    collective's time here is that estimate, not the simulated one. SM counts: 108 (A100) and 132
    (H100 SXM), NVIDIA's A100 and H100 architecture whitepapers.
    """
    if compute_s <= 0 or comm_bytes <= 0:
        return 0.0
    km = kernel_model(gpu)
    bw = gpu.scaleup_bytes_per_s * km.nccl_ring_fraction
    if across_servers:
        bw = min(bw, gpus_per_server * gpu.nic_bytes_per_s * km.nccl_net_fraction)
    comm_s = comm_bytes / bw + collectives * nccl_ring_latency_s(ranks, servers, allreduce=allreduce)
    return km.nccl_channels / km.sm_count * min(compute_s, comm_s)


def fsdp_grad_prep_s(params: float, gpu: GpuSpec, *, param_bytes: int, grad_bytes: int) -> float:
    """PyTorch FSDP's work on an unsharded gradient of ``params`` elements before its reduce-scatter
    (``torch/distributed/fsdp/_runtime_utils.py``, ``_post_backward_hook`` / ``_reduce_grad``): the
    cast to the reduce dtype when it differs from the parameter dtype, then the in-place pre-division
    by the gradient pre-divide factor; at the GPU's ``sustained_fraction`` (one value per unit), s."""
    if params <= 0:
        return 0.0
    cast = param_bytes + grad_bytes if param_bytes != grad_bytes else 0
    t = memory_time_s(params * (cast + 2 * grad_bytes), gpu, kernels=1 + (cast > 0))
    return t / kernel_model(gpu).sustained_fraction


def grad_accumulation_s(params: float, gpu: GpuSpec, *, dtype_bytes: int = 2) -> float:
    """DeepSpeed ``BF16_Optimizer.update_hp_grads`` after one micro-batch's backward over ``params``
    elements (``deepspeed/runtime/bf16_optimizer.py``: ``hp_grad.add_(lp.grad.to(hp_grad.dtype))``):
    the cast reads the BF16 gradient and writes an FP32 copy, the add reads it and the FP32
    buffer and writes the buffer; at the GPU's ``sustained_fraction``, seconds."""
    if params <= 0:
        return 0.0
    t = memory_time_s(params * (dtype_bytes + 4 + 4 + 4 + 4), gpu, kernels=2)
    return t / kernel_model(gpu).sustained_fraction
