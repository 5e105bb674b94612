"""The real Lingjun mapping: counts from the dataset README, real labels kept, assumed speeds."""

import numpy as np
import pytest

from flowherd.errors import ConfigError
from flowherd.fabric import NodeKind, lingjun_fabric, load_lingjun_topology
from flowherd.fabric.spec import fabric_from_mapping
from flowherd.units import Gbps


def test_topology_counts_match_the_dataset():
    # data README: 847 hosts, one DSW group G6, 3 PSW groups, 119 (PSW, ASW) ToR groups of 2-8 hosts
    t = load_lingjun_topology()
    assert t.num_hosts == 847
    assert len(t.tor_labels) == 119 and t.psw_labels == ("P8", "P10", "P12") and t.dsw_labels == ("G6",)
    hosts_per_psw = dict(zip(t.psw_labels, np.bincount(t.psw_of_tor[t.tor_group]), strict=True))
    assert hosts_per_psw == {"P10": 362, "P12": 306, "P8": 179}
    tors_per_psw = dict(zip(t.psw_labels, np.bincount(t.psw_of_tor), strict=True))
    assert tors_per_psw == {"P10": 48, "P12": 42, "P8": 29}
    sizes = np.bincount(t.tor_group)
    assert (sizes.min(), sizes.max()) == (2, 8)
    assert (np.sum(sizes == 8), np.sum(sizes == 7), np.sum(sizes == 6)) == (68, 23, 15)
    assert len(set(t.host_ids)) == 847


def test_hosts_are_sorted_into_contiguous_tor_groups():
    t = load_lingjun_topology()
    assert np.all(np.diff(t.tor_group) >= 0)


def test_fabric_keeps_real_labels_and_structure():
    f = lingjun_fabric()
    t = load_lingjun_topology()
    assert (f.num_servers, f.num_gpus) == (847, 847 * 8)
    sw = np.flatnonzero(f.node_kind == NodeKind.SWITCH)
    names = [f.node_name(int(v)) for v in sw]
    assert "P10/S14#0" in names and "P8#0" in names and "G6#0" in names
    assert f.node_name(0).startswith(t.host_ids[0][:16])
    # every NIC of host h sits under the ToR of h's (PSW, ASW) group
    nics = np.flatnonzero(f.node_kind == NodeKind.NIC)
    up = np.isin(f.link_src, nics) & (f.node_kind[f.link_dst] == NodeKind.SWITCH)
    host = (f.link_src[up] - nics[0]) // 8
    tor_label = [f.node_name(int(v)).split("#")[0] for v in f.link_dst[up]]
    assert tor_label == [t.tor_labels[g] for g in t.tor_group[host]]
    assert np.all(f.link_capacity_bytes_per_s[up] == 400 * Gbps)
    f.check_connected()


def test_uplinks_follow_the_design_capacity():
    # a ToR group is sized for 8 hosts x 8 GPUs x 400 Gbps at 1:1, however many hosts it has
    f = lingjun_fabric(switches_per_psw_group=4, tor_oversubscription=2.0)
    tors = np.flatnonzero((f.node_kind == NodeKind.SWITCH) & (f.node_tier == 2))
    up = np.isin(f.link_src, tors) & (f.node_tier[f.link_dst] == 3)
    per_tor = np.bincount(f.link_src[up], weights=f.link_capacity_bytes_per_s[up])[tors]
    assert np.allclose(per_tor, 8 * 8 * 400 * Gbps / 2.0)


def test_bad_csv_is_reported():
    with pytest.raises(ConfigError, match="columns"):
        load_lingjun_topology("ip,PSW\nx,P1\n")


def test_yaml_kind_passes_the_parameters():
    # kind alibaba-lingjun: the same mapping with the YAML's speeds and ratios
    f = fabric_from_mapping({"kind": "alibaba-lingjun", "gpu": "h100", "nvlink_bandwidth": "200GB/s",
                             "nic_bandwidth": "200Gbps", "aggregation_oversubscription": 15})
    assert (f.num_servers, f.num_gpus, f.gpu_type[0]) == (847, 847 * 8, "h100")
    psw = np.flatnonzero((f.node_kind == NodeKind.SWITCH) & (f.node_tier == 3))
    core = np.isin(f.link_src, psw) & (f.node_tier[f.link_dst] == 4)
    # the PSW group of 29 ToR groups: 29 x 8 hosts x 8 NICs x 200 Gbps / 15 towards the core
    p8 = [i for i, v in enumerate(f.link_src[core]) if f.node_name(int(v)).startswith("P8#")]
    assert np.isclose(f.link_capacity_bytes_per_s[core][p8].sum(), 29 * 64 * 200 * Gbps / 15)
    nic = (f.node_kind[f.link_src] == NodeKind.NIC) & (f.node_kind[f.link_dst] == NodeKind.SWITCH)
    assert np.all(f.link_capacity_bytes_per_s[nic] == 200 * Gbps)


def test_yaml_kind_refuses_bad_values_in_one_line():
    with pytest.raises(ConfigError, match=r"fabric\.servers"):
        fabric_from_mapping({"kind": "alibaba-lingjun", "servers": 10})
    with pytest.raises(ConfigError, match=r"fabric\.aggregation_oversubscription"):
        fabric_from_mapping({"kind": "alibaba-lingjun", "aggregation_oversubscription": 0})
    with pytest.raises(ConfigError, match=r"fabric\.gpu\b"):
        fabric_from_mapping({"kind": "alibaba-lingjun", "gpu": ["h100", "a100"]})
