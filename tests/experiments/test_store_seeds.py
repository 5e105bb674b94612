"""Seeds at the edges of the store's 64-bit integers: stored exactly, or refused in one line."""

import pytest

duckdb = pytest.importorskip("duckdb", reason="the sweep extra (duckdb) is not installed")

from flowherd.errors import ConfigError  # noqa: E402
from flowherd.experiments.runs import MAX_SEED, Point, Run, canonical_hash, check_seed  # noqa: E402
from flowherd.experiments.store import ResultStore  # noqa: E402
from flowherd.experiments.sweep import sweep_from_mapping  # noqa: E402

SCEN = {"name": "s", "fabric": {"kind": "leaf-spine", "servers": 2, "leaves": 1, "spines": 1}}
FAILED = {"status": "failed", "error": "boom", "wall_s": 0.1}


def _run(seed):
    return Run(point=Point(params={}, scenario=SCEN, hash=canonical_hash(SCEN)), seed=seed)


def test_the_largest_seed_is_stored_and_read_back_exactly(tmp_path):
    with ResultStore(tmp_path) as st:
        st.write_run(sweep="s", run=_run(MAX_SEED), record=FAILED)
        (row,) = st.runs()
        assert row["seed"] == 2**63 - 1 and row["run_id"].endswith(f"-s{2**63 - 1}")


@pytest.mark.parametrize("seed", [2**63, 10**20, -1])
def test_a_seed_outside_int64_is_refused_before_the_store_is_touched(tmp_path, seed):
    with ResultStore(tmp_path) as st:
        with pytest.raises(ConfigError, match=r"seed must be an integer in 0\.\.2\*\*63-1"):
            st.write_run(sweep="s", run=_run(seed), record=FAILED)
        assert st.run_status() == {}
    with pytest.raises(ConfigError, match=r"\(seeds\)"):
        sweep_from_mapping({"base": SCEN, "seeds": [1, seed]})


def test_check_seed_takes_only_integers():
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == MAX_SEED
    for bad in (True, 1.0, "3", None):
        with pytest.raises(ConfigError, match=r"\(seed\)"):
            check_seed(bad)
