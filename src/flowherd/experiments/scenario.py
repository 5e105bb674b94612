"""Scenario files: YAML validated by pydantic, converted once into core values.

The contract (fields beyond these are documented on each model of
`flowherd.experiments.scenario_schema`, re-exported here)::

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
        #   zero, fsdp, fsdp_shard}; recompute: none | selective | full; attention: flash | unfused |
        #   triton | cudnn | flash2; precision: bf16 | fp8; pipeline_engine: megatron | deepspeed;
        #   framework: megatron | nemo | deepspeed | torchtitan | pytorch (fsdp, eager): kernels,
        #   selective recompute and overlap as that framework runs them (tp_comm_overlap,
        #   overlap_param_gather, overlap_grad_reduce, bucket_bytes override its defaults);
        #   first_stage_layers / last_stage_layers: an uneven pipeline split; reduce_dtype:
        #   bf16 | fp32 (FSDP's gradient reduce-scatter); cp_comm: p2p | all-gather;
        #   param_bytes: 4 for FP32 weights under autocast; efficiency: an explicit fraction
        #   of the peak (default: the compute model, flowherd.workload.compute)
        # an inference job: {kind: inference, serving: {tp, instances, disaggregated, ...,
        #   slo: {ttft: 450ms, tpot: 40ms}}} (flowherd.workload.slo: p99 objectives)
      slo: null           # e.g. {ttft: 450ms, tpot: 40ms}: the objectives of every service
                          # without its own serving.slo (arrivals, generator)
      arrivals: []        # e.g. {process: poisson, rate: 4/h, mix: [...], until: 2h}
      traces: []          # e.g. {path: philly, max_jobs: 200}; min_gpus: N (only jobs that
                          # large), skip: N (of those: another window of the trace),
                          # seed_stride: k (seed s skips s*k more: each seed another window),
                          # gpu_scale: k (k times the GPUs: today's LLM jobs are larger than
                          # the trace's), time_scale
                          # (submit times), duration_scale (durations, hence iterations),
                          # medium_from_gpus / large_from_gpus (the mapping rule's model sizes),
                          # micro_batches (per replica and iteration: the global batch)
      generator: null     # e.g. {kind: llm-cluster, jobs: 40, profile: kalos, min_gpus: 16,
                          # load: 1.0, duration_scale: 0.05}: a multi-tenant LLM cluster drawn
                          # from the Acme clusters' published figures
                          # (flowherd.workload.llm_cluster); inference_share adds
                          # disaggregated serving beside the training jobs
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
                                      # inside a window (omitted: on unless the network is ideal);
                                      # migration_cost_per_worker_s: job migration as a lever of
                                      # `flowherd plan` (flowherd.planning.migration; omitted: off)

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
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from flowherd.cluster.collective import nic_bandwidth_bytes_per_s
from flowherd.cluster.control_api import GRANTS, Levers, levers_from
from flowherd.cluster.simulate import BackgroundSpec
from flowherd.engine.network import NetworkConfig, load_network, network_from_mapping
from flowherd.errors import ConfigError, FlowherdError, UnknownNameError, unknown_field
from flowherd.experiments import loading
from flowherd.experiments.scenario_schema import (
    MAX_SEQ_LEN,
    ArrivalModel,
    BackgroundModel,
    ControllerModel,
    GeneratorModel,
    JobModel,
    Parallelism,
    PlacementModel,
    PlannerModel,
    ScenarioModel,
    SimulationModel,
    TraceModel,
    WorkloadModel,
)
from flowherd.experiments.telemetry import TelemetrySpec, telemetry_from_mapping
from flowherd.fabric.core import Fabric
from flowherd.fabric.spec import fabric_from_mapping
from flowherd.units import parse_size, parse_time
from flowherd.workload import (
    ChakraJob,
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
from flowherd.workload.slo import ServiceSlo, slo_from_mapping

Job = TrainingJob | InferenceJob | ChakraJob
EMBEDDED = ("default",)
REDUCE_BYTES = {"bf16": 2, "fp32": 4}  # reduce_dtype -> grad_bytes

__all__ = [
    "EMBEDDED", "MAX_SEQ_LEN", "REDUCE_BYTES", "ArrivalModel", "BackgroundModel", "ControllerModel",
    "GeneratorModel", "Job", "JobModel", "Parallelism", "PlacementModel", "PlannerModel", "Scenario",
    "ScenarioModel", "SimulationModel", "TraceModel", "WorkloadModel", "check_serving_key",
    "load_scenario", "read_scenario_mapping", "scenario_from_mapping", "serving_keys",
]


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
    migration_cost_per_worker_s: float | None = None  # planner.migration_cost_per_worker_s (None: off)
    levers: Levers = dataclasses.field(default_factory=lambda: GRANTS["buffer"])
    telemetry: TelemetrySpec | None = None  # simulation.telemetry (flowherd.experiments.telemetry)
    slos: Mapping[str, ServiceSlo] = dataclasses.field(default_factory=dict)  # by service name


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _position(data: Any, loc: tuple[Any, ...]) -> tuple[int, ...]:
    """Where `loc` is in the document `data`: per level, the key's index in its mapping (a missing
    key after the present ones) or the list index; compared, they give the order of the file."""
    out: list[int] = []
    node = data
    for part in loc:
        if isinstance(node, Mapping):
            keys = list(node)
            out.append(keys.index(part) if part in keys else len(keys))
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        else:  # a union member's tag, or below a value that is not a container
            break
    return tuple(out)


def _from_validation(err: ValidationError, data: Any = None) -> ConfigError:
    """One `ConfigError` for a validation failure: the first error in the order of the document
    `data` (pydantic lists them model field by model field); a misspelled key, also reported as
    the missing one, comes first (it has the hint)."""
    errors = err.errors()
    if data is not None:
        errors = sorted(errors, key=lambda x: (_position(data, x["loc"]), x["type"] != "extra_forbidden"))
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0]) if data is None else errors[0]
    where = _loc(e["loc"])
    if e["type"] == "extra_forbidden":
        key = where.rsplit(".", 1)[-1]
        model = _model_at(e["loc"][:-1])
        return unknown_field(key, where, list(model.model_fields) if model else [])
    if e["type"] == "missing":
        return ConfigError(f"missing required field ({where})")
    cause = (e.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):  # a value our own parser refused: its message, with the field
        return ConfigError(f"{cause} ({where})")
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


def serving_keys() -> list[str]:
    """The keys a job's ``serving:`` mapping takes (`InferenceJob`'s fields, less the job's own)."""
    own = ("model", "gpu", "name", "tenant", "submit_s")
    return [f.name for f in dataclasses.fields(InferenceJob) if f.name not in own] + ["slo"]


def check_serving_key(key: str, field: str) -> None:
    """A `ConfigError` naming `field` unless `key` is a ``serving:`` key, with the closest one or the
    list of keys."""
    keys = serving_keys()
    if key in keys:
        return
    close = difflib.get_close_matches(key, keys, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(keys)}"
    raise ConfigError(f"unknown serving field {key!r} ({field}); {hint}")


def _slo(m: JobModel, field: str) -> ServiceSlo | None:
    """The objectives of an inference job's ``serving.slo``, or None."""
    if "slo" not in m.serving:
        return None
    if m.kind != "inference":
        raise ConfigError(f"slo is for inference jobs, got it on a {m.kind} job ({field}.serving.slo)")
    return slo_from_mapping(m.serving["slo"], f"{field}.serving.slo")


def _job(m: JobModel, field: str, default_gpu: str, base: Path | None = None,
         port_bytes_per_s: float | None = None) -> Job:
    """The job of one ``workload.jobs`` entry; ``port_bytes_per_s``: the fabric's NIC rate per GPU,
    the transfer engine's wire rate of a service that does not set ``kv_wire_bytes_per_s``."""
    gpu = m.gpu or default_gpu
    submit_s = _time(m.submit, f"{field}.submit")
    if m.chakra is not None:
        return _chakra_job(m, field, gpu, submit_s, base)
    if m.ranks is not None:
        raise ConfigError(f"ranks applies to a job of Chakra traces only ({field}.ranks); set chakra: DIR")
    if m.model is None:
        raise ConfigError(f"missing required field ({field}.model): a model name, or chakra: DIR for a "
                          "job of Chakra traces")
    try:
        if m.kind == "inference":
            for key in m.serving:
                check_serving_key(key, f"{field}.serving.{key}")
            eff = {} if m.efficiency is None else {"efficiency": m.efficiency}
            serving = {k: v for k, v in m.serving.items() if k != "slo"}
            if port_bytes_per_s is not None:
                serving.setdefault("kv_wire_bytes_per_s", port_bytes_per_s)
            return InferenceJob(model=m.model, gpu=gpu, name=m.name, tenant=m.tenant, submit_s=submit_s,
                                **eff, **serving)
        if m.gpus is None:
            raise ConfigError(f"a training job needs gpus ({field}.gpus)")
        p = m.parallelism
        grad_bytes = m.grad_bytes
        if m.reduce_dtype is not None:
            if "grad_bytes" in m.model_fields_set and grad_bytes != REDUCE_BYTES[m.reduce_dtype]:
                raise ConfigError(f"reduce_dtype {m.reduce_dtype!r} means grad_bytes="
                                  f"{REDUCE_BYTES[m.reduce_dtype]}, got grad_bytes={grad_bytes} "
                                  f"({field}.reduce_dtype)")
            grad_bytes = REDUCE_BYTES[m.reduce_dtype]
        bucket = None if m.bucket_bytes is None else parse_size(m.bucket_bytes, field=f"{field}.bucket_bytes")
        return TrainingJob(model=m.model, gpu=gpu, gpus=m.gpus, name=m.name, tenant=m.tenant,
                           tp=p.tp, pp=p.pp, dp=p.dp, ep=p.ep, cp=p.cp, zero_stage=p.zero,
                           sequence_parallel=p.sequence_parallel, virtual_stages=p.virtual_stages,
                           fsdp=p.fsdp, fsdp_shard=p.fsdp_shard, recompute=m.recompute, attention=m.attention,
                           precision=m.precision,
                           param_bytes=m.param_bytes, grad_bytes=grad_bytes,
                           grad_accumulation=m.grad_accumulation, pipeline_engine=m.pipeline_engine,
                           framework=m.framework, tp_comm_overlap=m.tp_comm_overlap,
                           overlap_param_gather=m.overlap_param_gather,
                           overlap_grad_reduce=m.overlap_grad_reduce, bucket_bytes=bucket,
                           first_stage_layers=m.first_stage_layers, last_stage_layers=m.last_stage_layers,
                           cp_comm=m.cp_comm,
                           seq_len=m.seq_len,
                           micro_batch=m.micro_batch, global_batch=m.global_batch,
                           iterations=m.iterations, efficiency=m.efficiency, submit_s=submit_s)
    except ConfigError as err:
        msg = str(err)
        raise ConfigError(f"{msg} [in {field}]" if field not in msg else msg) from None


def _chakra_job(m: JobModel, field: str, gpu: str, submit_s: float, base: Path | None) -> ChakraJob:
    if m.kind != "training" or m.model is not None or m.gpus is not None:
        what = "kind" if m.kind != "training" else ("model" if m.model is not None else "gpus")
        raise ConfigError(f"a job of Chakra traces takes its work and ranks from the traces: drop {what} "
                          f"({field}.{what})")
    path = Path(m.chakra)
    if not path.is_absolute() and base is not None and not path.exists() and (base / path).exists():
        path = base / path  # relative to the scenario file
    try:
        return ChakraJob(path=str(path), name=m.name, tenant=m.tenant, gpu=gpu, iterations=m.iterations,
                         ranks=m.ranks, tp=m.parallelism.tp, submit_s=submit_s)
    except ConfigError as err:
        raise ConfigError(f"{err} [in {field}.chakra]") from None


def _generated(g: GeneratorModel, fabric: Fabric, seed: int) -> list[Job]:
    """The jobs of ``workload.generator`` on ``fabric`` (its own stream of the scenario's seed)."""
    from flowherd.workload.llm_cluster import llm_cluster

    gps = int(np.bincount(fabric.gpu_server).max())
    rate = parse_rate_per_s(g.inference_rate, field="workload.generator.inference_rate")
    rng = np.random.default_rng([seed, 0x11C1])  # a stream apart from the arrivals'
    port = nic_bandwidth_bytes_per_s(fabric)
    return [dataclasses.replace(j, kv_wire_bytes_per_s=port) if isinstance(j, InferenceJob) else j
            for j in llm_cluster(g.jobs, fabric.num_gpus, seed=rng, profile=g.profile, load=g.load,
                            min_gpus=g.min_gpus, max_gpus=g.max_gpus, gpus_per_server=gps,
                            gpu=fabric.gpu_type[0], duration_scale=g.duration_scale,
                            max_iterations=g.max_iterations, micro_batches=g.micro_batches,
                            inference_share=g.inference_share, inference_replicas=g.inference_replicas,
                            inference_rate_per_s=rate, tenants=g.tenants)]


def scenario_from_mapping(data: Mapping[str, Any], *, base: Path | None = None) -> Scenario:
    """Validate a scenario mapping and build its core values; ``base``: the directory relative
    paths in it (``workload.jobs[].chakra``) may be relative to (the scenario file's)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a scenario must be a mapping, got {type(data).__name__} (scenario)")
    try:
        m = ScenarioModel.model_validate(dict(data))
    except ValidationError as err:
        raise _from_validation(err, data) from None
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
    port = nic_bandwidth_bytes_per_s(fabric)  # a service's KV wire rate unless it sets one
    jobs: list[Job] = [_job(j, f"workload.jobs[{i}]", default_gpu, base, port)
                       for i, j in enumerate(m.workload.jobs)]
    for i, j in enumerate(m.workload.jobs):  # seeded start offsets, drawn in job order
        jitter = _time(j.submit_jitter, f"workload.jobs[{i}].submit_jitter")
        if jitter > 0:
            offset = float(rng.uniform(0.0, jitter))
            jobs[i] = dataclasses.replace(jobs[i], submit_s=jobs[i].submit_s + offset)
    slos = {jobs[i].name: s for i, jm in enumerate(m.workload.jobs)
            if (s := _slo(jm, f"workload.jobs[{i}]")) is not None}
    streams: list[list[Job]] = [jobs]
    for i, a in enumerate(m.workload.arrivals):
        field = f"workload.arrivals[{i}]"
        mix = [_job(j, f"{field}.mix[{k}]", default_gpu, base, port) for k, j in enumerate(a.mix)]
        mix_slo = {k: s for k, jm in enumerate(a.mix) if (s := _slo(jm, f"{field}.mix[{k}]")) is not None}
        weights = a.weights or [1.0] * len(mix)
        if len(weights) != len(mix):
            raise ConfigError(f"weights has {len(weights)} entries, expected {len(mix)} ({field}.weights)")
        proc = PoissonArrivals(rate_per_s=parse_rate_per_s(a.rate, field=f"{field}.rate"),
                               until_s=_time(a.until, f"{field}.until"),
                               start_s=_time(a.start, f"{field}.start"), prefix=a.prefix,
                               mix=tuple(MixEntry(job=j, weight=w)
                                         for j, w in zip(mix, weights, strict=True)))
        arrived = proc.generate(rng)
        for j in arrived:  # an arrival of a template with an SLO keeps it (PoissonArrivals names)
            for k, slo in mix_slo.items():
                if j.name.endswith(f"-{mix[k].name}") and dataclasses.replace(
                        j, name=mix[k].name, submit_s=mix[k].submit_s) == mix[k]:
                    slos[j.name] = slo
                    break
        streams.append(arrived)
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
    if m.workload.generator is not None:
        streams.append(_generated(m.workload.generator, fabric, m.seed))
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
        from flowherd.control.model_file import read_model_file

        read_model_file(m.controller.name)  # checked here, before any run: nothing in it is run
    else:
        try:
            CONTROLLERS[m.controller.name]
        except FlowherdError as err:
            raise ConfigError(f"{err} (controller.name)") from None
    network = (load_network(m.network) if isinstance(m.network, str)
               else network_from_mapping(m.network, field="network"))
    levers = levers_from(m.controller.levers)
    default_slo = slo_from_mapping(m.workload.slo, "workload.slo")
    if default_slo is not None:
        slos = {j.name: slos.get(j.name, default_slo) for j in all_jobs if isinstance(j, InferenceJob)}
    slos = {k: v for k, v in slos.items() if k in {j.name for j in all_jobs}}
    return Scenario(name=m.name, seed=m.seed, fabric=fabric, jobs=tuple(all_jobs), background=background,
                    placement=m.placement.method, fidelity=m.simulation.fidelity, horizon_s=horizon_s,
                    routing=m.simulation.routing, controller=m.controller.name,
                    controller_params=dict(m.controller.params), on_controller_error=m.controller.on_error,
                    source=dict(data), network=network, levers=levers, slos=slos,
                    max_utilization=m.planner.max_utilization,
                    migration_cost_per_worker_s=m.planner.migration_cost_per_worker_s,
                    telemetry=telemetry_from_mapping(m.simulation.telemetry, horizon_s),
                    pace=network.model != "ideal" if m.planner.pace is None else m.planner.pace)


def read_scenario_mapping(name_or_path: str | Path) -> dict[str, Any]:
    """The raw mapping of an embedded scenario name (``default``) or a YAML file; in a file's, a
    relative ``workload.jobs[].chakra`` directory that exists beside the file is made absolute
    (so that the run, a sweep's workers and the stored scenario find it from anywhere)."""
    if str(name_or_path) in EMBEDDED:
        ref = importlib.resources.files("flowherd.data") / "scenarios" / f"{name_or_path}.yaml"
        return loading.load_yaml(ref.read_text(), source=repr(str(name_or_path)), what="scenario")
    path = Path(name_or_path)
    if not path.exists():
        close = difflib.get_close_matches(str(name_or_path), EMBEDDED, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"no scenario file {loading.clip(str(name_or_path))}{hint} (expected a YAML file "
                          f"or one of the embedded scenarios: {', '.join(EMBEDDED)})")
    return _chakra_beside(loading.read_yaml_file(path, what="scenario"), path.resolve().parent)


def _chakra_beside(data: Any, base: Path) -> Any:
    workload = data.get("workload") if isinstance(data, dict) else None
    if not isinstance(workload, dict):
        return data
    arrivals = workload.get("arrivals") or []
    lists = [workload.get("jobs")] + [a.get("mix") for a in arrivals if isinstance(a, dict)]
    for jobs in lists:
        for job in jobs if isinstance(jobs, list) else []:
            d = job.get("chakra") if isinstance(job, dict) else None
            if isinstance(d, str) and not Path(d).exists() and (base / d).exists():
                job["chakra"] = str(base / d)  # an absolute d exists or is reported as missing
    return data


def load_scenario(name_or_path: str | Path, *, seed: int | None = None) -> Scenario:
    """Read and validate a scenario; `seed` overrides the file's."""
    data = read_scenario_mapping(name_or_path)
    if seed is not None:
        data = {**data, "seed": seed}
    base = None if str(name_or_path) in EMBEDDED else Path(name_or_path).resolve().parent
    return scenario_from_mapping(data, base=base)
