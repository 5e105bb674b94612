"""Upper bounds of sizes, rates and times: absurd values are one ConfigError naming the field."""

import pytest

from flowherd.errors import ConfigError
from flowherd.units import PiB, TiB, format_size, parse_rate, parse_size, parse_time


@pytest.mark.parametrize(("parse", "text", "bound"), [
    (parse_size, "1e30GiB", "at most 1 PiB"), (parse_size, "1025TiB", "at most 1 PiB"),
    (parse_rate, "1e20Gbps", "at most 8 Pbps"), (parse_rate, "1e16", "at most 8 Pbps"),
    (parse_time, "1e12h", "at most 1e9 s"), (parse_time, 1e300, "at most 1e9 s"),
])
def test_absurd_quantities_are_refused_naming_the_field(parse, text, bound):
    with pytest.raises(ConfigError, match=rf"{bound}.*got .*\(--x\)"):
        parse(text, field="--x")


def test_the_bounds_themselves_are_accepted():
    assert parse_size("1024TiB") == PiB and parse_size("4TiB") == 4 * TiB
    assert parse_rate("8000Tbps") == pytest.approx(1e15)
    assert parse_time("1e9s") == 1e9
    assert format_size(3 * PiB) == "3 PiB"


def test_a_long_malformed_value_is_echoed_clipped():
    with pytest.raises(ConfigError) as info:
        parse_size("x" * 10_000, field="--size")
    assert len(str(info.value)) < 200 and "(--size)" in str(info.value)
