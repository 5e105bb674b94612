"""`SimResult`: what a simulation run leaves behind, as arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SimResult"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SimResult:
    """A snapshot of an `Engine` run: per-flow, per-coflow and per-link records.

    Times are absolute simulation times in seconds; ``nan`` marks what has not happened yet
    (a coflow not started or not finished when the snapshot was taken).

    Attributes:
        now_s: Simulation time of the snapshot.
        flow_coflow: ``int64[F]``, the coflow of each flow (``None`` unless ``record_flows``;
            likewise for every ``flow_*`` field).
        flow_src, flow_dst: ``int32[F]``, GPU node ids.
        flow_size_bytes: ``float64[F]``.
        flow_start_s: ``float64[F]``, when the flow's coflow started.
        flow_finish_s: ``float64[F]``, when its last byte arrived (transmission end + latency).
        coflow_name: One name per coflow.
        coflow_start_s, coflow_finish_s: ``float64[C]``.
        link_bytes: ``float64[L]``, bytes carried by each directed link (sum of rate * frac * dt).
        link_busy_s: ``float64[L]``, time during which each link carried traffic.
        makespan_s: The last coflow finish (0 if none finished).
        num_events: Flow completions, coflow starts and coflow finishes processed.
        num_rate_updates: Rate recomputations (one per batch of simultaneous events).
    """

    now_s: float
    flow_coflow: np.ndarray | None
    flow_src: np.ndarray | None
    flow_dst: np.ndarray | None
    flow_size_bytes: np.ndarray | None
    flow_start_s: np.ndarray | None
    flow_finish_s: np.ndarray | None
    coflow_name: tuple[str, ...]
    coflow_start_s: np.ndarray
    coflow_finish_s: np.ndarray
    link_bytes: np.ndarray
    link_busy_s: np.ndarray
    makespan_s: float
    num_events: int = 0
    num_rate_updates: int = 0

    @property
    def num_coflows(self) -> int:
        return len(self.coflow_start_s)

    @property
    def num_flows(self) -> int | None:
        return None if self.flow_coflow is None else len(self.flow_coflow)

    def coflow_duration_s(self) -> np.ndarray:
        """``float64[C]``: finish minus start of each coflow (``nan`` if unfinished)."""
        return self.coflow_finish_s - self.coflow_start_s

    def flow_duration_s(self) -> np.ndarray:
        """``float64[F]``: finish minus start of each flow (needs ``record_flows``)."""
        if self.flow_start_s is None or self.flow_finish_s is None:
            raise ValueError("flow records were not kept: build the Engine with record_flows=True")
        return self.flow_finish_s - self.flow_start_s

    def link_utilization(self, capacity_bytes_per_s: np.ndarray, span_s: float | None = None
                         ) -> np.ndarray:
        """``float64[L]``: mean load of each link over ``span_s`` (default the makespan) as a
        fraction of its capacity (bytes per second)."""
        span = self.makespan_s if span_s is None else span_s
        if not span > 0:
            return np.zeros_like(self.link_bytes)
        return self.link_bytes / (np.asarray(capacity_bytes_per_s, dtype=np.float64) * span)
