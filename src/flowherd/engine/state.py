"""What the engine's helpers see of an engine: its arrays and a few of its methods, as a protocol.

The event loop (`flowherd.engine.event_loop`), coflow batches (`flowherd.engine.coflow_batch`,
`flowherd.engine.flow_batch`), the snapshot (`flowherd.engine.snapshot`),
held flows (`flowherd.engine.hold`) and the congestion models (`flowherd.engine.network`) take
the engine as an argument and read or write its columns in place: that is what keeps a run's
state in one set of numpy arrays that the compiled kernels share. `Engine`
(`flowherd.engine.core`) calls them, so they sit below it in the import order and name it by
this protocol, which `Engine` satisfies, never by the class: the imports point one way.

The members are the engine's own (underscored: they are not API for users of the engine);
their meaning is documented where `Engine.__init__` makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from flowherd.engine.allocation import LinkState
    from flowherd.engine.incidence import Grow
    from flowherd.fabric.core import Fabric

__all__ = ["EngineState"]


class EngineState(Protocol):
    """The part of `flowherd.engine.core.Engine` its helpers use."""

    fabric: Fabric
    #: the congestion model (`flowherd.engine.network.model.NetworkModel`), None when ideal
    network: Any
    record_flows: bool
    _ls: LinkState  # per-link capacity, load, bytes and scratch
    _st_i: np.ndarray  # the event loop's integer state (`flowherd.engine.event_loop` slots)
    _st_f: np.ndarray  # its float state
    _f: Grow  # flow columns (`flowherd.engine.incidence.FLOW_COLUMNS`)
    _links: Grow  # the flows' links, fractions and bucket positions
    _c: Grow  # coflow columns (`flowherd.engine.incidence.COFLOW_COLUMNS`)
    _after: Grow  # every coflow's `after` ids, in one pool
    _edges: Grow  # every coflow's dependents, as linked edges
    _hp: Grow  # the event heap
    _c_name: list[str]
    _cbs: dict[int, Callable[[int, float], None]]  # listeners of the coflows that have one
    _act_buf: np.ndarray
    _started_buf: np.ndarray
    _done_buf: np.ndarray
    _comp_buf: np.ndarray
    _fi_buf: np.ndarray
    _b_start: np.ndarray  # per link: where its bucket of active flows starts in the pool
    _b_len: np.ndarray
    _b_cap: np.ndarray
    _b_flow: np.ndarray  # the bucket pool: flows
    _b_inc: np.ndarray  # the bucket pool: their incidences
    _running: bool
    _loop_work: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # `event_loop.run_events`' work arrays
    num_events: int
    num_rate_updates: int

    @property
    def now_s(self) -> float: ...

    @property
    def _active(self) -> np.ndarray: ...

    def _py_rates(self) -> None: ...

    def _refresh_load(self) -> None: ...

    def _heap_room(self) -> None: ...

    def _compact(self) -> None: ...

    def link_bytes_now(self) -> np.ndarray: ...
