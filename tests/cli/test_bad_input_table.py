# ruff: noqa: E501  (a table: one malformed input per line reads better than wrapped)
"""The bad-input table: malformed inputs across scenario, fabric, sweep, plan, trace, model
file and CLI flags, each through `flowherd.cli.main` in this process. Every one must end with exit
code 2 and one line on stderr naming the field, the value and what was expected; no traceback and
no hang (each case runs under a SIGALRM deadline).

`test_table_has_enough_distinct_cases` counts them (at least 60, distinct argv and files).
"""

from __future__ import annotations

import copy
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowherd.cli import main
from flowherd.experiments.sweep import set_field

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
TINY = yaml.safe_load((SCENARIOS / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0
DEADLINE_S = 120  # a hang fails the case instead of the suite

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
) + "fabric: *i\n"
TRACE_OK = "job_id,submit_time_s,duration_s,num_gpus\nj1,0,100,8\n"
PLAN_OK = {"method": "packed", "objective": 1.0, "lower_bound": 1.0, "gap": 0.0, "solve_s": 0.0, "jobs": []}
GOOD_FABRIC = {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 1, "leaves": 2, "spines": 2}


def scen(**paths: Any) -> dict[str, Any]:
    """The tiny scenario with dotted paths set (``workload.jobs[0].gpus=...``); `_drop` removes keys."""
    out = copy.deepcopy(TINY)
    for path, value in paths.items():
        out = set_field(out, path.replace("__", "."), value)
    return out


def sweep(**over: Any) -> dict[str, Any]:
    return {"name": "bad", "base": "s.yaml", "axes": {"workload.background.load": [0.0]}, "seeds": 1, **over}


@dataclass
class Case:
    """One malformed input: the files it needs (name -> text, bytes or a YAML value), the argv
    (``{d}`` is the case's directory) and the substrings the one error line must hold."""

    id: str
    argv: list[str]
    expect: tuple[str, ...]
    files: dict[str, Any] = field(default_factory=dict)


def _f(name: str) -> str:
    return "{d}/" + name


CASES: list[Case] = [
    # ---- scenario files -------------------------------------------------------------------------
    Case("scenario-binary", ["simulate", _f("s.yaml")], ("s.yaml", "not text", "0x", "expected a YAML file"),
         {"s.yaml": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"}),
    Case("scenario-nul-byte", ["simulate", _f("s.yaml")], ("s.yaml", "NUL byte", "expected a YAML file"),
         {"s.yaml": "name: x\x00\n"}),
    Case("scenario-directory", ["simulate", "{d}"], ("is a directory", "expected a YAML file")),
    Case("scenario-missing", ["simulate", _f("nope.yaml")], ("nope.yaml", "no scenario file", "expected")),
    Case("scenario-dup-key", ["simulate", _f("s.yaml")],
         ("duplicate key 'seed'", "line 3", "first at line 2", "expected each key once"),
         {"s.yaml": "name: x\nseed: 1\nseed: 2\nfabric: {kind: leaf-spine, servers: 4, leaves: 2, spines: 2}\n"}),
    Case("scenario-dup-nested-key", ["simulate", _f("s.yaml")], ("duplicate key 'servers'", "expected each key"),
         {"s.yaml": "fabric:\n  kind: leaf-spine\n  servers: 4\n  servers: 8\n"}),
    Case("scenario-billion-laughs", ["simulate", _f("s.yaml")],
         ("expands to more than 1,000,000 values", "aliases", "expected a plain document"), {"s.yaml": LAUGHS}),
    Case("scenario-bad-yaml", ["simulate", _f("s.yaml")], ("not valid YAML", "expected ',' or '}'", "line 2"),
         {"s.yaml": "fabric: {kind: leaf-spine\n"}),
    Case("scenario-not-mapping", ["simulate", _f("s.yaml")], ("must be a YAML mapping", "got list"),
         {"s.yaml": "- 1\n- 2\n"}),
    Case("scenario-unknown-field", ["simulate", _f("s.yaml")], ("'fabrik'", "did you mean 'fabric'", "expected"),
         {"s.yaml": {**{k: v for k, v in TINY.items() if k != "fabric"}, "fabrik": TINY["fabric"]}}),
    Case("scenario-missing-fabric", ["simulate", _f("s.yaml")], ("missing required field", "(fabric)"),
         {"s.yaml": {k: v for k, v in TINY.items() if k != "fabric"}}),
    Case("scenario-seed-negative", ["simulate", _f("s.yaml")], ("-1", "(seed)", "greater than or equal to 0"),
         {"s.yaml": scen(seed=-1)}),
    Case("scenario-seed-2-64", ["simulate", _f("s.yaml")], ("18446744073709551616", "(seed)", "less than"),
         {"s.yaml": scen(seed=2**64)}),
    Case("scenario-huge-echo", ["simulate", _f("s.yaml")], ("(name)", "valid string", "..."),
         {"s.yaml": scen(name=list(range(20_000)))}),
    # ---- fabric (inside a scenario and as a file) -----------------------------------------------
    Case("fabric-servers-1e9", ["simulate", _f("s.yaml")],
         ("1,000,000,000 servers", "needs about", "available", "(fabric.servers)"),
         {"s.yaml": scen(**{"fabric.servers": 10**9})}),
    Case("fabric-k-huge", ["simulate", _f("s.yaml")], ("k=100,000", "needs about", "(fabric.k)"),
         {"s.yaml": scen(fabric={"kind": "fat-tree", "k": 100_000})}),
    Case("fabric-servers-string", ["simulate", _f("s.yaml")], ("'four'", "(fabric.servers)", "expected"),
         {"s.yaml": scen(**{"fabric.servers": "four"})}),
    Case("fabric-servers-zero", ["simulate", _f("s.yaml")], ("0", "(fabric.servers)", "greater than or equal to 1"),
         {"s.yaml": scen(**{"fabric.servers": 0})}),
    Case("fabric-kind-typo", ["simulate", _f("s.yaml")], ("'fat-tre'", "(fabric.kind)", "did you mean 'fat-tree'"),
         {"s.yaml": scen(**{"fabric.kind": "fat-tre"})}),
    Case("fabric-key-typo", ["simulate", _f("s.yaml")], ("'serverz'", "(fabric.serverz)", "did you mean 'servers'"),
         {"s.yaml": scen(**{"fabric.serverz": 4})}),
    Case("fabric-negative-bandwidth", ["simulate", _f("s.yaml")], ("'-400Gbps'", "(fabric.nic_bandwidth)", "positive"),
         {"s.yaml": scen(**{"fabric.nic_bandwidth": "-400Gbps"})}),
    Case("fabric-bandwidth-unit", ["simulate", _f("s.yaml")], ("'400Gbpz'", "(fabric.nic_bandwidth)", "expected units"),
         {"s.yaml": scen(**{"fabric.nic_bandwidth": "400Gbpz"})}),
    Case("fabric-bandwidth-absurd", ["simulate", _f("s.yaml")], ("'1e30Gbps'", "(fabric.nic_bandwidth)", "at most"),
         {"s.yaml": scen(**{"fabric.nic_bandwidth": "1e30Gbps"})}),
    Case("fabric-latency-absurd", ["simulate", _f("s.yaml")], ("'1e20s'", "(fabric.link_latency)", "at most"),
         {"s.yaml": scen(**{"fabric.link_latency": "1e20s"})}),
    Case("fabric-oversub-zero", ["simulate", _f("s.yaml")], ("0", "(fabric.oversubscription)", "greater than 0"),
         {"s.yaml": scen(**{"fabric.oversubscription": 0})}),
    Case("scenario-unknown-preset", ["simulate", _f("s.yaml")],
         ("'dgx-superpod-h100-1sux'", "did you mean 'dgx-superpod-h100-1su'", "fabric --list"),
         {"s.yaml": scen(fabric="dgx-superpod-h100-1sux")}),
    Case("fabric-file-binary", ["fabric", _f("f.yaml")], ("f.yaml", "not text", "expected a YAML file"),
         {"f.yaml": bytes(range(256))}),
    Case("fabric-file-dup-key", ["fabric", _f("f.yaml")], ("duplicate key 'spines'", "expected each key once"),
         {"f.yaml": "kind: leaf-spine\nservers: 4\nleaves: 2\nspines: 2\nspines: 4\n"}),
    Case("fabric-file-huge", ["fabric", _f("f.yaml")], ("servers", "needs about", "available"),
         {"f.yaml": {**GOOD_FABRIC, "servers": 10**10}}),
    Case("fabric-file-missing", ["fabric", _f("nope.yaml")], ("nope.yaml", "no fabric file", "expected a YAML file")),
    Case("fabric-unknown-preset", ["fabric", "dgx-superpod-h100-1sux"],
         ("'dgx-superpod-h100-1sux'", "did you mean 'dgx-superpod-h100-1su'", "fabric --list")),
    # ---- jobs, arrivals, background, controller, simulation ---------------------------------------
    Case("job-gpus-1e9", ["simulate", _f("s.yaml")], ("1,000,000,000 GPUs", "fabric has 32", "workload.jobs[0].gpus"),
         {"s.yaml": scen(**{"workload.jobs[0].gpus": 10**9, "workload.jobs[0].parallelism": {"tp": 10**9}})}),
    Case("job-gpus-zero", ["simulate", _f("s.yaml")], ("0", "workload.jobs[0].gpus", "greater than or equal to 1"),
         {"s.yaml": scen(**{"workload.jobs[0].gpus": 0})}),
    Case("job-model-unknown", ["simulate", _f("s.yaml")], ("'llama9-8b'", "did you mean"),
         {"s.yaml": scen(**{"workload.jobs[0].model": "llama9-8b"})}),
    Case("job-tp-zero", ["simulate", _f("s.yaml")], ("0", "workload.jobs[0].parallelism.tp", "greater than"),
         {"s.yaml": scen(**{"workload.jobs[0].parallelism.tp": 0})}),
    Case("job-zero-stage", ["simulate", _f("s.yaml")], ("5", "parallelism.zero", "less than or equal to 3"),
         {"s.yaml": scen(**{"workload.jobs[0].parallelism.zero": 5})}),
    Case("job-submit-malformed", ["simulate", _f("s.yaml")], ("'yesterday'", "workload.jobs[0].submit", "expected"),
         {"s.yaml": scen(**{"workload.jobs[0].submit": "yesterday"})}),
    Case("job-kind", ["simulate", _f("s.yaml")], ("'finetune'", "workload.jobs[0].kind", "'training' or 'inference'"),
         {"s.yaml": scen(**{"workload.jobs[0].kind": "finetune"})}),
    Case("job-field-typo", ["simulate", _f("s.yaml")], ("'iteratons'", "did you mean 'iterations'"),
         {"s.yaml": scen(**{"workload.jobs[0].iteratons": 3})}),
    Case("job-names-twice", ["simulate", _f("s.yaml")], ("'a'", "twice", "unique"),
         {"s.yaml": scen(**{"workload.jobs[1].name": "a"})}),
    Case("arrivals-rate-1e9", ["simulate", _f("s.yaml")],
         ("2,000,000,000 jobs", "'1e9/h'", "available", "workload.arrivals[0].rate"),
         {"s.yaml": scen(**{"workload.arrivals": [{"rate": "1e9/h", "until": "2h", "mix": [TINY["workload"]["jobs"][0]]}]})}),
    Case("arrivals-rate-malformed", ["simulate", _f("s.yaml")], ("'fast'", "workload.arrivals[0].rate", "such as '4/h'"),
         {"s.yaml": scen(**{"workload.arrivals": [{"rate": "fast", "until": "2h", "mix": [TINY["workload"]["jobs"][0]]}]})}),
    Case("arrivals-until-negative", ["simulate", _f("s.yaml")], ("'-1h'", "workload.arrivals[0].until", "non-negative"),
         {"s.yaml": scen(**{"workload.arrivals": [{"rate": "4/h", "until": "-1h", "mix": [TINY["workload"]["jobs"][0]]}]})}),
    Case("arrivals-empty-mix", ["simulate", _f("s.yaml")], ("[]", "workload.arrivals[0].mix", "at least 1"),
         {"s.yaml": scen(**{"workload.arrivals": [{"rate": "4/h", "until": "1h", "mix": []}]})}),
    Case("arrivals-weights", ["simulate", _f("s.yaml")], ("3 entries", "expected 1", "weights"),
         {"s.yaml": scen(**{"workload.arrivals": [{"rate": "4/h", "until": "1h", "weights": [1, 2, 3],
                                                   "mix": [TINY["workload"]["jobs"][0]]}]})}),
    Case("background-load", ["simulate", _f("s.yaml")], ("1.5", "workload.background.load", "less than or equal to 1"),
         {"s.yaml": scen(**{"workload.background.load": 1.5})}),
    Case("background-distribution", ["simulate", _f("s.yaml")], ("'web_serch'", "workload.background.distribution"),
         {"s.yaml": scen(**{"workload.background": {"load": 0.1, "distribution": "web_serch"}})}),
    Case("controller-unknown", ["simulate", _f("s.yaml")], ("'casini'", "did you mean 'cassini'", "controller.name"),
         {"s.yaml": scen(**{"controller.name": "casini"})}),
    Case("fidelity", ["simulate", _f("s.yaml")], ("'exact'", "simulation.fidelity", "'step', 'collective' or 'phase'"),
         {"s.yaml": scen(**{"simulation.fidelity": "exact"})}),
    Case("horizon-malformed", ["simulate", _f("s.yaml")], ("'4 weeks'", "simulation.horizon", "expected units"),
         {"s.yaml": scen(**{"simulation.horizon": "4 weeks"})}),
    Case("horizon-absurd", ["simulate", _f("s.yaml")], ("'1e12h'", "simulation.horizon", "at most"),
         {"s.yaml": scen(**{"simulation.horizon": "1e12h"})}),
    # ---- traces -----------------------------------------------------------------------------------
    Case("trace-missing", ["simulate", _f("s.yaml")], ("nope.csv", "traces"),
         {"s.yaml": scen(**{"workload.traces": [{"path": "{d}/nope.csv"}]})}),
    Case("trace-num-gpus-1e9", ["simulate", _f("s.yaml")], ("'j1'", "1,000,000,000 GPUs", "fabric has 32",
                                                              "workload.traces[0].path"),
         {"s.yaml": scen(**{"workload.traces": [{"path": "{d}/t.csv"}]}),
          "t.csv": "job_id,submit_time_s,duration_s,num_gpus\nj1,0,100,1000000000\n"}),
    Case("trace-missing-column", ["simulate", _f("s.yaml")], ("row 2", "expected columns", "num_gpus"),
         {"s.yaml": scen(**{"workload.traces": [{"path": "{d}/t.csv"}]}),
          "t.csv": "job_id,submit_time_s,duration_s\nj1,0,100\n"}),
    Case("trace-bad-number", ["simulate", _f("s.yaml")], ("row 2", "'soon'", "with numbers"),
         {"s.yaml": scen(**{"workload.traces": [{"path": "{d}/t.csv"}]}),
          "t.csv": "job_id,submit_time_s,duration_s,num_gpus\nj1,soon,100,8\n"}),
    Case("trace-binary", ["simulate", _f("s.yaml")], ("cannot read trace", "t.csv", "traces"),
         {"s.yaml": scen(**{"workload.traces": [{"path": "{d}/t.csv"}]}), "t.csv": b"\xff\xfe\x00\x01" * 50}),
    Case("trace-max-jobs-zero", ["simulate", _f("s.yaml")], ("0", "workload.traces[0].max_jobs", "greater than"),
         {"s.yaml": scen(**{"workload.traces": [{"path": "{d}/t.csv", "max_jobs": 0}]}), "t.csv": TRACE_OK}),
    # ---- model files (a trained controller) -------------------------------------------------------
    Case("model-file-missing", ["simulate", _f("s.yaml"), "--controller", _f("m.zip")],
         ("m.zip", "no trained model file", "controller.name", "expected")),
    Case("model-file-not-zip", ["simulate", _f("s.yaml"), "--controller", _f("m.zip")],
         ("m.zip", "controller"), {"s.yaml": TINY, "m.zip": "not a zip file\n"}),
    Case("job-model-dict-bad", ["simulate", _f("s.yaml")], ("workload.jobs[0]",),
         {"s.yaml": scen(**{"workload.jobs[0].model": {"layers": -1}})}),
    # ---- plan files -------------------------------------------------------------------------------
    Case("plan-missing", ["simulate", _f("s.yaml"), "--plan", _f("p.json")], ("p.json", "no plan file", "expected")),
    Case("plan-not-json", ["simulate", _f("s.yaml"), "--plan", _f("p.json")], ("p.json", "is not JSON", "(--plan)", "expected a plan JSON"),
         {"p.json": "{method: packed"}),
    Case("plan-binary", ["simulate", _f("s.yaml"), "--plan", _f("p.json")], ("p.json", "not text", "plan JSON"),
         {"p.json": b"\x00\x01\x02\xff"}),
    Case("plan-list", ["simulate", _f("s.yaml"), "--plan", _f("p.json")], ("p.json", "JSON object", "(--plan)"),
         {"p.json": "[1, 2]"}),
    Case("plan-missing-key", ["simulate", _f("s.yaml"), "--plan", _f("p.json")], ("missing required field", "jobs"),
         {"p.json": json.dumps({k: v for k, v in PLAN_OK.items() if k != "jobs"})}),
    Case("plan-bad-job", ["simulate", _f("s.yaml"), "--plan", _f("p.json")], ("plan job 0", "expected name and gpus"),
         {"p.json": json.dumps({**PLAN_OK, "jobs": [{"name": "a"}]})}),
    Case("plan-directory", ["simulate", _f("s.yaml"), "--plan", "{d}"], ("is a directory", "plan JSON")),
    # ---- sweeps -----------------------------------------------------------------------------------
    Case("sweep-name-dotdot", ["sweep", _f("w.yaml"), "--inline"], ("'../evil'", "(name)", "no '/' or '..'"),
         {"w.yaml": sweep(name="../evil")}),
    Case("sweep-name-absolute", ["sweep", _f("w.yaml"), "--inline"], ("'/tmp/x'", "(name)", "becomes a directory"),
         {"w.yaml": sweep(name="/tmp/x")}),
    Case("sweep-seed-1e20", ["sweep", _f("w.yaml"), "--inline"], ("100000000000000000000", "seeds", "2**63-1"),
         {"w.yaml": sweep(seeds=[10**20])}),
    Case("sweep-seeds-zero", ["sweep", _f("w.yaml"), "--inline"], ("0", "(seeds)", "count in 1.."),
         {"w.yaml": sweep(seeds=0)}),
    Case("sweep-seeds-too-many", ["sweep", _f("w.yaml"), "--inline"], ("(seeds)", "count in 1..1,000,000"),
         {"w.yaml": sweep(seeds=10**12)}),
    Case("sweep-axis-fabric-typo", ["sweep", _f("w.yaml"), "--inline"],
         ("'fabric.oversubscripton'", "did you mean 'oversubscription'", "axes.fabric.oversubscripton"),
         {"w.yaml": sweep(axes={"fabric.oversubscripton": [1, 2]})}),
    Case("sweep-axis-typo", ["sweep", _f("w.yaml"), "--inline"], ("'placement.methd'", "did you mean 'method'"),
         {"w.yaml": sweep(axes={"placement.methd": ["packed"]})}),
    Case("sweep-axis-empty", ["sweep", _f("w.yaml"), "--inline"], ("'fabric.servers'", "has no values", "axes"),
         {"w.yaml": sweep(axes={"fabric.servers": []})}),
    Case("sweep-axis-bad-value", ["sweep", _f("w.yaml"), "--inline"], ("'lots'", "workload.background.load",
                                                                        "valid number", "axes"),
         {"w.yaml": sweep(axes={"workload.background.load": [0.1, "lots"]})}),
    Case("sweep-axes-product", ["sweep", _f("w.yaml"), "--inline"], ("points", "at most 1,000,000", "(axes)"),
         {"w.yaml": sweep(axes={f"workload.jobs[{i % 3}].iterations": list(range(1, 200)) for i in range(3)}
                          | {"fabric.servers": list(range(1, 200))})}),
    Case("sweep-binary", ["sweep", _f("w.yaml"), "--inline"], ("w.yaml", "not text", "expected a YAML file"),
         {"w.yaml": b"\xca\xfe\xba\xbe" * 10}),
    Case("sweep-dup-key", ["sweep", _f("w.yaml"), "--inline"], ("duplicate key 'seeds'", "expected each key once"),
         {"w.yaml": "base: s.yaml\nseeds: 1\nseeds: 2\n"}),
    Case("sweep-base-missing", ["sweep", _f("w.yaml"), "--inline"], ("'nope.yaml'", "no scenario file", "[in base]"),
         {"w.yaml": sweep(base="nope.yaml")}),
    Case("sweep-field-typo", ["sweep", _f("w.yaml"), "--inline"], ("'axez'", "did you mean 'axes'"),
         {"w.yaml": {**sweep(), "axez": {}}}),
    Case("sweep-out-is-file", ["sweep", _f("w.yaml"), "--inline", "--out", _f("s.yaml")],
         ("s.yaml", "is a file, not a directory", "(--out)"), {"w.yaml": sweep()}),
    Case("sweep-num-cpus-zero", ["sweep", _f("w.yaml"), "--num-cpus", "0"], ("'0'", "--num-cpus", "greater than or equal to 1")),
    # ---- plan command -------------------------------------------------------------------------------
    Case("plan-method", ["plan", _f("s.yaml"), "--method", "heuristik"], ("'heuristik'", "did you mean 'heuristic'")),
    Case("plan-schedule", ["plan", _f("s.yaml"), "--schedule", "sometimes"], ("'sometimes'", "(--schedule)", "'fifo' or")),
    Case("plan-time-limit", ["plan", _f("s.yaml"), "--method", "packed", "--time-limit", "-1"],
         ("-1", "(--time-limit)", "positive")),
    Case("plan-time-limit-text", ["plan", _f("s.yaml"), "--time-limit", "soon"], ("'soon'", "--time-limit", "valid number")),
    Case("plan-out-directory", ["plan", _f("s.yaml"), "--method", "packed", "--out", "{d}"],
         ("is a directory", "(--out)", "expected a file path")),
    Case("plan-seed", ["plan", _f("s.yaml"), "--method", "packed", "--seed", "-5"], ("-5", "(--seed)", "0..2**63-1")),
    # ---- command-line flags -----------------------------------------------------------------------
    Case("collective-gpus-word", ["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "sixteen",
                                  "--fabric", "dgx-superpod-h100-1su"], ("'sixteen'", "--gpus", "valid integer")),
    Case("collective-gpus-zero", ["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "0",
                                  "--fabric", "dgx-superpod-h100-1su"], ("got 0", "(--gpus)", "must be in 1..")),
    Case("collective-size-absurd", ["collective", "--op", "allreduce", "--size", "1e30GiB", "--gpus", "4",
                                    "--fabric", "dgx-superpod-h100-1su"], ("'1e30GiB'", "(--size)", "at most 1 PiB")),
    Case("collective-size-unit", ["collective", "--op", "allreduce", "--size", "12XB", "--gpus", "4",
                                  "--fabric", "dgx-superpod-h100-1su"], ("'12XB'", "(--size)", "expected units")),
    Case("collective-size-negative", ["collective", "--op", "allreduce", "--size", "-1MiB", "--gpus", "4",
                                      "--fabric", "dgx-superpod-h100-1su"], ("'-1MiB'", "(--size)", "non-negative")),
    Case("collective-op", ["collective", "--op", "allreduse", "--size", "1MiB", "--gpus", "4",
                           "--fabric", "dgx-superpod-h100-1su"], ("'allreduse'", "did you mean 'allreduce'")),
    Case("collective-fabric-preset", ["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "4",
                                      "--fabric", "dgx-h100-superpod"], ("'dgx-h100-superpod'", "(--fabric)", "--list")),
    Case("collective-seed", ["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "4", "--seed", "-1",
                             "--fabric", "dgx-superpod-h100-1su"], ("-1", "(--seed)", "0..2**63-1")),
    Case("collective-missing-flag", ["collective", "--op", "allreduce", "--size", "1MiB", "--fabric", "x"],
         ("missing option --gpus", "--help")),
    Case("collective-flag-typo", ["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "4", "--fabrc", "x"],
         ("--fabrc", "--fabric")),
    Case("simulate-seed-negative", ["simulate", _f("s.yaml"), "--seed", "-1"], ("-1", "(--seed)", "0..2**63-1")),
    Case("simulate-seed-2-63", ["simulate", _f("s.yaml"), "--seed", str(2**63)], (str(2**63), "(--seed)", "0..2**63-1")),
    Case("simulate-seed-word", ["simulate", _f("s.yaml"), "--seed", "seven"], ("'seven'", "--seed", "valid integer")),
    Case("simulate-out-is-file", ["simulate", _f("s.yaml"), "--out", _f("s.yaml")],
         ("s.yaml", "is a file, not a directory", "(--out)")),
    Case("simulate-out-unwritable", ["simulate", _f("s.yaml"), "--out", "/proc/flowherd/out"],
         ("/proc/flowherd/out", "(--out)", "expected a directory")),
    Case("simulate-controller", ["simulate", _f("s.yaml"), "--controller", "sincronya"],
         ("'sincronya'", "did you mean 'sincronia'")),
    Case("simulate-missing-arg", ["simulate"], ("missing argument SCENARIO", "--help")),
    Case("train-steps-zero", ["train", _f("s.yaml"), "--steps", "0", "--out", _f("m.zip")], ("0", "(--steps)", "positive")),
    Case("train-out-directory", ["train", _f("s.yaml"), "--out", "{d}"], ("is a directory", "(--out)")),
    Case("train-algo", ["train", _f("s.yaml"), "--algo", "dqn", "--out", _f("m.zip")], ("'dqn'", "expected one of")),
]


@pytest.fixture
def case_dir(tmp_path):
    return tmp_path


def _materialize(case: Case, d: Path) -> list[str]:
    files = dict(case.files)
    if any("s.yaml" in a for a in case.argv) and "s.yaml" not in files:
        files["s.yaml"] = TINY
    if case.id.startswith("sweep") and "s.yaml" not in files:
        files["s.yaml"] = TINY
    for name, content in files.items():
        path = d / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content.replace("{d}", str(d)))
        else:
            path.write_text(yaml.safe_dump(content, sort_keys=False).replace("{d}", str(d)))
    return [a.replace("{d}", str(d)) for a in case.argv]


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no answer within {DEADLINE_S} s")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_naming_field_value_and_expectation(case, case_dir, capsys, monkeypatch):
    monkeypatch.chdir(case_dir)
    argv = _materialize(case, case_dir)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(DEADLINE_S)
    try:
        code = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    out = capsys.readouterr()
    err = out.err
    assert code == 2, (code, err, out.out[-500:])
    assert "Traceback" not in err and "Traceback" not in out.out
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert len(err) < 700, err  # capped echo
    for part in case.expect:
        assert part.replace("{d}", str(case_dir)) in err, (part, err)


def test_table_has_enough_distinct_cases():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    keys = {(tuple(c.argv), json.dumps(c.files, sort_keys=True, default=repr)) for c in CASES}
    assert len(keys) == len(CASES) >= 60, len(keys)
    groups = {c.argv[0] for c in CASES}
    assert {"simulate", "fabric", "sweep", "plan", "collective", "train"} <= groups


def test_an_unknown_preset_is_one_line_under_300_characters(capsys):
    assert main(["fabric", "dgx-superpod-h100-1sux"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 300, err
