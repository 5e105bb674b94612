"""Run metrics: Jain's fairness index over tenants (Jain, Chiu and Hawe, DEC-TR-301, 1984)."""

import pytest

from flowherd.experiments.metrics import jain_index, tenant_metrics


def test_jain_index_closed_forms():
    # equal shares: 1; one of n gets everything: 1/n; (1, 1/2): (3/2)^2 / (2 (1 + 1/4)) = 0.9
    assert jain_index([3.0, 3.0, 3.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([1.0, 0.5]) == pytest.approx(0.9)
    assert jain_index([]) is None
    assert jain_index([0.0, 0.0]) is None


def _job(tenant: str, slowdown: float) -> dict:
    return {"tenant": tenant, "finished": True, "jct_s": 10.0, "queue_s": 0.0, "slowdown": slowdown,
            "num_gpus": 8, "start_s": 0.0, "finish_s": 10.0}


def test_tenant_shares_are_inverse_mean_slowdowns():
    # tenant a slowed 1x and 3x (mean 2), tenant b 1x: shares 1/2 and 1, index 0.9
    ts = tenant_metrics([_job("a", 1.0), _job("a", 3.0), _job("b", 1.0)])
    shares = [1.0 / t["mean_slowdown"] for t in ts]
    assert shares == [0.5, 1.0]
    assert jain_index(shares) == pytest.approx(0.9)
