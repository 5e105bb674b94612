"""`flowherd plan`: the JSON contract, --out, and executing a plan with simulate --plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from flowherd.cli import main

SMALL = {
    "name": "small-plan",
    "seed": 3,
    "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "gpu": "h100",
               "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 2, "spines": 1,
               "oversubscription": 2, "link_latency": "1us"},
    "workload": {"jobs": [
        {"name": "a", "model": "llama3-8b", "gpus": 16, "parallelism": {"tp": 8, "dp": 2},
         "seq_len": 1024, "global_batch": 4, "iterations": 3},
        {"name": "b", "model": "llama3-8b", "gpus": 8, "parallelism": {"tp": 8},
         "seq_len": 1024, "global_batch": 2, "iterations": 3, "submit": "0.1s"},
    ]},
    "placement": {"method": "heuristic"},
    "simulation": {"fidelity": "collective", "horizon": "2min"},
}


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


@pytest.mark.parametrize("method", ["random", "packed", "topology", "hetero", "milp", "heuristic"])
def test_plan_json_has_the_contract_keys(small_file, capsys, method):
    assert main(["plan", str(small_file), "--method", method, "--time-limit", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("method", "objective", "lower_bound", "gap", "solve_s", "predicted_mean_jct_s", "jobs"):
        assert key in out, key
    assert out["method"] == method
    assert [(j["name"], len(j["gpus"])) for j in out["jobs"]] == [("a", 16), ("b", 8)]


def test_plan_out_then_simulate_pins_the_jobs(small_file, tmp_path, capsys):
    plan_path = tmp_path / "plan.json"
    assert main(["plan", str(small_file), "--method", "heuristic", "--out", str(plan_path)]) == 0
    capsys.readouterr()
    plan = json.loads(plan_path.read_text())
    assert main(["simulate", str(small_file), "--plan", str(plan_path), "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["jobs_finished"] == 2
    # the simulator ran each job on the planned GPUs: a plan moved to other GPUs changes the run
    want = {j["name"]: len(j["gpus"]) for j in plan["jobs"]}
    assert {j["name"]: j["num_gpus"] for j in sim["jobs"]} == want


def test_scenario_placement_heuristic_uses_the_planner(small_file, capsys):
    assert main(["simulate", str(small_file), "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["jobs_finished"] == 2


def test_unknown_method_is_one_line_error(small_file, capsys):
    assert main(["plan", str(small_file), "--method", "heuristc"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "heuristic" in err


def test_job_that_fits_nowhere_names_it(tmp_path, capsys):
    bad = dict(SMALL, workload={"jobs": [dict(SMALL["workload"]["jobs"][1], gpu="a100", name="lost")]})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    assert main(["plan", str(path), "--method", "heuristic"]) == 2
    assert "'lost'" in capsys.readouterr().err


def test_json_stdout_is_pure_json_even_with_the_solver(small_file, tmp_path):
    # HiGHS can print a banner straight to file descriptor 1; the console script must not
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("flowherd")
    proc = subprocess.run([str(exe), "plan", str(small_file), "--method", "milp", "--routes", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "optimal" and out["routes"] is not None


def test_plan_with_routes_round_trips(small_file, tmp_path, capsys):
    path = tmp_path / "plan.json"
    assert main(["plan", str(small_file), "--method", "heuristic", "--routes", "--out", str(path)]) == 0
    from flowherd.planning.plan import Plan, routes_to_splits

    plan = Plan.from_json(path)
    splits = routes_to_splits(plan.routes)
    assert splits  # the 16-GPU job talks across servers
    for (a, b), paths in splits.items():
        assert a != b and abs(sum(w for _, w in paths) - 1.0) < 1e-6


def test_simulate_executes_a_plan_with_routes(small_file, tmp_path, capsys):
    path = tmp_path / "plan.json"
    assert main(["plan", str(small_file), "--method", "milp", "--routes", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(small_file), "--plan", str(path), "--json"]) == 0
    sim = json.loads(capsys.readouterr().out)
    assert sim["jobs_finished"] == 2


def test_cluster_simulator_runs_the_plans_routes(small_file, tmp_path):
    # the runner hands the plan's routes to the simulator as an ExplicitRouter (flows the plan
    # does not cover fall back to the scenario's routing)
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import load_scenario
    from flowherd.planning.plan import make_plan

    sc = load_scenario(small_file)
    plan = make_plan(sc.fabric, sc.jobs, method="heuristic", routes=True)
    run = run_scenario(sc, plan=plan, solo=False)
    assert run.cluster.router == "explicit"
    assert run.summary["jobs_finished"] == 2


def test_schedule_option_chooses_fifo_or_backfill(tmp_path, capsys):
    # 32 GPUs: a (24) runs, b (24) waits for a, c (8, one iteration) fits beside a: the heuristic
    # backfills c at once; --schedule fifo starts it with b
    data = json.loads(json.dumps(SMALL))
    job = {"model": "llama3-8b", "parallelism": {"tp": 8}, "seq_len": 1024, "iterations": 3}
    data["workload"]["jobs"] = [
        {**job, "name": "a", "gpus": 24, "parallelism": {"tp": 8, "dp": 3}, "global_batch": 3,
         "iterations": 30},
        {**job, "name": "b", "gpus": 24, "parallelism": {"tp": 8, "dp": 3}, "global_batch": 3,
         "submit": "0.1s"},
        {**job, "name": "c", "gpus": 8, "global_batch": 1, "iterations": 1, "submit": "0.2s"}]
    path = tmp_path / "queue.yaml"
    path.write_text(yaml.safe_dump(data))
    starts = {}
    for schedule in ("backfill", "fifo"):
        assert main(["plan", str(path), "--json", "--schedule", schedule]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["info"]["schedule"] == schedule
        starts[schedule] = {j["name"]: j["start_s"] for j in out["jobs"]}
    assert starts["backfill"]["c"] == pytest.approx(0.2)
    assert starts["fifo"]["c"] >= starts["fifo"]["b"] > 0.2
    assert main(["plan", str(path), "--schedule", "easy"]) == 2
    assert "--schedule" in capsys.readouterr().err
