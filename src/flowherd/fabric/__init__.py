"""Fabrics: topology, links, GPUs, servers, NVLink domains; generators and presets."""

from flowherd.fabric.core import Fabric, LinkKind, NodeKind

__all__ = ["Fabric", "LinkKind", "NodeKind"]
