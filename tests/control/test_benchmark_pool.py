"""Benchmark runs in child processes (benchmarks/runpool.py) and what benchmarks/control.py and
control_home.py make of a run that dies: one line naming it, the other runs kept, exit code 3."""

import importlib.util
import json
import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import dying_run  # noqa: E402

import runpool  # noqa: E402

_SPEC = importlib.util.spec_from_file_location("control_benchmark", ROOT / "benchmarks" / "control.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_each_run_ends_with_its_result_or_one_line_saying_what_ended_it():
    got = {o.task: o for o in runpool.run_all(dying_run.square_or_fail, [2, 3, 4, 5, 6, 9], workers=2)}
    assert sorted(got) == [2, 3, 4, 5, 6, 9]
    assert got[2].result == 4 and got[9].result == 81 and got[2].failure is None
    assert got[3].result is None
    assert got[3].failure.startswith("ValueError: three is not allowed (its traceback: ")
    tb = Path(got[3].failure.split("(its traceback: ")[1].rstrip(")"))
    assert "square_or_fail" in tb.read_text()
    tb.unlink()
    assert got[4].failure.startswith("killed by SIGKILL") and "OOM killer" in got[4].failure
    assert got[5].failure.startswith("killed by SIGTERM")
    assert got[6].failure.startswith("exited with code 7 without a result")
    for o in got.values():
        assert "\n" not in (o.failure or "")


def test_each_outcome_carries_its_process_peak_memory():
    small, big = runpool.run_all(dying_run.grow, [1], 1), runpool.run_all(dying_run.grow, [300], 1)
    (s,), (b,) = list(small), list(big)
    assert b.result == 300
    # the child's rusage: the 300 MiB block is in its peak, not in the small one's
    assert b.peak_rss_bytes - s.peak_rss_bytes > 250 * 2**20
    assert b.cpu_s > 0


def test_a_run_does_not_inherit_the_memory_an_earlier_run_kept():
    # one worker, two runs: the first keeps 400 MiB in its process (as per-process caches keep an
    # earlier run's fabric and routes); the second starts in a fresh process without it (in a
    # reused pool worker its peak would start above 400 MiB)
    got = {o.task: o for o in runpool.run_all(dying_run.keep, [400, 1], workers=1)}
    assert got[400].result > 400 * 2**20
    assert got[1].result < 300 * 2**20 and got[1].peak_rss_bytes < 300 * 2**20


def test_a_run_over_max_rss_is_stopped_and_said():
    (o,) = list(runpool.run_all(dying_run.grow, [900], 1, max_rss_bytes=500 * 2**20))
    assert o.result is None
    assert o.failure.startswith("stopped at ") and o.failure.endswith("over the limit of 0.5 GB (--max-rss)")
    assert o.peak_rss_bytes > 500 * 2**20


def test_describe_death_names_the_signal_and_the_exit_code():
    assert runpool.describe_death(signal.SIGKILL, 14_200_000_000, None, None).startswith(
        "killed by SIGKILL at 14.2 GB peak resident")
    assert "by the kernel's OOM killer (memory.events oom_kill rose)" in runpool.describe_death(
        signal.SIGKILL, 10**9, 0, 1)
    assert runpool.describe_death(3 << 8, 10**9, None, None).startswith("exited with code 3")


TWO_JOBS = """
name: two-tiny
seed: 0
fabric: {kind: leaf-spine, servers: 4, gpus_per_server: 8, gpu: h100, nic_bandwidth: 400Gbps,
         nvlink_bandwidth: 450GB/s, leaves: 2, spines: 1, oversubscription: 4, link_latency: 1us}
workload:
  jobs:
    - {name: a, tenant: t1, model: llama3-8b, gpus: 16, parallelism: {tp: 8, dp: 2}, seq_len: 4096,
       micro_batch: 1, global_batch: 4, iterations: 3, submit: 0s}
    - {name: b, tenant: t2, model: llama3-8b, gpus: 16, parallelism: {tp: 8, dp: 2}, seq_len: 4096,
       micro_batch: 1, global_batch: 4, iterations: 3, submit: 0s}
placement: {method: spread}
network: ideal
simulation: {fidelity: collective, horizon: 1min, routing: ecmp}
"""


@pytest.mark.slow
def test_a_killed_run_is_one_line_and_the_finished_runs_are_kept(tmp_path, capsys):
    yaml = tmp_path / "two.yaml"
    yaml.write_text(TWO_JOBS)
    out = tmp_path / "rows.json"
    code = bench.main(["--scenarios", str(yaml), "--seeds", "2", "--controllers", "none", "flowherd",
                       "--workers", "2", "--json-out", str(out)], run=dying_run.run_or_die)
    assert code == bench.EXIT_INCOMPLETE == 3
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err + cap.out
    killed = [ln for ln in cap.err.splitlines() if "killed" in ln]
    assert len(killed) == 1
    assert killed[0].strip().startswith(f"run {yaml}, seed 1, flowherd: killed by SIGKILL")
    rows = json.loads(out.read_text())
    assert sorted((r["controller"], r["seed"]) for r in rows) == [("flowherd", 0), ("none", 0), ("none", 1)]
    assert all(r["peak_rss_bytes"] > 0 and r["process_cpu_s"] > 0 for r in rows)
    # the table and the paired figures stand on the seed that has every controller
    assert "incomplete: seed [1] left out of the table and the paired figures (seed 1, flowherd: killed by " \
           "SIGKILL" in cap.out
    assert "seeds [0], grant 'buffer'" in cap.out and "seeds [0, 1]" not in cap.out


def test_complete_seeds_are_those_with_every_controller():
    rows = [{"controller": c, "seed": s} for c, s in (("none", 0), ("a", 0), ("none", 1), ("a", 2))]
    assert bench.complete_seeds(rows, ["none", "a"], range(3)) == ([0], [1, 2])
    note = bench.incomplete_note("x", [1, 2], [{**r, "scenario": "x"} for r in rows], ["none", "a"],
                                 {("x", 1, "a"): "killed by SIGKILL at 1.0 GB peak resident"})
    assert "seed 1, a: killed by SIGKILL" in note and "seed 2, none: not run" in note
    assert os.linesep not in note


def test_runs_at_once_that_would_not_fit_are_refused_before_any_run(capsys, monkeypatch):
    monkeypatch.setenv("FLOWHERD_MAX_MEMORY", str(2**40))  # restored after: main sets it from --max-memory
    code = bench.main(["--scenarios", "rail", "--fidelity", "collective", "--seeds", "2", "--controllers",
                       "none", "--workers", "2", "--max-memory", "1GB"], run=dying_run.square_or_fail)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("2 runs at once x about ") and "(the largest estimate: rail, seed " in err
    assert err.endswith("--max-memory is 954 MiB (--workers, --max-memory)")
