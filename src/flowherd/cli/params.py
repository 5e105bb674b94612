"""Typer's flag coercion without pydantic for the plain values every command takes.

Typer >= 0.2x coerces each flag's value with a pydantic ``TypeAdapter``, built the first time
the flag is parsed: importing pydantic and building a command's adapters costs about 0.13 s,
a fifth of a small `flowherd collective`, for values that are already strings or plain
integers. `use_light_params` (`light_on_parse`: when a command parses its arguments) gives a
command's ``str``, ``int`` and ``bool`` flags (without a parser, bounds or a custom click type)
a coercion that returns those values directly and hands any other value to typer's own
adapter, built then: what a flag accepts and every message stay typer's
(tests/cli/test_light_params.py compares the two). Older typer (click's types, no adapters) is
left as it is.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["light_on_parse", "use_light_params"]

# the integers on which pydantic's lax int and Python's int() agree (ASCII digits, a sign);
# "1_000", " 12", "12.0" and the like go to typer's adapter
_PLAIN_INT = re.compile(r"[+-]?[0-9]+")


class _LightParam:
    """A stand-in for typer's ``RuntimeParam`` of one ``str``, ``int`` or ``bool`` flag."""

    __slots__ = ("_full", "_kind", "_param")

    def __init__(self, param: Any, kind: type) -> None:
        self._param, self._kind, self._full = param, kind, None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return None
        if type(value) is self._kind and self._kind is not int:  # a str, a bool
            return value
        if self._kind is int:
            if type(value) is int:
                return value
            if type(value) is str and _PLAIN_INT.fullmatch(value):
                return int(value)
        if self._full is None:  # anything else: typer's pydantic adapter, as without this
            from typer._coercion import build_runtime_param

            self._full = build_runtime_param(self._param.type_descriptor)
        return self._full.coerce(value, param=param, ctx=ctx)


def _light_kind(param: Any) -> type | None:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or getattr(param, "_runtime_param", "absent") is not None:
        return None  # not typer's adapter-based parameter, or already built
    if getattr(param, "multiple", False) or getattr(param, "nargs", 1) != 1:
        return None
    info = desc.parameter_info
    if getattr(desc, "file_annotation", None) is not None or getattr(info, "parser", None) is not None \
            or getattr(info, "click_type", None) is not None:
        return None
    if desc.annotation in (str, bool):
        return desc.annotation
    if desc.annotation is int and getattr(info, "min", None) is None \
            and getattr(info, "max", None) is None and not getattr(info, "clamp", False):
        return int
    return None


def use_light_params(command: Any, ctx: Any) -> None:
    """Give the plain ``str``, ``int`` and ``bool`` flags of `command` (in context `ctx`: its
    ``--help`` too) the light coercion."""
    get_params = getattr(command, "get_params", None)
    for param in get_params(ctx) if get_params is not None else ():
        kind = _light_kind(param)
        if kind is not None:
            param._runtime_param = _LightParam(param, kind)


def light_on_parse(command: Any) -> Any:
    """`command` with `use_light_params` run when it parses its arguments; returns `command`."""
    parse_args = getattr(command, "parse_args", None)
    if parse_args is None or getattr(parse_args, "light", False):
        return command

    def parse_light(ctx: Any, args: list[str]) -> Any:
        use_light_params(command, ctx)
        return parse_args(ctx, args)

    parse_light.light = True  # type: ignore[attr-defined]
    command.parse_args = parse_light
    return command
