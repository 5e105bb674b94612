"""nccl-tests style tables of simulated collectives on DGX H100 servers, beside NCCL 2.30's model.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/nccl_tests.py [--quick] [--servers 1,2,8,32]
[--ops allreduce,...] [--sizes 1MiB,1GiB] [--no-agreement]``.

For each op and server count it prints, per size, what ``all_reduce_perf`` & co. print (size,
time, algbw, busbw) for the `step` and the `collective` fidelity, the algorithm, protocol and
channels `auto` chose (`flowherd.collectives.select`, NCCL 2.30.7's tuning model on the fabric's
graph), the model's time and busbw, and simulated / model time ratios. The fabric is the
DGX SuperPOD H100 preset (8 H100, 8 x 400 Gb/s NDR NICs, NVSwitch with NVLS, rail-optimized);
the GPUs are the first ``8 x servers`` (whole servers, packed).

Published nccl-tests AllReduce busbw on H100 servers (8 GPUs, 8 x 400 Gb/s NICs) it holds the
large-message rows against (`PUBLISHED_ALLREDUCE_BUSBW`, GB/s):

* 1 server, NVLS: ~480 (NVIDIA/nccl-tests#212, NCCL maintainer sjeaugey: "On 8 GPUs, you should
  reach a peak busBw of ~480GB/s"); 476 "in the expected range" (nccl-tests#290, AddyLaddy);
  479.72 at 8 GiB (github.com/ZiyanIshani/vpbenchmarking, results/nccl/, NCCL 2.24.3).
* 2 servers, NVLS on: 430 (NVIDIA/nccl#1221: 8 x H100, 8 x 400G RoCE, NCCL 2.19.3, "the bus BW
  will upgraded from 330GB to 430GB" with NCCL_NVLS_ENABLE=1 on one or two nodes); ~470
  (NVIDIA/nccl#2409, 2 x 8 H100, 8 x 400G RoCE, NCCL 2.29-2.31: "For 2 nodes x 8x400G we would
  expect ~470 GB/s busbw for AllReduce (cf. nccl-tests #309 results)", second hand).
* 4 servers: 320 (nccl#1221, "more than 2" nodes, same with or without NVLS); 330.93 at 8 GiB
  (vpbenchmarking results/nccl_multinode/nccl_multinode_summary.md, 4 x 8 H100, NCCL 2.24.3);
  up to the ring's 368-396 below, which NCCL 2.30 runs there from 1 GiB on.
* 8 and more servers, ring: 368-396 (nccl-tests#290: "46-48GB/s per NIC"; nccl-tests#319,
  AddyLaddy: "~48GB/s from each CX7 NIC ... up to ~396GB/s with the RING protocol"); ~350 on
  248 x 8 H200 (nccl-tests#283, default NCCL_ALGO: "typically measuring around 350G").

Published ring busbw inside one server (AllGather / ReduceScatter run Ring there,
`PUBLISHED_RING_BUSBW_1_SERVER`): 365-370 GB/s (NVIDIA/nccl#1455, 8 x H100 SXM, NCCL_ALGO=RING:
"busbw is about 365-370 GBps when gpus from 2 to 8"; nccl-tests#212, sjeaugey: "NCCL can get an
effective NVLink bandwidth of 370GB/s, which you can observe as BusBw when running non-allreduce
operations").

Since the simulator runs NCCL's channels at NCCL's bandwidth and latency
(`flowherd.collectives.calibrate`), the simulated / model ratios of the ring rows are 1.00 by
construction on this idle fabric; what the table tests there is the ported model against the
published figures, and the schedules' own structure (pipelined trees, chains, NVLSTree's three
phases, AllToAll) where the ratios differ from 1.

Measured mid-size times it prints beside the model (`MEASURED_US`): Broadcast on 4 x 8 H100
(vpbenchmarking results/nccl_multinode/nccl_broadcast_20260224_225706.txt, NCCL 2.24.3, out of
place) and AllReduce on 2 x 8 H20 (same NVLink 4 / NVSwitch and 8 x 400G NDR per node as DGX
H100; NVIDIA/nccl#1244, default algorithm, NVLS on).

The agreement grid (ops x 1-128 servers x 1 KiB-4 GiB) holds the selector, whose inputs come
from the fabric through `flowherd.collectives.topology`, against the tuning model fed NCCL's own
search results for DGX H100 entered by hand (`reference_comm`): it checks the fabric-to-inputs
path, not NCCL itself (the external check compares with a recent NCCL's logged choices).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from flowherd.cluster.collective import simulate_collective
from flowherd.collectives import select
from flowherd.collectives.ops import Collective, Op, busbw_factor
from flowherd.collectives.tuning import MODEL_OPS, Arch, Comm, Graph, choose, tune
from flowherd.fabric.presets import preset
from flowherd.units import GiB, KiB, MiB, format_size, parse_size

OPS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast")
PUBLISHED_ALLREDUCE_BUSBW = {  # servers -> (GB/s low, high, source); module docstring
    1: (476.0, 480.0, "nccl-tests#212, #290; vpbenchmarking 479.72"),
    2: (430.0, 470.0, "nccl#1221; nccl#2409 (nccl-tests#309)"),
    4: (320.0, 396.0, "nccl#1221; vpbenchmarking; ring nccl-tests#290, #319"),
    8: (350.0, 396.0, "nccl-tests#290, #319 (ring); #283 (H200, 248 servers)"),
}
#: (GB/s low, high, source) of ring busbw on one DGX H100 (module docstring)
PUBLISHED_RING_BUSBW_1_SERVER = (365.0, 370.0, "nccl#1455; nccl-tests#212")
#: servers -> op -> size -> measured nccl-tests time, us (module docstring)
MEASURED_US = {
    4: {"broadcast": {1 * MiB: 114.88, 64 * MiB: 451.52, 1 * GiB: 4488.40, 4 * GiB: 15456.4}},
    2: {"allreduce": {4 * MiB: 127.6, 8 * MiB: 146.5, 16 * MiB: 203.0, 32 * MiB: 298.5,
                      64 * MiB: 467.9}},
}


def published(servers: int) -> tuple[float, float, str] | None:
    """The published busbw range for `servers` (8 stands for 8 and more)."""
    return PUBLISHED_ALLREDUCE_BUSBW.get(8 if servers >= 8 else servers)


def reference_comm(servers: int) -> Comm:
    """NCCL's search results for `servers` DGX H100 (8 GPUs, 8 x 400G NICs, NVSwitch), by hand.

    One node: ring/tree 6 x 60 GB/s doubled to 12 x 30 (ncclTopoDupChannels), 24 channels after
    ncclTopoPostset; NVLS 8 heads at 40 GB/s, bwInter raised to 60 (pass 2); 16 NVLS channels.
    Several: one ring channel per NIC at 48 GB/s (sm90SpeedArrayInter[0]; no dup: bw < 50 and
    > 4 channels), found with crossNic 2 and sameChannels 0 (search.cc), 16 after Postset;
    the tree the same 8 x 48 but NCCL_TOPO_PATTERN_TREE (the
    balanced tree needs two GPUs on one NIC; Hopper falls back to the simpler tree, search.cc),
    so Tree bandwidth x 0.85; NVLS 8 heads at 40 / 48 GB/s. (NCCL 2.30.7, commit 5067397c.)
    """
    n = 8 * servers
    if servers == 1:
        ring = Graph(n_channels=12, bw_intra=30.0, bw_inter=30.0)
        nvls = Graph(n_channels=8, bw_intra=40.0, bw_inter=60.0, same_channels=False)
        ch = 24
    else:
        ring = Graph(n_channels=8, bw_intra=48.0, bw_inter=48.0, same_channels=False)
        nvls = Graph(n_channels=8, bw_intra=40.0, bw_inter=48.0, same_channels=False)
        ch = 16
    tree = Graph(n_channels=ring.n_channels, bw_intra=ring.bw_intra, bw_inter=ring.bw_inter,
                 simple_tree=servers > 1)
    return Comm(n_ranks=n, n_nodes=servers, arch=Arch.HOPPER, n_channels=ch, nvls_channels=16,
                nvls_support=True, local_ranks=8,
                graphs={"ring": ring, "tree": tree, "pat": tree, "nvls": nvls, "nvlstree": nvls})


def agreement(fabric, servers=(1, 2, 4, 8, 16, 32, 64, 128)) -> tuple[int, int, list[str]]:
    """Cells where `select` on the fabric picks the reference model's (algorithm, protocol)."""
    sizes = [KiB * 4**k for k in range(12)]  # 1 KiB .. 4 GiB
    same, total, misses = 0, 0, []
    for s in servers:
        ref = reference_comm(s)
        tables = tune(ref)
        gpus = range(8 * s)
        for op in MODEL_OPS:
            for size in sizes:
                want = choose(ref, tables, op, size)
                got = select(fabric, gpus, op.value, size)
                total += 1
                if (got.algorithm, got.protocol) == (want.algorithm, want.protocol):
                    same += 1
                else:
                    misses.append(f"{op.value} {s} servers {format_size(size)}: "
                                  f"{got.algorithm}/{got.protocol} vs {want.algorithm}/{want.protocol}")
    return same, total, misses


def table(fabric, op: str, servers: int, sizes: list[int], fidelities: list[str]) -> list[dict]:
    n = 8 * servers
    rows = []
    print(f"\n# {op} on {servers} DGX H100 server(s), {n} GPUs")
    head = (f"{'size':>9} {'algorithm':>10} {'proto':>6} {'ch':>3} "
            + "".join(f"{'time ' + f[:4]:>11} {'algbw':>7} {'busbw':>7} " for f in fidelities)
            + f"{'model us':>10} {'busbw':>7} " + "".join(f"{f[:4] + '/mdl':>9}" for f in fidelities)
            + f"{'wall s':>7}")
    print(head)
    for size in sizes:
        if op == "alltoall" and n == 1:
            continue
        coll = Collective(op=op, gpus=range(n), size_bytes=size)
        sel = select(fabric, coll.gpus, op, size)
        row = dict(op=op, servers=servers, size=size, algorithm=sel.algorithm, protocol=sel.protocol,
                   channels=sel.channels, model_s=sel.predicted_time_s)
        line = f"{format_size(size):>9} "
        cells = ""
        t0 = time.perf_counter()
        for fid in fidelities:
            res = simulate_collective(fabric, coll, fidelity=fid)
            row[fid] = res.time_s
            row["algorithm_run"] = res.algorithm
            cells += (f"{res.time_s * 1e6:11.1f} {res.algbw_bytes_per_s / 1e9:7.1f} "
                      f"{res.busbw_bytes_per_s / 1e9:7.1f} ")
        wall = time.perf_counter() - t0
        mbus = size / sel.predicted_time_s * busbw_factor(Op(op), n) / 1e9
        line += (f"{row['algorithm_run']:>10} {sel.protocol:>6} {sel.channels:>3} {cells}"
                 f"{sel.predicted_time_s * 1e6:10.1f} {mbus:7.1f} "
                 + "".join(f"{row[f] / sel.predicted_time_s:9.2f}" for f in fidelities)
                 + f"{wall:7.1f}")
        print(line, flush=True)
        row["model_busbw"] = mbus
        row["busbw"] = {f: size / row[f] * busbw_factor(Op(op), n) / 1e9 for f in fidelities}
        rows.append(row)
    return rows


def measured(fabric, fidelities: list[str]) -> None:
    """Simulated and model times beside the measured ones of `MEASURED_US`."""
    print("\n# measured nccl-tests times (us) vs simulated and model (module docstring)")
    for servers, ops in MEASURED_US.items():
        for op, by_size in ops.items():
            for size, t_us in by_size.items():
                coll = Collective(op=op, gpus=range(8 * servers), size_bytes=size)
                sel = select(fabric, coll.gpus, op, size)
                sims = {f: simulate_collective(fabric, coll, fidelity=f).time_s * 1e6
                        for f in fidelities}
                cells = " ".join(f"{f} {v:8.1f} ({v / t_us:.2f})" for f, v in sims.items())
                print(f"{op:>10} {servers} servers {format_size(size):>8} {sel.algorithm:>8}/"
                      f"{sel.protocol:<6}: measured {t_us:8.1f}; {cells}; model "
                      f"{sel.predicted_time_s * 1e6:8.1f} ({sel.predicted_time_s * 1e6 / t_us:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few sizes, 1/2/8 servers (minutes)")
    ap.add_argument("--servers", default=None, help="comma-separated server counts (1,2,8,32)")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--sizes", default=None, help="comma-separated sizes (default 1MiB..4GiB)")
    ap.add_argument("--fidelities", default="step,collective")
    ap.add_argument("--no-agreement", action="store_true")
    args = ap.parse_args()
    servers = [int(s) for s in (args.servers or ("1,2,8" if args.quick else "1,2,8,32")).split(",")]
    if args.sizes:
        sizes = [parse_size(s, field="--sizes") for s in args.sizes.split(",")]
    elif args.quick:
        sizes = [1 * MiB, 64 * MiB, 1 * GiB, 4 * GiB]
    else:
        sizes = [MiB * 4**k for k in range(7)]  # 1 MiB .. 4 GiB
    fidelities = args.fidelities.split(",")
    fabric = preset("dgx-superpod-h100-4su" if max(servers) > 32 else "dgx-superpod-h100-1su")
    rows = []
    for op in args.ops.split(","):
        for s in servers:
            rows += table(fabric, op, s, sizes, fidelities)
    print("\n# large-message AllReduce busbw (GB/s): simulated vs ported model vs published")
    for r in rows:
        if r["op"] != "allreduce" or r["size"] < GiB:
            continue
        pub = published(r["servers"])
        sim = " ".join(f"{f} {r['busbw'][f]:.0f}" for f in fidelities)
        vs_model = " ".join(f"{f} {r['busbw'][f] / r['model_busbw'] - 1:+.1%}" for f in fidelities)
        line = (f"{r['servers']:3d} servers {format_size(r['size']):>7} {r['algorithm']:>9}: "
                f"{sim}; model {r['model_busbw']:.0f} ({vs_model})")
        if pub:
            mid = (pub[0] + pub[1]) / 2
            vs_pub = " ".join(f"{f} {r['busbw'][f] / mid - 1:+.1%}" for f in fidelities)
            line += (f"; published {pub[0]:.0f}-{pub[1]:.0f} ({pub[2]}): {vs_pub} of the mid, "
                     f"model {r['model_busbw'] / mid - 1:+.1%}")
        print(line)
    lo, hi, src = PUBLISHED_RING_BUSBW_1_SERVER
    print(f"\n# one server, ring busbw (GB/s) at >= 1 GiB vs published {lo:.0f}-{hi:.0f} ({src})")
    for r in rows:
        if r["servers"] != 1 or r["size"] < GiB or r["algorithm"] != "ring":
            continue
        sim = " ".join(f"{f} {r['busbw'][f]:.0f} ({r['busbw'][f] / ((lo + hi) / 2) - 1:+.1%})"
                       for f in fidelities)
        print(f"{r['op']:>13} {format_size(r['size']):>7}: {sim}; model {r['model_busbw']:.0f}")
    measured(fabric, fidelities)
    print("\n# simulated / model time: median (min-max) per op and server count")
    for op in args.ops.split(","):
        for s in servers:
            cells = [r for r in rows if r["op"] == op and r["servers"] == s and r["model_s"]]
            if not cells:
                continue
            parts = []
            for f in fidelities:
                q = np.array([r[f] / r["model_s"] for r in cells])
                parts.append(f"{f} {np.median(q):.2f} ({q.min():.2f}-{q.max():.2f})")
            print(f"{op:>13} {s:3d} servers: " + "; ".join(parts))
    ratios = [r[f] / r["model_s"] for r in rows for f in fidelities if r["model_s"]]
    if ratios:
        print(f"\nmedian simulated / model time over {len(ratios)} cells: {np.median(ratios):.2f}")
        cells = sorted(((r[f] / r["model_s"], r, f) for r in rows for f in fidelities
                        if r["model_s"]), key=lambda c: -abs(np.log(c[0])))
        print("worst cells (simulated / model time):")
        for q, r, f in cells[:8]:
            print(f"  {q:5.2f}  {r['op']} {r['servers']} servers {format_size(r['size'])} "
                  f"{r['algorithm']}/{r['protocol']} {f}")
    if not args.no_agreement:
        fab = preset("dgx-superpod-h100-4su")
        same, total, misses = agreement(fab)
        print(f"\nselector vs ported model (ops x 1-128 servers x 1 KiB-4 GiB): {same}/{total} = "
              f"{same / total:.1%} agree")
        for m in misses[:10]:
            print("  differs:", m)


if __name__ == "__main__":
    main()
