"""One job's run inside a cluster simulation: its iterations (simulated, or fast-forwarded in
``phase`` fidelity), its inference batches, and its record (`flowherd.cluster.simulate` for the model)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from flowherd.cluster.executor import PreparedGraph, add_graph, contract_graph, prepare_graph
from flowherd.cluster.quiet import Snapshot, Window, close_window, open_window, snapshot
from flowherd.cluster.records import JobRecord, JobRequest
from flowherd.cluster.service import ServiceRun
from flowherd.engine.core import Engine
from flowherd.fabric.core import LinkKind
from flowherd.routing.base import Routes
from flowherd.workload.inference import InferenceJob
from flowherd.workload.training import Granularity, TrainingJob, rank_to_gpu

if TYPE_CHECKING:  # the cluster run that holds this job run
    from flowherd.cluster.state import ClusterState

__all__ = ["JobRun"]


_NO = np.zeros(0, np.int64)
#: Stretches of the "spread" background rule (`JobRun._probe_mean`).
SPREAD_STRETCHES = 16
SPREAD_BACKGROUND = True  # the probe's other links also keep what the other background leaves


# ---- job runs ------------------------------------------------------------------------------------
class JobRun:
    """A job's mutable state during the run."""

    def __init__(self, sim: ClusterState, index: int, req: JobRequest):
        self.sim = sim
        self.index = index
        self.req = req
        self.spec = req.spec
        self.kind = "inference" if isinstance(req.spec, InferenceJob) else "training"  # or a ChakraJob
        self.gpus = _NO
        self.start_s: float | None = None
        self.finish_s: float | None = None
        self.ends: list[np.ndarray] = []
        self.durations: list[np.ndarray] = []
        self.done_iters = 0
        self.planned = 0
        self.compute_only_s = 0.0
        self.busy_per_iter = 0.0
        self.busy_s = 0.0
        self.solo_s: float | None = None
        self.ff_iters = 0
        self.footprint = _NO
        self.pinned: np.ndarray | None = None
        # fast-forward window: (t0, T, k, generation)
        self.ff: tuple[float, float, int] | None = None
        self.ff_gen = 0
        self.solo_link_idx = _NO
        self.solo_link_bytes = np.zeros(0)
        self.delay_link_idx = _NO
        self.delay_link_bytes = np.zeros(0)
        self.bg_times = np.zeros(0)
        self.graph: PreparedGraph | None = None
        self.groups: tuple[str, ...] | None = None
        self.last_end = 0.0
        self.last_sim_s: float | None = None  # duration of the last simulated iteration
        self.sample_due = True
        self.mean_s = 0.0  # mean iteration time among the background (the "mean" rule)
        self.tpl: Snapshot | None = None  # a quiet window's template (`flowherd.cluster.quiet`)
        self.window: Window | None = None  # the open window's held flows, if quiet
        self.watch = _NO  # links on which a starting job cuts the open window short
        self.ff_link_idx = _NO  # per-iteration bytes of the open window, by link
        self.ff_link_bytes = np.zeros(0)
        self.resumed_s = -1.0  # when a quiet window last put its held flows back
        self.quiet_fails = 0  # looks for a quiet window that failed in a row
        self.quiet_skip = 0  # iterations to simulate before the next look
        self.service = None  # an inference job's `flowherd.cluster.service.ServiceRun`, once started

    # -- training --------------------------------------------------------------------------------
    def start_training(self, now: float) -> None:
        sim = self.sim
        spec: TrainingJob = self.spec  # or a ChakraJob: the same interface
        mapping = rank_to_gpu(spec, self.gpus, sim.gpus_per_server, gpu_server=sim.fabric.gpu_server)
        graph = spec.iteration_graph(Granularity.STAGE)
        self.graph = prepare_graph(graph, mapping, sim.cache)
        self.groups = tuple(t.group for t in graph.tasks)
        self.compute_only_s = self.graph.compute_only_s
        self.busy_per_iter = self.graph.gpu_busy_s
        self.planned = spec.iterations
        self.footprint = self.graph.footprint_links
        self.last_end = now
        if sim.fidelity == "phase":
            self._probe_solo(now)
            if sim.bg is not None and self.footprint.size:
                b = sim.bg
                parts = [b.link_times[b.link_ptr[lnk]:b.link_ptr[lnk + 1]] for lnk in self.footprint.tolist()]
                self.bg_times = np.unique(np.concatenate(parts)) if parts else np.zeros(0)

    def begin_training(self, now: float) -> None:
        self._next_iteration(now)

    def _probe_solo(self, now: float) -> None:
        sim = self.sim
        eng = Engine(sim.fabric, sim.router, record_flows=False)
        ids: list[int] = []
        add_graph(eng, self.graph, fidelity="collective", at_s=0.0, task_ids=ids)
        eng.run()
        self.solo_s = float(eng.now_s)
        if (sim.mean_rule or sim.spread_rule) and self.solo_s > 0:
            self._probe_mean(now)
        lb = eng.link_bytes_now()
        idx = np.flatnonzero(lb)
        self.solo_link_idx, self.solo_link_bytes = idx, lb[idx]
        # the phase form: NVLink-only and compute tasks as delays of their solo durations
        fin = eng.result().coflow_finish_s[ids]
        tasks = self.graph.tasks
        ready = np.array([max((fin[d] for d in t.deps), default=0.0) for t in tasks])
        nvlink = sim.fabric.link_kind == LinkKind.NVLINK
        exclusive = np.array([t.routes is None or bool(np.all(nvlink[t.routes.link])) for t in tasks])
        self.graph = contract_graph(self.graph, fin - ready, exclusive)
        self.groups = None  # contracted: task indices no longer those of the op graph
        # bytes the delays stand for, credited to their links at the end of each simulated iteration
        lb = np.zeros(sim.fabric.num_directed_links)
        for t, ex in zip(tasks, exclusive.tolist(), strict=True):
            if ex and t.routes is not None:
                lens = np.diff(t.routes.ptr)
                np.add.at(lb, t.routes.link, np.repeat(t.size_bytes, lens) * t.routes.frac)
        idx = np.flatnonzero(lb)
        self.delay_link_idx, self.delay_link_bytes = idx, lb[idx]

    def _probe_mean(self, now: float) -> None:
        """The "mean" background rule: the job's mean iteration time among the background flows
        that cross its links, over ``sample_every_s`` of iterations on a private engine.

        The stretch is the one the job meets: the flows that arrive on its links from a warm-up
        before its start (``now``) on. Without the warm-up the probe would start on empty links
        (background flows last seconds, so the population in flight takes as long to build up)
        and measure a faster iteration than any stationary stretch gives.

        Under "spread" the job's run is sampled at ``SPREAD_STRETCHES`` stretches instead of one:
        the first at its start, as "mean", the others spread evenly over the run that one
        predicts (iterations x its mean), each measured the same way, and the job's mean the
        mean of theirs; and each probe's links keep only what the other running jobs and the
        background it leaves out would leave them (`_others_load`). Web-search background is
        heavy-tailed (a few long flows carry most of its bytes), so one stretch of seconds says
        little of a run of half an hour, and a probe whose background flows cross empty links
        elsewhere sees them leave sooner than they do in the cluster: on the scale-a hour one
        10 s stretch gave JCT errors of up to 9.8% against the exact rule, one 180 s stretch up
        to 7.9%, 6 stretches of 60 s 5.2% (all of them too fast), 16 stretches of 10 s with the
        other jobs' and the background's load 3.7% (benchmarks/cluster.py --compare-exact)."""
        first = self._probe_at(now)
        if not self.sim.spread_rule:
            self.mean_s = first
            return
        span = self.spec.iterations * first
        bg = self.sim.bg
        last = float(bg.start_s[-1]) if bg.start_s.size else now  # the background's end: the horizon
        means = [first] + [self._probe_at(min(now + span * i / SPREAD_STRETCHES,
                                              max(now, last - self.sim.bg_spec.sample_every_s)))
                           for i in range(1, SPREAD_STRETCHES)]
        self.mean_s = float(np.mean(means))

    def _probe_at(self, at: float) -> float:
        """Mean iteration time over ``sample_every_s`` of iterations from ``at`` on, among the
        background flows crossing the job's links from a warm-up before ``at`` (`_probe_mean`)."""
        sim, bg = self.sim, self.sim.bg
        n = max(2, min(self.spec.iterations, math.ceil(sim.bg_spec.sample_every_s / self.solo_s)))
        span = 2.0 * n * self.solo_s + 1.0  # more than the probe can last at half speed
        t0 = max(0.0, at - span)  # the warm-up: as long as the probe may last
        warm = at - t0
        eng = Engine(sim.fabric, sim.router, record_flows=False)
        if sim.spread_rule:
            self._others_load(eng, at)
        end = ()
        for i in range(n):
            end = (add_graph(eng, self.graph, fidelity="collective", after=end, name=f"probe{i}",
                             at_s=warm if i == 0 else None),)
        on = np.zeros(sim.fabric.num_directed_links, bool)
        on[self.footprint] = True
        r = bg.routes
        ptr = np.asarray(r.ptr, np.int64)
        hits = np.add.reduceat(on[r.link].astype(np.int64), ptr[:-1]) if r.link.size else np.zeros(0)
        hits[np.diff(ptr) == 0] = 0
        sel = np.flatnonzero((hits > 0) & (bg.start_s >= t0) & (bg.start_s < at + span))
        if sel.size:
            lens = np.diff(ptr)[sel]
            inc = np.repeat(ptr[sel] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
            rows = Routes(ptr=np.concatenate([[0], np.cumsum(lens)]), link=r.link[inc], frac=r.frac[inc],
                          latency_s=r.latency_s[sel])
            eng.add_flows(bg.src_gpu[sel], bg.dst_gpu[sel], bg.size_bytes[sel], at_s=bg.start_s[sel] - t0,
                          routes=rows, name="bg")
        while eng.coflow_finish_s(end[0]) is None:
            eng.run(until_s=eng.now_s + n * self.solo_s)
        return (float(eng.coflow_finish_s(end[0])) - warm) / n

    def _others_load(self, eng: Engine, at: float) -> None:
        """Under "spread": the probe's links keep what the other jobs running at ``at`` leave
        of them (their mean load: solo bytes per iteration over their iteration time) and, off
        the job's own links, what the background the probe does not simulate leaves (its mean
        load over the horizon), so that the probe's background flows are as slow where they
        cross others as in the cluster. The job's own links carry no other job when it
        fast-forwards; the engine has no flow yet, so its capacities can change."""
        load = np.zeros(self.sim.fabric.num_directed_links)
        for r in self.sim.running:
            period = r.mean_s or r.solo_s
            if r is self or not period or not r.solo_link_idx.size or r.start_s is None:
                continue
            if r.start_s + r.planned * period <= at:  # over by then, as predicted
                continue
            load[r.solo_link_idx] += r.solo_link_bytes / period
        if SPREAD_BACKGROUND:  # the background the probe leaves out: its mean load, off the job's links
            bg = self.sim.background_load()
            off = np.ones(load.size, bool)
            off[self.footprint] = False
            load[off] += bg[off]
        if load.any():
            cap = eng._ls.cap  # the fabric's own (read-only) array: replaced, not written
            eng._ls.cap = np.maximum(cap - load, 0.05 * cap)
            eng._ls.cap_eff = eng._ls.cap.copy()

    def _next_iteration(self, now: float) -> None:
        sim = self.sim
        left = self.planned - self.done_iters
        if left <= 0:
            sim.finish(self, now)
            return
        if sim.fidelity == "phase" and self.solo_s is not None and self.solo_s > 0:
            period = self.solo_s
            network = bool(np.any(sim.fabric.link_kind[self.footprint] != LinkKind.NVLINK))
            if sim.sampled and network:
                k = 0 if self.sample_due or self.last_sim_s is None else self._ff_sampled(left)
                period = self.last_sim_s or self.solo_s
            elif (sim.mean_rule or sim.spread_rule) and network:
                k = 0 if np.any(sim.owners[self.footprint] > 1) else left
                period = self.mean_s or self.solo_s
            elif self.resumed_s == now:
                k = 0  # the flows put back now are not on their links yet: simulate
            else:
                k = self._ff_window(now, left)
                if k == 0 and network and sim.quiet and sim.hook is None:
                    k, period = self._quiet(now, left)
            self.tpl = None
            if k >= 1:
                self.ff = (now, period, k)
                if self.window is None:
                    self.watch = self.footprint
                    self.ff_link_idx, self.ff_link_bytes = self.solo_link_idx, self.solo_link_bytes
                self.sample_due = True
                gen = self.ff_gen
                sim.engine.add_coflow(_NO, _NO, _NO, delay_s=k * period, name=f"{self.req.name}/ff",
                                      on_done=lambda _c, t, g=gen: self._ff_done(t, g))
                return
        fid = "collective" if sim.fidelity == "phase" else sim.fidelity
        if sim.quiet and sim.fidelity == "phase" and sim.hook is None and self.solo_s:
            # after failures, look again only every 2, 4 .. 32 iterations (a component that
            # keeps changing rarely gives a window; looking costs a fraction of an iteration)
            if self.quiet_skip > 0:
                self.quiet_skip -= 1
            else:
                self.tpl = snapshot(sim, self.footprint, now)
                if self.tpl is None:
                    self._quiet_failed()
        if sim.hook is not None:  # tasks launched as their dependencies end, the controller asked
            sim.hook.add_graph(self.graph, job=self.req.name, fidelity=fid,
                               name=f"{self.req.name}/it{self.done_iters}", on_done=self._iteration_done,
                               groups=self.groups)
            return
        add_graph(sim.engine, self.graph, fidelity=fid, name=f"{self.req.name}/it{self.done_iters}",
                  on_done=self._iteration_done)

    def _ff_window(self, now: float, left: int) -> int:
        sim = self.sim
        fp = self.footprint
        if fp.size:
            if np.any(sim.owners[fp] > 1) or sim.engine.active_flows_on(fp):
                return 0
            if self.bg_times.size:
                i = int(np.searchsorted(self.bg_times, now, side="left"))
                if i < self.bg_times.size:
                    return min(left, math.floor((self.bg_times[i] - now) / self.solo_s))
        return left

    def _quiet(self, now: float, left: int) -> tuple[int, float]:
        """A quiet window after a clean template (`flowherd.cluster.quiet`): (k, T)."""
        if self.tpl is None:
            return 0, 0.0
        got = open_window(self.sim, self.footprint, self.tpl, now, left,
                          (self.solo_link_idx, self.solo_link_bytes))
        if got is None:
            self._quiet_failed()
            return 0, 0.0
        self.quiet_fails = 0
        k, period, self.window = got
        self.watch = self.window.links
        self.ff_link_idx, self.ff_link_bytes = self.window.link_idx, self.window.link_bytes
        return k, period

    def _quiet_failed(self) -> None:
        self.quiet_fails = min(self.quiet_fails + 1, 5)
        self.quiet_skip = (1 << self.quiet_fails) - 1

    def _ff_sampled(self, left: int) -> int:
        if np.any(self.sim.owners[self.footprint] > 1):
            return 0
        return min(left, max(1, math.floor(self.sim.bg_spec.sample_every_s / self.last_sim_s)))

    def _ff_done(self, t: float, gen: int) -> None:
        if gen != self.ff_gen or self.ff is None:
            return  # a window cut short: its replacement calls back
        self._close_ff(t)
        self._next_iteration(t)

    def _close_ff(self, t: float) -> None:
        t0, T, k = self.ff
        ends = t0 + T * np.arange(1, k + 1)
        ends[-1] = t
        self._record(ends, np.full(k, T))
        self.ff_iters += k
        self.sim.credit_ff(self, t0, t0 + k * T, k)
        self.ff = None
        if self.window is not None:  # the held background flows go on, k iterations' bytes fewer
            if self.window.handle >= 0:
                self.resumed_s = t
            close_window(self.sim, self.window, k)
            self.window = None

    def interrupt(self, now: float) -> None:
        """Another job starts on this job's links: end the window with the current iteration."""
        if self.ff is None:
            return
        t0, T, k = self.ff
        cur = math.floor((now - t0) / T) + 1  # the iteration in progress
        if cur >= k:
            return  # the window ends with this iteration anyway
        self.ff = (t0, T, cur)
        self.ff_gen += 1
        gen = self.ff_gen
        self.sim.engine.add_coflow(_NO, _NO, _NO, delay_s=max(0.0, t0 + cur * T - now),
                                   name=f"{self.req.name}/ff-cut",
                                   on_done=lambda _c, t, g=gen: self._ff_done(t, g))

    def _iteration_done(self, _cid: int, t: float) -> None:
        self.last_sim_s = t - self.last_end
        self.sample_due = False
        if self.delay_link_idx.size:
            self.sim.ff_bytes[self.delay_link_idx] += self.delay_link_bytes
        self._record(np.array([t]), np.array([t - self.last_end]))
        self._next_iteration(t)

    def _record(self, ends: np.ndarray, durations: np.ndarray) -> None:
        self.ends.append(ends)
        self.durations.append(durations)
        self.done_iters += len(ends)
        self.busy_s += self.busy_per_iter * len(ends)
        self.last_end = float(ends[-1])

    # -- inference -------------------------------------------------------------------------------
    def start_inference(self, now: float) -> None:
        self.service = ServiceRun(self, now)

    # -- result ----------------------------------------------------------------------------------
    def record(self, horizon_s: float) -> JobRecord:
        ends = np.concatenate(self.ends) if self.ends else np.zeros(0)
        durs = np.concatenate(self.durations) if self.durations else np.zeros(0)
        busy = self.busy_s
        ff_iters = self.ff_iters
        if self.ff is not None:  # a window still open at the horizon: its iterations so far
            t0, T, k = self.ff
            m = min(k, math.floor((horizon_s - t0) / T + 1e-9))
            if m > 0:
                ends = np.concatenate([ends, t0 + T * np.arange(1, m + 1)])
                durs = np.concatenate([durs, np.full(m, T)])
                busy += self.busy_per_iter * m
                ff_iters += m
        if self.kind == "inference" and ends.size:
            order = np.argsort(ends, kind="stable")
            ends, durs = ends[order], durs[order]
        return JobRecord(name=self.req.name, tenant=self.req.tenant, kind=self.kind,
                         submit_s=float(self.req.submit_s), start_s=self.start_s, finish_s=self.finish_s,
                         gpus=tuple(int(g) for g in self.gpus), iterations_planned=int(self.planned),
                         iteration_end_s=ends, iteration_s=durs,
                         compute_only_iteration_s=float(self.compute_only_s), solo_iteration_s=self.solo_s,
                         gpu_busy_s=float(busy), fast_forwarded_iterations=int(ff_iters),
                         footprint_links=np.asarray(self.footprint, np.int64),
                         service=None if self.service is None else self.service.record())


