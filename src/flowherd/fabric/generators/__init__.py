"""Fabric generators, one family per module: plain functions of sizes that return a `Fabric`."""

from flowherd.fabric.generators.leaf_spine import leaf_spine

__all__ = ["leaf_spine"]
