"""Congestion at flow level: queues, ECN, PFC and incast beside the engine's max-min sharing.

`NetworkConfig` (the ``network:`` section of a scenario, ``--network`` on the CLI) says which
model a run uses; `NetworkModel` is what an `Engine` consults when the model is not ``ideal``.
An engine made without ``network=`` takes the one set by `use_network` around the run (so the
many engines of a cluster run, probes included, share one setting without each caller passing
it), and ``ideal`` when none is set: the engine exactly as it was.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from flowherd.sim.network.config import (
    MODELS,
    SWITCHES,
    NetworkConfig,
    SwitchPreset,
    load_network,
    network_from_mapping,
)
from flowherd.sim.network.model import NetworkModel, NetworkStats
from flowherd.sim.network.record import network_record

__all__ = ["MODELS", "SWITCHES", "NetworkConfig", "NetworkModel", "NetworkStats", "SwitchPreset",
           "current_network", "load_network", "network_from_mapping", "network_record", "use_network"]

_CURRENT: contextvars.ContextVar[NetworkConfig | None] = contextvars.ContextVar("flowherd_network",
                                                                               default=None)


def current_network() -> NetworkConfig | None:
    """The network set by the innermost `use_network`, or None."""
    return _CURRENT.get()


@contextlib.contextmanager
def use_network(cfg: NetworkConfig | None) -> Iterator[None]:
    """Engines made inside the block (without their own ``network=``) use ``cfg``."""
    token = _CURRENT.set(cfg)
    try:
        yield
    finally:
        _CURRENT.reset(token)
