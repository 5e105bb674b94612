"""Jobs on a shared cluster: what runs on the engine, and when.

`flowherd.engine` moves bytes: flows and coflows at max-min fair rates over a fabric, with
or without a congestion model. This package decides what those flows are. Read it bottom up:

* `collective` turns one collective (`flowherd.collectives`) into coflows on an engine, at
  ``step`` or ``collective`` fidelity, and `executor` does the same for a whole op graph (a
  training iteration, an inference step): tasks, their dependencies, compute as pure delays.
  Both live here rather than in the engine because they are the first step of running work
  that comes from `flowherd.workload`; the engine itself knows nothing of collectives or jobs.
* `placement` (which GPUs a job gets) and `pacing` (rate caps of GPU pairs) are the levers a
  cluster operator sets before a run; `control_types` and `control_api` are the interface of
  an online controller (`Controller`, its `Observation` and `Decision`) and the hook that asks
  it during a run.
* `records` holds what a run takes in and gives back (`JobRequest`, `BackgroundSpec`,
  `JobRecord`, `ClusterResult`), `background` the background traffic, `state` the protocol
  by which a job run sees its cluster, `quiet` the exact fast-forward among background flows,
  `job_run` one job's iterations and batches, and `simulate` the run itself:
  `simulate_cluster`.

``from flowherd.cluster import simulate_cluster`` works; the names load on first use, so that
``flowherd collective`` (which needs `collective` only) pays for none of the rest.
"""

from __future__ import annotations

__all__ = ["CLUSTER_FIDELITIES", "BackgroundSpec", "ClusterResult", "JobRecord", "JobRequest",
           "simulate_cluster"]


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from flowherd.cluster import simulate

    value = getattr(simulate, name)
    globals()[name] = value
    return value
