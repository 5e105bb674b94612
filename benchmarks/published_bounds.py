"""A wire-time bound on what a published data-parallel run leaves for its kernels.

For a run without pipeline parallelism on Megatron-LM's distributed optimizer (ZeRO-1), the bytes
the data-parallel group must move per iteration are fixed by the model, the gradient and parameter
dtypes and the group size, whatever the collective algorithm; the windows in which they can hide
behind compute are fixed by the framework's schedule. Together they bound from below the iteration
of any kernel speed, so a published iteration time bounds the kernels' speed from above: if even
kernels as fast as flowherd's cannot meet the published figure, the run cannot have had the settings
the row assumes (here the micro-batch, which the source does not state).

What the bound takes from the framework (NVIDIA/Megatron-LM at f2e5db402c, the commit of the
Megatron-Core H100 scaling rows):

* Gradients are reduced only in the last micro-batch's backward: ``forward_backward_no_pipelining``
  runs the first ``num_microbatches - 1`` micro-batches inside ``no_sync_func()``
  (megatron/core/pipeline_parallel/schedules.py, lines 390-391), so the reduce-scatter hides at most
  behind that one backward.
* The updated parameters are gathered before the next first forward: with ``overlap_param_gather``
  the distributed optimizer dispatches bucket 0's all-gather after the step and each next bucket in
  a forward pre-hook (megatron/core/optimizer/distrib_optimizer.py, lines 1336-1337 and 1475), so
  the all-gather hides at most behind the first micro-batch's forward.
* BF16 training reduces FP32 gradients (megatron/training/arguments.py, line 305:
  ``accumulate_allreduce_grads_in_fp32 = True``), the job's ``grad_bytes``.

Bytes, for any algorithm without in-network reduction of a reduce-scatter's own inputs: in a
reduce-scatter over ``d`` ranks every rank's input for the ``d - 1`` shards it does not keep must
leave it at least once (combined with others or not), and in an all-gather every rank must receive
the ``d - 1`` shards it does not hold. A server hosting ``l`` of a group's ranks therefore sends at
least ``(d - l) / d`` of each of its groups' gradient buffers and receives as much of their
parameters, spread at best evenly over its NICs at line rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowherd.workload.opgraph import TaskKind
from flowherd.workload.training import Granularity, TrainingJob

__all__ = ["DpBound", "dp_wire_bound", "kernel_scale_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DpBound:
    """The data-parallel wire bound of one run (module docstring).

    Attributes:
        micro_batches: Micro-batches per replica per iteration.
        reduce_s: Least time of the gradient reduce-scatter on a server's NICs, seconds.
        gather_s: Least time of the parameter all-gather on them, seconds.
        fwd_s, bwd_s: flowherd's compute time of one micro-batch's forward and backward, seconds.
        step_s: flowherd's optimizer step, seconds.
    """

    micro_batches: int
    reduce_s: float
    gather_s: float
    fwd_s: float
    bwd_s: float
    step_s: float

    def iteration_s(self, scale: float = 1.0) -> float:
        """Least iteration time with every kernel ``scale`` times flowherd's: all micro-batches' compute,
        the step, and what of the reduce-scatter outlasts the last backward and of the all-gather
        the first forward."""
        f, b = scale * self.fwd_s, scale * self.bwd_s
        return (self.micro_batches * (f + b) + scale * self.step_s + max(0.0, self.reduce_s - b)
                + max(0.0, self.gather_s - f))


def dp_wire_bound(job: TrainingJob, nic_bytes_per_s: float, gpus_per_server: int = 8) -> DpBound | None:
    """The bound of a job on the distributed optimizer without pipeline or context parallelism that
    overlaps both its gradient reduce-scatter and its parameter all-gather; None for any other job."""
    if (job.pp != 1 or job.cp != 1 or job.ep != 1 or job.fsdp or job.zero_stage != 1 or job.dp < 2
            or not job.overlap_grad_reduce or not job.overlap_param_gather or job.tp > gpus_per_server):
        return None
    local = min(job.dp, gpus_per_server // job.tp)  # ranks of one DP group in a server
    far = (job.dp - local) / job.dp  # share of a buffer bound for (or from) other servers
    params = job.model.num_params()  # over the server's tp groups: each holds params / tp
    reduce_s = far * params * job.grad_bytes / (gpus_per_server * nic_bytes_per_s)
    gather_s = far * params * job.dtype_bytes / (gpus_per_server * nic_bytes_per_s)
    g = job.iteration_graph(Granularity.STAGE)
    m = job.micro_batches
    busy = {"fwd": 0.0, "bwd": 0.0, "step": 0.0}
    for t in g.tasks:
        if t.kind == TaskKind.COMPUTE and t.stage == 0 and t.phase in busy:
            busy[t.phase] += t.duration_s
    return DpBound(micro_batches=m, reduce_s=reduce_s, gather_s=gather_s, fwd_s=busy["fwd"] / m,
                   bwd_s=busy["bwd"] / m, step_s=busy["step"])


def kernel_scale_for(bound: DpBound, iteration_s: float) -> float:
    """The largest factor on flowherd's kernel times that still meets ``iteration_s`` under the bound
    (below 1: the published figure needs kernels faster than flowherd's); 0 if none does."""
    if bound.iteration_s(0.0) > iteration_s:
        return 0.0
    lo, hi = 0.0, 1.0
    while bound.iteration_s(hi) <= iteration_s:
        lo, hi = hi, 2 * hi
    for _ in range(60):  # the bound grows with the scale: bisection
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if bound.iteration_s(mid) <= iteration_s else (lo, mid)
    return lo
