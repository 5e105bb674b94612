"""The self-contained HTML report: one page, plotly's JavaScript inlined, works offline.

The page draws the series of `flowherd.report.data` (the same as the PNG figures) as interactive
plotly charts, lists the methods with their run counts and headline numbers, and the failed runs
with their errors. Every name that comes from data (jobs, tenants, traces, errors) is
HTML-escaped, in the page and inside the charts (plotly renders a subset of HTML in labels).

When the page has drawn its charts it sets ``data-plots`` (charts drawn) and ``data-errors``
(script errors caught) on ``<body>`` and fills ``<pre id="fh-status">``; the browser test reads
them.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from flowherd.report.data import (
    ReportData,
    RunView,
    fabric_layout,
    gantt,
    jain_index,
    jct_cdf,
    loads_measured,
    network_panels,
    paired_comparisons,
    seeds_phrase,
    slowdown_vs_load,
    tenant_axis_scale,
    tenant_slowdowns,
    utilization,
)

__all__ = ["render_html", "write_html"]

_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf"]
_TENANT = ["#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3", "#a6d854", "#ffd92f", "#e5c494", "#b3b3b3"]
_DASH = ["solid", "dash", "dashdot", "dot"]


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    fig.update_layout(title={"text": title, "x": 0.01}, template="plotly_white",
                      margin={"l": 70, "r": 30, "t": 60, "b": 60}, legend={"font": {"size": 11}}, **kw)
    return fig


def plot_jct_cdf(data: ReportData) -> go.Figure:
    fig = go.Figure()
    for k, (m, (x, y, n)) in enumerate(jct_cdf(data).items()):
        fig.add_trace(go.Scatter(x=np.concatenate([[x[0]], x]), y=np.concatenate([[0.0], y]), mode="lines",
                                 line={"shape": "hv", "color": _PALETTE[k % 10], "dash": _DASH[k % 4]},
                                 name=f"{_e(m)} ({x.size} of {n} jobs finished)"))
    return _layout(fig, "Job completion time CDF per method", xaxis_title="job completion time (s)",
                   yaxis_title="fraction of jobs finished", yaxis_range=[0, 1.02], legend_title_text="method")


def plot_slowdown(data: ReportData) -> go.Figure:
    fig = go.Figure()
    series = slowdown_vs_load(data)
    loads = loads_measured(series)
    nseeds = max((int(s["n"].max()) for s in series.values()), default=0)
    one = len(loads) == 1  # one load: the methods side by side (figures.fig_slowdown_vs_load)
    for k, (m, s) in enumerate(series.items()):
        fig.add_trace(go.Scatter(
            x=[_e(m)] if one else 100 * s["load"], y=s["mean"], mode="markers" if one else "lines+markers",
            name=_e(m), line={"color": _PALETTE[k % 10], "dash": _DASH[k % 4]},
            marker={"size": 9 if one else 6},
            error_y={"type": "data", "array": s["max"] - s["mean"], "arrayminus": s["mean"] - s["min"]},
            customdata=s["n"],
            hovertemplate=("" if one else "load %{x:.0f}%<br>") + "mean slowdown %{y:.3f}x<br>%{customdata} "
                          "seed(s)"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    if one:
        return _layout(fig, f"Mean job slowdown per method at background load {100 * loads[0]:.0f}% "
                            f"(mean of {seeds_phrase(nseeds)}; bars: min-max)", xaxis_title="method",
                       yaxis_title="mean job slowdown (x, 1 = alone)", legend_title_text="method")
    return _layout(fig, f"Slowdown against background load (mean of {seeds_phrase(nseeds)}; bars: min-max)",
                   xaxis_title="background load (% of link capacity)",
                   yaxis_title="mean job slowdown (x, 1 = alone)", legend_title_text="method")


def plot_tenants(data: ReportData) -> go.Figure:
    tenants, series = tenant_slowdowns(data)
    fig = go.Figure()
    for k, (m, vals) in enumerate(series.items()):
        fig.add_trace(go.Bar(x=[_e(t) for t in tenants], y=[None if not np.isfinite(v) else v for v in vals],
                             name=f"{_e(m)} (Jain {jain_index(vals):.3f})", marker_color=_PALETTE[k % 10]))
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    scale = tenant_axis_scale(series)  # log when one outlier tenant would flatten the others
    return _layout(fig, "Per-tenant slowdown (Jain's index over tenants: 1 = equal)", barmode="group",
                   xaxis_title="tenant", yaxis_type=scale,
                   yaxis_title="mean job slowdown (x, 1 = alone)" + (", log scale" if scale == "log" else ""),
                   legend_title_text="method")


def plot_heatmap(data: ReportData) -> go.Figure:
    views = data.detail
    fig = make_subplots(rows=max(1, len(views)), cols=1, shared_xaxes=False, vertical_spacing=0.12,
                        subplot_titles=[f"{_e(v.method)}: run {_e(v.run['run_id'])} (background load "
                                        f"{100 * (v.run['background_load'] or 0):.0f}%, seed {v.run['seed']})"
                                        for v in views] or ["no runs"])
    for k, v in enumerate(views):
        tiers, edges, u = utilization(v)
        if not tiers:
            continue
        fig.add_trace(go.Heatmap(z=100 * u, x=(edges[:-1] + edges[1:]) / 2, y=tiers, zmin=0, zmax=100,
                                 colorscale="Viridis", showscale=k == 0,
                                 colorbar={"title": {"text": "utilization (% of capacity)", "side": "right"}},
                                 hovertemplate="%{y}<br>t = %{x:.3g} s<br>%{z:.1f}%<extra></extra>"),
                      row=k + 1, col=1)
        fig.update_xaxes(title_text="time (s)", row=k + 1, col=1)
        fig.update_yaxes(autorange="reversed", row=k + 1, col=1)
    return _layout(fig, "Link utilization by tier over time", height=160 + 220 * max(1, len(views)))


def plot_gantt(view: RunView) -> go.Figure:
    rows = gantt(view)
    labels = [f"{_e(r.name)} ({_e(r.tenant)})" for r in rows]
    tenants = sorted({r.tenant for r in rows})
    color = {t: _TENANT[i % len(_TENANT)] for i, t in enumerate(tenants)}
    fig = go.Figure()

    def bars(name: str, segs: list[tuple[str, float, float]], **marker: Any) -> None:
        if segs:
            fig.add_trace(go.Bar(orientation="h", y=[s[0] for s in segs], base=[s[1] for s in segs],
                                 x=[s[2] for s in segs], name=name, marker=marker,
                                 hovertemplate="%{y}<br>%{base:.3f} s + %{x:.3f} s<extra>" + name
                                 + "</extra>"))

    bars("queued", [(lab, r.submit_s, r.start_s - r.submit_s) for lab, r in zip(labels, rows, strict=True)
                    if r.start_s is not None and r.start_s > r.submit_s], color="#cccccc")
    bars("never started", [(lab, r.submit_s, r.end_s - r.submit_s)
                           for lab, r in zip(labels, rows, strict=True) if r.start_s is None],
         color="rgba(0,0,0,0)", line={"color": "#999999", "width": 1})
    for t in tenants:
        mine = [(lab, r) for lab, r in zip(labels, rows, strict=True) if r.tenant == t]
        bars(f"{_e(t)}: compute", [(lab, s, w) for lab, r in mine for s, w in r.compute], color=color[t],
             line={"width": 0})
        bars(f"{_e(t)}: communication", [(lab, s, w) for lab, r in mine if r.kind == "training"
                                         for s, w in r.comm],
             color="white", line={"color": color[t], "width": 1}, pattern={"shape": "/", "fgcolor": color[t]})
        bars(f"{_e(t)}: request batches", [(lab, s, w) for lab, r in mine if r.kind != "training"
                                           for s, w in r.comm],
             color=color[t], opacity=0.6, line={"width": 0})
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1])
    return _layout(fig, f"Jobs of run {_e(view.run['run_id'])}<br><sup>{_e(view.method)}: compute (solid), "
                        "communication beyond compute (hatched)</sup>", barmode="overlay",
                   xaxis_title="time (s)", height=180 + 28 * max(1, len(rows)),
                   legend_title_text="tenant: part")


def plot_fabric(view: RunView) -> go.Figure:
    lay = fabric_layout(view)
    g = lay.num_gpus
    fig = go.Figure()
    ex: list[float | None] = []
    ey: list[float | None] = []
    for a, b in lay.edges.tolist():
        if np.isfinite(lay.node_x[a]) and np.isfinite(lay.node_x[b]):
            ex += [lay.node_x[a], lay.node_x[b], None]
            ey += [lay.node_y[a], lay.node_y[b], None]
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#cccccc", "width": 0.7},
                             name="cables", hoverinfo="skip"))
    for t, name in {1: "NIC", 2: "leaf switch", 3: "spine switch", 4: "core switch"}.items():
        ids = np.flatnonzero(np.isfinite(lay.node_x) & (lay.node_tier == t)
                             & (np.arange(len(lay.node_x)) >= g))
        if ids.size:
            fig.add_trace(go.Scatter(x=lay.node_x[ids], y=lay.node_y[ids], mode="markers", name=name,
                                     marker={"size": 5 if t == 1 else 14,
                                             "symbol": "circle" if t == 1 else "square",
                                             "color": "#555555"}, text=[f"{name} {i}" for i in ids],
                                     hoverinfo="text"))
    idle = [i for i in range(g) if not lay.occupants[i]]
    fig.add_trace(go.Scatter(x=lay.node_x[idle], y=np.zeros(len(idle)), mode="markers", name="idle GPU",
                             marker={"size": 7, "symbol": "square", "color": "#eeeeee",
                                     "line": {"color": "#999999", "width": 0.5}},
                             text=[f"GPU {i} (idle)" for i in idle], hoverinfo="text"))
    # one trace (colour) per tenant, the job named in each GPU's hover text and by its number
    tenants = sorted(set(lay.job_tenant.values()))
    for k, tenant in enumerate(tenants):
        xs: list[float] = []
        ys: list[float] = []
        text: list[str] = []
        for i in range(g):
            for depth, job in enumerate(lay.occupants[i]):
                if lay.job_tenant.get(job) == tenant:
                    xs.append(float(lay.node_x[i]))
                    ys.append(-0.17 * depth)
                    text.append(f"GPU {i}: job {lay.job_number[job]} {_e(job)} ({_e(tenant)})")
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=f"tenant {_e(tenant)}",
                                 marker={"size": 7, "symbol": "square", "color": _TENANT[k % len(_TENANT)]},
                                 text=text, hoverinfo="text"))
    fig.add_trace(go.Scatter(x=[lay.job_span[j] for j in lay.job_number], y=[0.42] * len(lay.job_number),
                             mode="text", text=[str(n) for n in lay.job_number.values()], name="job numbers",
                             textfont={"size": 9},
                             hovertext=[f"{n}: {_e(j)} ({_e(lay.job_tenant[j])})"
                                        for j, n in lay.job_number.items()],
                             hoverinfo="text"))
    for x0, x1 in lay.server_box:
        fig.add_shape(type="rect", x0=x0 - 0.5, x1=x1 + 0.5, y0=-0.3 - 0.17 * 0, y1=0.3,
                      line={"color": "#888888", "width": 0.7})
    ticks = sorted({float(y) for y in lay.node_y[np.isfinite(lay.node_y)]})
    names = {0.0: "GPU", 1.0: "NIC", 2.0: "leaf", 3.0: "spine", 4.0: "core"}
    fig.update_yaxes(tickvals=ticks, ticktext=[names.get(y, str(y)) for y in ticks], showgrid=False,
                     zeroline=False)
    fig.update_xaxes(visible=False)
    return _layout(fig, f"Fabric {_e(lay.title)} with the jobs of run {_e(view.run['run_id'])} "
                        f"({_e(view.method)}); boxes: servers (NVLink domains)", height=520,
                   legend_title_text="colour: tenant")


_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f4f4f4; } td.num { text-align: right; } .note { color: #555; font-size: 0.9em; }
pre.err { white-space: pre-wrap; font-size: 0.8em; margin: 0; }
"""

_HEAD_JS = """window.__fhErrors = [];
window.addEventListener('error', function (e) { window.__fhErrors.push(String(e.message)); });
window.addEventListener('unhandledrejection', function (e) { window.__fhErrors.push(String(e.reason)); });"""

_TAIL_JS = """window.addEventListener('load', function () {
  setTimeout(function () {
    var plots = document.querySelectorAll('.js-plotly-plot');
    var drawn = 0;
    plots.forEach(function (p) {
      if (p._fullData && p._fullData.length && p.querySelector('.main-svg .subplot')) { drawn += 1; }
    });
    document.body.setAttribute('data-plots', String(drawn));
    document.body.setAttribute('data-expected', String(%d));
    document.body.setAttribute('data-errors', String(window.__fhErrors.length));
    document.getElementById('fh-status').textContent =
      'plots drawn: ' + drawn + ' of %d; script errors: ' + window.__fhErrors.length +
      (window.__fhErrors.length ? ' (' + window.__fhErrors.join('; ') + ')' : '');
  }, 0);
});"""


def plot_network(view: RunView) -> go.Figure | None:
    """Queue occupancy over time, PFC pause, ECN-marked and dropped bytes of the congested links
    (`flowherd.report.data.network_panels`); None for a run without any."""
    p = network_panels(view)
    if p is None:
        return None
    fig = make_subplots(rows=2, cols=2, subplot_titles=("queue occupancy (kB)", "PFC pause (us)",
                                                         "ECN-marked (MB)", "dropped (kB)"))
    for k, (name, t, q) in enumerate(p.queue):
        fig.add_trace(go.Scatter(x=t * 1e3, y=q / 1e3, mode="lines", line={"shape": "hv"}, name=_e(name),
                                 line_color=_PALETTE[k % len(_PALETTE)]), row=1, col=1)
    for (key, scale, row, col) in (("pause_s", 1e-6, 1, 2), ("ecn_marked_bytes", 1e6, 2, 1),
                                   ("drop_bytes", 1e3, 2, 2)):
        vals = getattr(p, key)
        fig.add_trace(go.Bar(x=[v / scale for v in vals.values()], y=[_e(n) for n in vals], orientation="h",
                             marker_color="#d62728", showlegend=False), row=row, col=col)
    fig.update_xaxes(title_text="time (ms)", row=1, col=1)
    model = view.network[0].get("model", "") if view.network else ""
    return _layout(fig, f"Congestion ({_e(model)})", height=620)


def _fmt(x: Any, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "-"
    return f"{x:.3g}{unit}"


def _methods_table(data: ReportData) -> str:
    rows = []
    for m in data.methods:
        rs = [r for r in data.runs if r["method"] == m and r["status"] == "ok"]

        def mean(key: str, rs: list[dict[str, Any]] = rs) -> float | None:
            xs = [r[key] for r in rs if r[key] is not None]
            return float(np.mean(xs)) if xs else None

        rows.append(f"<tr><td>{_e(m)}</td><td class=num>{len(rs)}</td>"
                    f"<td class=num>{_fmt(mean('mean_jct_s'), ' s')}</td>"
                    f"<td class=num>{_fmt(mean('p99_jct_s'), ' s')}</td>"
                    f"<td class=num>{_fmt(mean('mean_slowdown'), 'x')}</td>"
                    f"<td class=num>{_fmt(mean('makespan_s'), ' s')}</td></tr>")
    return ("<table><tr><th>method</th><th>runs</th><th>mean JCT</th><th>p99 JCT</th><th>mean slowdown</th>"
            "<th>makespan</th></tr>" + "".join(rows) + "</table>"
            "<p class=note>Means over the method's finished runs (all loads and seeds) of each run's "
            "value.</p>")


def _headline(data: ReportData) -> str:
    """The paired differences of mean JCT (`paired_comparisons`), or nothing if the runs make none."""
    comps = paired_comparisons(data)
    if not comps:
        return ""
    rows = []
    for c in comps:
        p = c.paired
        hw = "n/a" if not np.isfinite(p.half_width) else f"{p.half_width:.2f} s"
        verdict = "tie" if p.tie else ("shorter" if p.mean < 0 else "longer")
        rows.append(f"<tr><td>{_e(c.method)}</td><td>{_e(c.reference)}</td><td class=num>{p.mean:+.2f} s</td>"
                    f"<td class=num>{hw}</td><td class=num>{100 * p.relative:+.1f}%</td>"
                    f"<td class=num>{p.n}</td><td>{verdict}</td><td>{_e(c.grant or '-')}</td></tr>")
    return ("<h2>Headline: paired differences of mean JCT</h2><table><tr><th>method</th><th>against</th>"
            "<th>difference</th><th>95% CI &plusmn;</th><th>relative</th><th>seeds</th><th>verdict</th>"
            "<th>grant</th></tr>" + "".join(rows) + "</table><p class=note>Per seed, the method's mean JCT "
            "minus the reference's on the same seed (same jobs, arrivals and background), averaged over the "
            "seeds, with the half-width of its 95% confidence interval (Student's t); an interval that holds "
            "0 is a tie. Grant: the levers the controllers were allowed "
            "(<code>controller.levers</code>).</p>")


def _failed_table(data: ReportData) -> str:
    if not data.failed:
        return "<p>No run failed.</p>"
    rows = "".join(f"<tr><td>{_e(r['run_id'])}</td><td>{_e(json.dumps(r['params'], default=str))}</td>"
                   f"<td><pre class=err>{_e(r['error'] or '')}</pre></td></tr>" for r in data.failed)
    return f"<table><tr><th>run</th><th>parameters</th><th>error</th></tr>{rows}</table>"


def render_html(data: ReportData, *, title: str | None = None) -> str:
    """The report page as one HTML string (module docstring)."""
    sections: list[tuple[str, str, go.Figure]] = [
        ("JCT distribution", "Completion time (finish - submit) of the jobs, all loads and seeds pooled, per "
         "method; jobs unfinished at the horizon keep a curve below 1.", plot_jct_cdf(data)),
        ("Slowdown against load", "Each run's mean job slowdown: JCT over the time the job would take alone "
         "on the idle fabric, on the same GPUs (1 = no interference).", plot_slowdown(data)),
        ("Per-tenant fairness", "Each tenant's mean slowdown, averaged over the method's runs.",
         plot_tenants(data)),
    ]
    if data.detail:
        sections.append(("Link utilization", "Bytes carried by each link tier per time bin over the tier's "
                         "capacity, in one representative run per method (highest load, lowest seed).",
                         plot_heatmap(data)))
    for v in data.detail:
        sections.append((f"Jobs: {v.method}", "Queueing (grey), then every iteration: its compute critical "
                         "path (solid) and what communication added (hatched). Inference services show their "
                         "request batches.", plot_gantt(v)))
        sections.append((f"Placement: {v.method}", "Where each job ran: GPUs colored by job, a GPU used by "
                         "several jobs one after the other shows them stacked downward.", plot_fabric(v)))
        net = plot_network(v)
        if net is not None:
            sections.append((f"Network: {v.method}", "The congestion model's per-link outputs: standing "
                             "queue of the most queued ports over time, time paused by PFC, ECN-marked "
                             "and dropped bytes (flowherd.engine.network).", net))
    sweeps = sorted({r["sweep"] for r in data.runs})
    heading = title or f"flowherd report: {', '.join(sweeps)}"
    n_ok = sum(r["status"] == "ok" for r in data.runs)
    parts = [
        "<!DOCTYPE html>", "<html lang=en><head><meta charset=utf-8>",
        f"<title>{_e(heading)}</title>", f"<style>{_CSS}</style>",
        f"<script>{_HEAD_JS}</script>", f"<script>{get_plotlyjs()}</script>", "</head><body>",
        f"<h1>{_e(heading)}</h1>",
        f"<p>{n_ok} runs finished, {len(data.failed)} failed; from <code>{_e(data.source)}</code>.</p>",
        _headline(data), "<h2>Methods</h2>", _methods_table(data),
    ]
    for k, (name, note, fig) in enumerate(sections):
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"fh-fig-{k}",
                          config={"displaylogo": False, "responsive": True})
        parts += [f"<h2>{_e(name)}</h2>", f"<p class=note>{_e(note)}</p>", div]
    parts += ["<h2>Failed runs</h2>", _failed_table(data), "<pre id=fh-status class=note></pre>",
              f"<script>{_TAIL_JS % (len(sections), len(sections))}</script>", "</body></html>"]
    return "\n".join(parts)


def write_html(data: ReportData, out_dir: str | Path, *, name: str = "report.html") -> Path:
    """Write the page into `out_dir` (atomically: a temporary file, then a rename)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    tmp = out / f".{name}.tmp"
    tmp.write_text(render_html(data), encoding="utf-8")
    tmp.replace(path)
    return path
