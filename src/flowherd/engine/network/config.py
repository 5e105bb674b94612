"""What a fabric's switches and transport are: the ``network:`` section of a scenario.

``model: ideal`` is the engine as it always was (fluid max-min, nothing queues, nothing is
lost). ``roce`` is a lossless RoCEv2 fabric (PFC on the lossless classes, DCQCN-like rate
control at the NICs); ``tcp`` a lossy one (ECN marking, DCTCP-like window control, drops and
retransmission timeouts). The mechanisms are in `flowherd.engine.network.fluid` and
`flowherd.engine.network.model`; this module holds only the numbers and the switch presets.

A mapping, a preset name, or a preset with overrides::

    network: roce                                      # the default switch of that model
    network: {model: tcp, switch: tomahawk2, ecn_k: 100KB}
    network: {model: roce, port_buffer: 2MB, pfc_xoff: 400KB, pfc_xon: 300KB,
              queues: 8, lossless: [0, 1, 2], default_queue: 2}
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowherd.errors import ConfigError, check_fields
from flowherd.registry import Registry
from flowherd.units import KB, MB, ms, parse_size, parse_time, us

#: Engine priority of a marked class 0 served above the background (class ``p`` is this plus
#: ``p``; unmarked traffic is at 0): `flowherd.cluster.control_api.ControlAPI.engine_priority`, and
#: what `NetworkConfig.queue_of` maps onto a port's queues (here, not in
#: `flowherd.cluster.control_types`, which re-exports it: an ideal run imports no controller types).
MARKED_PRIORITY_BASE = -(1 << 20)

__all__ = ["MODELS", "SWITCHES", "NetworkConfig", "SwitchPreset", "load_network",
           "network_from_mapping"]

MODELS = ("ideal", "roce", "tcp")


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchPreset:
    """A switch ASIC's buffer as its vendor (or a cited survey) gives it.

    The per-port buffer a congested port can take from a shared pool follows the dynamic
    threshold rule of Choudhury and Hahne (IEEE/ACM ToN 6(2), 1998), which Broadcom and NVIDIA
    shared-buffer switches implement: one congested queue gets ``alpha / (1 + alpha)`` of the
    free pool. ``port_buffer_bytes`` is that share of ``shared_buffer_bytes``.
    """

    name: str
    shared_buffer_bytes: float
    ports: int
    port_gbps: float
    alpha: float
    deep: bool
    source: str

    @property
    def port_buffer_bytes(self) -> float:
        return self.shared_buffer_bytes * self.alpha / (1.0 + self.alpha)


_FWD = "https://port-buffers.forwardingplane.net/concepts/"
#: Switch presets. Buffers: on-chip shared SRAM (and HBM where the chip has it).
SWITCHES: Registry[SwitchPreset] = Registry("switch preset", {
    p.name: p for p in (
        SwitchPreset(name="tomahawk2", shared_buffer_bytes=42 * MB, ports=64, port_gbps=100,
                     alpha=0.125, deep=False,
                     source=f"Broadcom BCM56970, 6.4 Tb/s, 42 MB shared on-chip ({_FWD}broadcom-tomahawk2/)"),
        SwitchPreset(name="spectrum2", shared_buffer_bytes=42 * MB, ports=16, port_gbps=400,
                     alpha=0.125, deep=False,
                     source="NVIDIA (Mellanox) Spectrum-2, 6.4 Tb/s, 42 MB fully shared buffer "
                            "(Mellanox announcement 2017-07-06)"),
        SwitchPreset(name="spectrum3", shared_buffer_bytes=64 * MB, ports=32, port_gbps=400,
                     alpha=0.125, deep=False,
                     source="NVIDIA Spectrum-3 (SN4000), 12.8 Tb/s, 64 MB shared packet buffer"),
        SwitchPreset(name="jericho3", shared_buffer_bytes=32e9, ports=18, port_gbps=800,
                     alpha=0.125, deep=True,
                     source=f"Broadcom BCM88830 (Jericho 3), 3.2 Tb/s per NPU, ~48 MB on-chip plus up "
                            f"to 32 GB HBM3, VOQ ({_FWD}broadcom-jericho3)"),
        # the small per-port buffers of the validation fabrics (validation/README.md)
        SwitchPreset(name="shallow", shared_buffer_bytes=2 * 300 * KB, ports=1, port_gbps=100,
                     alpha=1.0, deep=False,
                     source="synthetic: 300 KB per port (a 1.6 MB/Tbps-class ASIC port, as the "
                            "ns-3 validation cases)"),
        SwitchPreset(name="deep", shared_buffer_bytes=2 * 20 * MB, ports=1, port_gbps=100,
                     alpha=1.0, deep=True,
                     source="synthetic: 20 MB per port (deep-buffer class, as the ns-3 validation "
                            "cases)"),
    )})


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkConfig:
    """The transport and switch-port parameters of one fabric. Bytes, seconds inside.

    Attributes:
        model: "ideal", "roce" or "tcp".
        switch: The preset the buffer came from (for the record).
        port_buffer_bytes: What one congested egress port can queue before it drops (lossy)
            or must pause (lossless, then ``pfc_xoff_bytes`` applies first).
        ecn_kmin_bytes, ecn_kmax_bytes, ecn_pmax: RED/ECN marking ramp of a port: no mark below
            kmin, probability rising linearly to pmax at kmax, every packet above. DCTCP uses
            one threshold K (kmin = kmax, pmax = 1; Alizadeh et al., SIGCOMM 2010 Sec. 3.1).
        pfc_xoff_bytes, pfc_xon_bytes: PFC pause / resume thresholds of a lossless queue.
        queues: Priority queues per port (8 on every Ethernet switch of the presets: IEEE
            802.1Q's eight traffic classes), served in strict priority, queue 0 first (numbered
            here by priority, not by the switch's queue ids).
        lossless: Queue indices that are lossless (PFC is per priority, IEEE 802.1Qbb); the
            others drop. Default on ``roce``: the default queue and the two above it (RDMA's
            class and two for a controller's marked classes; SONiC's default buffer profiles
            make two priorities lossless, 3 and 4, and PFC may be enabled on any of the eight).
        default_queue: The queue of unmarked traffic (engine priority 0: background flows and
            jobs a controller gave no class). A controller's classes above the background take
            the queues above it, class ``c`` queue ``min(c, default_queue - 1)``; classes below
            the background (engine priorities 1, 2, ...) the queues below it, the last shared
            (`queue_of`). Default: 2 on ``roce`` (two lossless classes above RDMA's), 4 on
            ``tcp`` (four above, three below).
        payload_bytes, overhead_bytes: Payload and header bytes of a full packet on the wire
            (wire efficiency ``payload / (payload + overhead)``).
        init_cwnd_packets: TCP initial window (RFC 6928: 10).
        min_rto_s: TCP minimum retransmission timeout.
        setup_rtts: Round trips before a flow's first byte (1: a TCP handshake per flow, as
            ns-3's BulkSend; 0: long-lived connections, as NCCL's).
        dctcp_g: DCTCP's EWMA gain (1/16, SIGCOMM 2010).
        dctcp_alpha_init: DCTCP's ``alpha`` before its first estimate (1: Linux's
            ``dctcp_alpha_on_init`` 1024/1024 and ns-3's ``DctcpAlphaOnInit``).
        slow_start_growth: Window growth per RTT in slow start: 2 with byte counting (RFC 3465,
            Linux), 1.5 with one MSS per ACK and an ACK every 2 segments (ns-3's NewReno).
        dcqcn_*: DCQCN's constants (Zhu et al., SIGCOMM 2015, Table 1 and Sec. 5): rate-increase
            timer and byte counter, fast-recovery steps, additive increase, alpha gain, CNP
            interval and alpha-update interval.
        rwnd_bytes: TCP receive window (``tcp`` only): a flow never has more in flight, and a
            flow bound by nothing but its sender's NIC holds what its window has beyond the
            bandwidth-delay product in that NIC's queue, where the ACKs of the flows into the
            host wait (`flowherd.engine.network.ack_path`). 0 (the default): no receive-window
            limit is modelled and the host queue is not (Linux autotunes the window up to
            ``tcp_rmem``'s 6 MB and its TCP small queues bound what a socket queues at the
            NIC); the ns-3 validation sets ns-3's 1.5 BDP.
        ramp_gain: Fitted scale of the convergence loss (`fluid.ramp_loss_s`); 1 is the fluid
            model's value.
    """

    model: str = "ideal"
    switch: str = ""
    port_buffer_bytes: float = 300 * KB
    ecn_kmin_bytes: float = 100 * KB
    ecn_kmax_bytes: float = 100 * KB
    ecn_pmax: float = 1.0
    pfc_xoff_bytes: float = 200 * KB
    pfc_xon_bytes: float = 150 * KB
    queues: int = 8
    lossless: tuple[int, ...] = (0, 1, 2)
    default_queue: int = 2
    payload_bytes: float = 1448.0
    overhead_bytes: float = 90.0
    init_cwnd_packets: int = 10
    min_rto_s: float = 5 * ms
    setup_rtts: int = 0
    dctcp_g: float = 1 / 16
    dctcp_alpha_init: float = 1.0
    slow_start_growth: float = 2.0
    dcqcn_timer_s: float = 55 * us
    dcqcn_byte_counter_bytes: float = 10 * MB
    dcqcn_fast_recovery_steps: int = 5
    dcqcn_rai_bytes_per_s: float = 40e6 / 8
    dcqcn_g: float = 1 / 256
    dcqcn_cnp_interval_s: float = 50 * us
    dcqcn_alpha_interval_s: float = 55 * us
    rwnd_bytes: float = 0.0
    ramp_gain: float = 1.0

    @property
    def ideal(self) -> bool:
        return self.model == "ideal"

    @property
    def wire_efficiency(self) -> float:
        """Payload bytes per byte on the wire."""
        return self.payload_bytes / (self.payload_bytes + self.overhead_bytes)

    def queue_of(self, priority: int) -> int:
        """The port queue an engine priority lands in, as a switch's DSCP-to-traffic-class map
        puts a controller's marks: unmarked traffic (priority 0) in `default_queue`; a marked
        class ``c`` above the background (engine priority ``MARKED_PRIORITY_BASE + c``, any
        negative priority) in queue ``min(c, default_queue - 1)``, so the first classes get
        queues of their own and the rest share the lowest one above the default; a class
        ``p`` below the background (priority ``p`` > 0) in ``min(default_queue + p, queues -
        1)``. The map keeps the engine's order (a lower priority never lands in a later queue);
        classes only merge where the port runs out of queues.

        >>> cfg = NetworkConfig(model="roce")  # 8 queues, default 2
        >>> [cfg.queue_of(MARKED_PRIORITY_BASE + c) for c in range(4)], cfg.queue_of(0), cfg.queue_of(9)
        ([0, 1, 1, 1], 2, 7)
        """
        p = int(priority)
        d = self.default_queue
        if p == 0:
            return d
        if p < 0:
            return min(max(p - MARKED_PRIORITY_BASE, 0), d - 1) if d > 0 else d
        return min(d + p, self.queues - 1)

    def is_lossless(self, priority: int) -> bool:
        """Whether an engine priority is carried losslessly (`queue_is_lossless` of its queue)."""
        return self.queue_is_lossless(self.queue_of(priority))

    def queue_is_lossless(self, queue: int) -> bool:
        """Whether a port queue is lossless: on ``roce``, if it is one of `lossless` or the port
        has no lossless queue configured at all (then PFC covers every class); never on ``tcp``."""
        if self.model != "roce":
            return False
        return queue in self.lossless or not self.lossless


# per model: the defaults that differ from the dataclass's (DCTCP K and DCQCN's ramp)
_MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "ideal": {},
    # DCTCP: K = 65 packets at 10 Gb/s (SIGCOMM 2010 Sec. 3.1); at 100 Gb/s operators set
    # about C * RTT / 7 or more (SIGMETRICS 2011 Sec. 4: K > C * RTT / 7 keeps full throughput)
    "tcp": dict(switch="tomahawk2", ecn_kmin_bytes=100 * KB, ecn_kmax_bytes=100 * KB, ecn_pmax=1.0,
                payload_bytes=1448.0, overhead_bytes=90.0, setup_rtts=0, default_queue=4, lossless=()),
    # DCQCN: Kmin 5 KB, Kmax 200 KB, Pmax 1% (SIGCOMM 2015 Sec. 5); RoCEv2 MTU 4096 with
    # Ethernet (14 + 4 FCS) + IP 20 + UDP 8 + BTH 12 + ICRC 4 + preamble/IFG 20 = 82 B
    "roce": dict(switch="spectrum3", ecn_kmin_bytes=5 * KB, ecn_kmax_bytes=200 * KB, ecn_pmax=0.01,
                 payload_bytes=4096.0, overhead_bytes=82.0, setup_rtts=0),
}

_SIZE_FIELDS = {"port_buffer": "port_buffer_bytes", "ecn_kmin": "ecn_kmin_bytes",
                "ecn_kmax": "ecn_kmax_bytes", "ecn_k": None, "pfc_xoff": "pfc_xoff_bytes",
                "pfc_xon": "pfc_xon_bytes", "payload": "payload_bytes", "overhead": "overhead_bytes",
                "dcqcn_byte_counter": "dcqcn_byte_counter_bytes", "rwnd": "rwnd_bytes"}
_TIME_FIELDS = {"min_rto": "min_rto_s", "dcqcn_timer": "dcqcn_timer_s",
                "dcqcn_cnp_interval": "dcqcn_cnp_interval_s",
                "dcqcn_alpha_interval": "dcqcn_alpha_interval_s"}
_NUMBER_FIELDS = {"ecn_pmax": float, "queues": int, "default_queue": int, "init_cwnd_packets": int,
                  "setup_rtts": int,
                  "dctcp_g": float, "dctcp_alpha_init": float, "slow_start_growth": float,
                  "dcqcn_fast_recovery_steps": int, "dcqcn_g": float,
                  "ramp_gain": float}
_KNOWN = ["model", "switch", "lossless", "dcqcn_rai", *_SIZE_FIELDS, *_TIME_FIELDS, *_NUMBER_FIELDS]


def network_from_mapping(data: Mapping[str, Any] | str | None, *, field: str = "network") -> NetworkConfig:
    """A `NetworkConfig` from a scenario's ``network:`` value (a mapping, a model name, None).

    Raises:
        ConfigError: an unknown key, model or switch, or a value out of range (named by field).
    """
    if data is None:
        return NetworkConfig()
    if isinstance(data, str):
        data = {"model": data}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{field} must be a mapping or a model name ({', '.join(MODELS)}), got "
                          f"{type(data).__name__} ({field})")
    check_fields(field, data, _KNOWN)
    model = str(data.get("model", "ideal"))
    if model not in MODELS:
        close = difflib.get_close_matches(model, MODELS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown network model {model!r} ({field}.model){hint}; expected one of: "
                          f"{', '.join(MODELS)}")
    vals: dict[str, Any] = dict(_MODEL_DEFAULTS[model], model=model)
    switch = data.get("switch", vals.get("switch"))
    if switch:
        try:
            sw = SWITCHES[str(switch)]
        except ConfigError as err:
            raise ConfigError(f"{err} ({field}.switch)") from None
        vals["switch"] = sw.name
        vals["port_buffer_bytes"] = sw.port_buffer_bytes
    for key, name in _SIZE_FIELDS.items():
        if key in data:
            v = float(parse_size(data[key], field=f"{field}.{key}"))
            if name is None:  # ecn_k: DCTCP's single threshold
                vals["ecn_kmin_bytes"] = vals["ecn_kmax_bytes"] = v
            else:
                vals[name] = v
    # PFC, unless given: pause at a quarter of what the port may take, resume two 4 KiB packets
    # lower (the headroom for one RTT of in-flight bytes stays above Xoff; IEEE 802.1Qbb)
    if "pfc_xoff" not in data:
        vals["pfc_xoff_bytes"] = vals.get("port_buffer_bytes", NetworkConfig().port_buffer_bytes) / 4
    if "pfc_xon" not in data:
        vals["pfc_xon_bytes"] = max(vals["pfc_xoff_bytes"] - 2 * 4096, 0.0)
    for key, name in _TIME_FIELDS.items():
        if key in data:
            vals[name] = parse_time(data[key], field=f"{field}.{key}")
    for key, kind in _NUMBER_FIELDS.items():
        if key in data:
            try:
                vals[key] = kind(data[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{field}.{key} must be a number, got {data[key]!r} "
                                  f"({field}.{key})") from None
    if "dcqcn_rai" in data:
        from flowherd.units import parse_rate

        vals["dcqcn_rai_bytes_per_s"] = parse_rate(data["dcqcn_rai"], field=f"{field}.dcqcn_rai")
    if "lossless" in data:
        raw = data["lossless"]
        raw = [raw] if isinstance(raw, int) else raw
        try:
            vals["lossless"] = tuple(sorted({int(q) for q in raw}))
        except (TypeError, ValueError):
            raise ConfigError(f"{field}.lossless must be a list of queue indices, got {raw!r} "
                              f"({field}.lossless)") from None
    # unless given, the default queue follows a smaller port, and on roce the default queue and
    # the two above it are the lossless ones
    base = NetworkConfig()
    queues = vals.get("queues", base.queues)
    if "default_queue" not in data:
        vals["default_queue"] = min(vals.get("default_queue", base.default_queue), max(queues - 1, 0))
    if "lossless" not in data and model == "roce":
        d = vals["default_queue"]
        vals["lossless"] = tuple(range(max(d - 2, 0), d + 1))
    cfg = NetworkConfig(**vals)
    _check(cfg, field)
    return cfg


def _check(c: NetworkConfig, field: str) -> None:
    def bad(name: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(f"{field}.{name} must be {expected}, got {value!r} ({field}.{name})")

    if c.queues < 1 or c.queues > 64:
        raise bad("queues", c.queues, "in 1..64")
    if not 0 <= c.default_queue < c.queues:
        raise bad("default_queue", c.default_queue, f"a queue index in 0..{c.queues - 1}")
    if any(q < 0 or q >= c.queues for q in c.lossless):
        raise bad("lossless", list(c.lossless), f"queue indices in 0..{c.queues - 1}")
    for name in ("port_buffer_bytes", "payload_bytes"):
        if not getattr(c, name) > 0:
            raise bad(name.removesuffix("_bytes"), getattr(c, name), "positive")
    if c.ecn_kmax_bytes < c.ecn_kmin_bytes:
        raise bad("ecn_kmax", c.ecn_kmax_bytes, f">= ecn_kmin ({c.ecn_kmin_bytes:g} B)")
    if not 0 < c.ecn_pmax <= 1:
        raise bad("ecn_pmax", c.ecn_pmax, "in (0, 1]")
    if c.pfc_xon_bytes > c.pfc_xoff_bytes:
        raise bad("pfc_xon", c.pfc_xon_bytes, f"<= pfc_xoff ({c.pfc_xoff_bytes:g} B)")
    if c.pfc_xoff_bytes > c.port_buffer_bytes:
        raise bad("pfc_xoff", c.pfc_xoff_bytes, f"<= port_buffer ({c.port_buffer_bytes:g} B)")
    if c.init_cwnd_packets < 1:
        raise bad("init_cwnd_packets", c.init_cwnd_packets, ">= 1")
    if c.setup_rtts < 0:
        raise bad("setup_rtts", c.setup_rtts, ">= 0")
    if not c.min_rto_s > 0:
        raise bad("min_rto", c.min_rto_s, "positive")
    if not 1.0 < c.slow_start_growth <= 2.0:
        raise bad("slow_start_growth", c.slow_start_growth, "in (1, 2]")
    if not 0.0 <= c.dctcp_alpha_init <= 1.0:
        raise bad("dctcp_alpha_init", c.dctcp_alpha_init, "in [0, 1]")
    if not c.rwnd_bytes >= 0:
        raise bad("rwnd", c.rwnd_bytes, ">= 0 (0: no receive-window limit)")
    if c.rwnd_bytes and c.model != "tcp":
        raise bad("rwnd", c.rwnd_bytes, "0 unless model is tcp (RoCE has no window)")
    if not c.ramp_gain >= 0:
        raise bad("ramp_gain", c.ramp_gain, ">= 0")


def load_network(name_or_path: str | Path | None) -> NetworkConfig:
    """``--network FILE|NAME``: a model name (``ideal``, ``roce``, ``tcp``), a switch preset
    (its default model: ``roce`` for shallow-buffer GPU fabrics, ``tcp`` for deep ones), or a
    YAML file holding the mapping (or a mapping with a ``network:`` key)."""
    if name_or_path is None:
        return NetworkConfig()
    text = str(name_or_path)
    if text in MODELS:
        return network_from_mapping({"model": text}, field="--network")
    if text in SWITCHES:
        model = "tcp" if SWITCHES[text].deep else "roce"
        return network_from_mapping({"model": model, "switch": text}, field="--network")
    path = Path(text)
    if not path.is_file():
        close = difflib.get_close_matches(text, [*MODELS, *SWITCHES], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"no network model, switch preset or file {text!r} (--network){hint}; "
                          f"expected one of {', '.join([*MODELS, *SWITCHES])} or a YAML file")
    import yaml  # only for a file: a preset name needs none (0.03 s of a small collective's start)

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"network file {text!r} is not valid YAML: {str(err).splitlines()[0]} "
                          "(--network)") from None
    if isinstance(data, dict) and set(data) == {"network"}:
        data = data["network"]
    return network_from_mapping(data, field="network")


def replace(cfg: NetworkConfig, **changes: Any) -> NetworkConfig:
    """A copy with ``changes`` (checked like a parsed mapping)."""
    out = dataclasses.replace(cfg, **changes)
    _check(out, "network")
    return out
