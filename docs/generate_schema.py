"""Write docs/scenario-schema.md, the reference of every scenario key, from the pydantic models.

Keys, types, defaults and bounds come from `flowherd.experiments.scenario_schema.ScenarioModel` and
`flowherd.fabric.spec.FabricSpec` (and the fields of `InferenceJob` for ``serving``, of
`ModelShape` for an inline ``model``), so the page cannot list a key the code does not take or
miss one it does; the one-line meanings are below (or a field's own pydantic ``description``).
``tests/test_docs.py`` fails when the page is not what this script writes now.

    python docs/generate_schema.py           # rewrite the page
    python docs/generate_schema.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

OUT = Path(__file__).resolve().parent / "scenario-schema.md"

# What each key means, by its path (list items as []). Units are the ones the value accepts.
MEANING = {
    "name": "Label of the scenario (reports, result store).",
    "seed": "Seed of every random choice (arrivals, trace windows, background, ECMP hashing): same "
            "scenario and seed, same numbers.",
    "fabric": "A preset name (`flowherd fabric --list`) or a fabric mapping (next table).",
    "workload": "The jobs: listed, arriving by a process, replayed from traces; background traffic.",
    "workload.jobs": "Jobs named one by one.",
    "workload.jobs[].name": "Job label (unique in the scenario).",
    "workload.jobs[].tenant": "Who the job belongs to (per-tenant slowdown and fairness).",
    "simulation.telemetry": "Per-link time series (utilization, queue, PFC pause) and per-collective records "
                            "as Parquet beside the store: true, or {bin, flows} (docs/telemetry.md); off by "
                            "default.",
    "workload.jobs[].chakra": "A directory of Chakra execution traces, one `<prefix>.<rank>.et` per rank "
                              "(docs/chakra.md): the job replays them instead of a model; one GPU per rank.",
    "workload.jobs[].ranks": "A job of Chakra traces: re-use a purely data-parallel trace at this many ranks "
                             "(an approximation: weak scaling, docs/chakra.md).",
    "workload.jobs[].kind": "`training` (takes `parallelism`) or `inference` (takes `serving`).",
    "workload.jobs[].model": "A catalog name (`flowherd models`) or an inline shape (keys of the model "
                             "table below).",
    "workload.jobs[].gpus": "GPUs of a training job (tp x pp x dp x cp); required for training.",
    "workload.jobs[].gpu": "GPU catalog name (`flowherd gpus`); default: the fabric's.",
    "workload.jobs[].parallelism": "How a training job is split over its GPUs.",
    "workload.jobs[].parallelism.tp": "Tensor-parallel size.",
    "workload.jobs[].parallelism.pp": "Pipeline-parallel stages.",
    "workload.jobs[].parallelism.dp": "Data-parallel replicas (default: what gpus leaves).",
    "workload.jobs[].parallelism.ep": "Expert-parallel size (MoE models).",
    "workload.jobs[].parallelism.cp": "Context-parallel size.",
    "workload.jobs[].parallelism.zero": "ZeRO stage (0: plain data parallelism; 1-3 shard optimizer, "
                                        "gradients, weights).",
    "workload.jobs[].parallelism.sequence_parallel": "Megatron sequence parallelism (TP all-reduces become "
                                                     "reduce-scatter + all-gather).",
    "workload.jobs[].parallelism.virtual_stages": "Virtual pipeline stages per rank (Megatron-LM's "
                                                  "interleaved 1F1B; 1: plain 1F1B).",
    "workload.jobs[].parallelism.fsdp": "PyTorch FSDP (full sharding, as ZeRO-3) instead of plain data "
                                        "parallelism.",
    "workload.jobs[].parallelism.fsdp_shard": "Hybrid sharding (FSDP's HYBRID_SHARD): GPUs of one shard "
                                              "group (consecutive data-parallel ranks); the groups replicate "
                                              "and all-reduce each reduced shard. null: one group of all.",
    "workload.jobs[].recompute": "Activation recomputation: none, selective (attention core) or full "
                                 "(every layer's forward, with its TP collectives).",
    "workload.jobs[].param_bytes": "Bytes per element of the weights the framework keeps (and ZeRO-3 / FSDP "
                                   "all-gathers); null: the activation dtype. 4 is PyTorch FSDP with FP32 "
                                   "weights under autocast: every pass casts them.",
    "workload.jobs[].grad_bytes": "Bytes per gradient element in the data-parallel reduction "
                                  "(2: BF16, 4: FP32); null: 4 under framework megatron with BF16 "
                                  "activations (Megatron-LM reduces BF16 gradients in FP32), else 2.",
    "workload.jobs[].grad_accumulation": "How gradients are summed over micro-batches: fused (into the "
                                         "FP32 main gradient by the weight-gradient GEMM) or fp32-buffer "
                                         "(DeepSpeed's BF16_Optimizer: a cast-and-add after every "
                                         "micro-batch).",
    "workload.jobs[].pipeline_engine": "Whose pipeline engine runs the schedule: megatron (gradients "
                                       "reduced during the last backward) or deepspeed (blocking sends, "
                                       "gradients all-reduced after the last backward); null: the "
                                       "framework's.",
    "workload.jobs[].framework": "The training framework: megatron, nemo, deepspeed, torchtitan or "
                                 "pytorch (fsdp, eager): its kernels (fused or eager ATen), what "
                                 "`recompute: selective` repeats, whether 1F1B sends block, its gradient "
                                 "buckets and overlap defaults (docs/frameworks.md); null: Megatron's, "
                                 "with 25 MiB buckets.",
    "workload.jobs[].tp_comm_overlap": "Transformer Engine's overlap of the sequence-parallel TP "
                                       "collectives with the GEMMs (--tp-comm-overlap); null: the "
                                       "framework's default.",
    "workload.jobs[].overlap_param_gather": "ZeRO-1's all-gather of the updated weights overlapped with "
                                            "the next forward, bucket by bucket (--overlap-param-gather); "
                                            "null: the framework's default.",
    "workload.jobs[].overlap_grad_reduce": "Reduce gradients bucket by bucket during the last backward "
                                           "(true) or in one bucket after it (false); null: the "
                                           "framework's default.",
    "workload.jobs[].bucket_bytes": "Gradient bucket cap, a size (e.g. 25MiB); null: the framework's.",
    "workload.jobs[].first_stage_layers": "Layers on the first pipeline stage (Megatron's "
                                          "--num-layers-in-first-pipeline-stage); the others share the "
                                          "rest evenly.",
    "workload.jobs[].last_stage_layers": "Layers on the last pipeline stage.",
    "workload.jobs[].reduce_dtype": "FSDP's MixedPrecision reduce_dtype: bf16 or fp32 (sets grad_bytes).",
    "workload.jobs[].cp_comm": "Context parallelism's K/V exchange: p2p (Transformer Engine's ring, beside "
                               "the attention) or all-gather (the whole K/V gathered first, as Llama 3).",
    "workload.jobs[].attention": "Attention kernels the run used: flash (fused, causal blocks skipped; "
                                 "FlashAttention-3 on H100), triton (FlashAttention in Triton, slower "
                                 "than FA2), cudnn (cuDNN's fused attention, Transformer Engine's choice "
                                 "on Hopper), flash2 (PyTorch SDPA's FlashAttention-2) or unfused "
                                 "(Megatron-LM before flash attention: the s x s "
                                 "scores through HBM).",
    "workload.jobs[].precision": "GEMM number format: bf16 or fp8 (Transformer Engine's FP8 projections "
                                 "at the GPU's FP8 peak; H100, H200, B200).",
    "workload.jobs[].seq_len": "Tokens per sequence.",
    "workload.jobs[].micro_batch": "Sequences per micro-batch.",
    "workload.jobs[].global_batch": "Sequences per iteration (default: micro_batch x dp).",
    "workload.jobs[].iterations": "Training iterations until the job ends.",
    "workload.jobs[].efficiency": "Fraction of the GPU's peak FLOP/s the compute reaches, in (0, 1].",
    "workload.jobs[].submit": "Submission time (`30s`, `2min`, or seconds).",
    "workload.jobs[].submit_jitter": ("Adds a start offset drawn uniformly in [0, this) from the scenario's "
                                      "seed (one draw per job, in job order; 0: none)."),
    "workload.jobs[].serving": "An inference job's service (keys of the serving table below).",
    "workload.slo": "Objectives of every inference service without its own `serving.slo` (arrivals, "
                    "generator): `{ttft: 450ms, tpot: 40ms}`, bounds on the 99th percentile of the time to "
                    "first token and per output token (flowherd.workload.slo).",
    "workload.arrivals": "Job arrival processes.",
    "workload.arrivals[].process": "Arrival process (Poisson).",
    "workload.arrivals[].rate": "Mean arrivals (`60/h`, `1/min`, or per second).",
    "workload.arrivals[].mix": "Job templates drawn for each arrival (keys of `workload.jobs[]`).",
    "workload.arrivals[].weights": "Probability of each template (default: equal).",
    "workload.arrivals[].until": "End of the arrivals.",
    "workload.arrivals[].start": "Start of the arrivals.",
    "workload.arrivals[].prefix": "Name prefix of the arriving jobs.",
    "workload.traces": "Replays of real cluster traces.",
    "workload.generator": "A generated multi-tenant LLM cluster (`flowherd.workload.llm_cluster`): jobs "
                          "drawn from the Acme clusters' published figures (NSDI'24), on the fabric's GPUs.",
    "workload.generator.kind": "The generator: `llm-cluster`.",
    "workload.generator.jobs": "Training and evaluation jobs drawn (inference services come on top).",
    "workload.generator.profile": "Whose figures: `kalos` (pretraining-heavy) or `seren` (mixed).",
    "workload.generator.load": "Offered GPU load: the jobs' GPU-seconds per second over the cluster's GPUs "
                               "(sets the Poisson arrival rate).",
    "workload.generator.min_gpus": "Keep only jobs of at least this many GPUs (the published distribution "
                                   "conditioned on size).",
    "workload.generator.max_gpus": "Largest job, GPUs (default: the cluster less the services).",
    "workload.generator.duration_scale": "Factor on every duration (time compression), hence iterations.",
    "workload.generator.max_iterations": "Cap on a training job's iterations.",
    "workload.generator.micro_batches": "Micro-batches per data-parallel replica and iteration "
                                        "(at least pp).",
    "workload.generator.inference_share": "Share of the GPUs given to disaggregated Llama 3 70B services "
                                          "(prefill and decode pools, KV caches over the network).",
    "workload.generator.inference_replicas": "Prefill and decode replicas (TP 8 each) per service.",
    "workload.generator.inference_rate": "Requests per prefill replica, a rate (`2/s`) or a number per "
                                         "second.",
    "workload.generator.tenants": "Tenants the jobs are spread over.",
    "workload.traces[].path": "An embedded trace (`philly`, ...) or a trace file.",
    "workload.traces[].max_jobs": "Most jobs replayed.",
    "workload.traces[].skip": "Eligible jobs skipped first (another window of the trace).",
    "workload.traces[].seed_stride": "Seed s skips s x seed_stride more (each seed another window).",
    "workload.traces[].min_gpus": "Only jobs of at least this many GPUs.",
    "workload.traces[].gpu_scale": "k times the trace's GPUs (today's LLM jobs are larger than 2017's).",
    "workload.traces[].duration_scale": "Scales durations, hence iterations.",
    "workload.traces[].micro_batches": "Micro-batches per replica and iteration (the global batch).",
    "workload.traces[].medium_from_gpus": "Jobs from this many GPUs get the medium model.",
    "workload.traces[].large_from_gpus": "Jobs from this many GPUs get the large model.",
    "workload.traces[].max_iterations": "Cap on a replayed job's iterations.",
    "workload.traces[].time_scale": "Scales submit times (compresses the trace).",
    "workload.background": "Background (non-job) traffic between servers.",
    "workload.background.load": "Mean offered load, fraction of the server links' capacity, in [0, 1).",
    "workload.background.distribution": "Flow-size distribution (`web_search`, `data_mining`, ...).",
    "workload.background.max_flows_per_s": "Cap on flows per second (larger flows keep the load).",
    "workload.background.fast_forward": "`exact`, or an approximation where jobs fast-forward across "
                                        "background: `sampled`, `mean`, `spread` (for large clusters, "
                                        "docs/scale.md).",
    "workload.background.sample_every": "Sampling period of `sampled`.",
    "placement": "Where jobs run.",
    "placement.method": "`first-fit`, `packed`, `spread`, or a planner method (`random`, `topology`, "
                        "`hetero`, `milp`, `heuristic`; `flowherd plan`).",
    "controller": "The online controller.",
    "planner": "The offline planner's settings (flowherd.planning.plan.make_plan).",
    "planner.max_utilization": "Target utilization of every link: the planner's routes keep each link's "
                               "predicted load (the job's traffic, the concurrent jobs' and the background) "
                               "at or under it where feasible; the plan names the links over it "
                               "(flowherd.planning.congestion).",
    "network": "The network model: ideal (fluid max-min), roce (lossless: PFC, DCQCN-like), tcp (lossy: "
               "ECN, DCTCP-like, drops and timeouts), a switch preset, or a mapping "
               "(flowherd.engine.network.config). Omitted: ideal, so that a scenario written before keeps "
               "its numbers and closed-form checks stay exact; the embedded `default` and "
               "benchmarks/scenarios/ set `roce`, what a GPU back-end fabric is.",
    "controller.name": "`none`, `adaptive`, `cassini`, `crux`, `sincronia`, `varys`, `mltcp`, `threshold`, "
                       "`interleave`, `flowherd`, or the path of a model trained by `flowherd train` (.zip).",
    "controller.levers": "What the controller may decide (every controller, baselines included; a decision "
                         "outside it is refused and counted): `buffer` (delays and paths, the default), "
                         "`weighted` (+ weighted shares), `priority` (+ 8 strict classes above background "
                         "traffic), or a mapping of `delay`, `paths`, `weights` (true/false), "
                         "`priority_classes` (K, 0 = none), `above_background` (true/false); unnamed fields "
                         "as in `buffer`.",
    "controller.params": "Keyword arguments of the controller.",
    "controller.on_error": "A failing decision: `skip` it, or `stop` the run.",
    "simulation": "How the run is simulated.",
    "simulation.fidelity": "`step` (every collective step), `collective` (one flow set per collective) "
                           "or `phase` (fast-forwarded iterations).",
    "simulation.horizon": "Simulated time; jobs unfinished then count as unfinished.",
    "simulation.routing": "`ecmp`, `spray` or `shortest`.",
    # fabric mapping
    "kind": "Topology family; `preset` takes only `name`; `alibaba-lingjun` is the real host -> ToR -> "
            "aggregation mapping of Alibaba's Lingjun cluster (847 hosts, 119 ToR groups; no `servers`).",
    "fabric.name": "Preset name (kind `preset`) or a label.",
    "servers": "Servers (hosts).",
    "gpus_per_server": "GPUs per server.",
    "nics_per_server": "NICs per server (default: one per GPU).",
    "gpu": "GPU catalog name for every server, or one per server.",
    "nic_bandwidth": "NIC speed per direction (`400Gbps`).",
    "nvlink_bandwidth": "NVLink per GPU per direction (`450GB/s`); null: no NVLink.",
    "nvls": "NVSwitch in-switch reduction (NCCL's NVLS): `true`, `false`, or one flag per server; "
            "overrides a preset's own.",
    "link_latency": "Latency of every cable (`1us`).",
    "leaves": "Leaf switches (leaf-spine).",
    "spines": "Spine switches.",
    "oversubscription": "Downlink : uplink capacity at the leaves (2 means 2:1).",
    "k": "Fat-tree arity (even).",
    "servers_per_su": "Servers per scalable unit (rail-optimized).",
    "sus_per_pod": "Scalable units per pod (3-tier rail-optimized).",
    "spines_per_pod": "Spines per pod.",
    "cores": "Core switches (3 tiers).",
    "leaf_uplinks": "Uplinks per leaf.",
    "spine_uplinks": "Uplinks per spine.",
    "leaf_spine_bandwidth": "Speed of a leaf-spine cable (default: the NIC's).",
    "spine_core_bandwidth": "Speed of a spine-core cable (default: the NIC's).",
    "servers_per_tor": "Servers per ToR (clos3).",
    "tors_per_pod": "ToRs per pod (clos3).",
    "tor_oversubscription": "ToR downlink : uplink (clos3; alibaba-lingjun: of a ToR group's 8-host design).",
    "spine_oversubscription": "Spine downlink : uplink (clos3).",
    "aggregation_oversubscription": "Kind `preset`: the aggregation tier's downlink : uplink of a preset "
                                    "that has one (meta-24k 7, the 3-tier SuperPOD 1, the 2-Pod HPN 15); "
                                    "kind `alibaba-lingjun`: aggregation (PSW) : core (default 1).",
}


def _type(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type(typing.get_args(tp)[0])
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "mapping"
    return {str: "text", int: "integer", float: "number", bool: "true/false"}.get(tp, str(tp))


def _bounds(info: Any) -> str:
    out = []
    for m in info.metadata:
        for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "items >="),
                          ("multiple_of", "multiple of")):
            v = getattr(m, attr, None)
            if v is not None:
                out.append(f"{sym} {v}")
    ann = info.annotation
    for a in typing.get_args(ann) or (ann,):
        if typing.get_origin(a) is typing.Annotated:
            for m in typing.get_args(a)[1:]:
                for attr, sym in (("ge", ">="), ("gt", ">"), ("multiple_of", "multiple of")):
                    v = getattr(m, attr, None)
                    if v is not None:
                        out.append(f"{sym} {v}")
    return ", ".join(dict.fromkeys(out))


def _default(info: Any) -> str:
    if info.is_required():
        return "**required**"
    v = info.default_factory() if info.default_factory is not None else info.default
    if v is PydanticUndefined:
        return ""
    if isinstance(v, BaseModel):
        return "(defaults)"
    return f"`{v!r}`" if not isinstance(v, str) else f"`{v}`"


def _model_of(tp: Any) -> type[BaseModel] | None:
    for a in (tp, *typing.get_args(tp)):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
        if typing.get_origin(a) in (list,) and typing.get_args(a):
            inner = typing.get_args(a)[0]
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _rows(model: type[BaseModel], prefix: str, missing: list[str]) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        key = path.removeprefix("fabric:")
        meaning = info.description or MEANING.get(key) or MEANING.get(path)
        if meaning is None:
            missing.append(key)
            meaning = ""
        rows.append(f"| `{key}` | {_type(info.annotation)} | {_default(info)} | {_bounds(info)} "
                    f"| {meaning} |")
        sub = _model_of(info.annotation)
        if sub is not None and path != "workload.arrivals[].mix":  # mix items are jobs: listed above
            is_list = typing.get_origin(info.annotation) is list or any(
                typing.get_origin(a) is list for a in typing.get_args(info.annotation))
            rows += _rows(sub, f"{path}{'[]' if is_list else ''}.", missing)
    return rows


def _attributes(cls: type) -> dict[str, str]:
    """A dataclass's Google-style ``Attributes:`` section, name -> text."""
    doc = inspect.getdoc(cls) or ""
    section = doc.split("Attributes:", 1)[1] if "Attributes:" in doc else ""
    out: dict[str, str] = {}
    current: list[str] = []
    for line in section.splitlines():
        m = re.match(r"^    ([a-z_, ]+): (.*)$", line)
        if m:
            current = [n.strip() for n in m.group(1).split(",")]
            for n in current:
                out[n] = m.group(2).strip()
        elif line.startswith("        ") and current:
            for n in current:
                out[n] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    return out


def _dataclass_rows(cls: type, skip: tuple[str, ...]) -> list[str]:
    meaning = _attributes(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        if f.default is not dataclasses.MISSING:
            default = f"`{f.default!r}`" if not isinstance(f.default, str) else f"`{f.default}`"
        else:
            default = "**required**"
        shown = _type(f.type) if not isinstance(f.type, str) else f.type.replace("|", "\\|")
        rows.append(f"| `{f.name}` | {shown} | {default} | {meaning.get(f.name, '')} |")
    return rows


def render() -> tuple[str, list[str]]:
    """The page, and the keys that have no meaning written yet."""
    from flowherd.experiments.scenario_schema import ScenarioModel
    from flowherd.fabric.spec import KIND_KEYS, FabricSpec
    from flowherd.workload.inference import InferenceJob
    from flowherd.workload.models import ModelShape

    missing: list[str] = []
    head = "| key | type | default | bounds | meaning |\n|---|---|---|---|---|"
    fabric_rows = []
    for name, info in FabricSpec.model_fields.items():
        key = "fabric.name" if name == "name" else name
        kinds = ", ".join(k for k, keys in KIND_KEYS.items() if (name in keys and k != "preset") or
                          (k == "preset" and name in ("kind", "name")))
        meaning = info.description or MEANING.get(key)
        if meaning is None:
            missing.append(f"fabric.{name}")
            meaning = ""
        fabric_rows.append(f"| `{name}` | {_type(info.annotation)} | {_default(info)} | {_bounds(info)} | "
                           f"{meaning} | {kinds} |")
    parts = [
        "# Scenario schema reference",
        "",
        "<!-- Generated by docs/generate_schema.py from the pydantic models; do not edit by hand "
        "(`make docs` rewrites it, tests/test_docs.py checks it is current). -->",
        "",
        "A scenario is one YAML file (or the embedded `default`, "
        "`src/flowherd/data/scenarios/default.yaml`). Every key below is optional unless marked "
        "required; an unknown key is an error naming it and the closest known one. Times take units "
        "(`500ms`, `30s`, `2min`, `4h`) or are seconds; rates and sizes take units (`400Gbps`, `450GB/s`, "
        "`1GiB`; `MiB` is 2^20 bytes, `MB` 10^6). Nested keys are written with dots; `[]` marks a list item.",
        "",
        "## Scenario",
        "",
        head,
        *_rows(ScenarioModel, "", missing),
        "",
        "## Fabric mapping (`fabric:` when not a preset name)",
        "",
        "Each `kind` takes the keys listed beside them; a key of another kind is an error.",
        "",
        "| key | type | default | bounds | meaning | kinds |\n|---|---|---|---|---|---|",
        *fabric_rows,
        "",
        "## Serving (`workload.jobs[].serving`, inference jobs)",
        "",
        "| key | type | default | meaning |\n|---|---|---|---|",
        *_dataclass_rows(InferenceJob, ("model", "gpu", "name", "tenant", "submit_s", "efficiency")),
        "| `slo` | mapping | `None` | Objectives: `{ttft: 450ms, tpot: 40ms}`, bounds on the 99th percentile "
        "of the time to first token and per output token (MLPerf's server rule; flowherd.workload.slo). |",
        "",
        "## Inline model shape (`workload.jobs[].model` as a mapping)",
        "",
        "| key | type | default | meaning |\n|---|---|---|---|",
        *_dataclass_rows(ModelShape, ()),
        "",
    ]
    return "\n".join(parts), missing


def main(argv: list[str]) -> int:
    text, missing = render()
    if missing:
        print(f"keys without a meaning in docs/generate_schema.py MEANING: {', '.join(missing)}",
              file=sys.stderr)
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run `make docs` (python docs/generate_schema.py)", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
