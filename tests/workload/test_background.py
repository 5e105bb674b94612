"""Background traffic: CDF sampling, mean flow size, offered load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.units import Gbps
from flowherd.workload import BackgroundTraffic, FlowSizeCDF


@pytest.mark.parametrize(
    ("name", "mean"),
    # flow_sizes/README.md, "mean (linear)": piecewise-linear CDF means (HPCC custom_rand.py getAvg)
    [("web_search", 1_711_250), ("data_mining", 12_658_199), ("fb_hadoop", 120_421)],
)
def test_cdf_mean_matches_published_table(name, mean):
    assert FlowSizeCDF.load(name).mean_bytes() == pytest.approx(mean, abs=1)


@pytest.mark.parametrize("name", ["web_search", "data_mining"])
def test_sampled_mean_matches_cdf_mean(name):
    cdf = FlowSizeCDF.load(name)
    x = cdf.sample(np.random.default_rng(2), 2_000_000)
    assert x.mean() == pytest.approx(cdf.mean_bytes(), rel=0.03)
    # the sampled law is the table: empirical CDF at the table's points
    for size, f in zip(cdf.size_bytes[1:-1], cdf.cdf[1:-1], strict=True):
        assert np.mean(x <= size) == pytest.approx(f, abs=0.003)


def test_point_mass_is_sampled_exactly():
    cdf = FlowSizeCDF.load("web_search_ns2")  # 15% of flows are exactly 8,760 B (README)
    x = cdf.sample(np.random.default_rng(0), 200_000)
    assert np.mean(x == 8760) == pytest.approx(0.15, abs=0.005)


@pytest.mark.parametrize(("load", "cdf"), [(0.3, "web_search"), (0.6, "fb_hadoop")])
def test_offered_load_matches_target(load, cdf):
    bw = 8 * 400 * Gbps
    span = 0.2
    bg = BackgroundTraffic(load=load, num_servers=16, server_bytes_per_s=bw, until_s=span, cdf=cdf)
    flows = bg.generate(np.random.default_rng(7))
    assert flows.offered_load(16, bw, span) == pytest.approx(load, rel=0.03)
    assert np.all(flows.src_server != flows.dst_server)
    assert np.all(np.diff(flows.start_s) >= 0) and flows.start_s.max() < span
    # sources and destinations are uniform over servers
    counts = np.bincount(flows.src_server, minlength=16) / len(flows)
    assert np.allclose(counts, 1 / 16, atol=0.01)


def test_same_seed_same_flows_and_zero_load_is_empty():
    bg = BackgroundTraffic(load=0.1, num_servers=4, server_bytes_per_s=50e9, until_s=0.01)
    a, b = bg.generate(np.random.default_rng(3)), bg.generate(np.random.default_rng(3))
    assert np.array_equal(a.size_bytes, b.size_bytes) and np.array_equal(a.dst_server, b.dst_server)
    none = BackgroundTraffic(load=0.0, num_servers=4, server_bytes_per_s=50e9, until_s=1.0)
    assert len(none.generate(np.random.default_rng(3))) == 0


@pytest.mark.parametrize(
    ("kw", "field"),
    [(dict(load=1.5), "background.load"), (dict(load=-0.1), "background.load"),
     (dict(num_servers=1), "num_servers"), (dict(server_bytes_per_s=0.0), "server_bytes_per_s")],
)
def test_bad_background_spec_names_the_field(kw, field):
    base = dict(load=0.2, num_servers=4, server_bytes_per_s=50e9, until_s=1.0)
    with pytest.raises(ConfigError, match=rf"\({field}\)"):
        BackgroundTraffic(**{**base, **kw})


def test_unknown_or_unreadable_cdf(tmp_path: Path):
    with pytest.raises(UnknownNameError, match="did you mean 'web_search'"):
        FlowSizeCDF.load("websearch")
    bad = tmp_path / "x.csv"
    bad.write_text("size_bytes,cdf\n0,0\n10,0.5\n")
    with pytest.raises(ConfigError, match="end at 1"):
        FlowSizeCDF.load(bad)


def test_windows_partition_the_process_and_huge_windows_are_refused():
    bw = 400 * Gbps
    bg = BackgroundTraffic(load=0.5, num_servers=8, server_bytes_per_s=bw, until_s=1.0)
    rng = np.random.default_rng(9)
    parts = [bg.generate(rng, start_s=k * 0.1, until_s=(k + 1) * 0.1) for k in range(10)]
    assert all(p.start_s.min() >= k * 0.1 and p.start_s.max() < (k + 1) * 0.1 for k, p in enumerate(parts))
    total = sum(int(p.size_bytes.sum()) for p in parts)
    assert total / 1.0 / (8 * bw) == pytest.approx(0.5, rel=0.05)
    assert bg.pair_rate_bytes_per_s() * 7 == pytest.approx(0.5 * bw)  # each server offers load * bw
    with pytest.raises(ConfigError, match=r"max_flows.*\(background\.load\)"):
        bg.generate(rng, max_flows=10)
