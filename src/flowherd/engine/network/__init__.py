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

from flowherd.engine.network.config import (
    MODELS,
    SWITCHES,
    NetworkConfig,
    SwitchPreset,
    load_network,
    network_from_mapping,
)

__all__ = ["MODELS", "SWITCHES", "NetworkConfig", "NetworkModel", "NetworkStats", "SwitchPreset",
           "current_network", "load_network", "network_from_mapping", "network_record", "use_network"]

# the model and its compiled kernels load on first use: an ideal run (a collective on the command
# line) needs only the configuration (0.03 s of start-up, issue 16)
_LAZY = {"NetworkModel": "model", "NetworkStats": "model", "network_record": "record"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


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
