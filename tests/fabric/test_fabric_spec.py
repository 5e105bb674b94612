"""The YAML contract of fabrics: keys, units, presets, and one clear error per bad input."""

import pytest

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric import LinkKind, NodeKind, fabric_from_mapping, load_fabric
from flowherd.units import GBps, Gbps, us

CONTRACT = """\
kind: leaf-spine
servers: 16
gpus_per_server: 1
gpu: h100
nic_bandwidth: 400Gbps
nvlink_bandwidth: 900GB/s
leaves: 4
spines: 4
oversubscription: 1
link_latency: 1us
"""


@pytest.fixture
def contract_file(tmp_path):
    p = tmp_path / "fabric.yaml"
    p.write_text(CONTRACT)
    return p


def test_contract_yaml_builds_the_leaf_spine(contract_file):
    f = load_fabric(str(contract_file))
    assert (f.num_gpus, f.num_servers, f.num_switches) == (16, 16, 8)
    net = f.link_kind == LinkKind.NETWORK
    nic = net & (f.node_kind[f.link_src] == NodeKind.NIC)
    assert (f.link_capacity_bytes_per_s[nic] == 400 * Gbps).all()
    assert (f.link_latency_s[net] == pytest.approx(1 * us))
    assert f.gpu_type == ("h100",) * 16


def test_file_with_a_fabric_key(tmp_path):
    p = tmp_path / "s.yml"
    p.write_text("fabric:\n" + "".join(f"  {line}\n" for line in CONTRACT.splitlines()))
    assert load_fabric(p).num_gpus == 16


def test_units_are_parsed_with_their_field():
    f = fabric_from_mapping(dict(kind="leaf-spine", servers=2, gpus_per_server=2, leaves=1, spines=1,
                                 nic_bandwidth="100Gb/s", nvlink_bandwidth="450GB/s", link_latency="500ns"))
    nv = f.link_kind == LinkKind.NVLINK
    assert (f.link_capacity_bytes_per_s[nv] == 450 * GBps).all()
    assert f.link_latency_s.max() == pytest.approx(500e-9)


@pytest.mark.parametrize(("data", "kind", "gpus"), [
    (dict(kind="fat-tree", k=4), "fat-tree", 16),
    (dict(kind="rail-optimized", servers=4, gpus_per_server=2, servers_per_su=2, spines=2),
     "rail-optimized", 8),
    (dict(kind="rail-optimized", servers=8, gpus_per_server=2, servers_per_su=2, cores=4, spines_per_pod=2,
          leaf_spine_bandwidth="800Gbps"), "rail-optimized", 16),
    (dict(kind="clos3", servers=8, gpus_per_server=8, servers_per_tor=2, tors_per_pod=2, spines_per_pod=2,
          cores=2, spine_oversubscription=7), "clos3", 64),
    (dict(kind="preset", name="dgx1"), "nvlink-mesh", 8),
    ("dgx2", "dgx2", 16),
])
def test_every_kind_builds(data, kind, gpus):
    f = fabric_from_mapping(data)
    assert f.params["kind"] == kind and f.num_gpus == gpus


def test_load_fabric_takes_a_preset_name():
    assert load_fabric("dgx-superpod-h100-1su").num_gpus == 256


BASE = dict(kind="leaf-spine", servers=16, leaves=4, spines=4)


@pytest.mark.parametrize(("patch", "pattern"), [
    (dict(servers=0), r"invalid value 0 \(fabric\.servers\): expected greater than or equal to 1"),
    (dict(servers=-2), r"\(fabric\.servers\)"),
    (dict(servers="many"), r"invalid value 'many' \(fabric\.servers\): expected a valid integer"),
    (dict(servers=True), r"\(fabric\.servers\)"),
    (dict(servers=15), r"servers must divide evenly over leaves.*\(fabric\.servers\)"),
    (dict(nic_bandwidth="-400Gbps"), r"rate must be positive, got '-400Gbps' \(fabric\.nic_bandwidth\)"),
    (dict(nic_bandwidth="400Gbsp"), r"malformed rate '400Gbsp' \(fabric\.nic_bandwidth\)"),
    (dict(nvlink_bandwidth="0GB/s"), r"\(fabric\.nvlink_bandwidth\)"),
    (dict(link_latency="-1us"), r"time must be non-negative, got '-1us' \(fabric\.link_latency\)"),
    (dict(oversubscription=0), r"invalid value 0 \(fabric\.oversubscription\): expected greater than 0"),
    (dict(gpu=7), r"\(fabric\.gpu\)"),
    (dict(serverz=16), r"unknown key 'serverz' \(fabric\.serverz\); did you mean 'servers'\?"),
    (dict(spine=4), r"unknown key 'spine' \(fabric\.spine\); did you mean 'spines'\?"),
    (dict(k=4), r"key 'k' is not used by kind 'leaf-spine' \(fabric\.k\); it belongs to kind fat-tree"),
    (dict(kind="fat-tre"), r"unknown fabric kind 'fat-tre' \(fabric\.kind\); did you mean 'fat-tree'\?"),
    (dict(kind=["leaf-spine"]), r"unknown fabric kind \['leaf-spine'\] \(fabric\.kind\)"),
    (dict(leaves=None), r"missing key 'leaves' \(fabric\.leaves\)"),
])
def test_bad_input_gives_one_clear_error(patch, pattern):
    with pytest.raises(ConfigError, match=pattern):
        fabric_from_mapping({**BASE, **patch})


def test_errors_are_anchored_at_the_callers_field():
    with pytest.raises(ConfigError, match=r"\(scenario\.fabric\.servers\)"):
        fabric_from_mapping({**BASE, "servers": 0}, field="scenario.fabric")
    with pytest.raises(ConfigError, match=r"\(scenario\.fabric\.servers\)"):
        fabric_from_mapping({**BASE, "servers": 15}, field="scenario.fabric")


def test_odd_fat_tree_radix():
    with pytest.raises(ConfigError, match=r"invalid value 5 \(fabric\.k\): expected a multiple of 2"):
        fabric_from_mapping(dict(kind="fat-tree", k=5))


def test_disconnected_fabric_is_a_config_error():
    # one uplink per leaf, two spines, no NVLink: rail 0 and rail 1 never meet
    data = dict(kind="rail-optimized", servers=2, gpus_per_server=2, servers_per_su=2, spines=2,
                leaf_uplinks=1, nvlink_bandwidth=None)
    with pytest.raises(ConfigError, match=r"disconnected.*\(fabric\)"):
        fabric_from_mapping(data)


def test_unknown_preset_has_the_closest_name():
    with pytest.raises(UnknownNameError, match="did you mean 'dgx-superpod-h100-2su'"):
        fabric_from_mapping(dict(kind="preset", name="dgx-superpod-h100-2sU"))
    with pytest.raises(UnknownNameError, match="did you mean 'meta-24k'"):
        load_fabric("meta-24")


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match=r"does not exist"):
        load_fabric(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [leaf-spine\n")
    with pytest.raises(ConfigError, match=r"not valid YAML"):
        load_fabric(str(bad))
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"expected a preset name or a mapping"):
        load_fabric(str(listed))


def test_nvls_key_marks_servers_and_reaches_nccls_model():
    """``nvls: true`` makes NCCL's model offer NVLS on an H100 NVSwitch server (NCCL 2.30.7
    picks NVLS for a large single-server AllReduce); without it NCCL has no NVLS graph."""
    from flowherd.collectives import select

    data = {**BASE, "gpus_per_server": 8, "nvlink_bandwidth": "450GB/s"}  # H100, one direction
    off = fabric_from_mapping(data)
    on = fabric_from_mapping({**data, "nvls": True})
    assert not any(off.nvls(s) for s in range(off.num_servers))
    assert all(on.nvls(s) for s in range(on.num_servers))
    assert select(on, range(8), "allreduce", 1 << 30).algorithm == "nvls"
    assert select(off, range(8), "allreduce", 1 << 30).algorithm != "nvls"
    flags = [s % 2 == 0 for s in range(on.num_servers)]
    assert fabric_from_mapping({**data, "nvls": flags}).server_nvls == tuple(flags)


def test_nvls_key_overrides_a_preset_and_checks_its_length():
    f = fabric_from_mapping({"kind": "preset", "name": "dgx-superpod-h100-1su", "nvls": False})
    assert not f.nvls(0)
    with pytest.raises(ConfigError, match=r"\(fabric\.nvls\): expected true, false or one flag per "
                                          r"server \(16\), got 2"):
        fabric_from_mapping({**BASE, "nvls": [True, False]})
    with pytest.raises(ConfigError, match=r"\(fabric\.nvls"):
        fabric_from_mapping({**BASE, "nvls": "sometimes"})
