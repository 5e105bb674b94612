"""Generators: counts against closed forms, capacities, oversubscription, link tables."""

import networkx as nx
import numpy as np
import pytest
from fabric_checks import check_fabric

from flowherd.errors import ConfigError
from flowherd.fabric import LinkKind, NodeKind
from flowherd.fabric.generators import (
    clos3,
    dgx1,
    dgx2,
    fat_tree,
    from_networkx,
    hpn_dual_plane,
    leaf_spine,
    ndv2,
    nvlink_mesh,
    rail_optimized,
)
from flowherd.fabric.generators.hpn import HPN_TOR_OVERSUBSCRIPTION, node_plane
from flowherd.units import GBps, Gbps, us


def _switches_of_tier(f, tier):
    return np.flatnonzero((f.node_kind == NodeKind.SWITCH) & (f.node_tier == tier))


def _capacity_between(f, tier_a, tier_b):
    """Total capacity of directed links from tier_a switches/NICs up to tier_b."""
    sel = (f.node_tier[f.link_src] == tier_a) & (f.node_tier[f.link_dst] == tier_b)
    sel &= f.node_kind[f.link_src] != NodeKind.GPU
    return f.link_capacity_bytes_per_s[sel].sum()


# ---- fat-tree -------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_counts_follow_closed_forms(k):
    # Al-Fares et al. 2008: k^3/4 hosts, 5k^2/4 switches (k^2 edge+agg, k^2/4 core), 3k^3/4 cables
    f = fat_tree(k=k)
    check_fabric(f)
    assert f.num_gpus == k**3 // 4
    assert f.num_switches == 5 * k * k // 4
    assert len(_switches_of_tier(f, 4)) == k * k // 4
    assert f.num_network_links == 3 * k**3 // 4


def test_fat_tree_switch_degree_is_k():
    f = fat_tree(k=6)
    deg = np.bincount(f.link_src, minlength=f.num_nodes)
    sw = f.node_kind == NodeKind.SWITCH
    core = _switches_of_tier(f, 4)
    # every edge/aggregation switch uses all k ports; cores have k ports (one per pod)
    assert np.all(deg[sw] == 6) and np.all(deg[core] == 6)


def test_fat_tree_multi_gpu_servers_share_host_ports():
    f = fat_tree(k=4, gpus_per_server=4)
    assert (f.num_servers, f.num_gpus, f.num_nvswitches) == (4, 16, 4)
    # k^3/4 = 16 host ports must split evenly into servers of 3 NICs: they do not
    with pytest.raises(ConfigError, match=r"fabric\.nics_per_server"):
        fat_tree(k=4, gpus_per_server=3)


def test_fat_tree_rejects_odd_k():
    with pytest.raises(ConfigError, match=r"even integer >= 2, got 5 \(fabric\.k\)"):
        fat_tree(k=5)


# ---- leaf-spine and 3-tier Clos --------------------------------------------------------------
@pytest.mark.parametrize("o", [1.0, 3.0, 7.0])
def test_leaf_spine_uplinks_are_downlinks_over_oversubscription(o):
    f = leaf_spine(servers=16, leaves=4, spines=2, oversubscription=o, nvlink_bandwidth_bytes_per_s=None)
    down = _capacity_between(f, 1, 2)
    up = _capacity_between(f, 2, 3)
    assert down == pytest.approx(16 * 400 * Gbps)
    assert down / up == pytest.approx(o)


def test_clos3_ratios_and_counts_at_each_tier():
    f = clos3(servers=16, gpus_per_server=2, servers_per_tor=2, tors_per_pod=4, spines_per_pod=2,
              cores=4, tor_oversubscription=2.0, spine_oversubscription=7.0)
    check_fabric(f)
    pods = 2
    assert len(_switches_of_tier(f, 2)) == 8  # ToRs
    assert len(_switches_of_tier(f, 3)) == pods * 2
    assert len(_switches_of_tier(f, 4)) == 4
    nic = _capacity_between(f, 1, 2)
    tor_up = _capacity_between(f, 2, 3)
    spine_up = _capacity_between(f, 3, 4)
    assert nic / tor_up == pytest.approx(2.0)
    assert tor_up / spine_up == pytest.approx(7.0)
    # spine j of each pod reaches only core plane j (cores // spines_per_pod = 2 cores per plane)
    spines = _switches_of_tier(f, 3)
    for local in range(2):
        sel = np.isin(f.link_src, spines[local::2]) & (f.node_tier[f.link_dst] == 4)
        assert set(f.link_dst[sel] - _switches_of_tier(f, 4)[0]) == {2 * local, 2 * local + 1}


def test_clos3_meta_rack_and_pod_sizes():
    # Llama 3 §3.3.1: 16 GPUs per ToR, 3,072 GPUs per pod
    f = clos3(servers=384, gpus_per_server=8, servers_per_tor=2, tors_per_pod=192, spines_per_pod=4,
              cores=4, spine_oversubscription=7)
    tors = _switches_of_tier(f, 2)
    nic_tor = f.link_dst[(f.node_kind[f.link_src] == NodeKind.NIC) & np.isin(f.link_dst, tors)]
    assert np.all(np.bincount(nic_tor - tors[0]) == 16)
    assert f.params["pods"] == 1


def test_clos3_rejects_partial_pods():
    with pytest.raises(ConfigError, match=r"multiple of servers_per_tor \* tors_per_pod = 8, got 10 "
                                          r"\(fabric\.servers\)"):
        clos3(servers=10, servers_per_tor=2, tors_per_pod=4)


# ---- rail-optimized ----------------------------------------------------------------------------
def test_rail_optimized_puts_gpu_i_on_rail_leaf_i():
    f = rail_optimized(servers=8, gpus_per_server=4, servers_per_su=4, spines=2)
    check_fabric(f)
    leaves = _switches_of_tier(f, 2)
    # GPU -> NIC (PCIe) -> leaf: local GPU i of server s goes to leaf (su * 4 + i)
    nic_of_gpu = {int(a): int(b) for a, b, k in zip(f.link_src, f.link_dst, f.link_kind, strict=True)
                  if k == LinkKind.PCIE and a < f.num_gpus}
    leaf_of_nic = {int(a): int(b) - int(leaves[0]) for a, b in zip(f.link_src, f.link_dst, strict=True)
                   if f.node_kind[a] == NodeKind.NIC and b in set(leaves.tolist())}
    for gpu in range(f.num_gpus):
        server, local = divmod(gpu, 4)
        assert leaf_of_nic[nic_of_gpu[gpu]] == (server // 4) * 4 + local


def test_rail_optimized_per_tier_speeds_and_gpu_types_per_su():
    f = rail_optimized(servers=8, gpus_per_server=2, servers_per_su=2, spines_per_pod=2, cores=2,
                       nic_bandwidth_bytes_per_s=200 * Gbps, leaf_spine_bandwidth_bytes_per_s=400 * Gbps,
                       spine_core_bandwidth_bytes_per_s=800 * Gbps,
                       gpu_type=["a100", "h100", "h100", "b200"])
    check_fabric(f)
    caps = {t: set(f.link_capacity_bytes_per_s[(f.node_tier[f.link_src] == t)
                                               & (f.node_tier[f.link_dst] == t + 1)
                                               & (f.link_kind == LinkKind.NETWORK)]) for t in (1, 2, 3)}
    assert caps == {1: {200 * Gbps}, 2: {400 * Gbps}, 3: {800 * Gbps}}
    assert f.gpu_type == ("a100", "a100", "h100", "h100", "h100", "h100", "b200", "b200")


def test_rail_optimized_leaf_oversubscription_from_uplinks_and_speeds():
    # 8 servers x 400G down per leaf, 2 uplinks x 800G up: 3200 / 1600 = 2:1
    f = rail_optimized(servers=8, gpus_per_server=2, servers_per_su=8, spines=2, leaf_uplinks=2,
                       leaf_spine_bandwidth_bytes_per_s=800 * Gbps)
    down = _capacity_between(f, 1, 2)
    up = _capacity_between(f, 2, 3)
    assert down / up == pytest.approx(2.0)


@pytest.mark.parametrize(("extra", "field"), [(dict(cores=4, spines=2), "spines"),
                                              (dict(spines_per_pod=2), "spines_per_pod"),
                                              (dict(sus_per_pod=2), "sus_per_pod")])
def test_rail_optimized_rejects_keys_of_the_other_tier_count(extra, field):
    with pytest.raises(ConfigError, match=rf"\(fabric\.{field}\)"):
        rail_optimized(servers=8, gpus_per_server=2, servers_per_su=2, **extra)


def test_rail_optimized_rejects_cores_that_split_pods():
    with pytest.raises(ConfigError, match=r"spine_uplinks \(2\) must be a multiple .* \(fabric\.cores\)"):
        rail_optimized(servers=4, gpus_per_server=2, servers_per_su=2, spines_per_pod=2, cores=8)


# ---- HPN ---------------------------------------------------------------------------------------
def test_hpn_nics_are_dual_homed_to_two_planes():
    f = hpn_dual_plane(segments_per_pod=2, hosts_per_segment=4, aggs_per_plane=3, pods=2,
                       cores_per_plane=2)
    check_fabric(f)
    plane = node_plane(f)
    nics = np.flatnonzero(f.node_kind == NodeKind.NIC)
    up = np.isin(f.link_src, nics) & (f.node_kind[f.link_dst] == NodeKind.SWITCH)
    tors_of_nic = [np.sort(plane[f.link_dst[up & (f.link_src == n)]]) for n in nics]
    assert all(list(p) == [0, 1] for p in tors_of_nic)  # one port per plane, two distinct ToRs
    assert np.all(f.link_capacity_bytes_per_s[up] == 200 * Gbps)


def test_hpn_planes_never_meet_above_the_nics():
    f = hpn_dual_plane(segments_per_pod=2, hosts_per_segment=4, aggs_per_plane=3, pods=2)
    plane = node_plane(f)
    sw = (f.node_kind[f.link_src] == NodeKind.SWITCH) & (f.node_kind[f.link_dst] == NodeKind.SWITCH)
    assert sw.any() and np.all(plane[f.link_src[sw]] == plane[f.link_dst[sw]])


def test_hpn_keeps_the_real_ratios_when_scaled_down():
    # HPN §5: 128 x 200G down, 60 x 400G up per ToR = 1.067:1; §6 Aggregation-Core 15:1
    f = hpn_dual_plane(pods=2, segments_per_pod=2, hosts_per_segment=16, aggs_per_plane=4)
    down = _capacity_between(f, 1, 2)
    tor_up = _capacity_between(f, 2, 3)
    agg_up = _capacity_between(f, 3, 4)
    assert down / tor_up == pytest.approx(HPN_TOR_OVERSUBSCRIPTION) == pytest.approx(1.0667, abs=1e-4)
    assert tor_up / agg_up == pytest.approx(15.0)


def test_hpn_full_pod_has_the_published_port_counts():
    # Table 1 / §5: 15 segments x 1,024 GPUs = 15,360; ToR 128 x 200G down + 60 x 400G up
    f = hpn_dual_plane()
    assert f.num_gpus == 15_360
    tors = _switches_of_tier(f, 2)
    aggs = _switches_of_tier(f, 3)
    assert (len(tors), len(aggs)) == (15 * 16, 120)
    tor_down = np.bincount(f.link_dst[np.isin(f.link_dst, tors) & (f.node_kind[f.link_src] == NodeKind.NIC)])
    assert set(tor_down[tors]) == {128}
    up = np.isin(f.link_src, tors) & np.isin(f.link_dst, aggs)
    assert np.allclose(f.link_capacity_bytes_per_s[up], 400 * Gbps)
    assert set(np.bincount(f.link_src[up])[tors]) == {60}
    assert set(np.bincount(f.link_dst[up])[aggs]) == {120}  # SimAI: 120 ToRs per PSW (dual-plane)


# ---- NVLink domains ----------------------------------------------------------------------------
DGX1_TABLE = {  # small_topologies.md §1, GB/s each direction
    (0, 1): 50, (0, 2): 25, (0, 3): 25, (0, 4): 50, (1, 2): 25, (1, 3): 50, (1, 5): 25, (2, 3): 50,
    (2, 6): 50, (3, 7): 25, (4, 5): 50, (4, 6): 25, (4, 7): 25, (5, 6): 25, (5, 7): 50, (6, 7): 50,
}


def test_dgx1_matches_the_published_link_table():
    f = dgx1()
    got = {}
    for a, b, c in zip(f.link_src, f.link_dst, f.link_capacity_bytes_per_s, strict=True):
        got[(int(a), int(b))] = c / GBps
    want = {**DGX1_TABLE, **{(b, a): c for (a, b), c in DGX1_TABLE.items()}}
    assert got == want  # 32 directed links, nothing else
    assert np.all(f.link_kind == LinkKind.NVLINK)
    per_gpu = np.bincount(f.link_src, weights=f.link_capacity_bytes_per_s) / GBps
    assert np.all(per_gpu == 150)  # 6 NVLinks x 25 GB/s


def test_double_links_form_the_hamiltonian_ring():
    # small_topologies.md: the 8 double links form the ring 0-1-3-2-6-7-5-4-0
    ring = [0, 1, 3, 2, 6, 7, 5, 4, 0]
    doubles = {frozenset(p) for p, c in DGX1_TABLE.items() if c == 50}
    assert doubles == {frozenset(ring[i : i + 2]) for i in range(8)}
    f = dgx1()
    got = zip(f.link_src.tolist(), f.link_dst.tolist(), f.link_capacity_bytes_per_s.tolist(), strict=True)
    assert {frozenset((a, b)) for a, b, c in got if c == 50 * GBps} == doubles


def test_ndv2_uses_teccl_capacities_and_alphas():
    # TE-CCL ndv2.py: NVLink 50/25 GB/s with alpha 0.7 us; IB 12.5 GB/s with alpha 1.3 us
    f = ndv2(chassis=2)
    check_fabric(f)
    nv = f.link_kind == LinkKind.NVLINK
    assert nv.sum() == 64 and np.all(f.link_latency_s[nv] == pytest.approx(0.7 * us))
    ib = f.link_kind == LinkKind.NETWORK
    assert ib.sum() == 2  # one cable = TE-CCL's two directed IB links
    assert np.all(f.link_capacity_bytes_per_s[ib] == 12.5 * GBps)
    assert np.all(f.link_latency_s[ib] == pytest.approx(1.3 * us))
    # only GPUs 0 and 1 of each chassis reach the NIC (TE-CCL: GPU 0 sends, GPU 1 receives)
    pcie = f.link_kind == LinkKind.PCIE
    assert sorted(set((f.link_src[pcie] % 8)[f.link_src[pcie] < 16].tolist())) == [0, 1]
    f3 = ndv2(chassis=3)
    ib3 = f3.link_kind == LinkKind.NETWORK
    assert f3.num_switches == 1 and ib3.sum() == 6
    assert f3.link_latency_s[ib3].sum() / 3 == pytest.approx(2.6 * us)  # 2 hops = TACCL remote_alpha


def test_dgx2_has_twelve_nvswitches_and_six_links_per_gpu():
    f = dgx2()
    check_fabric(f)
    assert (f.num_gpus, f.num_nvswitches) == (16, 12)
    gpu_links = f.link_src < 16
    assert np.all(np.bincount(f.link_src[gpu_links]) == 6)
    per_gpu = np.bincount(f.link_src[gpu_links], weights=f.link_capacity_bytes_per_s[gpu_links])
    assert np.all(per_gpu == 150 * GBps)
    # each GPU's switches are the 6 of its own baseboard
    nvsw = np.flatnonzero(f.node_kind == NodeKind.NVSWITCH)
    for g in range(16):
        sw = f.link_dst[f.link_src == g] - nvsw[0]
        assert set(sw.tolist()) == set(range(6 * (g // 8), 6 * (g // 8) + 6))
    between = (f.node_kind[f.link_src] == NodeKind.NVSWITCH) & (f.node_kind[f.link_dst] == NodeKind.NVSWITCH)
    assert f.link_capacity_bytes_per_s[between].sum() / 2 == pytest.approx(1.2e12)  # 1.2 TB/s each way


def test_nvlink_mesh_rejects_pairs_outside_the_chassis():
    with pytest.raises(ConfigError, match=r"fabric\.links"):
        nvlink_mesh(gpus_per_chassis=2, links=((0, 2, 1),))


@pytest.mark.parametrize(("make", "pattern"), [
    (lambda: clos3(servers=4, servers_per_tor=2, tors_per_pod=2, spines_per_pod=2, cores=3),
     r"cores must be a multiple of spines_per_pod = 2, got 3 \(fabric\.cores\)"),
    (lambda: clos3(servers=4, servers_per_tor=2, tors_per_pod=2, spine_oversubscription=0),
     r"spine_oversubscription must be positive, got 0 \(fabric\.spine_oversubscription\)"),
    (lambda: hpn_dual_plane(pods=0), r"pods must be an integer >= 1, got 0 \(fabric\.pods\)"),
    (lambda: hpn_dual_plane(tor_oversubscription=-1), r"\(fabric\.tor_oversubscription\)"),
    (lambda: rail_optimized(servers=10, servers_per_su=4),
     r"multiple of servers_per_su = 4.*\(fabric\.servers\)"),
    (lambda: rail_optimized(servers=4, servers_per_su=4, nic_bandwidth_bytes_per_s=-1.0),
     r"\(fabric\.nic_bandwidth\)"),
    (lambda: dgx1(chassis=0), r"chassis must be an integer >= 1, got 0 \(fabric\.chassis\)"),
    (lambda: fat_tree(k=4, nics_per_server=0), r"\(fabric\.nics_per_server\)"),
])
def test_generator_bad_input_names_the_field(make, pattern):
    with pytest.raises(ConfigError, match=pattern):
        make()


# ---- export --------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: fat_tree(k=4), lambda: dgx2(chassis=2),
                                  lambda: hpn_dual_plane(segments_per_pod=1, hosts_per_segment=2,
                                                         aggs_per_plane=2, gpus_per_host=2)])
def test_networkx_export_round_trips(make):
    f = make()
    g = f.to_networkx()
    assert g.number_of_nodes() == f.num_nodes and g.number_of_edges() == f.num_directed_links
    back = sorted((u, v, d["capacity_bytes_per_s"], d["latency_s"]) for u, v, d in g.edges(data=True))
    want = sorted(zip(f.link_src.tolist(), f.link_dst.tolist(), f.link_capacity_bytes_per_s.tolist(),
                      f.link_latency_s.tolist(), strict=True))
    assert back == want
    assert [g.nodes[v]["tier"] for v in range(f.num_nodes)] == f.node_tier.tolist()
    assert nx.is_strongly_connected(g)
    h = from_networkx(g, gpu_server=f.gpu_server, gpu_type=f.gpu_type)
    for attr in ("node_kind", "node_tier", "link_src", "link_dst", "link_capacity_bytes_per_s",
                 "link_latency_s", "link_kind", "gpu_server"):
        assert np.array_equal(getattr(h, attr), getattr(f, attr)), attr
    assert h.num_gpus == f.num_gpus and h.gpu_type == f.gpu_type
    assert [h.node_name(v) for v in range(h.num_nodes)] == [f.node_name(v) for v in range(f.num_nodes)]


def test_from_networkx_names_a_missing_attribute():
    g = fat_tree(k=2).to_networkx()
    del g.nodes[0]["tier"]
    with pytest.raises(ConfigError, match=r"'tier'.*\(graph\)"):
        from_networkx(g, gpu_server=[0, 1], gpu_type=["h100"] * 2)
