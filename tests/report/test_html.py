"""The HTML report: self-contained, names escaped, and rendered by a real browser without errors."""

import os
import re
import shutil
import subprocess

import pytest

pytest.importorskip("plotly", reason="the report extra is not installed")

from flowherd.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(store_dir, tmp_path_factory):
    return write_report(store_dir, tmp_path_factory.mktemp("report"))


def test_page_is_self_contained(report):
    text = report.html.read_text()
    assert not re.search(r"<script[^>]+src=", text)  # plotly.js is inlined, nothing is fetched
    assert not re.search(r"<link[^>]+href=", text)
    assert text.count("Plotly.newPlot(") == 8
    assert report.runs == 5 and report.failed == 1


def test_names_from_data_are_escaped(report, nasty_names):
    job, tenant = nasty_names
    text = report.html.read_text()
    assert job not in text and "<img src=x" not in text
    assert tenant not in text  # its "</script>" would end a script block
    assert "&lt;img src=x onerror=" in text  # the names are in the page, escaped
    assert "lab-$x$ &lt;\\u002fscript&gt;" in text  # in the charts' JSON, escaped twice


def _render(path, tmp_path):
    out = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=20000", "--dump-dom",
         path.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", out.stdout)
    assert body, out.stdout[:2000]
    return dict(re.findall(r'data-([a-z]+)="([^"]*)"', body.group(1))), out.stdout


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="chromium is not installed (apt-get install -y chromium); CI runs this test")
def test_report_renders_every_figure_in_headless_chromium_without_script_errors(report, tmp_path):
    assert CHROMIUM is not None, "CI must install Debian's chromium package"
    attrs, dom = _render(report.html, tmp_path)
    assert attrs["errors"] == "0", re.search(r'id="fh-status"[^>]*>([^<]*)', dom).group(1)
    assert attrs["plots"] == attrs["expected"] == "8"
    assert dom.count('class="main-svg"') >= 16  # plotly drew its SVG layers
    assert "window.__pwned" not in dom.split("<script")[0]  # the escaped name stayed text

    # the check itself sees a broken page: one script error, and a chart that does not draw
    broken = report.html.with_name("broken.html")
    broken.write_text(report.html.read_text().replace("Plotly.newPlot(", "Plotly.noSuchCall(", 1))
    attrs, _ = _render(broken, tmp_path)
    assert attrs["errors"] == "1" and attrs["plots"] == "7"
