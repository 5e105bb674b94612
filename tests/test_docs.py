"""The documentation a newcomer reads: the generated schema page is current, the README's Python
example runs and prints what the README says, and its links point inside the repository."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("generate_schema", ROOT / "docs" / "generate_schema.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_scenario_schema_page_is_what_the_generator_writes_now():
    text, missing = _generator().render()
    assert (ROOT / "docs" / "scenario-schema.md").read_text() == text, \
        "docs/scenario-schema.md is out of date: run `make docs`"
    assert missing == [], f"keys without a meaning in docs/generate_schema.py: {missing}"


def test_the_schema_page_lists_every_key_the_models_accept():
    from flowherd.experiments.scenario import ScenarioModel
    from flowherd.fabric.spec import FabricSpec

    page = (ROOT / "docs" / "scenario-schema.md").read_text()
    for name in ScenarioModel.model_fields:
        assert f"| `{name}` |" in page
    for name in FabricSpec.model_fields:
        assert f"| `{name}` |" in page
    assert "| `workload.background.load` |" in page and "| `simulation.horizon` |" in page


def _readme_python_blocks():
    readme = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", readme, re.S)


def test_the_readme_python_example_runs_and_prints_what_it_says():
    blocks = _readme_python_blocks()
    assert blocks, "the README has a Python API example"
    code = blocks[0]
    expected = [ln.split("# prints ", 1)[1].strip() for ln in code.splitlines() if "# prints " in ln]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert expected and len(lines) == len(expected)
    for got, want in zip(lines, expected, strict=True):
        assert got.strip() == want, (got, want)


def test_readme_links_point_inside_the_repository():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if target.startswith(("http://", "https://")):
            continue
        assert not target.startswith(".."), target
        assert (ROOT / target).exists(), f"README links to {target}, which is not in the repository"
    for path in ("LICENSE", "CITATION.cff", "docs/design.md", "docs/scenario-schema.md", "docs/demo.png"):
        assert path in readme and (ROOT / path).is_file(), path


def test_the_readme_scenario_yaml_is_a_valid_scenario():
    import yaml

    from flowherd.experiments.scenario import scenario_from_mapping

    readme = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "workload:" in b]
    assert blocks
    for b in blocks:
        sc = scenario_from_mapping(yaml.safe_load(b))
        assert sc.fabric.num_gpus == 32 and [j.name for j in sc.jobs] == ["a", "b"]
