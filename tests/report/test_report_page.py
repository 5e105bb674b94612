"""The report page: headings that fit the runs, no test hook shown, time axes in s or ms."""

from __future__ import annotations

import dataclasses
import re

import pytest

pytest.importorskip("plotly", reason="the report extra is not installed")

from flowherd.report.data import load_report_data
from flowherd.report.html import render_html, time_unit


@pytest.fixture(scope="module")
def data(store_dir):
    return load_report_data(store_dir)


def test_several_loads_are_slowdown_against_load_one_load_is_per_method(data):
    page = render_html(data)
    assert "<h2>Slowdown against load</h2>" in page
    one = dataclasses.replace(data, runs=[r for r in data.runs if (r["background_load"] or 0.0) == 0.0])
    page = render_html(one)
    assert "<h2>Slowdown per method</h2>" in page and "Slowdown against load" not in page


def test_the_browser_hook_is_hidden(data):
    page = render_html(data)
    assert re.search(r"<pre id=fh-status hidden></pre>", page)
    assert "plots drawn" not in page


def test_time_axes_are_in_seconds_or_milliseconds():
    assert time_unit(80.0) == (1.0, "s") and time_unit(1.0) == (1.0, "s")
    assert time_unit(0.65) == (1e-3, "ms") and time_unit(0.0) == (1e-3, "ms")
