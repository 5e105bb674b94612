"""NCCL 2.30.7's tuning model (NVIDIA/nccl src/graph/tuning.cc, search.cc, enqueue.cc @ 5067397c)
and the selector built on it."""

from __future__ import annotations

import pytest

from flowherd.collectives import select
from flowherd.collectives.nccl import WIRE_FRACTION, Protocol, base_latency_s, step_latency_s
from flowherd.collectives.ops import Op
from flowherd.collectives.selector import nccl_model
from flowherd.collectives.tuning import (
    BASE_LATENCY_US,
    HW_LATENCY_US,
    PER_CH_MAX_NVLSTREE_BW,
    algo_time_us,
)
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine, rail_optimized
from flowherd.fabric.presets import preset
from flowherd.units import GBps, us


@pytest.fixture(scope="module")
def dgx():
    return preset("dgx-superpod-h100-1su")


def test_wire_fractions():
    # LL: 4 data bytes per 8-byte line; LL128: 120 of 128 bytes (NCCL_LL128_DATAELEMS/LINEELEMS)
    assert WIRE_FRACTION[Protocol.LL] == 0.5
    assert WIRE_FRACTION[Protocol.LL128] == 120 / 128
    assert WIRE_FRACTION[Protocol.SIMPLE] == 1.0


def test_latency_tables_are_nccl_2_30s():
    # tuning.cc ncclTunerConstantsDefaults, NCCL 2.30.7
    assert BASE_LATENCY_US["ring"] == (6.6, 14.0, 8.4)
    assert BASE_LATENCY_US["pat"] == (8.0, 8.0, 8.0)
    assert HW_LATENCY_US["net"]["ring"] == (2.7, 4.0, 14.0)
    assert HW_LATENCY_US["net"]["nvlstree"][2] == 20.9
    assert HW_LATENCY_US["nvlink"]["nvls"][2] == 25
    assert PER_CH_MAX_NVLSTREE_BW[2] == (0.0, 57.7, 45.5)
    assert step_latency_s("simple", hw="net") == pytest.approx(14.0 * us)
    assert step_latency_s("ll", algorithm_family="tree", hw="nvlink") == pytest.approx(0.6 * us)
    assert base_latency_s("ll128", algorithm_family="tree") == pytest.approx(14.0 * us)
    with pytest.raises(ConfigError, match="hw"):
        step_latency_s("simple", hw="ether")


def test_dgx_h100_search_finds_ncclss_channels(dgx):
    # one node: ring 6 x 60 GB/s doubled to 12 x 30 (ncclTopoDupChannels), 24 after Postset;
    # NVLS 8 heads x 40 GB/s, bwInter raised to 60; 16 NVLS channels (NVLS_NCHANNELS_SM90)
    comm, view, _ = nccl_model(dgx, range(8))
    ring = comm.graphs["ring"]
    assert (ring.n_channels, ring.bw_intra) == (12, 30.0)
    assert comm.n_channels == 24 and comm.nvls_channels == 16
    nv = comm.graphs["nvls"]
    assert (nv.n_channels, nv.bw_intra, nv.bw_inter) == (8, 40.0, 60.0)
    assert view.nvl_bw == pytest.approx(18 * 20.6)  # NCCL's 18 NVLinks x SM90_NVLINK_BW
    # across servers: one channel per NIC at 48 GB/s (sm90SpeedArrayInter[0]), 16 after Postset
    comm, view, _ = nccl_model(dgx, range(64))
    ring = comm.graphs["ring"]
    assert (ring.n_channels, ring.bw_inter, view.nics) == (8, 48.0, 8)
    assert comm.n_channels == 16
    nv = comm.graphs["nvlstree"]
    assert (nv.n_channels, nv.bw_intra, nv.bw_inter) == (8, 40.0, 48.0)


def test_tree_search_pattern_and_pcie_rate(dgx):
    # topo.cc: PCIe Gen5 x16 counts width * 240 / 80 = 48 GB/s (the fabric's link: 64 GB/s)
    _, view, _ = nccl_model(dgx, range(16))
    assert view.pci_bw == pytest.approx(48.0)
    # search.cc "Try a simpler tree": a NIC per GPU on Hopper -> NCCL_TOPO_PATTERN_TREE, and
    # tuning.cc takes 0.85 of its Tree bandwidth (tree AllReduce: min(8 x 48 x .92, 8 x 41.4))
    comm, _, tables = nccl_model(dgx, range(16))
    assert comm.graphs["tree"].simple_tree and not comm.graphs["ring"].simple_tree
    bw = tables.bandwidth[(Op.ALLREDUCE, "tree", "simple")]
    assert bw == pytest.approx(min(8 * 48 * .92, 8 * 41.4) * .85 * .5, rel=1e-6)
    # one node: the balanced tree is found (no network), no 0.85
    assert not nccl_model(dgx, range(8))[0].graphs["tree"].simple_tree
    # two GPUs behind each NIC: the balanced tree is found at PIX
    shared = leaf_spine(servers=2, leaves=1, spines=1, gpus_per_server=8, nics_per_server=4,
                        nvlink_bandwidth_bytes_per_s=450 * GBps)
    comm, view, _ = nccl_model(shared, range(16))
    assert view.shared_nic and not comm.graphs["tree"].simple_tree
    # one GPU per node: ring 1 x 48 doubled to 2 x 24; the tree's bwIntra raised in pass 2 up to
    # twice bwInter (search.cc "increase bwIntra for trees"); NCCL_TOPO_PATTERN_TREE (ngpus == 1)
    comm, _, _ = nccl_model(dgx, [0, 8])
    tree = comm.graphs["tree"]
    assert (comm.graphs["ring"].n_channels, comm.graphs["ring"].bw_inter) == (2, 24.0)
    assert (tree.n_channels, tree.bw_intra, tree.bw_inter, tree.simple_tree) == (2, 48.0, 24.0, True)


def test_ring_allgather_time_is_the_tuning_formula(dgx):
    # 16 ranks on 2 nodes: busBw = 8 ch x 48 GB/s, algbw = busBw * 16 / 15; latency = baseLat 8.4
    # + (nsteps - nInterSteps) * max(hwLat NVLink 3.4, 3 x netOverhead 1.0) + nInterSteps * 14
    comm, _, tables = nccl_model(dgx, range(16))
    size = 1 << 30
    lat = 8.4 + 14 * 3.4 + 1 * 14.0
    expected = lat + size / (1000 * 8 * 48 * 16 / 15)
    assert algo_time_us(comm, tables, Op.ALLGATHER, "ring", "simple", size) == pytest.approx(expected)
    # NVLSTree AllReduce on 2 nodes: per channel min(40 * .85 * 7/8 * 2, 48 * 2, 57.7) = 57.7
    bw = tables.bandwidth[(Op.ALLREDUCE, "nvlstree", "simple")]
    assert bw == pytest.approx(8 * 57.7 * 16 / 30, rel=1e-6)


@pytest.mark.parametrize(("gpus", "op", "size", "expected"), [
    (range(16), "allreduce", 1 << 30, ("nvlstree", "simple", 16)),
    (range(16), "allreduce", 1 << 10, ("tree", "ll", 1)),
    (range(64), "allreduce", 4 << 30, ("ring", "simple", 16)),
    (range(8), "allreduce", 1 << 30, ("nvls", "simple", 16)),
    (range(8), "allgather", 1 << 30, ("ring", "simple", 24)),
    (range(64), "allgather", 64 << 20, ("ring", "ll128", 16)),
    (range(64), "broadcast", 1 << 30, ("ring", "simple", 16)),
    (range(16), "alltoall", 1 << 20, ("direct", "simple", 16)),
])
def test_selector_choices_on_dgx_h100(dgx, gpus, op, size, expected):
    s = select(dgx, gpus, op, size)
    assert (s.algorithm, s.protocol, s.channels) == expected
    assert s.predicted_time_s > 0


def test_pat_at_one_gpu_per_server(dgx):
    # ncclPatEnable: nNodes == nRanks; PAT wins AllGather at mid sizes on 32 servers x 1 GPU
    gpus = list(range(0, 256, 8))
    choices = {select(dgx, gpus, "allgather", s).algorithm for s in (1 << 16, 1 << 20, 1 << 24)}
    assert "pat" in choices
    assert all(select(dgx, range(16), "allgather", s).algorithm != "pat"
               for s in (1 << 16, 1 << 20, 1 << 24))


def test_no_nvls_without_in_switch_reduction():
    # rail_optimized() marks no server NVLS-capable: NCCL finds no NVLS graph
    fab = rail_optimized(servers=4, gpus_per_server=8, servers_per_su=4, spines=4,
                         nvlink_bandwidth_bytes_per_s=450 * GBps)
    assert {select(fab, range(s), "allreduce", 1 << 30).algorithm for s in (8, 32)} <= {"ring", "tree"}


def test_ll128_off_without_nvlink():
    fab = leaf_spine(servers=4, leaves=1, spines=1)  # one GPU per server, no NVLink
    _, _, tables = nccl_model(fab, range(4))
    assert tables.bandwidth[(Op.ALLREDUCE, "ring", "ll128")] > 0  # 1 GPU/node: LOC intra
    fab2 = rail_optimized(servers=2, gpus_per_server=4, servers_per_su=2, spines=1,
                          nvlink_bandwidth_bytes_per_s=None)
    _, _, tables2 = nccl_model(fab2, range(8))
    assert tables2.bandwidth[(Op.ALLREDUCE, "ring", "ll128")] == 0


def test_predicted_time_grows_with_size(dgx):
    t = [select(dgx, range(32), "allreduce", s).predicted_time_s for s in (1 << 10, 1 << 20, 1 << 30)]
    assert t[0] < t[1] < t[2]


def test_select_rejects_bad_input(dgx):
    with pytest.raises(ConfigError, match="op"):
        select(dgx, range(8), "allreduc", 1024)
    with pytest.raises(ConfigError, match="gpus"):
        select(dgx, [0, 10**6], "allreduce", 1024)
    with pytest.raises(ConfigError, match="size"):
        select(dgx, range(8), "allreduce", -1)


def test_ring_same_channels_and_broadcast_latency(dgx):
    # one node: every channel replays the first's order (sameChannels 1); across nodes the NIC per
    # channel comes from crossNic 2 with sameChannels 0 (search.cc), so tuning.cc prices a
    # Broadcast at baseLat + nsteps x hwLat[NET][Tree][Simple] = 8.4 + 64 x 14 us on 8 nodes
    assert nccl_model(dgx, range(8))[0].graphs["ring"].same_channels
    comm, _, tables = nccl_model(dgx, range(64))
    assert not comm.graphs["ring"].same_channels
    assert tables.latency_us[(Op.BROADCAST, "ring", "simple")] == pytest.approx(8.4 + 64 * 14.0)
    assert tables.latency_us[(Op.BROADCAST, "ring", "ll128")] == pytest.approx(14.0 + 64 * 4.0)


def test_channel_caps_are_the_tuning_models(dgx):
    # tuning.cc on 8 nodes (8 x 48 GB/s channels): Ring Simple busBw 384 uncapped; Ring LL128
    # min(.92 x 384, 8 x 36.7); Tree AllReduce min(.92 x 384, 8 x 36.0) x .85 (simpler tree);
    # algorithm bandwidth nRanks / nsteps of it for Ring, half for Tree
    _, _, tables = nccl_model(dgx, range(64))
    bw = tables.bandwidth
    assert bw[(Op.ALLREDUCE, "ring", "simple")] == pytest.approx(384 * 64 / 126, rel=1e-6)
    assert bw[(Op.ALLGATHER, "ring", "ll128")] == pytest.approx(8 * 36.7 * 64 / 63, rel=1e-6)
    assert bw[(Op.ALLREDUCE, "tree", "simple")] == pytest.approx(
        min(.92 * 384, 8 * 36.0) * .85 * .5, rel=1e-6)


def test_schedules_carry_the_cap_and_ncclss_chain_chunks(dgx):
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.ops import Collective

    coll = Collective(op="allreduce", gpus=range(64), size_bytes=1 << 30)
    ring = build_schedule(coll, "ring", fabric=dgx, channels=16)
    tree = build_schedule(coll, "tree", fabric=dgx, channels=16)
    # NCCL's channels move 8 x 48 GB/s per server (search.cc sm90SpeedArrayInter) where the 8
    # NICs signal 8 x 50: Ring Simple at 384 / 400 of the links' rate (flowherd.collectives.calibrate)
    assert ring.rate_fraction == pytest.approx(384 / 400, rel=1e-9)
    # Tree: busBw min(.92 x 384, 8 x 36.0) x .85, algBw half of it (tuning.cc); the per-rail double
    # binary tree sends and receives S/4 through each NIC (S/16 per tree up and down, two children)
    tree_algbw = min(.92 * 384, 8 * 36.0) * .85 * .5
    assert tree.rate_fraction == pytest.approx(tree_algbw / (4 * 50), rel=1e-6)
    assert ring.wire_fraction == tree.wire_fraction == 1.0  # Simple: the payload on the wire
    # --latency-model fabric: the textbook schedule, no cap
    assert build_schedule(coll, "tree", fabric=dgx, channels=16,
                          latency_model="fabric").rate_fraction == 1.0
    # Broadcast: each of the 16 channels forwards 512 KiB chunks (Simple), 64 MiB / 16 / 512 KiB
    # = 8 chunks: n - 2 + 8 wavefronts along the 64-rank chain
    bc = build_schedule(Collective(op="broadcast", gpus=range(64), size_bytes=64 << 20), "ring",
                        fabric=dgx, channels=16)
    assert bc.num_steps == 64 - 2 + 8


def test_ll_chains_stream_and_simple_chains_store_and_forward(dgx):
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.ops import Collective

    coll = Collective(op="broadcast", gpus=range(32), size_bytes=64 << 20)
    ll = build_schedule(coll, "ring", fabric=dgx, protocol="ll128", channels=16)
    # cut-through: one step, every chain edge at once, carrying NCCL's latency of the call:
    # baseLat 14 + nsteps (32) x hwLat[NET][Ring][LL128] 4.0 us (tuning.cc, sameChannels 0)
    assert ll.num_steps == 1
    assert ll.steps[0].latency_s == pytest.approx((14.0 + 32 * 4.0) * us)
    simple = build_schedule(coll, "ring", fabric=dgx, protocol="simple", channels=16)
    assert simple.num_steps == 32 - 2 + 8  # 64 MiB / 16 channels / 512 KiB chunks


@pytest.mark.parametrize("size", [4 << 20, 16 << 20, 64 << 20, 1 << 30])
@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_simulated_nvlstree_follows_ncclss_model(dgx, size, fidelity):
    # 2 x 8 H100, NVLSTree: the simulation (NVLS + per-rail trees, pipelined in up to 64 chunks)
    # within 15% of NCCL 2.30's time, latency 25 + 2 x 20.9 us (hwLatencies NVLink NVLS, NET
    # NVLSTree) and busBw 8 x min(NVLS 2 x 40 x .85 x 7/8, 2 x 48, perChMaxNVLSTreeBw 57.7) GB/s
    # (tuning.cc). NVIDIA/nccl#1244 measured 127.6 / 203.0 / 467.9 us at 4 / 16 / 64 MiB on 2 x 8
    # H20 (NCCL 2.21.5): 1.3-1.5x the model; benchmarks/nccl_tests.py prints them side by side.
    from flowherd.cluster.collective import simulate_collective
    from flowherd.collectives.ops import Collective

    res = simulate_collective(dgx, Collective(op="allreduce", gpus=range(16), size_bytes=size),
                              fidelity=fidelity)
    assert res.algorithm == "nvlstree"
    model_s = (25 + 2 * 20.9) * us + size / (8 * 57.7e9 * 16 / 30)
    assert res.predicted_time_s == pytest.approx(model_s, rel=1e-6)
    assert res.time_s == pytest.approx(model_s, rel=0.15)


def test_large_allreduce_busbw_is_the_published_one(dgx):
    # ~480 GB/s on one DGX H100 (nccl-tests#212, sjeaugey); ring across nodes 368-396 GB/s
    # (nccl-tests#290, #319: "~48GB/s from each CX7 NIC ... up to ~396GB/s with the RING protocol")
    from flowherd.cluster.collective import simulate_collective
    from flowherd.collectives.ops import Collective

    one = simulate_collective(dgx, Collective(op="allreduce", gpus=range(8), size_bytes=4 << 30))
    assert one.busbw_bytes_per_s / 1e9 == pytest.approx(480, rel=0.15)
    eight = simulate_collective(dgx, Collective(op="allreduce", gpus=range(64), size_bytes=4 << 30))
    assert eight.algorithm == "ring"
    assert eight.busbw_bytes_per_s / 1e9 == pytest.approx((368 + 396) / 2, rel=0.15)
