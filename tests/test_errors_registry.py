"""The exception tree and name registries with near-miss suggestions."""

import pytest

from flowherd.errors import ConfigError, FlowherdError, UnknownNameError
from flowherd.registry import Registry


def test_unknown_name_suggests_the_closest_entry():
    reg = Registry("router", {"ecmp": 1, "spray": 2, "shortest": 3})
    with pytest.raises(UnknownNameError) as info:
        reg["sprya"]
    assert "did you mean 'spray'" in str(info.value)
    assert "expected one of: ecmp, shortest, spray" in str(info.value)


def test_unknown_name_without_close_match_lists_the_choices():
    reg = Registry("preset", {"dgx1": 1})
    with pytest.raises(UnknownNameError, match=r"unknown preset 'zzz' \(expected one of: dgx1\)"):
        reg["zzz"]


def test_every_error_is_a_flowherd_error():
    assert issubclass(UnknownNameError, ConfigError)
    assert issubclass(ConfigError, FlowherdError)


def test_register_decorator_adds_entries():
    reg: Registry = Registry("thing")

    @reg.register("f")
    def f():
        return 1

    assert reg["f"] is f and len(reg) == 1
