"""An inference service inside a cluster run: its requests, prefill batches, KV-cache transfers,
decode steps, and its record (`flowherd.cluster.simulate` for the run around it).

Requests arrive by the service's Poisson process (`InferenceJob.request_arrivals`) and are
grouped into prefill batches (`InferenceJob.batch_requests`); batch ``b`` runs on prefill
replica ``b mod instances``, each replica serving its batches one at a time, in order. Then:

* **Disaggregated** (DistServe, Splitwise): the batch's KV cache crosses the network to decode
  replica ``b mod decode_instances`` (`InferenceJob.kv_transfer_graph`), and its requests join
  that replica's running batch. A decode replica runs *continuous batching* (Orca, OSDI'22; vLLM
  and TensorRT-LLM's in-flight batching): each step generates one token for every request it
  holds, at most ``max_batch`` of them; a request joins at the first step boundary after its KV
  cache landed (waiting in order while the replica is full) and leaves after its last token. A
  step of ``n`` requests lasts the time one decode step of ``n`` sequences (at the mean context,
  `InferenceJob.decode_graph`) takes alone on the fabric, measured once per ``n`` on a private
  engine: its tensor-parallel collectives stay inside the replica's server (NVLink), so they
  share nothing with the other jobs. (A decode replica spread over servers would put its
  collectives on the network; they are then still timed alone: a documented shortcut.)
* **Colocated**: the batch decodes ``output_tokens`` steps on its own after its prefill
  (`InferenceJob.decode_graph`), the replica's batches one at a time: the shortcut of serving
  without continuous batching.

What a request sees: its *first token* reaches the client when its KV cache has landed on its
decode replica (disaggregated: the decode replica streams every token, as vLLM's and
TensorRT-LLM's disaggregated servers do, so the transfer sits inside the time to first token) or
when its prefill ends (colocated); its *last token* at the end of its ``output_tokens - 1``-th
decode step (the prefill made the first). `ServiceRecord` keeps both per request, and what the
steps cost: execution time (each prefill, transfer and decode step from its start to its end,
never the wait for a replica) and the compute inside it, so that the communication share of a
service counts no queueing.

Capacity (`ServiceRecord.capacity_per_s`): the requests per second each pool serves with full
batches at its steps' times alone (prefill replicas ``max_batch`` prompts per prefill, the KV
transfers of such a batch, decode replicas ``max_batch`` requests per ``output_tokens - 1``
steps), the smallest of them. A service offered more has queues that grow for as long as it
runs: its latencies then measure the horizon, not the service, and the experiments layer warns.

A controller sees the service's KV transfers (`ControlHook.watch_transfer`): from the moment
their prefill starts (with the time its prefill takes alone) to their end.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from flowherd.cluster.executor import PreparedGraph, add_graph, prepare_graph
from flowherd.cluster.records import ServiceRecord
from flowherd.engine.core import Engine
from flowherd.workload.inference import InferenceJob
from flowherd.workload.training import rank_to_gpu

__all__ = ["ServiceRun"]

_NO = np.zeros(0, np.int64)


class _Decoder:
    """One decode replica under continuous batching."""

    __slots__ = ("busy", "index", "running", "step", "waiting")

    def __init__(self, index: int):
        self.index = index
        self.waiting: deque[int] = deque()  # request ids whose KV cache has landed, in order
        self.running: list[int] = []
        self.busy = False
        self.step = (0.0, 0.0, 0.0)  # the step in flight: seconds, compute seconds, GPU-seconds


class ServiceRun:
    """An inference service's mutable state during the run (module docstring)."""

    def __init__(self, run: Any, now: float):
        # ``run``: the `flowherd.cluster.job_run.JobRun` that holds the service (which imports this
        # module: named here by what is used of it, to keep the imports one way)
        sim, spec = run.sim, run.spec
        assert isinstance(spec, InferenceJob)
        self.run, self.sim, self.spec = run, sim, spec
        self.name = run.req.name
        self.mapping = rank_to_gpu(spec, run.gpus, sim.gpus_per_server, gpu_server=sim.fabric.gpu_server)
        arr = np.sort(spec.request_arrivals(sim.job_rng(run.index)) - spec.submit_s + now)
        closes, sizes = spec.batch_requests(arr)
        nb, nr = len(closes), len(arr)
        self.arrival_s = arr
        self.batch = np.repeat(np.arange(nb), sizes).astype(np.int64)
        self.first_of_batch = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if nb else _NO
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.left = self.sizes.copy()  # requests of each batch without their last token
        self.first_token_s = np.full(nr, np.nan)
        self.last_token_s = np.full(nr, np.nan)
        self.generated = np.zeros(nr, np.int64)  # decode steps each request took part in
        self.batch_close_s = np.asarray(closes, dtype=np.float64)
        self.prefill_start_s = np.full(nb, np.nan)
        self.prefill_end_s = np.full(nb, np.nan)
        self.kv_end_s = np.full(nb, np.nan)
        self.exec_s = 0.0
        self.compute_s = 0.0
        self.window_end = now + spec.duration_s
        self.requests_left = nr
        self.fid = "collective" if sim.fidelity == "phase" else sim.fidelity
        self._probe: Engine | None = None
        self._solo: dict[tuple, float] = {}
        self._graphs: dict[tuple, PreparedGraph] = {}
        self._step_of: dict[int, tuple[float, float, float]] = {}
        self.kv_coflows: dict[int, list[int]] = {}  # batch -> its KV transfer's coflows (with a hook)
        self.next_on_replica: dict[int, int] = {}  # batch -> the next batch on its prefill replica
        n_dec = spec.decode_instances if spec.disaggregated else spec.instances
        self.decoders = [_Decoder(i) for i in range(n_dec)]
        run.planned = nb
        self._schedule(now)
        self.capacity_per_s, self.capacity_note = self._capacity()

    # -- graphs and their times alone -------------------------------------------------------------
    def _graph(self, key: tuple, make, *args, **kw) -> PreparedGraph:
        if key not in self._graphs:
            self._graphs[key] = prepare_graph(make(*args, **kw), self.mapping, self.sim.cache)
        return self._graphs[key]

    def _alone_s(self, key: tuple, graph: PreparedGraph) -> float:
        """The time ``graph`` takes alone on the fabric (on a private engine, once per key)."""
        if key not in self._solo:
            if self._probe is None:
                self._probe = Engine(self.sim.fabric, self.sim.router, record_flows=False)
            eng = self._probe
            t0 = eng.now_s
            add_graph(eng, graph, fidelity="collective")
            eng.run()
            self._solo[key] = float(eng.now_s - t0)
        return self._solo[key]

    def _decode_step(self, n: int) -> tuple[float, float, float]:
        """One continuous-batching decode step of ``n`` requests: (seconds, compute seconds,
        GPU-seconds of compute)."""
        if n not in self._step_of:
            g = self._graph(("d1", n), self.spec.decode_graph, n, replica=0, steps=1)
            self._step_of[n] = (self._alone_s(("d1", n), g), g.compute_only_s, g.gpu_busy_s)
        return self._step_of[n]

    # -- the prefills and transfers, added ahead -------------------------------------------------
    def _schedule(self, now: float) -> None:
        sim, spec, eng = self.sim, self.spec, self.sim.engine
        last_prefill: dict[int, int] = {}
        last_decode: dict[int, int] = {}
        last_seen: dict[int, int] = {}  # prefill replica -> its last batch so far
        fp: list[np.ndarray] = []
        co: list[float] = []
        for b, (close, size) in enumerate(zip(self.batch_close_s.tolist(), self.sizes.tolist(), strict=True)):
            size = int(size)
            p, d = b % spec.instances, b % len(self.decoders)
            pg = self._graph(("p", size, p), spec.prefill_graph, size, replica=p)
            fp.append(pg.footprint_links)
            ids: list[int] = []
            after = (last_prefill[p],) if p in last_prefill else ()
            end = add_graph(eng, pg, fidelity=self.fid, at_s=close, after=after, task_ids=ids,
                            name=f"{self.name}/b{b}/prefill",
                            on_done=lambda _c, t, b=b, ids=ids, pg=pg:
                            self._prefill_done(b, t, ids[0] if ids else None, pg))
            last_prefill[p] = end
            if spec.disaggregated:
                kg = self._graph(("k", size, p, d), spec.kv_transfer_graph, size, src=p, dst=d)
                fp.append(kg.footprint_links)
                kids: list[int] = []
                add_graph(eng, kg, fidelity=self.fid, after=(end,), task_ids=kids,
                          name=f"{self.name}/b{b}/kv", on_done=lambda _c, t, b=b: self._kv_done(b, t))
                if sim.hook is not None and self.fid != "step":
                    # the first batch of a replica begins at its close; a later one when the one
                    # before it ends (`_prefill_done` tells the hook then)
                    expect = close + self._alone_s(("p", size, p), pg) if p not in last_seen else None
                    self.kv_coflows[b] = [cid for cid, task in zip(kids, kg.tasks, strict=True)
                                          if task.routes is not None]
                    for cid, task in zip(kids, kg.tasks, strict=True):
                        if task.routes is not None:
                            sim.hook.watch_transfer(cid, job=self.name, name=f"{self.name}/b{b}/kv",
                                                    routes=task.routes, size_bytes=task.size_bytes,
                                                    not_before_s=close, expected_start_s=expect)
                if p in last_seen:
                    self.next_on_replica[last_seen[p]] = b
                last_seen[p] = b
                _s, c, _g = self._decode_step(size)
                co.append(pg.compute_only_s + max(spec.output_tokens - 1, 0) * c)
            else:
                dg = self._graph(("d", size, d), spec.decode_graph, size, replica=d, steps=spec.output_tokens)
                fp.append(dg.footprint_links)
                dids: list[int] = []
                after = (end,) + ((last_decode[d],) if d in last_decode else ())
                last_decode[d] = add_graph(eng, dg, fidelity=self.fid, after=after, task_ids=dids,
                                           name=f"{self.name}/b{b}/decode",
                                           on_done=lambda _c, t, b=b, ids=dids, dg=dg:
                                           self._decoded(b, t, ids[0] if ids else None, dg))
                co.append(pg.compute_only_s + dg.compute_only_s)
        self.run.compute_only_s = float(np.mean(co)) if co else 0.0
        self.run.footprint = np.unique(np.concatenate(fp)) if fp else _NO
        # the service ends when its window is over (and its last request is done)
        eng.add_coflow(_NO, _NO, _NO, at_s=self.window_end, name=f"{self.name}/window",
                       on_done=lambda _c, t: self._maybe_end(t))

    def _requests(self, b: int) -> range:
        lo = int(self.first_of_batch[b])
        return range(lo, lo + int(self.sizes[b]))

    def _prefill_done(self, b: int, t: float, first: int | None, pg: PreparedGraph) -> None:
        # a compute task is a pure delay: the engine starts it when its delay is over
        start = self.sim.engine.coflow_start_s(first) if first is not None else None
        start = t if start is None else start - pg.tasks[0].delay_s
        self.prefill_start_s[b], self.prefill_end_s[b] = start, t
        self.exec_s += t - start
        self.compute_s += pg.compute_only_s
        self.run.busy_s += pg.gpu_busy_s
        if not self.spec.disaggregated:
            self.first_token_s[self._requests(b).start:self._requests(b).stop] = t
        nxt = self.next_on_replica.get(b)
        if nxt is not None and self.kv_coflows.get(nxt):
            size, p = int(self.sizes[nxt]), nxt % self.spec.instances
            begin = max(float(self.batch_close_s[nxt]), t)
            when = begin + self._alone_s(("p", size, p), self._graphs[("p", size, p)])
            for cid in self.kv_coflows[nxt]:
                self.sim.hook.expect_transfer(cid, when)

    def _kv_done(self, b: int, t: float) -> None:
        self.kv_end_s[b] = t
        self.exec_s += t - self.prefill_end_s[b]
        reqs = self._requests(b)
        self.first_token_s[reqs.start:reqs.stop] = t
        if self.spec.output_tokens <= 1:
            for r in reqs:
                self._request_done(r, t)
            return
        dec = self.decoders[b % len(self.decoders)]
        dec.waiting.extend(reqs)
        if not dec.busy:
            self._step(dec, t)

    # -- continuous batching ----------------------------------------------------------------------
    def _step(self, dec: _Decoder, t: float) -> None:
        while dec.waiting and len(dec.running) < self.spec.max_batch:
            dec.running.append(dec.waiting.popleft())
        if not dec.running:
            dec.busy = False
            return
        dec.busy = True
        dec.step = self._decode_step(len(dec.running))
        self.sim.engine.add_coflow(_NO, _NO, _NO, delay_s=dec.step[0], name=f"{self.name}/d{dec.index}/step",
                                   on_done=lambda _c, tt, dec=dec: self._stepped(dec, tt))

    def _stepped(self, dec: _Decoder, t: float) -> None:
        s, c, g = dec.step
        self.exec_s += s
        self.compute_s += c
        self.run.busy_s += g
        last = self.spec.output_tokens - 1
        keep = []
        for r in dec.running:
            self.generated[r] += 1
            if self.generated[r] >= last:
                self._request_done(r, t)
            else:
                keep.append(r)
        dec.running = keep
        self._step(dec, t)

    def _decoded(self, b: int, t: float, first: int | None, dg: PreparedGraph) -> None:
        """A colocated batch's decode ended: every request of it has its last token."""
        start = self.sim.engine.coflow_start_s(first) if first is not None else None
        self.exec_s += t - (t if start is None else start - dg.tasks[0].delay_s)
        self.compute_s += dg.compute_only_s
        self.run.busy_s += dg.gpu_busy_s
        for r in self._requests(b):
            self._request_done(r, t)

    def _request_done(self, r: int, t: float) -> None:
        self.last_token_s[r] = t
        self.requests_left -= 1
        b = int(self.batch[r])
        self.left[b] -= 1
        if self.left[b] == 0:  # the batch's last request: one "iteration" of the service
            run = self.run
            run.ends.append(np.array([t]))
            run.durations.append(np.array([t - self.batch_close_s[b]]))
            run.done_iters += 1
        self._maybe_end(t)

    def _maybe_end(self, t: float) -> None:
        if self.run.finish_s is None and self.requests_left == 0 and t >= self.window_end - 1e-12:
            self.sim.finish(self.run, t)

    # -- capacity and record ----------------------------------------------------------------------
    def _capacity(self) -> tuple[float, str]:
        spec = self.spec
        m = spec.max_batch
        pg = self._graph(("p", m, 0), spec.prefill_graph, m, replica=0)
        t_p = self._alone_s(("p", m, 0), pg)
        pools = [(spec.instances * m / t_p if t_p > 0 else math.inf,
                  f"prefill pool: {spec.instances} replicas x {m} prompts per {1e3 * t_p:.1f} ms prefill")]
        if spec.disaggregated:
            kg = self._graph(("k", m, 0, 0), spec.kv_transfer_graph, m, src=0, dst=0)
            t_k = self._alone_s(("k", m, 0, 0), kg)
            pools.append((spec.instances * m / t_k if t_k > 0 else math.inf,
                          f"KV transfers: {spec.instances} replicas x {m} prompts per {1e3 * t_k:.1f} ms"))
            steps = spec.output_tokens - 1
            t_d = self._decode_step(m)[0]
            if steps > 0 and t_d > 0:
                pools.append((len(self.decoders) * m / (steps * t_d),
                              f"decode pool: {len(self.decoders)} replicas x {m} requests per {steps} steps "
                              f"of {1e3 * t_d:.1f} ms"))
        else:
            dg = self._graph(("d", m, 0), spec.decode_graph, m, replica=0, steps=spec.output_tokens)
            t_d = self._alone_s(("d", m, 0), dg)
            if t_d > 0:
                pools.append((spec.instances * m / t_d,
                              f"decode: {spec.instances} replicas x {m} requests per {1e3 * t_d:.0f} ms "
                              "batch "
                              f"({spec.output_tokens} steps)"))
        rate, note = min(pools, key=lambda x: x[0])
        return float(rate), note

    def record(self) -> ServiceRecord:
        """The service's record so far."""
        return ServiceRecord(arrival_s=self.arrival_s.copy(), batch=self.batch.copy(),
                             first_token_s=self.first_token_s.copy(), last_token_s=self.last_token_s.copy(),
                             output_tokens=int(self.spec.output_tokens),
                             batch_close_s=self.batch_close_s.copy(),
                             prefill_start_s=self.prefill_start_s.copy(),
                             prefill_end_s=self.prefill_end_s.copy(),
                             kv_end_s=self.kv_end_s.copy(), exec_s=float(self.exec_s),
                             compute_s=float(self.compute_s),
                             request_rate_per_s=float(self.spec.request_rate_per_s),
                             capacity_per_s=float(self.capacity_per_s), capacity_note=self.capacity_note)
