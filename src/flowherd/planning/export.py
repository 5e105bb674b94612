"""Plans a cluster can apply: Slurm, Kubernetes and NCCL files from a `Plan` (``flowherd plan --export``).

A plan says on which GPUs each job runs and which GPU each rank gets (`JobPlan.rank_to_gpu`).
Servers are hosts named by a format (``node{server:03d}`` unless given: the width fits the
fabric's servers); a GPU's local index is its position among its server's GPUs.

* ``slurm``: per job ``<job>.sbatch``, the ``#SBATCH`` lines of the allocation (``--nodelist``
  as a Slurm hostlist expression, ``--nodes``, ``--ntasks``, ``--gpus-per-node``) and the rank
  order: ``<job>.hostfile`` has rank ``r``'s host on line ``r``, which Slurm's arbitrary
  distribution follows (``SLURM_HOSTFILE`` with ``--distribution=arbitrary``, sbatch(1) and
  srun(1)); each host's ``CUDA_VISIBLE_DEVICES`` in local-rank order is in the script, so that
  local rank ``i`` (``SLURM_LOCALID``) sees its planned GPU first when it selects device ``i``.
* ``k8s``: per job ``<job>.k8s.yaml``, one pod spec fragment per host (``metadata`` and a
  ``spec`` that the Kubernetes API's ``PodSpec`` reads): required node affinity on
  ``kubernetes.io/hostname``, the host's GPU count as the ``nvidia.com/gpu`` limit, the ranks it
  runs and the NCCL environment. Which physical GPUs a pod gets is the device plugin's choice:
  the plan's GPU indices are given as ``FLOWHERD_LOCAL_GPUS`` for a plugin or a script that can
  honour them.
* ``nccl``: per job ``<job>.nccl.env`` (``KEY=value`` lines) and the topology files it names:
  ``NCCL_TOPO_FILE`` (`flowherd.planning.nccl_topo`, one file per kind of server), and
  ``NCCL_ALGO`` / ``NCCL_PROTO`` where the plan fixed them (a plan's ``info`` may carry
  ``nccl_algo`` / ``nccl_proto`` per job; the planner's own plans fix neither, so NCCL's tuner
  chooses, as the simulator's NCCL-like selector does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.planning.nccl_topo import server_shape, topology_xml
from flowherd.planning.plan import JobPlan, Plan

__all__ = ["EXPORTS", "compress_hostlist", "export_plan", "host_names"]

EXPORTS = ("slurm", "k8s", "nccl")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def host_names(fabric: Fabric, fmt: str | None = None) -> list[str]:
    """One host name per server, ``fmt.format(server=s)``; default ``node{server:0Wd}``."""
    n = fabric.num_servers
    fmt = fmt or f"node{{server:0{max(3, len(str(n - 1)))}d}}"
    try:
        names = [fmt.format(server=s) for s in range(n)]
    except (KeyError, IndexError, ValueError) as err:
        raise ConfigError(f"host name format must use {{server}} only, got {fmt!r} ({err}) "
                          "(--hosts)") from None
    if len(set(names)) != n or any(not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", h) for h in names):
        raise ConfigError(f"host name format must give distinct DNS-like names per server, got {fmt!r} "
                          f"(e.g. {names[0]!r}) (--hosts)")
    return names


def compress_hostlist(hosts: Sequence[str]) -> str:
    """A Slurm hostlist expression for ``hosts`` (``node[001-004,007]``): names that differ only in a
    trailing number of the same width are merged into ranges; the order is sorted."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for h in sorted(set(hosts)):
        m = re.fullmatch(r"(.*?)(\d+)", h)
        if m is None:
            plain.append(h)
            continue
        groups.setdefault((m[1], len(m[2])), []).append(int(m[2]))
    parts = list(plain)
    for (prefix, width), nums in sorted(groups.items()):
        nums.sort()
        ranges: list[str] = []
        start = prev = nums[0]
        for x in [*nums[1:], None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if x is not None:
                start = prev = x
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def _ranks_by_host(fabric: Fabric, jp: JobPlan, hosts: list[str]) -> list[tuple[str, list[int], list[int]]]:
    """Per host of the job, in order of first rank: (host, its ranks, their local GPU indices)."""
    local = {}
    for s in {int(fabric.gpu_server[g]) for g in jp.rank_to_gpu}:
        for i, g in enumerate(sorted(fabric.servers_gpus(s).tolist())):
            local[g] = i
    out: dict[str, tuple[list[int], list[int]]] = {}
    for r, g in enumerate(jp.rank_to_gpu):
        h = hosts[int(fabric.gpu_server[g])]
        ranks, gpus = out.setdefault(h, ([], []))
        ranks.append(r)
        gpus.append(local[g])
    return [(h, rs, gs) for h, (rs, gs) in out.items()]


def _job_plans(plan: Plan) -> list[JobPlan]:
    jobs = [j for j in plan.jobs if j.rank_to_gpu]
    if not jobs:
        raise ConfigError("the plan places no job with ranks (plan.jobs[].rank_to_gpu): nothing to export")
    return jobs


def _file(job: str) -> str:
    return _SAFE.sub("_", job)


def _slurm(fabric: Fabric, plan: Plan, hosts: list[str]) -> dict[str, str]:
    out = {}
    for jp in _job_plans(plan):
        by_host = _ranks_by_host(fabric, jp, hosts)
        f = _file(jp.name)
        per_node = max(len(rs) for _, rs, _ in by_host)
        lines = ["#!/bin/bash", f"#SBATCH --job-name={f}", f"#SBATCH --nodes={len(by_host)}",
                 f"#SBATCH --ntasks={len(jp.rank_to_gpu)}",
                 f"#SBATCH --nodelist={compress_hostlist([h for h, _, _ in by_host])}",
                 f"#SBATCH --gpus-per-node={per_node}", "#SBATCH --distribution=arbitrary",
                 f"# the plan's rank order: line r of {f}.hostfile is the host of rank r",
                 f'export SLURM_HOSTFILE="$(dirname "$0")/{f}.hostfile"',
                 "# each host's GPUs in the order of its local ranks (SLURM_LOCALID i uses the i-th)",
                 'case "$(hostname -s)" in']
        for h, _, gs in by_host:
            lines.append(f"  {h}) export CUDA_VISIBLE_DEVICES={','.join(map(str, gs))} ;;")
        lines += ["esac", ""]
        out[f"{f}.sbatch"] = "\n".join(lines)
        out[f"{f}.hostfile"] = "".join(hosts[int(fabric.gpu_server[g])] + "\n" for g in jp.rank_to_gpu)
    return out


def _nccl_env(plan: Plan, jp: JobPlan, topo_file: str) -> dict[str, str]:
    env = {"NCCL_TOPO_FILE": topo_file}
    info = plan.info.get("nccl", {}) if isinstance(plan.info, dict) else {}
    fixed = info.get(jp.name, {}) if isinstance(info, dict) else {}
    for key, var in (("algo", "NCCL_ALGO"), ("proto", "NCCL_PROTO")):
        if fixed.get(key):
            env[var] = str(fixed[key])
    return env


def _topo_files(fabric: Fabric, plan: Plan) -> tuple[dict[int, str], dict[str, str]]:
    """Server -> topology file name, and the files (one per kind of server the plan uses)."""
    names: dict[tuple, str] = {}
    files: dict[str, str] = {}
    of_server: dict[int, str] = {}
    for jp in _job_plans(plan):
        for g in jp.rank_to_gpu:
            s = int(fabric.gpu_server[g])
            if s in of_server:
                continue
            key = server_shape(fabric, s)
            if key not in names:
                names[key] = f"nccl-topo-{len(names)}-{key[0]}-{key[1]}gpu.xml"
                files[names[key]] = topology_xml(fabric, s)
            of_server[s] = names[key]
    return of_server, files


def _nccl(fabric: Fabric, plan: Plan, hosts: list[str], topo_dir: str) -> dict[str, str]:
    of_server, out = _topo_files(fabric, plan)
    for jp in _job_plans(plan):
        kinds = sorted({of_server[int(fabric.gpu_server[g])] for g in jp.rank_to_gpu})
        env = _nccl_env(plan, jp, f"{topo_dir}/{kinds[0]}")
        lines = [f"{k}={v}" for k, v in env.items()]
        if "NCCL_ALGO" not in env:
            lines.append("# NCCL_ALGO / NCCL_PROTO: not fixed by the plan (NCCL's tuner chooses)")
        if len(kinds) > 1:  # a job over servers of several kinds: the file of each host
            for h, s in sorted({(hosts[int(fabric.gpu_server[g])], int(fabric.gpu_server[g]))
                                for g in jp.rank_to_gpu}):
                lines.append(f"# {h}: NCCL_TOPO_FILE={topo_dir}/{of_server[s]}")
        out[f"{_file(jp.name)}.nccl.env"] = "\n".join(lines) + "\n"
    return out


def _k8s(fabric: Fabric, plan: Plan, hosts: list[str], topo_dir: str) -> dict[str, str]:
    of_server, _ = _topo_files(fabric, plan)
    out = {}
    index = {h: s for s, h in enumerate(hosts)}
    for jp in _job_plans(plan):
        pods: list[dict[str, Any]] = []
        f = _file(jp.name).lower().replace("_", "-").replace(".", "-")
        for i, (h, rs, gs) in enumerate(_ranks_by_host(fabric, jp, hosts)):
            env = _nccl_env(plan, jp, f"{topo_dir}/{of_server[index[h]]}")
            env.update({"FLOWHERD_RANKS": ",".join(map(str, rs)),
                        "FLOWHERD_LOCAL_GPUS": ",".join(map(str, gs)),
                        "WORLD_SIZE": str(len(jp.rank_to_gpu))})
            term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [h]}]}
            pods.append({
                "metadata": {"name": f"{f}-{i}", "labels": {"flowherd.job": f}},
                "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term]}}},
                    "containers": [{"name": "worker",
                                    "resources": {"limits": {"nvidia.com/gpu": str(len(gs))}},
                                    "env": [{"name": k, "value": v} for k, v in env.items()]}]}})
        out[f"{_file(jp.name)}.k8s.yaml"] = yaml.safe_dump(pods, sort_keys=False)
    return out


def export_plan(plan: Plan, fabric: Fabric, kind: str, out_dir: str | Path, *,
                hosts_format: str | None = None, topo_dir: str | None = None) -> list[Path]:
    """Write the files of ``kind`` (``slurm``, ``k8s`` or ``nccl``; module docstring) into
    ``out_dir``; returns their paths. ``topo_dir``: where the cluster will find the topology XML
    files (default: ``out_dir`` as given)."""
    if kind not in EXPORTS:
        raise ConfigError(f"unknown export {kind!r} (--export); expected one of: {', '.join(EXPORTS)}")
    for jp in plan.jobs:
        if any(not 0 <= g < fabric.num_gpus for g in jp.rank_to_gpu):
            raise ConfigError(f"job {jp.name!r}: the plan names GPUs the fabric lacks "
                              "(plan.jobs[].rank_to_gpu)")
    hosts = host_names(fabric, hosts_format)
    d = Path(out_dir)
    tdir = topo_dir or str(d)
    files = (_slurm(fabric, plan, hosts) if kind == "slurm" else
             _k8s(fabric, plan, hosts, tdir) | _nccl(fabric, plan, hosts, tdir) if kind == "k8s" else
             _nccl(fabric, plan, hosts, tdir))
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        p = d / name
        p.write_text(text)
        paths.append(p)
    index = json.dumps({"kind": kind, "files": sorted(files)}, indent=1) + "\n"
    (d / f"{kind}-export.json").write_text(index)
    return paths
