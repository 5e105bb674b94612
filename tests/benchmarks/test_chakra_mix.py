"""The mixed scenario of benchmarks/chakra_mix.py: its traces are written the same every time and
make three Chakra jobs of three tenants beside two native jobs on 256 GPUs."""

import hashlib
import importlib.util
import sys
from pathlib import Path

from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
from flowherd.workload import ChakraJob, TrainingJob

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # its `import record`
_SPEC = importlib.util.spec_from_file_location("chakra_mix", _BENCH / "chakra_mix.py")
mix = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mix)


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def test_the_traces_are_reproducible_and_the_scenario_mixes_tenants(tmp_path):
    mix.write_traces(tmp_path / "a")
    mix.write_traces(tmp_path / "b")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    src = read_scenario_mapping(mix.SCENARIO)
    for j in src["workload"]["jobs"]:
        if "chakra" in j:
            j["chakra"] = str(tmp_path / "a" / Path(j["chakra"]).name)
    sc = scenario_from_mapping(src)
    chakra = [j for j in sc.jobs if isinstance(j, ChakraJob)]
    native = [j for j in sc.jobs if isinstance(j, TrainingJob)]
    assert len(chakra) == 3 and len(native) == 2 and sc.fabric.num_gpus == 256
    assert len({j.tenant for j in sc.jobs}) == 5
    assert sorted(j.world_size for j in chakra) == [32, 32, 32]
    ops = {c.op.value for j in chakra for t in j.graph.tasks for c in t.collectives}
    assert {"allreduce", "alltoall", "sendrecv"} <= ops  # DP, expert-parallel and pipeline traffic
