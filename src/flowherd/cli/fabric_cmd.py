"""``flowherd fabric FABRIC [--json]``: build a preset or a YAML fabric and print its figures."""

from __future__ import annotations

import json

import typer

from flowherd.cli import app


def _presets_epilog() -> str:
    from flowherd.fabric.presets import preset_names

    names = preset_names()
    rows = [", ".join(names[i:i + 3]) for i in range(0, len(names), 3)]
    # \b: click keeps these lines as they are (its wrapping would split names at their hyphens)
    return "\b\nPresets (--list: one line each):\n" + "\n".join(f"  {r}" for r in rows)


@app.command("fabric", epilog=_presets_epilog())
def fabric_command(
    fabric: str = typer.Argument(None, help="A preset name (e.g. dgx-superpod-h100-2su; --list shows "
                                 "them) or a YAML file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    list_presets: bool = typer.Option(False, "--list", help="List the presets, one line each, and exit."),
) -> None:
    """Build FABRIC and print its counts, bisection bandwidth and GPU-to-GPU diameter."""
    if list_presets or fabric is None:
        from flowherd.cli.catalog_cmd import print_presets

        print_presets(as_json)
        return
    from flowherd.cli.checks import load_fabric_arg
    from flowherd.fabric.metrics import summary

    fab = load_fabric_arg(fabric, "fabric")
    info = summary(fab)
    if as_json:
        print(json.dumps(info))
        return
    from rich.console import Console
    from rich.table import Table

    from flowherd.cli.checks import plain
    from flowherd.units import format_rate

    table = Table(title=plain(f"fabric {info['name']} ({info['kind']})"), show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in info.items():
        if key in ("name", "kind"):
            continue
        if key == "bisection_bytes_per_s":
            table.add_row("bisection bandwidth", format_rate(value))
        else:
            table.add_row(key, f"{value:,}")
    Console().print(table)
