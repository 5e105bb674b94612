"""Replay of real GPU-cluster traces as LLM training jobs.

Two slices ship as package data (``flowherd/data/traces/``, provenance and licences in their READMEs):

* ``philly``: Microsoft Philly, first 3,000 jobs of the Pollux-derived CSV (Jeon et al. ATC'19;
  Qiao et al. OSDI'21); tenant = the virtual cluster.
* ``openb``: Alibaba GPU cluster trace v2023, first 3,000 GPU tasks (Weng et al. ATC'23); the trace has
  no tenant, so the tenant is ``"qos-<qos>"`` (LS, BE, Burstable, Guaranteed).

Both are normalized to ``job_id, submit_time_s, duration_s, num_gpus, gpu_type, status, tenant, ...``.

Mapping rule (`TraceMapping`, deterministic, no randomness), for a trace job of ``n`` GPUs:

1. model by size: ``n < 16`` -> Llama-3 8B, ``16 <= n < 128`` -> Llama-3 70B, ``n >= 128`` -> Llama-3 405B
   (thresholds configurable); GPU-sharing tasks (``gpu_milli < 1000``) count as one whole GPU;
2. ``tp = gcd(n, gpus_per_server)`` (TP stays in a server); ``pp = gcd(n / tp, pp_max[model])`` with
   ``pp_max`` 1 (8B), 2 (70B), 16 (405B); ``dp = n / (tp * pp)``;
3. ``seq_len`` 4096, micro-batch 1, ``micro_batches`` (8) per replica: ``global_batch = 8 * dp``;
4. ``iterations = clip(round(duration_s / T), 1, max_iterations)`` with ``T`` the modelled iteration
   time of the job alone (`TrainingJob.estimate_iteration_s`), so the job alone lasts about as long
   as in the trace;
5. name = ``job_id``, tenant kept, ``submit_s`` = trace submit time minus the first kept one.
"""

from __future__ import annotations

import csv
import math
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from flowherd.errors import ConfigError
from flowherd.registry import Registry
from flowherd.workload.training import TrainingJob

#: Largest trace file read, bytes: the whole Philly trace (about 100,000 jobs) is about a tenth of
#: it; every row of a file is read into memory before the first is used.
MAX_TRACE_BYTES = 64 * 2**20

TRACES: Registry[str] = Registry("trace", {
    "philly": "philly_pollux/philly_first3000.csv",
    "openb": "alibaba_openb_2023/openb_gpu_first3000.csv",
})


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceJob:
    """One job of a trace, normalized.

    Attributes:
        job_id: Trace identifier.
        submit_time_s: Submission, seconds from the trace start.
        duration_s: Run time (without queueing), seconds.
        num_gpus: GPUs (a GPU-sharing task counts as 1).
        tenant: Tenant / virtual cluster ("" when the trace has none).
    """

    job_id: str
    submit_time_s: float
    duration_s: float
    num_gpus: int
    tenant: str = ""


def trace_path(name_or_path: str | Path) -> Path:
    """Resolve a shipped trace name (``philly``, ``openb``) or a file path."""
    text = str(name_or_path)
    if text in TRACES:
        return Path(str(resources.files("flowherd") / "data" / "traces" / TRACES[text]))
    p = Path(text)
    if p.suffix == "" and not p.exists():
        TRACES[text]  # unknown name: raises UnknownNameError with the closest match
    return p


def load_trace(name_or_path: str | Path, *, max_jobs: int | None = None, skip: int = 0) -> list[TraceJob]:
    """Read a normalized trace CSV (shipped name or path); ``max_jobs`` rows in file order after the
    first ``skip`` (another window of the trace: other arrivals, sizes and tenants).

    Raises:
        ConfigError: The file is missing, unreadable, or lacks a column, naming the path and row.
    """
    path = trace_path(name_or_path)
    if max_jobs is not None and (isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 0):
        raise ConfigError(f"max_jobs must be a non-negative integer, got {max_jobs!r} (traces.max_jobs)")
    if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
        raise ConfigError(f"skip must be a non-negative integer, got {skip!r} (traces.skip)")
    expected = "expected a trace CSV file (job_id, submit_time_s, duration_s, num_gpus)"
    try:
        st = path.stat()
    except OSError as e:
        raise ConfigError(f"cannot read trace {str(path)!r}: {e.strerror or e} (traces.path); "
                          f"{expected}") from None
    if not stat.S_ISREG(st.st_mode):  # /dev/zero or a FIFO would be read forever
        raise ConfigError(f"trace {str(path)!r} is not a regular file (a device, a FIFO or a directory) "
                          f"(traces.path); {expected}")
    if st.st_size > MAX_TRACE_BYTES:
        raise ConfigError(f"trace {str(path)!r} has {st.st_size:,} bytes, more than {MAX_TRACE_BYTES:,} "
                          f"(traces.path); {expected} of at most {MAX_TRACE_BYTES // 2**20} MiB (cut it, or "
                          "use max_jobs on a shorter file)")
    try:
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ConfigError(f"cannot read trace {str(path)!r}: {e} (traces.path)") from None
    out: list[TraceJob] = []
    rows = rows[skip:]
    for i, row in enumerate(rows[:max_jobs] if max_jobs is not None else rows, start=skip):
        try:
            tenant = (row.get("tenant") or "").strip()
            if not tenant and (row.get("qos") or "").strip():
                tenant = f"qos-{row['qos'].strip()}"
            n = int(float(row["num_gpus"]))
            job = TraceJob(job_id=row["job_id"], submit_time_s=float(row["submit_time_s"]),
                           duration_s=float(row["duration_s"]), num_gpus=n, tenant=tenant)
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                f"trace {str(path)!r} row {i + 2}: expected columns job_id, submit_time_s, duration_s, "
                f"num_gpus with numbers, got {e!s} (traces.path)"
            ) from None
        if job.num_gpus < 1 or not math.isfinite(job.duration_s) or job.duration_s < 0:
            raise ConfigError(
                f"trace {str(path)!r} row {i + 2}: num_gpus must be >= 1 and duration_s >= 0, got "
                f"{job.num_gpus}, {job.duration_s} (traces.path)"
            )
        out.append(job)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceMapping:
    """The documented rule that turns a trace job into a `TrainingJob` (module docstring)."""

    gpu: str = "h100"
    gpus_per_server: int = 8
    small_model: str = "llama3-8b"
    medium_model: str = "llama3-70b"
    large_model: str = "llama3-405b"
    medium_from_gpus: int = 16
    large_from_gpus: int = 128
    pp_max: tuple[tuple[str, int], ...] = (("llama3-8b", 1), ("llama3-70b", 2), ("llama3-405b", 16))
    seq_len: int = 4096
    micro_batches: int = 8
    efficiency: float | None = None  # None: the compute model (flowherd.workload.compute)
    max_iterations: int | None = None
    rebase: bool = True

    def __post_init__(self) -> None:
        for f in ("gpus_per_server", "medium_from_gpus", "large_from_gpus", "seq_len", "micro_batches"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"trace mapping: {f} must be a positive integer, got {v!r} ({f})")

    def model_for(self, num_gpus: int) -> str:
        if num_gpus >= self.large_from_gpus:
            return self.large_model
        return self.medium_model if num_gpus >= self.medium_from_gpus else self.small_model

    def parallelism(self, num_gpus: int) -> tuple[int, int, int]:
        """(tp, pp, dp) for ``num_gpus`` (rule step 2)."""
        tp = math.gcd(num_gpus, self.gpus_per_server)
        pp = math.gcd(num_gpus // tp, dict(self.pp_max).get(self.model_for(num_gpus), 1))
        return tp, pp, num_gpus // (tp * pp)


def map_trace_jobs(jobs: list[TraceJob], rule: TraceMapping | None = None) -> list[TrainingJob]:
    """Apply the mapping rule to trace jobs (in their order); see the module docstring."""
    rule = rule or TraceMapping()
    t0 = min((j.submit_time_s for j in jobs), default=0.0) if rule.rebase else 0.0
    iter_s: dict[tuple[str, int, int, int], float] = {}
    out = []
    for tj in jobs:
        n = tj.num_gpus
        model = rule.model_for(n)
        tp, pp, dp = rule.parallelism(n)
        spec = TrainingJob(
            model=model, gpu=rule.gpu, gpus=n, tp=tp, pp=pp, dp=dp, seq_len=rule.seq_len, micro_batch=1,
            global_batch=rule.micro_batches * dp, efficiency=rule.efficiency, name=tj.job_id,
            tenant=tj.tenant or "default", submit_s=tj.submit_time_s - t0,
        )
        key = (model, tp, pp, dp)
        if key not in iter_s:
            iter_s[key] = spec.estimate_iteration_s(rule.gpus_per_server)
        iters = max(1, round(tj.duration_s / iter_s[key]))
        if rule.max_iterations is not None:
            iters = min(iters, rule.max_iterations)
        out.append(_replace_iterations(spec, iters))
    return out


def replay_trace(name_or_path: str | Path, *, max_jobs: int | None = None,
                 rule: TraceMapping | None = None, skip: int = 0) -> list[TrainingJob]:
    """Load a trace (``max_jobs`` rows after the first ``skip``) and map its jobs onto LLM training
    jobs (module docstring)."""
    return map_trace_jobs(load_trace(name_or_path, max_jobs=max_jobs, skip=skip), rule)


def _replace_iterations(job: TrainingJob, iterations: int) -> TrainingJob:
    import dataclasses

    return dataclasses.replace(job, iterations=int(iterations))


__all__ = ["TRACES", "TraceJob", "TraceMapping", "load_trace", "map_trace_jobs", "replay_trace", "trace_path"]
