"""PNG figures of a result store, drawn with matplotlib (Agg backend, no display needed).

Each ``fig_*`` function takes a `ReportData` (or one `RunView` of it) and returns a matplotlib
``Figure``; `write_figures` saves them all. The series come from `flowherd.report.data`, shared
with the HTML page.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.patheffects import withStroke

from flowherd import atomic
from flowherd.report.data import (
    ROW_STEP,
    ReportData,
    RunView,
    fabric_layout,
    gantt,
    jain_index,
    jct_cdf,
    job_labels,
    loads_measured,
    seeds_phrase,
    slowdown_vs_load,
    tenant_axis_scale,
    tenant_slowdowns,
    utilization,
)

__all__ = ["fig_fabric", "fig_gantt", "fig_jct_cdf", "fig_link_heatmap", "fig_slowdown_vs_load",
           "fig_tenant_fairness", "write_figures"]

_DPI = 130
_MAX_LEGEND_JOBS = 40


def _t(text: str) -> str:
    """A label from data, shown literally ($ would start mathtext)."""
    return str(text).replace("$", r"\$")


def _method_colors(methods: list[str]) -> dict[str, tuple[float, ...]]:
    cmap = plt.get_cmap("tab10")
    return {m: cmap(i % 10) for i, m in enumerate(methods)}


_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v", "P")


def _style(methods: list[str], m: str) -> dict[str, str]:
    # methods may give equal results; distinct dashes and markers keep overlapping curves visible
    k = methods.index(m)
    return {"ls": _STYLES[k % len(_STYLES)], "marker": _MARKERS[k % len(_MARKERS)]}


def _tenant_colors(tenants: list[str]) -> dict[str, tuple[float, ...]]:
    cmap = plt.get_cmap("Set2")
    return {t: cmap(i % 8) for i, t in enumerate(sorted(set(tenants)))}


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


def fig_jct_cdf(data: ReportData) -> Figure:
    """Empirical CDF of job completion times per method (all loads and seeds pooled)."""
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    colors = _method_colors(data.methods)
    series = jct_cdf(data)
    for m, (x, y, n) in series.items():
        ax.step(np.concatenate([[x[0]], x]), np.concatenate([[0.0], y]), where="post", color=colors[m],
                lw=1.8, ls=_style(data.methods, m)["ls"], label=f"{_t(m)} ({x.size} of {n} jobs finished)")
    if series:
        lo = min(s[0][0] for s in series.values())
        hi = max(s[0][-1] for s in series.values())
        if lo > 0 and hi / lo > 20:
            ax.set_xscale("log")
        # which corner a CDF leaves empty depends on the data
        ax.legend(title="method", fontsize=8, title_fontsize=8, loc="best")
    else:
        _empty(ax, "no finished jobs")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs finished")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title("Job completion time CDF per method")
    return fig


def fig_slowdown_vs_load(data: ReportData) -> Figure:
    """Mean job slowdown (JCT over JCT alone) against background load, per method; bars span seeds.

    With one background load in the store, a load axis would stack every method's dot at one x:
    the figure then compares the methods side by side at that load.
    """
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    colors = _method_colors(data.methods)
    series = slowdown_vs_load(data)
    loads = loads_measured(series)
    nseeds = max((int(s["n"].max()) for s in series.values()), default=0)
    if len(loads) == 1:
        names = list(series)
        for k, m in enumerate(names):
            s = series[m]
            err = np.vstack([s["mean"] - s["min"], s["max"] - s["mean"]])
            ax.errorbar([k], s["mean"], yerr=err, color=colors[m], ms=7, capsize=4, ls="none",
                        marker=_style(data.methods, m)["marker"], label=_t(m))
            ax.annotate(f"{s['mean'][0]:.2f}x", (k, s["mean"][0]), textcoords="offset points", xytext=(8, 0),
                        va="center", fontsize=8)
        ax.set_xticks(range(len(names)), [_t(m) for m in names], rotation=15, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_xlabel(f"method (background load {100 * loads[0]:.0f}% of link capacity)")
        ax.set_title(f"Mean job slowdown per method (mean of {seeds_phrase(nseeds)}; bars: min-max)")
    elif series:
        for m, s in series.items():
            err = np.vstack([s["mean"] - s["min"], s["max"] - s["mean"]])
            ax.errorbar(100 * s["load"], s["mean"], yerr=err, color=colors[m], ms=5, lw=1.8, capsize=3,
                        label=_t(m), **_style(data.methods, m))
        ax.legend(title="method", fontsize=8, title_fontsize=8)
        ax.set_title(f"Slowdown against background load (mean of {seeds_phrase(nseeds)}; bars: min-max)")
        ax.set_xlabel("background load (% of link capacity)")
    else:
        _empty(ax, "no slowdowns (no finished run measured its jobs alone)")
        ax.set_title("Slowdown against background load")
        ax.set_xlabel("background load (% of link capacity)")
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.set_ylabel("mean job slowdown (x, 1 = alone)")
    ax.grid(alpha=0.3)
    return fig


def fig_tenant_fairness(data: ReportData) -> Figure:
    """Mean slowdown of each tenant per method, with Jain's fairness index over tenants."""
    tenants, series = tenant_slowdowns(data)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(tenants) + 3), 4.2), layout="constrained")
    colors = _method_colors(data.methods)
    width = 0.8 / max(1, len(series))
    xs = np.arange(len(tenants))
    for k, (m, vals) in enumerate(series.items()):
        # nan (no job of the tenant under the method): no bar, not a bar at 0 (log axes reject 0)
        ax.bar(xs + (k - (len(series) - 1) / 2) * width, np.where(np.isfinite(vals), vals, np.nan), width,
               color=colors[m], label=f"{_t(m)} (Jain {jain_index(vals):.3f})")
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.set_xticks(xs, [_t(t) for t in tenants], rotation=20 if len(tenants) > 5 else 0, ha="right"
                  if len(tenants) > 5 else "center")
    ax.set_xlabel("tenant")
    scale = tenant_axis_scale(series)
    if scale == "log":  # one outlier tenant would flatten the others on a linear axis
        ax.set_yscale("log")
        vals = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in series.values()])
        ax.set_ylim(min(0.8, 0.8 * vals.min()), 1.6 * vals.max())
        for container in ax.containers:
            ax.bar_label(container, fmt="%.1fx", fontsize=6, padding=1)
    ax.set_ylabel("mean job slowdown (x, 1 = alone)" + (", log scale" if scale == "log" else ""))
    ax.set_title("Per-tenant slowdown (Jain's index over tenants: 1 = equal)")
    if series and tenants:
        ax.legend(title="method", fontsize=8, title_fontsize=8)
    else:
        _empty(ax, "no tenant slowdowns")
    ax.grid(alpha=0.3, axis="y")
    return fig


def fig_link_heatmap(data: ReportData) -> Figure:
    """Utilization of each link tier over time, one panel per representative run."""
    views = data.detail
    fig, axes = plt.subplots(max(1, len(views)), 1, figsize=(9, 0.5 + 1.7 * max(1, len(views))),
                             layout="constrained", squeeze=False)
    im = None
    for ax, v in zip(axes[:, 0], views, strict=False):
        tiers, edges, u = utilization(v)
        if not tiers:
            _empty(ax, "no utilization series")
            continue
        im = ax.imshow(100 * u, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest",
                       extent=(edges[0], edges[-1], len(tiers) - 0.5, -0.5))
        ax.set_yticks(range(len(tiers)), tiers)
        ax.set_title(f"{_t(v.method)}: run {v.run['run_id']} (background load "
                     f"{100 * (v.run['background_load'] or 0):.0f}%, seed {v.run['seed']})", fontsize=9)
        ax.set_xlabel("time (s)")
    if im is not None:
        fig.colorbar(im, ax=axes[:, 0].tolist(), label="utilization (% of tier capacity)", shrink=0.9)
    fig.suptitle("Link utilization by tier over time")
    return fig


def fig_gantt(view: RunView) -> Figure:
    """Jobs over time: queueing, then each iteration's compute and communication parts."""
    rows = gantt(view)
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.32 * max(1, len(rows))), layout="constrained")
    colors = _tenant_colors([r.tenant for r in rows])
    t0 = min((r.submit_s for r in rows), default=0.0)
    t1 = max((r.end_s for r in rows), default=1.0)
    min_tick_s = 0.004 * max(t1 - t0, 1e-12)  # iteration boundaries closer than this would blacken a bar
    for i, r in enumerate(rows):
        c = colors[r.tenant]
        if r.start_s is None:
            ax.broken_barh([(r.submit_s, r.end_s - r.submit_s)], (i - 0.3, 0.6), facecolor="none",
                           edgecolor="0.6", hatch="..", lw=0.5)
            continue
        if r.start_s > r.submit_s:
            ax.broken_barh([(r.submit_s, r.start_s - r.submit_s)], (i - 0.12, 0.24), facecolor="0.8")
        if r.kind == "training":
            ax.broken_barh([(r.start_s, r.end_s - r.start_s)], (i - 0.35, 0.7), facecolor=c, alpha=0.25,
                           edgecolor="none")
            ax.broken_barh(r.compute, (i - 0.35, 0.7), facecolor=c, edgecolor="none")
            ax.broken_barh(r.comm, (i - 0.35, 0.7), facecolor="white", edgecolor=c, hatch="////", lw=0.0)
            if r.compute and (r.compute[-1][0] - r.compute[0][0]) / max(1, len(r.compute) - 1) >= min_tick_s:
                ax.vlines([s for s, _ in r.compute[1:]], i - 0.38, i + 0.38, color="0.15", lw=0.4)
        else:
            ax.broken_barh([(r.start_s, r.end_s - r.start_s)], (i - 0.35, 0.7), facecolor=c, alpha=0.3)
            ax.broken_barh(r.comm, (i - 0.25, 0.5), facecolor=c, edgecolor="none")
        if not r.finished:
            ax.plot([r.end_s], [i], marker=">", color="0.2", ms=5)
    ax.set_yticks(range(len(rows)), [f"{_t(r.name)} ({_t(r.tenant)})" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    handles = [Patch(facecolor=colors[t], label=_t(t)) for t in colors]
    handles += [Patch(facecolor="0.3", label="compute (iteration)"),
                Patch(facecolor="0.8", label="queued"),
                Patch(facecolor="white", edgecolor="0.3", hatch="////",
                      label="communication beyond compute"),
                Patch(facecolor="0.3", alpha=0.3, label="inference: serving; solid: request batches"),
                Patch(facecolor="none", edgecolor="0.6", hatch="..", label="never started")]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="tenant",
              title_fontsize=7)
    # short enough for the figure's width; what the marks mean is in the legend
    ax.set_title(f"Jobs of run {view.run['run_id']}\n{_t(view.method)}", fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    return fig


def fig_fabric(view: RunView) -> Figure:
    """The fabric (GPUs, NICs, switches and cables) with each GPU colored by the jobs it ran."""
    lay = fabric_layout(view)
    g = lay.num_gpus
    width = float(np.clip(0.07 * (lay.node_x[:g].max() + 1), 8, 18))
    fig, ax = plt.subplots(figsize=(width, 5.2), layout="constrained")
    ok = np.isfinite(lay.node_x[lay.edges]).all(axis=1) if len(lay.edges) else np.zeros(0, bool)
    segs = np.stack([np.stack([lay.node_x[lay.edges[ok, 0]], lay.node_y[lay.edges[ok, 0]]], 1),
                     np.stack([lay.node_x[lay.edges[ok, 1]], lay.node_y[lay.edges[ok, 1]]], 1)], 1)
    ax.add_collection(LineCollection(segs, colors="0.75", linewidths=0.5, zorder=1))
    depth = max((len(o) for o in lay.occupants), default=1)
    bottom = -0.13 - ROW_STEP * max(0, depth - 1)  # the boxes hold every row of stacked jobs
    for x0, x1 in lay.server_box:
        ax.add_patch(Rectangle((x0 - 0.5, bottom), x1 - x0 + 1, 0.3 - bottom, facecolor="none",
                               edgecolor="0.55", lw=0.6, zorder=1))
    drawn = np.isfinite(lay.node_x)
    names = {1: "NIC", 2: "leaf", 3: "spine", 4: "core"}
    for t, name in names.items():
        ids = np.flatnonzero(drawn & (lay.node_tier == t) & (np.arange(len(lay.node_x)) >= g))
        if ids.size:
            ax.scatter(lay.node_x[ids], lay.node_y[ids], s=12 if t == 1 else 60,
                       marker="o" if t == 1 else "s", color="0.35", zorder=2)
            ax.text(lay.node_x[drawn].min() - 2, float(t), name, ha="right", va="center", fontsize=8)
    ax.text(lay.node_x[drawn].min() - 2, 0.0, "GPU", ha="right", va="center", fontsize=8)
    # GPUs in their tenant's colour (a handful, told apart at a glance) and each job's number at
    # the middle of its GPUs; the legend maps numbers to jobs
    tcolor = _tenant_colors(list(lay.job_tenant.values()))
    idle = [i for i in range(g) if not lay.occupants[i]]
    ax.scatter(lay.node_x[idle], np.zeros(len(idle)), s=14, marker="s", color="0.9", edgecolor="0.6",
               lw=0.3, zorder=3)
    for k in range(depth):
        ids = [i for i in range(g) if len(lay.occupants[i]) > k]
        if not ids:
            continue
        ax.scatter(lay.node_x[ids], np.full(len(ids), -ROW_STEP * k), s=14, marker="s",
                   color=[tcolor[lay.job_tenant[lay.occupants[i][k]]] for i in ids], zorder=3 + k)
    # each job's number on its own GPUs, in every server it ran in (a white outline keeps it
    # readable on its tenant's colour)
    for lab in job_labels(lay):
        ax.text(lab.x, lab.y, str(lab.number), ha="center", va="center", fontsize=6, zorder=10,
                color="black", fontweight="bold",
                path_effects=[withStroke(linewidth=1.8, foreground="white")])
    handles = [Patch(facecolor=tcolor[t], label=f"tenant {_t(t)}") for t in tcolor]
    handles.append(Patch(facecolor="0.9", edgecolor="0.6", label="idle GPU"))
    jobs = list(lay.job_number)
    for name in jobs[:_MAX_LEGEND_JOBS]:
        handles.append(Patch(facecolor="none", edgecolor="none",
                             label=f"{lay.job_number[name]}: {_t(name)} ({_t(lay.job_tenant[name])})"))
    if len(jobs) > _MAX_LEGEND_JOBS:
        handles.append(Patch(facecolor="none", edgecolor="none",
                             label=f"... {len(jobs) - _MAX_LEGEND_JOBS} more jobs"))
    ax.legend(handles=handles, fontsize=6, ncol=1 + len(handles) // 26, loc="upper left",
              bbox_to_anchor=(1.0, 1.0), title="colour: tenant; number: job", title_fontsize=7,
              handlelength=1.0)
    top = float(np.nanmax(lay.node_y))
    ax.set_ylim(bottom - 0.15, top + 0.5)
    ax.set_xlim(float(np.nanmin(lay.node_x)) - 6, float(np.nanmax(lay.node_x)) + 1)
    ax.axis("off")
    ax.set_title(f"Fabric {_t(lay.title)}: {g} GPUs in {len(lay.server_box)} servers (boxes: NVLink "
                 f"domains)\njobs of run {view.run['run_id']} ({_t(view.method)}); a GPU that ran several "
                 "jobs shows them stacked downward in start order", fontsize=9)
    return fig


def write_figures(data: ReportData, out_dir: str | Path) -> list[Path]:
    """Save every figure as PNG into `out_dir`; returns the paths.

    Files: ``jct_cdf.png``, ``slowdown_vs_load.png``, ``tenant_fairness.png``,
    ``link_utilization.png``, and per representative run ``gantt_<k>.png`` and ``fabric_<k>.png``.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise atomic.write_error(out, err, "--out") from None
    figs: list[tuple[str, Figure]] = [("jct_cdf", fig_jct_cdf(data)),
                                      ("slowdown_vs_load", fig_slowdown_vs_load(data)),
                                      ("tenant_fairness", fig_tenant_fairness(data))]
    if data.detail:
        figs.append(("link_utilization", fig_link_heatmap(data)))
    for k, view in enumerate(data.detail):
        figs.append((f"gantt_{k}", fig_gantt(view)))
        figs.append((f"fabric_{k}", fig_fabric(view)))
    paths = []
    try:
        for name, fig in figs:
            path = out / f"{name}.png"
            with atomic.replacing(path, field="--out") as tmp:  # never half a PNG (a full disk)
                fig.savefig(tmp, dpi=_DPI, format="png")
            paths.append(path)
    finally:
        for _name, fig in figs:
            plt.close(fig)
    return paths

