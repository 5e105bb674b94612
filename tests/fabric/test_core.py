"""Fabric arrays: validation of links, counts, connectivity and the networkx export."""

import numpy as np
import pytest

from flowherd.errors import ConfigError
from flowherd.fabric import Fabric, LinkKind, NodeKind
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.generators import leaf_spine


def _two_server_builder(capacity=1e9):
    b = FabricBuilder("tiny")
    gpus = b.add_gpus([0, 1], ["h100", "h100"])
    sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
    b.connect(gpus, np.repeat(sw, 2), capacity, 1e-6, LinkKind.NETWORK)
    return b


def test_negative_capacity_names_the_link():
    with pytest.raises(ConfigError, match=r"link capacity must be positive, got -1 \(fabric\.links\[0\]\)"):
        _two_server_builder(capacity=-1).build()


def test_disconnected_fabric_is_reported():
    b = FabricBuilder("split")
    gpus = b.add_gpus([0, 1], ["h100", "h100"])
    sw = b.add_nodes(NodeKind.SWITCH, 2, tier=2)
    b.connect(gpus, sw, 1e9, 0.0, LinkKind.NETWORK)
    with pytest.raises(ConfigError, match="disconnected: GPU 0 cannot reach GPU 1"):
        b.build().check_connected()


def test_links_come_in_direction_pairs_with_csr_adjacency():
    f = _two_server_builder().build()
    assert f.num_directed_links == 4 and f.num_links == 2
    for v in range(f.num_nodes):
        out = f.out_links(v)
        assert np.all(f.link_src[out] == v)
    assert sorted(np.concatenate([f.out_links(v) for v in range(f.num_nodes)])) == list(range(4))


def test_leaf_spine_counts_and_oversubscription():
    f = leaf_spine(servers=8, gpus_per_server=8, leaves=2, spines=4, oversubscription=2.0,
                   nic_bandwidth_bytes_per_s=50e9)
    assert (f.num_gpus, f.num_servers, f.num_switches, f.num_nvswitches) == (64, 8, 6, 8)
    up = (f.node_tier[f.link_src] == 2) & (f.node_tier[f.link_dst] == 3)
    down = (f.node_tier[f.link_src] == 1) & (f.node_tier[f.link_dst] == 2)
    # per leaf: 32 NICs x 50 GB/s down, half of it up (2:1)
    assert f.link_capacity_bytes_per_s[up].sum() * 2 == pytest.approx(f.link_capacity_bytes_per_s[down].sum())
    f.check_connected()


def test_networkx_export_keeps_every_link():
    f = leaf_spine(servers=4, gpus_per_server=2, leaves=2, spines=2)
    g = f.to_networkx()
    assert g.number_of_nodes() == f.num_nodes and g.number_of_edges() == f.num_directed_links
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert kinds == {"nvlink", "pcie", "network"}


def test_first_nodes_must_be_gpus():
    f = _two_server_builder().build()
    with pytest.raises(ConfigError, match="must be GPUs"):
        Fabric(name="bad", num_gpus=3, node_kind=f.node_kind, node_tier=f.node_tier,
               gpu_server=np.array([0, 1, 1]), gpu_type=("h100", "h100"), link_src=f.link_src,
               link_dst=f.link_dst, link_capacity_bytes_per_s=f.link_capacity_bytes_per_s,
               link_latency_s=f.link_latency_s, link_kind=f.link_kind)
