"""Online controllers: the baselines of the literature and flowherd's structured policies.

The protocol and the values they exchange with the simulator (`Controller`, `DecisionPoint`,
`NetworkView`, `Decision`, `validate`) live in `flowherd.cluster.control_api`, since the simulator
must not import this package. `CONTROLLERS` maps the names used in scenarios and on the command
line to factories; `make_controller` builds one, and a path to a trained model (``.zip``, saved by
`flowherd.rl.train`) is loaded by `flowherd.control.model.load_controller` (torch and
stable-baselines3 imported then only).

>>> c = make_controller("varys")
>>> c.name
'varys'
"""

from __future__ import annotations

from collections.abc import Callable

from flowherd.cluster.control_api import Controller, Decision, DecisionPoint, NetworkView, validate
from flowherd.control.baselines import (
    CassiniController,
    FunctionController,
    decide_adaptive,
    decide_crux,
    decide_none,
    decide_sincronia,
    decide_varys,
)
from flowherd.control.gate import BurstGate, GateParams
from flowherd.control.herd import HerdController, HerdParams
from flowherd.control.kvguard import KvGuardController, KvGuardParams
from flowherd.control.mltcp import MltcpController, MltcpParams
from flowherd.control.periodic import InterleaveController, InterleaveParams
from flowherd.control.threshold import ThresholdController, ThresholdParams, tune
from flowherd.errors import ConfigError
from flowherd.registry import Registry

__all__ = ["CONTROLLERS", "FLOWHERD_POLICIES", "LITERATURE_BASELINES", "BurstGate", "Controller",
           "Decision", "DecisionPoint", "GateParams", "HerdController", "HerdParams", "InterleaveController",
           "InterleaveParams", "KvGuardController", "KvGuardParams",
           "NetworkView", "ThresholdController",
           "ThresholdParams", "make_controller", "tune", "validate"]


def _pure(name: str, fn) -> Callable[[], Controller]:
    def factory() -> Controller:
        return FunctionController(name, fn)

    factory.__doc__ = fn.__doc__
    return factory


def _threshold(theta: float = 0.5, max_delay_fraction: float = 0.5) -> Controller:
    return ThresholdController(ThresholdParams(theta=theta, max_delay_fraction=max_delay_fraction))


def _mltcp(**params) -> Controller:
    return MltcpController(MltcpParams(**params))


def _interleave(**params) -> Controller:
    return InterleaveController(InterleaveParams(**params))


def _gate(**params) -> Controller:
    return BurstGate(GateParams(**params))


def _herd(**params) -> Controller:
    return HerdController(HerdParams(**params))


def _kv_guard(**params) -> Controller:
    return KvGuardController(KvGuardParams(**params))


CONTROLLERS: Registry[Callable[..., Controller]] = Registry("controller", {
    "none": _pure("none", decide_none),
    "adaptive": _pure("adaptive", decide_adaptive),
    "cassini": CassiniController,
    "crux": _pure("crux", decide_crux),
    "sincronia": _pure("sincronia", decide_sincronia),
    "varys": _pure("varys", decide_varys),
    "mltcp": _mltcp,
    "threshold": _threshold,
    "interleave": _interleave,
    "gate": _gate,
    "flowherd": _herd,
    "kv-guard": _kv_guard,
})
LITERATURE_BASELINES = ("adaptive", "cassini", "crux", "sincronia", "varys", "mltcp")
FLOWHERD_POLICIES = ("flowherd", "gate", "interleave", "threshold")  # best first on ties


def make_controller(spec: str | Controller, **params) -> Controller:
    """A controller from a registry name (with its parameters), a trained model's path (``.zip``;
    its parameters are `HerdParams` fields) or an object satisfying `Controller`.

    Raises:
        UnknownNameError: an unknown name (with the closest one).
        ConfigError: parameters the controller does not take, or an object that is not a
            controller.
    """
    if isinstance(spec, str) and spec.endswith(".zip"):
        from flowherd.control.model import load_controller

        return load_controller(spec, **params)
    if isinstance(spec, str):
        factory = CONTROLLERS[spec]
        try:
            return factory(**params)
        except TypeError as e:
            raise ConfigError(f"controller {spec!r} does not take parameters {sorted(params)}: {e} "
                              "(controller)") from None
    if params:
        raise ConfigError(f"parameters {sorted(params)} given with a controller object; expected a name "
                          "(controller)")
    if not isinstance(spec, Controller):
        raise ConfigError(f"controller must be a name ({', '.join(CONTROLLERS)}) or an object with name, "
                          f"reset and decide, got {type(spec).__name__} (controller)")
    return spec
