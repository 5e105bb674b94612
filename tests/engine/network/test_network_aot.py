"""The congestion model's kernels compiled ahead of time (aot.EXPORTS): a roce and a tcp run take
the compiled path for every call, import no numba, and give numba JIT's numbers bit for bit.

Like tests/test_startup_aot.py it needs the extension built from the current sources (`make
aot`); without it the test skips, unless FLOWHERD_REQUIRE_AOT=1, where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowherd.engine import aot

ROOT = Path(__file__).resolve().parents[3]

# incasts with pauses and a PFC-bound port (roce), drops and timeouts (tcp), marked classes
_SCRIPT = r"""
import hashlib, json, sys
import numpy as np
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.engine import aot
from flowherd.cluster.control_types import MARKED_PRIORITY_BASE
from flowherd.engine.core import Engine
from flowherd.engine.network import network_from_mapping

fab = leaf_spine(servers=16, gpus_per_server=1, leaves=4, spines=2, nic_bandwidth_bytes_per_s=12.5e9,
                 nvlink_bandwidth_bytes_per_s=None, oversubscription=2.0, link_latency_s=1e-6)
out = {}
for model, extra in (("roce", {"pfc_xoff": "60KB", "pfc_xon": "40KB", "port_buffer": "400KB"}),
                     ("tcp", {"port_buffer": "20KB", "ecn_k": "10KB", "min_rto": "1ms"})):
    rng = np.random.default_rng(5)
    net = network_from_mapping({"model": model, **extra})
    eng = Engine(fab, make_router("ecmp", fab, seed=1), network=net)
    ids = []
    for burst in range(8):
        t = float(rng.uniform(0, 3e-4)) if burst else 0.0
        dst = int(rng.integers(0, 16))
        for s in rng.choice(16, size=int(rng.integers(2, 9)), replace=False).tolist():
            if s != dst:
                ids.append(eng.add_coflow(s, dst, float(rng.integers(50_000, 3_000_000)), at_s=t,
                                          priority=MARKED_PRIORITY_BASE if rng.random() < 0.3 else 0))
    eng.run()
    st = eng.network.stats(eng.now_s)
    h = hashlib.sha256(np.array([eng.coflow_finish_s(c) for c in ids]).tobytes())
    for a in (st.queue_mean_bytes, st.queue_max_bytes, st.pause_s, st.ecn_marked_bytes, st.drop_bytes,
              st.pause_dur_s):
        h.update(np.ascontiguousarray(a).tobytes())
    out[model] = [h.hexdigest(), st.num_pauses, st.num_timeouts]
out["mode"] = aot.mode()[0]
out["fallbacks"] = aot.FALLBACKS
out["numba"] = "numba" in sys.modules
print(json.dumps(out, sort_keys=True))
"""


def _run(*, jit: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("FLOWHERD_JIT", None)
    if jit:
        env["FLOWHERD_JIT"] = "1"
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=900,
                         env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_congestion_models_run_compiled_without_numba_and_match_the_jit():
    which, why = aot.mode()
    if which != "aot":
        if os.environ.get("FLOWHERD_REQUIRE_AOT", "") not in ("", "0"):
            pytest.fail(f"the ahead-of-time kernels are not in use: {why}")
        pytest.skip(f"the ahead-of-time kernels are not in use: {why}")
    a, j = _run(jit=False), _run(jit=True)
    assert (a["mode"], j["mode"]) == ("aot", "jit")
    assert a["fallbacks"] == {}  # every exported kernel took its compiled path
    assert a["numba"] is False and j["numba"] is True
    assert a["roce"] == j["roce"] and a["tcp"] == j["tcp"]  # the same bits
    assert a["roce"][1] > 0 and a["tcp"][2] > 0  # pauses and timeouts were taken
