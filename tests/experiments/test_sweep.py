"""Sweep files: expansion into points and runs, stable hashes, field-named errors, execution."""

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from flowherd.errors import ConfigError
from flowherd.experiments.sweep import (
    canonical_hash,
    execute_run,
    load_sweep,
    run_sweep,
    set_field,
    sweep_from_mapping,
)
from flowherd.experiments.sweep_ray import _batch_size

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
TINY = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())


def test_cross_product_has_one_point_per_combination_and_one_run_per_seed():
    s = sweep_from_mapping({"base": TINY, "axes": {"fabric.oversubscription": [1, 2, 4],
                                                   "workload.background.load": [0.0, 0.2, 0.4]},
                            "seeds": 3})
    assert len(s.points) == 9 and s.seeds == (0, 1, 2) and len(s.runs) == 27
    combos = {(p.params["fabric.oversubscription"], p.params["workload.background.load"]) for p in s.points}
    assert combos == {(o, x) for o in (1, 2, 4) for x in (0.0, 0.2, 0.4)}
    for p in s.points:
        assert p.scenario["fabric"]["oversubscription"] == p.params["fabric.oversubscription"]
        assert p.scenario["workload"]["background"]["load"] == p.params["workload.background.load"]
        assert p.scenario["fabric"]["servers"] == TINY["fabric"]["servers"]  # the rest is the base
    assert len({r.run_id for r in s.runs}) == 27


def test_explicit_points_and_seed_list():
    s = sweep_from_mapping({"base": TINY, "seeds": [7, 11],
                            "points": [{"placement.method": "packed"},
                                       {"placement.method": "first-fit", "fabric.oversubscription": 2}]})
    assert [p.scenario["placement"]["method"] for p in s.points] == ["packed", "first-fit"]
    assert s.points[1].scenario["fabric"]["oversubscription"] == 2
    assert s.points[0].scenario["fabric"]["oversubscription"] == 1
    assert [r.seed for r in s.runs] == [7, 11, 7, 11]
    assert s.runs[1].scenario()["seed"] == 11


def test_point_hash_is_sha256_of_canonical_json_without_the_seed():
    scen = {"b": {"y": 1, "x": [1, 2]}, "a": "é", "seed": 5}
    expect = hashlib.sha256(json.dumps({"a": "é", "b": {"x": [1, 2], "y": 1}}, sort_keys=True,
                                       separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    assert canonical_hash(scen) == expect
    assert canonical_hash({"seed": 9, "a": "é", "b": {"x": [1, 2], "y": 1}}) == expect  # order, seed
    assert canonical_hash({**scen, "a": "e"}) != expect


def test_hashes_are_stable_across_loads_of_the_same_file():
    a = load_sweep(SCENARIOS / "sweep_tiny.yaml")
    b = load_sweep(SCENARIOS / "sweep_tiny.yaml")
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]
    assert a.runs[0].run_id == f"{a.points[0].hash[:16]}-s0"


def test_set_field_reaches_list_items_and_creates_missing_mappings():
    out = set_field(TINY, "workload.jobs[1].iterations", 9)
    assert out["workload"]["jobs"][1]["iterations"] == 9
    assert TINY["workload"]["jobs"][1]["iterations"] == 3  # the base is not modified
    assert set_field({}, "controller.name", "cassini") == {"controller": {"name": "cassini"}}
    with pytest.raises(ConfigError, match=r"index 5 is out of range .*\(axes"):
        set_field(TINY, "workload.jobs[5].iterations", 1)


def test_unknown_axis_field_names_the_axis_and_the_closest_field():
    with pytest.raises(ConfigError, match=r"placement\.methd.*'method'.*\(axes\.placement\.methd\)"):
        sweep_from_mapping({"base": TINY, "axes": {"placement.methd": ["packed"]}})
    with pytest.raises(ConfigError, match=r"simulation.*horizn.*'horizon'"):
        sweep_from_mapping({"base": TINY, "points": [{"simulation.horizn": "1s"}]})


@pytest.mark.parametrize(("data", "field"), [
    ({"base": TINY, "axes": {"fabric.servers": []}}, "axes"),
    ({"base": TINY, "seeds": 0}, "seeds"),
    ({"base": TINY, "seeds": [1, 1]}, "seeds"),
    ({"base": TINY, "axez": {}}, "axez"),
    ({"axes": {}}, "base"),
    ({"base": TINY, "axes": {"fabric.servers": [4]}, "points": [{"fabric.servers": 4}]}, "axes"),
    ({"base": TINY, "axes": {"fabric.servers": [4, 4]}}, "axes"),
    ({"base": "no-such-file.yaml"}, "base"),
])
def test_bad_sweep_is_one_config_error_naming_the_field(data, field):
    with pytest.raises(ConfigError, match=field):
        sweep_from_mapping(data)


def test_relative_base_is_read_beside_the_sweep_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yaml").write_text(yaml.safe_dump(TINY))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"base": "sub/b.yaml", "seeds": 2}))
    s = load_sweep(tmp_path / "s.yaml")
    assert len(s.points) == 1 and s.points[0].scenario["name"] == "tiny"


def test_a_failing_run_is_recorded_with_its_error_not_raised():
    bad = set_field(TINY, "placement.method", "no-such-placer")
    rec = execute_run(bad)
    assert rec["status"] == "failed" and "no-such-placer" in rec["error"]
    ok = execute_run({**TINY, "seed": 3})
    assert ok["status"] == "ok" and ok["error"] is None
    assert [j["name"] for j in ok["result"]["jobs"]] == ["a", "b", "c"]
    assert len(ok["utilization"]["series"][0]) == len(ok["utilization"]["bin_edges_s"]) - 1


def test_sweep_goes_on_after_a_failing_point_and_resume_skips_stored_runs(tmp_path):
    pytest.importorskip("duckdb")
    s = sweep_from_mapping({"name": "t", "base": set_field(TINY, "simulation.horizon", "3s"),
                            "axes": {"placement.method": ["no-such-placer", "first-fit"]}, "seeds": 1})
    seen = []
    out = run_sweep(s, tmp_path, backend="inline",
                    progress=lambda st: seen.append((st["phase"], st["status"])))
    assert (out.ok, out.failed, out.skipped, out.total) == (1, 1, 0, 2)
    assert seen == [("starting", None), ("running", None), ("running", "failed"), ("running", "ok")]
    with pytest.raises(ConfigError, match="--resume"):
        run_sweep(s, tmp_path, backend="inline")
    again = run_sweep(s, tmp_path, backend="inline", resume=True)
    assert (again.ok, again.failed, again.skipped) == (0, 0, 2)
    retry = run_sweep(s, tmp_path, backend="inline", resume=True, retry_failed=True)
    assert (retry.ok, retry.failed, retry.skipped) == (0, 1, 1)  # only the failed one ran again


def test_batch_size_keeps_several_tasks_per_worker():
    assert _batch_size(0, 27, 2) == 3  # 9 tasks for 2 workers
    assert _batch_size(0, 5, 2) == 1
    assert _batch_size(0, 10_000, 2) == 8  # capped: a killed task loses little
    assert _batch_size(4, 27, 2) == 4


@pytest.mark.slow
def test_ray_runs_give_the_same_rows_as_inline_runs(tmp_path):
    pytest.importorskip("ray")
    from flowherd.experiments.store import ResultStore

    s = sweep_from_mapping({"name": "r", "base": set_field(TINY, "simulation.horizon", "3s"),
                            "axes": {"workload.background.load": [0.0, 0.3]}, "seeds": [1, 2]})
    run_sweep(s, tmp_path / "ray", num_cpus=2, batch=2)
    run_sweep(s, tmp_path / "inline", backend="inline")
    with (ResultStore(tmp_path / "ray", read_only=True) as a,
          ResultStore(tmp_path / "inline", read_only=True) as b):
        for t in ("runs", "jobs", "links", "tenants"):
            assert a.table_rows(t) == b.table_rows(t), t


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("sweep_*.yaml")), ids=lambda p: p.name)
def test_example_sweeps_load_and_every_point_is_a_valid_scenario(path):
    from flowherd.experiments.scenario import scenario_from_mapping

    s = load_sweep(path)
    assert s.runs
    for p in s.points:
        scen = scenario_from_mapping({**p.scenario, "seed": s.seeds[0]})
        for key, value in p.params.items():
            if key == "placement.method":
                assert scen.placement == value
