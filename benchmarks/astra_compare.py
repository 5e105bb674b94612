"""flowherd against ASTRA-sim's analytical backend on the recorded cases (prints figures; not a test).

    python benchmarks/astra_compare.py [--sizes 64 256 1024] [--repeats 3]
    python benchmarks/astra_compare.py --astra /work/astra/astra-sim/build/astra_analytical/build
    python benchmarks/astra_compare.py --astra BUILD --floor 64 --repeats 9   # the start-up floor
    python benchmarks/astra_compare.py --astra BUILD --ops resnet50 --sizes 64 256

The cases are those of docs/sources/astra_sim_analytical.md (astra-sim 518bd513): ring
AllReduce and direct AllToAll of 1 GiB on one switch (``topology: [Switch]``, 50 GB/s with
GB = 2^30 B, 1 us per link, so a message crosses two links), the shipped 4-chunk system config
(``Ring_4chunks.json``; for AllToAll its ``all-to-all-implementation: direct`` variant), and
one training iteration of ResNet-50 data parallel (``--ops resnet50``: ASTRA-sim 1.0's text
workload ``Resnet50_DataParallel.txt``, copied in benchmarks/data/astra/, 161 compute tasks of
1,082,450 us in all and 54 weight-gradient ring AllReduces of 102,011,648 B in all per rank;
benchmarks/astra_resnet.py reads it, builds flowherd's op graph and ASTRA-sim's ETs).
flowherd runs the same collective on the same fabric (N GPUs around one switch, 50 * 2^30 B/s
and 1 us per link) as a whole process too: ``python -c`` importing flowherd, building the
fabric, simulating, printing (for ResNet-50 ``python benchmarks/astra_resnet.py``, which also
reads the text workload and walks the op graph with `flowherd.cluster.executor`). Every figure is
of a whole process, start-up included: its wall time and its CPU time (user + system; on a
shared machine the wall time is mostly waiting).

With ``--astra BUILD`` (the CMake build directory whose ``bin/`` holds
``AstraSim_Analytical_Congestion_Aware``) ASTRA-sim runs here, side by side: per case the runs
alternate ASTRA-sim (congestion-aware), flowherd ``step``, flowherd ``collective``, ``--repeats``
times, and the medians are compared; its inputs (network YAML, system JSON, one Chakra ET per
rank with one ``COMM_COLL_NODE``, as Chakra's ``generate_comm_coll_node`` writes it; for
ResNet-50 the ETs Chakra's ``TextConverter`` writes, byte for byte) are written to a temporary
directory. Without it, ASTRA-sim's figures are the recorded ones (wall, median
of 3 on the machine of that file). The congestion-aware backend is the reference for speed (the
unaware one cannot model link sharing, so for AllToAll it is n times too optimistic).

Building ASTRA-sim (what was done for benchmarks/results/astra_compare.txt; the file's build
steps, with these substitutes for submodule pins missing from the stored snapshots):

    # sources (no git checkout needed: git archive of the stored mirrors)
    astra-sim 518bd513; extern/network_backend/analytical 599a0473 (pin e8c5119 missing);
    extern/graph_frontend/chakra f37c2bb (pin 0e3cd40 missing; archive without
    tests/data/chakra.0, a blob missing from the snapshot); extern/remote_memory_backend/analytical
    641cce85; extern/helper/fmt 7e73566c; extern/helper/spdlog 62302019 (pin 63f0875 missing);
    yaml-cpp a83cd315 in a directory of its own (FetchContent, offline)
    # patch 1, chakra src/feeder_v3/et_feeder.h: move "using ETFeeder = FeederV3::ETFeeder;"
    #   from before "} // namespace FeederV3" to after it
    # patch 2, extern/network_backend/analytical/CMakeLists.txt: wrap the bundled yaml-cpp,
    #   if(NOT TARGET yaml-cpp) add_subdirectory(... extern/yaml-cpp yaml-cpp) endif()
    apt-get install -y protobuf-compiler libprotobuf-dev      # protobuf 3.21.12 (Debian 12)
    CH=extern/graph_frontend/chakra/schema/protobuf
    protoc et_def.proto --proto_path=$CH --cpp_out=$CH
    cd build/astra_analytical && mkdir build && cd build
    cmake .. -DBUILDTARGET=all -DCMAKE_BUILD_TYPE=Release -DFETCHCONTENT_FULLY_DISCONNECTED=ON \\
          -DFETCHCONTENT_SOURCE_DIR_YAML-CPP=<yaml-cpp dir>
    nice -n 10 cmake --build . -j 1        # Release = -O3; g++ 12.2, CMake 3.25

With ``--floor N`` it prints instead what a process costs before it simulates anything, beside
the whole run at N GPUs (alternated, medians): ``python -c pass``, ``import numpy``, ``import
flowherd.cluster.collective`` (the entry the child uses), the child's imports, the child's whole
AllReduce at N (step fidelity) and ASTRA-sim's (with ``--astra``). At 64 GPUs ASTRA-sim's whole
run is about half of ``import numpy`` alone.

The simulated times are printed next to ASTRA-sim's for reference; docs/astra_sim.md explains
the difference term by term from ASTRA-sim's source: its congestion-aware backend stores and
forwards each message (a link sends one message at a time and the next link starts once it has
all arrived, so through the switch a ring step pays the serialization twice: +100% on the
bandwidth term), its 4 chunks run one after the other (each step's 2 link latencies paid 4
times), and every reduce step pays ``3 x message / local-mem-bw`` of processing; flowherd's
flows cross both links at once and pay NCCL's per-step latency. ResNet-50 is compute bound on
both (1,082.45 ms of compute); what differs is the exposed last AllReduce (conv1's 37,632 B,
latency bound): NCCL's ring step latency in flowherd, 4 x 2(n-1) x 2.01 us in ASTRA-sim. Without
``--astra`` ResNet-50 has recorded figures at 64 and 256 GPUs only.

**Run it with nothing else on the machine.** ASTRA-sim's CPU time moves with the machine's load
(76.6 -> 66.7 CPU-s for one case as the load fell from about 5 to 3) while flowherd's stays within
2%, so a ratio taken beside other work is inflated. With ``--astra`` the script reads the
1-minute load average before it starts and after every case: above 1.5 (this run alone keeps it
near 1) it says so, names the load, and records nothing; ``--under-load`` runs and records anyway,
in ``benchmarks/results/astra_compare_under_load.json``, whose every figure and note says it was
measured under load. A quiet run records ``benchmarks/results/astra_compare.json``
(`benchmarks/record.py`): the CPU-time ratio of every case at both fidelities.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import astra_resnet  # benchmarks/astra_resnet.py: the ResNet-50 case

SRC = Path(__file__).resolve().parents[1] / "src"
RESNET = Path(__file__).resolve().parent / "astra_resnet.py"

# ASTRA-sim, 1 GiB (ResNet-50: one iteration), shipped 4-chunk config (astra_sim_analytical.md
# sections 3, 6, 7 and 8):
# (simulated ms unaware, simulated ms aware, wall s unaware, wall s aware)
ASTRA = {
    ("allreduce", 64): (42.3696, 81.7446, 0.068, 0.082),
    ("allreduce", 256): (45.9480, 85.7912, 0.518, 0.677),
    ("allreduce", 1024): (58.4052, 98.3594, 8.655, 15.806),
    ("alltoall", 64): (0.3206, 20.0081, 0.056, 0.078),
    ("alltoall", 256): (0.0862, 20.0078, 1.228, 1.772),
    ("alltoall", 1024): (0.0276, 20.0048, 32.968, 93.574),
    ("resnet50", 64): (1083.4641, 1083.4651, 2.279, 3.290),
    ("resnet50", 256): (1086.5504, 1086.5504, 28.974, 51.947),
}

# flowherd first, as its command line imports it: numpy's BLAS then runs on one thread
# (flowherd/__init__.py); ASTRA-sim runs on one thread too
CHILD = """
import flowherd
import json, sys, numpy as np
from flowherd.collectives.ops import Collective, Op
from flowherd.fabric.builder import FabricBuilder
from flowherd.fabric.core import LinkKind, NodeKind
from flowherd.cluster.collective import simulate_collective
op, n, fid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
b = FabricBuilder(f"switch-{n}")
gpus = b.add_gpus(servers=np.arange(n), gpu_type=["h100"] * n)
sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
b.connect(gpus, np.repeat(sw, n), 50 * 2**30, 1e-6, LinkKind.NETWORK)
fab = b.build()
algo = "ring" if op == "allreduce" else "direct"
r = simulate_collective(fab, Collective(op=Op(op), size_bytes=2**30, gpus=tuple(range(n))), algorithm=algo,
                        router="shortest", fidelity=fid)
print(json.dumps({"time_s": r.time_s, "steps": r.num_steps, "flows": r.num_flows}))
"""

# the shipped examples/system/native_collectives/Ring_4chunks.json
SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
          "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
          "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
          "local-mem-bw": 1600, "boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900}
COMM_TYPE = {"allreduce": 0, "alltoall": 6}
#: Above this 1-minute load average no ratio is recorded (the script alone keeps it near 1).
MAX_LOAD = 1.5  # Chakra's CollectiveCommType ALL_REDUCE, ALL_TO_ALL




def astra_ring_terms_ms(n: int, size_bytes: float = 2**30, *,
                        chunks: int = SYSTEM["preferred-dataset-splits"],
                        link_bytes_per_s: float = 50 * 2**30, link_latency_s: float = 1e-6,
                        mem_bytes_per_s: float = SYSTEM["local-mem-bw"] * 1e9) -> dict[str, float]:
    """ASTRA-sim aware's ring AllReduce on one switch in closed form, term by term, ms
    (docs/astra_sim.md derives it from its source, astra-sim 518bd51):

    * ``store_and_forward``: each of the ``chunks`` chunks (run one after the other,
      ``active-chunks-per-dimension`` 1) is ``2(n-1)`` messages of ``size / chunks / n`` B per
      rank; a link sends one message at a time and the next link starts once it has all arrived
      (``Link::schedule_chunk_transmission``), so a message pays its serialization on both links
      of the switch: ``chunks x 2(n-1) x 2 x message / B``;
    * ``latency``: both links' latency per message: ``chunks x 2(n-1) x 2 x L``;
    * ``reduce``: a received message that is reduced (the ``n-1`` ReduceScatter steps of every
      chunk) is written and read twice at ``local-mem-bw`` (``PacketBundle::call``):
      ``chunks x (n-1) x 3 x message / local-mem-bw``.

    flowherd's flows cross both links at once (no store and forward) and pay NCCL's per-step
    latency instead (`flowherd_ring_terms_ms`)."""
    msg = size_bytes / chunks / n
    steps = chunks * 2 * (n - 1)
    return {"store_and_forward": steps * 2 * msg / link_bytes_per_s * 1e3,
            "latency": steps * 2 * link_latency_s * 1e3,
            "reduce": chunks * (n - 1) * 3 * msg / mem_bytes_per_s * 1e3}


def flowherd_ring_terms_ms(n: int, size_bytes: float = 2**30, *,
                           link_bytes_per_s: float = 50 * 2**30) -> dict[str, float]:
    """flowherd's ring AllReduce on one switch in closed form, ms: the bytes a NIC sends,
    ``2(n-1)/n x size``, at the link rate (a flow crosses both links of the switch at once), and
    NCCL 2.30's ring latency (tuning.cc: ``baseLat`` 8.4 us + 14 us per network step for Simple,
    times 1.4 for a ring AllReduce across nodes on Hopper, the plateau factor), the simulated
    steps' latencies summed."""
    from flowherd.collectives.nccl import base_latency_s, step_latency_s

    plateau = 1.4
    return {"bandwidth": 2 * (n - 1) / n * size_bytes / link_bytes_per_s * 1e3,
            "latency": plateau * (base_latency_s("simple") + 2 * (n - 1) * step_latency_s("simple", hw="net"))
            * 1e3}


def chakra_et(op: str, size_bytes: int, name: str) -> bytes:
    """One rank's Chakra ET: the metadata (version 0.0.4) and one ``COMM_COLL_NODE`` with the
    attributes ``is_cpu_op`` false, ``comm_type``, ``comm_size``, each length-delimited as
    Chakra's ``encodeMessage`` writes them (byte for byte the shipped microbenchmark ETs, node id
    and name aside; `flowherd.workload.chakra_write`)."""
    from flowherd.workload.chakra_schema import NodeType, message_classes
    from flowherd.workload.chakra_write import encode_messages

    cls = message_classes()
    A = cls["AttributeProto"]
    node = cls["Node"](name=name, type=int(NodeType.COMM_COLL_NODE),
                       attr=[A(name="is_cpu_op", bool_val=False),
                             A(name="comm_type", int64_val=COMM_TYPE[op]),
                             A(name="comm_size", int64_val=size_bytes)])
    return encode_messages([cls["GlobalMetadata"](version="0.0.4"), node])


def astra_inputs(root: Path, op: str, n: int) -> list[str]:
    """ASTRA-sim's command-line flags for a case, its input files written under `root`."""
    d = root / f"{op}-{n}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "network.yml").write_text(f"topology: [ Switch ]\nnpus_count: [ {n} ]\n"
                                   "bandwidth: [ 50.0 ]\nlatency: [ 1000.0 ]\n")
    system = dict(SYSTEM)
    if op == "alltoall":
        system["all-to-all-implementation"] = ["direct"]
    (d / "system.json").write_text(json.dumps(system, indent=4))
    (d / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    if op == "resnet50":
        for r, et in enumerate(astra_resnet.resnet_ets(n)):
            (d / f"{op}.{r}.et").write_bytes(et)
    else:
        et = chakra_et(op, 2**30, f"{op}_{n}npus_1GiB")
        for r in range(n):
            (d / f"{op}.{r}.et").write_bytes(et)
    return [f"--workload-configuration={d / op}", f"--system-configuration={d / 'system.json'}",
            f"--remote-memory-configuration={d / 'memory.json'}",
            f"--network-configuration={d / 'network.yml'}"]


def _timed(cmd: list[str], env: dict[str, str] | None,
           cwd: Path | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of one whole process, and its stdout."""
    t = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, timeout=1800,
                         cwd=cwd)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return time.perf_counter() - t, cpu, out.stdout


def run_flowherd(op: str, n: int, fidelity: str) -> tuple[float, float, float]:
    """(wall s, CPU s, simulated ms) of one flowherd process."""
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    cmd = ([sys.executable, str(RESNET), str(n), fidelity] if op == "resnet50" else
           [sys.executable, "-c", CHILD, op, str(n), fidelity])
    w, c, out = _timed(cmd, env)
    return w, c, json.loads(out.strip().splitlines()[-1])["time_s"] * 1e3


def run_astra(binary: Path, flags: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, simulated ms) of one ASTRA-sim process: the latest "sys[i] finished,
    X cycles" (1 cycle = 1 ns)."""
    # its log/ directory goes beside its inputs, not into the working directory
    w, c, out = _timed([str(binary), *flags], None, Path(flags[0].split("=", 1)[1]).parent)
    cycles = [int(x) for x in re.findall(r"sys\[\d+\] finished, (\d+) cycles", out)]
    if not cycles:
        raise SystemExit(f"{binary.name} printed no 'finished' line: {out[-500:]}")
    return w, c, max(cycles) / 1e6


def floor(binary: Path | None, n: int, repeats: int) -> None:
    """The start-up floor at `n` GPUs (`--floor`): CPU seconds of each command, alternated."""
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    imports = "\n".join(line for line in CHILD.splitlines() if line.startswith(("import", "from")))
    cmds: dict[str, list[str] | None] = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
        "import flowherd.cluster.collective": [sys.executable, "-c", "import flowherd.cluster.collective"],
        "the child's imports": [sys.executable, "-c", imports],
        f"flowherd allreduce n={n} step (whole)": [sys.executable, "-c", CHILD, "allreduce", str(n),
                                                  "step"],
        f"ASTRA-sim aware allreduce n={n}": None,
    }
    with tempfile.TemporaryDirectory(prefix="astra-inputs-") as tmp:
        if binary is not None:
            cmds[f"ASTRA-sim aware allreduce n={n}"] = [str(binary),
                                                         *astra_inputs(Path(tmp), "allreduce", n)]
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k, c in cmds.items() if c}
        for _ in range(repeats):
            for k in runs:
                w, c, _ = _timed(cmds[k], None if k.startswith("ASTRA") else env)
                runs[k].append((c, w))
    for k, v in runs.items():
        print(f"{k:42s} CPU {statistics.median(r[0] for r in v):.3f} s  "
              f"wall {statistics.median(r[1] for r in v):.3f} s", flush=True)


def explain(sizes: list[int]) -> None:
    """The 1 GiB ring AllReduce's simulated time, term by term, beside the recorded ASTRA-sim
    figures (docs/astra_sim.md)."""
    print("ring AllReduce 1 GiB on one switch, ms: flowherd (bandwidth + NCCL latency) vs ASTRA-sim aware "
          "(store-and-forward serialization + link latency + reduce), closed forms and recorded")
    print(f"{'GPUs':>5} {'fh bw':>8} {'fh lat':>8} {'fh sum':>8} {'A s&f':>8} {'A lat':>7} {'A red':>6} "
          f"{'A sum':>8} {'A recorded':>10}")
    for n in sizes:
        f, a = flowherd_ring_terms_ms(n), astra_ring_terms_ms(n)
        rec = ASTRA.get(("allreduce", n), (None, math.nan))[1]
        print(f"{n:>5} {f['bandwidth']:8.3f} {f['latency']:8.3f} {sum(f.values()):8.3f} "
              f"{a['store_and_forward']:8.3f} {a['latency']:7.3f} {a['reduce']:6.3f} {sum(a.values()):8.3f} "
              f"{rec:10.3f}")


def save(rows: list[list], loads: list[float], under_load: bool) -> None:
    """Record the CPU-time ratios (`benchmarks/record.py`), or refuse if a case ran above
    `MAX_LOAD` and ``--under-load`` was not given."""
    import record  # benchmarks/record.py

    worst = max(loads)
    if worst > MAX_LOAD and not under_load:
        print(f"not recorded: the 1-minute load average reached {worst:.2f} (> {MAX_LOAD}) during the "
              "run; run it alone, or pass --under-load to record figures marked as measured under load",
              flush=True)
        return
    tag = f" (measured under load: 1-minute load average up to {worst:.2f})" if worst > MAX_LOAD else ""
    figures = {f"{op} {n} GPUs {fid}: ASTRA-sim CPU s / flowherd CPU s{tag}": record.figure(
        ratio, "x", target=">= 15" if n == 1024 and op in ("allreduce", "alltoall") else None,
        met=ratio >= 15 if n == 1024 and op in ("allreduce", "alltoall") else None)
        for op, n, fid, _, _, _, _, ratio, _ in rows}
    figures["measured under load"] = record.figure("yes" if tag else "no", "",
                                                   target=f"no (1-minute load average <= {MAX_LOAD})",
                                                   met=not tag)
    cols = ["op", "GPUs", "fidelity", "flowherd simulated ms", "ASTRA-sim simulated ms", "flowherd CPU s",
            "ASTRA-sim CPU s", "ratio", "load after the case"]
    notes = ("medians of alternated whole-process runs, CPU seconds (user + system); ASTRA-sim 518bd51 "
             "congestion-aware analytical, built from source"
             + (f"; MEASURED UNDER LOAD{tag}" if tag else ""))
    path = record.save("astra_compare_under_load" if tag else "astra_compare", figures,
                       tables=[record.table("flowherd against ASTRA-sim", cols, rows)], notes=notes)
    print(f"saved {path}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--ops", nargs="+", default=["allreduce", "alltoall"],
                    choices=["allreduce", "alltoall", "resnet50"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--fidelities", nargs="+", default=["step", "collective"], choices=["step", "collective"])
    ap.add_argument("--verbose", action="store_true", help="also print every run as it ends")
    ap.add_argument("--astra", type=Path, default=None,
                    help="ASTRA-sim's CMake build directory (bin/AstraSim_Analytical_Congestion_Aware): "
                         "run it side by side instead of quoting the recorded figures")
    ap.add_argument("--under-load", action="store_true",
                    help=f"run and record even above a 1-minute load average of {MAX_LOAD} (the file and "
                         "every figure are marked as measured under load)")
    ap.add_argument("--no-save", action="store_true", help="print only (no benchmarks/results file)")
    ap.add_argument("--explain", action="store_true",
                    help="print the ring AllReduce's simulated time term by term (docs/astra_sim.md) "
                         "and exit")
    ap.add_argument("--floor", type=int, default=None, metavar="N",
                    help="print the start-up floor at N GPUs instead (see the docstring)")
    args = ap.parse_args()
    if args.explain:
        explain(args.sizes)
        return
    binary = None
    if args.astra is not None:
        binary = args.astra / "bin" / "AstraSim_Analytical_Congestion_Aware"
        if not binary.is_file():
            raise SystemExit(f"no ASTRA-sim binary at {binary} (--astra)")
    if args.floor is not None:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; start-up floor, "
              f"medians of {args.repeats} alternated runs", flush=True)
        floor(binary, args.floor, args.repeats)
        print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
        return
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; ASTRA-sim "
          + (f"run here ({binary})" if binary else "figures recorded (astra_sim_analytical.md)")
          + f"; medians of {args.repeats} alternated runs", flush=True)
    print("run this with nothing else on the machine: ASTRA-sim's CPU time grows with the load, "
          f"and ratios are not recorded above a 1-minute load average of {MAX_LOAD}", flush=True)
    if binary is not None:
        load = os.getloadavg()[0]
        if load > MAX_LOAD and not args.under_load:
            print(f"refused: the 1-minute load average is {load:.2f} (> {MAX_LOAD}); nothing run, nothing "
                  "recorded. Run it alone, or pass --under-load to record figures marked as measured "
                  "under load", flush=True)
            raise SystemExit(2)
    loads: list[float] = []
    rows: list[list] = []
    print("case                  fidelity    flowherd sim   ASTRA aware sim   flowherd wall (CPU)   "
          "ASTRA aware wall (CPU)   speed-up wall (CPU)", flush=True)
    with tempfile.TemporaryDirectory(prefix="astra-inputs-") as tmp:
        for op in args.ops:
            for n in args.sizes:
                flags = astra_inputs(Path(tmp), op, n) if binary else []
                runs: dict[str, list[tuple[float, float, float]]] = {"astra": [], "step": [],
                                                                     "collective": []}
                for _ in range(args.repeats):  # alternated: ASTRA-sim, then each fidelity
                    if binary:
                        runs["astra"].append(run_astra(binary, flags))
                        if args.verbose:
                            print("# ASTRA-sim aware {} n={}: wall {:.3f} s, CPU {:.3f} s, sim {:.4f} ms"
                                  .format(op, n, *runs["astra"][-1]), flush=True)
                    for fid in args.fidelities:
                        runs[fid].append(run_flowherd(op, n, fid))
                        if args.verbose:
                            print("# flowherd {} {} n={}: wall {:.3f} s, CPU {:.3f} s, sim {:.4f} ms"
                                  .format(fid, op, n, *runs[fid][-1]), flush=True)
                if binary:
                    a_wall = statistics.median(r[0] for r in runs["astra"])
                    a_cpu = statistics.median(r[1] for r in runs["astra"])
                    a_ms = runs["astra"][-1][2]
                else:  # recorded (none for ResNet-50 at 1,024 GPUs: printed as nan)
                    _, a_ms, _, a_wall = ASTRA.get((op, n), (None, math.nan, None, math.nan))
                    a_cpu = None
                what = "1 iter" if op == "resnet50" else "1 GiB"
                load = os.getloadavg()[0]
                loads.append(load)
                loud = binary is not None and load > MAX_LOAD
                for fid in args.fidelities:
                    w = statistics.median(r[0] for r in runs[fid])
                    c = statistics.median(r[1] for r in runs[fid])
                    a_c = "     -" if a_cpu is None else f"{a_cpu:6.2f}"
                    ratio_c = "" if a_cpu is None else f" ({a_cpu / c:.1f}x)"
                    mark = f"   (load {load:.2f}: measured under load)" if loud else ""
                    print(f"{op:>9} {what} n={n:<5} {fid:<10} {runs[fid][-1][2]:10.3f} ms "
                          f"{a_ms:12.3f} ms {w:10.2f} s ({c:6.2f} s) {a_wall:12.3f} s ({a_c} s) "
                          f"{a_wall / w:9.1f}x{ratio_c}{mark}", flush=True)
                    if a_cpu is not None:
                        rows.append([op, n, fid, round(runs[fid][-1][2], 4), round(a_ms, 4), round(c, 3),
                                     round(a_cpu, 3), round(a_cpu / c, 2), round(load, 2)])
    print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    if binary is not None and rows and not args.no_save:
        save(rows, loads, args.under_load)


if __name__ == "__main__":
    main()
