"""The engine's kernels compiled ahead of time (`flowherd.engine.aot`): the same numbers as numba's
JIT bit for bit, no numba imported by a collective, a JIT fallback for what does not fit.

The comparisons need the compiled extension built from the current sources (`make aot`; the
install builds it). Without it they skip, unless FLOWHERD_REQUIRE_AOT=1 (`make test` and CI set
it), where they fail.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flowherd.engine import aot

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "flowherd"

# Runs in a fresh interpreter: the 64-GPU collective of issue 16 through the CLI, the same
# collective at the `collective` fidelity, and an engine workload with weights, priorities,
# dependencies and flows that end at different times; prints a digest of every number.
_SCRIPT = r"""
import hashlib, json, sys
import numpy as np
from flowherd.cli import main
from flowherd.collectives.ops import Collective, Op
from flowherd.fabric.presets import preset
from flowherd.engine import aot
from flowherd.cluster.collective import simulate_collective
from flowherd.engine.core import Engine
from flowherd.routing.policies import make_router

import contextlib, io
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    main(["collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "64", "--fabric",
          "dgx-superpod-h100-1su", "--json"])
out = {"cli": json.loads(buf.getvalue())}
numba_after_cli = "numba" in sys.modules
fab = preset("dgx-superpod-h100-1su")
res = simulate_collective(fab, Collective(op=Op.ALLGATHER, gpus=tuple(range(0, 128, 2)),
                                          size_bytes=48 * 2**20), algorithm="ring",
                          fidelity="collective")
out["collective_fidelity"] = res.to_dict()
rng = np.random.default_rng(7)
eng = Engine(fab, make_router("ecmp", fab, seed=3), record_flows=True)
prev = ()
for i in range(12):
    n = int(rng.integers(5, 60))
    src = rng.integers(0, fab.num_gpus, n)
    dst = (src + rng.integers(1, fab.num_gpus, n)) % fab.num_gpus
    cid = eng.add_coflow(src, dst, rng.uniform(1e6, 5e8, n), at_s=float(rng.uniform(0, 1e-3)),
                         after=prev, weight=float(rng.choice([1.0, 2.5])),
                         priority=int(rng.integers(0, 2)))
    prev = (cid,) if i % 3 else ()
eng.run()
r = eng.result()
h = hashlib.sha256()
for a in (r.flow_start_s, r.flow_finish_s, r.coflow_start_s, r.coflow_finish_s, r.link_bytes,
          r.link_busy_s):
    h.update(np.ascontiguousarray(a).tobytes())
out["engine"] = h.hexdigest()
out["mode"] = aot.mode()[0]
out["fallbacks"] = aot.FALLBACKS
out["numba_after_cli"] = numba_after_cli
print(json.dumps(out, sort_keys=True))
"""


def _run(*, jit: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("FLOWHERD_JIT", None)
    if jit:
        env["FLOWHERD_JIT"] = "1"
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=900, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _need_aot() -> None:
    which, why = aot.mode()
    if which != "aot":
        if os.environ.get("FLOWHERD_REQUIRE_AOT", "") not in ("", "0"):
            pytest.fail(f"the ahead-of-time kernels are not in use: {why}")
        pytest.skip(f"the ahead-of-time kernels are not in use: {why}")


def test_aot_kernels_give_the_jits_numbers_bit_for_bit_and_no_numba():
    _need_aot()
    a, j = _run(jit=False), _run(jit=True)
    assert a["mode"] == "aot" and j["mode"] == "jit"
    # every exported kernel took its compiled path: no call fell back
    assert a["fallbacks"] == {}
    # the 64-GPU collective of issue 16 never imports numba on the compiled path
    assert a["numba_after_cli"] is False and j["numba_after_cli"] is True
    for key in ("cli", "collective_fidelity", "engine"):
        assert a[key] == j[key], key  # JSON floats: repr round-trips, so equal means same bits
    assert a["cli"]["busbw_bytes_per_s"] > 0 and a["cli"]["num_flows"] == 71680


def test_arguments_of_other_types_go_to_the_jit_not_the_compiled_code():
    _need_aot()
    from flowherd.engine.step_kernels import soonest

    txend = np.array([5.0, 3.0, 4.0, 1.0, 2.0])
    act = np.array([0, 2, 4])
    before = dict(aot.FALLBACKS)
    assert soonest(act, txend) == 2.0  # the compiled path
    assert before == aot.FALLBACKS
    # pycc's wrapper would read int32 or strided memory as int64 (garbage); the check sends
    # them to numba's JIT, which compiles them as numba always did
    assert soonest(act.astype(np.int32), txend) == 2.0
    assert soonest(np.array([0, 9, 2, 9, 4])[::2], txend) == 2.0
    assert soonest(act, txend.astype(np.float32)) == 2.0
    assert aot.FALLBACKS["flowherd.engine.step_kernels.soonest"] == before.get(
        "flowherd.engine.step_kernels.soonest", 0) + 3


def test_edited_kernel_sources_fall_back_to_the_jit(monkeypatch):
    class Ext:
        __file__ = "_kernels_aot.so"

        @staticmethod
        def source_digest():
            return aot.source_digest() ^ 1  # built from other sources

    monkeypatch.setattr(aot, "_state", {})
    monkeypatch.setattr(aot.importlib, "import_module", lambda name: Ext)
    assert aot._extension() is None
    assert aot.mode() == ("jit", aot._state["why"]) and "older" in aot._state["why"]
    monkeypatch.setattr(aot, "_state", {})
    monkeypatch.setattr(Ext, "source_digest", staticmethod(aot.source_digest))
    assert aot._extension() is Ext
    monkeypatch.setattr(aot, "_state", {})
    monkeypatch.setenv("FLOWHERD_JIT", "1")
    assert aot._extension() is None


def test_the_build_purges_numbas_cached_code_and_nothing_else(tmp_path):
    """A cached caller keeps its callee's old code (numba checks its own file only): the build
    starts from no cache (`aot.purge_cache`), and leaves sources and bytecode alone."""
    for d in ("", "network/"):
        (tmp_path / d / "__pycache__").mkdir(parents=True)
        for name in ("bottleneck.local_core-157.py311.nbi", "bottleneck.local_core-157.py311.1.nbc",
                     "bottleneck.cpython-311.pyc"):
            (tmp_path / d / "__pycache__" / name).write_bytes(b"x")
        (tmp_path / d / "kept.nbi").write_bytes(b"x")  # not numba's cache: not in __pycache__
    assert aot.purge_cache(tmp_path) == 4
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["__pycache__/bottleneck.cpython-311.pyc", "kept.nbi",
                    "network/__pycache__/bottleneck.cpython-311.pyc", "network/kept.nbi"]


def test_every_export_names_a_kernel_with_that_many_arguments():
    import importlib

    for name, sig in aot.EXPORTS.items():
        module, fn = name.rsplit(".", 1)
        obj = getattr(importlib.import_module(module), fn)
        py = obj.py_func
        assert py.__code__.co_argcount == len(aot._arg_types(sig)), name
        assert all(t in ("i8", "f8", "b1") or t in ("i8[::1]", "f8[::1]", "b1[::1]")
                   for t in aot._arg_types(sig)), name


def test_no_module_uses_numba_njit_directly():
    """A plain @njit kernel could not call an exported one (numba cannot type pycc's wrapper):
    every numba kernel of the package goes through `flowherd.engine.aot.kernel`."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "engine" / "aot.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("numba"):
                offenders += [f"{path.relative_to(SRC)}: from {node.module} import {a.name}"
                              for a in node.names if a.name in ("njit", "jit", "vectorize")]
            if isinstance(node, ast.Attribute) and node.attr in ("njit", "jit") and \
                    isinstance(node.value, ast.Name) and node.value.id == "numba":
                offenders.append(f"{path.relative_to(SRC)}: numba.{node.attr}")
    assert offenders == []
