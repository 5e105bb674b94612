"""Routing: path sets between GPUs and the policies that choose among them."""

from flowherd.routing.base import Router, Routes

__all__ = ["Router", "Routes"]
