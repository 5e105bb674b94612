"""Scenario files: YAML validated by pydantic, converted once into core values.

The contract (fields beyond these are documented on each model below)::

    seed: 7
    fabric: {kind: leaf-spine, servers: 8, gpus_per_server: 8, gpu: h100, nic_bandwidth: 400Gbps,
             nvlink_bandwidth: 900GB/s, leaves: 2, spines: 2, oversubscription: 1, link_latency: 1us}
    workload:
      jobs:
        - {name: a, tenant: t1, kind: training, model: llama3-8b, gpus: 16,
           parallelism: {tp: 8, pp: 1, dp: 2}, seq_len: 4096, micro_batch: 1, global_batch: 32,
           iterations: 20, submit: 0s}
        # model: a catalog name or {name, layers, hidden, heads, kv_heads, ffn_hidden, vocab,
        #   gated_mlp}; parallelism: {tp, pp, dp, cp, ep, virtual_stages, sequence_parallel,
        #   zero, fsdp}; recompute: none | selective | full; attention: flash | unfused | triton |
        #   cudnn; precision: bf16 | fp8; pipeline_engine: megatron | deepspeed;
        #   param_bytes: 4 for FP32 weights under autocast; efficiency: an explicit fraction
        #   of the peak (default: the compute model, flowherd.workload.compute)
      arrivals: []        # e.g. {process: poisson, rate: 4/h, mix: [...], until: 2h}
      traces: []          # e.g. {path: philly, max_jobs: 200}; min_gpus: N (only jobs that
                          # large), skip: N (of those: another window of the trace),
                          # seed_stride: k (seed s skips s*k more: each seed another window),
                          # gpu_scale: k (k times the GPUs: today's LLM jobs are larger than
                          # the trace's), time_scale
                          # (submit times), duration_scale (durations, hence iterations),
                          # medium_from_gpus / large_from_gpus (the mapping rule's model sizes),
                          # micro_batches (per replica and iteration: the global batch)
      background: {load: 0.0}
    placement: {method: first-fit}
    simulation: {fidelity: collective, horizon: 4h}
    network: ideal        # or roce / tcp / a switch preset / {model: roce, switch: spectrum3, ...}
                          # (flowherd.engine.network.config); omitted: ideal (a scenario written
                          # before keeps its numbers); the embedded default and the benchmarks'
                          # scenarios set roce, the lossless RoCE of a GPU back-end fabric
    planner: {max_utilization: 0.9}   # the routes keep every link's predicted load under it
                                      # where feasible (flowherd.planning.congestion); pace caps
                                      # each job's pairs at the plan's rate so that they stay so
                                      # inside a window (omitted: on unless the network is ideal)

Every error is one `ConfigError` naming the field path (``workload.jobs[0].gpus``), the value and
what was expected.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flowherd.cluster.control_api import GRANTS, Levers, levers_from
from flowherd.cluster.simulate import BackgroundSpec
from flowherd.engine.network import NetworkConfig, load_network, network_from_mapping
from flowherd.errors import ConfigError, FlowherdError, UnknownNameError
from flowherd.experiments import loading
from flowherd.fabric.core import Fabric
from flowherd.fabric.spec import fabric_from_mapping
from flowherd.units import parse_time
from flowherd.workload import (
    FlowSizeCDF,
    InferenceJob,
    MixEntry,
    PoissonArrivals,
    TraceMapping,
    TrainingJob,
    load_trace,
    map_trace_jobs,
    merge_arrivals,
    parse_rate_per_s,
)

Job = TrainingJob | InferenceJob
EMBEDDED = ("default",)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Parallelism(_Model):
    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int | None = Field(None, ge=1)
    ep: int = Field(1, ge=1)
    cp: int = Field(1, ge=1)
    zero: int = Field(0, ge=0, le=3)
    sequence_parallel: bool = False
    virtual_stages: int = Field(1, ge=1)
    fsdp: bool = False


class JobModel(_Model):
    """One job. Training jobs take the parallelism block; inference jobs take `serving`."""

    name: str
    tenant: str = "default"
    kind: Literal["training", "inference"] = "training"
    model: str | dict[str, Any]
    gpus: int | None = Field(None, ge=1)
    gpu: str | None = None
    parallelism: Parallelism = Parallelism()
    seq_len: int = Field(4096, ge=1)
    micro_batch: int = Field(1, ge=1)
    global_batch: int | None = Field(None, ge=1)
    iterations: int = Field(1, ge=1)
    recompute: Literal["none", "selective", "full"] = "none"
    attention: Literal["flash", "unfused", "triton", "cudnn"] = "flash"
    precision: Literal["bf16", "fp8"] = "bf16"
    param_bytes: int | None = Field(None, ge=1)  # None: the activation dtype (TrainingJob.param_bytes)
    grad_bytes: int = Field(2, ge=1)
    grad_accumulation: Literal["fused", "fp32-buffer"] = "fused"
    pipeline_engine: Literal["megatron", "deepspeed"] = "megatron"
    efficiency: float | None = Field(None, gt=0, le=1)  # None: the compute model
    submit: str | float = 0.0
    serving: dict[str, Any] = Field(default_factory=dict)


class ArrivalModel(_Model):
    process: Literal["poisson"] = "poisson"
    rate: str | float
    mix: list[JobModel] = Field(min_length=1)
    weights: list[float] | None = None
    until: str | float
    start: str | float = 0.0
    prefix: str = "arr"


class TraceModel(_Model):
    path: str
    max_jobs: int | None = Field(None, ge=1)
    skip: int = Field(0, ge=0)
    seed_stride: int = Field(0, ge=0)
    min_gpus: int = Field(1, ge=1)
    gpu_scale: int = Field(1, ge=1)
    duration_scale: float = Field(1.0, gt=0)
    micro_batches: int = Field(8, ge=1)
    medium_from_gpus: int = Field(16, ge=1)
    large_from_gpus: int = Field(128, ge=1)
    max_iterations: int | None = Field(None, ge=1)
    time_scale: float = Field(1.0, gt=0)


class BackgroundModel(_Model):
    load: float = Field(0.0, ge=0, le=1)
    distribution: str = "web_search"
    max_flows_per_s: float = Field(500.0, gt=0)
    fast_forward: Literal["exact", "sampled", "mean", "spread"] = "exact"
    sample_every: str | float = "10s"

    @field_validator("load")
    @classmethod
    def _below_one(cls, v: float) -> float:
        if v >= 1:
            raise ValueError("background load must be below 1")
        return v


class WorkloadModel(_Model):
    jobs: list[JobModel] = []
    arrivals: list[ArrivalModel] = []
    traces: list[TraceModel] = []
    background: BackgroundModel = BackgroundModel()


class PlacementModel(_Model):
    method: str = "first-fit"


class PlannerModel(_Model):
    """The offline planner's settings (`flowherd.planning.plan.make_plan`)."""

    max_utilization: float = Field(0.9, gt=0, le=1)
    pace: bool | None = Field(None, description="cap each planned job's scale-out GPU pairs at the "
                              "rate the plan assumed (host pacers, flowherd.planning.pacing), so that "
                              "the congestion-free routes stay so inside each window; the run applies "
                              "the plan's caps. Omitted: on where the network queues (roce, tcp), off "
                              "under ideal (no queue to protect: the caps would only cost)")


class ControllerModel(_Model):
    """The online controller (`flowherd.control.CONTROLLERS`, or the path of a model trained by
    `flowherd train`, a .zip file) and its parameters."""

    name: str = "none"
    params: dict[str, Any] = Field(default_factory=dict)
    on_error: Literal["skip", "stop"] = "skip"
    levers: str | dict[str, Any] = "buffer"  # a grant name (flowherd.cluster.control_api.GRANTS) or fields


class SimulationModel(_Model):
    fidelity: Literal["step", "collective", "phase"] = "collective"
    horizon: str | float = "4h"
    routing: str = "ecmp"


class ScenarioModel(_Model):
    name: str = "scenario"
    seed: int = Field(0, ge=0, le=2**63 - 1)  # stored as a signed 64-bit integer
    fabric: dict[str, Any] | str
    workload: WorkloadModel = WorkloadModel()
    placement: PlacementModel = PlacementModel()
    controller: ControllerModel = ControllerModel()
    simulation: SimulationModel = SimulationModel()
    network: dict[str, Any] | str | None = None
    planner: PlannerModel = PlannerModel()


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A validated scenario as core values."""

    name: str
    seed: int
    fabric: Fabric
    jobs: tuple[Job, ...]
    background: BackgroundSpec | None
    placement: str
    fidelity: str
    horizon_s: float
    routing: str
    controller: str
    controller_params: Mapping[str, Any]
    on_controller_error: str
    source: Mapping[str, Any]  # the mapping it was read from, for the record
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    max_utilization: float = 0.9  # planner.max_utilization
    pace: bool = False  # planner.pace, resolved (omitted: on unless the network is ideal)
    levers: Levers = dataclasses.field(default_factory=lambda: GRANTS["buffer"])


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _from_validation(err: ValidationError) -> ConfigError:
    errors = err.errors()
    # a misspelled key is also reported as the missing one: name the misspelling, it has the hint
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    where = _loc(e["loc"])
    if e["type"] == "extra_forbidden":
        parent = where.rsplit(".", 1)
        key = parent[-1]
        model = _model_at(e["loc"][:-1])
        known = list(model.model_fields) if model else []
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return ConfigError(f"unknown field {key!r} ({where}){hint}; expected one of: {', '.join(known)}")
    if e["type"] == "missing":
        return ConfigError(f"missing required field ({where})")
    value = loading.clip(e.get("input"))  # an echo of a huge value would drown the message
    return ConfigError(f"invalid value {value} ({where}): {e['msg']}")


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = ScenarioModel
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        args = getattr(ann, "__args__", ())
        candidates = [ann, *args]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return model


def _time(value: str | float, field: str) -> float:
    return parse_time(value, field=field)


def _job(m: JobModel, field: str, default_gpu: str) -> Job:
    gpu = m.gpu or default_gpu
    submit_s = _time(m.submit, f"{field}.submit")
    try:
        if m.kind == "inference":
            known = {f.name for f in dataclasses.fields(InferenceJob)}
            for key in m.serving:
                if key not in known or key in ("model", "gpu", "name", "tenant", "submit_s"):
                    close = difflib.get_close_matches(key, sorted(known), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    raise ConfigError(f"unknown serving field {key!r} ({field}.serving.{key}){hint}")
            eff = {} if m.efficiency is None else {"efficiency": m.efficiency}
            return InferenceJob(model=m.model, gpu=gpu, name=m.name, tenant=m.tenant, submit_s=submit_s,
                                **eff, **m.serving)
        if m.gpus is None:
            raise ConfigError(f"a training job needs gpus ({field}.gpus)")
        p = m.parallelism
        return TrainingJob(model=m.model, gpu=gpu, gpus=m.gpus, name=m.name, tenant=m.tenant,
                           tp=p.tp, pp=p.pp, dp=p.dp, ep=p.ep, cp=p.cp, zero_stage=p.zero,
                           sequence_parallel=p.sequence_parallel, virtual_stages=p.virtual_stages,
                           fsdp=p.fsdp, recompute=m.recompute, attention=m.attention, precision=m.precision,
                           param_bytes=m.param_bytes, grad_bytes=m.grad_bytes,
                           grad_accumulation=m.grad_accumulation, pipeline_engine=m.pipeline_engine,
                           seq_len=m.seq_len,
                           micro_batch=m.micro_batch, global_batch=m.global_batch,
                           iterations=m.iterations, efficiency=m.efficiency, submit_s=submit_s)
    except ConfigError as err:
        msg = str(err)
        raise ConfigError(f"{msg} [in {field}]" if field not in msg else msg) from None


def scenario_from_mapping(data: Mapping[str, Any]) -> Scenario:
    """Validate a scenario mapping and build its core values."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a scenario must be a mapping, got {type(data).__name__} (scenario)")
    try:
        m = ScenarioModel.model_validate(dict(data))
    except ValidationError as err:
        raise _from_validation(err) from None
    loading.check_fabric_size(m.fabric)  # before anything is allocated
    try:
        fabric = fabric_from_mapping(m.fabric, field="fabric")
    except UnknownNameError as err:  # one short line, not the list of every preset
        if err.kind != "fabric preset":
            raise
        raise loading.short_unknown(err, "fabric", "flowherd fabric --list") from None
    loading.check_workload_size(m.workload, fabric.num_gpus)
    default_gpu = fabric.gpu_type[0]
    rng = np.random.default_rng(m.seed)
    horizon_s = _time(m.simulation.horizon, "simulation.horizon")
    jobs: list[Job] = [_job(j, f"workload.jobs[{i}]", default_gpu) for i, j in enumerate(m.workload.jobs)]
    streams: list[list[Job]] = [jobs]
    for i, a in enumerate(m.workload.arrivals):
        field = f"workload.arrivals[{i}]"
        mix = [_job(j, f"{field}.mix[{k}]", default_gpu) for k, j in enumerate(a.mix)]
        weights = a.weights or [1.0] * len(mix)
        if len(weights) != len(mix):
            raise ConfigError(f"weights has {len(weights)} entries, expected {len(mix)} ({field}.weights)")
        proc = PoissonArrivals(rate_per_s=parse_rate_per_s(a.rate, field=f"{field}.rate"),
                               until_s=_time(a.until, f"{field}.until"),
                               start_s=_time(a.start, f"{field}.start"), prefix=a.prefix,
                               mix=tuple(MixEntry(job=j, weight=w)
                                         for j, w in zip(mix, weights, strict=True)))
        streams.append(proc.generate(rng))
    gps = int(np.bincount(fabric.gpu_server).max())
    for i, t in enumerate(m.workload.traces):
        field = f"workload.traces[{i}]"
        rule = TraceMapping(gpu=default_gpu, gpus_per_server=gps, max_iterations=t.max_iterations,
                            medium_from_gpus=t.medium_from_gpus, large_from_gpus=t.large_from_gpus,
                            micro_batches=t.micro_batches)
        try:
            first = t.skip + m.seed * t.seed_stride  # in the jobs of at least min_gpus GPUs
            rows = [r for r in load_trace(t.path) if r.num_gpus >= t.min_gpus][first:]
            rows = rows[:t.max_jobs]
            rows = [dataclasses.replace(r, num_gpus=r.num_gpus * t.gpu_scale,
                                        duration_s=r.duration_s * t.duration_scale) for r in rows]
            rows = loading.fit_trace_rows(rows, fabric.num_gpus, field=field, horizon_s=horizon_s,
                                          time_scale=t.time_scale)
            trace_jobs = map_trace_jobs(rows, rule)
        except FlowherdError as err:
            msg = str(err)
            raise ConfigError(msg if f"({field}." in msg else f"{msg} [in {field}.path]") from None
        if t.time_scale != 1.0:
            trace_jobs = [dataclasses.replace(j, submit_s=j.submit_s * t.time_scale) for j in trace_jobs]
        streams.append(trace_jobs)
    # jobs submitted at or after the horizon would only show as never started
    all_jobs = [j for j in merge_arrivals(*streams) if j.submit_s < horizon_s]
    names = [j.name for j in all_jobs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"job names must be unique, got {sorted(dup)[0]!r} twice (workload.jobs)")
    for j in all_jobs:
        need = j.gpus if isinstance(j, TrainingJob) else j.world_size
        if need > fabric.num_gpus:
            raise ConfigError(f"job {j.name!r} asks for {need} GPUs but the fabric has {fabric.num_gpus} "
                              "(workload.jobs)")
    background = None
    bg = m.workload.background
    if bg.load > 0:
        try:
            FlowSizeCDF.load(bg.distribution)
        except FlowherdError as err:
            raise ConfigError(f"{err} [in workload.background.distribution]") from None
        background = BackgroundSpec(load=bg.load, cdf=bg.distribution, max_flows_per_s=bg.max_flows_per_s,
                                    fast_forward=bg.fast_forward,
                                    sample_every_s=_time(bg.sample_every, "workload.background.sample_every"))
    from flowherd.control import CONTROLLERS

    if m.controller.name.endswith(".zip"):  # a trained model (flowherd train), run by flowherd.control.model
        if not Path(m.controller.name).is_file():
            raise ConfigError(f"no trained model file {m.controller.name!r} (controller.name); expected a "
                              f"controller name ({', '.join(CONTROLLERS)}) or an existing .zip model file")
    else:
        try:
            CONTROLLERS[m.controller.name]
        except FlowherdError as err:
            raise ConfigError(f"{err} (controller.name)") from None
    network = (load_network(m.network) if isinstance(m.network, str)
               else network_from_mapping(m.network, field="network"))
    levers = levers_from(m.controller.levers)
    return Scenario(name=m.name, seed=m.seed, fabric=fabric, jobs=tuple(all_jobs), background=background,
                    placement=m.placement.method, fidelity=m.simulation.fidelity, horizon_s=horizon_s,
                    routing=m.simulation.routing, controller=m.controller.name,
                    controller_params=dict(m.controller.params), on_controller_error=m.controller.on_error,
                    source=dict(data), network=network, levers=levers,
                    max_utilization=m.planner.max_utilization,
                    pace=network.model != "ideal" if m.planner.pace is None else m.planner.pace)


def read_scenario_mapping(name_or_path: str | Path) -> dict[str, Any]:
    """The raw mapping of an embedded scenario name (``default``) or a YAML file."""
    if str(name_or_path) in EMBEDDED:
        ref = importlib.resources.files("flowherd.data") / "scenarios" / f"{name_or_path}.yaml"
        return loading.load_yaml(ref.read_text(), source=repr(str(name_or_path)), what="scenario")
    path = Path(name_or_path)
    if not path.exists():
        close = difflib.get_close_matches(str(name_or_path), EMBEDDED, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"no scenario file {loading.clip(str(name_or_path))}{hint} (expected a YAML file "
                          f"or one of the embedded scenarios: {', '.join(EMBEDDED)})")
    return loading.read_yaml_file(path, what="scenario")


def load_scenario(name_or_path: str | Path, *, seed: int | None = None) -> Scenario:
    """Read and validate a scenario; `seed` overrides the file's."""
    data = read_scenario_mapping(name_or_path)
    if seed is not None:
        data = {**data, "seed": seed}
    return scenario_from_mapping(data)
