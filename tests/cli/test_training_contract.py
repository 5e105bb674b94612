"""The training-job scenario contract: model mapping, parallelism keys, recompute; MFU/HFU in --json."""

from __future__ import annotations

import json

import pytest
import yaml

from flowherd.cli import main
from flowherd.workload import TrainingJob

JOB = {"name": "a", "model": {"name": "m", "layers": 8, "hidden": 2048, "heads": 16, "kv_heads": 4,
                              "ffn_hidden": 8192, "vocab": 32000, "gated_mlp": True},
       "gpus": 16, "parallelism": {"tp": 4, "pp": 2, "dp": 2, "cp": 1, "ep": 1, "virtual_stages": 2,
                                   "sequence_parallel": True, "zero": 1},
       "recompute": "selective", "micro_batch": 1, "global_batch": 8, "seq_len": 2048, "iterations": 2}
FABRIC = {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "gpu": "h100", "nic_bandwidth": "400Gbps",
          "nvlink_bandwidth": "450GB/s", "leaves": 1, "spines": 1}


def _write(tmp_path, job):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "fabric": FABRIC, "workload": {"jobs": [job]},
                                 "simulation": {"fidelity": "collective", "horizon": "1h"}}))
    return str(p)


def test_simulate_json_reports_mean_iteration_mfu_and_hfu(tmp_path, capsys):
    assert main(["simulate", _write(tmp_path, JOB), "--json"]) == 0
    job = json.loads(capsys.readouterr().out)["jobs"][0]
    spec = TrainingJob(model=JOB["model"], gpus=16, tp=4, pp=2, dp=2, virtual_stages=2,
                       sequence_parallel=True, zero_stage=1, recompute="selective", global_batch=8,
                       seq_len=2048)
    it = job["mean_iteration_s"]
    assert it > 0
    assert job["mfu"] == pytest.approx(spec.model_flops() / (it * 16 * spec.gpu.peak_bf16_flops))
    assert job["hfu"] == pytest.approx(spec.iteration_flops() / (it * 16 * spec.gpu.peak_bf16_flops))
    assert job["hfu"] > job["mfu"]


@pytest.mark.parametrize(("patch", "field"), [
    ({"recompute": "partial"}, "workload.jobs[0].recompute"),
    ({"parallelism": {"tp": 4, "pp": 2, "virtual_stages": 0}}, "workload.jobs[0].parallelism.virtual_stages"),
    ({"parallelism": {"tp": 4, "pp": 2, "zero": 5}}, "workload.jobs[0].parallelism.zero"),
    ({"parallelism": {"tp": 4, "pp": 2, "vpp": 2}}, "workload.jobs[0].parallelism.vpp"),
    ({"model": {**JOB["model"], "kv_heads": 3}}, "kv_heads"),
])
def test_bad_training_value_is_one_line_naming_the_field(tmp_path, capsys, patch, field):
    assert main(["simulate", _write(tmp_path, {**JOB, **patch}), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and field in err
