"""What a newcomer runs first: `--help`, `--version`, the catalogs, and a minimal install's hints.

`flowherd --help` must not import a command module (each pulls numpy, the simulator or the
planner); a missing optional dependency gets one line naming the extra (pyproject's
``[project.optional-dependencies]``).
"""

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import flowherd
from flowherd.cli import app, main
from flowherd.cli.commands import COMMANDS, EXTRAS, missing_extra_hint

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_help_lists_every_command_without_importing_any_command_module():
    code = ("import sys; from flowherd.cli import main; code = main(['--help']); "
            "print('MODULES', sorted(m for m in sys.modules if m.startswith('flowherd.cli.') or m in "
            "('numpy', 'numba', 'scipy', 'pydantic', 'rich'))); sys.exit(code)")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    help_text, modules = out.stdout.split("MODULES")
    # the command table and typer's light flag coercion (`flowherd.cli.params`), no command
    assert modules.strip() == "['flowherd.cli.commands', 'flowherd.cli.params']"
    for name, entry in COMMANDS.items():
        assert re.search(rf"^\s+{name}\s", help_text, re.M), name
        assert entry.summary.split()[0] in help_text


def test_each_table_entry_names_the_module_that_registers_it_and_its_docstring():
    for name, entry in COMMANDS.items():
        importlib.import_module(entry.module)
        infos = {(i.name or i.callback.__name__): i for i in app.registered_commands}
        assert name in infos, f"{entry.module} does not register {name!r}"
        doc = " ".join(inspect.getdoc(infos[name].callback).split())
        # the listed line is the start of the command's own help, so the two cannot drift apart
        assert doc.startswith(entry.summary.rstrip(".")), (name, entry.summary, doc[:120])


def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"flowherd {flowherd.__version__}"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == flowherd.__version__


def test_fabric_list_shows_every_preset_on_one_line(capsys):
    from flowherd.fabric.presets import PRESETS

    assert main(["fabric", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in PRESETS:
        mine = [ln for ln in lines if ln.split()[:1] == [name]]
        assert len(mine) == 1 and len(mine[0].split()) > 3, name
    assert main(["fabric", "--list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["name"] for r in rows) == sorted(PRESETS)
    assert all(r["description"] and "`sus`" not in r["description"] for r in rows)


def test_models_and_gpus_list_the_catalogs_with_their_figures(capsys):
    from flowherd.workload import GPUS, MODELS

    assert main(["models", "--json"]) == 0
    models = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(models) == set(MODELS)
    # Mixtral of Experts, Table 1: 46.7B parameters in total, 12.9B active per token
    assert models["mixtral-8x7b"]["params"] / 1e9 == pytest.approx(46.7, abs=0.1)
    assert models["mixtral-8x7b"]["active_params"] / 1e9 == pytest.approx(12.9, abs=0.1)
    assert main(["gpus", "--json"]) == 0
    gpus = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(gpus) == set(GPUS)
    assert gpus["h100"]["peak_bf16_flops"] == pytest.approx(989e12)
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^\s+llama3-70b\s+70\.6 B\s+70\.6 B\s+80\s", text, re.M)
    assert main(["gpus"]) == 0
    assert re.search(r"^\s+h100\s+989 TFLOP/s\s+80 GB\s+3\.35 TB/s\s+450 GB/s\s+400 Gb/s",
                     capsys.readouterr().out, re.M)


def test_the_hint_names_the_extras_pyproject_declares():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        declared = {re.split(r"[<>=\[ ]", req)[0].replace("-", "_") for req in extras[extra]}
        # an extra may pull another extra (flowherd[store]); the modules it names must be installed by it
        for dep in [d for d in extras[extra] if d.startswith("flowherd[")]:
            for sub in dep[len("flowherd["):-1].split(","):
                declared |= {re.split(r"[<>=\[ ]", r)[0].replace("-", "_") for r in extras[sub]}
        assert set(modules) <= declared, (extra, modules, declared)
    for entry in COMMANDS.values():
        assert set(entry.extras) <= set(extras)
    assert missing_extra_hint("ray.tune", "sweep") == \
        "flowherd sweep needs ray (not installed): pip install 'flowherd[sweep]'"


# The heavy optional modules hidden, as on `pip install -e .` without extras.
_HIDE = ("import sys, importlib.abc\n"
         "class Hide(importlib.abc.MetaPathFinder):\n"
         "    def find_spec(self, name, path=None, target=None):\n"
         "        if name.split('.')[0] in {'highspy', 'duckdb', 'ray', 'matplotlib', 'plotly', 'torch',\n"
         "                                  'gymnasium', 'stable_baselines3'}:\n"
         "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
         "sys.meta_path.insert(0, Hide())\n"
         "from flowherd.cli import main\n")


@pytest.mark.parametrize(("argv", "hint"), [
    (["plan", "default", "--method", "packed"], "flowherd plan needs highspy (not installed): "
                                                "pip install 'flowherd[plan]'"),
    (["sweep", "scenarios/sweep_tiny.yaml", "--out", "{tmp}/sw"], "flowherd sweep needs "),
    (["report", "{tmp}/nothing"], "flowherd report needs "),
    # the demo runs its simulations in its own processes: no Ray, so no sweep extra
    (["demo", "--out", "{tmp}/demo"], "flowherd demo needs highspy (not installed): "
                                      "pip install 'flowherd[plan,report]'"),
    (["simulate", "scenarios/tiny.yaml", "--out", "{tmp}/sim"], "flowherd simulate needs duckdb (not "
                                                                "installed): pip install 'flowherd[store]'"),
])
def test_a_minimal_install_says_which_extra_to_install(argv, hint, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    out = subprocess.run([sys.executable, "-c", _HIDE + f"sys.exit(main({args!r}))"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    # one error line (a command may have said what it starts before it needs the extra)
    assert len(errors) == 1 and errors[0].startswith("error: " + hint), out.stderr
    assert re.search(r"pip install 'flowherd\[[a-z,]+\]'$", errors[0])
    assert "Traceback" not in out.stderr


def test_a_missing_module_that_is_not_optional_is_not_disguised():
    code = ("import sys\nsys.modules['flowherd.cli.catalog_cmd'] = None\n"
            "from flowherd.cli import main\nmain(['models'])")
    out = _run(code)
    assert out.returncode == 1 and "Traceback" in out.stderr and "pip install" not in out.stderr


def test_calling_app_directly_still_runs_a_command_not_yet_imported(capsys):
    # a caller of the typer app that bypasses main() gets the real command, not its placeholder
    code = ("import sys\nfrom flowherd.cli import app\n"
            "try:\n    app(['gpus', '--json'], standalone_mode=True)\nexcept SystemExit as e:\n"
            "    sys.exit(e.code)\n")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert {r["name"] for r in json.loads(out.stdout)} >= {"h100", "a100"}


def test_the_cli_package_imports_no_command_module_at_import_time():
    tree = ast.parse((ROOT / "src/flowherd/cli/__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    names = {getattr(n, "module", None) or n.names[0].name for n in top}
    helpers = ("flowherd.cli.commands", "flowherd.cli.params")  # the table, typer's light coercion
    assert not {n for n in names if n and n.startswith("flowherd.cli.") and n not in helpers}
    assert not {n for n in names if n in {e.module for e in COMMANDS.values()}}


def test_a_planned_run_is_named_by_its_plan_not_by_the_scenarios_placer(tmp_path, capsys):
    pytest.importorskip("duckdb", reason="the store extra is not installed")
    from flowherd.experiments.store import ResultStore
    from flowherd.report.data import load_report_data

    tiny = str(ROOT / "scenarios" / "tiny.yaml")
    plan = tmp_path / "plan.json"
    assert main(["plan", tiny, "--method", "topology", "--out", str(plan)]) == 0
    out = tmp_path / "run"
    assert main(["simulate", tiny, "--plan", str(plan), "--controller", "varys", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    # a planned run with a controller is labelled (and stored) with its plan's placement
    assert "(topology placement" in text and "first-fit placement" not in text
    with ResultStore(out, read_only=True) as st:
        (run,) = st.runs()
    assert run["placement"] == "topology" and run["controller"] == "varys"
    assert load_report_data(out).methods == ["topology + ECMP + Varys"]


def test_fabric_help_names_the_presets(capsys):
    from flowherd.fabric.presets import PRESETS

    assert main(["fabric", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--list" in text and all(name in text for name in PRESETS)


def test_python_dash_m_flowherd_is_the_command_line():
    out = subprocess.run([sys.executable, "-m", "flowherd", "simulate", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--controller" in out.stdout, out.stderr[-500:]
