"""Megatron-LM's interleaved 1F1B schedule: order, point-to-point pattern, bubble, layer split."""

from __future__ import annotations

import pytest
from graph_checks import passes_and_step

from flowherd.errors import ConfigError
from flowherd.workload import ModelShape, TaskKind, TrainingJob
from flowherd.workload.pipeline import schedule_order

_U = ModelShape(name="u", layers=16, hidden=1024, heads=8, ffn_hidden=4096, vocab=2)


@pytest.mark.parametrize(("p", "v", "m"), [(4, 1, 8), (4, 2, 8), (4, 4, 8), (2, 2, 6), (4, 2, 12), (4, 2, 6),
                                           (8, 2, 16)])
def test_interleaved_bubble_is_p_minus_1_over_m_v_of_the_ideal(p, v, m):
    # Narayanan et al. SC'21, section 2.2.2: with v model chunks per device the bubble is
    # (p - 1) / (m v) of the ideal m (t_f + t_b); uniform stages, communication free (idle fabric of
    # infinite speed), vocab=2 makes the logit layer negligible
    j = TrainingJob(model=_U, gpus=p, pp=p, global_batch=m, seq_len=1024, efficiency=0.45, virtual_stages=v)
    g = j.iteration_graph("layer")
    passes, step0 = passes_and_step(g)
    ideal = passes[0]
    assert g.critical_path_s() - step0 == pytest.approx(ideal * (1 + (p - 1) / (m * v)), rel=1e-4)


def test_schedule_table_matches_megatron_example():
    # schedules.py, get_schedule_table docstring: PP2, N3 M5, VP2 -> micro-batches 0 1 2 0 1 2 3 4 3 4
    # (here N = m when pp does not divide m); with N = pp = 2 and m = 4: 0 1 0 1 2 3 2 3
    order = schedule_order(2, 0, 4, 2)
    fwd = [(mb, v) for ph, mb, v in order if ph == "fwd"]
    assert fwd == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    bwd = [(mb, v) for ph, mb, v in order if ph == "bwd"]
    assert bwd == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (3, 1), (2, 0), (3, 0)]
    # warm-up forwards: 2 (pp - p - 1) + (V - 1) pp (get_pp_rank_microbatches)
    assert [ph for ph, _, _ in order[:4]] == ["fwd"] * 4 and order[4][0] == "fwd" and order[5][0] == "bwd"
    last = schedule_order(2, 1, 4, 2)
    assert [ph for ph, _, _ in last[:3]] == ["fwd", "fwd", "fwd"] and last[3][0] == "bwd"


def test_interleaving_multiplies_point_to_point_traffic_and_wraps_around():
    # every micro-batch crosses pp * V - 1 chunk boundaries each way instead of pp - 1
    base = dict(model=_U, gpus=4, pp=4, global_batch=8, seq_len=1024, efficiency=0.45)
    one = TrainingJob(**base).iteration_graph().bytes_by_group()["pp"]
    two = TrainingJob(**base, virtual_stages=2).iteration_graph().bytes_by_group()["pp"]
    assert two == pytest.approx(one * (4 * 2 - 1) / (4 - 1))
    g = TrainingJob(**base, virtual_stages=2).iteration_graph()
    hops = {(t.collectives[0].gpus[0], t.collectives[0].gpus[1], t.phase) for t in g.tasks if t.group == "pp"}
    assert (3, 0, "fwd") in hops and (0, 3, "bwd") in hops  # last rank -> first rank's next chunk


def test_interleaved_chunks_hold_every_pp_th_slice_of_layers():
    # transformer_block.py get_num_layers_to_build: 8 layers, 2 stages, 2 virtual stages ->
    # stage 0 holds [0, 1] and [4, 5], stage 1 holds [2, 3] and [6, 7]
    shape = ModelShape(name="e", layers=8, hidden=256, heads=4, ffn_hidden=512, vocab=100)
    j = TrainingJob(model=shape, gpus=2, pp=2, virtual_stages=2, global_batch=4)
    assert j.stage_layers(0) == [0, 1, 4, 5] and j.stage_layers(1) == [2, 3, 6, 7]


def test_uneven_first_and_last_stage_as_megatron():
    # num_layers_in_first/last_pipeline_stage: the middle stages share the rest evenly
    j = TrainingJob(model="llama3-405b", gpus=8, pp=8, first_stage_layers=14, last_stage_layers=16,
                    global_batch=8)
    sizes = [len(j.stage_layers(p)) for p in range(8)]
    assert sizes == [14, 16, 16, 16, 16, 16, 16, 16] and sum(sizes) == 126
    with pytest.raises(ConfigError, match=r"\(first_stage_layers\)"):
        TrainingJob(model="llama3-405b", gpus=8, pp=8, first_stage_layers=15, global_batch=8)
    with pytest.raises(ConfigError, match=r"\(virtual_stages\)"):
        TrainingJob(model=_U, gpus=4, pp=4, virtual_stages=2, global_batch=2)  # fewer micro-batches than pp
    with pytest.raises(ConfigError, match=r"\(virtual_stages\)"):
        TrainingJob(model=_U, gpus=4, pp=4, virtual_stages=8, global_batch=8)  # 32 chunks > 16 layers
    with pytest.raises(ConfigError, match=r"needs pp > 1.*\(virtual_stages\)"):
        TrainingJob(model=_U, gpus=1, virtual_stages=2, global_batch=2)


def test_interleaving_shortens_a_deep_pipeline_iteration():
    base = dict(model="llama3-70b", gpus=16, pp=16, global_batch=16)
    t1 = TrainingJob(**base).iteration_graph().critical_path_s()
    t5 = TrainingJob(**base, virtual_stages=5).iteration_graph().critical_path_s()
    # ideal stages: (1 + 15/80) / (1 + 15/16) = 0.61; the logit layer makes the last stage longer
    assert t5 < 0.75 * t1


def test_zero2_reduce_scatters_every_micro_batch_zero1_only_the_last():
    # DeepSpeed ZeRO-2 partitions gradients as the backward produces them (every micro-batch);
    # ZeRO-1 (and Megatron's distributed optimizer) reduce-scatter once, at the last micro-batch
    base = dict(model="llama3-8b", gpus=4, global_batch=12)  # 3 micro-batches per replica
    z1 = TrainingJob(**base, zero_stage=1).iteration_graph().bytes_by_group()
    z2 = TrainingJob(**base, zero_stage=2).iteration_graph().bytes_by_group()
    psi = TrainingJob(**base).model.num_params()
    assert z1["dp"] == pytest.approx(psi * 2) and z2["dp"] == pytest.approx(3 * psi * 2)
    assert z1["zero"] == z2["zero"] == pytest.approx(psi * 2)  # parameters gathered once after the step


def test_fsdp_is_zero3():
    a = TrainingJob(model="llama3-8b", gpus=4, global_batch=8, fsdp=True)
    b = TrainingJob(model="llama3-8b", gpus=4, global_batch=8, zero_stage=3)
    assert a.zero_stage == 3 and a.iteration_graph().bytes_by_group() == b.iteration_graph().bytes_by_group()
    with pytest.raises(ConfigError, match=r"\(fsdp\)"):
        TrainingJob(model="llama3-8b", gpus=4, global_batch=8, fsdp=True, zero_stage=1)


@pytest.mark.parametrize("v", [1, 2, 4])
def test_interleaved_bubble_on_an_idle_fabric(v):
    # the same closed form through the simulator: one 4-GPU NVLink server; activations of 8 MiB take
    # ~20 us on NVLink against ~10 ms of compute per chunk, so the sends add under 2%
    from flowherd.cluster.simulate import JobRequest, simulate_cluster
    from flowherd.fabric.generators import leaf_spine

    p, m = 4, 8
    wide = ModelShape(name="w", layers=16, hidden=4096, heads=32, ffn_hidden=16384, vocab=2)
    j = TrainingJob(model=wide, gpus=p, pp=p, global_batch=m, seq_len=1024, efficiency=0.45, virtual_stages=v,
                    name="j")
    fab = leaf_spine(servers=1, gpus_per_server=4, leaves=1, spines=1)
    rec = simulate_cluster(fab, [JobRequest(name="j", tenant="t", spec=j, submit_s=0.0)],
                           horizon_s=60.0).job("j")
    passes, step0 = passes_and_step(j.iteration_graph())
    expected = passes[0] * (1 + (p - 1) / (m * v)) + step0
    assert rec.iteration_s[0] == pytest.approx(expected, rel=0.02)
    assert rec.iteration_s[0] >= expected


def test_fsdp_prefetch_hides_all_gathers_behind_the_previous_layer():
    # PyTorch FSDP (FULL_SHARD, BACKWARD_PRE, limit_all_gathers): layer k+1's parameters are
    # gathered while layer k computes, so with every gather shorter than a layer only the first
    # gather of each pass and the last reduce-scatter stay on the critical path, not L of each
    j = TrainingJob(model="llama3-8b", gpus=8, fsdp=True, global_batch=8, seq_len=4096)
    g = j.iteration_graph()  # the stage graph the simulator runs
    fwd = [t.duration_s for t in g.tasks if t.kind == TaskKind.COMPUTE and t.phase == "fwd"]
    call_s = 0.25 * min(fwd)

    def comm_s(t):
        return t.count * call_s if t.group in ("zero", "dp") else 0.0

    exposed = g.critical_path_s(comm_s) - g.critical_path_s()
    layers = j.model.layers
    assert len(fwd) == layers  # one task per layer and pass at stage granularity
    assert call_s <= exposed <= 3 * call_s + 1e-12  # not 3 * layers * call_s


def test_deepspeed_engine_allreduces_gradients_after_the_last_backward():
    # DeepSpeed's PipelineEngine with BF16_Optimizer (deepspeed/runtime/pipe/engine.py,
    # _exec_reduce_grads -> _bf16_reduce_grads -> buffered_allreduce_fallback): the gradients are
    # AllReduced (not reduce-scattered, although ZeRO-1 partitions the optimizer) after the stage's
    # last backward (TrainSchedule: ReduceGrads after the last BackwardPass), in buffers of 5e8
    # elements; Megatron reduce-scatters in 25 MiB buckets as the last backward produces them
    base = dict(model="llama3-8b", gpus=8, pp=2, global_batch=8, seq_len=1024, zero_stage=1, grad_bytes=4)
    ds = TrainingJob(**base, pipeline_engine="deepspeed").iteration_graph()
    mg = TrainingJob(**base).iteration_graph()
    for g, op, overlapped in ((ds, "allreduce", False), (mg, "reducescatter", True)):
        by_id = {t.id: t for t in g.tasks}
        for p in range(2):
            last_bwd = max(t.id for t in g.tasks
                           if t.stage == p and t.phase == "bwd" and t.kind == TaskKind.COMPUTE)
            syncs = [t for t in g.tasks if t.stage == p and t.group == "dp" and t.phase == "sync"
                     and not t.name.startswith("embedding/")]
            assert {t.collectives[0].op.value for t in syncs} == {op}
            computes = {d for t in syncs for d in t.deps if by_id[d].kind == TaskKind.COMPUTE}
            assert (computes != {last_bwd}) == overlapped, p
    from flowherd.workload.pipeline import DEEPSPEED_ALLREDUCE_ELEMENTS
    stage0 = [t for t in ds.tasks if t.stage == 0 and t.group == "dp" and t.phase == "sync"]
    elements = [t.collectives[0].size_bytes / 4 for t in stage0]  # whole layers per buffer
    assert len(elements) > 1 and all(e >= DEEPSPEED_ALLREDUCE_ELEMENTS for e in elements[:-1])


def test_blocking_sends_hold_the_sender():
    # DeepSpeed's p2p.send asserts async_op == False and calls torch.distributed.send; Megatron's
    # non-interleaved 1F1B waits on its batched isend/irecv (overlap_p2p_comm is forced off there):
    # the sender's next pass starts after its send. Megatron's interleaved schedule overlaps them
    # (overlap_p2p_comm), and torchtitan's pipelining sends asynchronously
    base = dict(model=_U, gpus=2, pp=2, global_batch=4, seq_len=1024, efficiency=0.45)
    for kw, blocking in (({"pipeline_engine": "deepspeed"}, True), ({"framework": "megatron"}, True),
                         ({"framework": "megatron", "virtual_stages": 2}, False),
                         ({"framework": "torchtitan"}, False)):
        g = TrainingJob(**base, **kw).iteration_graph()
        sends = {t.id for t in g.tasks if t.group == "pp" and t.stage == 0}
        after = [t for t in g.tasks if t.stage == 0 and t.kind == TaskKind.COMPUTE and t.phase == "fwd"][1:]
        assert any(sends & set(t.deps) for t in after) == blocking, kw
    with pytest.raises(ConfigError, match=r"\(pipeline_engine\)"):
        TrainingJob(**base, pipeline_engine="deepspeed", zero_stage=2)


def test_scenario_yaml_takes_the_pipeline_engine_and_the_cudnn_kernel():
    # the scenario contract extends (never renames): jobs[].pipeline_engine and attention: cudnn reach
    # the TrainingJob; a wrong engine name is one clear error
    from flowherd.experiments.scenario import scenario_from_mapping

    def sc(**job):
        return scenario_from_mapping({
            "fabric": {"kind": "leaf-spine", "servers": 1, "gpus_per_server": 8, "leaves": 1, "spines": 1},
            "workload": {"jobs": [{"name": "j", "model": "llama3-8b", "gpus": 8,
                                   "parallelism": {"pp": 2, "zero": 1}, "global_batch": 8, **job}]}})

    j = sc(pipeline_engine="deepspeed", attention="cudnn").jobs[0]
    assert j.pipeline_engine == "deepspeed" and j.attention == "cudnn"
    assert sc().jobs[0].pipeline_engine == "megatron"
    with pytest.raises(ConfigError, match="pipeline_engine"):
        sc(pipeline_engine="colossal")


def test_hybrid_sharding_gathers_inside_the_shard_group_and_allreduces_across():
    # PyTorch FSDP HYBRID_SHARD (torch/distributed/fsdp/_runtime_utils.py, _reduce_grad): each layer's
    # all-gather and reduce-scatter over the shard group, then an all-reduce of the reduced shard over
    # the replicas; the optimizer runs over 1 / shard of the parameters
    kw = dict(model="llama3-8b", gpus=32, fsdp=True, global_batch=32, seq_len=1024)
    full, hybrid = TrainingJob(**kw), TrainingJob(**kw, fsdp_shard=8)
    g = hybrid.iteration_graph()
    colls = [(t, c) for t in g.tasks for c in t.collectives]
    ag_rs = [c for t, c in colls if c.op.name in ("ALLGATHER", "REDUCESCATTER")]
    assert ag_rs and all(len(c.gpus) == 8 and max(c.gpus) // 8 == min(c.gpus) // 8 for c in ag_rs)
    ar = [(t, c) for t, c in colls if c.op.name == "ALLREDUCE"]
    assert ar and all(len(c.gpus) == 4 and len({x % 8 for x in c.gpus}) == 1 for _, c in ar)
    by_op = g.bytes_by_group_op()
    rs = sum(v for (grp, op), v in by_op.items() if op.name == "REDUCESCATTER")
    # 4 shard groups reduce-scatter a layer each; 8 replica groups all-reduce 1/8 of it each
    assert sum(v for (grp, op), v in by_op.items() if op.name == "ALLREDUCE") == pytest.approx(rs / 4)
    step = {j: next(t.duration_s for t in j.iteration_graph().tasks if t.name == "s0/optimizer")
            for j in (full, hybrid)}
    assert step[hybrid] == pytest.approx(4 * step[full])  # 1/8 of the states instead of 1/32
    with pytest.raises(ConfigError, match="fsdp_shard"):
        TrainingJob(**kw, fsdp_shard=5)
    with pytest.raises(ConfigError, match="fsdp_shard"):
        TrainingJob(model="llama3-8b", gpus=32, zero_stage=1, fsdp_shard=8)
