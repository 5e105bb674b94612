"""The flow-level discrete-event engine: flows and coflows sharing a fabric at max-min fair rates.

The engine knows flows, coflows (flows that start together), their dependencies and the links
they cross; it knows nothing of jobs, collectives or tenants (`flowherd.cluster` turns those
into coflows). Read it bottom up:

* `aot` (with `aot_build`): the numba kernels' decorator, compiled ahead of time at install
  with numba's JIT as the fallback (docs/aot.md);
* `fairshare`, `allocation`, `bottleneck`: the max-min kernels and the local rate update;
  `incidence` and `flow_heap`: the flow-link incidence and the heap of soonest completions;
  `step_kernels`: one event's starts and ends; `pages`: small flows packed per page;
* `network`: the congestion models (fluid queues, RoCE with PFC and DCQCN, TCP, ACK paths)
  the event loop consults when the model is not ``ideal``;
* `state`: the protocol by which the helpers below see an engine; `event_loop` (the loop in
  compiled code), `coflow_input` and `input_memo` (checks of what is added), `coflow_batch`
  (many coflows checked once), `hold` (flows taken off the network for a while);
* `core`: `Engine`, the one mutable object of a run; `results`: `SimResult`, its snapshot.
"""

from flowherd.engine.core import Engine
from flowherd.engine.fairshare import max_min_rates, max_min_rates_reference
from flowherd.engine.results import SimResult

__all__ = ["Engine", "SimResult", "max_min_rates", "max_min_rates_reference"]
