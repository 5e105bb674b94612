"""Every hostile and faulty input of `tests/cli/hostile_cases.py`, each as its own `flowherd`
process under its conditions (``ulimit -v``, ``unshare -n``, a full or read-only tmpfs, a signal
part-way), must come out ``clear``: one clear line, no traceback, nothing lost, nothing raw on
the terminal, no code run from a model file, no network. `benchmarks/bad_input.py` runs the same
cases and counts the verdicts. Mounts and network namespaces need root: skipped without."""

import importlib.util
import sys
from pathlib import Path

import pytest

_path = Path(__file__).with_name("hostile_cases.py")
_spec = importlib.util.spec_from_file_location("hostile_cases", _path)
hostile = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hostile  # its dataclasses look their module up
_spec.loader.exec_module(hostile)


PARAMS = [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.slow else []) for c in hostile.CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_hostile_input_gets_a_clear_answer(case, tmp_path):
    d = tmp_path / case.id
    res = hostile.run_case(case, d)
    if res.skipped:
        pytest.skip(res.skipped)
    verdict = hostile.verdict(case, res, d)
    assert verdict == "clear", (verdict, res.rc, f"{res.wall_s:.1f} s", res.stop_s, res.err[-1500:],
                                res.out[-500:])


def test_cases_are_distinct_and_cover_every_condition():
    ids = [c.id for c in hostile.CASES]
    assert len(ids) == len(set(ids)) >= 30
    assert any(c.limit_as_bytes for c in hostile.CASES) and any(c.netns for c in hostile.CASES)
    assert {c.mount for c in hostile.CASES} >= {"full", "ro"}
    assert {c.outcome for c in hostile.CASES} == {"refuse", "run", "keep", "stop"}
