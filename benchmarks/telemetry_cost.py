"""What telemetry costs on the embedded default: peak memory, CPU time and file sizes.

    python benchmarks/telemetry_cost.py [--repeats 3]

Runs ``flowherd simulate default --out DIR`` as whole processes with ``simulation.telemetry``
false and true (the default grid), alternated, ``--repeats`` times each, and prints the medians of
their CPU seconds (user + system) and peak resident memory, the change (targets: at most +20% run
time, +10% peak memory), the Parquet files' sizes, and whether the job times are the same. Saved
with benchmarks/record.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

import record

SRC = Path(__file__).resolve().parents[1] / "src"
CHILD = "import sys; from flowherd.cli import main; sys.exit(main(sys.argv[1:]))"


def one(scenario: Path, out: Path) -> tuple[float, float, list[float]]:
    """CPU seconds (user + system), peak RSS (MiB) and job times of one ``flowherd simulate``
    process (GNU time's %U, %S, %M)."""
    res = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-c", CHILD, "simulate",
                          str(scenario), "--out", str(out), "--json"], capture_output=True, text=True,
                         check=True, timeout=1800, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    user, system, kb = res.stderr.strip().splitlines()[-1].split()
    return float(user) + float(system), int(kb) / 1024, [j["jct_s"] for j in json.loads(res.stdout)["jobs"]]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(SRC))
    from flowherd.experiments.scenario import read_scenario_mapping

    cpu: dict[bool, list[float]] = {False: [], True: []}
    rss: dict[bool, list[float]] = {False: [], True: []}
    sizes: dict[str, int] = {}
    jct: dict[bool, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="telemetry_cost_") as tmp:
        root = Path(tmp)
        for on in (False, True):
            src = read_scenario_mapping("default")
            src["simulation"] = {**src["simulation"], "telemetry": on}
            (root / f"{on}.yaml").write_text(yaml.safe_dump(src))
        for k in range(args.repeats):
            for on in (False, True) if k % 2 == 0 else (True, False):
                out = root / f"out-{on}-{k}"
                c, m, jct[on] = one(root / f"{on}.yaml", out)
                cpu[on].append(c)
                rss[on].append(m)
                if on:
                    tel = next((out / "telemetry").iterdir())
                    sizes = {p.name: p.stat().st_size for p in sorted(tel.iterdir())}
                print(f"telemetry {'on ' if on else 'off'}: {c:.2f} CPU-s, {rss[on][-1]:.0f} MiB", flush=True)
    med = {on: (statistics.median(cpu[on]), statistics.median(rss[on])) for on in (False, True)}
    d_cpu = med[True][0] / med[False][0] - 1
    d_rss = med[True][1] / med[False][1] - 1
    print(f"\nmedian of {args.repeats}: off {med[False][0]:.2f} CPU-s {med[False][1]:.0f} MiB, on "
          f"{med[True][0]:.2f} CPU-s {med[True][1]:.0f} MiB: run time {100 * d_cpu:+.1f}%, peak memory "
          f"{100 * d_rss:+.1f}%")
    print("files: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items()))
    print(f"job times the same on and off: {jct[True] == jct[False]}")
    record.save("telemetry_cost", {
        "extra run time (CPU)": record.figure(round(100 * d_cpu, 1), "%", target="<= 20%", met=d_cpu <= 0.2),
        "extra peak memory": record.figure(round(100 * d_rss, 1), "%", target="<= 10%", met=d_rss <= 0.1),
        "telemetry files": record.figure(round(sum(sizes.values()) / 1e6, 2), "MB"),
        "same job times": record.figure(str(jct[True] == jct[False]))},
        tables=[record.table("medians per setting", ["telemetry", "CPU s", "peak RSS MiB"],
                             [["off", round(med[False][0], 2), round(med[False][1])],
                              ["on", round(med[True][0], 2), round(med[True][1])]]),
                record.table("files (bytes)", ["file", "bytes"], [[k, v] for k, v in sizes.items()])],
        notes="flowherd simulate default --out DIR, whole processes, telemetry false vs true "
                         "(the default grid: the horizon over 100 bins)")


if __name__ == "__main__":
    main(sys.argv[1:])
