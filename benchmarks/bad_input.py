"""Print the verdict on every bad, hostile and faulty input, and the count per verdict.

Two tables:

* the malformed inputs of ``tests/cli/test_bad_input_table.py``, each through `flowherd.cli.main`
  in this process, with its exit code and its one error line;
* the hostile and faulty ones of ``tests/cli/hostile_cases.py``, each as its own `flowherd`
  process under its conditions (an address-space limit, no network namespace, a full or
  read-only tmpfs, a SIGINT / SIGTERM part-way), timed line by line.

Each gets a verdict: ``clear`` (one clear line; for a run that must go on, names escaped and the
result kept), ``traceback``, ``silent`` (no output for 5 s, a gap of a minute, no answer, or more
than 5 s to stop after a signal), ``accepted`` (exit 0 on an input that must be refused),
``unclear`` (refused, but not in one line naming what was expected), ``raw`` (a control or bidi
character reached the terminal), ``code ran``, ``network``, ``lost``; ``skipped`` where a
condition cannot be set up (mounts and network namespaces need root). The counts are saved with
`benchmarks/record.py` (``bad_input.json``).

    PYTHONPATH=src python benchmarks/bad_input.py [--width 160] [--only ID ...] [--quick]

``--quick`` leaves out the slow hostile cases (the demo, the 10^6-GPU collective, the sweeps),
``--part`` runs one table; such a run is saved as ``bad_input_partial``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import signal
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 120


def _module(name: str):
    path = ROOT / "tests" / "cli" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _table_verdict(case, code: object, text: str) -> str:
    if code == "hang":
        return "silent"
    if code == "traceback" or "Traceback" in text:
        return "traceback"
    if code == 0:
        return "accepted"
    one = text.startswith("error: ") and text.count("\n") == 1
    return "clear" if one and all(p.replace("{d}", ".") in text for p in case.expect) else "unclear"


def _table(args, verdicts: Counter, rows: list) -> None:
    """The in-process table of malformed inputs."""
    from flowherd.cli import main as cli

    table = _module("test_bad_input_table")

    def alarm(signum, frame):
        raise TimeoutError

    with tempfile.TemporaryDirectory(prefix="flowherd-bad-input-") as root:
        for case in table.CASES:
            if args.only and case.id not in args.only:
                continue
            d = Path(tempfile.mkdtemp(dir=root))
            argv = table._materialize(case, d)
            err, out = io.StringIO(), io.StringIO()
            cwd = os.getcwd()
            os.chdir(d)
            signal.signal(signal.SIGALRM, alarm)
            signal.alarm(DEADLINE_S)
            code: object
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                    code = cli(argv)
            except TimeoutError:
                code = "hang"
            except BaseException:  # a traceback: counted, shown
                code = "traceback"
                err.write(traceback.format_exc().splitlines()[-1] + "\n")
            finally:
                signal.alarm(0)
                os.chdir(cwd)
            text = err.getvalue().replace(str(d), ".")
            v = _table_verdict(case, code, text)
            verdicts[v] += 1
            rows.append(["table", case.id, v, str(code), text.strip()[:args.width]])
            print(f"{case.id:44} {v:>9} {code!s:>4}  {text.strip()[:args.width]}", flush=True)


def _hostile(args, verdicts: Counter, rows: list) -> None:
    """The hostile and faulty inputs, each its own process."""
    hostile = _module("hostile_cases")
    with tempfile.TemporaryDirectory(prefix="flowherd-hostile-") as root:
        for case in hostile.CASES:
            if (args.only and case.id not in args.only) or (args.quick and case.slow):
                continue
            d = Path(root) / case.id
            res = hostile.run_case(case, d)
            v = hostile.verdict(case, res, d)
            verdicts[v] += 1
            lines = [ln for ln in res.err.splitlines() if ln.strip()]
            last = res.skipped or (lines[-1] if lines else res.out.strip().splitlines()[-1:] or [""])
            last = (last if isinstance(last, str) else last[0]).replace(str(d), ".")
            timing = (f"{res.wall_s:.1f} s" + (f", stopped {res.stop_s:.1f} s after the signal"
                                                if res.stop_s is not None else ""))
            rows.append(["hostile", case.id, v, f"{res.rc}", f"{timing}; {last[:args.width]}"])
            print(f"{case.id:44} {v:>9} {res.rc!s:>4}  ({timing}) {hostile.RAW.sub('?', last)[:args.width]}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=160, help="characters of each error line to print")
    ap.add_argument("--only", nargs="*", default=None, help="run only these case ids")
    ap.add_argument("--quick", action="store_true", help="leave out the slow hostile cases")
    ap.add_argument("--part", choices=("both", "table", "hostile"), default="both",
                    help="run one of the two tables only")
    args = ap.parse_args()
    verdicts: Counter = Counter()
    rows: list = []
    if args.part in ("both", "table"):
        print("== malformed inputs (tests/cli/test_bad_input_table.py), in this process")
        _table(args, verdicts, rows)
    if args.part in ("both", "hostile"):
        print("\n== hostile and faulty inputs (tests/cli/hostile_cases.py), one process each")
        _hostile(args, verdicts, rows)
    order = ["clear", "traceback", "silent", "accepted", "unclear", "raw", "code ran", "network", "lost",
             "skipped"]
    counts = {k: verdicts.get(k, 0) for k in order if verdicts.get(k, 0) or k in order[:4]}
    print()
    print(f"{sum(verdicts.values())} cases: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import record

    name = "bad_input_partial" if (args.only or args.quick or args.part != "both") else "bad_input"
    record.save(name, {f"verdict: {k}": record.figure(v, "cases") for k, v in counts.items()},
                tables=[record.table("verdict per case", ["table", "case", "verdict", "exit", "what it said"],
                                     rows)],
                notes="clear: one clear line (or names escaped / result kept, one line saying where); "
                      "see the docstring of benchmarks/bad_input.py for every verdict")


if __name__ == "__main__":
    sys.exit(main())
