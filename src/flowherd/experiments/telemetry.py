"""Telemetry out of a run: per-link time series and per-collective records as Parquet.

``simulation.telemetry`` (off by default) asks a run for its link series on a bounded time grid
and its coflow records (`flowherd.cluster.simulate.simulate_cluster` with ``link_series`` and
``coflow_records``); `write_telemetry` writes them beside the result store, one directory per run
(``flowherd simulate SCENARIO --out DIR`` writes ``DIR/telemetry/<run_id>/``). docs/telemetry.md
documents the files' schema; `SCHEMA` is its source.

The grid: ``bin`` seconds (default: the run's utilization bins, ``horizon / 100``), at most
`MAX_BINS` bins, so the series take at most ``5 * links * MAX_BINS`` doubles whatever the run's
length. Turning telemetry on does not change the run: the grid is the one the run already steps
through, the series are read from the engine's running totals at its edges.

Tenant of a link in a bin: the tenant whose running jobs' routes cross the link (their collectives'
routes as placed: a controller's later path choices are not followed), ``"shared"`` when jobs of
several tenants' routes do, ``"background"`` when no job's do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flowherd.errors import ConfigError

__all__ = ["MAX_BINS", "SCHEMA", "TelemetrySpec", "flow_table", "link_info_table", "link_table",
           "schema_markdown", "telemetry_from_mapping", "write_telemetry"]

MAX_BINS = 2000

# file -> column -> (DuckDB type, meaning); docs/telemetry.md is generated from it
SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "links.parquet": {
        "link": ("INTEGER", "directed link id (link_info.parquet)"),
        "bin": ("INTEGER", "index of the time bin"),
        "t0_s": ("DOUBLE", "bin start, seconds"),
        "t1_s": ("DOUBLE", "bin end, seconds"),
        "bytes": ("DOUBLE", "bytes the link carried in the bin"),
        "utilization": ("DOUBLE", "bytes over capacity times the bin width (0..1)"),
        "queue_mean_bytes": ("DOUBLE", "mean queue at the link's egress over the bin, bytes (null under the "
                                       "ideal network)"),
        "pause_s": ("DOUBLE", "time the link was paused by PFC in the bin, seconds (null under ideal)"),
        "ecn_marked_bytes": ("DOUBLE", "ECN-marked bytes in the bin (null under ideal)"),
        "drop_bytes": ("DOUBLE", "bytes dropped in the bin (null under ideal)"),
        "tenant": ("VARCHAR", "tenant whose running jobs' routes cross the link, 'shared' or 'background' "
                              "(module docstring)"),
    },
    "link_info.parquet": {
        "link": ("INTEGER", "directed link id"),
        "src": ("VARCHAR", "source node name"),
        "dst": ("VARCHAR", "destination node name"),
        "kind": ("VARCHAR", "nvlink, pcie or network"),
        "tier": ("VARCHAR", "link tier (the per-tier utilization's names)"),
        "capacity_bytes_per_s": ("DOUBLE", "capacity, bytes per second"),
        "total_bytes": ("DOUBLE", "bytes carried over the run"),
    },
    "flows.parquet": {
        "kind": ("VARCHAR", "'collective' (a communication task of a job's iteration), 'task' (another task "
                            "or a phase-fidelity step whose content is not known) or 'background'"),
        "job": ("VARCHAR", "job name (null for background)"),
        "tenant": ("VARCHAR", "tenant (null for background)"),
        "iteration": ("INTEGER", "iteration (batch) of the job"),
        "task": ("INTEGER", "task index in the iteration's graph"),
        "name": ("VARCHAR", "the task's name (collective fidelity) or the coflow's"),
        "group": ("VARCHAR", "parallelism of the traffic: tp, pp, dp, ep, cp, zero, kv"),
        "size_bytes": ("DOUBLE", "bytes of the task (nccl-tests sizes) or of the background flow"),
        "start_s": ("DOUBLE", "start, seconds"),
        "finish_s": ("DOUBLE", "finish, seconds (null if unfinished)"),
        "src_server": ("INTEGER", "background flow's source server"),
        "dst_server": ("INTEGER", "background flow's destination server"),
    },
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySpec:
    """What telemetry a run keeps.

    Attributes:
        bin_s: Width of the time bins, seconds; None: ``horizon / 100`` (the utilization bins).
        flows: Keep the per-collective and background-flow records.
    """

    bin_s: float | None = None
    flows: bool = True


def telemetry_from_mapping(value: Any, horizon_s: float, *, field: str = "simulation.telemetry"
                           ) -> TelemetrySpec | None:
    """``simulation.telemetry``: false / absent (off), true (the default grid), or
    ``{bin: 1s, flows: true}``; one `ConfigError` line on anything else."""
    from flowherd.units import parse_time

    if value is None or value is False:
        return None
    if value is True:
        return TelemetrySpec()
    if not isinstance(value, Mapping):
        raise ConfigError(f"telemetry must be true, false or a mapping {{bin, flows}}, got {value!r} "
                          f"({field})")
    extra = set(value) - {"bin", "flows"}
    if extra:
        raise ConfigError(f"unknown field {sorted(extra)[0]!r} ({field}); expected one of: bin, flows")
    bin_s = None
    if value.get("bin") is not None:
        bin_s = parse_time(value["bin"], field=f"{field}.bin")
        if not (math.isfinite(bin_s) and bin_s > 0):
            raise ConfigError(f"invalid value {value['bin']!r} ({field}.bin): a positive time")
        if horizon_s / bin_s > MAX_BINS:
            raise ConfigError(f"invalid value {value['bin']!r} ({field}.bin): the horizon would take "
                              f"{math.ceil(horizon_s / bin_s)} bins, at most {MAX_BINS}; expected at least "
                              f"{horizon_s / MAX_BINS:.3g} s")
    flows = value.get("flows", True)
    if not isinstance(flows, bool):
        raise ConfigError(f"invalid value {flows!r} ({field}.flows): true or false")
    return TelemetrySpec(bin_s=bin_s, flows=flows)


def _tenant_grid(cluster: Any, edges: np.ndarray, num_links: int) -> np.ndarray:
    """``object[L, B]``: each link-bin's tenant (module docstring)."""
    nb = len(edges) - 1
    tenants = sorted({j.tenant for j in cluster.jobs})
    count = np.zeros((num_links, nb), np.int16)
    first = np.full((num_links, nb), -1, np.int32)
    for k, tenant in enumerate(tenants):
        on = np.zeros((num_links, nb), bool)
        for j in cluster.jobs:
            if j.tenant != tenant or j.start_s is None or not len(j.footprint_links):
                continue
            end = cluster.horizon_s if j.finish_s is None else j.finish_s
            running = (edges[:-1] < end) & (edges[1:] > j.start_s)
            fp = j.footprint_links[j.footprint_links < num_links]
            on[np.ix_(fp, np.flatnonzero(running))] = True
        count += on
        first[on & (first < 0)] = k
    names = np.array([*tenants, "shared", "background"], dtype=object)
    out = np.where(count > 1, len(tenants), np.where(first < 0, len(tenants) + 1, first))
    return names[out]


def link_table(run: Any) -> dict[str, np.ndarray]:
    """The link series of a run (`SCHEMA` ``links.parquet``): rows for the link-bins that carried
    bytes or held a queue or a pause."""
    c = run.cluster
    if c.link_bin_bytes is None:
        raise ConfigError("the run kept no link series: set simulation.telemetry (simulation.telemetry)")
    edges = np.asarray(c.util_bin_edges_s)
    width = np.diff(edges)
    fab = run.scenario.fabric
    nl = fab.num_directed_links  # a paced run's pacer links (appended) are not the fabric's
    cap = fab.link_capacity_bytes_per_s
    by = c.link_bin_bytes[:nl]
    net = c.link_bin_pause_s is not None
    queue = c.link_bin_queue_byte_s[:nl] / width[None, :] if net else None
    keep = by > 0
    if net:
        keep |= (c.link_bin_pause_s[:nl] > 0) | (queue > 0)
    li, bi = np.nonzero(keep)
    with np.errstate(divide="ignore", invalid="ignore"):
        util = np.nan_to_num(by[li, bi] / (cap[li] * width[bi]))
    # a link busy for a whole bin sums its flows' bytes to its capacity times the width only to
    # rounding (1.0000000000000135); more than rounding over 1 is left to show
    util[(util > 1.0) & (util <= 1.0 + 1e-9)] = 1.0
    tenant = _tenant_grid(c, edges, nl)[li, bi]
    nan = np.full(li.size, np.nan)
    return {"link": li.astype(np.int32), "bin": bi.astype(np.int32), "t0_s": edges[bi], "t1_s": edges[bi + 1],
            "bytes": by[li, bi], "utilization": util,
            "queue_mean_bytes": queue[li, bi] if net else nan,
            "pause_s": c.link_bin_pause_s[li, bi] if net else nan,
            "ecn_marked_bytes": c.link_bin_marked_bytes[li, bi] if net else nan,
            "drop_bytes": c.link_bin_drop_bytes[li, bi] if net else nan, "tenant": tenant}


def link_info_table(run: Any) -> dict[str, np.ndarray]:
    """One row per directed link (`SCHEMA` ``link_info.parquet``)."""
    from flowherd.cluster.background import link_tiers

    c = run.cluster
    fab = run.scenario.fabric
    nl = fab.num_directed_links
    tiers, link_tier = link_tiers(fab)
    kinds = np.array(["nvlink", "pcie", "network"], dtype=object)
    return {"link": np.arange(nl, dtype=np.int32),
            "src": np.array([fab.node_name(int(x)) for x in fab.link_src[:nl]], dtype=object),
            "dst": np.array([fab.node_name(int(x)) for x in fab.link_dst[:nl]], dtype=object),
            "kind": kinds[np.asarray(fab.link_kind[:nl], np.int64)],
            "tier": np.array(tiers, dtype=object)[link_tier[:nl]],
            "capacity_bytes_per_s": fab.link_capacity_bytes_per_s[:nl].astype(np.float64),
            "total_bytes": (c.link_bin_bytes[:nl].sum(axis=1) if c.link_bin_bytes is not None
                            else np.zeros(nl))}


_TASK = re.compile(r"^(?P<job>.+)/it(?P<it>\d+)/t(?P<task>\d+)$")


def flow_table(run: Any) -> dict[str, np.ndarray]:
    """Per-collective and background-flow records (`SCHEMA` ``flows.parquet``)."""
    from flowherd.workload.opgraph import TaskKind

    c = run.cluster
    specs = {j.name: j for j in run.scenario.jobs}
    tenant = {j.name: j.tenant for j in c.jobs}
    graphs: dict[str, Any] = {}
    cols: dict[str, list] = {k: [] for k in SCHEMA["flows.parquet"]}
    contracted = run.scenario.fidelity == "phase"
    for name, t0, t1 in zip(c.coflow_name, c.coflow_start_s if c.coflow_start_s is not None else (),
                            c.coflow_finish_s if c.coflow_finish_s is not None else (), strict=False):
        m = _TASK.match(name)
        if m is None or m["job"] not in specs or not math.isfinite(t0):
            continue
        job, i = m["job"], int(m["task"])
        task = None
        if not contracted and hasattr(specs[job], "iteration_graph"):
            if job not in graphs:
                from flowherd.workload.training import Granularity

                graphs[job] = specs[job].iteration_graph(Granularity.STAGE)
            g = graphs[job]
            task = g.tasks[i] if i < len(g.tasks) else None
            if task is None or task.kind != TaskKind.COMM:
                continue  # compute: no traffic
        cols["kind"].append("collective" if task is not None else "task")
        cols["job"].append(job)
        cols["tenant"].append(tenant.get(job))
        cols["iteration"].append(int(m["it"]))
        cols["task"].append(i)
        cols["name"].append(task.name if task is not None else name)
        cols["group"].append(task.group if task is not None else None)
        cols["size_bytes"].append(task.total_bytes if task is not None else math.nan)
        cols["start_s"].append(float(t0))
        cols["finish_s"].append(float(t1))
        cols["src_server"].append(-1)
        cols["dst_server"].append(-1)
    n_bg = len(c.background_start_s)
    out = {
        "kind": np.array(cols["kind"] + ["background"] * n_bg, dtype=object),
        "job": np.array(cols["job"] + [None] * n_bg, dtype=object),
        "tenant": np.array(cols["tenant"] + [None] * n_bg, dtype=object),
        "iteration": np.array(cols["iteration"] + [-1] * n_bg, np.int32),
        "task": np.array(cols["task"] + [-1] * n_bg, np.int32),
        "name": np.array(cols["name"] + ["bg"] * n_bg, dtype=object),
        "group": np.array(cols["group"] + [None] * n_bg, dtype=object),
        "size_bytes": np.concatenate([np.asarray(cols["size_bytes"], np.float64), c.background_size_bytes]),
        "start_s": np.concatenate([np.asarray(cols["start_s"], np.float64), c.background_start_s]),
        "finish_s": np.concatenate([np.asarray(cols["finish_s"], np.float64), c.background_finish_s]),
        "src_server": np.concatenate([np.asarray(cols["src_server"], np.int32),
                                      np.asarray(c.background_src_server, np.int32)]),
        "dst_server": np.concatenate([np.asarray(cols["dst_server"], np.int32),
                                      np.asarray(c.background_dst_server, np.int32)]),
    }
    return out


def _copy(con: Any, table: dict[str, np.ndarray], file: str, path: Path) -> None:
    cols = SCHEMA[file]
    con.register("t", {k: table[k] for k in cols})
    casts = ", ".join(f'CAST("{k}" AS {t}) AS "{k}"' for k, (t, _) in cols.items())
    nullable = ", ".join(f'CASE WHEN isnan("{k}") THEN NULL ELSE "{k}" END AS "{k}"'
                         for k, (t, _) in cols.items() if t == "DOUBLE")
    sel = f"SELECT {casts} FROM t"
    if nullable:
        keep = ", ".join(f'"{k}"' for k, (t, _) in cols.items() if t != "DOUBLE")
        sel = f"SELECT {keep}, {nullable} FROM ({sel})"
        order = ", ".join(f'"{k}"' for k in cols)
        sel = f"SELECT {order} FROM ({sel})"
    tmp = path.with_name(f".{path.name}.tmp")
    con.execute(f"COPY ({sel}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)")
    con.unregister("t")
    tmp.replace(path)


def write_telemetry(run: Any, directory: str | Path) -> dict[str, Path]:
    """Write a run's telemetry (`SCHEMA`) as Parquet files into ``directory``; returns them by name.

    Raises:
        ConfigError: If the run kept no telemetry (``simulation.telemetry`` off).
    """
    from flowherd.experiments.store import local_files_connection

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tables = {"links.parquet": link_table(run), "link_info.parquet": link_info_table(run)}
    if run.scenario.telemetry is None or run.scenario.telemetry.flows:
        tables["flows.parquet"] = flow_table(run)
    out = {}
    con = local_files_connection()  # no extension loaded on demand; one thread
    try:
        for file, table in tables.items():
            _copy(con, table, file, d / file)
            out[file] = d / file
    finally:
        con.close()
    return out


def schema_markdown() -> str:
    """The files' schema as Markdown tables (docs/telemetry.md holds it)."""
    parts = []
    for file, cols in SCHEMA.items():
        parts += [f"### `{file}`", "", "| column | type | meaning |", "|---|---|---|"]
        parts += [f"| `{k}` | {t} | {m} |" for k, (t, m) in cols.items()]
        parts.append("")
    return "\n".join(parts)
