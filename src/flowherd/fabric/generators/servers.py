"""The server block every generator starts from: GPUs, their scale-up domain, their NICs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import LinkKind, NodeKind
from flowherd.units import GBps


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerBlock:
    gpus: np.ndarray  # int32[servers, gpus_per_server]
    nics: np.ndarray  # int32[servers, nics_per_server]


def add_servers(
    b: FabricBuilder,
    *,
    servers: int,
    gpus_per_server: int,
    nics_per_server: int | None = None,
    gpu_type: str | list[str] = "h100",
    nvlink_bandwidth_bytes_per_s: float | None = None,
    nvlink_latency_s: float = 0.0,
    pcie_bandwidth_bytes_per_s: float = 64 * GBps,
) -> ServerBlock:
    """Add `servers` servers: GPUs, one NVSwitch per server (if NVLink), NICs behind PCIe.

    GPU ``g`` of a server uses NIC ``g * nics_per_server // gpus_per_server``, so with one
    NIC per GPU (the default) GPU ``g`` has NIC ``g`` (the rail-optimized convention).
    The NVSwitch stands for the whole NVLink switch domain of a server (as in DGX H100,
    whose four NVSwitch chips give every GPU its full NVLink bandwidth to any other GPU).

    Args:
        pcie_bandwidth_bytes_per_s: GPU-NIC link; 64 GB/s is PCIe Gen5 x16 per direction.
    """
    if servers < 1:
        raise ConfigError(f"servers must be at least 1, got {servers} (fabric.servers)")
    if gpus_per_server < 1:
        raise ConfigError(
            f"gpus_per_server must be at least 1, got {gpus_per_server} (fabric.gpus_per_server)"
        )
    nics_per_server = gpus_per_server if nics_per_server is None else nics_per_server
    if nics_per_server < 1:
        raise ConfigError(
            f"nics_per_server must be at least 1, got {nics_per_server} (fabric.nics_per_server)"
        )
    types = [gpu_type] * servers if isinstance(gpu_type, str) else list(gpu_type)
    if len(types) != servers:
        raise ConfigError(f"gpu_type lists {len(types)} servers, expected {servers} (fabric.gpu)")
    server_of_gpu = np.repeat(np.arange(servers, dtype=np.int32), gpus_per_server)
    gpus = b.add_gpus(server_of_gpu, types).reshape(servers, gpus_per_server)
    if gpus_per_server > 1 and nvlink_bandwidth_bytes_per_s is not None:
        nvsw = b.add_nodes(NodeKind.NVSWITCH, servers, tier=0)
        b.connect(gpus.ravel(), np.repeat(nvsw, gpus_per_server), nvlink_bandwidth_bytes_per_s,
                  nvlink_latency_s, LinkKind.NVLINK)
    nics = b.add_nodes(NodeKind.NIC, servers * nics_per_server, tier=1).reshape(
        servers, nics_per_server
    )
    nic_of_local_gpu = np.arange(gpus_per_server) * nics_per_server // gpus_per_server
    b.connect(gpus.ravel(), nics[:, nic_of_local_gpu].ravel(), pcie_bandwidth_bytes_per_s, 0.0,
              LinkKind.PCIE)
    return ServerBlock(gpus=gpus, nics=nics)
