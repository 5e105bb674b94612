"""`flowherd sweep`'s display: the swept values of each run, where it runs, a sensible ETA, and
Ray's messages kept out of it."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.cli import main
from flowherd.cli.sweep_cmd import _eta, _run_labels
from flowherd.errors import ConfigError
from flowherd.experiments.ray_local import ray_messages_to
from flowherd.experiments.sweep import INLINE_MAX_RUNS, choose_backend, load_sweep, sweep_from_mapping

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_progress_names_each_run_by_its_swept_values_and_seed():
    spec = load_sweep(SCENARIOS / "sweep_tiny.yaml")
    labels = _run_labels(spec)
    assert len(labels) == 27
    run = spec.runs[-1]
    assert labels[run.run_id] == "oversubscription=4 load=0.4 seed 2"
    assert all(run.run_id[:16] not in text for run in spec.runs for text in labels.values())


def test_the_eta_extrapolates_the_runs_of_this_call_only():
    # 27 runs, 9 resumed, 3 executed in 6 s since the runs started: 15 left at 2 s each
    state = {"total": 27, "done": 12, "executed": 3}
    assert _eta(state, 6.0) == "ETA 30 s"
    assert _eta({"total": 27, "done": 9, "executed": 0}, 40.0) == "ETA -"  # nothing run yet (Ray starting)
    assert _eta({"total": 27, "done": 27, "executed": 27}, 43.0) == "done"


def test_small_sweeps_run_inline_large_ones_and_clusters_on_ray():
    assert choose_backend(INLINE_MAX_RUNS) == "inline"
    assert choose_backend(INLINE_MAX_RUNS + 1) == "ray"
    assert choose_backend(2, address="10.0.0.1:6379") == "ray"
    assert choose_backend(2, num_cpus=2) == "ray"


def test_the_tiny_sweep_runs_inline_and_says_so(tmp_path, capsys):
    tiny = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
    tiny["simulation"]["horizon"] = "2s"
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    data = yaml.safe_load((SCENARIOS / "sweep_tiny.yaml").read_text())
    data.update(axes={"fabric.oversubscription": [1, 4]}, seeds=1)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    assert main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "2 runs in this process" in err and "Ray" not in err.split("\n", 2)[2]
    assert "[1/2] oversubscription=1 seed 0 ok" in err or "[1/2] oversubscription=4 seed 0 ok" in err


def test_inline_with_a_cluster_address_is_refused(tmp_path, capsys):
    assert main(["sweep", str(SCENARIOS / "sweep_tiny.yaml"), "--inline", "--address", "x:1", "--out",
                 str(tmp_path / "o")]) == 2
    assert "(--inline)" in capsys.readouterr().err


def test_set_fields_apply_to_every_point_and_are_checked():
    base = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
    spec = sweep_from_mapping({"base": base, "set": {"placement.method": "spread"},
                               "axes": {"fabric.oversubscription": [1, 2]}})
    assert all(p.scenario["placement"]["method"] == "spread" for p in spec.points)
    assert all(set(p.params) == {"fabric.oversubscription"} for p in spec.points)
    with pytest.raises(ConfigError, match=r"did you mean 'method'.*\(set\.placement\.methd\)"):
        sweep_from_mapping({"base": base, "set": {"placement.methd": "spread"}})
    with pytest.raises(ConfigError, match="did you mean 'set'"):
        sweep_from_mapping({"base": base, "sett": {}})


def test_ray_messages_go_to_the_log_file_not_the_terminal(tmp_path, capsys):
    logger = logging.getLogger("ray.flowherd_test")
    handler = logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)
    try:
        with ray_messages_to(tmp_path / "ray.log"):
            logger.warning("Token authentication is enabled for this Ray cluster.")
            print("a line Ray prints")
        logger.warning("after the block")
    finally:
        logger.removeHandler(handler)
    text = (tmp_path / "ray.log").read_text()
    assert "Token authentication" in text and "a line Ray prints" in text
    err = capsys.readouterr().err
    assert "Token authentication" not in err and "after the block" in err
