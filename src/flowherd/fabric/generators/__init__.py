"""Fabric generators, one family per module: plain functions of sizes that return a `Fabric`."""

from flowherd.fabric.generators.clos import clos3
from flowherd.fabric.generators.fat_tree import fat_tree
from flowherd.fabric.generators.graph import from_networkx
from flowherd.fabric.generators.hpn import hpn_dual_plane
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.fabric.generators.nvlink import dgx1, dgx2, ndv2, nvlink_mesh
from flowherd.fabric.generators.rail import rail_optimized

__all__ = ["clos3", "dgx1", "dgx2", "fat_tree", "from_networkx", "hpn_dual_plane", "leaf_spine", "ndv2",
           "nvlink_mesh", "rail_optimized"]
