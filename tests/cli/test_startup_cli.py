"""Start-up of `flowherd collective` (issue 16): what a preset collective imports, and that the
shortcuts taken for it build what the long way builds.

Each module kept out costs start-up: scipy 0.3 s (the path index and the connectivity check are
numpy, `flowherd.fabric.sparse_rows`), pydantic 0.13 s (typer's flag coercion,
`flowherd.cli.params`), the click package beside typer's own 0.05 s, yaml 0.03 s, numba 0.4 s
(the kernels compiled ahead of time); and, a few hundredths each: numpy.ma (numpy 2.4's plain
`np.unique` imports it), the congestion model and its kernels and the controller types (an ideal
run needs only `flowherd.engine.network.config`), rich when no table is printed (``--json``), the
Lingjun preset's CSV reader, tempfile."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from flowherd.cli.checks import load_fabric_arg
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.fabric.spec import load_fabric

_COLLECTIVE = ("import json, sys; from flowherd.cli import main; "
               "code = main(['collective', '--op', 'allreduce', '--size', '64MiB', '--gpus', '16', "
               "'--fabric', 'dgx-superpod-h100-1su', '--json']); "
               "print(json.dumps(sorted(m for m in ('numba', 'llvmlite', 'highspy', "
               "'networkx', 'matplotlib', 'flowherd.fabric.spec', 'flowherd.fabric.metrics', "
               "'flowherd.planning', 'scipy', 'pydantic', 'yaml', 'click', 'numpy.ma', 'rich', "
               "'tempfile', 'flowherd.engine.network.model', 'flowherd.cluster.control_types', "
               "'flowherd.fabric.lingjun') if m in sys.modules))); "
               "sys.exit(code)")


def test_a_preset_collective_imports_no_scipy_pydantic_schema_planner_plotting_or_congestion_model():
    out = subprocess.run([sys.executable, "-c", _COLLECTIVE], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result, modules = out.stdout.strip().splitlines()[-2:]
    assert json.loads(result)["num_gpus"] == 16
    from flowherd.engine import aot

    expected = [] if aot.mode()[0] == "aot" else ["llvmlite", "numba"]  # the JIT path needs numba
    assert json.loads(modules) == expected


@pytest.mark.parametrize("name", ["dgx-superpod-h100-1su", "ndv2", "dgx1"])
def test_a_preset_argument_builds_what_load_fabric_builds(name):
    short, long = load_fabric_arg(name, "--fabric"), load_fabric(name)
    assert isinstance(short, Fabric) and short.name == long.name
    for field in Fabric.__dataclass_fields__:
        a, b = getattr(short, field), getattr(long, field)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), field
        else:
            assert a == b, field


def test_an_unknown_preset_still_says_where_to_look():
    with pytest.raises(ConfigError) as err:
        load_fabric_arg("dgx-superpod-h100-1sux", "--fabric")
    msg = str(err.value)
    assert "dgx-superpod-h100-1su" in msg and "flowherd fabric --list" in msg


def test_a_disconnected_preset_is_refused_naming_the_field(monkeypatch):
    from flowherd.fabric import presets

    broken = presets.preset("dgx1")
    keep = (broken.link_src != 1) & (broken.link_dst != 1)  # GPU 1 cut off
    cut = dataclasses.replace(broken, link_src=broken.link_src[keep], link_dst=broken.link_dst[keep],
                              link_capacity_bytes_per_s=broken.link_capacity_bytes_per_s[keep],
                              link_latency_s=broken.link_latency_s[keep],
                              link_kind=broken.link_kind[keep])
    monkeypatch.setitem(presets.PRESETS._entries, "cut-test", lambda: cut)
    with pytest.raises(ConfigError, match=r"disconnected.*\(fabric\)"):
        load_fabric_arg("cut-test", "--fabric")


def test_the_console_entry_freezes_what_a_printing_command_leaves_and_no_other(monkeypatch, capsys):
    import gc

    import flowherd.cli as cli

    frozen, before = [], gc.get_threshold()
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr(sys, "argv", ["flowherd", "collective", "--op", "allreduce", "--size", "1MiB",
                                      "--gpus", "8", "--fabric", "dgx1", "--json"])
    assert cli.main() == 0 and json.loads(capsys.readouterr().out)["num_gpus"] == 8
    assert frozen == [True]
    assert cli.main(["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "8", "--fabric",
                     "dgx1", "--json"]) == 0  # called from Python: nothing frozen
    monkeypatch.setattr(sys, "argv", ["flowherd", "fabric", "dgx1"])
    assert cli.main() == 0
    assert frozen == [True]
    assert gc.get_threshold() == before  # the command's threshold is undone


def test_a_command_marked_as_writing_nothing_takes_no_output_path():
    import inspect

    from flowherd.cli import app, load_command
    from flowherd.cli.commands import COMMANDS

    marked = {n for n, e in COMMANDS.items() if e.writes_nothing}
    for name in marked:
        load_command(name)
    assert "collective" in marked
    for info in app.registered_commands:
        if info.name in marked:
            params = inspect.signature(info.callback).parameters
            assert not {"out", "store", "save", "output"} & set(params), info.name


def test_the_console_entry_of_a_collective_prints_everything_and_exits_0():
    code = ("import sys; from flowherd.cli import main; sys.argv = ['flowherd', 'collective', '--op', "
            "'allgather', '--size', '4MiB', '--gpus', '16', '--fabric', 'dgx-superpod-h100-1su']; "
            "sys.exit(main())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "busbw" in out.stdout and out.stdout.rstrip().endswith("┘")  # the table's last line
    bad = code.replace("'16'", "'9999'")
    out = subprocess.run([sys.executable, "-c", bad], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "--gpus must be in" in out.stderr
