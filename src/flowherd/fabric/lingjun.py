"""A real fabric: the host -> ToR -> aggregation -> core mapping of Alibaba's Lingjun cluster (Aug 2023).

Data: ``flowherd/data/fabrics/alibaba_lingjun_2023/topo.csv`` (Apache-2.0, from
``alibaba/alibaba-lingjun-dataset-2023``; Cao et al., "Crux", SIGCOMM 2024; see the README next to it).
Each row is one host and the switch groups it hangs from: ASW (ToR), PSW (aggregation), DSW (core).
ASW labels repeat across PSW groups, so a ToR group is the pair (PSW, ASW).

What is real: the 847 hosts, their grouping into 119 ToR groups, 3 PSW groups and one DSW group,
and the switch-group labels (kept in ``node_names``). What is assumed (parameters with defaults):
GPUs per host, NIC and link speeds, how many switches a group holds, and the oversubscription.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from importlib import resources

import numpy as np

from flowherd.errors import ConfigError
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import Fabric, LinkKind, NodeKind
from flowherd.fabric.generators.clos import _count, _positive
from flowherd.fabric.generators.servers import add_servers
from flowherd.units import GBps, Gbps, us

_DATA = ("data", "fabrics", "alibaba_lingjun_2023", "topo.csv")


@dataclass(frozen=True, slots=True, kw_only=True)
class LingjunTopology:
    """The rows of ``topo.csv``, hosts sorted by (DSW, PSW, ASW number, file order).

    Attributes:
        host_ids: Hashed host id (the ``ip`` column) of each host.
        dsw, psw, asw: Switch-group label of each host (``G6``, ``P10``, ``S14``).
        tor_group: ``int32[hosts]``, index of the host's (PSW, ASW) ToR group.
        tor_labels: ``"PSW/ASW"`` label of each ToR group, in order.
        psw_of_tor: ``int32[tor groups]``, PSW group of each ToR group.
        psw_labels: PSW group labels, in order.
        dsw_of_psw: ``int32[psw groups]``, DSW group of each PSW group.
        dsw_labels: DSW group labels, in order.
    """

    host_ids: tuple[str, ...]
    dsw: tuple[str, ...]
    psw: tuple[str, ...]
    asw: tuple[str, ...]
    tor_group: np.ndarray
    tor_labels: tuple[str, ...]
    psw_of_tor: np.ndarray
    psw_labels: tuple[str, ...]
    dsw_of_psw: np.ndarray
    dsw_labels: tuple[str, ...]

    @property
    def num_hosts(self) -> int:
        return len(self.host_ids)


def _natural(label: str) -> tuple[str, int]:
    m = re.match(r"^(\D*)(\d+)$", label)
    return (m.group(1), int(m.group(2))) if m else (label, -1)


def load_lingjun_topology(text: str | None = None) -> LingjunTopology:
    """Read the packaged ``topo.csv`` (or `text` in the same format) into a `LingjunTopology`.

    >>> t = load_lingjun_topology()
    >>> (t.num_hosts, len(t.tor_labels), len(t.psw_labels), t.dsw_labels)
    (847, 119, 3, ('G6',))
    """
    if text is None:
        text = resources.files("flowherd").joinpath(*_DATA).read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    need = {"ip", "DSW", "PSW", "ASW"}
    if not rows or not need <= set(rows[0]):
        raise ConfigError(f"lingjun topology needs columns {sorted(need)}, got "
                          f"{sorted(rows[0]) if rows else 'no rows'} (topo.csv)")
    order = sorted(range(len(rows)), key=lambda i: (_natural(rows[i]["DSW"]), _natural(rows[i]["PSW"]),
                                                    _natural(rows[i]["ASW"]), i))
    rows = [rows[i] for i in order]
    tor_key = [(r["DSW"], r["PSW"], r["ASW"]) for r in rows]
    tor_keys = list(dict.fromkeys(tor_key))
    tor_index = {k: i for i, k in enumerate(tor_keys)}
    psw_keys = list(dict.fromkeys((d, p) for d, p, _ in tor_keys))
    psw_index = {k: i for i, k in enumerate(psw_keys)}
    dsw_labels = tuple(dict.fromkeys(d for d, _ in psw_keys))
    return LingjunTopology(
        host_ids=tuple(r["ip"] for r in rows),
        dsw=tuple(r["DSW"] for r in rows),
        psw=tuple(r["PSW"] for r in rows),
        asw=tuple(r["ASW"] for r in rows),
        tor_group=np.array([tor_index[k] for k in tor_key], dtype=np.int32),
        tor_labels=tuple(f"{p}/{a}" for _, p, a in tor_keys),
        psw_of_tor=np.array([psw_index[(d, p)] for d, p, _ in tor_keys], dtype=np.int32),
        psw_labels=tuple(p for _, p in psw_keys),
        dsw_of_psw=np.array([dsw_labels.index(d) for d, _ in psw_keys], dtype=np.int32),
        dsw_labels=dsw_labels,
    )


def lingjun_fabric(
    *,
    gpus_per_host: int = 8,
    nic_bandwidth_bytes_per_s: float = 400 * Gbps,
    nvlink_bandwidth_bytes_per_s: float | None = 200 * GBps,
    switches_per_tor_group: int = 1,
    switches_per_psw_group: int = 8,
    switches_per_dsw_group: int = 8,
    hosts_per_tor: int | None = None,
    tor_oversubscription: float = 1.0,
    psw_oversubscription: float = 1.0,
    link_latency_s: float = 1 * us,
    gpu_type: str = "h800",
    topology: LingjunTopology | None = None,
    name: str = "alibaba-lingjun",
) -> Fabric:
    """The Lingjun cluster as a 3-tier Clos over its real host placement.

    Host ``h`` is server ``h`` of `LingjunTopology` order; its NIC ``g`` (one per GPU) links to switch
    ``g mod switches_per_tor_group`` of its ToR group. Every ToR switch links to every switch of its
    PSW group, every PSW switch to every switch of its DSW group (one aggregated link per pair).
    Uplink capacities follow the design, not the partial filling: a ToR group is sized for
    `hosts_per_tor` hosts (default: the fullest group in the data, 8), and its uplink capacity is
    that downlink capacity over `tor_oversubscription`; a PSW group's uplink is the sum of its ToR
    groups' uplinks over `psw_oversubscription`.

    Args:
        gpus_per_host: Assumed 8 (Crux: ">2,000 GPUs (8 per host)"; note 847 hosts x 8 = 6,776,
            so not every listed host may have held 8 working GPUs).
        nic_bandwidth_bytes_per_s: Assumed 400 Gbps per GPU NIC.
        nvlink_bandwidth_bytes_per_s: Assumed 200 GB/s per direction (H800-class); None: no NVLink.
        switches_per_tor_group, switches_per_psw_group, switches_per_dsw_group: Assumed 1, 8, 8.
        hosts_per_tor: Design capacity of a ToR group, in hosts.
        tor_oversubscription, psw_oversubscription: Assumed 1 (full bisection).
        link_latency_s: Latency of every network link.
        gpu_type: Assumed GPU model of every host.
        topology: The mapping; default the packaged ``topo.csv``.
        name: Fabric name.
    """
    t = topology or load_lingjun_topology()
    for value, field in ((gpus_per_host, "fabric.gpus_per_host"),
                         (switches_per_tor_group, "fabric.switches_per_tor_group"),
                         (switches_per_psw_group, "fabric.switches_per_psw_group"),
                         (switches_per_dsw_group, "fabric.switches_per_dsw_group")):
        _count(value, field)
    _positive(tor_oversubscription, "fabric.tor_oversubscription")
    _positive(psw_oversubscription, "fabric.psw_oversubscription")
    _positive(nic_bandwidth_bytes_per_s, "fabric.nic_bandwidth")
    if len(t.dsw_labels) > 1:
        raise ConfigError(f"lingjun mapping has {len(t.dsw_labels)} DSW groups, expected 1 "
                          "(nothing in the data joins core groups) (topo.csv)")
    hosts, ntor, npsw = t.num_hosts, len(t.tor_labels), len(t.psw_labels)
    per_tor = int(np.bincount(t.tor_group).max()) if hosts_per_tor is None else hosts_per_tor
    _count(per_tor, "fabric.hosts_per_tor")
    sa, sp, sd = switches_per_tor_group, switches_per_psw_group, switches_per_dsw_group
    b = FabricBuilder(name)
    blk = add_servers(b, servers=hosts, gpus_per_server=gpus_per_host, gpu_type=[gpu_type] * hosts,
                      nvlink_bandwidth_bytes_per_s=nvlink_bandwidth_bytes_per_s)
    asw = b.add_nodes(NodeKind.SWITCH, ntor * sa, tier=2)  # switch i of ToR group t: t * sa + i
    psw = b.add_nodes(NodeKind.SWITCH, npsw * sp, tier=3)
    dsw = b.add_nodes(NodeKind.SWITCH, sd, tier=4)
    lat, net = link_latency_s, LinkKind.NETWORK
    nic_tor = t.tor_group[:, None] * sa + np.arange(gpus_per_host) % sa
    b.connect(blk.nics.ravel(), asw[nic_tor.ravel()], nic_bandwidth_bytes_per_s, lat, net)
    tor_up = per_tor * gpus_per_host * nic_bandwidth_bytes_per_s / tor_oversubscription  # per group
    a_sw = np.repeat(np.arange(ntor * sa), sp)
    p_sw = t.psw_of_tor[a_sw // sa] * sp + np.tile(np.arange(sp), ntor * sa)
    b.connect(asw[a_sw], psw[p_sw], tor_up / (sa * sp), lat, net)
    tors_in_psw = np.bincount(t.psw_of_tor, minlength=npsw)
    psw_up = tors_in_psw * tor_up / psw_oversubscription  # per PSW group
    p_all = np.repeat(np.arange(npsw * sp), sd)
    b.connect(psw[p_all], dsw[np.tile(np.arange(sd), npsw * sp)], psw_up[p_all // sp] / (sp * sd), lat, net)
    fabric = b.build(dict(kind="alibaba-lingjun", hosts=hosts, tor_groups=ntor, psw_groups=npsw,
                          gpus_per_host=gpus_per_host, switches_per_tor_group=sa,
                          switches_per_psw_group=sp, switches_per_dsw_group=sd, hosts_per_tor=per_tor,
                          nic_bandwidth_bytes_per_s=nic_bandwidth_bytes_per_s,
                          tor_oversubscription=tor_oversubscription,
                          psw_oversubscription=psw_oversubscription))
    return _with_names(fabric, t, gpus_per_host, nvlink_bandwidth_bytes_per_s is not None, sa, sp, sd)


def _with_names(fabric: Fabric, t: LingjunTopology, gpus: int, nvlink: bool, sa: int, sp: int,
                sd: int) -> Fabric:
    import dataclasses

    host = [h[:16] for h in t.host_ids]
    names = [f"{h}/gpu{g}" for h in host for g in range(gpus)]
    if nvlink and gpus > 1:
        names += [f"{h}/nvswitch" for h in host]
    names += [f"{h}/nic{g}" for h in host for g in range(gpus)]
    names += [f"{lab}#{i}" for lab in t.tor_labels for i in range(sa)]
    names += [f"{lab}#{i}" for lab in t.psw_labels for i in range(sp)]
    names += [f"{t.dsw_labels[0]}#{i}" for i in range(sd)]
    if len(names) != fabric.num_nodes:  # guards the order add_servers uses
        raise AssertionError(f"lingjun naming covers {len(names)} of {fabric.num_nodes} nodes")
    return dataclasses.replace(fabric, node_names=tuple(names))
