"""Same results bit for bit where the mode is exact: the compiled event loop against
the per-event Python loop it replaced, and batched coflows against one call per coflow."""

import json
from pathlib import Path

import numpy as np
import pytest
from exact_cases import NUM_CASES, digest, run_case

from flowherd.engine import Engine

DIGESTS = json.loads((Path(__file__).parent / "data" / "engine_digests.json").read_text())["digests"]


class PythonRatesEngine(Engine):
    """The rate update handed back to Python at every step (the path a congestion model and
    the closure rule take): the same kernels, called one by one."""

    def _rates(self, started, ended, now):
        super()._rates(started, ended, now)


@pytest.mark.parametrize("case", range(NUM_CASES))
def test_compiled_loop_gives_the_python_loops_results_bit_for_bit(case):
    # the digests were taken with the per-event Python loop (flowherd before the compiled loop)
    assert digest(run_case(case)) == DIGESTS[case]


@pytest.mark.parametrize("case", [0, 3, 5])
def test_handing_the_rate_update_to_python_changes_nothing(case):
    assert digest(run_case(case, PythonRatesEngine)) == DIGESTS[case]


def test_a_case_that_changes_gives_another_digest():
    # the digest sees a change in one coflow's timing (else the tests above could not fail)
    eng = run_case(0)
    ref = digest(eng)
    eng._c.finish[3] = np.nextafter(eng._c.finish[3], np.inf)
    assert digest(eng) != ref


def _cluster_digest(res) -> str:
    import hashlib

    h = hashlib.sha256()
    for j in res.jobs:
        h.update(np.asarray(j.iteration_end_s, np.float64).tobytes())
    for a in (res.link_bytes, res.background_finish_s, res.util_by_tier):
        h.update(np.asarray(a, np.float64).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("fidelity,bg_rule", [("collective", "exact"), ("phase", "exact"),
                                              ("phase", "mean")])
def test_batched_iterations_give_one_add_coflow_per_coflows_run_bit_for_bit(monkeypatch, fidelity,
                                                                              bg_rule):
    from flowherd.cluster.simulate import BackgroundSpec, JobRequest, simulate_cluster
    from flowherd.fabric.generators import leaf_spine
    from flowherd.workload import TrainingJob

    fab = leaf_spine(servers=8, gpus_per_server=8, leaves=2, spines=2, oversubscription=4)
    jobs = [JobRequest(name=f"j{i}", tenant="t", submit_s=s,
                       spec=TrainingJob(model="llama3-8b", gpus=g, tp=8, iterations=4, name=f"j{i}",
                                        submit_s=s))
            for i, (g, s) in enumerate([(16, 0.0), (24, 0.3), (16, 0.5)])]

    def run():
        return _cluster_digest(simulate_cluster(
            fab, jobs, fidelity=fidelity, horizon_s=10.0, placer="packed", seed=1,
            background=BackgroundSpec(load=0.2, max_flows_per_s=200, fast_forward=bg_rule),
            background_records=True))

    batched = run()
    monkeypatch.setattr(Engine, "_batched", False)
    assert run() == batched
