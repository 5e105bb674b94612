"""The documentation a newcomer reads: the generated schema page is current, the README's Python
examples run and print what the README says, every relative link of the README and docs/
resolves inside the repository, and the pages tell no project history."""

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


def test_the_readme_python_examples_run_and_print_what_they_say():
    blocks = [b for b in _readme_python_blocks() if "# prints " in b]
    assert len(blocks) >= 2, "the README has a Python API example and a Gymnasium one"
    for code in blocks:
        expected = [ln.split("# prints ", 1)[1].strip() for ln in code.splitlines() if "# prints " in ln]
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                             cwd=ROOT)
        assert out.returncode == 0, out.stderr[-3000:]
        lines = out.stdout.strip().splitlines()
        assert len(lines) == len(expected), (lines, expected)
        for got, want in zip(lines, expected, strict=True):
            assert got.strip() == want, (got, want)


def _pages():
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_of_the_readme_and_docs_resolves_inside_the_repository():
    bad = []
    for page in _pages():
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # links, not code
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):  # an anchor, a URL
                continue
            resolved = (page.parent / path).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                bad.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not bad, "links that do not resolve inside the repository: " + "; ".join(bad)
    readme = (ROOT / "README.md").read_text()
    for path in ("LICENSE", "CITATION.cff", "docs/design.md", "docs/scenario-schema.md",
                 "docs/results-schema.md", "docs/demo.png", "CHANGELOG.md"):
        assert f"]({path})" in readme and (ROOT / path).is_file(), path


#: Words that tell the project's history rather than what is: ordinal sessions or rounds of work
#: (not an algorithm's or a protocol's round: "round trip", "the last round" of a heuristic), who
#: did what, issue numbers. An external project's issue is cited as "nccl #1221", never "issue N".
HISTORY = re.compile(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth) "
                     r"(sess|round(?![- ]?trips?\b))|\b(last|previous|next) session|\bprevious round\b"
                     r"|\bthe lead\b|\bissues? ?#?[0-9]+|\bsession\b", re.I)
#: Uses of the word that are not history: pytest's fixture scope.
NOT_HISTORY = re.compile(r"""scope=["']session["']""")
#: Text files of the repository's own words; benchmarks/results/README.md is generated from the
#: result files (benchmarks/summarize.py), which are checked here.
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".json"}
SKIP_DIRS = {".git", ".venv", "build", "dist", "node_modules", "__pycache__", ".ruff_cache"}
GENERATED = {"benchmarks/results/README.md"}
THIS_FILE = Path(__file__).resolve()  # it names what it looks for
#: Hits not yet rewritten, file -> the words; each must still be there (drop the entry once it is not).
NOT_YET_REWRITTEN: dict[str, list[str]] = {}


def _history(text: str) -> list[str]:
    return [m.group(0) for m in HISTORY.finditer(NOT_HISTORY.sub("", text))]


def _repository_texts():
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if (path.suffix in SUFFIXES and path.is_file() and rel.as_posix() not in GENERATED
                and path.resolve() != THIS_FILE
                and not SKIP_DIRS & set(rel.parts) and not any(p.endswith(".egg-info") for p in rel.parts)):
            yield rel, path


def test_the_history_pattern_tells_history_from_technical_words():
    # the phrases are put together here so that this file does not say them itself
    ordinal, sess, iss, lead = "seventh", "sess" + "ion", "is" + "sue", "the " + "lead"
    assert _history(f"measured in the {ordinal} {sess}") == [f"{ordinal} sess"]
    assert _history(f"as {iss} 17 asks; see Issue #4") == [f"{iss} 17", "Issue #4"]
    assert _history(f"{lead} measured it") and _history("the previous " + "round gave 0.63")
    assert _history("its second round trip") == [] and _history("a microsecond rounding") == []
    assert _history('@pytest.fixture(scope="session")') == [] and _history("nccl #1221") == []


def test_the_readme_and_docs_tell_no_project_history():
    found = [f"{page.relative_to(ROOT)}: {hit}" for page in _pages() for hit in _history(page.read_text())]
    assert not found, found


def test_the_code_tests_benchmarks_and_results_tell_no_project_history():
    found = []
    for rel, path in _repository_texts():
        try:
            text = path.read_text()[:400_000]
        except UnicodeDecodeError:
            continue
        hits = _history(text)
        pending = NOT_YET_REWRITTEN.get(rel.as_posix(), [])
        assert all(h in hits for h in pending), f"{rel} no longer says {pending}: drop its entry"
        found += [f"{rel}: {hit}" for hit in hits if hit not in pending]
    assert not found, found


def test_the_readme_scenario_yaml_is_a_valid_scenario():
    import yaml

    from flowherd.experiments.scenario import scenario_from_mapping

    readme = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "workload:" in b]
    assert blocks
    for b in blocks:
        sc = scenario_from_mapping(yaml.safe_load(b))
        assert sc.fabric.num_gpus == 32 and [j.name for j in sc.jobs] == ["a", "b"]
