"""Chakra ETs on flowherd and on ASTRA-sim's congestion-unaware analytical backend, idle fabric.

    python benchmarks/chakra_astra.py --astra /work/astra/astra-sim/build/astra_analytical/build
    python benchmarks/chakra_astra.py --astra BUILD --cases micro resnet    # a subset

Both simulators read the same Chakra ET files through their own readers (flowherd:
`flowherd.workload.ChakraJob`'s `chakra_read` / `chakra_graph`; ASTRA-sim: Chakra's feeder) and run
them on the same fabric: N NPUs around one switch (``topology: [Switch]``, 50 GB/s with GB = 2^30 B,
1 us per link, so a message crosses two links: 2 us a ring step), as
docs/sources/astra_sim_analytical.md does. flowherd runs every collective as a ring (an
AllToAll as direct sends) with the paths' latencies only (``latency_model="fabric"``: no NCCL
step latency, which ASTRA-sim does not model), at ``collective`` fidelity.

The ETs:

* ``micro``: ASTRA-sim's shipped microbenchmarks (``examples/workload/microbenchmarks``:
  AllReduce, AllGather, ReduceScatter, AllToAll of 1 MB at 4, 8, 16 NPUs; read from the build's
  source tree, or written by `flowherd.workload.chakra_write.microbenchmark`, which writes the
  same bytes), and the same generator at 64 MiB;
* ``resnet``: ASTRA-sim 1.0's ResNet-50 data-parallel text workload converted by Chakra's
  TextConverter (`flowherd.workload.chakra_text.text_ets`, byte for byte) at 8 and 16 NPUs;
* ``gpt``: a Megatron-LM iteration of a GPT (Llama-3-8B shape, sequence 2,048, two micro-batches
  per replica; tp 4, tp 4 x pp 2, tp 4 x dp 2, tp 4 x pp 2 x dp 2) written as Chakra ETs with
  process groups (``--comm-group-configuration``) and pipeline sends / receives
  (`flowherd.workload.chakra_write.export_graph`; ASTRA-sim ships no GPT trace at 518bd51).

ASTRA-sim runs each twice: with the shipped system config ``Ring_4chunks.json`` and with it at
``preferred-dataset-splits: 1`` (one chunk: the textbook pipeline-free ring that flowherd's
fluid ring is). "agree" is |flowherd / ASTRA-sim(1 chunk) - 1| <= 5%. Where the models differ
(printed under the table): the unaware backend shares no link, so a direct AllToAll's n-1
concurrent sends each get the full rate (n times too fast); the 4-chunk config runs its chunks one
after another, so it pays the per-step latency 4 times; ASTRA-sim adds a local reduction
(3 m / local-mem-bw per reduce step: +10% of a ReduceScatter's bandwidth term, +5% of an
AllReduce's; the "+reduction" column adds it to flowherd's time) and 10 ns of endpoint delay a
message; and ASTRA-sim runs at most one communication op (collective or send) in flight per NPU
(``HardwareResource::is_available``, astra-sim/workload/HardwareResource.cc), so the DP AllReduces,
TP AllReduces and pipeline sends that a Megatron iteration overlaps (and flowherd runs side by
side, sharing the links) wait for each other there. The figures and the table are saved with
benchmarks/record.py.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import record
from flowherd.workload.chakra_schema import CollectiveCommType as CT
from flowherd.workload.chakra_write import export_graph, microbenchmark

HERE = Path(__file__).resolve().parent
RESNET = HERE / "data" / "astra" / "Resnet50_DataParallel.txt"
SHIPPED = "examples/workload/microbenchmarks"  # under the ASTRA-sim source tree
OPS = {"all_reduce": CT.ALL_REDUCE, "all_gather": CT.ALL_GATHER, "reduce_scatter": CT.REDUCE_SCATTER,
       "all_to_all": CT.ALL_TO_ALL}
SYSTEM = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
          "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
          "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
          "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
          "local-mem-bw": 1600, "boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900}


def flowherd_time_s(trace_dir: Path, a2a_direct: bool = True) -> float:
    """One pass of the ETs on N GPUs around one switch (module docstring), seconds."""
    from flowherd.cluster.executor import CollectiveCache, add_graph, prepare_graph
    from flowherd.collectives.ops import Op
    from flowherd.engine.core import Engine
    from flowherd.fabric.builder import FabricBuilder
    from flowherd.fabric.core import LinkKind, NodeKind
    from flowherd.routing.policies import make_router
    from flowherd.units import GiB, us
    from flowherd.workload.chakra_job import load_chakra_graph

    graph = load_chakra_graph(trace_dir)
    n = graph.world_size
    b = FabricBuilder(f"switch-{n}")
    gpus = b.add_gpus(servers=np.arange(n), gpu_type=["h100"] * n)
    sw = b.add_nodes(NodeKind.SWITCH, 1, tier=2)
    b.connect(gpus, np.repeat(sw, n), 50 * GiB, 1 * us, LinkKind.NETWORK)
    fab = b.build()
    router = make_router("shortest", fab)
    class RingCache(CollectiveCache):
        """Rings, as ASTRA-sim's system config runs them; AllToAll and send/receive direct."""

        def plan(self, coll):
            self.algorithm = "direct" if coll.op in (Op.ALLTOALL, Op.SENDRECV) and a2a_direct else "ring"
            return super().plan(coll)

    prepared = prepare_graph(graph, np.arange(n), RingCache(fab, router, latency_model="fabric"))
    engine = Engine(fab, router, record_flows=False)
    ends: list[float] = []
    add_graph(engine, prepared, fidelity="collective", at_s=0.0, on_done=lambda _c, t: ends.append(t))
    engine.run()
    return ends[0]


def astra_time_s(binary: Path, trace_dir: Path, prefix: str, n: int, chunks: int, work: Path,
                 a2a: str = "ring") -> float:
    """ASTRA-sim's simulated time (the latest "sys[i] finished, X cycles", 1 cycle = 1 ns)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "network.yml").write_text(f"topology: [ Switch ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\n"
                                      "latency: [ 1000.0 ]\n")
    (work / "system.json").write_text(json.dumps({**SYSTEM, "preferred-dataset-splits": chunks,
                                                  "all-to-all-implementation": [a2a]}))
    (work / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    cmd = [str(binary), f"--workload-configuration={trace_dir / prefix}",
           f"--system-configuration={work / 'system.json'}",
           f"--remote-memory-configuration={work / 'memory.json'}",
           f"--network-configuration={work / 'network.yml'}"]
    cg = trace_dir / "comm_group.json"
    if cg.is_file():
        cmd.append(f"--comm-group-configuration={cg}")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=work)
    cycles = [int(x) for x in re.findall(r"sys\[\d+\] finished, (\d+) cycles", out.stdout)]
    # every rank finished: the time is known (518bd51 may abort in its teardown after the
    # statistics, "malloc_consolidate(): unaligned fastbin chunk", on traces with send/receive)
    if len(cycles) != n:
        raise SystemExit(f"{binary.name} on {trace_dir}: exit {out.returncode}, {len(cycles)} of {n} ranks "
                         f"finished: {(out.stdout + out.stderr)[-400:]}")
    return max(cycles) * 1e-9


def reduction_s(work: str, n: int, size_bytes: float) -> float:
    """ASTRA-sim's local reduction on one chunk's ring: 3 m / local-mem-bw per reduce step, n - 1
    steps of m = S / n (astra_sim_analytical.md section 4; 1600 GB/s, GB = 10^9)."""
    if work not in ("all_reduce", "reduce_scatter"):
        return 0.0
    return (n - 1) * 3 * (size_bytes // n) / 1600e9


def cases(which: list[str], src: Path | None, root: Path) -> list[tuple[str, str, int, Path, str]]:
    """(case, workload, N, trace directory, file prefix)."""
    out = []
    if "micro" in which:
        for op, ct in OPS.items():
            for n in (4, 8, 16):
                shipped = src / SHIPPED / op / f"{n}npus_1MB" if src else None
                d = shipped if shipped and shipped.is_dir() else \
                    microbenchmark(root / op / f"{n}_1", ct, n, 1)
                out.append((f"{op} 1 MB" + (" (shipped)" if d == shipped else ""), op, n, d, op))
            for n in (8, 16, 64):
                out.append((f"{op} 64 MiB", op, n, microbenchmark(root / op / f"{n}_64", ct, n, 64), op))
        for n in (8, 16, 64):  # ASTRA-sim's direct AllToAll, flowherd's algorithm
            d = microbenchmark(root / "all_to_all" / f"{n}_64", CT.ALL_TO_ALL, n, 64)
            out.append(("all_to_all 64 MiB, direct", "all_to_all_direct", n, d, "all_to_all"))
    if "resnet" in which:
        from flowherd.workload.chakra_text import text_ets

        for n in (8, 16):
            d = root / f"resnet50_{n}"
            d.mkdir(parents=True, exist_ok=True)
            for r, et in enumerate(text_ets(RESNET, n)):
                (d / f"resnet50.{r}.et").write_bytes(et)
            out.append(("ResNet-50 DP (TextConverter)", "resnet50", n, d, "resnet50"))
    if "gpt" in which:
        from flowherd.workload import Granularity, TrainingJob

        for tp, pp, dp in ((4, 1, 1), (4, 2, 1), (4, 1, 2), (4, 2, 2)):
            n = tp * pp * dp
            job = TrainingJob(model="llama3-8b", gpus=n, tp=tp, pp=pp, seq_len=2048, micro_batch=1,
                              global_batch=2 * dp)
            d = export_graph(job.iteration_graph(Granularity.STAGE), root / f"gpt{tp}{pp}{dp}", prefix="gpt")
            out.append((f"GPT tp{tp} pp{pp} dp{dp} (Megatron ETs)", "gpt", n, d, "gpt"))
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--astra", type=Path, required=True,
                    help="ASTRA-sim's analytical CMake build directory "
                         "(bin/AstraSim_Analytical_Congestion_Unaware)")
    ap.add_argument("--cases", nargs="+", default=["micro", "resnet", "gpt"],
                    choices=["micro", "resnet", "gpt"])
    args = ap.parse_args(argv)
    binary = args.astra / "bin" / "AstraSim_Analytical_Congestion_Unaware"
    if not binary.is_file():
        raise SystemExit(f"no ASTRA-sim binary {binary} (--astra)")
    src = next((p for p in args.astra.parents if (p / SHIPPED).is_dir()), None)
    rows, agree, total = [], 0, 0
    with tempfile.TemporaryDirectory(prefix="chakra_astra_") as tmp:
        root = Path(tmp)
        print(f"{'case':30s} {'N':>4s} {'ASTRA 4ch ms':>13s} {'ASTRA 1ch ms':>13s} {'flowherd ms':>12s} "
              f"{'vs 1ch':>8s}  agree  {'+reduction':>8s}")
        for name, work, n, d, prefix in cases(args.cases, src, root):
            a2a = "direct" if work == "all_to_all_direct" else "ring"
            a4 = astra_time_s(binary, d, prefix, n, 4, root / "run" / f"{work}-{n}-4", a2a)
            a1 = astra_time_s(binary, d, prefix, n, 1, root / "run" / f"{work}-{n}-1", a2a)
            f = flowherd_time_s(d)
            dev = f / a1 - 1
            ok = abs(dev) <= 0.05
            agree += ok
            total += 1
            size = 64 * 2**20 if "64 MiB" in name else 2**20
            red = f + reduction_s(work, n, size) if "micro" in args.cases and work in OPS else f
            dev_red = red / a1 - 1
            rows.append([name, n, round(a4 * 1e3, 4), round(a1 * 1e3, 4), round(f * 1e3, 4),
                         round(100 * dev, 2), ok, round(100 * dev_red, 2)])
            print(f"{name:30s} {n:4d} {a4 * 1e3:13.4f} {a1 * 1e3:13.4f} {f * 1e3:12.4f} {100 * dev:+7.2f}%  "
                  f"{'yes' if ok else 'NO ':5s}  {100 * dev_red:+7.2f}%", flush=True)
    print(f"\nwithin 5% of ASTRA-sim (unaware, 1 chunk): {agree} of {total} cases")
    record.save("chakra_astra", {"cases within 5% of ASTRA-sim unaware (1 chunk)":
                                 record.figure(f"{agree}/{total}", target="all where the models agree")},
                tables=[record.table("simulated time of one pass of the ETs, ms",
                                     ["case", "N", "ASTRA-sim unaware 4 chunks", "ASTRA-sim unaware 1 chunk",
                                      "flowherd", "flowherd vs 1 chunk %", "within 5%",
                                      "flowherd + ASTRA-sim's local reduction vs 1 chunk %"], rows)],
                notes="same Chakra ETs, N NPUs around one switch (50 GiB/s, 1 us per link); "
                                 "flowherd ring (AllToAll direct) at path latencies, collective fidelity")


if __name__ == "__main__":
    main(sys.argv[1:])
