"""Reading user files strictly and refusing what cannot fit (flowherd.experiments.loading)."""

import ast
import time
from pathlib import Path

import pytest
import yaml

from flowherd.errors import ConfigError
from flowherd.experiments import loading
from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
from flowherd.units import GiB, KiB, MiB

TINY = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny.yaml").read_text())
SRC = Path(__file__).resolve().parents[2] / "src" / "flowherd" / "experiments"


def _laughs(levels: int) -> str:
    text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, levels):
        text += f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n"
    return text


def test_binary_file_is_one_config_error_naming_the_byte(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_bytes(b"name: x\n\xff\xfe")
    with pytest.raises(ConfigError, match=r"s\.yaml' is not text \(byte 0xff at offset 8 is not UTF-8\)"):
        read_scenario_mapping(p)


def test_directory_and_oversized_file_are_refused(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="is a directory; expected a YAML file"):
        read_scenario_mapping(tmp_path)
    p = tmp_path / "big.yaml"
    p.write_text("a: 1\n" * 100)
    monkeypatch.setattr(loading, "MAX_FILE_BYTES", 256)
    with pytest.raises(ConfigError, match=r"has 500 B; expected a YAML file of at most 256 B"):
        read_scenario_mapping(p)


def test_duplicate_keys_are_an_error_with_both_lines_but_merge_keys_may_be_overridden():
    with pytest.raises(ConfigError, match=r"duplicate key 'b' at line 3 \(first at line 2\)"):
        loading.load_yaml("a: 1\nb: 2\nb: 3\n", source="'x'", what="scenario")
    with pytest.raises(ConfigError, match="duplicate key 'k'"):
        loading.load_yaml("top:\n  - {k: 1, k: 2}\n", source="'x'", what="scenario")
    # a YAML merge ("<<") followed by an explicit key is not a duplicate: the explicit one wins
    data = loading.load_yaml("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 5\n", source="'x'", what="s")
    assert data["c"] == {"x": 1, "y": 5}


def test_billion_laughs_is_refused_fast_with_a_short_message():
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        loading.load_yaml(_laughs(9), source="'laughs.yaml'", what="scenario")  # 10^9 values
    assert time.perf_counter() - t0 < 5
    assert "expands to more than 1,000,000 values" in str(info.value) and len(str(info.value)) < 200
    # the same construction below the limit loads, shared structure and all
    small = loading.load_yaml(_laughs(3), source="'x'", what="scenario")
    assert len(small["a2"]) == 10 and small["a2"][0] is small["a1"]


def test_expanded_size_counts_every_use_of_a_shared_value():
    shared = [1, 2, 3]
    assert loading._expanded_size({"a": shared, "b": shared}, {}) == 1 + 2 * 4
    rec: list = []
    rec.append(rec)  # a recursive alias ends the walk instead of looping
    assert loading._expanded_size(rec, {}) == 2


def test_an_error_echoes_a_clipped_value():
    data = {**TINY, "name": list(range(100_000))}
    with pytest.raises(ConfigError) as info:
        scenario_from_mapping(data)
    assert len(str(info.value)) < 200 and "..." in str(info.value) and "(name)" in str(info.value)


def test_switch_counts_that_drive_the_estimate_are_named(monkeypatch):
    monkeypatch.setattr(loading, "available_memory_bytes", lambda: 16 * GiB)
    fab = {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "leaves": 2, "spines": 2}
    for key in ("leaves", "spines"):
        with pytest.raises(ConfigError) as info:
            loading.check_fabric_size({**fab, key: 10**9})
        msg = str(info.value)
        # 2e9 leaf-spine links x 1 KiB = 1.86 TiB: the switches drive it, not the 32 GPUs
        assert "2,000,000,000 leaf-spine links" in msg and "1.86 TiB" in msg, msg
        assert msg.endswith(f"(fabric.{key})") and "fabric.servers" not in msg, msg


def test_fabric_size_estimate_gives_the_figure_and_the_limit(monkeypatch):
    monkeypatch.setattr(loading, "available_memory_bytes", lambda: 16 * GiB)
    fab = {"kind": "leaf-spine", "servers": 10**9, "gpus_per_server": 8, "leaves": 2, "spines": 2}
    with pytest.raises(ConfigError) as info:
        loading.check_fabric_size(fab)
    msg = str(info.value)
    # 8e9 GPUs x 8 KiB (+ 4 leaf-spine links x 1 KiB) = 6.1e13 bytes = 59.6 TiB
    assert "8,000,000,000 GPUs needs about 59.6 TiB" in msg
    assert "16 GiB available (--max-memory overrides) (fabric.servers)" in msg
    got = loading.fabric_gpu_count({"kind": "fat-tree", "k": 8, "gpus_per_server": 2})
    assert got == (256, "k=8 (k^3/4 servers) x 2 GPUs")
    # what fits is built: 2 GiB (+ the 4 links' 4 KiB) allows 2 GiB / 8 KiB = 262,144 GPUs
    monkeypatch.setattr(loading, "available_memory_bytes", lambda: 2 * GiB + 4 * KiB)
    loading.check_fabric_size({**fab, "servers": 32_768})
    with pytest.raises(ConfigError, match="262,152 GPUs"):
        loading.check_fabric_size({**fab, "servers": 32_769})


def test_arrivals_of_more_jobs_than_memory_holds_are_refused_before_generation(monkeypatch):
    monkeypatch.setattr(loading, "available_memory_bytes", lambda: 16 * GiB)
    job = TINY["workload"]["jobs"][0]
    flood = {**TINY, "workload": {"arrivals": [{"rate": "1e9/h", "until": "2h", "mix": [job]}]}}
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"brings about 2,000,000,000 jobs .* 1\.86 PiB .* 16 GiB available "
                                          r"\(--max-memory overrides\) \(workload\.arrivals\[0\]\.rate\)"):
        scenario_from_mapping(flood)
    assert time.perf_counter() - t0 < 5
    # 10,000 expected jobs (5,000/h for 2 h) at 1 MiB each are about 9.8 GiB: accepted by the check
    ok = {"jobs": [], "arrivals": [{"rate": "5000/h", "until": "2h", "mix": [job]}]}
    loading.check_workload_size(_workload(ok), 32)
    assert MiB == loading.BYTES_PER_JOB and 8 * KiB == loading.BYTES_PER_GPU


def _workload(mapping):
    from flowherd.experiments.scenario import WorkloadModel

    return WorkloadModel.model_validate(mapping)


def test_trace_rows_larger_than_the_fabric_are_refused_unless_after_the_horizon(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\nj1,0,100,8\nhuge,1000,100,1000000000\n")
    scen = {**TINY, "workload": {"traces": [{"path": str(trace)}]}}
    with pytest.raises(ConfigError, match=r"trace job 'huge' asks for 1,000,000,000 GPUs .* fabric has 32"):
        scenario_from_mapping({**scen, "simulation": {"horizon": "2h"}})
    # submitted after a 10 s horizon, the row would be dropped anyway: no error, no allocation
    s = scenario_from_mapping({**scen, "simulation": {"horizon": "10s"}})
    assert [j.name for j in s.jobs] == ["j1"]


def test_run_record_sits_below_store_and_sweep():
    def imports(name):
        tree = ast.parse((SRC / name).read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "flowherd.experiments.sweep" not in imports("store.py")
    assert "flowherd.experiments.runs" in imports("store.py") & imports("sweep.py")
    assert not {"flowherd.experiments.sweep", "flowherd.experiments.store"} & imports("runs.py")
    from flowherd.experiments import store, sweep
    from flowherd.experiments.runs import Run

    assert sweep.Run is Run and store.Run is Run
