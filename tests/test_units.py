"""Units at the edges: parsing and printing of sizes, rates and times."""

import pytest

from flowherd.errors import ConfigError
from flowherd.units import (
    MB,
    Gbps,
    GiB,
    KiB,
    MiB,
    format_rate,
    format_size,
    format_time,
    parse_rate,
    parse_size,
    parse_time,
    us,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1GiB", GiB), ("64KB", 64_000), ("64KiB", 64 * KiB), ("1.5MiB", 1.5 * MiB), ("2MB", 2 * MB),
     ("4096", 4096), (4096, 4096), ("0B", 0)],
)
def test_sizes_parse_binary_and_decimal_prefixes_apart(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("400Gbps", 50e9), ("400Gb/s", 50e9), ("900GB/s", 900e9), ("900GBps", 900e9), ("100Mbps", 12.5e6)],
)
def test_rates_in_bits_become_bytes_per_second(text, expected):
    assert parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "expected"), [("2us", 2e-6), ("1ms", 1e-3), ("1.5h", 5400.0), ("30s", 30.0), ("10min", 600.0)]
)
def test_times_parse_to_seconds(text, expected):
    assert parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["12XB", "abc", "1..2GiB", "", "GiB"])
def test_malformed_size_names_value_and_field(text):
    with pytest.raises(ConfigError, match=r"size .*\(workload\.size\).*expected"):
        parse_size(text, field="workload.size")


def test_negative_rate_is_rejected_with_the_field():
    with pytest.raises(ConfigError, match=r"rate must be positive, got '-1Gbps' \(fabric\.nic\)"):
        parse_rate("-1Gbps", field="fabric.nic")


def test_zero_rate_is_rejected():
    with pytest.raises(ConfigError, match="positive"):
        parse_rate("0Gbps")


def test_printing_round_trips_common_values():
    assert format_size(3 * GiB) == "3 GiB"
    assert format_rate(400 * Gbps) == "400 Gbps"
    assert format_time(2 * us) == "2 us"
    assert parse_size(format_size(64 * MiB).replace(" ", "")) == 64 * MiB
