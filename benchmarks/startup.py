"""Time a newcomer's commands against the README's budgets (issue 16) and print each.

    python benchmarks/startup.py               # --help, a 64-GPU collective, simulate default
    python benchmarks/startup.py --with-make   # also `make demo` and `make test` (15+ minutes)
    python benchmarks/startup.py --repeats 9 --skip-simulate
    python benchmarks/startup.py --skip-simulate --compare-jit   # the collective on both kernel paths
    python benchmarks/startup.py --skip-simulate --breakdown     # and its CPU seconds phase by phase

Budgets are for a quiet 2-core machine: `flowherd --help` < 0.3 s, a 64-GPU `collective` < 0.6 s
(medians of --repeats runs), `make demo` <= 5 min, `make test` <= 10 min. `simulate default` has
no budget (the README quotes its time). The load average is printed beside the figures: on a
busy machine every wall time is longer, and a ratio to `python -c pass` (also printed) says how
much; the CPU seconds (user + system of the command, also medians) are what a quiet machine's
wall time would be for these single-threaded commands, nearly whatever the load. The path the
engine's kernels take (`flowherd.engine.aot`: compiled ahead of time, or numba's JIT) is printed
first: the JIT path costs about a second more. ``--breakdown`` adds the collective's CPU seconds
phase by phase (`benchmarks/collective_phases.py`: imports, flag parsing, fabric, schedule,
routing, engine, output; medians of --repeats runs), and whether Python may cache its bytecode
(``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``: every module compiled at every start).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECTIVE = ["collective", "--op", "allreduce", "--size", "1GiB", "--gpus", "64",
              "--fabric", "dgx-superpod-h100-1su"]
BUDGETS_S = {"flowherd --help": 0.3, "flowherd " + " ".join(COLLECTIVE): 0.6,
             "flowherd simulate default": None, "make demo": 300.0, "make test": 600.0}


def _flowherd() -> list[str]:
    script = Path(sys.executable).with_name("flowherd")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from flowherd.cli import main; sys.exit(main(sys.argv[1:]))"]


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _time(cmd: list[str], *, cwd: Path, timeout_s: float) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the command and its children)."""
    c0, t0 = _cpu_s(), time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         timeout=timeout_s)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, cpu


def _median(cmd: list[str], repeats: int, cwd: Path) -> tuple[float, float, list[float]]:
    """Median wall and CPU seconds of ``repeats`` runs after a warm one, and the walls."""
    _time(cmd, cwd=cwd, timeout_s=300)  # warm: numba's cache, the OS's file cache
    runs = [_time(cmd, cwd=cwd, timeout_s=300) for _ in range(repeats)]
    return (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs),
            [w for w, _ in runs])


def _line(name: str, wall_s: float, detail: str = "", cpu_s: float | None = None) -> None:
    budget = BUDGETS_S.get(name)
    verdict = "no budget" if budget is None else ("within" if wall_s <= budget else "OVER") + \
        f" budget {budget:g} s"
    cpu = "" if cpu_s is None else f"  CPU {cpu_s:.2f} s" + (
        "" if budget is None or name.startswith("make") else
        f" ({'within' if cpu_s <= budget else 'OVER'})")
    print(f"{name:<78} {wall_s:8.2f} s  {verdict}{cpu}{'  ' + detail if detail else ''}", flush=True)


def _breakdown(repeats: int) -> None:
    """The collective's phases (`collective_phases.py`, one process per run), medians."""
    import json

    script = Path(__file__).with_name("collective_phases.py")
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, str(script), "--json", *COLLECTIVE], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise SystemExit(f"{script.name} failed: {out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    total = statistics.median(sum(r.values()) for r in runs)
    print(f"  phases of the collective, CPU seconds (medians of {repeats} runs; total {total:.3f}):",
          flush=True)
    for name, s in med.items():
        print(f"    {name:<24} {s:6.3f} s  {100 * s / total:4.0f}%", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each short command (median)")
    ap.add_argument("--with-make", action="store_true", help="also time `make demo` and `make test`")
    ap.add_argument("--skip-simulate", action="store_true", help="skip `flowherd simulate default`")
    ap.add_argument("--compare-jit", action="store_true",
                    help="also time the collective with FLOWHERD_JIT=1 (numba's JIT, warm cache)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also the collective's CPU seconds phase by phase (collective_phases.py)")
    args = ap.parse_args(argv)
    fh = _flowherd()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {' '.join(fh)}", flush=True)
    kernels = subprocess.run([sys.executable, "-m", "flowherd.engine.aot_build", "--status"],
                             capture_output=True, text=True, cwd=ROOT)
    print(f"engine kernels: {kernels.stdout.strip() or kernels.stderr.strip()[-300:]}", flush=True)
    cached = any((ROOT / "src" / "flowherd").glob("__pycache__/*.pyc"))
    no_write = "set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "unset"
    print(f"bytecode: PYTHONDONTWRITEBYTECODE={no_write}, flowherd's __pycache__ "
          f"{'present' if cached else 'absent'}", flush=True)
    base, base_cpu, _ = _median([sys.executable, "-c", "pass"], args.repeats, ROOT)
    print(f"{'python -c pass (the interpreter alone)':<78} {base:8.2f} s  CPU {base_cpu:.2f} s",
          flush=True)
    cpus = {}
    for name, argv_ in (("flowherd --help", ["--help"]), ("flowherd " + " ".join(COLLECTIVE), COLLECTIVE)):
        med, cpus[name], runs = _median([*fh, *argv_], args.repeats, ROOT)
        _line(name, med, f"median of {len(runs)}: {', '.join(f'{r:.2f}' for r in runs)}", cpus[name])
    help_cpu, coll_cpu = cpus.values()
    print(f"{'  the collective / --help, CPU':<78} {coll_cpu / max(help_cpu, 1e-9):8.2f} x", flush=True)
    if args.compare_jit:
        os.environ["FLOWHERD_JIT"] = "1"
        try:
            med, cpu, runs = _median([*fh, *COLLECTIVE], args.repeats, ROOT)
        finally:
            del os.environ["FLOWHERD_JIT"]
        print(f"{'  the same, FLOWHERD_JIT=1 (numba JIT, cached)':<78} {med:8.2f} s  CPU {cpu:.2f} s  "
              f"median of {len(runs)}: {', '.join(f'{r:.2f}' for r in runs)}", flush=True)
    if args.breakdown:
        _breakdown(args.repeats)
    if not args.skip_simulate:
        wall, cpu = _time([*fh, "simulate", "default"], cwd=ROOT, timeout_s=3600)
        _line("flowherd simulate default", wall, cpu_s=cpu)
    if args.with_make:
        make = shutil.which("make")
        if make is None:
            raise SystemExit("make is not installed")
        # as a newcomer runs it: from the checkout, into flowherd-demo/ there
        for target in ("demo", "test"):
            wall, cpu = _time([make, target], cwd=ROOT, timeout_s=7200)
            _line(f"make {target}", wall, cpu_s=cpu)
    print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
