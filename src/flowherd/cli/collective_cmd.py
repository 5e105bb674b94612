"""`flowherd collective`: simulate one collective alone on a fabric, at one size or a sweep of sizes
as nccl-tests runs them (``-b/-e/-f/-i``), and print nccl-tests' columns (or JSON)."""

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
from flowherd.units import parse_nccl_size

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


#: NCCL's MAXCHANNELS (src/include/device.h), `flowherd.collectives.topology.MAXCHANNELS`.
MAX_CHANNELS = 64
#: Above this many ranks a collective is estimated before it is built (`flowherd.experiments.cost`).
PROBE_RANKS = (128, 256)


def _estimate(fab: Fabric, op: Op, ranks: tuple[int, ...], size_bytes: float, algo: str,
              protocol: str | None, channels: int | None, fidelity: str) -> None:
    """Refuse a collective whose estimated memory or events exceed the limits; otherwise say what
    it will cost on stderr, so that a long one is not silent."""
    import sys

    from flowherd.experiments import cost
    from flowherd.sanitize import shown

    est = cost.collective_cost(fab, op, ranks, size_bytes, algorithm=algo, protocol=protocol,
                               channels=channels, fidelity=fidelity)
    if est is None:
        return
    cost.check(est, f"collective on fabric {shown(repr(fab.name))}")
    print(f"collective: {est.parts[0].what}; estimated {est.describe()}", file=sys.stderr, flush=True)


_SIZE_HELP = ("K, M, G are powers of 1,024 as nccl-tests reads them (1G = 1 GiB = 1,073,741,824 B); "
              "KB, MB, GB are powers of 1,000 and KiB, MiB, GiB powers of 1,024")


@app.command("collective")
def collective(
    op: str = typer.Option(..., "--op", help="allreduce, reducescatter, allgather, alltoall, "
                           "alltoallv, broadcast, reduce, sendrecv"),
    algo: str = typer.Option("auto", "--algo", help="an algorithm name or 'auto' (NCCL-like selector)"),
    size: str = typer.Option(None, "--size", help="one size, the same as -b SIZE -e SIZE; " + _SIZE_HELP),
    minbytes: str = typer.Option(None, "-b", "--minbytes",
                                 help="smallest size (nccl-tests' -b; default 32M)"),
    maxbytes: str = typer.Option(None, "-e", "--maxbytes",
                                 help="largest size (nccl-tests' -e; default 32M)"),
    stepfactor: int = typer.Option(1, "-f", "--stepfactor", help="multiply the size by this from -b to -e "
                                   "(nccl-tests' -f; 1: add -i instead)"),
    stepbytes: str = typer.Option("1M", "-i", "--stepbytes", help="add this to the size from -b to -e when "
                                  "-f is 1 (nccl-tests' -i)"),
    datatype: str = typer.Option("float", "-d", "--datatype", help="element type, for the count column and "
                                 "nccl-tests' rounding (float, half, bfloat16, double, int8, int32, "
                                 "int64 ...)"),
    redop: str = typer.Option("sum", "--redop", help="reduction shown in the redop column (sum, prod, max, "
                              "min, avg; the time does not depend on it)"),
    root: int = typer.Option(0, "-r", "--root", help="root rank of broadcast and reduce"),
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
    as_json: bool = typer.Option(False, "--json", help="print one JSON object per size, one a line"),
    network: str = typer.Option("ideal", "--network", help="the network model: ideal, roce, tcp, a "
                                "switch preset or a YAML file of a network: section"),
    max_memory: str = typer.Option(None, "--max-memory", help="memory the collective may use, e.g. "
                                   "8GiB (default: what this machine leaves); above 256 GPUs an estimate "
                                   "over it is refused before the schedule is built"),
    max_events: int = typer.Option(None, "--max-events", help="simulator events it may be estimated "
                                   "to take (default: 10^10)"),
) -> None:
    """Simulate one collective on an idle fabric; print time, algbw and busbw (nccl-tests).

    Sizes as nccl-tests takes them: --size S, or -b MIN -e MAX with -f FACTOR or -i STEP (default
    -b 32M -e 32M). K, M, G are powers of 1,024 as in nccl-tests; KB, MB, GB powers of 1,000. The
    table has nccl-tests' out-of-place columns and units: size (B), count (elements), type, redop,
    root, time (us), algbw and busbw (GB/s, 10^9 bytes/s); then the algorithm, protocol and
    channels the run used. In-place would print the same figures (a simulation moves no buffers),
    and #wrong is N/A (no data is checked).
    """
    from flowherd.cli.checks import check_seed, load_fabric_arg
    from flowherd.cluster.collective import FIDELITIES, simulate_collective
    from flowherd.collectives import nccl_tests as nt
    from flowherd.collectives.nccl import LATENCY_MODELS
    from flowherd.engine.network import load_network, use_network

    if algo in SYNTHESIZED:  # the planning layer's LP synthesizers; imported only when asked for
        from flowherd.planning.teccl import register_collective_algorithms

        register_collective_algorithms()

    the_op = OPS[op.lower()]
    # unknown names fail here, with the closest match, before the fabric is loaded
    Registry("collective algorithm", {"auto": None, **dict(ALGORITHMS), **dict.fromkeys(SYNTHESIZED)})[algo]
    type_bytes = nt.DATATYPES[datatype]
    nt.REDOPS[redop]
    sizes = _sizes(size, minbytes, maxbytes, stepfactor, stepbytes)
    ROUTINGS[routing]
    FIDELITIES[fidelity]
    check_seed(seed, "--seed")
    LATENCY_MODELS[latency_model]
    if max_memory is not None or max_events is not None:
        from flowherd.experiments.budget import set_limits

        set_limits(max_memory, max_events)
    if channels is not None and not 1 <= channels <= MAX_CHANNELS:
        raise ConfigError(f"--channels must be in 1..{MAX_CHANNELS} (NCCL's MAXCHANNELS), got {channels:,} "
                          "(--channels)")
    if not 0 <= root < max(gpus, 1):
        raise ConfigError(f"--root must be a rank in 0..{max(gpus, 1) - 1}, got {root} (-r/--root)")
    net = load_network(network)
    fab = load_fabric_arg(fabric, "--fabric")
    ranks = place(fab, gpus, placement)
    if gpus > PROBE_RANKS[-1]:  # before the schedule (and the selector) grow with the ranks
        _estimate(fab, the_op, ranks, float(max(sizes)), algo, protocol, channels, fidelity)
    rows = []
    for requested in sizes:
        size_bytes, count = nt.shown_size_and_count(the_op.value, requested, ranks=gpus,
                                                    type_bytes=type_bytes)
        matrix = None
        if the_op == Op.ALLTOALLV:  # no matrix on the command line: the uniform one
            matrix = np.full((gpus, gpus), size_bytes / gpus)
        coll = Collective(op=the_op, gpus=ranks, size_bytes=size_bytes, matrix_bytes=matrix,
                          root=root if the_op in (Op.BROADCAST, Op.REDUCE) else 0)
        with use_network(net):
            res = simulate_collective(fab, coll, algorithm=algo, protocol=protocol, router=routing,
                                      fidelity=fidelity, seed=seed, channels=channels,
                                      latency_model=latency_model)
        out = res.to_dict()
        out.update(fabric=fab.name, placement=placement, network=net.model)
        if as_json:
            out.update(count=count, type=datatype, redop=nt.redop_shown(the_op.value, redop),
                       root=nt.root_shown(the_op.value, root))
            typer.echo(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                   for k, v in out.items()}))
            continue
        if not rows:
            _print_preamble(the_op.value, gpus, placement, fab.name, sizes, stepfactor, stepbytes, algo,
                            routing, fidelity, net, latency_model)
        row = (size_bytes, count, datatype, nt.redop_shown(the_op.value, redop),
               nt.root_shown(the_op.value, root),
               res.time_s * 1e6, res.algbw_bytes_per_s / 1e9, res.busbw_bytes_per_s / 1e9,
               res.algorithm, res.protocol, res.channels)
        rows.append(row)
        print(_row_line(row), flush=True)
    if rows:
        busbw = [r[7] for r in rows]
        print(f"# {'Avg bus bandwidth':<20} : {sum(busbw) / len(busbw):g}")
        print("#")


def _sizes(size: str | None, minbytes: str | None, maxbytes: str | None, factor: int,
           stepbytes: str) -> list[int]:
    from flowherd.collectives import nccl_tests as nt

    if size is not None and (minbytes is not None or maxbytes is not None):
        raise ConfigError("give one size with --size or a range with -b/-e, not both (--size)")
    if size is not None:
        one = parse_nccl_size(size, field="--size")
        return [one]
    low = nt.DEFAULT_MIN_BYTES if minbytes is None else parse_nccl_size(minbytes, field="-b/--minbytes")
    high = nt.DEFAULT_MAX_BYTES if maxbytes is None else parse_nccl_size(maxbytes, field="-e/--maxbytes")
    step = parse_nccl_size(stepbytes, field="-i/--stepbytes")
    return nt.sizes_of_sweep(low, high, factor=factor, step_bytes=step)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _print_preamble(op: str, gpus: int, placement: str, fabric: str, sizes: list[int], factor: int,
                    stepbytes: str, algo: str, routing: str, fidelity: str, net, latency_model: str) -> None:
    step = f"{factor}(factor)" if factor > 1 else f"{parse_nccl_size(stepbytes)}(bytes)"
    network = net.model + (f" ({net.switch})" if net.switch else "")
    print(f"# flowherd collective: {op} on {gpus} GPUs ({placement}) of {_printable(fabric)}, "
          "simulated on an idle fabric")
    print(f"# minBytes {sizes[0]} maxBytes {sizes[-1]} step: {step}  algorithm: {_printable(algo)}  routing: "
          f"{routing}  fidelity: {fidelity}  network: {_printable(network)}  latency model: {latency_model}")
    print("# in-place runs the same transfers as out-of-place (the same figures); #wrong: N/A, no data is "
          "checked")
    print("#")
    print(f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place")
    print(f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  "
          f"{'algbw':>6}  {'busbw':>6}  {'#wrong':>6}  {'algorithm':>9}  {'protocol':>8}  {'channels':>8}")
    print(f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
          f"{'(GB/s)':>6}")


def _float_str(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: two decimals, fewer when the width is short, then an exponent."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return f"{{:{width}.{1 if width >= 7 else 0}e}}".format(value)


def _row_line(row: tuple) -> str:
    size_bytes, count, dtype, redop, root, time_us, algbw, busbw, algorithm, protocol, channels = row
    return (f"{size_bytes:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}  {_float_str(time_us, 7)}  "
            f"{_float_str(algbw, 6)}  {_float_str(busbw, 6)}  {'N/A':>6}  {algorithm:>9}  {protocol:>8}  "
            f"{channels:8d}")
