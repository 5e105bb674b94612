"""Where a `flowherd collective` spends its CPU time, phase by phase (its start-up).

    python benchmarks/collective_phases.py [--json] [COLLECTIVE ARGS ...]

Runs the command once in this process, as the console script does, with timers around its
phases, in CPU seconds of this process (``time.process_time``: user + system, nearly the same
on a busy machine as on a quiet one), and prints one line per phase; ``--json`` prints them as
one object (``benchmarks/startup.py --breakdown`` takes the medians of several runs). Phases:

* ``interpreter``: Python's start, up to this script's first line;
* ``cli import``: ``flowherd.cli`` (typer) and the command's module;
* ``command imports``: what the command imports when it runs (the simulator, the engine and its
  ahead-of-time compiled kernels, the network models), imported here first to be timed alone;
* ``parse``: typer's parsing of the flags (typer >= 0.2x coerces each with a pydantic
  TypeAdapter, and imports pydantic for it);
* ``fabric``: the preset built and its connectivity checked;
* ``schedule``: NCCL's algorithm selection, the channels, the steps of the collective;
* ``routing``: the router, the fabric's path index, every step's routes;
* ``engine: add flows``, ``engine: run``: the flows checked and handed to the engine (one batch
  of the schedule's steps, `flowherd.cluster.collective.add_schedule`), its event loop;
* ``output``: the table (rich, imported then) or the JSON line;
* ``rest``: the command's other lines (flag checks, the network model).

The interpreter's exit is in no phase (the console entry, which `benchmarks/startup.py` times,
freezes what the command leaves so that the exit's collections skip it, `flowherd.cli.main`).
"""

from __future__ import annotations

import time

_T0 = time.process_time()

import contextlib  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

DEFAULT = ["collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "64",
           "--fabric", "dgx-superpod-h100-1su"]
PHASES = ("interpreter", "cli import", "command imports", "parse", "fabric", "schedule", "routing",
          "engine: add flows", "engine: run", "output", "rest")


_INNER = [0.0]  # CPU seconds of the timed calls inside the running one (counted there)


def _timed(acc: dict[str, float], name: str, fn):
    """``fn`` timed into ``acc[name]``, less the time of the timed calls it makes."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t, outer = time.process_time(), _INNER[0]
        _INNER[0] = 0.0
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.process_time() - t
            acc[name] = acc.get(name, 0.0) + spent - _INNER[0]
            _INNER[0] = outer + spent
    return wrapper


def measure(argv: list[str]) -> dict[str, float]:
    """CPU seconds of each phase of ``flowherd *argv`` (a `collective`) run in this process."""
    acc: dict[str, float] = {"interpreter": _T0}
    t = time.process_time()
    import flowherd.cli
    from flowherd.cli import load_command, main

    load_command(argv[0])
    acc["cli import"] = time.process_time() - t
    t = time.process_time()
    import flowherd.cli.checks as checks
    import flowherd.cluster.collective as sc
    import flowherd.collectives.nccl
    import flowherd.engine.core as engine
    import flowherd.engine.network
    import flowherd.routing.policies as policies

    acc["command imports"] = time.process_time() - t
    checks.load_fabric_arg = _timed(acc, "fabric", checks.load_fabric_arg)
    for fn in ("choose", "nccl_channels", "build_schedule", "predicted_time_s"):
        setattr(sc, fn, _timed(acc, "schedule", getattr(sc, fn)))
    policies.make_router = _timed(acc, "routing", policies.make_router)
    # (getattr: an older tree lacks some, to compare with)
    for owner, fn, phase in ((sc, "_step_routes", "routing"), (sc, "_flow_routes", "routing"),
                             (sc, "_step_batch", "engine: add flows"),
                             (engine.Engine, "add_coflow", "engine: add flows"),
                             (engine.Engine, "add_coflows", "engine: add flows")):
        if hasattr(owner, fn):
            setattr(owner, fn, _timed(acc, phase, getattr(owner, fn)))
    engine.Engine.run = _timed(acc, "engine: run", engine.Engine.run)
    marks: dict[str, float] = {}
    simulate = sc.simulate_collective

    @functools.wraps(simulate)
    def simulate_marked(*args, **kwargs):
        try:
            return simulate(*args, **kwargs)
        finally:
            marks["simulated"] = time.process_time()
    sc.simulate_collective = simulate_marked
    info = next(c for c in flowherd.cli.app.registered_commands if c.name == argv[0])
    command = info.callback

    @functools.wraps(command)  # typer reads the flags off the wrapped signature
    def command_marked(*args, **kwargs):
        marks["body"] = time.process_time()
        try:
            return command(*args, **kwargs)
        finally:
            marks["done"] = time.process_time()
    info.callback = command_marked
    out = io.StringIO()
    t = time.process_time()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code or "simulated" not in marks:
        raise SystemExit(f"flowherd {' '.join(argv)} failed ({code}): {out.getvalue()[-500:]}")
    acc["parse"] = marks["body"] - t
    acc["output"] = marks["done"] - marks["simulated"]
    work = sum(acc.get(k, 0.0) for k in ("fabric", "schedule", "routing", "engine: add flows",
                                         "engine: run"))
    acc["rest"] = marks["simulated"] - marks["body"] - work
    return {k: acc.get(k, 0.0) for k in PHASES}


def main_(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    as_json = "--json" in argv
    args = [a for a in argv if a != "--json"] or DEFAULT
    if args[0] != "collective":
        print(f"error: the first argument must be the command 'collective' (its flags follow), got "
              f"{args[0]!r}", file=sys.stderr)
        return 2
    phases = measure(args)
    if as_json:
        print(json.dumps(phases))
        return 0
    for name, s in phases.items():
        print(f"{name:<20} {s:6.3f} CPU-s")
    print(f"{'total':<20} {sum(phases.values()):6.3f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main_(sys.argv[1:]))
