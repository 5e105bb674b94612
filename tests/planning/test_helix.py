"""Helix-style layer placement over mixed GPUs (Mei et al., ASPLOS'25), scored by max flow."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.errors import InfeasibleError
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.planning.helix import _gpu_rates, helix_place, helix_throughput
from flowherd.workload import InferenceJob


def _mixed():
    return leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=1,
                      gpu_type=["h100", "a100", "h100", "a100"])


def _bound(f, job, gpus):
    # every token needs `layers` layer-passes; GPU g gives rate_g layer-passes per second, so the
    # throughput is at most sum(rate_g) / layers (the cut around all GPU nodes, Helix section 4)
    rate = _gpu_rates(f, job, np.asarray(gpus))[0]
    return rate.sum() / job.model.layers


def test_model_that_fits_every_gpu_reaches_the_compute_bound():
    f = _mixed()
    job = InferenceJob(model="llama3-8b", gpu="h100", name="small", max_batch=16)
    p = helix_place(f, job)
    assert p.throughput_tokens_per_s == pytest.approx(_bound(f, job, range(8)), rel=1e-9)


def test_large_model_respects_memory_and_covers_all_layers():
    f = _mixed()
    job = InferenceJob(model="llama3-70b", gpu="h100", name="big", max_batch=16)
    p = helix_place(f, job)
    cap = _gpu_rates(f, job, np.asarray(p.gpus))[1]
    held = np.asarray(p.layer_end) - np.asarray(p.layer_start)
    assert np.all(held <= cap)
    assert held.sum() % job.model.layers == 0  # whole copies of the model
    bound = _bound(f, job, p.gpus)
    assert 0.95 * bound <= p.throughput_tokens_per_s <= bound * (1 + 1e-9)


def test_max_flow_beats_one_pipeline_over_all_gpus():
    f = _mixed()
    job = InferenceJob(model="llama3-70b", gpu="h100", name="big", max_batch=16)
    gpus = list(range(8))
    L = job.model.layers
    start = [i * L // 8 for i in range(8)]
    end = [(i + 1) * L // 8 for i in range(8)]
    one, _ = helix_throughput(f, job, gpus, start, end)
    assert helix_place(f, job).throughput_tokens_per_s > one


def test_gpus_too_small_for_the_model_is_infeasible_naming_the_job():
    f = _mixed()
    job = InferenceJob(model="llama3-70b", gpu="h100", name="too-big", max_batch=16)
    with pytest.raises(InfeasibleError, match="'too-big'"):
        helix_place(f, job, gpus=[0])
