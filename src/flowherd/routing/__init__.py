"""Routing: path sets between GPUs and the policies that choose among them."""

from flowherd.routing.base import Router, Routes
from flowherd.routing.paths import (
    PathDag,
    PathIndex,
    k_shortest_paths,
    path_count,
    path_index,
    shortest_paths,
)
from flowherd.routing.policies import (
    ROUTERS,
    EcmpRouter,
    ExplicitRouter,
    ShortestRouter,
    SprayRouter,
    make_router,
)

__all__ = [
    "ROUTERS",
    "EcmpRouter",
    "ExplicitRouter",
    "PathDag",
    "PathIndex",
    "Router",
    "Routes",
    "ShortestRouter",
    "SprayRouter",
    "k_shortest_paths",
    "make_router",
    "path_count",
    "path_index",
    "shortest_paths",
]
