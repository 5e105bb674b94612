"""`flowherd simulate` / `demo`: the JSON contract, determinism, results on disk, bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import flowherd
from flowherd.cli import main

SMALL = {
    "name": "small",
    "seed": 3,
    "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "gpu": "h100",
               "nic_bandwidth": "400Gbps", "nvlink_bandwidth": "450GB/s", "leaves": 2, "spines": 1,
               "oversubscription": 2, "link_latency": "1us"},
    "workload": {
        "jobs": [
            {"name": "a", "tenant": "t1", "model": "llama3-8b", "gpus": 16,
             "parallelism": {"tp": 8, "dp": 2}, "seq_len": 1024, "global_batch": 4, "iterations": 4},
            {"name": "b", "tenant": "t2", "model": "llama3-8b", "gpus": 16,
             "parallelism": {"tp": 8, "dp": 2}, "seq_len": 1024, "global_batch": 4, "iterations": 4,
             "submit": "0.1s"},
            {"name": "c", "tenant": "t2", "model": "llama3-8b", "gpus": 8,
             "parallelism": {"tp": 8}, "seq_len": 1024, "global_batch": 2, "iterations": 3, "submit": "0.2s"},
        ],
        "background": {"load": 0.02, "max_flows_per_s": 50},
    },
    "placement": {"method": "first-fit"},
    "simulation": {"fidelity": "collective", "horizon": "2min"},
}


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_contract_fields(capsys, small_file):
    out = _json(capsys, ["simulate", str(small_file), "--json"])
    for key in ("jobs", "mean_jct_s", "p99_jct_s", "makespan_s", "wall_s"):
        assert key in out
    assert [j["name"] for j in out["jobs"]] == ["a", "b", "c"]
    for j in out["jobs"]:
        assert {"name", "tenant", "jct_s", "queue_s", "slowdown", "mean_iteration_s"} <= set(j)
        assert j["finished"] and j["jct_s"] >= j["mean_iteration_s"] * j["iterations"] * 0.999
        assert j["slowdown"] >= 1 - 1e-9
    # c waits for GPUs: 32 GPUs in all, a and b hold them
    c = out["jobs"][2]
    assert c["queue_s"] > 0


def test_same_scenario_and_seed_give_identical_json(capsys, small_file):
    a = _json(capsys, ["simulate", str(small_file), "--json"])
    b = _json(capsys, ["simulate", str(small_file), "--json"])
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_same_numbers_in_processes_with_other_hash_seeds_and_heaps(small_file):
    """Same scenario and seed, same numbers in another process: str hashing (the order of a set
    of job names) and object addresses (anything keyed by ``id()``) differ from process to
    process, which one process running twice cannot show. Under a controller on the lossless
    network, where decisions feed back into the run."""
    def run(hash_seed: str, malloc: str) -> dict:
        src = str(Path(flowherd.__file__).resolve().parents[1])  # this flowherd, wherever run from
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONMALLOC": malloc,
               "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, "-m", "flowherd", "simulate", str(small_file), "--json",
                               "--controller", "flowherd", "--network", "roce"],
                              capture_output=True, text=True, env=env, check=True)
        out = json.loads(proc.stdout)
        out.pop("wall_s"), out.pop("decision_wall_s")  # the only wall-clock figures
        return out

    a, b = run("1", "pymalloc"), run("2", "malloc")
    assert a["num_decisions"] > 0 and a["controller_issues"] == []
    assert a == b


def test_seed_option_overrides_the_file(capsys, small_file):
    a = _json(capsys, ["simulate", str(small_file), "--json", "--seed", "3"])
    b = _json(capsys, ["simulate", str(small_file), "--json", "--seed", "4"])
    assert a["seed"] == 3 and b["seed"] == 4
    assert a["background"] != b["background"]


def test_out_dir_gets_results_and_the_scenario(capsys, small_file, tmp_path):
    out_dir = tmp_path / "run"
    assert main(["simulate", str(small_file), "--out", str(out_dir)]) == 0
    result = json.loads((out_dir / "result.json").read_text())
    assert len(result["jobs"]) == 3
    assert yaml.safe_load((out_dir / "scenario.yaml").read_text())["name"] == "small"
    assert (out_dir / "jobs.csv").read_text().splitlines()[0].startswith("name,tenant")


@pytest.mark.parametrize(
    ("patch", "pattern"),
    [
        ({"model": "llama4-8b"}, "unknown model 'llama4-8b'"),
        ({"gpu": "h10"}, "unknown gpu 'h10'"),
        ({"parallelism": {"tp": 8, "dp": 3}}, "must equal gpus=16"),
        ({"gpus": 64, "parallelism": {"tp": 8, "dp": 8}, "global_batch": 8},
         "asks for 64 GPUs but the fabric has 32"),
    ],
)
def test_bad_scenarios_are_one_line_errors(capsys, tmp_path, patch, pattern):
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    data["workload"]["jobs"][0].update(patch)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and pattern in err and len(err.splitlines()) == 1


def test_negative_rate_and_unreadable_trace_are_one_line_errors(capsys, tmp_path):
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    data["workload"]["arrivals"] = [{"rate": "-2/h", "until": "1h",
                                     "mix": [{"name": "x", "model": "llama3-8b", "gpus": 8}]}]
    path = tmp_path / "neg.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path)]) == 2
    assert "workload.arrivals[0].rate" in capsys.readouterr().err
    data["workload"]["arrivals"] = []
    data["workload"]["traces"] = [{"path": str(tmp_path / "missing.csv")}]
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path)]) == 2
    assert "missing.csv" in capsys.readouterr().err


def test_the_console_script_prints_no_traceback(tmp_path):
    exe = Path(sys.executable).parent / "flowherd"
    proc = subprocess.run([str(exe), "simulate", str(tmp_path / "nope.yaml")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "no scenario file" in proc.stderr


@pytest.mark.slow
def test_demo_runs_the_embedded_default(capsys):
    out = _json(capsys, ["demo", "--json"])
    assert out["scenario"] == "default" and out["num_gpus"] == 128
    kinds = {j["kind"] for j in out["jobs"]}
    assert kinds == {"training", "inference"} and len({j["tenant"] for j in out["jobs"]}) >= 4
    assert out["background"]["flows"] > 0
    assert out["jobs_finished"] == out["jobs_total"]


def test_simulate_out_is_reportable(capsys, small_file, tmp_path):
    from flowherd.report import write_report

    out_dir = tmp_path / "run"
    assert main(["simulate", str(small_file), "--out", str(out_dir)]) == 0
    files = write_report(out_dir)
    assert files.html.exists() and files.figures


def test_controller_option_runs_a_controller(capsys, small_file):
    base = _json(capsys, ["simulate", str(small_file), "--json"])
    ctl = _json(capsys, ["simulate", str(small_file), "--json", "--controller", "adaptive"])
    assert base["controller"] == "none" and base["num_decisions"] == 0
    assert ctl["controller"] == "adaptive" and ctl["num_decisions"] > 0
    assert ctl["controller_issues"] == []
    # under the default grant (buffer) and against the same run without control
    assert ctl["levers"] == "buffer" and ctl["refused_decisions"] == 0
    assert ctl["cost_to_others"]["baseline"] == "none" and "cost_to_others" not in base


def test_unknown_controller_is_one_line(capsys, small_file):
    assert main(["simulate", str(small_file), "--controller", "casini"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'cassini'" in err and err.count("\n") == 1


def test_the_controller_option_names_every_registered_controller():
    """`simulate --help` lists every name `--controller` accepts (the registry, flowherd.control)."""
    import inspect

    from flowherd.cli.simulate_cmd import simulate
    from flowherd.control import CONTROLLERS

    help_text = inspect.signature(simulate).parameters["controller"].default.help
    missing = [name for name in CONTROLLERS if f" {name}," not in help_text.replace("\n", " ")]
    assert not missing, missing
