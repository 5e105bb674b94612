"""The control benchmark's scenario names (benchmarks/control.py --scenarios)."""

import importlib.util
from pathlib import Path

import pytest

from flowherd.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("control_benchmark", ROOT / "benchmarks" / "control.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


@pytest.mark.parametrize(("name", "stem"), [("kalos4", "llm_kalos_4to1"), ("kalos8", "llm_kalos_8to1"),
                                            ("rail", "llm_kalos_rail"), ("seren", "llm_seren_1to1"),
                                            ("inference", "llm_inference"),
                                            ("lingjun15", "llm_lingjun_15to1"),
                                            ("lingjun1", "llm_lingjun_1to1"),
                                            ("contended", "contended_small"), ("heavy", "control_heavy")])
def test_a_family_name_resolves_to_its_scenario_file(name, stem):
    path = bench.scenario_path(name)
    assert path.name == f"{stem}.yaml"
    assert path.is_file()


def test_a_yaml_path_is_taken_as_it_is():
    p = ROOT / "benchmarks" / "scenarios" / "llm_kalos_8to1.yaml"
    assert bench.scenario_path(str(p)) == p


def test_an_unknown_name_is_one_line_naming_the_nearest_family():
    with pytest.raises(UnknownNameError) as e:
        bench.scenario_path("kalso4")
    msg = str(e.value)
    assert "\n" not in msg and "'kalso4'" in msg and "did you mean 'kalos4'" in msg


def test_a_missing_yaml_file_is_one_line_naming_it():
    with pytest.raises(ConfigError, match=r"no scenario file 'nowhere\.yaml'"):
        bench.scenario_path("nowhere.yaml")


def test_the_benchmark_exits_2_with_one_line_on_a_bad_name(capsys):
    assert bench.main(["--scenarios", "kalos9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'kalos9'" in err


def test_a_run_at_another_fidelity_is_reused_only_at_that_fidelity():
    rows = [{"scenario": "kalos4", "controller": "none", "seed": 0, "network": "roce"},
            {"scenario": "kalos4", "controller": "none", "seed": 1, "network": "roce",
             "fidelity": "collective"}]
    assert [k[2] for k in bench.reusable(rows, "roce", True)] == [0]
    assert [k[2] for k in bench.reusable(rows, "roce", True, fidelity="collective")] == [1]
