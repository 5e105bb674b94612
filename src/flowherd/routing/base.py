"""What a router hands the engine: per-flow link incidence with split fractions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class Routes:
    """Routes of F flows, CSR by flow.

    Flow ``f`` uses the directed links ``link[ptr[f]:ptr[f+1]]`` and puts the fraction
    ``frac[...]`` of its rate on each (1.0 on every link of a single path; for an even split
    over p disjoint paths, 1/p on each). ``latency_s[f]`` is the propagation delay of the
    flow's last byte: the largest path latency among the paths it uses.
    """

    ptr: np.ndarray  # int64[F + 1]
    link: np.ndarray  # int32[nnz]
    frac: np.ndarray  # float64[nnz], in (0, 1]
    latency_s: np.ndarray  # float64[F]

    @property
    def num_flows(self) -> int:
        return len(self.ptr) - 1

    @staticmethod
    def concat(parts: list[Routes]) -> Routes:
        """Routes of all flows of `parts`, in order."""
        if not parts:
            return Routes(ptr=np.zeros(1, np.int64), link=np.zeros(0, np.int32),
                          frac=np.zeros(0), latency_s=np.zeros(0))
        offsets = np.cumsum([0] + [len(p.link) for p in parts[:-1]])
        ptr = np.concatenate([parts[0].ptr[:1]] + [p.ptr[1:] + o for p, o in zip(parts, offsets,
                                                                                    strict=True)])
        return Routes(ptr=ptr.astype(np.int64),
                      link=np.concatenate([p.link for p in parts]).astype(np.int32),
                      frac=np.concatenate([p.frac for p in parts]),
                      latency_s=np.concatenate([p.latency_s for p in parts]))


class Router(Protocol):
    """Chooses the paths of flows between GPUs. Deterministic for a given fabric and seed."""

    name: str

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray) -> Routes:
        """Route flows ``src[i] -> dst[i]`` (GPU node ids); ``key[i]`` is the flow's hash
        input (its "port"): ECMP sends flows of equal key over the same path."""
        ...
