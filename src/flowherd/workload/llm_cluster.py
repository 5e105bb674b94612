"""Multi-tenant LLM clusters: job streams drawn from published characterizations of LLM clusters.

`llm_cluster` (plain function of sizes and a seed, as networkx's generators) returns the jobs of a
shared LLM cluster: pretraining, fine-tuning and evaluation jobs arriving over time, and optionally
disaggregated inference services running beside them. Every figure comes from a source:

* **Kinds, sizes, durations**: the Acme clusters Seren and Kalos (Hu et al., "Characterization of
  Large Language Model Development in the Datacenter", NSDI'24), the figures' own data
  (``flowherd/data/traces/acme_figures``, digitized from the vector PDFs the paper's notebook drew
  from the job traces; provenance and licence there). ``profile`` picks the cluster:

  - the share of GPU jobs per workload type (paper Figure 4: Kalos 92.8 % evaluation, 3.2 %
    pretraining, 2.7 % debug, 1.3 % other; Seren 64.9 % evaluation, 14.9 % SFT, 14.6 % other,
    2.9 % MLLM, 1.9 % debug, 0.9 % pretraining). Kinds here: ``pretraining`` (Pretrain, and
    Debug: runs of a pretraining configuration), ``fine-tuning`` (SFT, MLLM, Other),
    ``evaluation`` (Eval);
  - the GPUs of a job: the cluster's CDF of GPUs per job (Figure 2a: Kalos 88 % of GPU jobs on
    1 GPU, 1.0 % on 1,024), each count snapped to the nearest power of two in log space (the
    trace's steps); then its type given its size, ``P(type | n) ~ P(type) P(n | type)`` with
    ``P(n | type)`` from the type's box plot (quartiles, median, whisker ends) read as a quantile
    function, log-linear between (0, low whisker), (1/4, q1), (1/2, median), (3/4, q3), (1, high
    whisker), on the same powers of two (Kalos pretraining: quartiles 256 and 512, median 512).
    The box plots alone miss the sizes beyond their whiskers (the figure hides the fliers: its
    Kalos pretraining box tops at 512 while 1.0 % of all GPU jobs ask 1,024), so the size comes
    from the CDF and the box plots only split it by type; a size no box reaches goes to the
    type whose whiskers come nearest;
  - the duration of a job of a type: the type's duration CDF (2^i seconds, i = 0..21), sampled
    log-linearly between its points (Kalos pretraining: median about 700 s: most runs fail or
    are cancelled early, paper section 5).

* **Shapes**: the parallelism of NVIDIA NeMo 2.0's pretraining recipes (``nemo/collections/llm/
  recipes/*.py``): Llama 3 8B TP 1, CP 2 (``llama3_8b.py``); Llama 3 70B TP 4, PP 4, CP 2, sequence
  parallel (``llama3_70b.py``); GPT-3 175B TP 4, PP 8, sequence 2048 (``gpt3_175b.py``); Mixtral
  8x7B TP 1, PP 4, EP 8 (``mixtral_8x7b.py``); DeepSeek-V3 TP 2, PP 16, EP 64, first / last stage
  3 / 2 layers, sequence 4096 (``deepseek_v3.py``); Llama 3 405B TP 8, PP 16, CP 1 as Meta trained
  it (Llama 3 Herd of Models, arXiv:2407.21783, Table 4). Data parallelism takes the rest;
  expert parallelism is the recipe's, or the largest power of two dividing the data-parallel
  size when the job is smaller than the recipe. Sequence 8192 (4096 / 2048 where the recipe
  says so), micro-batch 1. Left out to keep simulations short: virtual pipeline stages (the
  recipes' 5 / 6 / 8 only reorder a pipeline's micro-batches) and the recipes' global batch of 512:
  ``micro_batches`` (8, at least ``pp``) per data-parallel replica and iteration, as
  `flowherd.workload.TraceMapping` does.
* **Model mix**: the models whose recipe fits the job (model-parallel size ``tp pp cp`` divides
  its GPUs, and the experts' EP at least 8), drawn uniformly (no published mix: an assumption),
  8B and 70B for fine-tuning; a job smaller than every recipe (one GPU) trains Llama 3 8B data
  parallel with a sharded optimizer (ZeRO-1); an evaluation job serves Llama 3 8B (1-8 GPUs) on all its
  GPUs as one replica (`InferenceJob`, ``tp`` = GPUs) for its duration.
* **Arrivals**: Poisson, the rate chosen so that the jobs offer ``load`` times the cluster's
  GPU-seconds per second (``load`` 1: the cluster is exactly full on average; the Acme clusters
  queue: Kalos' GPU jobs waited 214 s on average against 1,260 s of run, ``cluster_summary.csv``).
* **Inference** (``inference_share`` > 0): disaggregated serving (DistServe, OSDI'24; Splitwise,
  ISCA'24): services of Llama 3 70B on TP-8 prefill and decode replicas (``inference_replicas``
  of each), present from time 0 for the whole span, taking ``inference_share`` of the GPUs; each
  request's KV cache crosses the network from its prefill to its decode replica. Requests at
  ``inference_rate_per_s`` per prefill replica, prompts 1,024 tokens, 256 out (the defaults of
  `InferenceJob`). Acme is a training cluster; the serving side is a parameter, not a figure.

Durations become iterations with the job's modelled iteration time alone
(`TrainingJob.estimate_iteration_s`), times ``duration_scale`` (simulations compress time, as the
trace replays do), capped by ``max_iterations``. ``min_gpus`` keeps only jobs of at least that
many GPUs (the jobs the fabric carries: a job inside one server never uses it), by rejection, so
the kept jobs follow the published distribution conditioned on their size.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from flowherd.errors import ConfigError
from flowherd.workload.inference import InferenceJob
from flowherd.workload.training import TrainingJob

__all__ = ["KINDS", "PROFILES", "RECIPES", "AcmeFigures", "Recipe", "acme_figures", "llm_cluster",
           "recipe_shape", "size_and_type_tables"]

PROFILES = ("kalos", "seren")
KINDS = ("pretraining", "fine-tuning", "evaluation", "inference")
# Acme workload type -> kind here (module docstring)
_KIND_OF_TYPE = {"Pretrain": "pretraining", "Debug": "pretraining", "SFT": "fine-tuning",
                 "MLLM": "fine-tuning", "Other": "fine-tuning", "Eval": "evaluation"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    """A model's published parallelism (module docstring, "Shapes").

    Attributes:
        model: Catalog name.
        tp, pp, cp: Tensor, pipeline and context parallel sizes.
        ep: Expert parallel size (1: dense).
        seq_len: Tokens per sequence.
        first_stage_layers, last_stage_layers: Uneven first / last pipeline stages, or None.
        source: Where the shape comes from.
    """

    model: str
    tp: int
    pp: int
    cp: int = 1
    ep: int = 1
    seq_len: int = 8192
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    source: str = ""

    @property
    def model_parallel(self) -> int:
        """GPUs of one data-parallel replica."""
        return self.tp * self.pp * self.cp


RECIPES: dict[str, Recipe] = {r.model: r for r in (
    Recipe(model="llama3-8b", tp=1, pp=1, cp=2, source="NeMo 2.0 recipes/llama3_8b.py"),
    Recipe(model="llama3-70b", tp=4, pp=4, cp=2, source="NeMo 2.0 recipes/llama3_70b.py"),
    Recipe(model="gpt3-175b", tp=4, pp=8, seq_len=2048, source="NeMo 2.0 recipes/gpt3_175b.py"),
    Recipe(model="mixtral-8x7b", tp=1, pp=4, ep=8, source="NeMo 2.0 recipes/mixtral_8x7b.py"),
    Recipe(model="deepseek-v3", tp=2, pp=16, ep=64, seq_len=4096, first_stage_layers=3, last_stage_layers=2,
           source="NeMo 2.0 recipes/deepseek_v3.py"),
    Recipe(model="llama3-405b", tp=8, pp=16, source="Llama 3 Herd of Models, Table 4"),
)}
_FINE_TUNING_MODELS = ("llama3-8b", "llama3-70b")
_MIN_EP = 8  # an MoE job smaller than this expert-parallel size is not drawn


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AcmeFigures:
    """The Acme figures' data (``flowherd/data/traces/acme_figures``), per cluster.

    Attributes:
        count_share: ``{cluster: {type: percent of GPU jobs}}``.
        gpu_time_share: ``{cluster: {type: percent of GPU time}}``.
        box: ``{cluster: {type: (low whisker, q1, median, q3, high whisker)}}`` GPUs.
        duration: ``{cluster: {type: (durations_s, cdf in [0, 1])}}``.
        gpus_cdf: ``{cluster: {weight: (gpus, cdf in [0, 1])}}``, weight "jobs" or "gpu_time".
    """

    count_share: dict[str, dict[str, float]]
    gpu_time_share: dict[str, dict[str, float]]
    box: dict[str, dict[str, tuple[float, ...]]]
    duration: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    gpus_cdf: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]


def _rows(name: str) -> list[dict[str, str]]:
    ref = resources.files("flowherd.data") / "traces" / "acme_figures" / name
    with ref.open("r", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@cache
def acme_figures() -> AcmeFigures:
    """The digitized Acme figures (read once)."""
    count: dict[str, dict[str, float]] = {}
    gtime: dict[str, dict[str, float]] = {}
    for r in _rows("job_types.csv"):
        count.setdefault(r["cluster"].lower(), {})[r["type"]] = float(r["job_count_percent"])
        gtime.setdefault(r["cluster"].lower(), {})[r["type"]] = float(r["gpu_time_percent"])
    box: dict[str, dict[str, tuple[float, ...]]] = {}
    for r in _rows("gpu_num_box.csv"):
        box.setdefault(r["cluster"].lower(), {})[r["type"]] = tuple(
            float(r[k]) for k in ("whisker_low", "q1", "median", "q3", "whisker_high"))
    dur: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in _rows("duration_cdf.csv"):
        dur.setdefault(r["cluster"].lower(), {}).setdefault(r["type"], []).append(
            (float(r["duration_s"]), float(r["cdf_percent"]) / 100.0))
    cdf: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in _rows("gpu_num_cdf.csv"):
        cdf.setdefault(r["cluster"].lower(), {}).setdefault(r["weight"], []).append(
            (min(float(r["gpus"]), 1024.0), min(float(r["cdf_percent"]) / 100.0, 1.0)))

    def arrays(pts: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
        x, y = (np.array(v, dtype=np.float64) for v in zip(*sorted(pts), strict=True))
        return x, np.maximum.accumulate(y)

    return AcmeFigures(count_share=count, gpu_time_share=gtime, box=box,
                       duration={c: {t: arrays(p) for t, p in v.items()} for c, v in dur.items()},
                       gpus_cdf={c: {w: arrays(p) for w, p in v.items()} for c, v in cdf.items()})


_SIZES = 2 ** np.arange(0, 15)  # 1 .. 16,384 GPUs: the powers of two a size snaps to


def _box_pmf(box: tuple[float, ...]) -> np.ndarray:
    """``P(n | type)`` on `_SIZES` from a box plot read as a quantile function (module docstring)."""
    u = (np.arange(4000) + 0.5) / 4000
    logs = np.log(np.maximum(np.asarray(box, dtype=np.float64), 1.0))
    n = np.exp(np.interp(u, (0.0, 0.25, 0.5, 0.75, 1.0), logs))
    k = np.clip(np.rint(np.log2(np.maximum(n, 1.0))).astype(np.int64), 0, _SIZES.size - 1)
    return np.bincount(k, minlength=_SIZES.size) / u.size


@cache
def size_and_type_tables(profile: str) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """(``P(n)`` on `_SIZES` from the cluster's job-size CDF, the types, ``P(type | n)`` as a
    ``[size, type]`` table) of ``profile`` (module docstring)."""
    fig = acme_figures()
    x, y = fig.gpus_cdf[profile]["jobs"]
    pmf = np.zeros(_SIZES.size)
    prev = 0.0
    for n, c in zip(x.tolist(), y.tolist(), strict=True):  # the CDF at integer counts
        if c > prev:
            pmf[min(round(float(np.log2(max(n, 1.0)))), _SIZES.size - 1)] += c - prev
            prev = c
    pmf /= pmf.sum()
    types = tuple(sorted(fig.count_share[profile]))
    share = np.array([fig.count_share[profile][t] for t in types])
    like = np.stack([_box_pmf(fig.box[profile][t]) for t in types], axis=1)  # [size, type]
    joint = like * share[None, :]
    for k in np.flatnonzero(joint.sum(axis=1) == 0):  # no box reaches it: the nearest whiskers
        dist = [min(abs(np.log2(_SIZES[k]) - np.log2(max(b, 1.0))) for b in (fig.box[profile][t][0],
                                                                                fig.box[profile][t][-1]))
                for t in types]
        joint[k, int(np.argmin(dist))] = 1.0
    return pmf, types, joint / joint.sum(axis=1, keepdims=True)


def _draw_size_type(rng: np.random.Generator, profile: str, lo: int, hi: int) -> tuple[int, str]:
    """GPUs in [lo, hi] from the cluster's size distribution, then the type given the size."""
    pmf, types, cond = size_and_type_tables(profile)
    ok = (lo <= _SIZES) & (hi >= _SIZES)
    p = np.where(ok, pmf, 0.0)
    if p.sum() <= 0:
        raise ConfigError(f"no job of {lo} to {hi} GPUs in the {profile} profile; lower min_gpus "
                          "(workload.generator.min_gpus)")
    k = int(rng.choice(_SIZES.size, p=p / p.sum()))
    return int(_SIZES[k]), types[int(rng.choice(len(types), p=cond[k]))]


def _draw_duration_s(rng: np.random.Generator, curve: tuple[np.ndarray, np.ndarray]) -> float:
    """A duration from a CDF given at points, log-linear between them, seconds."""
    x, y = curve
    u = float(rng.uniform(y[0], y[-1])) if y[-1] > y[0] else float(y[-1])
    k = int(np.searchsorted(y, u, side="left"))
    k = min(max(k, 1), x.size - 1)
    y0, y1 = y[k - 1], y[k]
    t = 0.0 if y1 <= y0 else (u - y0) / (y1 - y0)
    return float(np.exp(np.log(x[k - 1]) + t * (np.log(x[k]) - np.log(x[k - 1]))))


def recipe_shape(model: str, gpus: int) -> dict[str, Any] | None:
    """The `TrainingJob` parallelism of ``model`` on ``gpus`` GPUs from its recipe (`RECIPES`), or
    None when the recipe does not fit (its model-parallel size does not divide the GPUs, or an MoE
    model's expert parallelism would fall under 8)."""
    r = RECIPES[model]
    if gpus % r.model_parallel:
        return None
    dp = gpus // r.model_parallel
    ep = 1
    if r.ep > 1:
        ep = math.gcd(r.ep, dp & -dp)  # the largest power of two dividing dp, at most the recipe's
        if ep < _MIN_EP:
            return None
    out: dict[str, Any] = {"tp": r.tp, "pp": r.pp, "cp": r.cp, "dp": dp, "ep": ep, "seq_len": r.seq_len,
                           "sequence_parallel": r.tp > 1}
    if r.first_stage_layers is not None:
        out["first_stage_layers"] = r.first_stage_layers
        out["last_stage_layers"] = r.last_stage_layers
    return out


def _check(value: Any, name: str, *, lo: float, integer: bool = False, hi: float = math.inf,
           open_lo: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if open_lo else value >= lo) and value <= hi
    if integer:
        ok = ok and isinstance(value, int)
    if not ok:
        what = "an integer" if integer else "a number"
        rng = f"{'>' if open_lo else '>='} {lo:g}" + (f" and <= {hi:g}" if math.isfinite(hi) else "")
        raise ConfigError(f"{name} must be {what} {rng}, got {value!r} (workload.generator.{name})")


def llm_cluster(num_jobs: int, gpus: int, *, seed: int | np.random.Generator | None = None,
                profile: str = "kalos", load: float = 1.0, min_gpus: int = 1, max_gpus: int | None = None,
                gpus_per_server: int = 8, gpu: str = "h100", duration_scale: float = 1.0,
                max_iterations: int | None = None, micro_batches: int = 8, inference_share: float = 0.0,
                inference_replicas: int = 2, inference_rate_per_s: float = 2.0,
                tenants: int = 4) -> list[TrainingJob | InferenceJob]:
    """The jobs of a multi-tenant LLM cluster (module docstring).

    Args:
        num_jobs: Training and evaluation jobs to draw (the inference services come on top).
        gpus: GPUs of the cluster (sets the arrival rate and the largest job).
        seed: Seed or generator of every draw.
        profile: Which Acme cluster's figures: "kalos" (pretraining-heavy: 95.5 % of GPU time) or
            "seren" (mixed: fine-tuning, evaluation, multimodal).
        load: Offered GPU load, the jobs' GPU-seconds per second over ``gpus`` (> 0).
        min_gpus: Keep only jobs of at least this many GPUs (rejection: the published
            distribution conditioned on the size).
        max_gpus: Largest job, GPUs (None: ``gpus`` minus the inference services').
        gpus_per_server: Server size (an evaluation job of more GPUs is cut to it).
        gpu: GPU type of every job.
        duration_scale: Factor on every duration (time compression of a simulation).
        max_iterations: Cap on a training job's iterations (None: none).
        micro_batches: Micro-batches per data-parallel replica and iteration (at least ``pp``).
        inference_share: Share of the GPUs given to disaggregated Llama 3 70B services, in [0, 1).
        inference_replicas: Prefill and decode replicas (TP 8 each) per service.
        inference_rate_per_s: Requests per second per prefill replica.
        tenants: Tenants the jobs are spread over (``t0`` ... at random; services are ``serve``).

    Returns:
        The jobs, in submission order, named ``<kind>-<i>``.

    Raises:
        ConfigError: A parameter out of range, naming it (``workload.generator.<name>``).
    """
    if profile not in PROFILES:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r} "
                          "(workload.generator.profile)")
    _check(num_jobs, "jobs", lo=0, integer=True)
    _check(gpus, "gpus", lo=1, integer=True)
    _check(load, "load", lo=0.0, open_lo=True)
    _check(min_gpus, "min_gpus", lo=1, integer=True)
    _check(gpus_per_server, "gpus_per_server", lo=1, integer=True)
    _check(duration_scale, "duration_scale", lo=0.0, open_lo=True)
    _check(micro_batches, "micro_batches", lo=1, integer=True)
    _check(inference_share, "inference_share", lo=0.0, hi=0.999)
    _check(inference_replicas, "inference_replicas", lo=1, integer=True)
    _check(inference_rate_per_s, "inference_rate_per_s", lo=0.0)
    _check(tenants, "tenants", lo=1, integer=True)
    if max_iterations is not None:
        _check(max_iterations, "max_iterations", lo=1, integer=True)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    fig = acme_figures()
    service_gpus = 2 * inference_replicas * 8
    services = int(inference_share * gpus // service_gpus) if inference_share > 0 else 0
    if inference_share > 0 and services == 0:
        raise ConfigError(f"inference_share {inference_share:g} of {gpus} GPUs holds no service of "
                          f"{service_gpus} GPUs (2 x {inference_replicas} replicas of TP 8); raise it "
                          "(workload.generator.inference_share)")
    cap = gpus - services * service_gpus if max_gpus is None else int(max_gpus)
    _check(cap, "max_gpus", lo=1, integer=True)
    if min_gpus > cap:
        raise ConfigError(f"min_gpus {min_gpus} exceeds the largest job the cluster takes ({cap} GPUs) "
                          "(workload.generator.min_gpus)")
    drawn: list[dict[str, Any]] = []
    tries = 0
    while len(drawn) < num_jobs:
        tries += 1
        if tries > 1000 * max(1, num_jobs):
            raise ConfigError(f"no recipe fits the jobs of {min_gpus} to {cap} GPUs drawn from the {profile} "
                              "profile; widen min_gpus / max_gpus (workload.generator.min_gpus)")
        n, t = _draw_size_type(rng, profile, min_gpus, cap)
        kind = _KIND_OF_TYPE[t]
        if kind == "evaluation" and n > gpus_per_server:
            kind = "fine-tuning"  # an evaluation box never passes a server: the nearest type's job
        dur = _draw_duration_s(rng, fig.duration[profile][t])
        job = _job(rng, kind, n, dur, gpu, micro_batches)
        if job is None:  # no recipe fits this size (e.g. 2 GPUs of a 70B model): draw again
            continue
        if isinstance(job, TrainingJob):
            it_s = job.estimate_iteration_s(gpus_per_server)
            iters = max(1, round(dur * duration_scale / it_s))
            if max_iterations is not None:
                iters = min(iters, max_iterations)
            job = dataclasses.replace(job, iterations=iters)
            run_s = iters * it_s
        else:
            run_s = dur * duration_scale
            job = dataclasses.replace(job, duration_s=run_s)
        drawn.append({"kind": kind, "job": job, "run_s": run_s})
    # arrivals: Poisson at the rate that offers `load` of the GPUs' time (module docstring), the
    # run times as the jobs will have them (after the scale and the iteration cap)
    work = sum(d["job"].world_size * d["run_s"] for d in drawn)
    free_gpus = gpus - services * service_gpus
    rate = load * free_gpus / (work / max(len(drawn), 1)) if drawn and work > 0 else 0.0
    gaps = rng.exponential(1.0 / rate, size=len(drawn)) if rate > 0 else np.zeros(len(drawn))
    submit = np.cumsum(gaps) - (gaps[0] if len(gaps) else 0.0)  # the first job at time 0
    span_s = float(submit[-1]) if len(submit) else 0.0
    out: list[TrainingJob | InferenceJob] = []
    for i, (d, t) in enumerate(zip(drawn, submit.tolist(), strict=True)):
        tenant = f"t{int(rng.integers(tenants))}"
        out.append(dataclasses.replace(d["job"], name=f"{d['kind']}-{i}", tenant=tenant, submit_s=float(t)))
    for k in range(services):
        out.append(InferenceJob(model="llama3-70b", gpu=gpu, name=f"inference-{k}", tenant="serve", tp=8,
                                instances=inference_replicas, disaggregated=True,
                                decode_instances=inference_replicas,
                                request_rate_per_s=inference_rate_per_s * inference_replicas,
                                duration_s=max(span_s, 1.0), submit_s=0.0))
    return sorted(out, key=lambda j: (j.submit_s, j.name))


def _job(rng: np.random.Generator, kind: str, n: int, duration_s: float, gpu: str,
         micro_batches: int) -> TrainingJob | InferenceJob | None:
    """A job of ``kind`` on ``n`` GPUs: a model whose recipe fits, its shape (module docstring)."""
    if kind == "evaluation":
        tp = n if 32 % n == 0 else 1  # Llama 3 8B has 32 heads: TP divides them
        return InferenceJob(model="llama3-8b", gpu=gpu, tp=tp, instances=n // tp, duration_s=duration_s)
    models = RECIPES if kind == "pretraining" else _FINE_TUNING_MODELS
    fits = [m for m in models if recipe_shape(m, n) is not None]
    if not fits:  # smaller than every recipe (1 GPU): Llama 3 8B, data parallel, sharded optimizer
        return TrainingJob(model="llama3-8b", gpus=n, gpu=gpu, tp=1, dp=n, zero_stage=1, seq_len=8192,
                           micro_batch=1, global_batch=micro_batches * n)
    model = fits[int(rng.integers(len(fits)))]
    shape = recipe_shape(model, n)
    assert shape is not None
    mb = max(micro_batches, shape["pp"])
    return TrainingJob(model=model, gpus=n, gpu=gpu, global_batch=mb * shape["dp"], micro_batch=1, **shape)
