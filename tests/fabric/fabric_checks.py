"""Invariants every fabric must satisfy, shared by the generator and preset tests."""

from __future__ import annotations

import numpy as np

from flowherd.fabric import Fabric, LinkKind, NodeKind


def check_fabric(f: Fabric) -> None:
    """Structural invariants: cables as direction pairs, kinds and tiers consistent, connected."""
    src, dst = f.link_src, f.link_dst
    # link 2i and 2i+1 are the two directions of one cable, with equal capacity and latency
    assert np.array_equal(src[0::2], dst[1::2]) and np.array_equal(dst[0::2], src[1::2])
    assert np.array_equal(f.link_capacity_bytes_per_s[0::2], f.link_capacity_bytes_per_s[1::2])
    assert np.array_equal(f.link_latency_s[0::2], f.link_latency_s[1::2])
    kind = f.node_kind
    # GPUs first, in server order
    assert np.all(kind[: f.num_gpus] == NodeKind.GPU) and np.all(kind[f.num_gpus :] != NodeKind.GPU)
    assert np.all(np.diff(f.gpu_server) >= 0)
    # network links touch a NIC or a switch at both ends and never a GPU
    net = f.link_kind == LinkKind.NETWORK
    assert np.all(kind[src[net]] != NodeKind.GPU) and np.all(kind[dst[net]] != NodeKind.GPU)
    # PCIe links join a GPU to a NIC
    pcie = f.link_kind == LinkKind.PCIE
    assert set(np.unique(kind[src[pcie]])) <= {NodeKind.GPU, NodeKind.NIC}
    # switches sit at tier >= 2, NICs at 1
    assert np.all(f.node_tier[kind == NodeKind.SWITCH] >= 2)
    assert np.all(f.node_tier[kind == NodeKind.NIC] == 1)
    f.check_connected()
