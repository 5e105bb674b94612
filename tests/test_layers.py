"""Imports point one way (STYLE.md "Layout shows the architecture").

A subpackage may import only from its own layer or lower ones. The order is STYLE.md's, with
`collectives` below `workload`: op graphs are made of `Collective` values, and
`collectives` needs nothing from `workload`.
"""

import ast
from pathlib import Path

LAYERS = {
    "units": 0, "errors": 0, "registry": 0,
    "fabric": 1,
    "collectives": 2,
    "workload": 3, "routing": 3,
    "sim": 4,
    "planning": 5,
    "control": 6,
    "experiments": 7, "rl": 7,
    "report": 8,
    "cli": 9,
}
SRC = Path(__file__).resolve().parents[1] / "src" / "flowherd"


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flowherd."):
            yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("flowherd."):
                    yield alias.name.split(".")[1]


def test_imports_point_down_the_layers():
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        own = rel.parts[0].removesuffix(".py")
        if own not in LAYERS:
            continue
        for target in _imports(path):
            if target in LAYERS and LAYERS[target] > LAYERS[own]:
                bad.append(f"{rel} imports flowherd.{target}")
    assert not bad, "upward imports: " + "; ".join(bad)


def test_importing_flowherd_reads_no_heavy_dependency():
    import subprocess
    import sys

    code = ("import sys, flowherd, flowherd.fabric, flowherd.units; "
            "heavy = {'ray', 'torch', 'stable_baselines3', 'matplotlib', 'plotly', 'duckdb'}; "
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_subpackages_import_each_other_in_no_circle():
    # Lazy imports inside functions count too: a circle between two packages of one layer
    # (experiments.runner -> rl -> experiments.runner, once) makes neither usable alone.
    import networkx as nx

    graph = nx.DiGraph()
    for path in SRC.rglob("*.py"):
        own = path.relative_to(SRC).parts[0].removesuffix(".py")
        graph.add_edges_from((own, target) for target in _imports(path)
                             if target != own and target in LAYERS and own in LAYERS)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"subpackage import circles: {cycles}"
