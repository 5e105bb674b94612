"""`flowherd collective`: simulate one collective alone on a fabric and print its bandwidths."""

from __future__ import annotations

import json
import math

import numpy as np
import typer

from flowherd.cli import app
from flowherd.collectives.algorithms import ALGORITHMS
from flowherd.collectives.ops import Collective, Op
from flowherd.errors import ConfigError
from flowherd.fabric.core import Fabric
from flowherd.registry import Registry
from flowherd.units import format_rate, format_size, format_time, parse_size

OPS = Registry("op", {o.value: o for o in Op})
PLACEMENTS = Registry("placement", {"packed": "packed", "spread": "spread"})
ROUTINGS = Registry("routing", {"ecmp": "ecmp", "spray": "spray", "shortest": "shortest"})


def place(fabric: Fabric, num_gpus: int, placement: str = "packed") -> tuple[int, ...]:
    """GPUs for ``num_gpus`` ranks: ``packed`` takes the first ones (servers filled in order),
    ``spread`` goes round-robin over the servers (local GPU 0 of every server, then 1 ...)."""
    how = PLACEMENTS[placement]
    if num_gpus < 1 or num_gpus > fabric.num_gpus:
        raise ConfigError(f"--gpus must be in 1..{fabric.num_gpus} (the GPUs of fabric "
                          f"{fabric.name!r}), got {num_gpus} (--gpus)")
    if how == "packed":
        return tuple(range(num_gpus))
    server = np.asarray(fabric.gpu_server)
    order = np.argsort(server, kind="stable")
    local = np.empty(len(server), dtype=np.int64)
    counts = np.bincount(server)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    local[order] = np.arange(len(server)) - np.repeat(starts, counts)
    rr = np.lexsort((server, local))  # by local index, then server
    return tuple(int(g) for g in rr[:num_gpus])


@app.command("collective")
def collective(
    op: str = typer.Option(..., "--op", help="allreduce, reducescatter, allgather, alltoall, "
                           "alltoallv, broadcast, reduce, sendrecv"),
    algo: str = typer.Option("auto", "--algo", help="an algorithm name or 'auto' (NCCL-like selector)"),
    size: str = typer.Option(..., "--size", help="nccl-tests size, e.g. 1GiB or 64KB"),
    gpus: int = typer.Option(..., "--gpus", help="number of GPUs (ranks)"),
    fabric: str = typer.Option(..., "--fabric", help="a preset name or a fabric YAML file"),
    placement: str = typer.Option("packed", "--placement", help="packed or spread"),
    routing: str = typer.Option("spray", "--routing", help="ecmp, spray or shortest"),
    fidelity: str = typer.Option("step", "--fidelity", help="step or collective"),
    protocol: str = typer.Option(None, "--protocol", help="simple, ll or ll128 (default: the "
                                 "selector's for auto, else simple)"),
    seed: int = typer.Option(0, "--seed", help="routing seed (ECMP hashing)"),
    latency_model: str = typer.Option("nccl", "--latency-model", help="nccl (NCCL 2.30's per-step "
                                      "latencies plus the paths') or fabric (path latencies only)"),
    channels: int = typer.Option(None, "--channels", help="NCCL channels (default: NCCL's count)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Simulate one collective on an idle fabric; print time, algbw and busbw (nccl-tests)."""
    from flowherd.collectives.nccl import LATENCY_MODELS
    from flowherd.fabric.spec import load_fabric
    from flowherd.planning.teccl import register_collective_algorithms
    from flowherd.sim.collective import FIDELITIES, simulate_collective

    register_collective_algorithms()  # the planning layer's "mcf" and "bvn"

    the_op = OPS[op.lower()]
    # unknown names fail here, with the closest match, before the fabric is loaded
    Registry("collective algorithm", {"auto": None, **dict(ALGORITHMS)})[algo]
    size_bytes = parse_size(size, field="--size")
    ROUTINGS[routing]
    FIDELITIES[fidelity]
    LATENCY_MODELS[latency_model]
    if channels is not None and channels < 1:
        raise ConfigError(f"--channels must be a positive integer, got {channels} (--channels)")
    fab = load_fabric(fabric)
    ranks = place(fab, gpus, placement)
    matrix = None
    if the_op == Op.ALLTOALLV:  # no matrix on the command line: the uniform one
        matrix = np.full((gpus, gpus), size_bytes / gpus)
    coll = Collective(op=the_op, gpus=ranks, size_bytes=size_bytes, matrix_bytes=matrix)
    res = simulate_collective(fab, coll, algorithm=algo, protocol=protocol, router=routing,
                              fidelity=fidelity, seed=seed, channels=channels,
                              latency_model=latency_model)
    out = res.to_dict()
    out.update(fabric=fab.name, placement=placement)
    if as_json:
        typer.echo(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                               for k, v in out.items()}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{the_op.value} of {format_size(size_bytes)} on {gpus} GPUs ({fab.name})")
    table.add_column("field")
    table.add_column("value", justify="right")
    table.add_row("algorithm / protocol", f"{res.algorithm} / {res.protocol}")
    table.add_row("channels", str(res.channels))
    table.add_row("time", format_time(res.time_s))
    if res.predicted_time_s is not None:
        table.add_row("NCCL 2.30 model time", format_time(res.predicted_time_s))
    table.add_row("latency model", res.latency_model)
    table.add_row("algbw", f"{res.algbw_bytes_per_s / 1e9:.2f} GB/s ({format_rate(res.algbw_bytes_per_s)})")
    table.add_row("busbw", f"{res.busbw_bytes_per_s / 1e9:.2f} GB/s ({format_rate(res.busbw_bytes_per_s)})")
    table.add_row("fidelity / routing", f"{res.fidelity} / {res.router}")
    table.add_row("placement", placement)
    table.add_row("steps / flows", f"{res.num_steps} / {res.num_flows}")
    table.add_row("wire bytes", format_size(res.wire_bytes))
    Console().print(table)
