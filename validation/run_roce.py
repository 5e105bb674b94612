"""flowherd's lossless ``roce`` model against the RDMA fork of ns-3 (validation/README.md, "Lossless").

    make validate                        # runs validation/run.py, then this script
    python validation/run_roce.py [--cases NAME ...] [--reuse-ns3 validation/results_roce.json]

The packet-level reference is the ns-3 fork of HPCC (alibaba-edu/High-Precision-Congestion-Control,
the RDMA models SimAI builds on): ``qbb-net-device`` (PFC pause and resume per priority),
``rdma-hw`` (the Mellanox DCQCN reaction point: rate cut by ``alpha / 2`` at most once per rate
decrease interval when a CNP came, ``alpha`` EWMA, timer-driven fast recovery, additive and
hyper increase), ``switch-mmu`` (per-ingress-queue PFC accounting, RED/ECN marking at dequeue).
Its driver is ``scratch/third.cc`` with ``ns3/rdma/fh-rdma.patch`` (flows wait for the flows
they depend on; static PFC Xoff / Xon). Each case runs there and in flowherd with ``network:
ideal`` and ``network: roce`` (the same buffers, link rates, PFC thresholds and DCQCN
constants); printed per case: median and p99 flow completion time and the collective's
completion time from each, and the relative errors. ``HPCC_NS3`` names the fork's
``simulation`` directory (default ``validation/build/hpcc/simulation``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import Case, metrics, run_flowherd

from flowherd.engine.network import network_from_mapping
from flowherd.units import KB, MB

HERE = Path(__file__).resolve().parent
FORK = Path(os.environ.get("HPCC_NS3", HERE / "build" / "hpcc" / "simulation"))
PATCH = HERE / "ns3" / "rdma" / "fh-rdma.patch"
BUILD = HERE / "build" / "roce"
T0_S = 0.001  # flows start this late in ns-3 (after its set-up events)
PG = 3  # the fork's data priority (its examples' pg 3); PFC and the MMU count per priority
MODELS = ("ideal", "roce")
HELD_OUT = ("incast12-pfc", "victim-8to1", "two-rings-2to1-staggered", "alltoall8-2to1-400g")

# DCQCN's constants as `network: roce` has them (NetworkConfig, SIGCOMM 2015 Sec. 5), in the
# fork's units: RP timer, alpha interval and rate-decrease interval (the CNP interval) in us.
# The fork's reaction point has no byte counter (timer-only increase), so flowherd's side is
# configured with one that never fires.
DCQCN = {"RP_TIMER": 55, "ALPHA_RESUME_INTERVAL": 55, "RATE_DECREASE_INTERVAL": 50,
         "FAST_RECOVERY_TIMES": 5, "RATE_AI": "40Mb/s", "RATE_HAI": "400Mb/s", "EWMA_GAIN": 1 / 256,
         "MIN_RATE": "100Mb/s", "CLAMP_TARGET_RATE": 0}
KMIN_KB, KMAX_KB, PMAX = 5, 200, 0.01
PAYLOAD_BYTES = 4096  # RoCEv2's MTU payload (`network: roce`'s payload)
# the fork's headers per packet as its standalone-FCT formula counts them (CustomHeader::
# GetStaticWholeHeaderSize: 14 + IPv4 20 + UDP 8 + pg 2 + seq 4, no INT header with DCQCN); the
# lone-flow case checks it against the fork's own line-rate time
FORK_OVERHEAD_BYTES = 48


class RoceCase(Case):
    """A lossy `Case` with PFC thresholds (per switch ingress queue in the fork)."""

    def __init__(self, name: str, hosts: int, leaves: int, host_gbps: float, uplink_gbps: float,
                 xoff_bytes: float, xon_bytes: float | None = None):
        super().__init__(name, hosts, leaves, host_gbps, uplink_gbps, buffer_bytes=4 * xoff_bytes)
        self.xoff_bytes = float(xoff_bytes)
        # `network: roce`'s resume threshold: two 4 KiB packets below Xoff (config.network_from_mapping)
        self.xon_bytes = float(xon_bytes if xon_bytes is not None else max(xoff_bytes - 2 * 4096, 0))


def cases() -> list[RoceCase]:
    """The RoCE cases (at least 12; `HELD_OUT` are kept out of any calibration)."""
    out: list[RoceCase] = []
    c = RoceCase("one-flow", 16, 2, 100, 400, 75 * KB)  # alone: line rate, no queue, no pause
    c.flow(0, 8, 8 * MB)
    out.append(c)
    shallow, deep = 75 * KB, 1.78 * MB  # Xoff of the `shallow` preset's port and of spectrum3's
    for n in (2, 4, 8, 12, 16, 32):  # N-to-1 incast on one leaf's egress, PFC pausing its hosts
        c = RoceCase(f"incast{n}-pfc", 40, 4, 100, 1000, shallow)
        for i in range(n):
            c.flow(1 + i, 0, 2 * MB)
        out.append(c)
    for n in (8, 32):  # the same with a deep Xoff (few or no pauses)
        c = RoceCase(f"incast{n}-deep", 40, 4, 100, 1000, deep)
        for i in range(n):
            c.flow(1 + i, 0, 2 * MB)
        out.append(c)
    c = RoceCase("incast8-staggered", 16, 2, 100, 800, shallow)
    for i in range(8):
        c.flow(8 + i, 0, 2 * MB, start=20e-6 * i)
    out.append(c)
    # a victim behind a paused uplink: 7 hosts of leaf 0 into one host of leaf 1 (its port
    # congests, the spine's link into leaf 1 is paused, and then leaf 0's uplink); host 0 sends
    # to host 15 of leaf 1, a port that never congests, over the paused links
    for name, up in (("victim-1to1", 800), ("victim-8to1", 100)):
        c = RoceCase(name, 16, 2, 100, up, shallow)
        for i in range(1, 8):
            c.flow(i, 8, 2 * MB)
        c.flow(0, 15, 2 * MB)
        out.append(c)
    c = RoceCase("ring8-alone", 16, 2, 100, 400, shallow)
    c.ring_allreduce([0, 1, 2, 3, 8, 9, 10, 11], 16 * MB)
    out.append(c)
    for name, up, stagger in (("two-rings-8to1", 100, 0.0), ("two-rings-2to1-staggered", 400, 300e-6)):
        c = RoceCase(name, 16, 2, 100, up, shallow)
        c.ring_allreduce([0, 1, 2, 3, 8, 9, 10, 11], 16 * MB)
        c.ring_allreduce([4, 5, 6, 7, 12, 13, 14, 15], 16 * MB, start=stagger)
        out.append(c)
    c = RoceCase("alltoall16-2to1", 16, 2, 100, 400, shallow)
    for s in range(16):
        for d in range(16):
            if s != d:
                c.flow(s, d, 256 * KB)
    out.append(c)
    c = RoceCase("alltoall8-2to1-400g", 8, 2, 400, 800, shallow)
    for s in range(8):
        for d in range(8):
            if s != d:
                c.flow(s, d, 1 * MB)
    out.append(c)
    return out


def network_of(c: RoceCase, model: str):
    if model == "ideal":
        return network_from_mapping({"model": "ideal"})
    return network_from_mapping({"model": "roce", "port_buffer": f"{int(c.buffer_bytes)}B",
                                 "pfc_xoff": f"{int(c.xoff_bytes)}B", "pfc_xon": f"{int(c.xon_bytes)}B",
                                 "ecn_kmin": f"{KMIN_KB}KB", "ecn_kmax": f"{KMAX_KB}KB", "ecn_pmax": PMAX,
                                 "payload": f"{PAYLOAD_BYTES}B", "overhead": FORK_OVERHEAD_BYTES,
                                 "dcqcn_byte_counter": "1000TiB", **OVERRIDES})


OVERRIDES: dict[str, str] = {}


# ---- the fork --------------------------------------------------------------------------------
def build_fork() -> Path:
    """The fork's driver with the patch, built by its waf (the fork must be configured and built:
    README "Lossless")."""
    binary = FORK / "build" / "scratch" / "fh-rdma"
    if not (FORK / "waf").exists():
        sys.exit(f"the HPCC ns-3 fork is not at {FORK} (set HPCC_NS3; validation/README.md, Lossless)")
    drv = FORK / "scratch" / "fh-rdma.cc"
    if not binary.exists() or binary.stat().st_mtime < PATCH.stat().st_mtime:
        src = (FORK / "scratch" / "third.cc").read_text().replace("\r\n", "\n")
        tmp = BUILD / "third.cc"
        BUILD.mkdir(parents=True, exist_ok=True)
        tmp.write_text(src)
        subprocess.run(["patch", "-s", "-o", str(drv), str(tmp), str(PATCH)], check=True)
        env = dict(os.environ, PYENV_VERSION="2.7.18")
        subprocess.run(["nice", "-n", "5", "python2", "./waf", "build", "-j2"], cwd=FORK, env=env, check=True)
    return binary


def _rate(gbps: float) -> str:
    return f"{gbps:g}Gbps"


def write_inputs(c: RoceCase, stop_s: float) -> Path:
    """The fork's config, topology, flow and trace files for ``c`` (one spine; hosts 0..H-1,
    leaves H..H+L-1, the spine H+L)."""
    d = BUILD / c.name
    d.mkdir(parents=True, exist_ok=True)
    per = c.hosts // c.leaves
    leaves = [c.hosts + j for j in range(c.leaves)]
    spine = c.hosts + c.leaves
    links = [(h, leaves[h // per], c.host_gbps) for h in range(c.hosts)]
    links += [(lf, spine, c.uplink_gbps) for lf in leaves]
    delay = f"{c.delay_us / 1000:g}ms"
    topo = [f"{spine + 1} {c.leaves + 1} {len(links)}", " ".join(map(str, [*leaves, spine]))]
    topo += [f"{a} {b} {_rate(g)} {delay} 0" for a, b, g in links]
    (d / "topology.txt").write_text("\n".join(topo) + "\n")
    flows = [str(len(c.src))]
    for i in range(len(c.src)):
        flows.append(f"{c.src[i]} {c.dst[i]} {PG} {int(c.size[i])} {T0_S + c.start[i]:.9f} {len(c.deps[i])} "
                     + " ".join(map(str, c.deps[i])))
    (d / "flow.txt").write_text("\n".join(flows) + "\n")
    (d / "trace.txt").write_text("0\n")
    rates = sorted({int(g * 1e9) for _, _, g in links})
    kmap = lambda v: f"{len(rates)} " + " ".join(f"{r} {v}" for r in rates)  # noqa: E731
    conf = {"ENABLE_QCN": 1, "USE_DYNAMIC_PFC_THRESHOLD": 1, "PACKET_PAYLOAD_SIZE": PAYLOAD_BYTES,
            "TOPOLOGY_FILE": d / "topology.txt", "FLOW_FILE": d / "flow.txt", "TRACE_FILE": d / "trace.txt",
            "TRACE_OUTPUT_FILE": d / "mix.tr", "FCT_OUTPUT_FILE": d / "fct.txt",
            "PFC_OUTPUT_FILE": d / "pfc.txt",
            "SIMULATOR_STOP_TIME": f"{stop_s:.6f}", "CC_MODE": 1, **DCQCN, "DCTCP_RATE_AI": "1000Mb/s",
            "ERROR_RATE_PER_LINK": 0, "L2_CHUNK_SIZE": 4000, "L2_ACK_INTERVAL": 1, "L2_BACK_TO_ZERO": 0,
            "HAS_WIN": 0, "GLOBAL_T": 1, "VAR_WIN": 0, "FAST_REACT": 1, "U_TARGET": 0.95, "MI_THRESH": 0,
            "INT_MULTI": 1, "MULTI_RATE": 0, "SAMPLE_FEEDBACK": 0, "PINT_LOG_BASE": 1.05, "PINT_PROB": 1.0,
            "RATE_BOUND": 1, "ACK_HIGH_PRIO": 0, "LINK_DOWN": "0 0 0", "ENABLE_TRACE": 0,
            "KMAX_MAP": kmap(KMAX_KB), "KMIN_MAP": kmap(KMIN_KB), "PMAX_MAP": kmap(PMAX),
            "BUFFER_SIZE": 32, "PFC_XOFF_BYTES": int(c.xoff_bytes), "PFC_XON_BYTES": int(c.xon_bytes),
            "QLEN_MON_FILE": d / "qlen.txt", "QLEN_MON_START": int(100 * 1e9), "QLEN_MON_END": int(100 * 1e9)}
    (d / "config.txt").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    return d / "config.txt"


def run_fork(c: RoceCase, binary: Path, ideal_cct_s: float) -> tuple[np.ndarray, np.ndarray, dict]:
    stop = T0_S + 30 * ideal_cct_s + 0.01
    conf = write_inputs(c, stop)
    env = dict(os.environ, LD_LIBRARY_PATH=str(FORK / "build"))  # waf's shared ns-3 libraries
    out = subprocess.run([str(binary), str(conf)], capture_output=True, text=True, check=True,
                         cwd=FORK, env=env).stdout
    n = len(c.src)
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    standalone = np.full(n, np.nan)
    for line in out.splitlines():
        p = line.split()
        if p and p[0] == "fct":
            i = int(p[1])
            start[i], end[i] = int(p[2]) * 1e-9 - T0_S, int(p[3]) * 1e-9 - T0_S
            standalone[i] = int(p[4]) * 1e-9
    if np.isnan(end).any():
        raise RuntimeError(f"{c.name}: {int(np.isnan(end).sum())} flows unfinished by {stop:.4f} s")
    # PFC: pause frames per (node, port) and the time each port spent paused
    pauses, paused_s, since = 0, 0.0, {}
    for line in (conf.parent / "pfc.txt").read_text().splitlines():
        t, node, _, port, kind = line.split()
        key = (int(node), int(port))
        if kind == "1":
            pauses += 1
            since.setdefault(key, int(t))
        elif key in since:
            paused_s += (int(t) - since.pop(key)) * 1e-9
    host_paused = sum(1 for line in (conf.parent / "pfc.txt").read_text().splitlines()
                      if line.split()[2] == "0" and line.split()[4] == "1")
    return start, end, {"pause_frames": pauses, "host_pause_frames": host_paused, "paused_s": paused_s,
                        "standalone_fct_s": standalone.tolist()}


# ---- comparison ------------------------------------------------------------------------------
def summarize(rows: list[dict]) -> dict[str, dict[str, float]]:
    out = {}
    for model in MODELS:
        errs = np.array([[r[f"{model}_err"][k] for k in ("fct_median_s", "fct_p99_s", "cct_s")]
                         for r in rows]).reshape(-1, 3)
        if errs.size:
            out[model] = {"median_err_all": float(np.median(errs)),
                          "median_err_fct_median": float(np.median(errs[:, 0])),
                          "median_err_fct_p99": float(np.median(errs[:, 1])),
                          "median_err_cct": float(np.median(errs[:, 2])),
                          "max_err_cct": float(np.max(errs[:, 2])), "mean_err_all": float(np.mean(errs))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=None)
    ap.add_argument("--json", default=str(HERE / "results_roce.json"))
    ap.add_argument("--reuse-ns3", default=None, help="a results_roce.json whose ns-3 figures to take "
                    "(the fork is deterministic; flowherd reruns)")
    ap.add_argument("--set", nargs="*", default=[], help="overrides of the roce model, key=value")
    args = ap.parse_args()
    OVERRIDES.update(dict(kv.split("=", 1) for kv in args.set))
    reuse = {}
    if args.reuse_ns3 and Path(args.reuse_ns3).exists():
        reuse = {r["case"]: r for r in json.loads(Path(args.reuse_ns3).read_text())["rows"]}
    binary = None
    rows = []
    for c in cases():
        if args.cases and c.name not in args.cases:
            continue
        row: dict = {"case": c.name, "flows": len(c.src), "held_out": c.name in HELD_OUT}
        for model in MODELS:
            t0 = time.process_time()
            s, e, x = run_flowherd(c, model, network_of(c, model))
            row[model] = metrics(c, s, e)
            row[f"{model}_extra"] = x
            row[f"{model}_cpu_s"] = time.process_time() - t0
        if c.name in reuse:
            row.update({k: reuse[c.name][k] for k in ("ns3", "ns3_extra", "ns3_cpu_s")})
        else:
            binary = binary or build_fork()
            t0 = time.perf_counter()
            ru0 = os.times()
            s3, e3, x3 = run_fork(c, binary, row["ideal"]["cct_s"])
            ru1 = os.times()
            row["ns3"], row["ns3_extra"] = metrics(c, s3, e3), x3
            row["ns3_cpu_s"] = ((ru1.children_user + ru1.children_system)
                                - (ru0.children_user + ru0.children_system))
            row["ns3_wall_s"] = time.perf_counter() - t0
        ref = row["ns3"]
        for model in MODELS:
            row[f"{model}_err"] = {k: abs(row[model][k] - ref[k]) / ref[k] for k in ref}
        rows.append(row)
        pauses = row["ns3_extra"]["pause_frames"]
        print(f"{c.name:26s} {len(c.src):4d} flows {pauses:5d} pauses | " + " | ".join(
            f"{k[:-2]:10s} ns3 {ref[k] * 1e6:8.1f}us ideal {row['ideal'][k] * 1e6:8.1f} "
            f"({row['ideal_err'][k]:6.1%}) "
            f"roce {row['roce'][k] * 1e6:8.1f} ({row['roce_err'][k]:6.1%})" for k in ref), flush=True)
    if not rows:
        return
    groups = {"all": rows, "calibration": [r for r in rows if not r["held_out"]],
              "held_out": [r for r in rows if r["held_out"]]}
    summary, ok = {}, {}
    for key, sel in groups.items():
        if not sel:
            continue
        s = summary[key] = summarize(sel)
        print(f"\n{len(sel)} cases ({key}); median relative error over cases and metrics:")
        for model in MODELS:
            m = s[model]
            print(f"  {model:5s}: all {m['median_err_all']:.1%} | "
                  f"FCT median {m['median_err_fct_median']:.1%} | "
                  f"FCT p99 {m['median_err_fct_p99']:.1%} | collective {m['median_err_cct']:.1%} "
                  f"(worst {m['max_err_cct']:.1%}; mean of all {m['mean_err_all']:.1%})")
        ratio = s["roce"]["median_err_all"] / max(s["ideal"]["median_err_all"], 1e-12)
        ok[key] = ratio <= 0.5 and s["roce"]["median_err_cct"] <= 0.10 and len(sel) >= 12
        print(f"  ratio roce / ideal {ratio:.2f}" + (
            "; target (>= 12 cases, ratio <= 0.5, <= 10% on collective times): "
            + ("met" if ok[key] else "NOT met")
            if key == "all" else ""))
    Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary, "target_met": ok,
                                           "held_out": list(HELD_OUT)}, indent=1))


if __name__ == "__main__":
    main()
