"""The scenario file's schema: the pydantic models a scenario YAML is validated against.

They sit apart from `flowherd.experiments.scenario`, which converts a validated file into core
values and re-exports them, because they are the file format alone: what keys a section takes,
their types, bounds and defaults (`docs/generate_schema.py` writes the JSON schema from
`ScenarioModel`), with none of the conversion.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from flowherd.units import parse_time
from flowherd.workload import parse_rate_per_s

__all__ = [
    "MAX_SEQ_LEN", "ArrivalModel", "BackgroundModel", "ControllerModel", "GeneratorModel",
    "JobModel", "Parallelism", "PlacementModel", "PlannerModel", "ScenarioModel", "SimulationModel",
    "TraceModel", "WorkloadModel",
]

#: Longest sequence a job may declare, tokens: 2**24 = 16,777,216, above the longest context of a
#: released model (Llama 4 Scout, 10M tokens; Meta, April 2025). A larger value is a typo (10**12
#: was accepted and every job ran on 0 GPUs).
MAX_SEQ_LEN = 2**24


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _time_value(v: str | float) -> str | float:
    parse_time(v)  # the message names the field: `_from_validation` adds it
    return v


def _rate_value(v: str | float) -> str | float:
    parse_rate_per_s(v)
    return v


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
    fsdp_shard: int | None = Field(None, ge=1)  # hybrid sharding: GPUs of one FSDP shard group


class JobModel(_Model):
    """One job. Training jobs take the parallelism block; inference jobs take `serving`; a job of
    Chakra traces takes ``chakra`` (its directory), ``iterations``, ``ranks`` and ``parallelism.tp``
    (`flowherd.workload.ChakraJob`) instead of a model."""

    name: str
    tenant: str = "default"
    kind: Literal["training", "inference"] = "training"
    model: str | dict[str, Any] | None = None
    chakra: str | None = None
    ranks: int | None = Field(None, ge=1)
    gpus: int | None = Field(None, ge=1)
    gpu: str | None = None
    parallelism: Parallelism = Parallelism()
    seq_len: int = Field(4096, ge=1, le=MAX_SEQ_LEN)
    micro_batch: int = Field(1, ge=1)
    global_batch: int | None = Field(None, ge=1)
    iterations: int = Field(1, ge=1)
    recompute: Literal["none", "selective", "full"] = "none"
    attention: Literal["flash", "unfused", "triton", "cudnn", "flash2"] = "flash"
    precision: Literal["bf16", "fp8"] = "bf16"
    param_bytes: int | None = Field(None, ge=1)  # None: the activation dtype (TrainingJob.param_bytes)
    grad_bytes: int | None = Field(None, ge=1)  # None: the framework's (4 under megatron, else 2)
    grad_accumulation: Literal["fused", "fp32-buffer"] = "fused"
    pipeline_engine: Literal["megatron", "deepspeed"] | None = None  # None: the framework's
    framework: str | None = None  # flowherd.workload.frameworks.FRAMEWORKS; None: Megatron, 25 MiB buckets
    tp_comm_overlap: bool | None = None  # None: the framework's default (as the next two)
    overlap_param_gather: bool | None = None
    overlap_grad_reduce: bool | None = None
    bucket_bytes: str | float | None = None  # e.g. 25MiB; None: the framework's bucket
    first_stage_layers: int | None = Field(None, ge=1)
    last_stage_layers: int | None = Field(None, ge=1)
    reduce_dtype: Literal["bf16", "fp32"] | None = None  # FSDP's MixedPrecision(reduce_dtype): grad_bytes
    cp_comm: Literal["p2p", "all-gather"] = "p2p"
    efficiency: float | None = Field(None, gt=0, le=1)  # None: the compute model
    submit: str | float = 0.0
    submit_jitter: str | float = 0.0
    serving: dict[str, Any] = Field(default_factory=dict)

    _submit = field_validator("submit")(_time_value)


class ArrivalModel(_Model):
    process: Literal["poisson"] = "poisson"
    rate: str | float
    mix: list[JobModel] = Field(min_length=1)
    weights: list[float] | None = None
    until: str | float
    start: str | float = 0.0
    prefix: str = "arr"

    # checked here, not after validation: an error is told in the order of the document (a
    # negative rate before a missing name further down)
    _rate = field_validator("rate")(_rate_value)
    _times = field_validator("until", "start")(_time_value)


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


class GeneratorModel(_Model):
    """A generated multi-tenant LLM cluster (`flowherd.workload.llm_cluster.llm_cluster`)."""

    kind: Literal["llm-cluster"] = "llm-cluster"
    jobs: int = Field(ge=0)
    profile: Literal["kalos", "seren"] = "kalos"
    load: float = Field(1.0, gt=0)
    min_gpus: int = Field(1, ge=1)
    max_gpus: int | None = Field(None, ge=1)
    duration_scale: float = Field(1.0, gt=0)
    max_iterations: int | None = Field(None, ge=1)
    micro_batches: int = Field(8, ge=1)
    inference_share: float = Field(0.0, ge=0, lt=1)
    inference_replicas: int = Field(2, ge=1)
    inference_rate: str | float = 2.0
    tenants: int = Field(4, ge=1)


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
    slo: dict[str, Any] | None = None
    arrivals: list[ArrivalModel] = []
    traces: list[TraceModel] = []
    generator: GeneratorModel | None = None
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
    migration_cost_per_worker_s: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="job migration as a lever of the plan "
        "(flowherd.planning.migration): seconds each moved worker is down (checkpoint, transfer, "
        "restore; MonkeyTree measured 9.02). Omitted: no migration")


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
    telemetry: StrictBool | dict[str, Any] = False  # flowherd.experiments.telemetry (docs/telemetry.md)

    _horizon = field_validator("horizon")(_time_value)


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
