"""The docs/ pages a newcomer reads: every Python example runs and prints what its ``# prints``
comments say, and the architecture page names modules that exist, in the layers
tests/test_layers.py enforces."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = ["aot.md", "add-a-controller.md", "add-a-planner-method.md", "add-a-fabric-generator.md",
         "add-a-network-model.md"]


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)


def _expected(code: str) -> list[str]:
    return [ln.split("# prints ", 1)[1].strip() for ln in code.splitlines() if "# prints " in ln]


@pytest.mark.parametrize("page", PAGES)
def test_every_example_of_the_page_runs_and_prints_what_it_says(page):
    blocks = _blocks(page)
    assert blocks, f"docs/{page} has no Python example"
    for code in blocks:
        want = _expected(code)
        assert want, f"an example of docs/{page} says nothing it prints"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                             cwd=ROOT)
        assert out.returncode == 0, out.stderr[-3000:]
        lines = [ln.strip() for ln in out.stdout.splitlines()]
        it = iter(lines)  # in order, other lines between them allowed
        missing = [w for w in want if not any(ln == w for ln in it)]
        assert not missing, f"docs/{page} promises {missing}; it printed {lines}"


def test_expected_output_is_read_from_prints_comments():
    assert _expected("print(1)  # prints 1\nx = 2\nprint(x, x)  # prints 2 2\n") == ["1", "2 2"]


def test_the_architecture_page_names_modules_that_exist():
    text = (DOCS / "architecture.md").read_text()
    names = set(re.findall(r"`((?:engine|cluster)(?:\.[a-z_]+)+)", text))
    assert len(names) > 20
    bad = []
    for name in sorted(names):
        parts = f"flowherd.{name}".split(".")
        for cut in range(len(parts), 1, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                bad.append(name)
            break
        else:
            bad.append(name)
    assert not bad, f"docs/architecture.md names what does not exist: {bad}"


def test_the_architecture_diagram_has_the_layers_of_the_layer_test():
    text = (DOCS / "architecture.md").read_text()
    diagram = text.split("```", 2)[1]
    drawn = {}
    for ln in diagram.splitlines():
        m = re.match(r"\s*(\d+)\s+([a-z, ]+?)\s{2,}", ln + "  ")
        if m:
            for name in m.group(2).split(","):
                drawn[name.strip()] = int(m.group(1))
    assert drawn == LAYERS
