"""A 131,072-GPU rail-optimized 3-tier fabric: built, connected, and summarized exactly."""

import numpy as np
import pytest

from flowherd.fabric import NodeKind, rail_optimized, summary
from flowherd.units import Gbps


@pytest.mark.slow
def test_131k_gpu_fabric_summary_is_exact():
    # radix-128 switches: SUs of 64 servers (leaf 64 down / 64 up), pods of 8 SUs with 64 spines
    # (64 / 64), 32 pods, 1,024 cores of 128 ports (4 cables per spine-core pair): 1:1 everywhere
    f = rail_optimized(servers=16_384, gpus_per_server=8, servers_per_su=64, sus_per_pod=8,
                       spines_per_pod=64, cores=1024, leaf_uplinks=64)
    assert f.num_gpus == 131_072
    deg = np.bincount(f.link_src, minlength=f.num_nodes)[f.node_kind == NodeKind.SWITCH]
    assert deg.max() == 128 and deg.min() == 128
    s = summary(f)
    assert s["num_switches"] == 2048 + 2048 + 1024
    assert s["num_network_links"] == 3 * 131_072
    # non-blocking: half the GPUs at 400 Gbps each; GPU-NIC-leaf-spine-core-spine-leaf-NIC-GPU
    assert s["bisection_bytes_per_s"] == pytest.approx(65_536 * 400 * Gbps, rel=1e-6)
    assert s["diameter_hops"] == 8
