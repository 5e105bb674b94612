"""The KV-transfer engine's keys under an inference job's ``serving:`` in a scenario."""

from __future__ import annotations

import pytest
import yaml

from flowherd.errors import ConfigError
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.workload import InferenceJob

FABRIC = {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "leaves": 1, "spines": 1}


def scenario(serving: dict):
    return scenario_from_mapping({"fabric": FABRIC, "workload": {"jobs": [
        {"name": "s", "kind": "inference", "model": "llama3-8b", "serving": serving}]}})


def test_kv_engine_keys_reach_the_job():
    # the example of docs/frameworks.md, as YAML reads it
    serving = yaml.safe_load("{disaggregated: true, decode_instances: 2, kv_block_tokens: 64, "
                             "kv_wire_bytes_per_s: 2.5e+10, kv_setup_s: 0.003}")
    (job,) = scenario(serving).jobs
    assert isinstance(job, InferenceJob)
    assert job.kv_block_tokens == 64 and job.kv_wire_bytes_per_s == 2.5e10 and job.kv_setup_s == 0.003
    # 64 tokens x 8 KV heads x 128 x 2 bytes = 128 KiB requests: two slices and their bytes at 200 Gb/s
    per = 2 * job.kv_slice_s + 131072 / 2.5e10
    assert job.kv_engine_s(1) == pytest.approx(0.003 + job.kv_descriptors(1) * per)


def test_a_bad_kv_engine_value_names_its_key():
    with pytest.raises(ConfigError, match="kv_wire_bytes_per_s"):
        scenario({"disaggregated": True, "decode_instances": 1, "kv_wire_bytes_per_s": "25e9"})


def test_the_wire_rate_defaults_to_the_fabrics_nic():
    # a 100 Gb/s NIC per GPU: 12.5 GB/s, not the 400 Gb/s default of a job built without a fabric
    fabric = {**FABRIC, "nic_bandwidth": "100Gbps"}
    doc = {"fabric": fabric, "workload": {"jobs": [
        {"name": "s", "kind": "inference", "model": "llama3-8b", "serving": {"disaggregated": True,
                                                                             "decode_instances": 1}},
        {"name": "t", "kind": "inference", "model": "llama3-8b",
         "serving": {"disaggregated": True, "decode_instances": 1, "kv_wire_bytes_per_s": 2.5e10}}]}}
    s, t = scenario_from_mapping(doc).jobs
    assert s.kv_wire_bytes_per_s == pytest.approx(100e9 / 8)
    assert t.kv_wire_bytes_per_s == 2.5e10  # a rate the scenario sets is kept
    assert InferenceJob(model="llama3-8b").kv_wire_bytes_per_s == 50e9


def test_generated_services_take_the_fabrics_nic():
    fabric = {"kind": "leaf-spine", "servers": 16, "gpus_per_server": 8, "leaves": 2, "spines": 2,
              "nic_bandwidth": "200Gbps"}
    doc = {"fabric": fabric, "workload": {"generator": {"jobs": 12, "inference_share": 0.5}}}
    services = [j for j in scenario_from_mapping(doc).jobs if isinstance(j, InferenceJob)]
    assert services and all(j.kv_wire_bytes_per_s == pytest.approx(25e9) for j in services)
