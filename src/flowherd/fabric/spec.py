"""Fabrics from YAML: a preset name, or a mapping of generator parameters in human units.

The contract (keys of every kind; each kind takes the subset listed in `KIND_KEYS`)::

    kind: leaf-spine        # or fat-tree (with k), rail-optimized, clos3, preset (with name:)
    servers: 16
    gpus_per_server: 1
    gpu: h100               # GPU model name for all servers (or one name per server)
    nic_bandwidth: 400Gbps
    nvlink_bandwidth: 900GB/s   # null: no NVLink
    leaves: 4
    spines: 4
    oversubscription: 1     # downlink : uplink capacity at the leaves
    link_latency: 1us
    nvls: false             # NVSwitch in-switch reduction (NVLS): true, false, or one per server
    # kind: preset takes name, nvls and aggregation_oversubscription (presets with an aggregation
    # tier, flowherd.fabric.presets.AGGREGATION_PRESETS: e.g. meta-24k's 1:7 as 7)
    # kind: alibaba-lingjun is the real host -> ToR -> aggregation mapping of Alibaba's Lingjun
    # cluster (flowherd.fabric.lingjun) with its assumed parameters: gpus_per_server, gpu,
    # nic_bandwidth, nvlink_bandwidth, link_latency, nvls, tor_oversubscription (ToR group
    # downlink : uplink) and aggregation_oversubscription (aggregation : core); no servers key

One NIC per GPU unless ``nics_per_server`` says otherwise. Every error is a `ConfigError` whose
message names the field (``fabric.servers``), the value and what was expected.

>>> f = fabric_from_mapping({"kind": "leaf-spine", "servers": 4, "leaves": 2, "spines": 2})
>>> (f.num_gpus, f.num_switches)
(4, 4)
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flowherd.errors import ConfigError, UnknownNameError
from flowherd.fabric.core import Fabric
from flowherd.fabric.generators.clos import clos3
from flowherd.fabric.generators.fat_tree import fat_tree
from flowherd.fabric.generators.leaf_spine import leaf_spine
from flowherd.fabric.generators.rail import rail_optimized
from flowherd.fabric.presets import preset
from flowherd.units import parse_rate, parse_time

Count = Annotated[int, Field(strict=True, ge=1)]
Ratio = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Quantity = str | float | int

_COMMON = ("kind", "name", "gpus_per_server", "nics_per_server", "gpu", "nic_bandwidth",
           "nvlink_bandwidth", "link_latency", "nvls")
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "leaf-spine": (*_COMMON, "servers", "leaves", "spines", "oversubscription"),
    "fat-tree": (*_COMMON, "k"),
    "rail-optimized": (*_COMMON, "servers", "servers_per_su", "spines", "sus_per_pod", "spines_per_pod",
                       "cores", "leaf_uplinks", "spine_uplinks", "leaf_spine_bandwidth",
                       "spine_core_bandwidth"),
    "clos3": (*_COMMON, "servers", "servers_per_tor", "tors_per_pod", "spines_per_pod", "cores",
              "tor_oversubscription", "spine_oversubscription"),
    "preset": ("kind", "name", "nvls", "aggregation_oversubscription"),
    "alibaba-lingjun": ("kind", "name", "gpus_per_server", "gpu", "nic_bandwidth", "nvlink_bandwidth",
                        "link_latency", "nvls", "tor_oversubscription", "aggregation_oversubscription"),
}
_REQUIRED = {"leaf-spine": ("servers", "leaves", "spines"), "fat-tree": ("k",),
             "rail-optimized": ("servers",), "clos3": ("servers",), "preset": ("name",),
             "alibaba-lingjun": ()}


class FabricSpec(BaseModel):
    """The validated YAML mapping (all kinds' keys; `fabric_from_mapping` checks which apply)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["leaf-spine", "fat-tree", "rail-optimized", "clos3", "preset",
                  "alibaba-lingjun"] = "leaf-spine"
    name: str | None = None
    servers: Count | None = None
    gpus_per_server: Count = 1
    nics_per_server: Count | None = None
    gpu: str | list[str] = "h100"
    nic_bandwidth: Quantity = "400Gbps"
    nvlink_bandwidth: Quantity | None = "900GB/s"
    link_latency: Quantity = "1us"
    nvls: bool | list[bool] | None = None
    leaves: Count | None = None
    spines: Count | None = None
    oversubscription: Ratio = 1.0
    k: Annotated[int, Field(strict=True, ge=2, multiple_of=2)] | None = None
    servers_per_su: Count = 32
    sus_per_pod: Count = 1
    spines_per_pod: Count | None = None
    cores: Count | None = None
    leaf_uplinks: Count | None = None
    spine_uplinks: Count | None = None
    leaf_spine_bandwidth: Quantity | None = None
    spine_core_bandwidth: Quantity | None = None
    servers_per_tor: Count = 2
    tors_per_pod: Count = 192
    tor_oversubscription: Ratio = 1.0
    spine_oversubscription: Ratio = 1.0
    aggregation_oversubscription: Ratio | None = None


def _pydantic_error(err: ValidationError, field: str) -> ConfigError:
    e = err.errors(include_url=False)[0]
    # a union type reports the branch it tried ("servers.int"): keep field names and list indices
    names = [str(p) for p in e["loc"]]
    keep = [n for n in names if n in FabricSpec.model_fields or n.isdigit()] or names
    msg = e["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
    return ConfigError(f"invalid value {e.get('input')!r} ({field}.{'.'.join(keep)}): expected {msg}")


def _check_keys(data: dict[str, Any], field: str) -> str:
    kind = data.get("kind", "leaf-spine")
    if not isinstance(kind, str) or kind not in KIND_KEYS:
        close = difflib.get_close_matches(str(kind), list(KIND_KEYS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown fabric kind {kind!r} ({field}.kind){hint} "
                          f"(expected one of: {', '.join(KIND_KEYS)})")
    allowed = KIND_KEYS[kind]
    for key in data:
        if key in allowed:
            continue
        if key in FabricSpec.model_fields:
            users = [k for k, keys in KIND_KEYS.items() if key in keys]
            raise ConfigError(f"key {key!r} is not used by kind {kind!r} ({field}.{key}); "
                              f"it belongs to kind {', '.join(users)} "
                              f"(expected one of: {', '.join(allowed)})")
        close = difflib.get_close_matches(str(key), list(allowed), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown key {key!r} ({field}.{key}){hint} "
                          f"(expected one of: {', '.join(allowed)})")
    for key in _REQUIRED[kind]:
        if data.get(key) is None:
            raise ConfigError(f"missing key {key!r} ({field}.{key}): kind {kind!r} needs "
                              f"{', '.join(_REQUIRED[kind])}")
    return kind


def fabric_from_mapping(data: dict[str, Any] | str, *, field: str = "fabric") -> Fabric:
    """Build a fabric from a parsed YAML mapping (or a preset name), then check it is connected.

    Args:
        data: The mapping of the module docstring, or a preset name.
        field: Where the mapping sits in its file, for error messages (``"fabric"``,
            ``"scenario.fabric"``).

    Raises:
        ConfigError: Naming the field (``fabric.servers``), the value and what was expected;
            `UnknownNameError` (a `ConfigError`) for an unknown preset.
    """
    if isinstance(data, str):
        data = {"kind": "preset", "name": data}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid value {data!r} ({field}): expected a preset name or a mapping")
    kind = _check_keys(data, field)
    try:
        spec = FabricSpec.model_validate(data)
    except ValidationError as err:
        raise _pydantic_error(err, field) from None
    if kind == "alibaba-lingjun":
        fabric = _lingjun(spec, data, field)
    elif kind == "preset":
        try:
            fabric = preset(str(spec.name), aggregation_oversubscription=spec.aggregation_oversubscription)
        except UnknownNameError:
            raise
        except ConfigError as err:
            raise ConfigError(str(err).replace("(fabric.", f"({field}.")) from None
    else:
        fabric = _build(spec, kind, field)
    if spec.nvls is not None:
        fabric = _with_nvls(fabric, spec.nvls, field)
    try:
        fabric.check_connected()
    except ConfigError as err:
        raise ConfigError(f"{err} ({field})") from None
    return fabric


def _with_nvls(fabric: Fabric, nvls: bool | list[bool], field: str) -> Fabric:
    """`fabric` with the YAML's ``nvls`` flags: one for every server, or one per server.

    NVLS (NVLink SHARP) needs a third-generation NVSwitch (DGX/HGX H100 and later) and NCCL runs
    it only from compute capability 9.0 (src/graph/search.cc, NCCL 2.30.7: no NVLS graph when
    ``ccMin < 90``); a flag set on servers without it is kept but NCCL's model ignores it there.
    Presets set it themselves (`flowherd.fabric.presets.with_nvls`); the key overrides them.
    """
    flags = [bool(nvls)] * fabric.num_servers if isinstance(nvls, bool) else list(nvls)
    if len(flags) != fabric.num_servers:
        raise ConfigError(f"invalid value {nvls!r} ({field}.nvls): expected true, false or one flag "
                          f"per server ({fabric.num_servers}), got {len(flags)}")
    return dataclasses.replace(fabric, server_nvls=tuple(flags))


def _lingjun(spec: FabricSpec, data: dict[str, Any], field: str) -> Fabric:
    """The Lingjun mapping (`flowherd.fabric.lingjun.lingjun_fabric`) with the YAML's parameters;
    keys left out keep that function's defaults (8 H800-class GPUs per host, 400 Gbps, 1:1)."""
    from flowherd.fabric.lingjun import lingjun_fabric  # reads its CSV only when asked

    kw: dict[str, Any] = dict(gpus_per_host=spec.gpus_per_server, link_latency_s=_latency(spec, field),
                              tor_oversubscription=spec.tor_oversubscription,
                              psw_oversubscription=spec.aggregation_oversubscription or 1.0)
    if "nic_bandwidth" in data:
        kw["nic_bandwidth_bytes_per_s"] = _rate(spec.nic_bandwidth, "nic_bandwidth", field)
    if "nvlink_bandwidth" in data:
        kw["nvlink_bandwidth_bytes_per_s"] = _rate(spec.nvlink_bandwidth, "nvlink_bandwidth", field)
    if "gpus_per_server" not in data:
        kw["gpus_per_host"] = 8
    if "gpu" in data:
        if not isinstance(spec.gpu, str):
            raise ConfigError(f"invalid value {spec.gpu!r} ({field}.gpu): expected one GPU model name "
                              "for every host of the Lingjun mapping")
        kw["gpu_type"] = spec.gpu
    if spec.name:
        kw["name"] = spec.name
    try:
        return lingjun_fabric(**kw)
    except ConfigError as err:
        msg = str(err).replace("fabric.psw_oversubscription", "fabric.aggregation_oversubscription")
        msg = msg.replace("fabric.gpus_per_host", "fabric.gpus_per_server")
        raise ConfigError(msg.replace("(fabric.", f"({field}.") if field != "fabric" else msg) from None


def _rate(value: Quantity | None, key: str, field: str) -> float | None:
    return None if value is None else parse_rate(value, field=f"{field}.{key}")


#: Largest link latency a fabric may declare, seconds. A datacenter link's propagation latency is
#: nanoseconds to microseconds (100 m of fibre: 0.5 us; a 100 km metro link: 0.5 ms), and the
#: simulator relies on it: path latencies are told from hop counts by being far below a second
#: (`flowherd.cluster.collective.pair_latency_s`), and NCCL's latency model, the default, holds the
#: paths' latencies in its measured constants, so a value like 1e9 s would change nothing there
#: (the same JCT as 1 us) while breaking the fabric latency model: refused rather than honoured.
MAX_LINK_LATENCY_S = 1e-3


def _latency(spec: FabricSpec, field: str) -> float:
    latency_s = parse_time(spec.link_latency, field=f"{field}.link_latency")
    if latency_s > MAX_LINK_LATENCY_S:
        raise ConfigError(f"link latency must be at most 1 ms (a datacenter link: ns to us), got "
                          f"{spec.link_latency!r} ({field}.link_latency)")
    return latency_s


def _build(spec: FabricSpec, kind: str, field: str) -> Fabric:
    common: dict[str, Any] = dict(
        gpus_per_server=spec.gpus_per_server,
        nics_per_server=spec.nics_per_server,
        nic_bandwidth_bytes_per_s=_rate(spec.nic_bandwidth, "nic_bandwidth", field),
        nvlink_bandwidth_bytes_per_s=_rate(spec.nvlink_bandwidth, "nvlink_bandwidth", field),
        link_latency_s=_latency(spec, field),
        gpu_type=spec.gpu,
        name=spec.name,
    )
    try:
        if kind == "leaf-spine":
            return leaf_spine(servers=spec.servers, leaves=spec.leaves, spines=spec.spines,
                              oversubscription=spec.oversubscription, **common)
        if kind == "fat-tree":
            return fat_tree(k=spec.k, **common)
        if kind == "clos3":
            return clos3(servers=spec.servers, servers_per_tor=spec.servers_per_tor,
                         tors_per_pod=spec.tors_per_pod, spines_per_pod=spec.spines_per_pod or 16,
                         cores=spec.cores or 64, tor_oversubscription=spec.tor_oversubscription,
                         spine_oversubscription=spec.spine_oversubscription, **common)
        return rail_optimized(
            servers=spec.servers, servers_per_su=spec.servers_per_su, spines=spec.spines,
            sus_per_pod=spec.sus_per_pod, spines_per_pod=spec.spines_per_pod, cores=spec.cores,
            leaf_uplinks=spec.leaf_uplinks, spine_uplinks=spec.spine_uplinks,
            leaf_spine_bandwidth_bytes_per_s=_rate(spec.leaf_spine_bandwidth, "leaf_spine_bandwidth", field),
            spine_core_bandwidth_bytes_per_s=_rate(spec.spine_core_bandwidth, "spine_core_bandwidth", field),
            **common)
    except ConfigError as err:
        # generators name fields "fabric.x"; re-anchor them under the caller's field
        msg = str(err)
        if field != "fabric":
            msg = msg.replace("(fabric.", f"({field}.")
        raise ConfigError(msg) from None


def load_fabric(name_or_path: str | Path) -> Fabric:
    """A preset name (``"dgx-superpod-h100-2su"``) or the path of a YAML file, as a `Fabric`.

    The file holds the fabric mapping itself, or a mapping with a ``fabric:`` key holding it.
    """
    text = str(name_or_path)
    path = Path(text)
    looks_like_file = path.suffix.lower() in (".yaml", ".yml") or "/" in text or path.is_file()
    if not looks_like_file:
        return fabric_from_mapping({"kind": "preset", "name": text})
    if not path.is_file():
        raise ConfigError(f"fabric file {text!r} does not exist (fabric): expected a preset name or "
                          "the path of a YAML file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else "syntax error"
        raise ConfigError(f"fabric file {text!r} is not valid YAML: {first} (fabric)") from None
    field = "fabric"
    if isinstance(data, dict) and set(data) == {"fabric"}:
        data = data["fabric"]
    return fabric_from_mapping(data, field=field)
