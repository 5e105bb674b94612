"""summary(): bisection against networkx max flow and closed forms; diameter against brute force."""

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowherd.fabric import (
    bisection_bytes_per_s,
    clos3,
    dgx1,
    dgx2,
    diameter_hops,
    fat_tree,
    hpn_dual_plane,
    leaf_spine,
    ndv2,
    preset,
    rail_optimized,
    summary,
)
from flowherd.fabric.lingjun import lingjun_fabric, load_lingjun_topology
from flowherd.units import GBps, Gbps


def _nx_bisection(f):
    """Max flow from the first half of the servers' GPUs to the rest, with networkx."""
    g = nx.DiGraph()
    for s, d, c in zip(f.link_src.tolist(), f.link_dst.tolist(), f.link_capacity_bytes_per_s.tolist(),
                       strict=True):
        g.add_edge(s, d, capacity=g[s][d]["capacity"] + c if g.has_edge(s, d) else c)
    for v in range(f.num_gpus):
        first = f.gpu_server[v] < f.num_servers // 2 if f.num_servers > 1 else v < f.num_gpus // 2
        g.add_edge("S", v) if first else g.add_edge(v, "T")
    return nx.maximum_flow_value(g, "S", "T")


def _nx_diameter(f):
    g = nx.Graph(list(zip(f.link_src.tolist(), f.link_dst.tolist(), strict=True)))
    return max(max(d for v, d in nx.single_source_shortest_path_length(g, s).items() if v < f.num_gpus)
               for s in range(f.num_gpus))


SMALL = {
    "fat-tree-k4": lambda: fat_tree(k=4),
    "fat-tree-k6-3gpu": lambda: fat_tree(k=6, gpus_per_server=3),
    "leaf-spine-o3": lambda: leaf_spine(servers=8, leaves=4, spines=2, oversubscription=3),
    "clos3": lambda: clos3(servers=8, gpus_per_server=2, servers_per_tor=2, tors_per_pod=2, spines_per_pod=2,
                           cores=2, spine_oversubscription=4),
    "rail-2tier": lambda: rail_optimized(servers=8, gpus_per_server=4, servers_per_su=4, spines=2),
    "rail-3tier": lambda: rail_optimized(servers=16, gpus_per_server=2, servers_per_su=4, cores=4,
                                         spines_per_pod=2, sus_per_pod=2),
    "hpn": lambda: hpn_dual_plane(segments_per_pod=2, hosts_per_segment=4, aggs_per_plane=2, pods=2,
                                  gpus_per_host=2),
    "dgx1": dgx1, "dgx1x2": lambda: dgx1(chassis=2), "ndv2": ndv2, "ndv2x3": lambda: ndv2(chassis=3),
    "dgx2": dgx2, "dgx2x2": lambda: dgx2(chassis=2),
    "lingjun-slice": lambda: lingjun_fabric(gpus_per_host=2, topology=_lingjun_slice()),
}


def _lingjun_slice():
    from importlib import resources

    text = resources.files("flowherd").joinpath("data/fabrics/alibaba_lingjun_2023/topo.csv").read_text()
    return load_lingjun_topology("\n".join(text.splitlines()[:41]))  # 40 real hosts, uneven groups


@pytest.mark.parametrize("name", sorted(SMALL))
def test_bisection_equals_networkx_max_flow(name):
    f = SMALL[name]()
    assert bisection_bytes_per_s(f) == pytest.approx(_nx_bisection(f), rel=1e-6)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_tier_cut_is_an_upper_bound_and_exact_on_symmetric_clos(name):
    f = SMALL[name]()
    exact = _nx_bisection(f)
    tiers = bisection_bytes_per_s(f, method="tiers")
    assert tiers >= exact * (1 - 1e-9)
    if name.startswith(("fat-tree", "leaf-spine", "clos3", "rail", "hpn")):
        assert tiers == pytest.approx(exact)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_diameter_equals_brute_force(name):
    f = SMALL[name]()
    assert diameter_hops(f) == _nx_diameter(f)


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree_bisection_is_k3_over_8_links(k):
    # full bisection of a k-ary fat-tree: k^3/8 host links of B each
    b = 100 * Gbps
    assert bisection_bytes_per_s(fat_tree(k=k, nic_bandwidth_bytes_per_s=b)) == pytest.approx(k**3 / 8 * b)


@pytest.mark.parametrize(("n", "o"), [(16, 1.0), (16, 2.0), (32, 4.0), (24, 3.0)])
def test_leaf_spine_bisection_is_n_b_over_2o(n, o):
    b = 400 * Gbps
    f = leaf_spine(servers=n, leaves=4, spines=2, oversubscription=o)
    assert bisection_bytes_per_s(f) == pytest.approx(n * b / (2 * o))


@settings(max_examples=15, deadline=None)
@given(leaves=st.sampled_from([2, 4]), per_leaf=st.integers(1, 3), spines=st.integers(1, 3),
       o=st.sampled_from([1.0, 1.5, 3.0]))
def test_leaf_spine_bisection_matches_networkx_for_random_sizes(leaves, per_leaf, spines, o):
    f = leaf_spine(servers=leaves * per_leaf, leaves=leaves, spines=spines, oversubscription=o,
                   gpus_per_server=2)
    assert bisection_bytes_per_s(f) == pytest.approx(_nx_bisection(f), rel=1e-6)


def test_dgx1_bisection_is_the_four_cross_links():
    # GPUs 0-3 vs 4-7: links 0-4 (50), 1-5 (25), 2-6 (50), 3-7 (25) GB/s
    assert bisection_bytes_per_s(dgx1()) == pytest.approx(150 * GBps)


def test_clos_diameters():
    assert diameter_hops(preset("dgx-superpod-h100-2su")) == 6  # GPU-NIC-leaf-spine-leaf-NIC-GPU
    assert diameter_hops(preset("dgx-superpod-h100-3tier-16su")) == 8
    assert diameter_hops(preset("meta-24k")) == 8


def test_summary_keys_and_values():
    s = summary(preset("meta-24k"))
    assert {"num_gpus", "num_servers", "num_switches", "num_nvswitches", "num_links", "num_network_links",
            "bisection_bytes_per_s", "diameter_hops", "name", "kind"} <= set(s)
    # 4 of 8 pods behind a 1:7 aggregation layer: 12,288 GPUs x 400 Gbps / 7
    assert s["bisection_bytes_per_s"] == pytest.approx(12_288 * 400 * Gbps / 7, rel=1e-6)
    assert (s["num_gpus"], s["num_servers"]) == (24_576, 3072)
