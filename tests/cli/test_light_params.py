"""`flowherd.cli.params`: typer's flag coercion without pydantic gives what typer's gives.

Every value is coerced both ways, the light one and typer's own pydantic adapter
(`build_runtime_param`), on the flags of `flowherd collective`: the same value, or the same
error message, for plain values and for the ones the light path hands over (" 12", "1_000",
"12.0", "1e3", "sixteen", bytes).
"""

from __future__ import annotations

import pytest
import typer

from flowherd.cli import app, load_command
from flowherd.cli.params import _LightParam, light_on_parse, use_light_params

typer_coercion = pytest.importorskip("typer._coercion", reason="typer without pydantic adapters")


def _command(name: str):
    load_command(name)
    group = typer.main.get_command(app)
    ctx = group.make_context("flowherd", [name, "--help"], resilient_parsing=True)
    cmd = group.get_command(ctx, name)
    return cmd, cmd.make_context(name, [], parent=ctx, resilient_parsing=True)


def _param(cmd, ctx, name):
    return next(p for p in cmd.get_params(ctx) if p.name == name)


def _both(param, ctx, value):
    def run(coercer):
        try:
            return ("ok", coercer.coerce(value, param=param, ctx=ctx))
        except typer.BadParameter as err:
            return ("error", err.message)
    full = typer_coercion.build_runtime_param(param.type_descriptor)
    kind = param.type_descriptor.annotation
    return run(_LightParam(param, kind)), run(full)


@pytest.mark.parametrize("value", ["64", "+5", "-3", "007", "99999999999999999999999", 7, " 12",
                                   "1_000", "12.0", "1.5", "1e3", "0x10", "", "sixteen", None])
def test_an_int_flag_coerces_as_typers_adapter_does(value):
    cmd, ctx = _command("collective")
    light, full = _both(_param(cmd, ctx, "gpus"), ctx, value)
    assert light == full
    assert type(light[1]) is type(full[1])


@pytest.mark.parametrize("value", ["allreduce", "", "ünïcode", "[bold]x[/bold]", b"bytes", 5, None])
def test_a_str_flag_coerces_as_typers_adapter_does(value):
    cmd, ctx = _command("collective")
    light, full = _both(_param(cmd, ctx, "op"), ctx, value)
    assert light == full


@pytest.mark.parametrize("value", [True, False, None, "true", "no"])
def test_a_bool_flag_coerces_as_typers_adapter_does(value):
    cmd, ctx = _command("collective")
    light, full = _both(_param(cmd, ctx, "as_json"), ctx, value)
    assert light == full


def test_the_commands_plain_flags_and_help_get_the_light_coercion():
    cmd, ctx = _command("collective")
    light_on_parse(cmd)
    use_light_params(cmd, ctx)
    params = {p.name: p for p in cmd.get_params(ctx)}
    for name in ("op", "size", "gpus", "fabric", "seed", "as_json", "help"):
        assert isinstance(params[name]._runtime_param, _LightParam), name


def test_a_bad_integer_still_reads_as_typers_message(capsys):
    from flowherd.cli import main

    code = main(["collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "sixteen",
                 "--fabric", "dgx-superpod-h100-1su"])
    err = capsys.readouterr().err
    assert code == 2
    assert "invalid value 'sixteen' for --gpus: expected a valid integer" in err
