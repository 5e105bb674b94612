"""A sweep's runs on Ray: batches of runs as tasks, each stored by the driver as it returns.

A task asks Ray for its runs' estimated memory (`flowherd.experiments.cost`), and a local
instance has the memory limit (``--max-memory``, or what the machine leaves) to schedule into,
so no more runs execute at once than fit; every worker inherits ``--max-memory`` and
``--max-events`` and refuses a run over them as the driver would. Ray is imported here only.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flowherd.experiments.runs import Run

log = logging.getLogger(__name__)

__all__ = ["run_on_ray"]

_MAX_BATCH = 8


def _run_memory(run: Run) -> float:
    """A run's estimated memory, bytes (`flowherd.experiments.cost.run_cost`); 0 if its scenario
    does not build (the run will fail and say why)."""
    from flowherd.experiments import cost
    from flowherd.experiments.scenario import scenario_from_mapping

    try:
        return cost.run_cost(scenario_from_mapping(run.scenario())).memory_bytes
    except Exception:  # the run itself reports it
        return 0.0


def _execute_batch(execute: Callable[[dict[str, Any]], dict[str, Any]],
                   items: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(run_id, execute(scen)) for run_id, scen in items]


def _batch_size(requested: int, n_runs: int, workers: int) -> int:
    if requested > 0:
        return requested
    # about four tasks per worker keeps both cores busy to the end while the per-task overhead
    # (a few ms of scheduling and pickling) stays small against runs of a second or more
    return max(1, min(_MAX_BATCH, n_runs // max(1, 4 * workers)))


def run_on_ray(todo: Sequence[Run], record: Callable[[str, dict[str, Any]], None],
               execute: Callable[[dict[str, Any]], dict[str, Any]], *,
               address: str | None, num_cpus: int | None, batch: int,
               started: Callable[[], None] | None = None, log_path: Path | None = None) -> None:
    """Execute `todo` in Ray tasks of `batch` runs (0: chosen from the count), each run by
    ``execute(scenario)`` (`flowherd.experiments.sweep.execute_run`), and call
    ``record(run_id, record)`` in this process as each returns; a task whose worker died gives
    failed records for its runs. ``started()`` is called once Ray is up; Ray's own messages go to
    ``log_path`` while it starts (`ray_messages_to`), so that a progress display stays whole.

    Raises:
        ConfigError: A local Ray instance that cannot start (`start_local_ray`).
    """
    from flowherd.experiments import budget
    from flowherd.experiments.ray_local import (
        check_address_space,
        limits_env,
        ray_messages_to,
        start_local_ray,
    )

    if address is None:
        check_address_space()  # before Ray is imported: its start-up fails slowly under ulimit -v
    import ray

    # each task asks Ray for the estimated memory of a run, and a local instance has the memory
    # limit (--max-memory, or what this machine leaves) to schedule into: no more runs at once
    # than fit
    limit = budget.memory_limit().limit_bytes
    per_run = min(_run_memory(todo[0]), limit)
    with contextlib.ExitStack() as stack:
        if not ray.is_initialized():
            if log_path is not None:  # Ray's warnings (token authentication ...) out of the display
                stack.enter_context(ray_messages_to(log_path))
            if address is None:
                stack.enter_context(start_local_ray(num_cpus, memory_bytes=int(limit)))
            else:
                env = limits_env()
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                         runtime_env={"env_vars": env} if env else None)
                stack.callback(ray.shutdown)
        if started is not None:
            started()
        workers = max(1, int(ray.available_resources().get("CPU", 1)))
        size = _batch_size(batch, len(todo), workers)
        room = ray.available_resources().get("memory")
        ask = {"memory": int(per_run)} if room and per_run <= room else {}
        task = ray.remote(num_cpus=1, max_retries=0, **ask)(_execute_batch)
        pending = {}
        for i in range(0, len(todo), size):
            chunk = [(r.run_id, r.scenario()) for r in todo[i:i + size]]
            pending[task.remote(execute, chunk)] = [rid for rid, _ in chunk]
        log.info("sweep: %d runs in %d Ray tasks on %d CPUs", len(todo), len(pending), workers)
        while pending:
            # a timeout: a Ctrl-C is seen within a second, not when the next task ends
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            if not done:
                continue
            ref = done[0]
            ids = pending.pop(ref)
            try:
                results = ray.get(ref)
            except Exception as err:  # a worker died (killed, out of memory): its runs are failed
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                results = [(rid, {"status": "failed",
                                  "error": f"Ray task failed: {type(err).__name__}: {first}"[:4000],
                                  "wall_s": math.nan}) for rid in ids]
            for run_id, rec in results:
                record(run_id, rec)
