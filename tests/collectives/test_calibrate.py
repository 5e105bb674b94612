"""Schedules run as NCCL runs them take NCCL 2.30's time on an idle fabric (tuning.cc), latency
counted once; ``--latency-model fabric`` keeps the links' full rate and the paths' latency."""

from __future__ import annotations

import pytest

from flowherd.cluster.collective import nccl_channels, simulate_collective
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.calibrate import idle_bound_s, rate_fraction
from flowherd.collectives.ops import Collective
from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.presets import preset
from flowherd.units import GiB, MiB, us


@pytest.fixture(scope="module")
def dgx():
    return preset("dgx-superpod-h100-1su")


def test_idle_bound_is_the_busiest_nvlink_port(dgx):
    # ring AllGather on one DGX H100: every GPU sends (n-1)/n S over its 18 NVLinks x 25 GB/s
    coll = Collective(op="allgather", gpus=range(8), size_bytes=1 * GiB)
    sched = build_schedule(coll, "ring", fabric=dgx, channels=24, latency_model="fabric")
    assert idle_bound_s(sched, dgx) == pytest.approx(7 / 8 * GiB / 450e9, rel=1e-9)


def test_intra_server_ring_runs_at_ncclss_nvlink_speed(dgx):
    # NCCL's ring over one DGX H100's NVLink: 6 x 60 GB/s found, doubled to 12 x 30 (search.cc,
    # ncclTopoDupChannels): 360 GB/s per GPU where its NVLink signals 18 x 25 = 450 GB/s
    coll = Collective(op="allgather", gpus=range(8), size_bytes=1 * GiB)
    sched = build_schedule(coll, "ring", fabric=dgx, channels=24)
    assert sched.rate_fraction == pytest.approx(12 * 30 / 450, rel=1e-9)
    # a rate limit, not more bytes: the flows send the payload (Simple), each of the 7 steps
    # lasts at least its S/8 per GPU over 360 GB/s
    assert sched.wire_fraction == 1.0
    assert [st.min_transfer_s for st in sched.steps] == pytest.approx([GiB / 8 / 360e9] * 7)
    assert sched.min_transfer_s == pytest.approx(7 / 8 * GiB / 360e9)
    assert rate_fraction(build_schedule(coll, "ring", fabric=dgx, channels=24,
                                        latency_model="fabric"), dgx) == pytest.approx(0.8)


@pytest.mark.parametrize("op", ["allreduce", "allgather", "reducescatter", "broadcast"])
@pytest.mark.parametrize("gpus", [8, 4, 2])
@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_intra_server_collectives_take_ncclss_time(dgx, op, gpus, fidelity):
    # one server (TP groups of 2, 4, 8 GPUs), 256 MiB: within 15% of the ported model (was up to
    # 1.25x too fast with the ring at the NVLink's full rate). Broadcast at 1 GiB: its chain fills
    # through n - 1 hops in NCCL's 512 KiB chunks, 7 of 21 chunks per channel at 256 MiB
    size = 1 * GiB if op == "broadcast" else 256 * MiB
    res = simulate_collective(dgx, Collective(op=op, gpus=range(gpus), size_bytes=size),
                              fidelity=fidelity)
    assert res.predicted_time_s is not None
    assert res.time_s == pytest.approx(res.predicted_time_s, rel=0.15)


@pytest.mark.parametrize("op", ["allgather", "reducescatter", "allreduce"])
@pytest.mark.parametrize("servers", [2, 8])
@pytest.mark.parametrize("size", [1 * MiB, 4 * MiB])
def test_small_multi_node_collectives_count_latency_once(dgx, op, servers, size):
    # 1-4 MiB across servers is mostly latency: NCCL's (tuning.cc, baseLat + per-hop hwLat over
    # the hops of the ring / tree), not NCCL's plus the fabric's 2-4 us per step on top (which
    # made AllGather / ReduceScatter 1.3-2.2x the model)
    res = simulate_collective(dgx, Collective(op=op, gpus=range(8 * servers), size_bytes=size),
                              fidelity="collective")
    assert res.time_s == pytest.approx(res.predicted_time_s, rel=0.10)


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_nccl_latency_model_holds_the_paths_latency(fidelity):
    # the same ring on links of 1 us and of 3 us: NCCL's latency either way under "nccl"; under
    # "fabric" 2(n-1) steps of 2 (GPU-NIC-leaf-NIC-GPU) x the link latency
    n, size = 8, 1 * MiB
    coll = Collective(op="allreduce", gpus=range(n), size_bytes=size)
    times = {}
    for lat in (1 * us, 3 * us):
        fab = leaf_spine(servers=n, leaves=1, spines=1, link_latency_s=lat)
        for model in ("nccl", "fabric"):
            times[model, lat] = simulate_collective(fab, coll, algorithm="ring", fidelity=fidelity,
                                                    latency_model=model).time_s
    assert times["nccl", 3 * us] == pytest.approx(times["nccl", 1 * us], rel=1e-9)
    assert times["fabric", 3 * us] - times["fabric", 1 * us] == pytest.approx(
        2 * (n - 1) * 2 * 2 * us, rel=1e-6)


def test_fabric_latency_model_keeps_the_links_full_rate(dgx):
    coll = Collective(op="allgather", gpus=range(16), size_bytes=1 * GiB)
    fab = build_schedule(coll, "ring", fabric=dgx, channels=nccl_channels(dgx, coll),
                         latency_model="fabric")
    nccl = build_schedule(coll, "ring", fabric=dgx, channels=nccl_channels(dgx, coll))
    assert fab.rate_fraction == fab.wire_fraction == 1.0 and fab.adds_path_latency
    assert fab.min_transfer_s == 0.0 and all(st.min_transfer_s == 0.0 for st in fab.steps)
    # across servers: 8 channels x 48 GB/s (sm90SpeedArrayInter) over 8 NICs x 50 GB/s
    assert nccl.rate_fraction == pytest.approx(384 / 400) and not nccl.adds_path_latency
    assert nccl.wire_fraction == 1.0  # the bytes NCCL sends: a rate limit, not more bytes


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_two_collectives_sharing_nvlink_split_it_not_their_channels_rate(dgx, fidelity):
    # NCCL's ring channels move 12 x 30 = 360 GB/s per GPU over an NVLink of 450 (search.cc):
    # a rate limit. Two AllGathers on the same 8 GPUs at once share each GPU's NVLink port
    # (max-min: 225 GB/s each, below the cap), so each takes 7/8 S / 225 GB/s plus its latency,
    # 1.6x its time alone, not 2x (which extra wire bytes for the slower channel would give)
    from flowherd.cluster.collective import add_schedule
    from flowherd.engine.core import Engine
    from flowherd.routing.policies import make_router

    size = 1 * GiB
    coll = Collective(op="allgather", gpus=range(8), size_bytes=size)
    sched = build_schedule(coll, "ring", fabric=dgx, channels=24)
    lat = sched.critical_path()[0]
    times = []
    for copies in (1, 2):
        eng = Engine(dgx, make_router("spray", dgx), record_flows=False)
        done = [add_schedule(eng, sched, fidelity=fidelity, at_s=0.0) for _ in range(copies)]
        eng.run()
        times.append([eng.coflow_finish_s(d) for d in done])
    (alone,), both = times
    assert alone == pytest.approx(lat + 7 / 8 * size / 360e9, rel=1e-6)
    for t in both:
        assert t == pytest.approx(lat + 7 / 8 * size / 225e9, rel=1e-6)


@pytest.mark.parametrize("fidelity", ["step", "collective"])
def test_rate_capped_ring_beside_a_flow_gets_the_links_share(fidelity):
    # A 2-rank ring AllReduce whose NCCL channels move 48 of the NIC's 50 GB/s, beside a long
    # flow on its 0 -> 1 NIC link: max-min splits that link 25 / 25 GB/s (the cap does not bind
    # below it) and the ring's other direction waits for it (its steps in lock step), so the
    # ring takes S / 25 GB/s plus its latency; extra wire bytes for the slower channel would
    # have taken 50/48 of that
    from flowherd.cluster.collective import add_schedule
    from flowherd.engine.core import Engine
    from flowherd.routing.policies import make_router

    fab = leaf_spine(servers=2, gpus_per_server=1, leaves=1, spines=1)
    size = 256 * MiB
    coll = Collective(op="allreduce", gpus=(0, 1), size_bytes=size)
    sched = build_schedule(coll, "ring", fabric=fab, channels=nccl_channels(fab, coll))
    assert sched.rate_fraction == pytest.approx(48 / 50) and sched.wire_fraction == 1.0
    nic = 50e9
    times = {}
    for outside in (False, True):
        eng = Engine(fab, make_router("spray", fab), record_flows=False)
        if outside:
            eng.add_coflow(0, 1, 100 * size, at_s=0.0)
        ring = add_schedule(eng, sched, fidelity=fidelity, at_s=0.0)
        eng.run()
        times[outside] = eng.coflow_finish_s(ring)
    lat = sched.critical_path()[0]
    assert times[False] == pytest.approx(lat + size / (48 / 50 * nic), rel=1e-6)
    assert times[True] == pytest.approx(lat + size / (nic / 2), rel=1e-6)
