"""GPU catalog: the peak numbers a workload model needs, from vendor datasheets.

Every figure is the vendor's headline for the SXM/OAM part; FLOP/s are *dense* (no 2:4 sparsity)
BF16 tensor-core peaks. ``scaleup_bytes_per_s`` is per direction (vendors quote NVLink and
Infinity Fabric bidirectionally: 900 GB/s NVLink 4 is 450 GB/s each way). ``nic_bytes_per_s`` is
the scale-out NIC per GPU of the vendor's reference server (DGX / HGX / OAM platform).

>>> GPUS["h100"].peak_bf16_flops / 1e12
989.0
>>> GPUS["h100"].scaleup_bytes_per_s / 1e9
450.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowherd.errors import ConfigError
from flowherd.registry import Registry
from flowherd.units import GB, TFLOPS, GBps, Gbps, TBps


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """Peak capabilities of one GPU.

    Attributes:
        name: Catalog key ("h100").
        peak_bf16_flops: Dense BF16 tensor-core peak, FLOP/s.
        memory_bytes: HBM capacity, bytes.
        memory_bytes_per_s: HBM bandwidth, bytes per second.
        scaleup_bytes_per_s: NVLink / xGMI bandwidth per direction, bytes per second.
        nic_bytes_per_s: Scale-out NIC bandwidth per GPU per direction, bytes per second.
        source: Where the numbers come from.
        peak_fp8_flops: Dense FP8 tensor-core peak, FLOP/s; None: the GPU has no FP8 tensor cores.
    """

    name: str
    peak_bf16_flops: float
    memory_bytes: float
    memory_bytes_per_s: float
    scaleup_bytes_per_s: float
    nic_bytes_per_s: float
    source: str = ""
    peak_fp8_flops: float | None = None

    def __post_init__(self) -> None:
        for f in ("peak_bf16_flops", "memory_bytes", "memory_bytes_per_s", "scaleup_bytes_per_s",
                  "nic_bytes_per_s"):
            v = getattr(self, f)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ConfigError(f"gpu {self.name!r}: {f} must be a positive number, got {v!r} ({f})")
        v = self.peak_fp8_flops
        if v is not None and not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
            raise ConfigError(f"gpu {self.name!r}: peak_fp8_flops must be a positive number or None, "
                              f"got {v!r} (peak_fp8_flops)")


GPUS: Registry[GpuSpec] = Registry("gpu")

# NVIDIA A100 80GB SXM datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16 tensor
# 312 TFLOPS (624 with sparsity), 80 GB HBM2e at 2,039 GB/s, NVLink 600 GB/s (bidirectional, 12 links
# of 50 GB/s), no FP8 tensor cores. DGX A100: 8x ConnectX-6 200 Gb/s HDR InfiniBand for compute traffic.
GPUS.add("a100", GpuSpec(
    name="a100", peak_bf16_flops=312 * TFLOPS, memory_bytes=80 * GB, memory_bytes_per_s=2039 * GBps,
    scaleup_bytes_per_s=300 * GBps, nic_bytes_per_s=200 * Gbps,
    source="NVIDIA A100 datasheet (SXM 80GB); DGX A100 datasheet",
))
# NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): BF16 1,979 TFLOPS *with sparsity* = 989 dense,
# FP8 3,958 with sparsity = 1,979 dense, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s (bidirectional,
# 18 NVLink4 links). DGX H100: 8x ConnectX-7 400 Gb/s (one per GPU).
GPUS.add("h100", GpuSpec(
    name="h100", peak_bf16_flops=989 * TFLOPS, memory_bytes=80 * GB, memory_bytes_per_s=3.35 * TBps,
    scaleup_bytes_per_s=450 * GBps, nic_bytes_per_s=400 * Gbps, peak_fp8_flops=1979 * TFLOPS,
    source="NVIDIA H100 datasheet (SXM); DGX H100 datasheet",
))
# NVIDIA H200 datasheet (H200 SXM): same Hopper compute as H100 SXM (BF16 1,979, FP8 3,958 TFLOPS
# sparse), 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s; HGX H200 with 400 Gb/s ConnectX-7 per GPU.
GPUS.add("h200", GpuSpec(
    name="h200", peak_bf16_flops=989 * TFLOPS, memory_bytes=141 * GB, memory_bytes_per_s=4.8 * TBps,
    scaleup_bytes_per_s=450 * GBps, nic_bytes_per_s=400 * Gbps, peak_fp8_flops=1979 * TFLOPS,
    source="NVIDIA H200 datasheet (SXM)",
))
# NVIDIA HGX B200 / DGX B200 specifications: FP16/BF16 tensor 4.5 PFLOPS per GPU with sparsity
# (36 PFLOPS per 8-GPU board) = 2.25 PFLOPS dense at 1,000 W, FP8 72 PFLOPS per board = 4.5 dense;
# DGX B200 1,440 GB HBM3e total = 180 GB per GPU, 8 TB/s; NVLink 5 1.8 TB/s bidirectional;
# 8x ConnectX-7 400 Gb/s.
GPUS.add("b200", GpuSpec(
    name="b200", peak_bf16_flops=2250 * TFLOPS, memory_bytes=180 * GB, memory_bytes_per_s=8 * TBps,
    scaleup_bytes_per_s=900 * GBps, nic_bytes_per_s=400 * Gbps, peak_fp8_flops=4500 * TFLOPS,
    source="NVIDIA DGX B200 / HGX B200 specifications",
))
# AMD Instinct MI300X datasheet: BF16 dense 1,307.4 TFLOPS (2,614.9 with sparsity), FP8 dense
# 2,614.9, 192 GB HBM3 at 5.3 TB/s, 7 Infinity Fabric links of 128 GB/s bidirectional each
# (896 GB/s peer aggregate, 64 GB/s per link per direction); MI300X platform: one 400 Gb/s NIC per OAM.
GPUS.add("mi300x", GpuSpec(
    name="mi300x", peak_bf16_flops=1307.4 * TFLOPS, memory_bytes=192 * GB,
    memory_bytes_per_s=5.3 * TBps, scaleup_bytes_per_s=448 * GBps, nic_bytes_per_s=400 * Gbps,
    peak_fp8_flops=2614.9 * TFLOPS,
    source="AMD Instinct MI300X datasheet",
))


def get_gpu(gpu: str | GpuSpec) -> GpuSpec:
    """Return a catalog entry by name (case-insensitive) or pass a `GpuSpec` through."""
    if isinstance(gpu, GpuSpec):
        return gpu
    if not isinstance(gpu, str):
        raise ConfigError(f"gpu must be a catalog name or GpuSpec, got {gpu!r} (gpu)")
    return GPUS[gpu.lower()]
