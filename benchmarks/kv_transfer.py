"""KV-cache transfer times of disaggregated serving against published measurements.

Two tables:

* **The transfer engine alone.** Mooncake's transfer engine, one thread on one ConnectX-7 400G port,
  1,538 RDMA requests of 1 KiB to 256 KiB (PaddlePaddle/FastDeploy@5d61d1dc,
  fastdeploy/cache_manager/transfer_factory/kvcache_transfer/README.md, "KVTransferManager vs
  Mooncake", Mooncake column), against `InferenceJob.kv_engine_s` on a one-KV-head model whose
  paged blocks are those sizes. The posting cost (`KV_POST_S`) is the mean of the 1-8 KiB rows, the
  cost of a 64 KiB slice (`KV_SLICE_S`, Mooncake's default MC_SLICE_SIZE) the 64 KiB row; 16, 32,
  128 and 256 KiB are held out.
* **Prefill to decode, 128 to 32K prompt tokens.** One request's KV cache from a prefill replica
  to a decode replica on two servers of a leaf-spine fabric with one 400 Gb/s NIC per GPU
  (Llama-3-8B at TP 1, Llama-3-70B at TP 8; FP16; vLLM's 16-token blocks), simulated at collective
  fidelity: the engine's time and the network's, whichever is longer, beside the model without the
  slices' cost (posting beside bytes at the line rate); and, streamed layer by layer during the
  prefill (``kv_layerwise``, the default), what the transfer adds after the prefill ends (kernel-
  model prefill on H100). The published column is empty:
  no published, non-reserved measurement of this curve was found to set beside it.

Usage::

    PYTHONPATH=src python benchmarks/kv_transfer.py            # both tables, 128 .. 32K tokens
    PYTHONPATH=src python benchmarks/kv_transfer.py --quick    # 128, 2K and 32K tokens only
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import record  # benchmarks/record.py
from flowherd.cluster.executor import CollectiveCache, add_graph, prepare_graph
from flowherd.engine.core import Engine
from flowherd.fabric.generators import leaf_spine
from flowherd.routing.policies import make_router
from flowherd.workload import InferenceJob

# FastDeploy's table, Mooncake column: block KiB -> GB/s (one thread, one 400G port, batch 1,538)
ENGINE_GB_S = {1: 1.54, 2: 3.40, 4: 6.95, 8: 12.48, 16: 23.42, 32: 31.58, 64: 38.39, 128: 40.11, 256: 40.71}
CONSTANT_ROWS = {1: "post", 2: "post", 4: "post", 8: "post", 64: "slice"}
ENGINE_SOURCE = ("PaddlePaddle/FastDeploy@5d61d1dc fastdeploy/cache_manager/transfer_factory/"
                 "kvcache_transfer/README.md, 'KVTransferManager vs Mooncake', Mooncake column")
# one KV head of 128 in FP16: 256 bytes per token, layer and K (or V)
ONE_HEAD = {"name": "one-head", "layers": 1, "hidden": 1024, "heads": 8, "kv_heads": 1, "head_dim": 128,
            "ffn_hidden": 4096, "vocab": 32000}
SETTINGS = (("llama3-8b", 1), ("llama3-70b", 8))
LINE_BYTES_PER_S = 50e9  # 400 Gb/s


def engine_rows() -> list[list]:
    """Table 1: the transfer engine's one-thread bandwidth by request size (module docstring)."""
    rows = []
    for kib, published in ENGINE_GB_S.items():
        block_tokens = kib * 1024 // 256
        j = InferenceJob(model=ONE_HEAD, disaggregated=True, decode_instances=1,
                         kv_block_tokens=block_tokens, prompt_tokens=block_tokens * 1538 // 2)
        gb_s = j.kv_bytes(1) / j.kv_engine_s(1) / 1e9
        rows.append([kib, round(gb_s, 2), published, round(100 * (gb_s / published - 1), 1),
                     CONSTANT_ROWS.get(kib, "held out")])
    return rows


def simulate_s(job: InferenceJob, graph=None) -> float:
    """Simulated time of ``graph`` (default: one request's KV transfer, prefill replica 0 -> decode
    replica 0) on two servers, the prefill replica on the first, the decode replica on the second."""
    fab = leaf_spine(servers=2, gpus_per_server=8, leaves=1, spines=1)
    gpus = np.concatenate([fab.servers_gpus(0)[:job.tp], fab.servers_gpus(1)[:job.decode_tp]])
    cache = CollectiveCache(fab, make_router("ecmp", fab))
    g = prepare_graph(job.kv_transfer_graph(1) if graph is None else graph, gpus, cache)
    eng = Engine(fab, make_router("ecmp", fab))
    add_graph(eng, g, fidelity="collective")
    eng.run()
    return eng.now_s


def exposed_layerwise_s(job: InferenceJob) -> float:
    """What a layer-wise transfer adds after the prefill: the prefill, its KV streamed layer by
    layer and one decode step, less the prefill alone and the decode step alone."""
    lw = InferenceJob(**{**_fields(job), "kv_layerwise": True, "output_tokens": 1})
    return (simulate_s(lw, lw.batch_graph(1)) - simulate_s(lw, lw.prefill_graph(1))
            - simulate_s(lw, lw.decode_graph(1, replica=0, steps=1)))


def _fields(job: InferenceJob) -> dict:
    return dict(model=job.model, tp=job.tp, disaggregated=True, decode_instances=1,
                prompt_tokens=job.prompt_tokens, kv_slice_s=job.kv_slice_s)


def transfer_rows(tokens: list[int]) -> list[list]:
    """Table 2: one request's KV transfer from 128 to 32K prompt tokens (module docstring)."""
    rows = []
    for model, tp in SETTINGS:
        for n in tokens:
            kw = dict(model=model, tp=tp, disaggregated=True, decode_instances=1, prompt_tokens=n,
                      kv_layerwise=False)
            j = InferenceJob(**kw)
            free = InferenceJob(**kw, kv_slice_s=0.0)
            per_rank = j.kv_bytes(1) / tp
            rows.append([model, tp, n, round(j.kv_bytes(1) / 2**20, 1), j.kv_descriptors(1),
                         round(per_rank / j.kv_descriptors(1) / 1024, 1), round(1e3 * j.kv_engine_s(1), 3),
                         round(1e3 * per_rank / LINE_BYTES_PER_S, 3), round(1e3 * simulate_s(j), 3),
                         round(1e3 * simulate_s(free), 3), round(1e3 * exposed_layerwise_s(j), 3),
                         "none found"])
    return rows


def show(title: str, cols: list[str], rows: list[list]) -> None:
    print(f"\n{title}")
    w = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]
    print("  ".join(str(c).rjust(w[i]) for i, c in enumerate(cols)))
    for r in rows:
        print("  ".join(str(v).rjust(w[i]) for i, v in enumerate(r)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="128, 2K and 32K prompt tokens only")
    args = ap.parse_args()
    t0 = time.process_time()
    tokens = [128, 2048, 32768] if args.quick else [128 * 2**k for k in range(9)]

    e_cols = ["request KiB", "flowherd GB/s", "published GB/s", "error %", "constant from"]
    e_rows = engine_rows()
    show(f"Transfer engine, one thread, one ConnectX-7 400G port ({ENGINE_SOURCE})", e_cols, e_rows)
    held = [r for r in e_rows if r[4] == "held out"]
    within = sum(abs(r[3]) <= 15 for r in e_rows)
    worst = max(held, key=lambda r: abs(r[3]))

    t_cols = ["model", "TP", "prompt tokens", "KV MiB", "RDMA requests per rank", "KiB per request",
              "engine ms", "line-rate ms", "flowherd ms", "flowherd ms, no slice cost",
              "layer-wise: ms after the prefill",
              "published ms"]
    t_rows = transfer_rows(tokens)
    show("One request's KV transfer, prefill -> decode replica, one 400G NIC per GPU", t_cols, t_rows)
    print("\nNo published, non-reserved measurement of KV-transfer time from 128 to 32K prompt tokens was "
          "found (docs/frameworks.md, 'KV transfers against published measurements'): the published "
          "column is empty.")
    cpu = time.process_time() - t0
    print(f"CPU {cpu:.1f} s")

    figures = {
        "transfer-engine rows within 15% (of 9)": record.figure(within, "rows", target="9", met=within == 9),
        "worst held-out transfer-engine row": record.figure(worst[3], f"% at {worst[0]} KiB",
                                                            target="within 15%", met=abs(worst[3]) <= 15),
        "KV-transfer rows 128-32K tokens against a published curve": record.figure(
            0, "rows", target="within 15% from 128 to 32K tokens", met=False),
    }
    record.save("kv_transfer" + ("_quick" if args.quick else ""), figures,
                tables=[record.table("transfer engine, one thread (" + ENGINE_SOURCE + ")", e_cols, e_rows),
                        record.table("one request's KV transfer, prefill -> decode", t_cols, t_rows)],
                notes="The engine table checks the posting / slice-cost model on a published "
                      "microbenchmark; no published, non-reserved prefill-to-decode curve from 128 to 32K "
                      "prompt tokens was found, so the transfer table has no published column.")


if __name__ == "__main__":
    main()
