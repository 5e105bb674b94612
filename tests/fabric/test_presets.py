"""Presets: published counts (SuperPOD Table 4, B200 RA, Meta, HPN), invariants, near-miss names."""

import numpy as np
import pytest
from fabric_checks import check_fabric

from flowherd.errors import UnknownNameError
from flowherd.fabric import LinkKind, NodeKind, preset, preset_names
from flowherd.units import GBps, Gbps

# DGX SuperPOD H100 RA-11333-001 Table 4, with 32 nodes per SU (the RA's UFM slot is a node here):
# SUs -> (leaf switches, spine switches, spine-leaf cables)
TABLE4 = {1: (8, 4, 256), 2: (16, 8, 512), 3: (24, 16, 768), 4: (32, 16, 1024)}
# DGX SuperPOD B200 RA 3-tier: SUs -> (GPUs, leaf, spine, core)
B200_3TIER = {16: (4096, 128, 128, 64), 32: (8192, 256, 256, 128), 64: (16384, 512, 512, 256)}


def _cables(f, tier_a, tier_b):
    sel = (f.link_kind == LinkKind.NETWORK) & (f.node_tier[f.link_src] == tier_a) \
        & (f.node_tier[f.link_dst] == tier_b)
    return int(sel.sum())  # directed links from a to b: one per cable


@pytest.mark.parametrize("sus", sorted(TABLE4))
def test_superpod_h100_matches_table4(sus):
    f = preset(f"dgx-superpod-h100-{sus}su")
    leaves, spines, spine_leaf = TABLE4[sus]
    tiers = f.node_tier[f.node_kind == NodeKind.SWITCH]
    assert (np.sum(tiers == 2), np.sum(tiers == 3)) == (leaves, spines)
    assert f.num_gpus == 256 * sus
    assert _cables(f, 1, 2) == f.num_gpus  # node-leaf cables = GPUs
    assert _cables(f, 2, 3) == spine_leaf == 256 * sus
    # each leaf: 32 node ports and 32 spine ports (1:1); no switch exceeds the QM9700's 64 ports
    deg = np.bincount(f.link_src, minlength=f.num_nodes)[f.node_kind == NodeKind.SWITCH]
    assert deg.max() <= 64 and set(deg[tiers == 2]) == {64}
    # NVIDIA's "900 GBps" NVLink per GPU is both directions together
    nv = f.link_kind == LinkKind.NVLINK
    assert np.all(f.link_capacity_bytes_per_s[nv] == 450 * GBps)


@pytest.mark.parametrize("sus", sorted(B200_3TIER))
def test_superpod_3tier_matches_b200_ra(sus):
    f = preset(f"dgx-superpod-h100-3tier-{sus}su")
    gpus, leaves, spines, cores = B200_3TIER[sus]
    tiers = f.node_tier[f.node_kind == NodeKind.SWITCH]
    assert f.num_gpus == gpus
    assert (np.sum(tiers == 2), np.sum(tiers == 3), np.sum(tiers == 4)) == (leaves, spines, cores)
    # cables node-leaf = leaf-spine = spine-core = GPU count
    assert _cables(f, 1, 2) == _cables(f, 2, 3) == _cables(f, 3, 4) == gpus
    deg = np.bincount(f.link_src, minlength=f.num_nodes)[f.node_kind == NodeKind.SWITCH]
    assert set(deg) == {64}  # every port of every 64-port switch used


def test_meta_24k_shape():
    # Llama 3 §3.3.1: 24K GPUs, 16 GPUs per ToR, pods of 3,072 GPUs, aggregation 1:7, 400 Gbps
    f = preset("meta-24k")
    assert f.num_gpus == 24_576 and f.params["pods"] == 8
    assert f.params["gpus_per_server"] * f.params["servers_per_tor"] == 8 * 2
    assert f.params["tors_per_pod"] * 16 == 3072
    net = f.link_kind == LinkKind.NETWORK
    nic = net & (f.node_kind[f.link_src] == NodeKind.NIC)
    assert np.all(f.link_capacity_bytes_per_s[nic] == 400 * Gbps)
    cap = {t: f.link_capacity_bytes_per_s[net & (f.node_tier[f.link_src] == t)
                                          & (f.node_tier[f.link_dst] == t + 1)].sum() for t in (1, 2, 3)}
    assert cap[1] / cap[2] == pytest.approx(1.0)
    assert cap[2] / cap[3] == pytest.approx(7.0)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_satisfies_the_fabric_invariants(name):
    check_fabric(preset(name))


def test_presets_have_sourced_docstrings():
    from flowherd.fabric.presets import PRESETS

    for name in PRESETS:
        doc = PRESETS[name].__doc__ or ""
        assert "fabric_facts.md" in doc or "small_topologies.md" in doc, name


@pytest.mark.parametrize(("typo", "closest"), [("dgx-superpod-h100-2s", "dgx-superpod-h100-2su"),
                                               ("meta24k", "meta-24k"), ("dgx-1", "dgx1"),
                                               ("alibaba-lingjn", "alibaba-lingjun")])
def test_unknown_preset_names_the_closest(typo, closest):
    with pytest.raises(UnknownNameError, match=f"did you mean '{closest}'"):
        preset(typo)


def test_kebab_case_names():
    assert all(n == n.lower() and " " not in n and "_" not in n for n in preset_names())


@pytest.mark.parametrize("name", ["meta-clos-small", "dgx-superpod-h100-3tier-16su", "alibaba-hpn-small"])
def test_aggregation_oversubscription_scales_only_the_aggregation_tier(name):
    # the same switches and NICs; the uplinks of the aggregation tier lose capacity in proportion
    from flowherd.fabric.spec import fabric_from_mapping

    a = fabric_from_mapping({"kind": "preset", "name": name, "aggregation_oversubscription": 2})
    b = fabric_from_mapping({"kind": "preset", "name": name, "aggregation_oversubscription": 4})
    ca, cb = np.asarray(a.link_capacity_bytes_per_s), np.asarray(b.link_capacity_bytes_per_s)
    assert ca.shape == cb.shape
    changed = ~np.isclose(ca, cb)
    assert changed.any() and np.allclose(ca[changed] / cb[changed], 2.0)
    assert changed.sum() < 0.5 * len(ca)  # the NIC and lower-tier links keep their speed


def test_aggregation_oversubscription_needs_an_aggregation_tier():
    from flowherd.errors import ConfigError
    from flowherd.fabric.spec import fabric_from_mapping

    with pytest.raises(ConfigError, match=r"no aggregation tier.*\(fabric\.aggregation_oversubscription\)"):
        fabric_from_mapping({"kind": "preset", "name": "dgx-superpod-h100-1su",
                             "aggregation_oversubscription": 2})
