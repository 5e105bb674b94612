"""What an engine remembers of the coflows handed to it, so that nothing is checked or routed
twice: flow arrays by content, `Routes` objects by identity, the router's routes by the pairs.

Job executors hand the same flow arrays and the same cached `Routes` every iteration, and a
step-fidelity collective routes the same pairs at every step: checking them each time was most
of an ``add_coflow`` (about 0.5 ms of numpy calls per coflow in a cluster run), checking routes
~14% of a cluster run, re-routing half of a 1,024-GPU ring AllReduce (profiles, issue 17).
"""

from __future__ import annotations

import numpy as np

from flowherd.engine.coflow_input import check_flows, check_routes, check_weight
from flowherd.routing.base import Router, Routes

__all__ = ["InputMemo"]

_MAX_ENTRIES = 4096  # flow arrays / Routes objects remembered (cleared when full)
_MAX_ROUTED_LINKS = 1 << 22  # incidences of routed pairs held (about 64 MiB); cleared when over


class InputMemo:
    """Checked inputs of one engine (fabric of ``num_gpus`` GPUs and ``num_links`` links)."""

    def __init__(self, num_gpus: int, num_links: int):
        self.num_gpus = num_gpus
        self.num_links = num_links
        self._flows: dict[tuple, tuple[np.ndarray, ...]] = {}
        # by identity, the object held so that its id is never reused
        self._routes: dict[int, tuple[Routes, tuple[np.ndarray, ...]]] = {}
        self._routed: dict[tuple[bytes, bytes, bytes], tuple[np.ndarray, ...]] = {}
        self._routed_links = 0
        self._router: Router | None = None

    def flows(self, src, dst, size_bytes, weight, what: str) -> tuple[np.ndarray, ...]:
        """`check_flows` and `check_weight` of a coflow's flows, remembered by content when
        they are numpy arrays (and the weight an array or a float)."""
        if not (type(src) is np.ndarray and type(dst) is np.ndarray
                and type(size_bytes) is np.ndarray
                and (type(weight) is np.ndarray or type(weight) is float)):
            out = check_flows(src, dst, size_bytes, self.num_gpus, what)
            check_weight(weight, out[0].size, what)
            return out
        k = (src.tobytes(), dst.tobytes(), size_bytes.tobytes(), src.dtype.char, dst.dtype.char,
             size_bytes.dtype.char, weight.tobytes() if type(weight) is np.ndarray else weight)
        hit = self._flows.get(k)
        if hit is None:
            hit = check_flows(src, dst, size_bytes, self.num_gpus, what)
            check_weight(weight, hit[0].size, what)
            if len(self._flows) >= _MAX_ENTRIES:
                self._flows.clear()
            self._flows[k] = hit
        return hit

    def routes(self, routes: Routes, n: int, what: str) -> tuple[np.ndarray, ...]:
        """`check_routes` of ``routes`` for ``n`` flows, remembered by identity."""
        hit = self._routes.get(id(routes))
        if hit is not None and hit[0] is routes and hit[1][2].size == n + 1:
            return hit[1]
        out = check_routes(routes, n, self.num_links, what)
        if len(self._routes) >= _MAX_ENTRIES:
            self._routes.clear()
        self._routes[id(routes)] = (routes, out)
        return out

    def route(self, router: Router, src: np.ndarray, dst: np.ndarray, key: np.ndarray,
              what: str) -> tuple[np.ndarray, ...]:
        """The router's routes of the pairs, checked; remembered by content (a router is
        deterministic, `flowherd.routing.base.Router`; a new router starts afresh)."""
        if self._router is not router:
            self._routed.clear()
            self._routed_links = 0
            self._router = router
        k = (src.tobytes(), dst.tobytes(), key.tobytes())
        hit = self._routed.get(k)
        if hit is not None:
            return hit
        out = check_routes(router.route(src.astype(np.int32), dst.astype(np.int32), key), src.size,
                           self.num_links, what)
        if self._routed_links + out[0].size > _MAX_ROUTED_LINKS:
            self._routed.clear()
            self._routed_links = 0
        self._routed[k] = out
        self._routed_links += out[0].size
        return out
