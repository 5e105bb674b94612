"""NVLS, NVLSTree and PAT schedules (collectives/nvls.py) against their link loads and NCCL 2.30's
model (tuning.cc: nvlsEfficiency, perChMaxNVLSTreeBws)."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster.collective import simulate_collective
from flowherd.collectives import select
from flowherd.collectives.algorithms import build_schedule
from flowherd.collectives.ops import Collective
from flowherd.errors import ConfigError
from flowherd.fabric.presets import preset
from flowherd.units import GiB, MiB


@pytest.fixture(scope="module")
def dgx():
    return preset("dgx-superpod-h100-1su")


def test_nvls_puts_s_times_one_plus_one_over_m_on_every_gpu_link(dgx):
    # in-switch reduction: each GPU uploads its buffer once and downloads the result once,
    # S (1 + 1/m) per link each way; NCCL's NVLS rate (nvlsEfficiency 0.85 x 20.6 / 25 of the
    # NVLink, tuning.cc / topo.h) is a rate limit: run as NCCL runs it, the step lasts NCCL's
    # bandwidth time, its bytes stay S (1 + 1/m)
    from flowherd.collectives.selector import nccl_model

    m, size = 8, 64 * MiB
    coll = Collective(op="allreduce", gpus=range(m), size_bytes=size)
    for sched in (build_schedule(coll, "nvls", fabric=dgx),
                  build_schedule(coll, "nvls", fabric=dgx, channels=16)):
        src, dst, b = sched.pair_bytes()
        up = np.bincount(src, weights=b, minlength=m)
        down = np.bincount(dst, weights=b, minlength=m)
        want = size * (1 + 1 / m)
        assert np.allclose(up, want) and np.allclose(down, want)
    _, _, tables = nccl_model(dgx, coll.gpus)
    model_s = size / (tables.bandwidth[(coll.op, "nvls", "simple")] * 1e9)
    assert sched.min_transfer_s == pytest.approx(model_s, rel=1e-9)
    assert sched.rate_fraction == pytest.approx(want / 450e9 / model_s, rel=1e-9)


def test_nvls_is_one_server_only(dgx):
    with pytest.raises(ConfigError, match="nvlstree"):
        build_schedule(Collective(op="allreduce", gpus=range(16), size_bytes=1), "nvls", fabric=dgx)


@pytest.mark.parametrize("fidelity", ["step", "collective"])
@pytest.mark.parametrize(("gpus", "algorithm"), [(8, "nvls"), (16, "nvlstree"), (64, "nvlstree")])
def test_large_allreduce_is_within_15_percent_of_the_model(dgx, gpus, algorithm, fidelity):
    coll = Collective(op="allreduce", gpus=range(gpus), size_bytes=1 * GiB)
    sel = select(dgx, coll.gpus, "allreduce", coll.size_bytes)
    res = simulate_collective(dgx, coll, fidelity=fidelity)
    assert res.algorithm == sel.algorithm == algorithm
    assert res.time_s == pytest.approx(sel.predicted_time_s, rel=0.15)


def test_pat_takes_log2_steps_at_one_gpu_per_server(dgx):
    gpus = tuple(range(0, 256, 8))  # 32 servers, one GPU each
    sched = build_schedule(Collective(op="allgather", gpus=gpus, size_bytes=32 * MiB), "pat",
                           fabric=dgx)
    assert sched.num_steps == 5 and sched.algorithm == "pat"
    assert sched.total_bytes() == pytest.approx(31 * 32 * MiB)  # every rank gets (n-1)/n of S


@pytest.mark.parametrize("n", [6, 7])
def test_nvls_on_part_of_a_server_has_one_head_per_gpu_in_use(dgx, n):
    # NCCL trims the topology to the communicator's GPUs; NVLS needs 2 or more of them
    # (transport/nvls.cc, ncclNvlsInit: gpuCount < 2 -> off) and, inside one node, pulls evenly
    # from all of them: minChannels = maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs) (graph/search.cc,
    # ncclTopoCompute); its bus bandwidth is heads x min(bwIntra x nvlsEfficiency x (heads-1)/heads
    # x 2 for AllReduce, bwInter) (graph/tuning.cc, ncclTopoTuneModel)
    from flowherd.collectives.selector import nccl_model, predicted_time_s

    comm, _, _ = nccl_model(dgx, list(range(n)))
    g = comm.graphs["nvls"]
    assert g.n_channels == n and comm.nvls_support
    s = select(dgx, list(range(n)), "allreduce", GiB)
    nvls_s = predicted_time_s(dgx, list(range(n)), "allreduce", GiB, "nvls", "simple")
    busbw = GiB * 2 * (n - 1) / n / nvls_s / 1e9
    model = n * min(g.bw_intra * 0.85 * (n - 1) / n * 2, g.bw_inter)
    assert busbw == pytest.approx(model, rel=0.01)
    assert s.algorithm in ("nvls", "ring") and s.predicted_time_s <= nvls_s
