"""Write docs/results-schema.md, the reference of every column of a result store, from the store.

The tables, columns and types come from the store itself: the page creates an empty store in
memory with the DDL of `flowherd.experiments.store` and reads DuckDB's ``information_schema``, so
it cannot list a column the store does not have or miss one it has; the meanings are below.
``tests/results/test_results.py`` fails when the page is not what this script writes now, or when
a column has no meaning here.

    python docs/generate_results_schema.py           # rewrite the page
    python docs/generate_results_schema.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results-schema.md"

TABLE_MEANING = {
    "meta": "Facts about the file itself.",
    "runs": "One row per run (one point of a sweep under one seed), failed runs included.",
    "jobs": "One row per job of a finished run.",
    "tenants": "One row per tenant of a finished run.",
    "links": "One row per link tier of a finished run (NVLink, host-leaf, leaf-spine ...).",
    "services": "One row per inference service of a finished run (`flowherd.experiments.metrics`).",
    "network_links": "One row per congested link of a finished run on a congestion model (`roce`, "
                     "`tcp`); none for `ideal` runs.",
}

# What each column means, by table; units are in the names (_s seconds, _bytes bytes,
# _bytes_per_s bytes per second) and said where a name cannot carry them.
MEANING: dict[str, dict[str, str]] = {
    "meta": {
        "key": "Name of the fact (`schema_version`).",
        "value": "Its value, as text.",
    },
    "runs": {
        "run_id": "The run's id: the first 16 hex digits of its point's hash, `-s`, the seed.",
        "sweep": "Name of the sweep the run belongs to (`flowherd demo` stores `demo`, "
                 "`flowherd simulate --out` stores `simulate`).",
        "point_hash": "sha256 of the point's scenario (canonical JSON, without the seed).",
        "seed": "The run's seed.",
        "params": "The swept values of the run's point, a JSON object by scenario path "
                  "(`flowherd results` and `flowherd.results.load` make each a column).",
        "status": "`ok`, or `failed` (then `error` says why and the other tables have no rows for it).",
        "error": "Why a failed run failed; empty for `ok`.",
        "wall_s": "Wall-clock time the run took to simulate.",
        "finished_at": "When the run was stored (UTC).",
        "scenario_name": "The scenario's `name`.",
        "placement": "Placement method the run used.",
        "routing": "Routing policy the run used.",
        "controller": "Online controller (empty: none).",
        "fidelity": "Simulation fidelity: `step`, `collective` or `phase`.",
        "background_load": "Background traffic load, as a fraction of the fabric's capacity.",
        "num_gpus": "GPUs of the fabric.",
        "horizon_s": "Simulated time the run stopped at.",
        "jobs_total": "Jobs submitted.",
        "jobs_finished": "Jobs finished by the horizon.",
        "mean_jct_s": "Mean job completion time (finish - submission, queueing included) of the "
                      "finished jobs.",
        "p99_jct_s": "99th percentile of the finished jobs' JCTs.",
        "mean_queue_s": "Mean time from submission to start.",
        "mean_slowdown": "Mean over the finished jobs of JCT / the job's time alone (1: no queue, no "
                         "contention).",
        "makespan_s": "Last finish - first submission.",
        "summary": "Every run-level figure as JSON (link utilization per tier, background flows, "
                   "fairness ...).",
        "scenario_json": "The full scenario the run simulated, as JSON (seed included).",
        "scenario_yaml": "The same, as YAML (`flowherd simulate` runs it again).",
    },
    "jobs": {
        "run_id": "The run (`runs.run_id`).",
        "name": "Job name.",
        "tenant": "Who the job belongs to.",
        "kind": "`training` or `inference`.",
        "num_gpus": "GPUs the job ran on.",
        "submit_s": "Submission time.",
        "start_s": "Start time (empty: never started).",
        "finish_s": "Finish time (empty: not finished by the horizon).",
        "finished": "Whether the job finished by the horizon.",
        "jct_s": "Job completion time, finish - submission.",
        "queue_s": "Start - submission.",
        "iterations": "Iterations (training) or request batches (inference) run.",
        "iterations_planned": "Iterations the job asked for.",
        "mean_iteration_s": "Mean iteration (or batch) time.",
        "p99_iteration_s": "99th percentile of the iteration times.",
        "solo_iteration_s": "Iteration time of the job alone on the same GPUs (no other traffic).",
        "slowdown": "JCT / (planned iterations x solo iteration time); for a service, the mean batch "
                    "latency over its solo one.",
        "iteration_slowdown": "mean_iteration_s / solo_iteration_s.",
        "comm_share": "Fraction of an iteration not covered by compute (exposed communication).",
        "gpu_utilization": "Busy GPU time / held GPU time (fraction).",
        "fast_forwarded_iterations": "Iterations the `phase` fidelity skipped over as repeats.",
        "gpus": "GPU node ids the job ran on (a list).",
        "iteration_end_s": "End time of each iteration (a list).",
        "iteration_s": "Duration of each iteration (a list).",
        "compute_only_iteration_s": "Iteration time with the communication taken away.",
    },
    "tenants": {
        "run_id": "The run (`runs.run_id`).",
        "tenant": "Tenant name.",
        "jobs": "Jobs of the tenant.",
        "finished": "Of those, finished by the horizon.",
        "mean_jct_s": "Mean JCT of its finished jobs.",
        "mean_queue_s": "Mean queueing time of its jobs.",
        "mean_slowdown": "Mean slowdown of its finished jobs.",
        "gpu_hours": "GPU hours its jobs held (GPUs x run time / 3,600 s).",
    },
    "links": {
        "run_id": "The run (`runs.run_id`).",
        "tier": "Link tier (`nvlink`, `pcie`, `host-leaf`, `leaf-spine` ...).",
        "capacity_bytes_per_s": "Capacity of the tier's links together, per direction.",
        "mean_utilization": "Mean utilization over the run (fraction of capacity).",
        "peak_utilization": "Highest utilization of one time bin (fraction).",
        "bin_edges_s": "Edges of the time bins of `utilization` (a list).",
        "utilization": "Utilization per time bin (a list of fractions).",
    },
    "services": {
        "run_id": "The run (`runs.run_id`).",
        "name": "The service's job name.",
        "tenant": "Its tenant.",
        "requests": "Requests that arrived before the horizon.",
        "mean_ttft_s": "Mean time to first token: arrival to the first token at the client.",
        "p99_ttft_s": "99th percentile of the time to first token (a request still waiting at the "
                      "horizon counted to it: a lower bound).",
        "mean_tpot_s": "Mean time per output token after the first: (last - first token) / "
                       "(output tokens - 1).",
        "p99_tpot_s": "99th percentile of the time per output token.",
        "ttft_slo_s": "The scenario's objective for the 99th-percentile TTFT (empty: none).",
        "tpot_slo_s": "The scenario's objective for the 99th-percentile TPOT (empty: none).",
        "ttft_attainment": "Share of the requests within the TTFT objective (empty: no objective).",
        "tpot_attainment": "Share of the requests within the TPOT objective.",
        "slo_attainment": "Share of the requests within both objectives (DistServe's SLO attainment).",
        "slo_met": "MLPerf's rule: both 99th percentiles within their objectives.",
        "request_rate_per_s": "The service's request arrival rate.",
        "capacity_per_s": "Requests per second its slowest pool sustains with full batches, each step "
                          "at its time alone on the fabric.",
        "overloaded": "Whether the arrival rate exceeds the capacity (its queues grow for as long as "
                      "it runs).",
        "comm_share": "1 - compute / execution time of its steps: what communication adds, queueing "
                      "for a busy replica not counted.",
        "capacity_note": "Which pool limits the capacity and why, in words.",
    },
    "network_links": {
        "run_id": "The run (`runs.run_id`).",
        "model": "Congestion model (`roce`, `tcp`).",
        "link": "Link id in the fabric.",
        "name": "Link name (its two ends).",
        "queue_mean_bytes": "Time-averaged queue at the link's egress.",
        "queue_max_bytes": "Largest queue.",
        "pause_s": "Time the link was paused by PFC (lossless models).",
        "ecn_marked_bytes": "Bytes marked with ECN.",
        "drop_bytes": "Bytes dropped (lossy models; 0 under lossless `roce`).",
        "series_t_s": "Sample times of the queue series (a list).",
        "series_queue_bytes": "Queue at those times (a list).",
        "pause_t_s": "Start of each PFC pause (a list).",
        "pause_dur_s": "Duration of each PFC pause (a list).",
    },
}

INTRO = """\
# Result store schema

<!-- generated by docs/generate_results_schema.py from the store's own tables; do not edit -->

`flowherd sweep`, `flowherd demo` and `flowherd simulate --out DIR` write one DuckDB file,
`results.duckdb`, in their output directory. Its tables are below. Every run is stored in one
transaction: after a crash a run is wholly there or absent.

Read it with `flowherd results DIR` (tables in the terminal; `--csv`, `--json`, `--parquet`), with
`flowherd.results.load(DIR)` (a pandas DataFrame, `table="jobs"` and the others alike), or with
DuckDB itself (`duckdb DIR/results.duckdb`). `flowherd results` and `load` turn `runs.params`
into one column per swept value, named by its scenario path (`fabric.oversubscription`), and put
the run's swept values and seed beside every job, tenant and link row; they leave out the list
columns (series) unless asked (`--series`, `series=True`) and the scenario texts.

Units are in the column names: `_s` seconds, `_bytes` bytes, `_bytes_per_s` bytes per second;
utilizations and shares are fractions (0 to 1), slowdowns ratios.
"""


def page() -> tuple[str, list[str]]:
    """The page, and the columns that have no meaning above (`table.column`)."""
    import duckdb

    from flowherd.experiments.store import _DDL, SCHEMA_VERSION

    con = duckdb.connect(":memory:")
    con.execute(_DDL)
    rows = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                       "ORDER BY table_name, ordinal_position").fetchall()
    con.close()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append((column, kind))
    order = [t for t in TABLE_MEANING if t in tables] + sorted(t for t in tables if t not in TABLE_MEANING)
    missing = [f"{t}.{c}" for t in order for c, _ in tables[t] if c not in MEANING.get(t, {})]
    missing += [f"{t} (table)" for t in order if t not in TABLE_MEANING]
    out = [INTRO, f"Schema version {SCHEMA_VERSION} (the `meta` table's `schema_version`).\n"]
    for table in order:
        out.append(f"## `{table}`\n\n{TABLE_MEANING.get(table, '')}\n")
        out.append("| column | type | meaning |\n|---|---|---|")
        for column, kind in tables[table]:
            meaning = MEANING.get(table, {}).get(column, "")
            out.append(f"| `{column}` | {kind} | {meaning} |")
        out.append("")
    return "\n".join(out), missing


def main(argv: list[str]) -> int:
    text, missing = page()
    if missing:
        print(f"columns without a meaning in {Path(__file__).name}: {', '.join(missing)}", file=sys.stderr)
        return 1
    if argv[:1] == ["--check"]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
