"""`ChakraJob`: a training job whose iteration is a directory of Chakra execution traces.

In a scenario::

    workload:
      jobs:
        - {name: rn50, tenant: vision, chakra: traces/resnet50_dp16, iterations: 20}
        - {name: gpt, tenant: lm, chakra: traces/gpt_tp4_pp2, tp: 4}
        - {name: rn50-big, chakra: traces/resnet50_dp16, ranks: 64}   # re-used at 64 ranks

The directory holds one ET per rank (`flowherd.workload.chakra_read`); the job needs one GPU per
rank, runs ``iterations`` times the traces' work (`flowherd.workload.chakra_graph`), and its rank
``i`` runs on the ``i``-th of its placed GPUs in (server, GPU id) order, whole groups of ``tp``
consecutive ranks on one server where the placement allows (`flowherd.workload.rank_to_gpu`).
``ranks`` re-uses a purely data-parallel trace at another width (an approximation, stated in
`flowherd.workload.chakra_graph.rescale`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError
from flowherd.workload.gpus import GpuSpec, get_gpu
from flowherd.workload.opgraph import OpGraph

__all__ = ["ChakraJob", "load_chakra_graph"]


@functools.lru_cache(maxsize=16)
def _load(directory: str, stamp: tuple[tuple[str, int, int], ...], ranks: int | None,
          field_name: str) -> OpGraph:
    from flowherd.workload.chakra_graph import rescale, trace_graph
    from flowherd.workload.chakra_read import read_trace_dir

    trace = read_trace_dir(directory, field_name=field_name)
    graph = trace_graph(trace, name=Path(directory).name)
    if ranks is not None:
        graph = rescale(graph, trace, ranks, field=field_name.rsplit(".", 1)[0] + ".ranks")
    return graph


def load_chakra_graph(directory: str | Path, *, ranks: int | None = None,
                      field_name: str = "chakra") -> OpGraph:
    """The op graph of a trace directory, read once per content (cached on the files' names,
    sizes and modification times)."""
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"no Chakra trace directory {str(directory)!r} ({field_name}); expected a "
                          "directory of <prefix>.<rank>.et files")
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                  for p in sorted(d.iterdir()) if p.is_file())
    return _load(str(d.resolve()), stamp, ranks, field_name)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChakraJob:
    """A training job replaying Chakra traces (module docstring).

    Attributes:
        path: The trace directory.
        name, tenant: Labels.
        gpu: GPU catalog name or `GpuSpec` (a label here: the traces fix the compute times).
        iterations: Times the traces' work runs, one after the other.
        ranks: Data-parallel width to re-use a purely data-parallel trace at; None: the traces'.
        tp: Consecutive ranks kept on one server where the placement allows.
        submit_s: Submission time, seconds.
    """

    path: str
    name: str = "job"
    tenant: str = "default"
    gpu: GpuSpec = "h100"  # type: ignore[assignment]
    iterations: int = 1
    ranks: int | None = None
    tp: int = 1
    submit_s: float = 0.0
    graph: OpGraph = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu", get_gpu(self.gpu))
        for f in ("iterations", "tp"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"job {self.name!r}: {f} must be a positive integer, got {v!r} ({f})")
        object.__setattr__(self, "graph", load_chakra_graph(self.path, ranks=self.ranks,
                                                            field_name=f"job {self.name!r} chakra"))
        if self.world_size % self.tp:
            raise ConfigError(f"job {self.name!r}: tp {self.tp} must divide its {self.world_size} ranks (tp)")

    @property
    def world_size(self) -> int:
        """Ranks, one GPU each."""
        return self.graph.world_size

    @property
    def gpus(self) -> int:
        return self.world_size

    def iteration_graph(self, granularity: Any = None) -> OpGraph:
        """The traces' work as one `OpGraph` (the granularity of native jobs does not apply)."""
        return self.graph

    def iteration_flops(self) -> float:
        """FLOPs are not in the traces (compute is given as durations): 0."""
        return 0.0
