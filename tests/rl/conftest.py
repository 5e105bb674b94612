"""A tiny scenario for the RL tests: 8 GPUs, an oversubscribed leaf-spine, a few small DP jobs with
Poisson arrivals and background traffic; an episode simulates in about 0.05 s with 50-90 agent
points, and the controller's choices change the JCTs (none 0.158 s, flowherd 0.103 s at seed 3)."""

import pytest
import yaml

MODEL = {"name": "tiny-lm", "layers": 4, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 32000}


def _job(name, gpus, dp, iterations, submit=0.0):
    return {"name": name, "model": MODEL, "gpus": gpus, "parallelism": {"tp": 1, "dp": dp}, "seq_len": 1024,
            "global_batch": 2 * dp, "iterations": iterations, "submit": submit}


TINY = {
    "name": "rl-tiny", "seed": 3,
    "fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 2, "gpu": "h100",
               "nic_bandwidth": "100Gbps", "leaves": 2, "spines": 1, "oversubscription": 2,
               "link_latency": "1us"},
    "workload": {"jobs": [_job("a", 4, 4, 3), _job("b", 2, 2, 4, 0.01)],
                 "arrivals": [{"process": "poisson", "rate": "20/s", "until": "0.2s", "prefix": "arr",
                               "mix": [_job("s", 2, 2, 3)]}],
                 "background": {"load": 0.2, "max_flows_per_s": 50}},
    "placement": {"method": "first-fit"},
    "simulation": {"horizon": "1s"},
}


@pytest.fixture
def tiny():
    """The tiny scenario mapping (a fresh copy)."""
    return yaml.safe_load(yaml.safe_dump(TINY))


@pytest.fixture
def tiny_yaml(tmp_path):
    """The tiny scenario as a YAML file."""
    path = tmp_path / "rl_tiny.yaml"
    path.write_text(yaml.safe_dump(TINY, sort_keys=False))
    return path
