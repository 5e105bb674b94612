"""NCCL's channels over a DGX-like fabric: rings built from the fabric, one NIC per channel,
rail-aligned with PXN (NVIDIA/nccl src/graph/search.cc, paths.cc; collectives/channels.py)."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.channels import gpu_rail, ring_channels, ring_edges
from flowherd.collectives.ops import Collective
from flowherd.fabric.generators import rail_optimized
from flowherd.units import GBps, MiB

S = 64 * MiB


@pytest.fixture(scope="module")
def dgx4():
    # 4 DGX-like servers: 8 GPUs, 8 NICs (one per GPU, rail r on leaf r), NVSwitch
    return rail_optimized(servers=4, gpus_per_server=8, servers_per_su=4, spines=4,
                          nvlink_bandwidth_bytes_per_s=450 * GBps)


def _crossings(fab, ch):
    """(sending GPU, receiving GPU) of every flow of a ring that leaves its server."""
    src, dst = ring_edges(ch, np.arange(len(ch.order)))
    inter = fab.gpu_server[src] != fab.gpu_server[dst]
    return src[inter], dst[inter]


def test_every_nic_is_used_once_per_set_of_channels(dgx4):
    # 16 channels (NCCL's count on DGX H100 across servers) over 8 NICs: each NIC carries the
    # crossings of exactly 2 channels, i.e. once per channel of each set of 8
    rings = ring_channels(tuple(range(32)), dgx4, 16)
    assert len(rings) == 8 and sum(ch.copies for ch in rings) == 16
    use = np.zeros((4, 8))
    for ch in rings:
        src, _ = _crossings(dgx4, ch)
        assert len(src) == 4  # one crossing per server boundary (4 servers, wrap-around)
        rails = gpu_rail(dgx4, src)
        assert len(set(rails.tolist())) == 1  # a channel crosses every boundary on one rail
        np.add.at(use, (dgx4.gpu_server[src], rails), ch.copies)
    assert np.all(use == 2)


def test_crossings_are_rail_aligned(dgx4):
    for ch in ring_channels(tuple(range(32)), dgx4, 16):
        src, dst = _crossings(dgx4, ch)
        assert np.array_equal(gpu_rail(dgx4, src), gpu_rail(dgx4, dst))


def test_rank_order_ring_crosses_rails_and_channels_do_not(dgx4):
    # the old one-ring-in-rank-order: GPU 7 of server s sends to GPU 0 of server s+1
    one = ring_channels(tuple(range(32)), dgx4, None)[0]
    src, dst = _crossings(dgx4, one)
    assert np.any(gpu_rail(dgx4, src) != gpu_rail(dgx4, dst))


def test_data_is_split_evenly_over_channels(dgx4):
    coll = Collective(op="allreduce", gpus=range(32), size_bytes=S)
    sched = build_schedule(coll, "ring", fabric=dgx4, channels=16)
    rings = ring_channels(coll.gpus, dgx4, 16)
    assert [ch.fraction for ch in rings] == [2 / 16] * 8
    step = sched.steps[0]
    # every ring edge of every channel carries S / (n C) per NCCL channel; PXN edges twice (relay)
    per_channel = S / (32 * 16)
    assert np.allclose(step.size_bytes, 2 * per_channel)
    # each GPU sends the same bytes onto the network in a step: the NICs are loaded alike
    inter = dgx4.gpu_server[step.src_gpu] != dgx4.gpu_server[step.dst_gpu]
    out = np.bincount(step.src_gpu[inter], weights=step.size_bytes[inter], minlength=32)
    assert np.allclose(out, out[0]) and out[0] > 0
    # the schedule moves the ring's bytes, plus the relays' NVLink copies
    ring_bytes = 2 * 31 * S
    assert sched.total_bytes() >= ring_bytes


def test_pxn_relays_the_last_gpu_through_the_rail_gpu(dgx4):
    ch = ring_channels(tuple(range(16)), dgx4, 8)[3]  # enters every server at local GPU 3
    assert ch.order[0] == 3 and ch.order[7] == 2
    assert ch.relay[7] == 3  # GPU 2 of server 0 hands its data to GPU 3, whose NIC is rail 3
    assert np.count_nonzero(ch.relay >= 0) == 2


def test_one_channel_one_gpu_per_server_keeps_rank_order(dgx4):
    gpus = tuple(range(0, 32, 8))
    rings = ring_channels(gpus, dgx4, 4)
    assert len(rings) == 1 and np.array_equal(rings[0].order, np.arange(4))
    assert np.all(rings[0].relay < 0) and rings[0].fraction == 1.0


def test_channels_make_the_multi_server_ring_several_times_faster(dgx4):
    from flowherd.cluster.collective import simulate_collective

    coll = Collective(op="allreduce", gpus=range(16), size_bytes=1024 * MiB)
    kw = dict(algorithm="ring", fidelity="collective", latency_model="fabric")
    one = simulate_collective(dgx4, coll, channels=1, **kw)
    many = simulate_collective(dgx4, coll, channels=16, **kw)
    # one ring: one NIC per boundary (50 GB/s); 16 channels: all 8 NICs -> ~8x
    assert many.time_s * 6 < one.time_s
    assert many.busbw_bytes_per_s == pytest.approx(400e9, rel=0.05)


def test_tree_channels_cross_servers_on_one_rail_and_chain_inside(dgx4):
    # NCCL's trees: a double binary tree over the servers per channel, on that channel's rail
    coll = Collective(op="allreduce", gpus=range(32), size_bytes=S)
    sched = build_schedule(coll, "tree", fabric=dgx4, channels=8)
    src = np.concatenate([st.src_gpu for st in sched.steps])
    dst = np.concatenate([st.dst_gpu for st in sched.steps])
    inter = dgx4.gpu_server[src] != dgx4.gpu_server[dst]
    assert inter.any()
    assert np.array_equal(gpu_rail(dgx4, src[inter]), gpu_rail(dgx4, dst[inter]))
    assert set(gpu_rail(dgx4, src[inter]).tolist()) == set(range(8))  # every NIC carries a tree
    flat = build_schedule(coll, "tree", fabric=dgx4)  # no channels: the tree over ranks
    fs = np.concatenate([st.src_gpu for st in flat.steps])
    fd = np.concatenate([st.dst_gpu for st in flat.steps])
    finter = dgx4.gpu_server[fs] != dgx4.gpu_server[fd]
    assert np.any(gpu_rail(dgx4, fs[finter]) != gpu_rail(dgx4, fd[finter]))
    # the same bytes as the flat tree: 2(n-1) S in all
    assert sched.total_bytes() == pytest.approx(flat.total_bytes())
