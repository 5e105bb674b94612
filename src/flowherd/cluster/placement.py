"""Placers: which free GPUs a job gets.

A placer satisfies the small `Placer` protocol and is found by name in `PLACERS`:

* ``first-fit``: the job's number of GPUs with the lowest free ids (GPUs are numbered in server
  order, so this fills servers one after the other, fragments included);
* ``packed``: as few servers as possible, then as few leaf switches as possible. A job that fits
  in one server goes to the fullest server where it still fits (best fit, lowest id on ties);
  a larger job takes leaves in decreasing order of free GPUs and, inside a leaf, servers in
  decreasing order of free GPUs (greedy: taking the largest bins first needs the fewest of
  them), the last server being the emptiest one that completes the job.
* ``spread``: a job that fits in one server goes there as with ``packed``; a larger one takes
  whole servers one at a time from the leaf it has fewest servers in yet (then the leaf with most
  free GPUs, then the lowest id), as failure-domain spreading does (Kubernetes topology spread
  constraints): its traffic crosses the spine, the contended case for the network.

The cluster simulation (`flowherd.cluster.simulate`) calls ``place`` whenever GPUs are released or a
job arrives; a placer returns None when the job does not fit now.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind
from flowherd.registry import Registry

__all__ = ["PLACERS", "FirstFitPlacer", "PackedPlacer", "Placer", "SpreadPlacer", "make_placer",
           "server_leaf"]


class Placer(Protocol):
    """Chooses GPUs for a job."""

    name: str

    def place(self, job: Any, free_mask: np.ndarray, fabric: Fabric) -> np.ndarray | None:
        """GPU ids for ``job`` (anything with ``world_size``, e.g. a `TrainingJob`).

        Args:
            job: The job spec; ``job.world_size`` GPUs are needed.
            free_mask: ``bool[num_gpus]``, True where a GPU is free.
            fabric: The fabric.

        Returns:
            ``job.world_size`` distinct free GPU ids, or None if the job does not fit now.
        """
        ...


def server_leaf(fabric: Fabric) -> np.ndarray:
    """``int64[num_servers]``: the leaf switch (node id) of each server: the lowest-id switch
    its first GPU's NIC connects to; the server's own index when it has no network."""
    num_servers = int(fabric.gpu_server.max()) + 1 if fabric.num_gpus else 0
    leaf = np.arange(num_servers, dtype=np.int64) - num_servers  # negative: no network
    first_gpu = np.full(num_servers, -1, dtype=np.int64)
    first_gpu[fabric.gpu_server[::-1]] = np.arange(fabric.num_gpus)[::-1]
    for s, g in enumerate(first_gpu.tolist()):
        out = fabric.out_links(g)
        pcie = out[fabric.link_kind[out] == LinkKind.PCIE]
        if not pcie.size:
            continue
        nic_out = fabric.out_links(int(fabric.link_dst[pcie[0]]))
        net = nic_out[fabric.link_kind[nic_out] == LinkKind.NETWORK]
        if net.size:
            leaf[s] = int(fabric.link_dst[net].min())
    return leaf


class FirstFitPlacer:
    """The lowest free GPU ids."""

    name = "first-fit"

    def place(self, job: Any, free_mask: np.ndarray, fabric: Fabric) -> np.ndarray | None:
        n = int(job.world_size)
        free = np.flatnonzero(free_mask)
        if free.size < n:
            return None
        return free[:n].astype(np.int64)


class PackedPlacer:
    """Fewest servers, then fewest leaves (module docstring)."""

    name = "packed"

    def __init__(self) -> None:
        # each server's leaf of the last fabric, by identity; the entry holds its fabric, so that a
        # fabric freed and another made at its address never hits
        self._leaf_cache: dict[int, tuple[Fabric, np.ndarray]] = {}

    def _servers(self, job: Any, free_mask: np.ndarray, fabric: Fabric) -> tuple | None:
        """(GPUs needed, free mask, each server's leaf, each server's free GPUs), or None when
        fewer GPUs than needed are free."""
        n = int(job.world_size)
        free_mask = np.asarray(free_mask, dtype=bool)
        if int(free_mask.sum()) < n:
            return None
        hit = self._leaf_cache.get(id(fabric))
        if hit is None or hit[0] is not fabric:
            self._leaf_cache.clear()  # the fabric of this run only: another's is not kept alive
            hit = self._leaf_cache[id(fabric)] = (fabric, server_leaf(fabric))
        leaf_of = hit[1]
        return n, free_mask, leaf_of, np.bincount(fabric.gpu_server[free_mask], minlength=leaf_of.size)

    def place(self, job: Any, free_mask: np.ndarray, fabric: Fabric) -> np.ndarray | None:
        got = self._servers(job, free_mask, fabric)
        return None if got is None else self._pick(*got, fabric.gpu_server)

    def _pick(self, n: int, free_mask: np.ndarray, leaf_of: np.ndarray, free_per: np.ndarray,
              server: np.ndarray) -> np.ndarray:
        """The GPUs of ``n`` free ones (`_servers` figures); ``server``: each GPU's server."""
        fits = np.flatnonzero(free_per >= n)
        if fits.size:  # best fit in one server
            s = int(fits[np.argmin(free_per[fits])])
            return np.flatnonzero(free_mask & (server == s))[:n].astype(np.int64)
        leaves, leaf_idx = np.unique(leaf_of, return_inverse=True)
        free_leaf = np.bincount(leaf_idx, weights=free_per, minlength=leaves.size)
        order_leaf = np.lexsort((leaves, -free_leaf))
        chosen: list[int] = []
        need = n
        for li in order_leaf.tolist():
            if need <= 0:
                break
            servers = np.flatnonzero((leaf_idx == li) & (free_per > 0))
            if not servers.size:
                continue
            if free_leaf[li] >= need:
                # the last leaf: largest servers first, the last one the emptiest that completes it
                srt = servers[np.lexsort((servers, -free_per[servers]))]
                while need > 0:
                    done = srt[free_per[srt] >= need]
                    if done.size:
                        s = int(done[np.argmin(free_per[done])])
                        chosen.append(s)
                        need = 0
                    else:
                        s = int(srt[0])
                        chosen.append(s)
                        need -= int(free_per[s])
                        srt = srt[1:]
            else:
                chosen.extend(servers.tolist())
                need -= int(free_leaf[li])
        out: list[np.ndarray] = []
        left = n
        for s in chosen:
            g = np.flatnonzero(free_mask & (server == s))[:left]
            out.append(g)
            left -= g.size
        gpus = np.concatenate(out).astype(np.int64)
        if gpus.size != n:  # cannot happen: enough GPUs are free
            raise ConfigError(f"packed placer found {gpus.size} GPUs for a job of {n} (placement)")
        return np.sort(gpus)


class SpreadPlacer(PackedPlacer):
    """Servers spread over the leaves (module docstring)."""

    name = "spread"

    def _pick(self, n: int, free_mask: np.ndarray, leaf_of: np.ndarray, free_per: np.ndarray,
              server: np.ndarray) -> np.ndarray:
        if np.any(free_per >= n):  # one server: no network either way
            return super()._pick(n, free_mask, leaf_of, free_per, server)
        leaves, leaf_idx = np.unique(leaf_of, return_inverse=True)
        free_leaf = np.bincount(leaf_idx, weights=free_per, minlength=leaves.size)
        taken = np.zeros(leaves.size, np.int64)
        left = free_per.copy()
        out: list[np.ndarray] = []
        need = n
        while need > 0:
            cands = np.flatnonzero(left > 0)
            li = leaf_idx[cands]
            s = int(cands[np.lexsort((cands, -left[cands], -free_leaf[li], taken[li]))[0]])
            g = np.flatnonzero(free_mask & (server == s))[:need]
            out.append(g)
            need -= g.size
            left[s] = 0
            taken[leaf_idx[s]] += 1
        return np.sort(np.concatenate(out).astype(np.int64))


PLACERS: Registry[type] = Registry("placer", {"first-fit": FirstFitPlacer, "packed": PackedPlacer,
                                              "spread": SpreadPlacer})


def make_placer(placer: str | Placer) -> Placer:
    """A placer by registry name, or the given object if it already is one."""
    if isinstance(placer, str):
        return PLACERS[placer]()
    if not callable(getattr(placer, "place", None)):
        raise ConfigError(f"placer must be a name ({', '.join(PLACERS)}) or have a place(job, "
                          f"free_mask, fabric) method, got {placer!r} (placer)")
    return placer
