"""Training frameworks: kernels, selective recomputation, overlap switches (flowherd.workload.frameworks)."""

from __future__ import annotations

import math

import pytest

from flowherd.collectives.ops import Op
from flowherd.errors import ConfigError
from flowherd.experiments.scenario import scenario_from_mapping
from flowherd.workload import TaskKind, TrainingJob, get_model
from flowherd.workload import compute as cm
from flowherd.workload.frameworks import (
    FRAMEWORKS,
    RMSNORM_EAGER_BYTES,
    ROPE_EAGER_BYTES,
    SWIGLU_EAGER_BYTES,
    eager_elementwise_bytes,
    per_op_recompute_linears,
)
from flowherd.workload.gpus import get_gpu

_H100 = get_gpu("h100")
_GPT = {"name": "gpt", "layers": 4, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 50304,
        "gated_mlp": False, "rotary": False}


def _fwd(model, framework: str) -> float:
    return cm.layer_times(get_model(model), 0, _H100, micro_batch=1, seq_len=4096, framework=framework).fwd_s


def _starts_with_a_compute(g, task) -> bool:
    """Whether ``task`` has the dependencies of a compute task of its pass (runs beside it)."""
    return any(t.kind == TaskKind.COMPUTE and t.deps == task.deps and t.phase == task.phase
               and t.micro_batch == task.micro_batch for t in g.tasks)


def test_eager_kernels_slow_llama_layers_but_not_layernorm_gelu_ones():
    # RMSNorm, complex rotary and SwiGLU are chains of ATen kernels in eager PyTorch; LayerNorm and
    # GELU are single native kernels there too (frameworks module docstring)
    assert _fwd("llama3-8b", "pytorch") > 1.10 * _fwd("llama3-8b", "megatron")
    assert _fwd(_GPT, "pytorch") == pytest.approx(_fwd(_GPT, "megatron"), rel=0.01)


def test_eager_elementwise_bytes_closed_form():
    m = get_model({"name": "t", "layers": 1, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn_hidden": 128,
                   "vocab": 100})
    got, _ = eager_elementwise_bytes(m, tokens=10, tokens_sp=10, tp=1, act_width=128, up=2, permute=0,
                                     dtype_bytes=2)
    norms = 2 * RMSNORM_EAGER_BYTES * 64 * 10
    act = SWIGLU_EAGER_BYTES * 128 * 10
    rope = ROPE_EAGER_BYTES * (4 + 2) * 16 * 10
    repeat_kv = 2 * (2 + 4) * 16 * 2 * 10
    residual = 2 * 3 * 64 * 2 * 10
    assert got == norms + act + rope + repeat_kv + residual


def test_per_op_checkpointing_recomputes_every_second_matmul():
    # torchtitan's policy: in wq, wk, wv, wo, w1, w3, w2 the 2nd, 4th and 6th (wk, wo, w3) run again
    m = get_model("llama3-8b")
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    assert per_op_recompute_linears(m, False) == pytest.approx(
        {"qkv": kv / (q + 2 * kv), "attn-out": 1.0, "mlp-up": 0.5})
    # a fused Wqkv, out, up, down block: out and down
    assert per_op_recompute_linears(get_model(_GPT), False) == {"attn-out": 1.0, "mlp-down": 1.0}


def test_selective_means_what_the_framework_recomputes():
    kw = dict(model="llama3-8b", gpus=8, fsdp=True, seq_len=8192, global_batch=8, recompute="selective")
    mega, titan = TrainingJob(**kw, framework="megatron"), TrainingJob(**kw, framework="torchtitan")
    m, tokens = mega.model, 8 * 8192
    # Megatron: the attention core's forward; per-op: a third of the layer's matmul FLOPs and more
    assert mega.iteration_flops() - mega.model_flops() == pytest.approx(
        m.layers * m.attention_score_flops(8192) * tokens)
    extra = (titan.iteration_flops() - titan.model_flops()) / tokens / m.layers
    mm = m.attention_matmul_flops() + m.mlp_flops(0)
    assert 0.3 * mm < extra < 0.45 * mm
    lt = cm.layer_times(m, 0, _H100, micro_batch=1, seq_len=8192, framework="torchtitan")
    assert lt.selective_fwd_s > 0.3 * lt.fwd_s and lt.selective_fwd_s < lt.fwd_s


def test_unknown_framework_names_the_field_and_the_closest():
    with pytest.raises(ConfigError, match=r"did you mean 'nemo'.*\(framework\)"):
        TrainingJob(model="llama3-8b", gpus=8, framework="nemmo")


def test_gradient_buckets_follow_the_framework():
    # Megatron-Core: max(40000000, 1000000 * dp) parameters; one bucket without overlap_grad_reduce;
    # PyTorch DDP 25 MiB; NeMo (Apex distributed_fused_adam) 125 MiB
    j = TrainingJob(model="llama3-8b", gpus=64 * 8, tp=8, dp=64, framework="megatron")
    assert j.bucket_bytes == 64_000_000 * 4  # parameters of FP32 gradients (BF16 reduced in FP32)
    assert TrainingJob(model="llama3-8b", gpus=16, tp=8, framework="megatron").bucket_bytes == 40_000_000 * 4
    assert TrainingJob(model="llama3-8b", gpus=16, tp=8).bucket_bytes == 25 * 2**20  # no framework named
    assert TrainingJob(model="llama3-8b", gpus=16, tp=8, overlap_grad_reduce=False).bucket_bytes == math.inf
    assert TrainingJob(model="llama3-8b", gpus=16, tp=8, framework="pytorch").bucket_bytes == 25 * 2**20
    assert TrainingJob(model="llama3-8b", gpus=16, tp=8, framework="nemo").bucket_bytes == 125 * 2**20
    assert TrainingJob(model="llama3-8b", gpus=16, tp=8, bucket_bytes=1e6).bucket_bytes == 1e6


def test_tp_comm_overlap_runs_the_collectives_beside_the_gemms():
    kw = dict(model="llama3-8b", gpus=8, tp=8, sequence_parallel=True, global_batch=2, seq_len=4096)
    plain, ub = TrainingJob(**kw), TrainingJob(**kw, tp_comm_overlap=True)
    assert ub.estimate_iteration_s() < plain.estimate_iteration_s()
    g = ub.iteration_graph()
    beside = [t for t in g.tasks if t.name.endswith("tp-overlap")]
    assert beside and all(_starts_with_a_compute(g, t) for t in beside)
    assert not any(_starts_with_a_compute(g, t) for t in plain.iteration_graph().tasks if t.group == "tp")
    # the same TP bytes in all, plus the forward's last reduce-scatter chunk after the GEMM
    tp = g.bytes_by_group_op()
    base = plain.iteration_graph().bytes_by_group_op()
    assert tp[("tp", Op.ALLGATHER)] == pytest.approx(base[("tp", Op.ALLGATHER)])
    assert tp[("tp", Op.REDUCESCATTER)] > base[("tp", Op.REDUCESCATTER)]
    with pytest.raises(ConfigError, match=r"\(tp_comm_overlap\)"):
        TrainingJob(model="llama3-8b", gpus=8, tp=8, tp_comm_overlap=True)


def test_overlapped_param_gather_feeds_the_first_forward():
    kw = dict(model="llama3-8b", gpus=16, tp=8, zero_stage=1, global_batch=4)
    late = TrainingJob(**kw).iteration_graph()
    early = TrainingJob(**kw, overlap_param_gather=True).iteration_graph()
    assert any(t.name.endswith("zero-ag-params") for t in late.tasks)
    gathers = [t for t in early.tasks if t.group == "zero"]
    assert gathers and not any(t.name.endswith("zero-ag-params") for t in early.tasks)
    assert not gathers[0].deps  # right after the previous iteration's step
    first = [t for t in early.tasks if t.kind == TaskKind.COMPUTE and t.phase == "fwd" and t.micro_batch == 0]
    ids = {t.id for t in gathers}
    assert len(first) > 1 and all(ids & set(t.deps) for t in first)
    assert early.bytes_by_group()["zero"] == pytest.approx(late.bytes_by_group()["zero"])


def test_first_forward_pays_nccl_sms_to_the_next_buckets_parameter_gather(monkeypatch):
    # Megatron-LM@f2e5db402c distrib_optimizer.py: bucket 0's all-gather is dispatched after the step
    # (lines 1336-1337), each next one in the forward pre-hook of the bucket before it (line 1475), so
    # while a bucket's layers compute in the first forward the next bucket's gather runs beside them;
    # its NCCL blocks hold nccl_channels of the SMs (`compute.comm_interference_s`), as the gradient
    # reduce-scatter's do beside the backward. Later micro-batches and the last bucket pay none.
    kw = dict(model="llama3-8b", gpus=16, tp=8, zero_stage=1, global_batch=4, overlap_param_gather=True)
    job = TrainingJob(**kw)

    def fwd(graph, mb):
        return [t for t in graph.tasks if t.kind == TaskKind.COMPUTE and t.phase == "fwd"
                and t.micro_batch == mb and t.stage == 0]

    real = job.iteration_graph()
    calls: list[tuple[float, float, bool]] = []

    def spy(compute_s, comm_bytes, gpu, *, across_servers=False, ranks=1, servers=1, **_):
        calls.append((compute_s, comm_bytes, across_servers, ranks, servers))
        return 0.0

    monkeypatch.setattr(cm, "comm_interference_s", spy)
    bare = job.iteration_graph()
    first = [c for c in calls if c[0] in {t.duration_s for t in fwd(bare, 0)}]
    gathers = [t for t in bare.tasks if t.group == "zero" and t.stage == 0]  # forward order
    assert len(fwd(bare, 0)) == len(gathers) > 2 and len(first) == len(gathers) - 1
    # what one GPU receives of the next bucket: (dp - 1) / dp of it; the task counts the 8 TP groups'
    per_gpu = [t.total_bytes / 8 * (job.dp - 1) / job.dp for t in gathers[1:]]
    assert [c[1] for c in first] == pytest.approx(per_gpu)
    assert all(c[2:] == (True, 2, 2) for c in first)  # the data-parallel pair sits in two servers
    monkeypatch.undo()
    expect = sum(cm.comm_interference_s(c[0], c[1], job.gpu, across_servers=True, ranks=2, servers=2)
                 for c in first)
    assert expect > 0
    assert sum(t.duration_s for t in fwd(real, 0)) - sum(t.duration_s for t in fwd(bare, 0)) == \
        pytest.approx(expect)
    assert [t.duration_s for t in fwd(real, 1)] == [t.duration_s for t in fwd(bare, 1)]


def test_all_gather_context_parallelism_waits_for_the_gather():
    kw = dict(model="llama3-8b", gpus=2, cp=2, seq_len=8192, global_batch=1)
    # TE's ring moves K/V beside the attention; an all-gather completes before the attention uses it
    for mode, beside in (("p2p", True), ("all-gather", False)):
        g = TrainingJob(**kw, cp_comm=mode).iteration_graph()
        cp = [t for t in g.tasks if t.group == "cp"]
        assert cp and all(_starts_with_a_compute(g, t) == beside for t in cp), mode


def test_yaml_keys_reach_the_job():
    sc = scenario_from_mapping({
        "name": "t", "fabric": {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "leaves": 1,
                                "spines": 1},
        "workload": {"jobs": [{"name": "a", "model": "llama3-8b", "gpus": 16, "framework": "torchtitan",
                               "parallelism": {"pp": 4, "dp": 4}, "first_stage_layers": 6,
                               "last_stage_layers": 6, "reduce_dtype": "fp32", "bucket_bytes": "50MiB",
                               "overlap_grad_reduce": True, "global_batch": 16}]}})
    j = sc.jobs[0]
    assert j.framework == "torchtitan" and j.grad_bytes == 4 and j.bucket_bytes == 50 * 2**20
    assert [len(j.stage_layers(p)) for p in range(4)] == [6, 10, 10, 6]
    bad = {"name": "a", "model": "llama3-8b", "gpus": 8, "reduce_dtype": "fp32", "grad_bytes": 2}
    fabric = {"kind": "leaf-spine", "servers": 1, "gpus_per_server": 8, "leaves": 1, "spines": 1}
    with pytest.raises(ConfigError, match=r"reduce_dtype"):
        scenario_from_mapping({"name": "t", "fabric": fabric, "workload": {"jobs": [bad]}})


def test_every_framework_builds_an_iteration():
    for name in FRAMEWORKS:
        j = TrainingJob(model="llama3-8b", gpus=16, tp=2, pp=2, global_batch=8, framework=name,
                        recompute="selective")
        g = j.iteration_graph()
        assert g.critical_path_s() > 0 and j.hfu(1.0) > j.mfu(1.0)


def test_megatron_reduces_bf16_gradients_in_fp32():
    # megatron/training/arguments.py: "bfloat16 requires gradient accumulation and all-reduce to be done
    # in fp32" (accumulate_allreduce_grads_in_fp32 -> DistributedDataParallelConfig.grad_reduce_in_fp32)
    base = dict(model="llama3-8b", gpus=16, tp=8, zero_stage=1, global_batch=4, seq_len=1024)
    assert TrainingJob(**base, framework="megatron").grad_bytes == 4
    assert TrainingJob(**base, framework="megatron", precision="fp8").grad_bytes == 4  # BF16 weights
    assert TrainingJob(**base).grad_bytes == 2  # no framework named: BF16, as before
    assert TrainingJob(**base, framework="nemo").grad_bytes == 2
    assert TrainingJob(**base, framework="pytorch").grad_bytes == 2
    assert TrainingJob(**base, framework="megatron", grad_bytes=2).grad_bytes == 2  # stated wins
    wide = TrainingJob(**base, framework="megatron").iteration_graph().bytes_by_group()["dp"]
    narrow = TrainingJob(**base, framework="megatron", grad_bytes=2).iteration_graph().bytes_by_group()["dp"]
    assert wide == pytest.approx(2 * narrow)
    fab = {"kind": "leaf-spine", "servers": 2, "gpus_per_server": 8, "leaves": 1, "spines": 1}
    sc = scenario_from_mapping({"name": "g", "fabric": fab,
                                "workload": {"jobs": [{"name": "a", "model": "llama3-8b", "gpus": 16,
                                                       "framework": "megatron", "parallelism": {"tp": 8}}]}})
    assert sc.jobs[0].grad_bytes == 4
