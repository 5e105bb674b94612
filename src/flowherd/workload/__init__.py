"""LLM workloads: GPU and model catalogs, job specs, op graphs, arrivals, traces, background traffic.

The package produces op graphs over *ranks* and a rank -> GPU mapping; it knows nothing about links.
"""

from flowherd.workload.arrivals import (
    MixEntry,
    PoissonArrivals,
    merge_arrivals,
    parse_rate_per_s,
    poisson_times,
)
from flowherd.workload.background import FLOW_SIZE_CDFS, BackgroundFlows, BackgroundTraffic, FlowSizeCDF
from flowherd.workload.chakra_job import ChakraJob
from flowherd.workload.gpus import GPUS, GpuSpec, get_gpu
from flowherd.workload.inference import InferenceJob
from flowherd.workload.models import MODELS, ModelShape, get_model
from flowherd.workload.opgraph import GROUPS, OpGraph, Task, TaskKind
from flowherd.workload.traces import TRACES, TraceJob, TraceMapping, load_trace, map_trace_jobs, replay_trace
from flowherd.workload.training import Granularity, TrainingJob, rank_to_gpu, training_job_from_mapping

JobSpec = TrainingJob | InferenceJob | ChakraJob
"""Any job spec the simulator runs."""

__all__ = [
    "FLOW_SIZE_CDFS",
    "GPUS",
    "GROUPS",
    "MODELS",
    "TRACES",
    "BackgroundFlows",
    "BackgroundTraffic",
    "ChakraJob",
    "FlowSizeCDF",
    "GpuSpec",
    "Granularity",
    "InferenceJob",
    "JobSpec",
    "MixEntry",
    "ModelShape",
    "OpGraph",
    "PoissonArrivals",
    "Task",
    "TaskKind",
    "TraceJob",
    "TraceMapping",
    "TrainingJob",
    "get_gpu",
    "get_model",
    "load_trace",
    "map_trace_jobs",
    "merge_arrivals",
    "parse_rate_per_s",
    "poisson_times",
    "rank_to_gpu",
    "replay_trace",
    "training_job_from_mapping",
]
