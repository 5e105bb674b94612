"""Fabrics: topology, links, GPUs, servers, NVLink domains; generators and presets."""

from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators import (
    clos3,
    dgx1,
    dgx2,
    fat_tree,
    from_networkx,
    hpn_dual_plane,
    leaf_spine,
    ndv2,
    nvlink_mesh,
    rail_optimized,
)
from flowherd.fabric.lingjun import lingjun_fabric, load_lingjun_topology
from flowherd.fabric.metrics import bisection_bytes_per_s, diameter_hops, summary
from flowherd.fabric.presets import PRESETS, preset, preset_names
from flowherd.fabric.spec import fabric_from_mapping, load_fabric

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
