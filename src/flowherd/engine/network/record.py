"""A run's congestion record as plain rows: what the result store keeps and the report draws.

`network_record` turns a `NetworkStats` (every link) into the rows of the links that queued,
paused, marked or dropped most, each with its queue-occupancy series and its PFC pause episodes,
so that a stored run carries the per-link outputs of the congestion model without its arrays
of every link of the fabric.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from flowherd.engine.network.model import NetworkStats
from flowherd.fabric.core import Fabric

__all__ = ["network_record"]


def network_record(stats: NetworkStats, fabric: Fabric, *, top: int = 16) -> dict[str, Any]:
    """Rows of the ``top`` links ranked by each of peak queue, pause time, marked and dropped
    bytes (union, at most ``4 * top`` links; links with none of the four are left out).

    Returns:
        ``{"model", "now_s", "num_timeouts", "num_pauses", "links": [row, ...]}``; a row has
        ``link`` (directed link index), ``name`` ("src>dst"), ``queue_mean_bytes``,
        ``queue_max_bytes``, ``pause_s``, ``ecn_marked_bytes``, ``drop_bytes``, and the series
        ``series_t_s`` / ``series_queue_bytes`` (queue after each change, bytes) and
        ``pause_t_s`` / ``pause_dur_s`` (PFC pause episodes), all plain floats.
    """
    keys = (stats.queue_max_bytes, stats.pause_s, stats.ecn_marked_bytes, stats.drop_bytes)
    chosen: set[int] = set()
    for v in keys:
        idx = np.argsort(-v, kind="stable")[:top]
        chosen.update(int(j) for j in idx if v[j] > 0)
    rows = []
    for j in sorted(chosen):
        sel = stats.series_link == j
        psel = stats.pause_link == j
        src, dst = fabric.node_name(int(fabric.link_src[j])), fabric.node_name(int(fabric.link_dst[j]))
        rows.append({
            "link": j,
            "name": f"{src}>{dst}",
            "queue_mean_bytes": float(stats.queue_mean_bytes[j]),
            "queue_max_bytes": float(stats.queue_max_bytes[j]),
            "pause_s": float(stats.pause_s[j]),
            "ecn_marked_bytes": float(stats.ecn_marked_bytes[j]),
            "drop_bytes": float(stats.drop_bytes[j]),
            "series_t_s": stats.series_t_s[sel].astype(float).tolist(),
            "series_queue_bytes": stats.series_queue_bytes[sel].astype(float).tolist(),
            "pause_t_s": stats.pause_t_s[psel].astype(float).tolist(),
            "pause_dur_s": stats.pause_dur_s[psel].astype(float).tolist(),
        })
    return {"model": stats.model, "now_s": float(stats.now_s), "num_timeouts": int(stats.num_timeouts),
            "num_pauses": int(stats.num_pauses), "links": rows}
