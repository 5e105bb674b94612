"""Service-level objectives of an inference service: time to first token, time per output token.

A service meets its SLO, in MLPerf Inference's rule for its LLM server scenarios (``loadgen/
mlperf.conf`` of mlcommons/inference: ``*.Server.target_latency_percentile = 99`` with a
``ttft_latency`` and a ``tpot_latency`` per benchmark), when the 99th percentile of its requests'
time to first token (TTFT) is within ``ttft_s`` and that of their time per output token (TPOT)
within ``tpot_s``. Its *attainment* is the share of its requests that meet them (DistServe,
Zhong et al. OSDI'24, section 2.2: "SLO attainment").

MLPerf's own targets (milliseconds, TTFT / TPOT), for reference: Llama 2 70B server 2,000 / 200,
interactive 450 / 40; Llama 3.1 8B server 2,000 / 100, interactive 500 / 30; Llama 3.1 405B server
6,000 / 175, interactive 4,500 / 80; Mixtral 8x7B 2,000 / 200; DeepSeek-R1 2,000 / 80, interactive
1,500 / 15.

>>> ServiceSlo(ttft_s=0.45, tpot_s=0.04).ttft_s
0.45
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowherd.errors import ConfigError, check_fields
from flowherd.units import parse_time

__all__ = ["PERCENTILE", "ServiceSlo", "slo_from_mapping"]

#: The percentile of the requests' latencies an SLO bounds (MLPerf's server scenarios).
PERCENTILE = 99.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSlo:
    """An inference service's latency objectives.

    Attributes:
        ttft_s: Time to first token, seconds (None: no objective).
        tpot_s: Time per output token after the first, seconds (None: no objective).
    """

    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self) -> None:
        for f in ("ttft_s", "tpot_s"):
            v = getattr(self, f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                                  or not math.isfinite(v) or v <= 0):
                raise ConfigError(f"slo {f} must be a positive time, got {v!r} (slo.{f[:-2]})")


def slo_from_mapping(spec: Mapping[str, Any] | None, field: str) -> ServiceSlo | None:
    """A `ServiceSlo` of a scenario's ``slo: {ttft: 450ms, tpot: 40ms}`` (times with units or
    seconds); None for None.

    >>> slo_from_mapping({"ttft": "450ms", "tpot": 0.04}, "slo")
    ServiceSlo(ttft_s=0.45, tpot_s=0.04)

    Raises:
        ConfigError: not a mapping, an unknown key (with the closest one), a bad time; naming
            ``field``.
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{field} must be a mapping of ttft and tpot, got {type(spec).__name__} ({field})")
    check_fields(field, spec, ["ttft", "tpot"])
    out = {f"{k}_s": parse_time(v, field=f"{field}.{k}") for k, v in spec.items()}
    try:
        return ServiceSlo(**out)
    except ConfigError as err:
        raise ConfigError(f"{err} [in {field}]") from None
