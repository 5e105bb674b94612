"""NCCL's protocols and the per-step latencies a simulated schedule carries.

The latencies are NCCL 2.30.7's (NVIDIA/nccl ``src/graph/tuning.cc``,
``ncclTunerConstantsDefaults``: ``baseLatencies`` and ``hwLatencies``; `flowherd.collectives.tuning`
holds the whole tuning model). A simulated step pays the ``hwLatencies`` entry of the link class
it crosses; the steps that start a collective also pay ``baseLatencies`` once.
"""

from __future__ import annotations

from enum import StrEnum

from flowherd.collectives.tuning import BASE_LATENCY_US, HW_LATENCY_US, PROTOCOL_NAMES
from flowherd.errors import ConfigError
from flowherd.registry import Registry
from flowherd.units import us


class Protocol(StrEnum):
    SIMPLE = "simple"
    LL = "ll"
    LL128 = "ll128"


PROTOCOLS: Registry[Protocol] = Registry("protocol", {p.value: p for p in Protocol})
LATENCY_MODELS: Registry[str] = Registry("latency model", {"nccl": "nccl", "fabric": "fabric"})

# Payload per wire byte. LL sends 8-byte lines of 4 data bytes + a 4-byte flag (NCCL
# src/include/device.h, union ncclLLFifoLine), so half the bandwidth carries data; LL128
# sends 128-byte lines of which 8 bytes are flags, 120/128 (NCCL_LL128_DATAELEMS /
# NCCL_LL128_LINEELEMS); Simple sends raw data.
WIRE_FRACTION: dict[Protocol, float] = {Protocol.SIMPLE: 1.0, Protocol.LL: 0.5,
                                        Protocol.LL128: 120.0 / 128.0}

_HW = ("nvlink", "pci", "net")
# families of NCCL algorithms whose latencies a flowherd algorithm takes
_FAMILIES = ("ring", "tree", "nvls", "nvlstree", "pat")


def _family(algorithm_family: str) -> str:
    return algorithm_family if algorithm_family in _FAMILIES else "ring"


def step_latency_s(protocol: Protocol | str, *, algorithm_family: str = "ring",
                   hw: str = "net") -> float:
    """Latency one step of an algorithm adds: NCCL 2.30's ``hwLatencies[hw][algo][proto]``.

    Algorithms NCCL lacks (halving-doubling, direct, hierarchical) take the Ring values: each of
    their steps is a point-to-point hop like a ring step. NVLS/NVLSTree have Simple entries only;
    their LL/LL128 entries (0 in NCCL) are taken from Ring.

    Args:
        protocol: "simple", "ll" or "ll128".
        algorithm_family: "ring", "tree", "nvls", "nvlstree" or "pat" (others: "ring").
        hw: "nvlink", "pci" or "net" (the link class the step crosses).

    >>> round(step_latency_s("simple", hw="net") / 1e-6, 3)
    14.0
    """
    p = PROTOCOLS[str(protocol)]
    if hw not in _HW:
        raise ConfigError(f"hw must be one of {', '.join(_HW)}, got {hw!r} (hw)")
    fam = _family(algorithm_family)
    v = HW_LATENCY_US[hw][fam][PROTOCOL_NAMES.index(p.value)]
    if v == 0:
        v = HW_LATENCY_US[hw]["ring"][PROTOCOL_NAMES.index(p.value)]
    return v * us


def base_latency_s(protocol: Protocol | str, *, algorithm_family: str = "ring") -> float:
    """Once-per-collective latency, NCCL 2.30's ``baseLatencies`` (Ring values for algorithms
    NCCL lacks).

    >>> round(base_latency_s("simple") / 1e-6, 3)
    8.4
    """
    p = PROTOCOLS[str(protocol)]
    return BASE_LATENCY_US[_family(algorithm_family)][PROTOCOL_NAMES.index(p.value)] * us
