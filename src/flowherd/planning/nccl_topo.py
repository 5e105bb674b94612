"""NCCL topology XML (``NCCL_TOPO_FILE``) of a fabric's servers.

NCCL reads ``NCCL_TOPO_FILE`` with the parser of ``src/graph/xml.cc`` (NVIDIA/nccl 5067397,
``ncclTopoGetXmlFromFile``) and builds its topology from it in ``src/graph/topo.cc``. The file
describes one server, as NCCL's own ``NCCL_TOPO_DUMP_FILE`` does: the scale-out fabric beyond the
NICs is not part of NCCL's model. The grammar the loaders accept:

* ``<system version="1">`` (``NCCL_TOPO_XML_VERSION``), whose children are ``cpu``;
* ``cpu`` (``numaid``, ``arch``, and for x86 ``vendor``, ``familyid``, ``modelid``, which
  ``ncclTopoAddCpu`` reads) holds ``pci`` and ``nic`` nodes;
* ``pci`` (``busid``, ``class``, ``link_speed``, ``link_width``; ``ncclTopoAddPci``) holds ``pci``,
  ``gpu``, ``nic`` and ``pcilink``;
* ``gpu`` (``dev``, ``sm``, ``rank``, ``gdr``; ``ncclTopoAddGpu``) holds ``nvlink`` (``target``,
  ``count``, ``tclass``; ``ncclTopoAddNvLinks``: a target of class ``0x068000`` is an NVSwitch);
* ``nic`` holds ``net`` (``name``, ``dev``, ``speed`` in Mbit/s, ``port``, ``latency``, ``guid``,
  ``maxconn``, ``gdr``; ``ncclTopoAddNet``);
* at most 16 attributes a node and 255 characters a value (``MAX_ATTR_COUNT``, ``MAX_STR_LEN``).

The server here is laid out as the DGX H100 reference is (NVIDIA's dumps): one CPU, and per
GPU a PCIe switch that holds the GPU and its own NIC (rail-optimized servers have one NIC per
GPU; a server whose GPUs share a NIC gets one NIC per distinct NIC node). NVLink: each GPU's
scale-up bandwidth in links of NCCL's per-link rate for its compute capability
(``SM80_NVLINK_BW`` 20.0, ``SM90_NVLINK_BW`` 20.6, ``SM100_NVLINK_BW`` 40.1 GB/s in
``src/graph/topo.h``) to an NVSwitch, or none on a server without NVLink. NIC speeds are the
fabric's NIC link capacities. Bus ids, the PCIe generation (Gen5 x16) and the CPU identity are
the reference layout's, not read from a machine: NCCL uses them only to group devices.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric, LinkKind, NodeKind

__all__ = ["server_shape", "topology_xml"]

# compute capability and NCCL's per-link NVLink rate (GB/s, 10**9 B/s), src/graph/topo.h
_SM = {"a100": (80, 20.0), "h100": (90, 20.6), "h200": (90, 20.6), "b200": (100, 40.1)}
_NVSWITCH_CLASS = "0x068000"


def server_shape(fabric: Fabric, server: int) -> tuple[str, int, tuple[float, ...], float, tuple[int, ...]]:
    """What NCCL's XML says of a server: (GPU type, GPUs, NIC speeds in bytes per second, NVLink
    bytes per second per GPU, NIC index of each GPU)."""
    gpus = fabric.servers_gpus(server)
    dst, kind, cap = fabric.link_dst, fabric.link_kind, fabric.link_capacity_bytes_per_s
    nic_of: list[int] = []
    nics: list[int] = []  # NIC node ids (or the GPU itself when it connects to the network directly)
    speeds: list[float] = []
    nvl = 0.0
    for g in gpus.tolist():
        out = fabric.out_links(g)
        nvl = max(nvl, float(cap[out][kind[out] == LinkKind.NVLINK].sum()))
        pcie = out[kind[out] == LinkKind.PCIE]
        nic = int(dst[pcie[0]]) if pcie.size and fabric.node_kind[dst[pcie[0]]] == NodeKind.NIC else g
        if nic not in nics:
            nics.append(nic)
            o = fabric.out_links(nic)
            speeds.append(float(cap[o][kind[o] == LinkKind.NETWORK].sum()))
        nic_of.append(nics.index(nic))
    return fabric.gpu_type[server], len(gpus), tuple(speeds), nvl, tuple(nic_of)


def topology_xml(fabric: Fabric, server: int) -> str:
    """The ``NCCL_TOPO_FILE`` of ``server`` (module docstring)."""
    gpu_type, n, speeds, nvl, nic_of = server_shape(fabric, server)
    if gpu_type not in _SM:
        raise ConfigError(f"no NCCL compute capability for GPU {gpu_type!r} of server {server} (expected "
                          f"one of {', '.join(_SM)}; NCCL_TOPO_FILE is NCCL's)")
    sm, link_gbps = _SM[gpu_type]
    count = round(nvl / (link_gbps * 1e9)) if nvl > 0 else 0
    switch_bus = "0000:ff:00.0"  # the NVSwitch the GPUs' links reach

    def tag(name: str, attrs: dict[str, object], close: bool = True) -> str:
        body = " ".join(f"{k}={quoteattr(str(v))}" for k, v in attrs.items())
        return f"<{name} {body}{'/' if close else ''}>"

    lines = ['<system version="1">',
             "  " + tag("cpu", {"numaid": 0, "affinity": "ffffffff,ffffffff", "arch": "x86_64",
                               "vendor": "GenuineIntel", "familyid": 6, "modelid": 143}, close=False)]
    nic_done: set[int] = set()
    for g in range(n):
        sw_bus = f"0000:{0x10 + 0x10 * g:02x}:00.0"
        gpu_bus = f"0000:{0x11 + 0x10 * g:02x}:00.0"
        lines.append("    " + tag("pci", {"busid": sw_bus, "class": "0x060400", "vendor": "0x1000",
                                          "device": "0xc030", "link_speed": "32.0 GT/s PCIe",
                                          "link_width": 16}, close=False))
        lines.append("      " + tag("pci", {"busid": gpu_bus, "class": "0x030200", "vendor": "0x10de",
                                            "link_speed": "32.0 GT/s PCIe", "link_width": 16}, close=False))
        lines.append("        " + tag("gpu", {"dev": g, "sm": sm, "rank": g, "gdr": 1}, close=count == 0))
        if count:
            lines.append("          " + tag("nvlink", {"target": switch_bus, "count": count,
                                                       "tclass": _NVSWITCH_CLASS}))
            lines.append("        </gpu>")
        lines.append("      </pci>")
        k = nic_of[g]
        if k not in nic_done:
            nic_done.add(k)
            nic_bus = f"0000:{0x12 + 0x10 * g:02x}:00.0"
            lines.append("      " + tag("pci", {"busid": nic_bus, "class": "0x020700", "vendor": "0x15b3",
                                                "link_speed": "32.0 GT/s PCIe", "link_width": 16},
                                            close=False))
            lines.append("        <nic>")
            mbps = round(speeds[k] * 8 / 1e6)  # NCCL's net speed is in Mbit/s
            lines.append("          " + tag("net", {"name": f"mlx5_{k}", "dev": k, "speed": mbps, "port": 1,
                                                    "latency": "0.000000", "guid": hex(0x1000 + k),
                                                    "maxconn": 131072, "gdr": 1}))
            lines.append("        </nic>")
            lines.append("      </pci>")
        lines.append("    </pci>")
    lines += ["  </cpu>", "</system>", ""]
    return "\n".join(lines)
