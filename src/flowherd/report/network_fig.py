"""The figure of a run's congestion: per-link queues over time, PFC pause, ECN marks, drops.

Drawn from a `flowherd.engine.network.NetworkStats` (``engine.network.stats(now)``); the links
shown are the ones with the most queueing, pausing, marking and dropping.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from flowherd.engine.network import NetworkStats
from flowherd.fabric.core import Fabric

__all__ = ["fig_network", "write_network_figure"]


def _names(fabric: Fabric, links: np.ndarray) -> list[str]:
    return [f"{fabric.node_name(int(fabric.link_src[j]))}>{fabric.node_name(int(fabric.link_dst[j]))}"
            for j in links]


def _bars(ax, fabric: Fabric, values: np.ndarray, scale: float, unit: str, title: str, top: int) -> None:
    idx = np.argsort(values)[::-1][:top]
    idx = idx[values[idx] > 0]
    ax.set_title(title, fontsize=9)
    if not idx.size:
        ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes, color="0.5")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    ax.barh(range(idx.size), values[idx] / scale, color="tab:red")
    ax.set_yticks(range(idx.size), _names(fabric, idx), fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(unit, fontsize=8)


def fig_network(stats: NetworkStats, fabric: Fabric, *, top: int = 8) -> Figure:
    """Four panels: queue occupancy over time of the ``top`` links with the highest peak queue,
    and per link the time paused by PFC, the ECN-marked bytes and the dropped bytes."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    ax = axes[0, 0]
    ax.set_title(f"queue occupancy ({stats.model})", fontsize=9)
    order = np.argsort(stats.queue_max_bytes)[::-1][:top]
    order = order[stats.queue_max_bytes[order] > 0]
    for j, name in zip(order.tolist(), _names(fabric, order), strict=True):
        sel = stats.series_link == j
        t = np.concatenate([[0.0], stats.series_t_s[sel], [stats.now_s]])
        q = np.concatenate([[0.0], stats.series_queue_bytes[sel]])
        ax.step(t[:-1] * 1e3, q / 1e3, where="post", label=name, lw=1)
    if order.size:
        ax.legend(fontsize=6)
    else:
        ax.text(0.5, 0.5, "no standing queue", ha="center", va="center", transform=ax.transAxes, color="0.5")
    ax.set_xlabel("time (ms)", fontsize=8)
    ax.set_ylabel("queue (kB)", fontsize=8)
    _bars(axes[0, 1], fabric, stats.pause_s, 1e-6, "paused (us)",
          f"PFC pause ({stats.num_pauses} episodes)", top)
    _bars(axes[1, 0], fabric, stats.ecn_marked_bytes, 1e6, "ECN-marked (MB)", "ECN-marked bytes", top)
    _bars(axes[1, 1], fabric, stats.drop_bytes, 1e3, "dropped (kB)",
          f"drops ({stats.num_timeouts} timeouts)", top)
    fig.tight_layout()
    return fig


def write_network_figure(stats: NetworkStats, fabric: Fabric, path: str | Path) -> Path:
    """Draw `fig_network` to a PNG file; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = fig_network(stats, fabric)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
