"""`flowherd models`, `flowherd gpus`, `flowherd fabric --list`: what the catalogs hold, one line each.

The names printed here are the ones a scenario's ``model:``, ``fabric.gpu:`` and ``fabric:``
(preset) accept.
"""

from __future__ import annotations

import json
import re
from typing import Any

import typer

from flowherd.cli import app


def model_rows() -> list[dict[str, Any]]:
    """One row per catalog model: name, parameters (total, active), shape and source."""
    from flowherd.workload.models import MODELS

    rows = []
    for name in MODELS:
        m = MODELS[name]
        rows.append({"name": name, "params": m.num_params(), "active_params": m.num_active_params(),
                     "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
                     "experts": m.experts, "top_k": m.top_k, "source": m.source})
    return rows


def gpu_rows() -> list[dict[str, Any]]:
    """One row per catalog GPU: peak BF16 FLOP/s, memory, bandwidths (bytes/s) and source."""
    from flowherd.workload.gpus import GPUS

    return [{"name": name, "peak_bf16_flops": g.peak_bf16_flops, "memory_bytes": g.memory_bytes,
             "memory_bytes_per_s": g.memory_bytes_per_s, "scaleup_bytes_per_s": g.scaleup_bytes_per_s,
             "nic_bytes_per_s": g.nic_bytes_per_s, "source": g.source}
            for name, g in ((n, GPUS[n]) for n in GPUS)]


def preset_rows() -> list[dict[str, str]]:
    """One row per fabric preset: name and the first line of its description (nothing is built)."""
    from flowherd.fabric.presets import PRESETS

    rows = []
    for name in sorted(PRESETS):
        doc = (PRESETS[name].__doc__ or "").strip()
        text = " ".join(doc.split("\n\n")[0].split())
        first = re.split(r"(?<=[.)])\s+(?=[A-Z])", text, maxsplit=1)[0]  # the first sentence
        sized = re.search(r"-(\d+)su$", name)
        if sized:  # a preset made from a family function: its size in place of the parameter
            first = first.replace("`sus`", sized.group(1))
        rows.append({"name": name, "description": first})
    return rows


def _billions(n: float) -> str:
    return f"{n / 1e9:,.1f} B" if n < 1e11 else f"{n / 1e9:,.0f} B"


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """One plain line per row, columns aligned (the last, free text, runs on)."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns[:-1])]
    typer.echo(title)

    def line(cells: list[str]) -> str:
        head = "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells[:-1], widths, strict=True)))
        return f"  {head}  {cells[-1]}".rstrip()

    typer.echo(line(columns))
    for r in rows:
        typer.echo(line(r))


@app.command("models")
def models(as_json: bool = typer.Option(False, "--json", help="print one JSON list")) -> None:
    """List the model catalog: parameters, layers, width, heads, experts and source.

    A scenario's job names one with ``model: NAME`` (or gives a shape inline).
    """
    rows = model_rows()
    if as_json:
        typer.echo(json.dumps(rows))
        return
    _table("models (scenario key: model)", ["name", "parameters", "active", "layers", "hidden", "heads / kv",
                                            "experts (top-k)", "source"],
           [[r["name"], _billions(r["params"]), _billions(r["active_params"]), str(r["layers"]),
             f"{r['hidden']:,}", f"{r['heads']} / {r['kv_heads']}",
             f"{r['experts']} ({r['top_k']})" if r["experts"] else "dense", r["source"]] for r in rows])


@app.command("gpus")
def gpus(as_json: bool = typer.Option(False, "--json", help="print one JSON list (SI units: FLOP/s, "
                                      "bytes, bytes/s)")) -> None:
    """List the GPU catalog: BF16 peak, memory, HBM, NVLink and NIC bandwidth, source.

    A scenario's fabric names one with ``gpu: NAME``; bandwidths are per direction.
    """
    rows = gpu_rows()
    if as_json:
        typer.echo(json.dumps(rows))
        return
    _table("GPUs (scenario key: fabric.gpu; bandwidths per direction)",
           ["name", "BF16 dense", "memory", "HBM", "NVLink", "NIC", "source"],
           [[r["name"], f"{r['peak_bf16_flops'] / 1e12:,.0f} TFLOP/s", f"{r['memory_bytes'] / 1e9:.0f} GB",
             f"{r['memory_bytes_per_s'] / 1e12:.2f} TB/s", f"{r['scaleup_bytes_per_s'] / 1e9:.0f} GB/s",
             f"{r['nic_bytes_per_s'] * 8 / 1e9:.0f} Gb/s", r["source"]] for r in rows])


def print_presets(as_json: bool) -> None:
    """`flowherd fabric --list`: every preset with one line."""
    rows = preset_rows()
    if as_json:
        typer.echo(json.dumps(rows))
        return
    _table("fabric presets (scenario key: fabric, or flowherd fabric NAME)", ["name", "description"],
           [[r["name"], r["description"]] for r in rows])
