"""Fabrics: topology, links, GPUs, servers, NVLink domains; generators and presets.

The names are imported on first use (PEP 562): `Fabric` alone does not pull the YAML schema
(pydantic) or the graph metrics (scipy) into a command that only runs a preset.
"""

from __future__ import annotations

import importlib
from typing import Any

from flowherd.fabric.core import Fabric, LinkKind, NodeKind

_LAZY = {
    **dict.fromkeys(("clos3", "dgx1", "dgx2", "fat_tree", "from_networkx", "hpn_dual_plane",
                     "leaf_spine", "ndv2", "nvlink_mesh", "rail_optimized"),
                    "flowherd.fabric.generators"),
    **dict.fromkeys(("lingjun_fabric", "load_lingjun_topology"), "flowherd.fabric.lingjun"),
    **dict.fromkeys(("bisection_bytes_per_s", "diameter_hops", "summary"), "flowherd.fabric.metrics"),
    **dict.fromkeys(("PRESETS", "preset", "preset_names"), "flowherd.fabric.presets"),
    **dict.fromkeys(("fabric_from_mapping", "load_fabric"), "flowherd.fabric.spec"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowherd.fabric' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "PRESETS",
    "Fabric",
    "LinkKind",
    "NodeKind",
    "bisection_bytes_per_s",
    "clos3",
    "dgx1",
    "dgx2",
    "diameter_hops",
    "fabric_from_mapping",
    "fat_tree",
    "from_networkx",
    "hpn_dual_plane",
    "leaf_spine",
    "lingjun_fabric",
    "load_fabric",
    "load_lingjun_topology",
    "ndv2",
    "nvlink_mesh",
    "preset",
    "preset_names",
    "rail_optimized",
    "summary",
]
