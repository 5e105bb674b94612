"""Cost estimates before a run, a sweep or a collective (flowherd.experiments.cost) and the limits
they are held to (flowherd.experiments.budget): refused in one line naming the figure, the limit
and the field that drives it; the limit is the address-space limit under ``ulimit -v``, and
``--max-memory`` replaces it, in this process and the ones it starts."""

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from flowherd.cli import main
from flowherd.collectives.ops import Op
from flowherd.errors import ConfigError
from flowherd.experiments import budget, cost
from flowherd.experiments.runner import run_scenario
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.experiments.sweep import set_field, sweep_from_mapping
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.units import GiB

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
SRC = Path(__file__).resolve().parents[2] / "src"
TINY = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0


@pytest.fixture(autouse=True)
def _no_limits():
    """No --max-memory / --max-events before or after (set_limits writes the environment)."""
    saved = {k: os.environ.pop(k, None) for k in (budget.MAX_MEMORY_ENV, budget.MAX_EVENTS_ENV)}
    yield
    for k, v in saved.items():
        os.environ.pop(k, None)
        if v is not None:
            os.environ[k] = v


def _scen(**paths):
    out = copy.deepcopy(TINY)
    for path, value in paths.items():
        out = set_field(out, path, value)
    return out


def test_the_address_space_limit_is_the_memory_limit_under_ulimit_v():
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30)); "
            "from flowherd.experiments.budget import memory_limit; m = memory_limit(); "
            "print(m.limit_bytes, '|', m.source)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120).stdout.strip()
    value, source = out.split(" | ")
    # what the process does not map yet of its 3 GiB: less than 3 GiB, more than 2 (it maps little)
    assert 2 * GiB < int(value) < 3 * GiB and "ulimit -v" in source, out


def test_max_memory_replaces_the_machine_figure_and_is_checked(monkeypatch):
    budget.set_limits("1GiB", 5000)
    assert budget.memory_limit().limit_bytes == GiB and "--max-memory" in budget.memory_limit().source
    assert budget.events_limit() == 5000
    assert os.environ[budget.MAX_MEMORY_ENV] == str(GiB)  # what a Ray worker or the demo's pool inherits
    with pytest.raises(ConfigError, match=r"\(--max-memory\)"):
        budget.set_limits("-1GiB", None)
    with pytest.raises(ConfigError, match=r"\(--max-events\)"):
        budget.set_limits(None, 0)


def test_a_global_batch_of_1e15_is_refused_before_anything_is_built():
    sc = scenario_from_mapping(_scen(**{"workload.jobs[0].global_batch": 10**15}))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        run_scenario(sc)
    msg = str(info.value)
    # 1e15 / (micro_batch 1 x dp 2) = 5e14 micro-batches x 48 KiB
    assert "500,000,000,000,000 micro-batches per iteration" in msg, msg
    assert msg.endswith("(workload.jobs[0].global_batch)") and "--max-memory overrides" in msg
    assert time.perf_counter() - t0 < 5


def test_a_billion_second_horizon_of_background_is_refused_naming_both_fields():
    sc = scenario_from_mapping(_scen(**{"simulation.horizon": "1e9s", "workload.background.load": 0.1,
                                        "workload.background.max_flows_per_s": 500}))
    est = cost.run_cost(sc)
    bg = next(p for p in est.parts if p.what.startswith("background"))
    assert bg.memory_bytes == pytest.approx(500 * 1e9 * cost.BYTES_PER_BACKGROUND_FLOW)  # capped at 500/s
    with pytest.raises(ConfigError, match=r"5e\+11 flows .*\(simulation\.horizon, "
                                          r"workload\.background\.max_flows_per_s\)$"):
        run_scenario(sc)


def test_the_background_estimate_counts_the_flows_the_run_simulates():
    """The estimate's flow count against the flows a run draws (tiny, load 0.3, capped at 500/s)."""
    sc = scenario_from_mapping(_scen(**{"simulation.horizon": "20s", "workload.background.load": 0.3,
                                        "workload.background.max_flows_per_s": 500}))
    est = next(p for p in cost.run_cost(sc).parts if p.what.startswith("background"))
    flows = est.memory_bytes / cost.BYTES_PER_BACKGROUND_FLOW
    assert flows == pytest.approx(500 * 20)
    drawn = run_scenario(sc, solo=False).summary["background"]["flows"]
    assert drawn == pytest.approx(flows, rel=0.05)  # a Poisson draw of mean 10,000: +- 1% sd


def test_events_over_the_limit_are_refused_with_max_events(monkeypatch):
    monkeypatch.setenv(budget.MAX_EVENTS_ENV, "1000")
    sc = scenario_from_mapping(_scen(**{"simulation.horizon": "20s", "workload.background.load": 0.3}))
    with pytest.raises(ConfigError, match=r"simulator events.*at most 1e\+03 \(--max-events raises it\)"):
        run_scenario(sc)


def _fabric():
    return leaf_spine(servers=1024, gpus_per_server=8, leaves=64, spines=32)


@pytest.mark.parametrize(("op", "size"), [(Op.ALLREDUCE, 2**30), (Op.ALLGATHER, 2**20), (Op.ALLTOALL, 2**30)])
def test_the_collective_estimate_is_close_to_the_schedule_it_extrapolates(op, size):
    from flowherd.cluster.collective import choose, nccl_channels
    from flowherd.collectives.algorithms import build_schedule
    from flowherd.collectives.nccl import LATENCY_MODELS
    from flowherd.collectives.ops import Collective

    fab = _fabric()
    est = cost.collective_cost(fab, op, tuple(range(1024)), size)
    coll = Collective(op=op, gpus=tuple(range(1024)), size_bytes=size)
    algo, proto = choose(fab, coll, "auto", None)
    real = build_schedule(coll, algo, fabric=fab, protocol=proto, channels=nccl_channels(fab, coll),
                          latency_model=LATENCY_MODELS["nccl"]).num_flows
    flows = est.events / cost.EVENTS_PER_FLOW
    assert 0.6 * real <= flows <= 2.0 * real, (algo, real, flows)
    assert cost.collective_cost(fab, op, tuple(range(256)), size) is None  # small: not estimated


def test_channels_beyond_nccls_maxchannels_are_refused(capsys):
    from flowherd.cli.collective_cmd import MAX_CHANNELS
    from flowherd.collectives.topology import MAXCHANNELS

    assert MAX_CHANNELS == MAXCHANNELS == 64
    assert main(["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "8", "--fabric",
                 "dgx-superpod-h100-1su", "--channels", str(10**9)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1..64" in err and "1,000,000,000 (--channels)" in err, err


def test_a_collective_over_a_million_gpus_is_refused_before_its_schedule(tmp_path, capsys):
    path = tmp_path / "f.yaml"
    path.write_text(yaml.safe_dump({"kind": "leaf-spine", "servers": 125_000, "gpus_per_server": 8,
                                    "leaves": 1000, "spines": 64}))
    t0 = time.perf_counter()
    assert main(["collective", "--op", "allgather", "--size", "1GiB", "--gpus", "1000000",
                 "--fabric", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1,000,000 GPUs" in err and err.rstrip().endswith("(--gpus)"), err
    assert time.perf_counter() - t0 < 60  # it ran past 60 s silently (the selector alone: 85 s)


def test_a_sweep_grid_is_refused_before_its_points_are_made(tmp_path):
    grid = {"name": "grid", "base": _scen(), "seeds": 1,
            "axes": {"workload.jobs[0].iterations": list(range(1, 1001)),
                     "workload.jobs[1].iterations": list(range(1, 1001))}}
    budget.set_limits("1GiB", None)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping(grid)
    msg = str(info.value)
    assert "1,000,000 points" in msg and msg.endswith("(axes)") and "--max-memory is 1 GiB" in msg, msg
    assert time.perf_counter() - t0 < 5


def test_sweep_points_share_the_base_and_equal_full_copies(monkeypatch):
    from flowherd.experiments import sweep_file as sweep_mod

    base = _scen()
    before = json.dumps(base, sort_keys=True)
    calls = []
    monkeypatch.setattr(sweep_mod, "PROGRESS_EVERY_S", 0.0)
    spec = sweep_from_mapping({"name": "s", "base": base, "seeds": 1,
                               "axes": {"workload.jobs[0].iterations": [1, 2, 3],
                                        "fabric.oversubscription": [1, 2]}},
                              progress=lambda done, total: calls.append((done, total)))
    assert json.dumps(base, sort_keys=True) == before  # the base is never changed in place
    for p in spec.points:
        full = base
        for path, value in p.params.items():
            full = set_field(full, path, value)
        assert p.scenario == full
    assert calls and all(total == 6 for _, total in calls)
    # a bad value of an axis is still named, checked once per value
    with pytest.raises(ConfigError, match=r"'lots'.*workload\.background\.load.*\(axes\)"):
        sweep_from_mapping({"name": "s", "base": base, "seeds": 1,
                            "axes": {"workload.background.load": [0.1, "lots"], "seed": [1, 2]}})


def test_ray_refuses_an_address_space_it_cannot_start_in():
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30)); "
            "from flowherd.experiments.ray_local import check_address_space; check_address_space()")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120)
    assert res.returncode == 1 and "limited to 6.0 GiB (ulimit -v)" in res.stderr and "--inline" in res.stderr


def test_the_cli_restores_the_limits_after_a_command(tmp_path):
    from flowherd.cli import _LIMIT_ENV

    assert _LIMIT_ENV == (budget.MAX_MEMORY_ENV, budget.MAX_EVENTS_ENV)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scen(**{"workload.jobs[0].global_batch": 10**15})))
    assert main(["simulate", str(path), "--max-memory", "2GiB"]) == 2
    assert budget.MAX_MEMORY_ENV not in os.environ
