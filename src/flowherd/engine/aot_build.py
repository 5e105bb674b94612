"""``python -m flowherd.engine.aot_build [--if-stale] [OUTPUT]``: compile the engine's kernels ahead of
time (`flowherd.engine.aot.build`); ``--status`` says which path the kernels take."""

from __future__ import annotations

import sys

from flowherd.engine import aot


def main(argv: list[str]) -> int:
    if argv[:1] == ["--status"]:
        which, why = aot.mode()
        print(f"{which}: {why}")
        return 0
    if argv[:1] == ["--if-stale"]:
        argv = argv[1:]
        if aot.mode()[0] == "aot":
            print("the ahead-of-time kernels are current")
            return 0
    out = aot.build(argv[0] if argv else None)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
