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
#: `flowherd.planning.teccl.SYNTHESIZERS` by name (planning imports scipy.optimize and highspy:
#: a second of start-up that no other algorithm needs); a test checks the two agree.
SYNTHESIZED = ("mcf", "bvn")


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
    latency_model: str = typer.Option("nccl", "--latency-model", help="nccl (NCCL 2.30's latencies, "
                                      "which hold the paths', and its bandwidth) or fabric (path "
                                      "latencies only, full link rates)"),
    channels: int = typer.Option(None, "--channels", help="NCCL channels (default: NCCL's count)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    network: str = typer.Option("ideal", "--network", help="the network model: ideal, roce, tcp, a "
                                "switch preset or a YAML file of a network: section"),
) -> None:
    """Simulate one collective on an idle fabric; print time, algbw and busbw (nccl-tests)."""
    from flowherd.cli.checks import check_seed, load_fabric_arg
    from flowherd.cluster.collective import FIDELITIES, simulate_collective
    from flowherd.collectives.nccl import LATENCY_MODELS
    from flowherd.engine.network import load_network, use_network

    if algo in SYNTHESIZED:  # the planning layer's LP synthesizers; imported only when asked for
        from flowherd.planning.teccl import register_collective_algorithms

        register_collective_algorithms()

    the_op = OPS[op.lower()]
    # unknown names fail here, with the closest match, before the fabric is loaded
    Registry("collective algorithm", {"auto": None, **dict(ALGORITHMS), **dict.fromkeys(SYNTHESIZED)})[algo]
    size_bytes = parse_size(size, field="--size")
    ROUTINGS[routing]
    FIDELITIES[fidelity]
    check_seed(seed, "--seed")
    LATENCY_MODELS[latency_model]
    if channels is not None and channels < 1:
        raise ConfigError(f"--channels must be a positive integer, got {channels} (--channels)")
    net = load_network(network)
    fab = load_fabric_arg(fabric, "--fabric")
    ranks = place(fab, gpus, placement)
    matrix = None
    if the_op == Op.ALLTOALLV:  # no matrix on the command line: the uniform one
        matrix = np.full((gpus, gpus), size_bytes / gpus)
    coll = Collective(op=the_op, gpus=ranks, size_bytes=size_bytes, matrix_bytes=matrix)
    with use_network(net):
        res = simulate_collective(fab, coll, algorithm=algo, protocol=protocol, router=routing,
                                  fidelity=fidelity, seed=seed, channels=channels,
                                  latency_model=latency_model)
    out = res.to_dict()
    out.update(fabric=fab.name, placement=placement, network=net.model)
    if as_json:
        typer.echo(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                               for k, v in out.items()}))
        return
    from rich.console import Console
    from rich.table import Table

    from flowherd.cli.checks import plain

    table = Table(title=plain(f"{the_op.value} of {format_size(size_bytes)} on {gpus} GPUs ({fab.name})"))
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
    table.add_row("network", net.model + (f" ({net.switch})" if net.switch else ""))
    table.add_row("steps / flows", f"{res.num_steps} / {res.num_flows}")
    table.add_row("wire bytes", format_size(res.wire_bytes))
    Console().print(table)
