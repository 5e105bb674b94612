"""The environment's id reaches Gymnasium without an import of flowherd by the user: through the
``gymnasium.envs`` entry point (Gymnasium 0.26-0.29 calls it on import) or the ``module:id`` form
(every Gymnasium)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import gymnasium
import pytest

from flowherd.rl.registration import ENV_ID, ENV_ID_WITH_MODULE

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = str(ROOT / "scenarios" / "tiny.yaml")


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_the_entry_point_names_a_function_that_registers_the_environment():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["gymnasium.envs"]
    assert eps == {"flowherd": "flowherd.rl.registration:register_envs"}
    module, func = eps["flowherd"].split(":")
    # called twice (Gymnasium 0.2x calls it on import, flowherd.rl on its own import): one entry
    out = _fresh(f"import gymnasium, importlib; from gymnasium.envs.registration import registry\n"
                 f"register = getattr(importlib.import_module({module!r}), {func!r})\n"
                 "register(); register()\n"
                 f"assert sum(k == {ENV_ID!r} for k in registry) == 1\n"
                 f"env = gymnasium.make({ENV_ID!r}, scenario={SCENARIO!r}); print(env.spec.id)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [ENV_ID]


def test_the_id_with_its_module_needs_no_import_of_flowherd():
    out = _fresh("import gymnasium\n"
                 f"env = gymnasium.make({ENV_ID_WITH_MODULE!r}, scenario={SCENARIO!r})\n"
                 "obs, _ = env.reset(seed=1); print(env.spec.id, obs.shape)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[0] == ENV_ID


def _installed_entry_point() -> bool:
    return any(ep.value == "flowherd.rl.registration:register_envs"
               for ep in importlib.metadata.entry_points(group="gymnasium.envs"))


@pytest.mark.skipif(int(gymnasium.__version__.split(".")[0]) >= 1,
                    reason="Gymnasium 1.0 dropped its plugin loading (entry points of gymnasium.envs): "
                           "there the id takes its module, flowherd.rl:flowherd/Buffering-v0")
def test_the_plain_id_works_after_import_gymnasium_alone():
    if not _installed_entry_point():
        pytest.skip("the installed flowherd predates its entry point: pip install -e . again")
    out = _fresh(f"import gymnasium; env = gymnasium.make({ENV_ID!r}, scenario={SCENARIO!r}); "
                 "print(env.spec.id)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [ENV_ID]
