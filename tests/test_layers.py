"""Imports point one way (STYLE.md "Layout shows the architecture", docs/architecture.md).

A subpackage may import only from its own layer or lower ones. The order is STYLE.md's, with
`collectives` below `workload` (op graphs are made of `Collective` values, and `collectives`
needs nothing from `workload`), and the simulator in two layers: `engine` (events, flows,
rates, the congestion models of `engine.network`), which knows nothing of jobs, and `cluster`
on top (collectives and op graphs as coflows, jobs, background, fast-forward, the control
interface).
"""

import ast
from pathlib import Path

LAYERS = {
    "units": 0, "errors": 0, "registry": 0,
    "fabric": 1,
    "collectives": 2,
    "workload": 3, "routing": 3,
    "engine": 4,
    "cluster": 5,
    "planning": 6,
    "control": 7,
    "experiments": 8, "rl": 8,
    "report": 9,
    "cli": 10,
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


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _module_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of flowherd that ``path`` imports, at module level, inside functions or under
    ``if TYPE_CHECKING:`` (a reader follows a type's import as much as any other: two modules
    that name each other's classes are one concern in two files), where ``from pkg import
    name`` counts as importing ``pkg.name`` when that is a module."""
    out = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flowherd"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("flowherd"))
    return {m for m in out if m in known}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or with a self-loop."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(graph)
    g.add_edges_from((v, w) for v, ws in graph.items() for w in ws)
    return sorted(sorted(c) for c in nx.strongly_connected_components(g)
                  if len(c) > 1 or any(v in graph[v] for v in c))


def test_no_import_circles_between_modules():
    # A package's __init__ re-exports its modules, so edges into a package are not followed
    # back out of it: only module -> module edges count (an __init__ is a module too, but the
    # edge from a submodule up to its own package's __init__ is the re-export, not a circle).
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    known = set(paths)
    packages = {m for m, p in paths.items() if p.name == "__init__.py"}
    graph = {}
    for mod, path in paths.items():
        deps = _module_imports(path, known)
        graph[mod] = {d for d in deps if d not in packages and d != mod}
    circles = _cycles(graph)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_circle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_typing_only_imports_count_as_edges(tmp_path):
    a = tmp_path / "a.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from flowherd.b import B\n")
    assert _module_imports(a, {"flowherd.b"}) == {"flowherd.b"}


def test_the_engine_knows_nothing_of_jobs_or_collectives():
    # flowherd.engine moves flows and coflows; what they stand for (a collective's steps, a
    # job's iteration) is the cluster package's business (docs/architecture.md)
    bad = [f"{p.relative_to(SRC)} imports flowherd.{t}" for p in (SRC / "engine").rglob("*.py")
           for t in _imports(p) if t in ("workload", "collectives", "cluster")]
    assert not bad, "; ".join(bad)


def test_the_network_models_sit_below_the_engine_core():
    # engine.network is consulted by the event loop and the engine: it may use the kernel
    # machinery and the engine's state protocol, never the modules that call it
    callers = {"core", "event_loop", "coflow_batch", "hold", "bottleneck", "step_kernels"}
    bad = []
    for p in (SRC / "engine" / "network").rglob("*.py"):
        for m in _module_imports(p, set(map(_module_name, SRC.rglob("*.py")))):
            if m.startswith("flowherd.engine.") and m.split(".")[2] in callers:
                bad.append(f"{p.relative_to(SRC)} imports {m}")
    assert not bad, "; ".join(bad)
