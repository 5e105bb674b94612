"""Print the bad-input table of issue 15: every malformed input of tests/cli/test_bad_input_table.py
through `flowherd.cli.main` in this process, with its exit code and its one error line, then the
counts (cases, exit 2, one line, tracebacks, hangs).

    PYTHONPATH=src python benchmarks/bad_input.py [--width 200]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 120


def _cases():
    path = ROOT / "tests" / "cli" / "test_bad_input_table.py"
    spec = importlib.util.spec_from_file_location("bad_input_table", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=200, help="characters of each error line to print")
    args = ap.parse_args()
    from flowherd.cli import main as cli

    table = _cases()
    counts = {"cases": 0, "exit 2": 0, "one line": 0, "tracebacks": 0, "hangs": 0, "expected parts": 0}

    def alarm(signum, frame):
        raise TimeoutError

    with tempfile.TemporaryDirectory(prefix="flowherd-bad-input-") as root:
        for case in table.CASES:
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
                counts["hangs"] += 1
            except BaseException:  # a traceback: counted, shown
                code = "traceback"
                counts["tracebacks"] += 1
                err.write(traceback.format_exc().splitlines()[-1] + "\n")
            finally:
                signal.alarm(0)
                os.chdir(cwd)
            text = err.getvalue().replace(str(d), ".")
            counts["cases"] += 1
            counts["exit 2"] += code == 2
            counts["one line"] += text.startswith("error: ") and text.count("\n") == 1
            counts["tracebacks"] += code != "traceback" and "Traceback" in text
            counts["expected parts"] += all(p.replace("{d}", ".") in text for p in case.expect)
            print(f"{case.id:28} {code!s:>4}  {text.strip()[:args.width]}")
    print()
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))


if __name__ == "__main__":
    sys.exit(main())
