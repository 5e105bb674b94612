"""The "spread" background rule (`flowherd.cluster.job_run.JobRun._probe_mean`): a job alone on its
links fast-forwards at the mean of its iteration times measured at stretches spread over its
predicted run, each on a private engine whose links keep what the other running jobs leave."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.cluster import job_run
from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.workload import TrainingJob

FAB = leaf_spine(servers=6, gpus_per_server=8, leaves=3, spines=1, oversubscription=2)


def train(name: str, gpus: int, iterations: int, submit_s: float = 0.0) -> JobRequest:
    spec = TrainingJob(model="llama3-8b", gpus=gpus, tp=8, iterations=iterations, name=name, efficiency=0.45)
    return JobRequest(name=name, tenant="t", spec=spec, submit_s=submit_s)


def test_spread_measures_stretches_over_the_predicted_run_and_fast_forwards_at_their_mean(monkeypatch):
    probes: list[tuple[float, float]] = []
    plain = job_run.JobRun._probe_at

    def record(self, at):
        got = plain(self, at)
        probes.append((at, got))
        return got

    monkeypatch.setattr(job_run.JobRun, "_probe_at", record)
    res = simulate_cluster(FAB, [train("b", 16, 200, submit_s=5.0)], horizon_s=200.0, fidelity="phase",
                           seed=1, background=BackgroundSpec(load=0.2, max_flows_per_s=50,
                                                             fast_forward="spread", sample_every_s=2.0))
    j = res.job("b")
    at = [a for a, _ in probes]
    assert len(probes) == job_run.SPREAD_STRETCHES
    assert at[0] == j.start_s and np.all(np.diff(at) > 0)
    first = probes[0][1]
    # evenly over the run the first stretch predicts
    assert at[1] - at[0] == pytest.approx(200 * first / job_run.SPREAD_STRETCHES, rel=1e-9)
    mean = float(np.mean([m for _, m in probes]))
    assert j.fast_forwarded_iterations == 200
    assert j.finish_s - j.start_s == pytest.approx(200 * mean, rel=1e-9)
    assert mean > 1.05 * j.solo_iteration_s  # the background slows it down


def test_spread_probes_leave_the_other_jobs_load_on_their_links(monkeypatch):
    seen = []
    plain = job_run.JobRun._others_load

    def record(self, eng, at):
        plain(self, eng, at)
        seen.append((self.req.name, eng._ls.cap.copy(), {r.req.name: r for r in self.sim.running}))

    monkeypatch.setattr(job_run.JobRun, "_others_load", record)
    jobs = [train("a", 16, 300), train("b", 16, 100, submit_s=2.0)]
    simulate_cluster(FAB, jobs, horizon_s=200.0, fidelity="phase", seed=2,
                     background=BackgroundSpec(load=0.2, max_flows_per_s=50, fast_forward="spread",
                                               sample_every_s=1.0))
    full = FAB.link_capacity_bytes_per_s
    a_alone = [(cap, running["a"]) for name, cap, running in seen if name == "a" and set(running) == {"a"}]
    assert a_alone  # nobody else runs: the background's load only, off a's links
    cap, a = a_alone[0]
    off = np.ones(full.size, bool)
    off[a.footprint] = False
    assert np.allclose(cap, np.where(off, np.maximum(full - a.sim.background_load(), 0.05 * full), full))
    b_probes = [(cap, running["a"]) for name, cap, running in seen if name == "b" and "a" in running]
    assert b_probes
    cap, a = b_probes[0]
    b = a.sim.runs[1]
    load = np.zeros(full.size)
    load[a.solo_link_idx] += a.solo_link_bytes / (a.mean_s or a.solo_s)
    off = np.ones(full.size, bool)
    off[b.footprint] = False
    load[off] += a.sim.background_load()[off]  # the background b's probe leaves out
    assert np.allclose(cap, np.maximum(full - load, 0.05 * full))
    assert np.array_equal(cap[b.footprint], full[b.footprint])  # b's own links: all of them
    assert np.all(cap[a.solo_link_idx] < full[a.solo_link_idx]) and a.sim.background_load().sum() > 0


def test_an_unknown_rule_names_the_ones_there_are():
    with pytest.raises(ConfigError, match="'spread'"):
        BackgroundSpec(load=0.1, fast_forward="spred")
