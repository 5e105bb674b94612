"""The advantage estimate of benchmarks/rl_signal.py: generalized advantage estimation (Schulman et
al., ICLR 2016, "High-dimensional continuous control using generalized advantage estimation", Eq. 16)
at its two ends, lambda 0 (the one-step TD error) and lambda 1 (the return minus the value)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "benchmarks"))
_SPEC = importlib.util.spec_from_file_location("rl_signal_benchmark", _ROOT / "benchmarks" / "rl_signal.py")
signal = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(signal)


def test_gae_is_the_td_error_at_lambda_0_and_the_return_minus_the_value_at_lambda_1():
    rng = np.random.default_rng(0)
    r, v, g = rng.normal(size=7), rng.normal(size=7), 0.9
    td = r + g * np.append(v[1:], 0.0) - v  # the episode ends after the last step: no bootstrap
    assert signal._gae(v, r, g, 0.0) == pytest.approx(td)
    ret = np.array([sum(g ** k * r[t + k] for k in range(7 - t)) for t in range(7)])
    assert signal._gae(v, r, g, 1.0) == pytest.approx(ret - v)
