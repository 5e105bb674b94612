"""benchmarks/serve_protect.py and its families benchmarks/scenarios/serve_beside_training.yaml and
serve_code_beside_training.yaml: the service's KV transfers cross the leaves that both training
jobs span, and the TTFT is split into its parts exactly."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from flowherd.cluster.placement import make_placer, server_leaf
from flowherd.cluster.records import ServiceRecord
from flowherd.experiments.scenario import load_scenario
from flowherd.workload import InferenceJob, TrainingJob

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # its `import record`
_SPEC = importlib.util.spec_from_file_location("serve_protect", _BENCH / "serve_protect.py")
sp = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sp)


CODE = _BENCH / "scenarios" / "serve_code_beside_training.yaml"


@pytest.mark.parametrize("path", [sp.SCENARIO, CODE], ids=["chat", "code"])
def test_the_kv_transfers_cross_the_leaves_the_training_jobs_span(path):
    sc = load_scenario(str(path), seed=5)
    fab = sc.fabric
    placer, free = make_placer(sc.placement), np.ones(fab.num_gpus, bool)
    leaf = server_leaf(fab)
    placed = {}
    for job in sorted(sc.jobs, key=lambda j: j.submit_s):
        gpus = placer.place(job, free, fab)
        assert gpus is not None, job.name
        free[gpus] = False
        placed[job.name] = gpus
    svc = next(j for j in sc.jobs if isinstance(j, InferenceJob))
    assert svc.disaggregated and svc.name in sc.slos
    gpus = placed[svc.name]
    n_pre = svc.instances * svc.tp
    pre_leaves = set(leaf[fab.gpu_server[gpus[:n_pre]]].tolist())
    dec_leaves = set(leaf[fab.gpu_server[gpus[n_pre:]]].tolist())
    assert len(pre_leaves) == 1 and len(dec_leaves) == 1 and pre_leaves != dec_leaves
    trains = [j for j in sc.jobs if isinstance(j, TrainingJob)]
    assert len(trains) == 2
    for j in trains:  # every training job has servers on both leaves: its traffic crosses them
        assert set(leaf[fab.gpu_server[placed[j.name]]].tolist()) == pre_leaves | dec_leaves


def test_the_code_family_is_distserves_code_completion_workload():
    # DistServe (Zhong et al., OSDI'24, Table 1): code completion, OPT-66B, HumanEval, TTFT 0.125 s,
    # TPOT 0.2 s; its artifact's OPT-66B plan is prefill TP 4 and 4-GPU decode replicas
    # (evaluation/2-benchmark-serving/2-start-api-server.py) and its SLO-scale run on this workload
    # offers 0.875 requests/s per GPU (evaluation/ae-scripts/e2e/_plot.py)
    sc = load_scenario(str(CODE), seed=5)
    svc = next(j for j in sc.jobs if isinstance(j, InferenceJob))
    slo = sc.slos[svc.name]
    assert (slo.ttft_s, slo.tpot_s) == (0.125, 0.2)
    assert (svc.tp, svc.decode_tp) == (4, 4)
    gpus = svc.instances * svc.tp + svc.decode_instances * svc.decode_tp
    assert svc.request_rate_per_s / gpus == pytest.approx(0.875)
    # OPT-66B: 2 x 64 layers x 9,216 x 2 bytes = 2.25 MiB per token (DistServe section 2.3: 1.13 GB
    # for 512 tokens); HumanEval's mean prompt of 171 tokens: 403.4 MB a request
    assert svc.model.kv_cache_bytes_per_token(2) == 2 * 64 * 9216 * 2
    assert svc.kv_bytes(1) == pytest.approx(403.4e6, rel=1e-3)
    # the same fabric, training jobs and background as the chat family
    chat = load_scenario(str(sp.SCENARIO), seed=5)
    assert sc.fabric.num_gpus == chat.fabric.num_gpus == 64
    def training(s):
        return [j for j in s.jobs if isinstance(j, TrainingJob)]

    assert training(sc) == training(chat) and len(training(sc)) == 2
    assert sc.background == chat.background and sc.placement == chat.placement


def test_the_ttft_parts_add_up_to_the_ttft():
    # two batches: requests 0, 1 in batch 0 (prefill 1.0 -> 1.5, KV lands 1.7), request 2 in
    # batch 1 (prefill 2.0 -> 2.5, KV lands 3.0); request 3 never got its first token
    rec = ServiceRecord(arrival_s=np.array([0.9, 0.95, 1.9, 2.9]), batch=np.array([0, 0, 1, 1]),
                        first_token_s=np.array([1.7, 1.7, 3.0, np.nan]), last_token_s=np.full(4, np.nan),
                        output_tokens=2, batch_close_s=np.array([1.0, 2.0]),
                        prefill_start_s=np.array([1.0, 2.0]), prefill_end_s=np.array([1.5, 2.5]),
                        kv_end_s=np.array([1.7, 3.0]), exec_s=0.0, compute_s=0.0, request_rate_per_s=1.0,
                        capacity_per_s=2.0, capacity_note="")
    p = sp._ttft_parts([rec])
    ttft = np.array([0.8, 0.75, 1.1])
    assert p["wait_s"] == pytest.approx(np.mean([0.1, 0.05, 0.1]))
    assert p["prefill_s"] == pytest.approx(0.5)
    assert p["kv_tail_s"] == pytest.approx(np.mean([0.2, 0.2, 0.5]))
    assert p["wait_s"] + p["prefill_s"] + p["kv_tail_s"] == pytest.approx(ttft.mean())
    assert p["p99_kv_tail_s"] == pytest.approx(np.percentile([0.2, 0.2, 0.5], 99))


def test_the_room_arms_are_none_and_the_bound_and_every_sweep_has_its_arms():
    assert [a for a, _ in sp.arms([1.0], room=True)] == ["none", "bound (service alone)"]
    labels = dict(sp.arms([0.0, 4.0]))
    assert labels["kv-guard hold alpha=4"] == {"alpha": 4.0, "paths": False}
    assert labels["kv-guard alpha=0"] == {"alpha": 0.0} and labels["kv-guard paths"] == {"hold": False}
    assert "adaptive" in labels


def test_the_report_sweep_runs_the_benchmarks_arms_on_its_held_out_seeds():
    from flowherd.experiments.sweep_file import load_sweep

    sw = load_sweep(_BENCH.parent / "scenarios" / "sweep_serve_beside_training.yaml")
    assert list(sw.seeds) == [5, 6, 7, 8, 9]  # serve_protect.py's held-out seeds
    ctrls = [(p.scenario["controller"]["name"], p.scenario["controller"].get("params", {}))
             for p in sw.points]
    assert ctrls[:3] == [("none", {}), ("adaptive", {}), ("kv-guard", {"hold": False})]
    # holding only, alpha increasing: the curve the report draws
    holds = [c[1] for c in ctrls[3:]]
    assert all(h["paths"] is False for h in holds)
    assert [h["alpha"] for h in holds] == sorted(h["alpha"] for h in holds) and len(holds) >= 3
    assert all(p.scenario["workload"]["jobs"][0]["kind"] == "inference" for p in sw.points)
