"""A small result store shared by the report tests: two placement methods x two loads, one seed,
on the tiny mixed workload; one job and one tenant carry HTML and mathtext in their names, and
one point fails."""

from pathlib import Path

import pytest
import yaml

NASTY_JOB = '<img src=x onerror="window.__pwned=1">'
NASTY_TENANT = "lab-$x$ </script>"


@pytest.fixture(scope="session")
def nasty_names() -> tuple[str, str]:
    return NASTY_JOB, NASTY_TENANT


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory) -> Path:
    pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")
    from flowherd.experiments.sweep import run_sweep, sweep_from_mapping

    base = yaml.safe_load((Path(__file__).resolve().parents[2] / "scenarios" / "tiny_mixed.yaml").read_text())
    base["simulation"]["horizon"] = "6s"
    base["workload"]["jobs"][0]["name"] = NASTY_JOB
    base["workload"]["jobs"][2]["tenant"] = NASTY_TENANT
    sweep = sweep_from_mapping({"name": "report-test", "base": base, "seeds": 1, "points": [
        {"placement.method": m, "workload.background.load": x}
        for m in ("first-fit", "packed") for x in (0.0, 0.4)] + [{"placement.method": "no-such-placer"}]})
    out = tmp_path_factory.mktemp("store")
    outcome = run_sweep(sweep, out, backend="inline")
    assert (outcome.ok, outcome.failed) == (4, 1)
    return out
