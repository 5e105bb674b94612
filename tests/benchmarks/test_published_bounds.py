"""benchmarks/published_bounds.py: the data-parallel wire bound against its closed form, and the
micro-batch of the GPT-32B row it decides."""

import dataclasses
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import published  # noqa: E402
import published_bounds as pb  # noqa: E402
from flowherd.experiments.scenario import scenario_from_mapping  # noqa: E402

NIC = 400e9 / 8  # the Megatron-Core H100 rows: one 400 Gb/s NIC per GPU


def _row(label: str) -> published.Row:
    return next(r for r in published.ROWS if r.label.startswith(label))


def _job(row: published.Row):
    return scenario_from_mapping(published.scenario(row)).jobs[0]


def test_tp8_group_sends_its_whole_fp32_buffer_but_one_shard_through_its_own_nic():
    # TP 8: the 48 ranks of a data-parallel group sit in 48 servers, one each; Megatron-LM with BF16
    # reduces FP32 gradients (arguments.py, accumulate_allreduce_grads_in_fp32) and gathers BF16 weights
    job = _job(_row("GPT-32B"))
    b = pb.dp_wire_bound(job, NIC)
    per_rank = job.model.num_params() / 8
    assert job.grad_bytes == 4 and job.dp == 48
    assert b.reduce_s == pytest.approx(47 / 48 * per_rank * 4 / NIC, rel=1e-12)
    assert b.gather_s == pytest.approx(47 / 48 * per_rank * 2 / NIC, rel=1e-12)


def test_tp1_group_crosses_servers_only_for_the_shards_of_other_servers():
    # TP 1, DP 48 on 6 servers: 8 ranks of the group per server; a server must send (48 - 8) / 48 of
    # each of its 8 ranks' buffers out, over its 8 NICs
    job = _job(_row("GPT-1.7B"))
    b = pb.dp_wire_bound(job, NIC)
    assert b.reduce_s == pytest.approx(40 / 48 * job.model.num_params() * 4 / (8 * NIC), rel=1e-12)


def test_least_iteration_hides_reduce_behind_last_backward_and_gather_behind_first_forward():
    b = pb.DpBound(micro_batches=4, reduce_s=0.3, gather_s=0.15, fwd_s=0.05, bwd_s=0.1, step_s=0.01)
    assert b.iteration_s() == pytest.approx(4 * 0.15 + 0.01 + (0.3 - 0.1) + (0.15 - 0.05))
    assert b.iteration_s(2.0) == pytest.approx(4 * 0.3 + 0.02 + (0.3 - 0.2) + (0.15 - 0.1))
    # kernels three times as slow: both hide entirely
    assert b.iteration_s(3.0) == pytest.approx(4 * 0.45 + 0.03)
    scale = pb.kernel_scale_for(b, 1.0)
    assert b.iteration_s(scale) == pytest.approx(1.0, abs=1e-9)
    assert b.iteration_s(scale * 1.001) > 1.0
    assert pb.kernel_scale_for(b, 0.3) == 0.0  # the bytes alone (0.45 s) outlast it


def test_bound_applies_only_to_unpipelined_distributed_optimizer_runs():
    assert pb.dp_wire_bound(_job(_row("GPT-70B")), NIC) is None  # PP 2
    assert pb.dp_wire_bound(_job(_row("MPT-7b s=2048 8xH100")), NIC) is None  # FSDP
    assert pb.dp_wire_bound(_job(_row("LLAMA3-8B")), NIC) is None  # context parallelism


def test_gpt32b_row_runs_the_smallest_micro_batch_the_bound_admits():
    # Megatron-LM README@f2e5db402c weak-scaling table: GPT-32B, 384 H100, batch 192, 459.6 TFLOP/s
    # per GPU; at micro-batch 1 the published iteration needs kernels faster than flowherd's (which run
    # faster than published on every other Megatron-Core H100 row), at micro-batch 2 it does not
    row = _row("GPT-32B")
    assert row.micro_batch == 2
    assert published.wire_bound(dataclasses.replace(row, micro_batch=1))[-1] < 0.85
    assert published.wire_bound(row)[-1] > 1.0
    for label in ("GPT-1.7B", "GPT-7.1B", "GPT-16B"):  # micro-batch 1 admitted: kept
        assert _row(label).micro_batch == 1 and published.wire_bound(_row(label))[-1] > 1.0
