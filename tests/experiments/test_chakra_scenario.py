"""Jobs of Chakra traces in scenarios: beside native jobs, under controllers, bad traces in one line."""

import pytest
import yaml

from flowherd.cli import main
from flowherd.control import CONTROLLERS
from flowherd.errors import ConfigError
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import load_scenario, scenario_from_mapping
from flowherd.workload import ChakraJob, Granularity, TrainingJob
from flowherd.workload.chakra_schema import CollectiveCommType as CT
from flowherd.workload.chakra_write import export_graph, microbenchmark

FABRIC = {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "gpu": "h100", "nic_bandwidth": "400Gbps",
          "leaves": 2, "spines": 2, "oversubscription": 2, "link_latency": "1us"}
NATIVE = {"model": "llama3-8b", "gpus": 16, "parallelism": {"tp": 8, "pp": 2}, "seq_len": 2048,
          "global_batch": 8}


@pytest.fixture(scope="module")
def megatron_dir(tmp_path_factory):
    job = TrainingJob(model="llama3-8b", gpus=16, tp=8, pp=2, seq_len=2048, global_batch=8)
    return export_graph(job.iteration_graph(Granularity.STAGE), tmp_path_factory.mktemp("mg"))


def _scenario(jobs, controller="none", **extra):
    return {"name": "chakra", "seed": 3, "fabric": FABRIC, "workload": {"jobs": jobs},
            "simulation": {"fidelity": "collective", "horizon": "30s"}, "controller": {"name": controller},
            **extra}


def test_a_megatron_trace_iterates_as_the_native_job_it_was_written_from(megatron_dir):
    # the validation of the reader against flowherd's own model: the same iteration within 5%
    # (measured: 0.01%, the microsecond rounding of duration_micros)
    s = scenario_from_mapping(_scenario([
        {"name": "et", "chakra": str(megatron_dir), "iterations": 2, "parallelism": {"tp": 8}},
        {"name": "native", **NATIVE, "iterations": 2, "submit": "10s"}]))
    assert isinstance(s.jobs[0], ChakraJob) and s.jobs[0].world_size == 16
    r = run_scenario(s, solo=False)
    it = {j["name"]: j["mean_iteration_s"] for j in r.jobs}
    assert it["et"] == pytest.approx(it["native"], rel=0.05)
    assert it["et"] == pytest.approx(it["native"], rel=1e-3)


@pytest.mark.parametrize("controller", list(CONTROLLERS))
def test_chakra_jobs_of_tenants_share_the_fabric_with_a_native_job(tmp_path, megatron_dir, controller):
    ar = microbenchmark(tmp_path / "ar", CT.ALL_REDUCE, 8, 64)
    s = scenario_from_mapping(_scenario([
        {"name": "mg", "tenant": "t1", "chakra": str(megatron_dir), "parallelism": {"tp": 8}},
        {"name": "ar", "tenant": "t2", "chakra": str(ar), "iterations": 3, "ranks": 8},
        {"name": "native", "tenant": "t3", **{**NATIVE, "gpus": 8, "parallelism": {"tp": 8}}}], controller))
    r = run_scenario(s)
    by = {j["name"]: j for j in r.jobs}
    assert set(by) == {"mg", "ar", "native"}
    assert all(j["finished"] for j in r.jobs)
    assert by["ar"]["iterations"] == 3 and by["ar"]["num_gpus"] == 8
    assert by["mg"]["slowdown"] > 0.99  # measured alone too (adaptive paths may beat the alone run a hair)
    assert {t["tenant"] for t in r.tenants} == {"t1", "t2", "t3"}


def test_a_relative_trace_directory_is_read_beside_the_scenario_file(tmp_path):
    microbenchmark(tmp_path / "traces" / "ar", CT.ALL_REDUCE, 4, 1)
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_scenario([{"name": "ar", "chakra": "traces/ar"}])))
    s = load_scenario(f)
    assert s.jobs[0].world_size == 4


@pytest.mark.parametrize(("job", "expect"), [
    ({"name": "x", "chakra": "/nonexistent/dir"}, "no Chakra trace directory"),
    ({"name": "x", "chakra": "{ar}", "model": "llama3-8b"}, "drop model (workload.jobs[0].model)"),
    ({"name": "x", "chakra": "{ar}", "gpus": 4}, "drop gpus"),
    ({"name": "x", "model": "llama3-8b", "gpus": 8, "ranks": 4}, "(workload.jobs[0].ranks)"),
    ({"name": "x"}, "missing required field (workload.jobs[0].model)"),
])
def test_bad_chakra_jobs_are_one_config_error(tmp_path, job, expect):
    ar = microbenchmark(tmp_path / "ar", CT.ALL_REDUCE, 4, 1)
    job = {k: (str(ar) if v == "{ar}" else v) for k, v in job.items()}
    with pytest.raises(ConfigError) as err:
        scenario_from_mapping(_scenario([job]))
    assert expect in str(err.value) and "\n" not in str(err.value)


def test_a_truncated_trace_through_the_cli_is_one_line_naming_file_and_node(tmp_path, capsys):
    d = microbenchmark(tmp_path / "ar", CT.ALL_REDUCE, 4, 1)
    (d / "all_reduce.3.et").write_bytes((d / "all_reduce.3.et").read_bytes()[:20])
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_scenario([{"name": "ar", "chakra": str(d)}])))
    assert main(["simulate", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "all_reduce.3.et: truncated protobuf: node message 0" in err and "workload.jobs[0].chakra" in err


def test_the_planner_places_a_chakra_job_with_its_iteration_predicted(megatron_dir):
    from flowherd.planning.plan import make_plan

    s = scenario_from_mapping(_scenario([
        {"name": "et", "chakra": str(megatron_dir), "iterations": 2, "parallelism": {"tp": 8}},
        {"name": "native", **NATIVE, "iterations": 2}]))
    p = make_plan(s.fabric, s.jobs, method="packed", seed=0)
    by = {j.name: j for j in p.jobs}
    assert len(by["et"].gpus) == 16 and not set(by["et"].gpus) & set(by["native"].gpus)
    # the same work as the native job: the same predicted iteration
    assert by["et"].predicted_iteration_s == pytest.approx(by["native"].predicted_iteration_s, rel=0.01)


def test_simulate_finds_traces_beside_the_scenario_file_from_elsewhere(tmp_path, monkeypatch, capsys):
    microbenchmark(tmp_path / "traces" / "ar", CT.ALL_REDUCE, 4, 1)
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_scenario([{"name": "ar", "chakra": "traces/ar", "iterations": 2}])))
    monkeypatch.chdir(tmp_path.parent)  # not the scenario's directory
    assert main(["simulate", str(f), "--json"]) == 0
    assert '"iterations": 2' in capsys.readouterr().out
