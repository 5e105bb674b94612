"""Scenario files: the YAML contract and one clear error per bad input."""

import copy

import pytest

from flowherd.errors import ConfigError
from flowherd.experiments.scenario import load_scenario, scenario_from_mapping
from flowherd.workload import TrainingJob

CONTRACT = {
    "seed": 7,
    "fabric": {"kind": "leaf-spine", "servers": 8, "gpus_per_server": 8, "gpu": "h100",
               "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "900GB/s", "leaves": 2, "spines": 2,
               "oversubscription": 1, "link_latency": "1us"},
    "workload": {
        "jobs": [{"name": "a", "tenant": "t1", "kind": "training", "model": "llama3-8b", "gpus": 16,
                  "parallelism": {"tp": 8, "pp": 1, "dp": 2}, "seq_len": 4096, "micro_batch": 1,
                  "global_batch": 32, "iterations": 20, "submit": "0s"}],
        "arrivals": [],
        "traces": [],
        "background": {"load": 0.0},
    },
    "placement": {"method": "first-fit"},
    "simulation": {"fidelity": "collective", "horizon": "4h"},
}


def _with(path, value):
    data = copy.deepcopy(CONTRACT)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def test_the_contract_example_converts_to_core_values():
    s = scenario_from_mapping(CONTRACT)
    (job,) = s.jobs
    assert isinstance(job, TrainingJob)
    assert (job.name, job.tenant, job.gpus, job.tp, job.dp, job.iterations) == ("a", "t1", 16, 8, 2, 20)
    assert s.fabric.num_gpus == 64 and s.horizon_s == 4 * 3600 and s.seed == 7


def test_poisson_arrivals_are_seeded_and_named_uniquely():
    arrivals = [{"process": "poisson", "rate": "20/h", "until": "1h",
                 "mix": [{"name": "small", "model": "llama3-8b", "gpus": 8,
                          "parallelism": {"tp": 8}, "iterations": 5}]}]
    a = scenario_from_mapping(_with(("workload", "arrivals"), arrivals))
    b = scenario_from_mapping(_with(("workload", "arrivals"), arrivals))
    assert [j.submit_s for j in a.jobs] == [j.submit_s for j in b.jobs]
    assert len({j.name for j in a.jobs}) == len(a.jobs) > 5


def test_trace_replay_maps_philly_jobs_onto_llm_jobs():
    trace = {"path": "philly", "max_jobs": 30, "time_scale": 1e-3, "max_iterations": 50}
    s = scenario_from_mapping(_with(("workload", "traces"), [trace]))
    assert len(s.jobs) == 31
    assert all(j.gpus <= 64 and j.iterations <= 50 for j in s.jobs)


def test_trace_windows_filter_scale_and_move_with_the_seed():
    from flowherd.workload import load_trace

    big = [j for j in load_trace("philly") if j.num_gpus >= 4]
    trace = {"path": "philly", "min_gpus": 4, "gpu_scale": 2, "max_jobs": 5, "seed_stride": 3,
             "time_scale": 1e-5, "duration_scale": 1e-5, "max_iterations": 1000, "micro_batches": 2,
             "medium_from_gpus": 64}
    runs = {}
    for seed in (0, 1):
        m = _with(("workload", "traces"), [trace])
        m = {**m, "seed": seed, "workload": {**m["workload"], "jobs": []}}
        runs[seed] = scenario_from_mapping(m).jobs
    # seed s replays the 5 multi-GPU jobs after the first 3 s of them, with twice their GPUs
    for seed, jobs in runs.items():
        window = big[3 * seed:3 * seed + 5]
        assert [j.name for j in jobs] == [w.job_id for w in window]
        assert [j.gpus for j in jobs] == [2 * w.num_gpus for w in window]
        assert all(j.model.name == "llama3-8b" and j.global_batch == 2 * j.dp for j in jobs)
    # durations scaled: the iterations follow duration x 1e-5 over the modelled iteration time
    j, w = runs[0][0], big[0]
    assert j.iterations == max(1, round(w.duration_s * 1e-5 / j.estimate_iteration_s(8)))


def test_jobs_submitted_after_the_horizon_are_left_out():
    # the first 30 Philly jobs span days; unscaled, only those of the first 4 h remain
    s = scenario_from_mapping(_with(("workload", "traces"), [{"path": "philly", "max_jobs": 30}]))
    assert 1 < len(s.jobs) < 31
    assert all(j.submit_s < s.horizon_s for j in s.jobs)


@pytest.mark.parametrize(
    ("path", "value", "pattern"),
    [
        (("workload", "jobs", 0, "model"), "llama3-8c",
         r"unknown model 'llama3-8c'; did you mean 'llama3-8b'"),
        (("workload", "jobs", 0, "gpu"), "h1000", r"unknown gpu 'h1000'; did you mean 'h100'"),
        (("workload", "jobs", 0, "gpus"), 12, r"must equal gpus=12 .*workload\.jobs\[0\]"),
        (("workload", "jobs", 0, "parallelism"), {"tp": 8, "dp": 16}, r"gpus"),
        (("workload", "traces"), [{"path": "/nonexistent/trace.csv"}], r"trace.*nonexistent"),
        (("workload", "background", "load"), -0.5, r"workload\.background\.load"),
        (("simulation", "fidelity"), "flow", r"simulation\.fidelity"),
        (("seed",), "x", r"\(seed\)"),
    ],
)
def test_bad_scenarios_get_one_clear_error(path, value, pattern):
    with pytest.raises(ConfigError, match=pattern):
        scenario_from_mapping(_with(path, value))


def test_a_job_larger_than_the_cluster_is_rejected():
    data = _with(("workload", "jobs", 0, "gpus"), 128)
    data["workload"]["jobs"][0]["parallelism"] = {"tp": 8, "dp": 16}
    with pytest.raises(ConfigError, match="asks for 128 GPUs but the fabric has 64"):
        scenario_from_mapping(data)


def test_a_negative_arrival_rate_is_rejected():
    arrivals = [{"rate": "-4/h", "until": "1h", "mix": [{"name": "x", "model": "llama3-8b", "gpus": 8}]}]
    with pytest.raises(ConfigError, match=r"rate.*workload\.arrivals\[0\]\.rate"):
        scenario_from_mapping(_with(("workload", "arrivals"), arrivals))


def test_unknown_keys_suggest_the_closest():
    data = _with(("simulation", "horizn"), "1h")
    pattern = r"unknown field 'horizn' \(simulation\.horizn\); did you mean 'horizon'"
    with pytest.raises(ConfigError, match=pattern):
        scenario_from_mapping(data)


def test_missing_scenario_file_is_one_error():
    with pytest.raises(ConfigError, match="no scenario file 'defualt'; did you mean 'default'"):
        load_scenario("defualt")


def test_controller_block_names_a_registered_controller():
    s = scenario_from_mapping(_with(("controller",), {"name": "threshold", "params": {"theta": 0.3}}))
    assert (s.controller, dict(s.controller_params)) == ("threshold", {"theta": 0.3})
    assert s.on_controller_error == "skip"
    pattern = r"unknown controller 'varis'; did you mean 'varys'.*controller\.name"
    with pytest.raises(ConfigError, match=pattern):
        scenario_from_mapping(_with(("controller",), {"name": "varis"}))


@pytest.mark.parametrize("network, pace, expected", [
    (None, None, False),      # no network: ideal, nothing queues, the caps would only cost
    ("ideal", None, False),
    ("roce", None, True),     # a network that queues: the plan's rates are kept as host pacers
    ("tcp", None, True),
    ("roce", False, False),   # said explicitly, kept
    ("ideal", True, True),
])
def test_planner_pace_defaults_on_where_the_network_queues(network, pace, expected):
    data = copy.deepcopy(CONTRACT)
    if network is not None:
        data["network"] = network
    if pace is not None:
        data["planner"] = {"pace": pace}
    assert scenario_from_mapping(data).pace is expected


@pytest.mark.parametrize(("key", "said"), [
    ("max_bacth", "did you mean 'max_batch'"),
    ("prompt_token", "did you mean 'prompt_tokens'"),
    ("batch_szie", "expected one of tp, ep, instances"),
])
def test_a_serving_typo_gets_the_closest_key_or_the_list(key, said):
    base = {"fabric": {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "leaves": 1, "spines": 1},
            "workload": {"jobs": [{"name": "s", "kind": "inference", "model": "llama3-8b",
                                   "serving": {key: 8}}]}}
    with pytest.raises(ConfigError, match=rf"\(workload\.jobs\[0\]\.serving\.{key}\); {said}"):
        scenario_from_mapping(base)


def test_a_sweep_axis_under_serving_is_checked_before_any_run():
    from flowherd.experiments.sweep import sweep_from_mapping

    base = {"fabric": {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "leaves": 1, "spines": 1},
            "workload": {"jobs": [{"name": "s", "kind": "inference", "model": "llama3-8b", "serving": {}}]}}
    with pytest.raises(ConfigError, match="did you mean 'max_batch'"):
        sweep_from_mapping({"base": base, "axes": {"workload.jobs[0].serving.max_bacth": [4, 8]}})
    ok = sweep_from_mapping({"base": base, "axes": {"workload.jobs[0].serving.max_batch": [4, 8]}})
    assert len(ok.points) == 2
