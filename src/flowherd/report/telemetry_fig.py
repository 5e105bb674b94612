"""Figures of runs' telemetry (`flowherd.experiments.telemetry`, docs/telemetry.md).

* `fig_timeline`: the busiest links of one run over time, one row per link, each time bin
  colored by the tenant whose jobs' routes cross the link then (grey: background only; black
  hatched: several tenants), its opacity the link's utilization in the bin.
* `fig_links_by_method`: where path choice shows: one utilization heatmap per method (controller
  or placement), the same links in the same rows (the busiest over all the methods' runs), the same
  color scale. A method that moves traffic to other paths lights other rows.

`write_telemetry_figures` draws them for a result store whose runs kept telemetry (the Parquet
files under ``telemetry/<run_id>/`` beside the store).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["busiest_links", "fig_links_by_method", "fig_timeline", "read_run_telemetry",
           "write_telemetry_figures"]

_PALETTE = plt.get_cmap("tab10").colors
_FIXED = {"background": "#9a9a9a", "shared": "#000000"}


def read_run_telemetry(directory: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """``links`` and ``link_info`` of one run's telemetry directory, as column arrays."""
    from flowherd.experiments.store import local_files_connection

    d = Path(directory)
    con = local_files_connection()  # no extension loaded on demand; one thread
    try:
        out = {}
        for name in ("links", "link_info"):
            rel = con.execute(f"SELECT * FROM read_parquet('{d / (name + '.parquet')}')")
            cols = [c[0] for c in rel.description]
            rows = rel.fetchall()
            text = ("tenant", "src", "dst", "kind", "tier")
            out[name] = {c: np.array([r[i] for r in rows], dtype=object if c in text else float)
                         for i, c in enumerate(cols)}
        return out
    finally:
        con.close()


def _label(info: Mapping[str, np.ndarray], link: int) -> str:
    i = int(np.flatnonzero(info["link"] == link)[0])
    return f"{info['src'][i]}>{info['dst'][i]}"


def busiest_links(tables: list[Mapping[str, Mapping[str, np.ndarray]]], top: int, *,
                  network_only: bool = True) -> np.ndarray:
    """The ``top`` links with the most bytes over the given runs (scale-out links only by default:
    NVLink carries far more and is never shared between jobs)."""
    total: dict[int, float] = {}
    for t in tables:
        info, links = t["link_info"], t["links"]
        ok = {int(x) for x, k in zip(info["link"], info["kind"], strict=True) if k == "network"} \
            if network_only else None
        for lnk, b in zip(links["link"].astype(int), links["bytes"], strict=True):
            if ok is None or lnk in ok:
                total[lnk] = total.get(lnk, 0.0) + float(b)
    order = sorted(total, key=lambda k: (-total[k], k))
    return np.array(order[:top], dtype=np.int64)


def _grid(links: Mapping[str, np.ndarray], rows: np.ndarray, nbins: int, value: str) -> np.ndarray:
    grid = np.zeros((len(rows), nbins), dtype=object if value == "tenant" else float)
    if value == "tenant":
        grid[:] = ""
    where = {int(k): i for i, k in enumerate(rows)}
    for lnk, b, v in zip(links["link"].astype(int), links["bin"].astype(int), links[value], strict=True):
        i = where.get(lnk)
        if i is not None and b < nbins:
            grid[i, b] = v
    return grid


def _bins(links: Mapping[str, np.ndarray]) -> tuple[int, float]:
    """Bins and end time drawn: up to the last bin a job's traffic crosses (then only background
    is left, which would squeeze the jobs into the first columns), or the whole run without jobs."""
    if not len(links["bin"]):
        return 1, 1.0
    jobs = np.array([t not in _FIXED for t in links["tenant"]])
    sel = jobs if jobs.any() else np.ones(len(jobs), bool)
    last = int(links["bin"][sel].max())
    nb = min(int(links["bin"].max()) + 1, last + 2)  # one bin of what follows
    t1 = float(links["t1_s"][links["bin"] == nb - 1].max()) if np.any(links["bin"] == nb - 1) else \
        float(links["t1_s"][sel].max())
    return nb, t1


def fig_timeline(run: Mapping[str, Mapping[str, np.ndarray]], *, top: int = 12, title: str = "") -> Figure:
    """The busiest links of one run over time, colored by tenant (module docstring)."""
    links, info = run["links"], run["link_info"]
    rows = busiest_links([run], top)
    nb, t_end = _bins(links)
    util = np.clip(_grid(links, rows, nb, "utilization"), 0.0, 1.0)
    ten = _grid(links, rows, nb, "tenant")
    names = sorted({t for t in ten.ravel() if t and t not in _FIXED})
    color = {t: _PALETTE[i % len(_PALETTE)] for i, t in enumerate(names)} | _FIXED
    img = np.ones((len(rows), nb, 4))
    for i in range(len(rows)):
        for b in range(nb):
            if ten[i, b]:
                r, g, bl, _ = to_rgba(color[ten[i, b]])
                a = 0.15 + 0.85 * util[i, b]
                img[i, b] = (1 - a) + a * np.array([r, g, bl, 1.0])
    fig, ax = plt.subplots(figsize=(10, 0.35 * max(len(rows), 4) + 1.6))
    ax.imshow(img, aspect="auto", interpolation="nearest", extent=(0, t_end, len(rows) - 0.5, -0.5))
    ax.set_yticks(range(len(rows)), [_label(info, int(k)) for k in rows], fontsize=7)
    ax.set_xlabel("time (s)")
    ax.set_title(title or f"busiest {len(rows)} scale-out links: tenant by color, utilization by depth")
    used = [t for t in [*names, "shared", "background"] if any(t == x for x in ten.ravel())]
    ax.legend(handles=[Patch(color=color[t], label=t) for t in used], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def fig_links_by_method(runs: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], *,
                        top: int = 16) -> Figure:
    """One utilization heatmap per method over the same busiest links (module docstring)."""
    rows = busiest_links(list(runs.values()), top)
    methods = list(runs)
    size = (4.2 * len(methods) + 1.5, 0.3 * max(len(rows), 4) + 1.8)
    fig, axes = plt.subplots(1, len(methods), figsize=size, sharey=True, squeeze=False)
    im = None
    grids = {m: (_grid(runs[m]["links"], rows, _bins(runs[m]["links"])[0], "utilization"),
                 _bins(runs[m]["links"])[1]) for m in methods}
    vmax = max(float(g.max()) for g, _ in grids.values()) or 1.0  # one scale: the busiest bin
    for ax, m in zip(axes[0], methods, strict=True):
        util, t_end = grids[m]
        im = ax.imshow(util, aspect="auto", interpolation="nearest", vmin=0, vmax=vmax, cmap="viridis",
                       extent=(0, t_end, len(rows) - 0.5, -0.5))
        ax.set_title(m, fontsize=9)
        ax.set_xlabel("time (s)")
    info = next(iter(runs.values()))["link_info"]
    axes[0][0].set_yticks(range(len(rows)), [_label(info, int(k)) for k in rows], fontsize=7)
    if im is not None:
        fig.colorbar(im, ax=axes[0].tolist(), label="utilization", fraction=0.03)
    fig.suptitle("the busiest scale-out links over time, by method (the same links in every panel)",
                 fontsize=10)
    return fig


def write_telemetry_figures(store_dir: str | Path, out_dir: str | Path,
                            methods: Mapping[str, str]) -> list[Path]:
    """Draw the timeline of each method's first run that kept telemetry, and the heatmap by method
    if there are several; ``methods``: run id -> method label. Returns the PNG files (none when no
    run kept telemetry)."""
    base = Path(store_dir)
    root = (base if base.is_dir() else base.parent) / "telemetry"
    if not root.is_dir():
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    per_method: dict[str, Any] = {}
    for run_id, m in methods.items():
        d = root / run_id
        if m not in per_method and (d / "links.parquet").is_file():
            per_method[m] = read_run_telemetry(d)
    files = []
    for k, (m, run) in enumerate(per_method.items()):
        fig = fig_timeline(run, title=f"{m}: busiest scale-out links, tenant by color, utilization by depth")
        p = out / f"telemetry_timeline_{k}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    if len(per_method) > 1:
        fig = fig_links_by_method(per_method)
        p = out / "telemetry_links_by_method.png"
        fig.savefig(p, dpi=110, bbox_inches="tight")
        plt.close(fig)
        files.append(p)
    return files
