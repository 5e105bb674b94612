"""Sweeps: many scenarios and seeds, run in this process or on Ray, each run stored in the result
store as it ends.

The sweep file, its points and runs are `flowherd.experiments.sweep_file`'s (re-exported here).
The driver process writes each run in one transaction as soon as its task returns, so a sweep
killed at any time and restarted with ``resume=True`` repeats no stored run and loses none. A
local Ray instance binds every process to 127.0.0.1 (`flowherd.experiments.ray_local`).

Ray is imported only by `run_sweep` on the Ray path (the ``sweep`` extra).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError, caused_by_interrupt
from flowherd.experiments.runs import Point, Run, canonical_hash
from flowherd.experiments.sweep_file import (
    MAX_RUNS,
    PROGRESS_EVERY_S,
    Sweep,
    load_sweep,
    set_field,
    sweep_from_mapping,
)

log = logging.getLogger(__name__)

__all__ = [
    "MAX_RUNS",
    "PROGRESS_EVERY_S",
    "Point",
    "Run",
    "Sweep",
    "SweepOutcome",
    "canonical_hash",
    "choose_backend",
    "execute_run",
    "load_sweep",
    "run_record",
    "run_sweep",
    "set_field",
    "store_run_result",
    "sweep_from_mapping",
]

#: Sweeps of at most this many runs to run run by default in this process, one after the other: a
#: local Ray instance takes 10-20 s to start on two idle cores (minutes on a loaded machine), more
#: than such a sweep of small scenarios gains from running on both cores.
INLINE_MAX_RUNS = 32
#: The file beside the store that takes Ray's own messages (start-up warnings, worker logs).
RAY_LOG = "ray.log"


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepOutcome:
    """What `run_sweep` did.

    Attributes:
        total: Runs in the sweep.
        skipped: Runs already in the store (resume).
        ok, failed: Runs executed now, by status.
        wall_s: Wall-clock time of the call, seconds.
        store_path: The DuckDB file.
        skipped_failed: Of `skipped`, the runs stored as failed (resume without retry_failed).
    """

    total: int
    skipped: int
    ok: int
    failed: int
    wall_s: float
    store_path: Path
    skipped_failed: int = 0

    @property
    def any_failed(self) -> bool:
        """Whether any run of the sweep is failed in the store (run now or skipped)."""
        return self.failed + self.skipped_failed > 0


# ---- executing runs ---------------------------------------------------------------------------------
def execute_run(scenario: Mapping[str, Any], *, solo: bool = True) -> dict[str, Any]:
    """Build and simulate one scenario; never raises for a bad scenario or a failed simulation.

    Returns:
        A plain, picklable record: ``status`` ("ok" or "failed"), ``error`` (None or the error
        text), ``wall_s``, and for a finished run ``result`` (`RunResult.to_dict`), ``records``
        (per job: gpus, iteration ends and durations, compute-only iteration) and ``utilization``
        (tiers, capacity, time bins, series).
    """
    from flowherd.experiments.runner import run_scenario
    from flowherd.experiments.scenario import scenario_from_mapping

    wall0 = time.perf_counter()
    try:
        scen = scenario_from_mapping(scenario)
        run = run_scenario(scen, solo=solo)
    except Exception as err:  # a failing point is recorded and the sweep goes on
        if caused_by_interrupt(err):  # a Ctrl-C inside compiled code: stop, not a failed run
            raise
        text = f"{type(err).__name__}: {err}"
        if not isinstance(err, ConfigError):
            text += "\n" + "".join(traceback.format_exception(err)[-6:])
        return {"status": "failed", "error": text, "wall_s": time.perf_counter() - wall0}
    return run_record(run, wall_s=time.perf_counter() - wall0)


def run_record(run: Any, *, wall_s: float | None = None) -> dict[str, Any]:
    """The store record (see `execute_run`) of a finished `flowherd.experiments.runner.RunResult`."""
    import numpy as np

    c = run.cluster
    records = [{"name": r.name, "gpus": [int(g) for g in r.gpus],
                "iteration_end_s": np.asarray(r.iteration_end_s, dtype=float).tolist(),
                "iteration_s": np.asarray(r.iteration_s, dtype=float).tolist(),
                "compute_only_iteration_s": float(r.compute_only_iteration_s)} for r in c.jobs]
    util = {"tiers": list(c.util_tiers),
            "capacity_bytes_per_s": np.asarray(c.util_tier_capacity_bytes_per_s, dtype=float).tolist(),
            "bin_edges_s": np.asarray(c.util_bin_edges_s, dtype=float).tolist(),
            "series": np.asarray(c.util_by_tier, dtype=float).tolist()}
    return {"status": "ok", "error": None, "wall_s": run.wall_s if wall_s is None else wall_s,
            "result": run.to_dict(), "records": records, "utilization": util,
            "network": getattr(c, "network", None)}


def store_run_result(store_path: str | Path, scenario: Mapping[str, Any], run: Any, *,
                     sweep: str = "simulate", params: Mapping[str, Any] | None = None,
                     whole_file: bool = False) -> str:
    """Store one in-process run (e.g. of `flowherd simulate --out DIR`) so that it can be reported.

    Args:
        store_path: The DuckDB file or its directory.
        scenario: The scenario mapping that was run (its ``seed`` is the run's).
        run: Its `flowherd.experiments.runner.RunResult`.
        sweep: The name the run is stored under.
        params: Stored as the run's parameters (e.g. ``{"role": "best baseline"}``, which the
            report shows in the method's name); they do not change the run id.
        whole_file: Write the store to a temporary copy and rename it over the file
            (`flowherd.atomic`), so that a full disk leaves the store as it was; without it, the
            run is one transaction of the store (the demo adds runs one by one).

    Returns:
        The run id.

    Raises:
        WriteError: The store cannot be written (naming it and the cause).
    """
    from flowherd.experiments.store import ResultStore, resolve_store_path

    body = dict(scenario)
    r = Run(point=Point(params=dict(params or {}), scenario=body, hash=canonical_hash(body)),
            seed=int(run.scenario.seed))
    record = run_record(run)
    if not whole_file:
        with ResultStore(store_path) as store:
            store.write_run(sweep=sweep, run=r, record=record)
        return r.run_id
    import shutil

    from flowherd import atomic
    from flowherd.errors import WriteError

    path = resolve_store_path(store_path)
    with atomic.replacing(path, field="--out") as tmp:
        if path.is_file():
            ResultStore(path, read_only=True).close()  # not a store: said before the copy
            shutil.copyfile(path, tmp)
        try:
            with ResultStore(tmp) as store:
                store.write_run(sweep=sweep, run=r, record=record)
        except WriteError as err:  # name the store, not its temporary copy
            raise WriteError(str(err).replace(str(tmp), str(path))) from None
    return r.run_id


def run_sweep(sweep: Sweep, store_path: str | Path, *, address: str | None = None,
              num_cpus: int | None = None, resume: bool = False, retry_failed: bool = False,
              batch: int | None = None, backend: str = "auto",
              progress: Callable[[dict[str, Any]], None] | None = None) -> SweepOutcome:
    """Run every run of `sweep` and store each in the DuckDB file `store_path` as it finishes.

    Args:
        sweep: The sweep.
        store_path: The DuckDB file (created if absent).
        address: A Ray cluster address to connect to; None starts a local Ray instance that this
            call stops again (`start_local_ray`: every process on 127.0.0.1, dashboard off, its
            temporary directory removed afterwards).
        num_cpus: CPUs of the local Ray instance (default: all); ignored with `address`.
        resume: Skip the runs already stored. Without it, a store that already holds runs of
            this sweep is an error (it would mix two executions).
        retry_failed: With `resume`, run the stored failed runs again.
        batch: Runs per Ray task (default: the sweep's ``batch``, or chosen from the run count).
        backend: "ray", "inline" (this process, one run after the other), or "auto": inline for
            at most `INLINE_MAX_RUNS` runs to do without `address` or `num_cpus`, else Ray
            (`choose_backend`). Ray's own messages go to ``ray.log`` beside the store.
        progress: Called with ``{"done", "failed", "total", "run_id", "status", "skipped_failed",
            "phase", "backend", "executed"}``: once before anything starts (``phase`` "starting"),
            once when the runs start (``phase`` "running": Ray is up) and after each stored run
            (``phase`` "running", ``run_id`` and ``status`` set). ``done`` counts skipped runs too,
            ``executed`` only the runs executed by this call; ``skipped_failed``: skipped runs that
            are stored as failed.

    Raises:
        ConfigError: A store holding runs of this sweep without `resume`, a bad backend.
    """
    from flowherd.experiments.store import ResultStore

    if backend not in ("ray", "inline", "auto"):
        raise ConfigError(f"backend must be 'auto', 'ray' or 'inline', got {backend!r} (backend)")
    wall0 = time.perf_counter()
    runs = sweep.runs
    store = ResultStore(store_path)
    path = store.path
    try:
        stored = store.run_status()
        mine = {r.run_id for r in runs}
        present = {k: v for k, v in stored.items() if k in mine}
        if present and not resume:
            raise ConfigError(f"{store.path} already holds {len(present)} runs of sweep {sweep.name!r}; "
                              "pass --resume to continue it or choose another --out (resume)")
        if retry_failed:
            present = {k: v for k, v in present.items() if v == "ok"}
        skipped_failed = sum(v != "ok" for v in present.values())
        todo = [r for r in runs if r.run_id not in present]
        chosen = (choose_backend(len(todo), address=address, num_cpus=num_cpus) if backend == "auto"
                  else backend)
        state = {"done": len(runs) - len(todo), "failed": sum(v != "ok" for v in present.values()),
                 "total": len(runs), "run_id": None, "status": None, "skipped_failed": skipped_failed,
                 "phase": "starting", "backend": chosen, "executed": 0}
        counts = {"ok": 0, "failed": 0}
        by_id = {r.run_id: r for r in todo}

        def record(run_id: str, rec: dict[str, Any]) -> None:
            store.write_run(sweep=sweep.name, run=by_id[run_id], record=rec)
            counts["ok" if rec["status"] == "ok" else "failed"] += 1
            state["done"] += 1
            state["executed"] += 1
            state["failed"] += rec["status"] != "ok"
            state["run_id"], state["status"] = run_id, rec["status"]
            if progress is not None:
                progress(dict(state))

        def running() -> None:
            state["phase"] = "running"
            if progress is not None:
                progress(dict(state))

        if progress is not None:
            progress(dict(state))
        if todo and chosen == "inline":
            running()
            for r in todo:
                record(r.run_id, execute_run(r.scenario()))
        elif todo:
            from flowherd.experiments.sweep_ray import run_on_ray

            run_on_ray(todo, record, execute_run, address=address, num_cpus=num_cpus,
                       batch=batch if batch is not None else sweep.batch, started=running,
                       log_path=path.parent / RAY_LOG)
    finally:
        store.close()
    return SweepOutcome(total=len(runs), skipped=len(runs) - len(todo), ok=counts["ok"],
                        failed=counts["failed"], wall_s=time.perf_counter() - wall0,
                        store_path=path, skipped_failed=skipped_failed)


def choose_backend(n_runs: int, *, address: str | None = None, num_cpus: int | None = None) -> str:
    """Where a sweep of `n_runs` runs by default: "ray" with a cluster `address`, a local Ray
    instance's `num_cpus`, or more than `INLINE_MAX_RUNS` runs; else "inline".

    >>> choose_backend(27), choose_backend(27, address="ray://head:10001"), choose_backend(500)
    ('inline', 'ray', 'ray')
    """
    if address is not None or num_cpus is not None or n_runs > INLINE_MAX_RUNS:
        return "ray"
    return "inline"

