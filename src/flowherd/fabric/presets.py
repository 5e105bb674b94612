"""Fabrics of real clusters, by name: ``preset("dgx-superpod-h100-2su")``.

Every preset cites its source in docs/sources/fabric_facts.md (section numbers below)
or small_topologies.md. Numbers a source does not give are marked "assumed" in the docstring.
An unknown name raises `UnknownNameError` with the closest known name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from flowherd.fabric.core import Fabric
from flowherd.fabric.generators.clos import clos3
from flowherd.fabric.generators.hpn import hpn_dual_plane
from flowherd.fabric.generators.nvlink import dgx1, dgx2, ndv2
from flowherd.fabric.generators.rail import rail_optimized
from flowherd.registry import Registry
from flowherd.units import GBps, Gbps

PRESETS: Registry[Callable[[], Fabric]] = Registry("fabric preset")

#: H100 SXM NVLink 4: "900 GBps" per GPU counts both directions (fabric_facts.md §1).
H100_NVLINK_BYTES_PER_S = 450 * GBps
#: DGX SuperPOD H100 RA (RA-11333-001) Table 4: spine switches per number of SUs (2 tiers).
SUPERPOD_H100_SPINES = {1: 4, 2: 8, 3: 16, 4: 16}
#: DGX SuperPOD B200 RA, 3-tier scale-out: core switches per number of SUs.
SUPERPOD_3TIER_CORES = {16: 64, 32: 128, 64: 256}


def with_nvls(fabric: Fabric) -> Fabric:
    """`fabric` with every server's NVSwitch marked NVLS-capable (in-switch reduction).

    Third-generation NVSwitch (DGX/HGX H100, H800, H200) and later do NVLink SHARP reductions
    in the switch: NVIDIA DGX H100 user guide / "NVIDIA H100 Tensor Core GPU Architecture"
    whitepaper (2022), section "NVLink Switch System" ("SHARP in-network reductions ... in
    third-generation NVSwitch"); NCCL enables NVLS from compute capability 9.0 on
    (src/graph/search.cc, ``ccMin < 90`` returns no NVLS graph).
    """
    return dataclasses.replace(fabric, server_nvls=(True,) * fabric.num_servers)


#: Presets with an aggregation tier whose oversubscription the YAML key
#: ``aggregation_oversubscription`` sets: Meta's clusters (1:7 by default, fabric_facts.md §2), the
#: 3-tier SuperPOD (spine-core, 1:1 by default) and the 2-Pod HPN (aggregation-core, 15:1).
AGGREGATION_PRESETS = ("meta-24k", "meta-clos-small", "alibaba-hpn-small",
                       *(f"dgx-superpod-h100-3tier-{n}su" for n in SUPERPOD_3TIER_CORES))


def preset(name: str, *, aggregation_oversubscription: float | None = None) -> Fabric:
    """Build the preset fabric `name` (see `preset_names`); ``aggregation_oversubscription``
    (`AGGREGATION_PRESETS` only) overrides its aggregation tier's downlink : uplink ratio."""
    if aggregation_oversubscription is None:
        return PRESETS[name]()
    if name not in AGGREGATION_PRESETS:
        from flowherd.errors import ConfigError

        raise ConfigError(f"preset {name!r} has no aggregation tier to oversubscribe; expected one of "
                          f"{', '.join(AGGREGATION_PRESETS)} (fabric.aggregation_oversubscription)")
    return PRESETS[name](aggregation_oversubscription=aggregation_oversubscription)


def preset_names() -> list[str]:
    return sorted(PRESETS)


def superpod_h100(sus: int) -> Fabric:
    """NVIDIA DGX SuperPOD with DGX H100, 2-tier rail-optimized NDR fat tree (fabric_facts.md §1).

    Source: DGX SuperPOD H100 Reference Architecture RA-11333-001, Table 4. 32 DGX H100 per SU
    (the RA's 1-SU row has 31 nodes, one slot taken by UFM; all 32 are kept here), 8 GPUs and
    8 ConnectX-7 400 Gb/s NICs per node, one rail leaf per GPU index per SU (8 leaves per SU),
    each leaf 32 node ports and 32 spine cables (1:1), spines as in Table 4 (4, 8, 16, 16);
    node-leaf cables = GPUs, spine-leaf cables = 256 per SU. NVLink: NVIDIA's "900 GBps" per GPU
    counts both directions, so each GPU-NVSwitch link has 450 GB/s per direction.
    """
    return with_nvls(rail_optimized(servers=32 * sus, gpus_per_server=8, servers_per_su=32,
                                    spines=SUPERPOD_H100_SPINES[sus], leaf_uplinks=32,
                                    nic_bandwidth_bytes_per_s=400 * Gbps,
                                    nvlink_bandwidth_bytes_per_s=H100_NVLINK_BYTES_PER_S,
                                    gpu_type="h100", name=f"dgx-superpod-h100-{sus}su"))


def superpod_3tier(sus: int, aggregation_oversubscription: float = 1.0) -> Fabric:
    """DGX SuperPOD 3-tier scale-out (leaf, spine, core) of `sus` SUs (fabric_facts.md §1).

    Source: DGX SuperPOD B200 RA ("dgx-superpod-architecture"): 16 SU = 512 nodes / 4,096 GPUs /
    128 leaf / 128 spine / 64 core; 32 SU: 256 / 256 / 128; 64 SU: 512 / 512 / 256; cables
    node-leaf = leaf-spine = spine-core = GPU count. Built with DGX H100 nodes (8 GPUs, 8 x 400 Gb/s)
    as the preset name says (NVLink 450 GB/s per direction): 8 spines per SU, spine ``j`` of each
    SU dealing its 32 uplinks over core group ``j``. ``aggregation_oversubscription`` divides the
    spine-core cables' speed (the RA's 1:1 by default).
    """
    return with_nvls(rail_optimized(
        servers=32 * sus, gpus_per_server=8, servers_per_su=32, sus_per_pod=1, spines_per_pod=8,
        cores=SUPERPOD_3TIER_CORES[sus], leaf_uplinks=32, nic_bandwidth_bytes_per_s=400 * Gbps,
        spine_core_bandwidth_bytes_per_s=400 * Gbps / aggregation_oversubscription,
        nvlink_bandwidth_bytes_per_s=H100_NVLINK_BYTES_PER_S, gpu_type="h100",
        name=f"dgx-superpod-h100-3tier-{sus}su"))


def _sized(fn: Callable[..., Fabric], sus: int) -> Callable[..., Fabric]:
    def make(**kw: float) -> Fabric:
        return fn(sus, **kw)

    make.__doc__ = fn.__doc__
    return make


for _n in SUPERPOD_H100_SPINES:
    PRESETS.add(f"dgx-superpod-h100-{_n}su", _sized(superpod_h100, _n))
for _n in SUPERPOD_3TIER_CORES:
    PRESETS.add(f"dgx-superpod-h100-3tier-{_n}su", _sized(superpod_3tier, _n))


@PRESETS.register("meta-24k")
def meta_24k(aggregation_oversubscription: float = 7.0) -> Fabric:
    """Meta's 24K-GPU RoCE cluster of Llama 3 (fabric_facts.md §2; arXiv:2407.21783 §3.3.1).

    8 pods x 192 racks x 2 Grand Teton servers x 8 H100 = 24,576 GPUs, 400 Gb/s per GPU; ToR 1:1
    ("full bisection" inside a pod), aggregation oversubscribed 1:7. Assumed (not published):
    16 pod spines (cluster switches) per pod, 64 aggregation (core) switches, 1 us per link.
    """
    return with_nvls(clos3(
                 servers=3072, gpus_per_server=8, servers_per_tor=2, tors_per_pod=192, spines_per_pod=16,
                 cores=64, tor_oversubscription=1.0, spine_oversubscription=aggregation_oversubscription,
                 nic_bandwidth_bytes_per_s=400 * Gbps, nvlink_bandwidth_bytes_per_s=H100_NVLINK_BYTES_PER_S,
                 gpu_type="h100", name="meta-24k"))


@PRESETS.register("meta-clos-small")
def meta_clos_small(aggregation_oversubscription: float = 7.0) -> Fabric:
    """A scaled-down Meta-style 3-tier Clos (fabric_facts.md §2): racks of 16 GPUs (2 x 8),
    pods of 16 racks (256 GPUs), 4 pods (1,024 GPUs), pods 1:1 inside, aggregation 1:7 as in Meta's
    24K cluster. Assumed: 4 pod spines per pod, 8 cores.
    """
    return with_nvls(clos3(
                 servers=128, gpus_per_server=8, servers_per_tor=2, tors_per_pod=16, spines_per_pod=4,
                 cores=8, spine_oversubscription=aggregation_oversubscription,
                 nic_bandwidth_bytes_per_s=400 * Gbps,
                 nvlink_bandwidth_bytes_per_s=H100_NVLINK_BYTES_PER_S, gpu_type="h100",
                 name="meta-clos-small"))


@PRESETS.register("alibaba-hpn-pod")
def alibaba_hpn_pod(aggregation_oversubscription: float | None = None) -> Fabric:
    """One Alibaba HPN Pod (fabric_facts.md §3; Qian et al., SIGCOMM 2024, Table 1, §5-§6).

    15 segments x 128 hosts x 8 H800 = 15,360 GPUs; each NIC 2 x 200 Gb/s to two ToRs (dual-ToR);
    rail-optimized segments (16 ToRs per segment: 8 rails x 2 planes); ToR 128 x 200G down,
    60 x 400G up (1.067:1); 60 aggregation switches per plane, plane p reached only from port p.
    """
    del aggregation_oversubscription  # one Pod: no aggregation-core tier
    return with_nvls(hpn_dual_plane(pods=1, segments_per_pod=15, hosts_per_segment=128, aggs_per_plane=60,
                          name="alibaba-hpn-pod"))


@PRESETS.register("alibaba-hpn-small")
def alibaba_hpn_small(aggregation_oversubscription: float = 15.0) -> Fabric:
    """A scaled-down 2-Pod Alibaba HPN (fabric_facts.md §3) with HPN's ratios: ToR 1.067:1,
    Aggregation-Core 15:1, dual-ToR, dual-plane. Size parameter: 16 hosts per segment (HPN: 128),
    2 segments per Pod (15), 4 aggregation switches per plane (60), 2 core switches per plane
    (assumed); 2 Pods x 2 x 16 x 8 = 512 GPUs.
    """
    return with_nvls(hpn_dual_plane(pods=2, segments_per_pod=2, hosts_per_segment=16, aggs_per_plane=4,
                          cores_per_plane=2, agg_oversubscription=aggregation_oversubscription,
                          name="alibaba-hpn-small"))


@PRESETS.register("alibaba-lingjun")
def alibaba_lingjun() -> Fabric:
    """Alibaba Lingjun cluster, Aug 2023: the real placement of 847 hosts under 119 ToR groups,
    3 PSW groups and one DSW group (fabric_facts.md "Companion data"; dataset of Cao et al., Crux,
    SIGCOMM 2024). Speeds and switch counts per group are assumed: see `lingjun_fabric`.
    """
    from flowherd.fabric.lingjun import lingjun_fabric  # its CSV reader: this preset's only

    return lingjun_fabric()


@PRESETS.register("dgx1")
def dgx1_preset() -> Fabric:
    """DGX-1 (V100) hybrid cube-mesh, one chassis (small_topologies.md §1: MSCCL ``dgx1()``,
    TE-CCL ``dgx1.py``): 16 NVLink pairs, 50 GB/s double and 25 GB/s single links per direction.
    """
    return dgx1(chassis=1)


@PRESETS.register("ndv2")
def ndv2_preset() -> Fabric:
    """Two Azure NDv2 chassis as TE-CCL models them (small_topologies.md §2, ``ndv2.py``): DGX-1
    NVLink mesh with alpha 0.7 us, one 12.5 GB/s InfiniBand NIC per chassis with alpha 1.3 us.
    """
    return ndv2(chassis=2)


@PRESETS.register("dgx2")
def dgx2_preset() -> Fabric:
    """DGX-2 (small_topologies.md §3): 16 V100, two baseboards of 6 NVSwitches, 6 NVLinks of
    25 GB/s per GPU, 1.2 TB/s between the baseboards; TE-CCL alpha 0.35 us per NVSwitch link.
    """
    return dgx2(chassis=1)

