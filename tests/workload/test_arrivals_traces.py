"""Poisson job arrivals and trace replay."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.workload import (
    InferenceJob,
    MixEntry,
    PoissonArrivals,
    TraceMapping,
    TrainingJob,
    load_trace,
    parse_rate_per_s,
    poisson_times,
    rank_to_gpu,
    replay_trace,
)
from flowherd.workload.traces import map_trace_jobs


def test_rate_parsing():
    assert parse_rate_per_s("4/h") == pytest.approx(4 / 3600)
    assert parse_rate_per_s("0.5/min") == pytest.approx(0.5 / 60)
    assert parse_rate_per_s("10/s") == 10.0
    assert parse_rate_per_s(3) == 3.0
    with pytest.raises(ConfigError, match=r"non-negative.*\(arrivals\.rate\)"):
        parse_rate_per_s("-2/h", field="arrivals.rate")
    with pytest.raises(ConfigError, match="malformed rate"):
        parse_rate_per_s("often")


def test_poisson_count_and_gaps_match_the_rate():
    rng = np.random.default_rng(11)
    t = poisson_times(rng, 2.0, 50_000.0)
    assert len(t) == pytest.approx(100_000, abs=4 * np.sqrt(100_000))
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(0.5, rel=0.02)
    assert gaps.std() == pytest.approx(0.5, rel=0.03)  # exponential gaps: std = mean


def test_poisson_arrivals_draw_the_mix_by_weight_and_name_jobs():
    a = TrainingJob(model="llama3-8b", gpus=8, tp=8, name="small")
    b = InferenceJob(model="llama3-8b", tp=2, name="serve")
    proc = PoissonArrivals(rate_per_s=parse_rate_per_s("600/h"), until_s=3600 * 20,
                           mix=(MixEntry(job=a, weight=3), MixEntry(job=b, weight=1)))
    jobs = proc.generate(np.random.default_rng(5))
    assert len(jobs) == pytest.approx(12_000, abs=4 * np.sqrt(12_000))
    frac = np.mean([isinstance(j, TrainingJob) for j in jobs])
    assert frac == pytest.approx(0.75, abs=0.02)
    assert len({j.name for j in jobs}) == len(jobs)
    times = [j.submit_s for j in jobs]
    assert times == sorted(times) and times[-1] < 3600 * 20
    again = proc.generate(np.random.default_rng(5))
    assert [(j.name, j.submit_s) for j in again] == [(j.name, j.submit_s) for j in jobs]


def test_negative_arrival_rate_is_rejected():
    with pytest.raises(ConfigError, match=r"\(arrivals\.rate\)"):
        PoissonArrivals(rate_per_s=-1.0, until_s=10.0, mix=(TrainingJob(model="llama3-8b", gpus=1),))


def test_philly_replay_produces_valid_jobs_end_to_end():
    raw = load_trace("philly")
    jobs = replay_trace("philly")
    assert len(jobs) == len(raw) == 3000
    assert len({j.tenant for j in jobs}) == 12  # the slice's 12 virtual clusters (README)
    seen = set()
    for tj, j in zip(raw, jobs, strict=True):
        assert j.gpus == tj.num_gpus and j.tenant == tj.tenant and j.name == tj.job_id
        assert j.tp * j.pp * j.dp == j.gpus and j.iterations >= 1
        assert j.submit_s == pytest.approx(tj.submit_time_s - raw[0].submit_time_s)
        key = (j.model.name, j.tp, j.pp, j.dp)
        if key not in seen:  # build every distinct spec's graph once and place it on whole servers
            seen.add(key)
            g = j.iteration_graph()
            assert len(g) > 0 and g.world_size == j.gpus
            mp = rank_to_gpu(j, np.arange(j.gpus), 8)
            assert all(len({int(mp[r]) // 8 for r in grp}) == 1 for grp in j.rank_grid().reshape(-1, j.tp))
    # the rule's model choice: 16-GPU jobs become Llama-3 70B with tp 8, pp 2
    big = [j for j in jobs if j.gpus == 16]
    assert big and all((j.model.name, j.tp, j.pp) == ("llama3-70b", 8, 2) for j in big)


def test_replayed_duration_matches_iterations_times_modelled_iteration():
    raw = load_trace("philly", max_jobs=200)
    jobs = map_trace_jobs(raw)
    for tj, j in zip(raw, jobs, strict=True):
        est = j.estimate_iteration_s()
        if tj.duration_s > 100 * est:
            assert j.iterations * est == pytest.approx(tj.duration_s, rel=0.01)


def test_openb_replay_keeps_qos_as_tenant_and_caps_iterations():
    jobs = replay_trace("openb", max_jobs=300, rule=TraceMapping(max_iterations=1000))
    assert len(jobs) == 300
    assert {j.tenant for j in jobs} <= {"qos-LS", "qos-BE", "qos-Burstable", "qos-Guaranteed"}
    assert max(j.iterations for j in jobs) <= 1000


def test_missing_trace_names_the_path(tmp_path: Path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(ConfigError, match=rf"cannot read trace .{re.escape(str(missing))}.*\(traces\.path\)"):
        load_trace(missing)


def test_malformed_trace_names_the_path_and_row(tmp_path: Path):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,10,2\nb,1,x,2\n")
    with pytest.raises(ConfigError, match=r"bad\.csv' row 3"):
        load_trace(bad)


def test_unknown_trace_name_suggests_the_closest():
    with pytest.raises(UnknownNameError, match="did you mean 'philly'"):
        load_trace("phily")
