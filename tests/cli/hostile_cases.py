# ruff: noqa: E501  (a table: one hostile input per entry reads better than wrapped)
"""Hostile and faulty inputs, each run as its own `flowherd` process, and the verdict on each.

Shared by `tests/cli/test_hostile_inputs.py` (every case must come out ``clear``) and
`benchmarks/bad_input.py` (which counts the verdicts). A case is the command line, the files it
needs (written by `prepare`), and the conditions it runs under: an address-space limit (``ulimit
-v``), no network namespace (``unshare -n``), a full or read-only file system (a small tmpfs,
root only), a signal sent once the command has done some of its work.

Verdicts (`verdict`):

* ``clear``: what the issue asks: one line on stderr naming what was wrong; for a run that must
  go on, its output with names escaped, its result kept and one line saying where;
* ``traceback``: a Python traceback, or the process killed by a signal it was not sent;
* ``silent``: nothing printed for more than `FIRST_OUTPUT_S` seconds by a process that worked
  longer than that (its own CPU time: a slow start on a busy machine is not silence), more than
  `MAX_GAP_S` between two lines, no answer within the case's deadline, or more than `STOP_S`
  seconds to stop after SIGINT / SIGTERM;
* ``accepted``: exit 0 on an input that must be refused;
* ``unclear``: refused, but not in one line naming what the case expects;
* ``raw``: a control or bidi character from the data reached the terminal;
* ``code ran``: a model file's pickled call ran (its marker file exists);
* ``network``: DuckDB reached for the network (a download in the message);
* ``lost``: a result was lost (not printed, not stored) or a partial file was left.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import pickle
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TINY = yaml.safe_load((ROOT / "scenarios" / "tiny.yaml").read_text())
TINY["simulation"]["horizon"] = "2s"
TINY["workload"]["background"]["load"] = 0.0
GiB = 2**30
FIRST_OUTPUT_S = 5.0
MAX_GAP_S = 70.0  # a long command prints a line a minute off a terminal
STOP_S = 5.0
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
HOSTILE_NAME = "a\x1b[2J\x1b]0;pwned\x07\u202eexe.txt"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def scen(**paths: Any) -> dict[str, Any]:
    """The tiny scenario with dotted paths set (``workload.jobs[0].gpus=...``)."""
    out = copy.deepcopy(TINY)
    for path, value in paths.items():
        node = out
        parts = path.split(".")
        for p in parts[:-1]:
            m = re.match(r"(\w+)\[(\d+)\]$", p)
            node = node[m.group(1)][int(m.group(2))] if m else node.setdefault(p, {})
        node[parts[-1]] = value
    return out


@dataclass
class Case:
    """One hostile input (module docstring).

    Attributes:
        id: Its name in tables.
        argv: flowherd's arguments; ``{d}`` is the case's directory.
        expect: Substrings of the one error line (``refuse``) or of the one notice line.
        outcome: ``refuse`` (exit != 0, one error line), ``run`` (exit 0, names escaped),
            ``keep`` (a write fails: the result printed and saved elsewhere, one line), ``stop``
            (a signal: stopped within `STOP_S`, finished runs stored, one line saying where).
        files: File name -> text, bytes or a YAML value, written into the case's directory.
        prepare: Builds further files (model zips, stores) in the directory.
        limit_as_bytes: Address-space limit of the process (``ulimit -v``).
        netns: Run under ``unshare -n`` (no network at all).
        mount: ``"full"`` (a filled tmpfs at ``{d}/mnt``) or ``"ro"`` (a read-only one).
        send: (signal, regex of the output after which to send it, seconds after which to send it
            anyway).
        check: Extra verdict from the case's directory and result (None: none).
        slow: Longer than a few seconds (a pytest ``slow`` case).
        deadline_s: Killed after this long (verdict ``silent``).
    """

    id: str
    argv: list[str]
    expect: tuple[str, ...] = ()
    outcome: str = "refuse"
    files: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[Path], None] | None = None
    limit_as_bytes: int | None = None
    netns: bool = False
    mount: str | None = None
    send: tuple[int, str, float] | None = None
    check: Callable[[Path, Result], str | None] | None = None
    slow: bool = False
    deadline_s: float = 240.0


@dataclass
class Result:
    """What a case's process did."""

    rc: int | None
    out: str
    err: str
    wall_s: float
    cpu_s: float
    first_output_s: float | None
    max_gap_s: float
    timed_out: bool
    sent_at_s: float | None = None
    stop_s: float | None = None
    skipped: str | None = None


# ---- files the cases need ------------------------------------------------------------------------
def _env() -> dict[str, str]:
    """This environment with PYTHONPATH made absolute: the cases run in their own directories."""
    paths = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "COLUMNS": "200"}


def _flowherd(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from flowherd.cli import main; sys.exit(main())",
                           *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def _store(d: Path) -> Path:
    """A real result store (one tiny run), made once per root and copied."""
    cache = d.parent / "_store" / "out" / "results.duckdb"
    if not cache.is_file():
        cache.parent.parent.mkdir(parents=True, exist_ok=True)
        (cache.parent.parent / "s.yaml").write_text(yaml.safe_dump(TINY))
        res = _flowherd(["simulate", "s.yaml", "--out", "out", "--json"], cache.parent.parent)
        assert res.returncode == 0, res.stderr[-2000:]
    return cache


def _model_zip(d: Path) -> Path:
    """A PPO model of flowherd's spaces (18 features, 16 actions), as `flowherd train` saves one."""
    cache = d.parent / "_model" / "m.zip"
    if not cache.is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        code = ("import gymnasium as gym, numpy as np; from gymnasium import spaces; "
                "from stable_baselines3 import PPO\n"
                "class E(gym.Env):\n"
                "    observation_space = spaces.Box(-10.0, 10.0, shape=(18,), dtype=np.float32)\n"
                "    action_space = spaces.Discrete(16)\n"
                "    def reset(self, *, seed=None, options=None): return np.zeros(18, np.float32), {}\n"
                "    def step(self, a): return np.zeros(18, np.float32), 0.0, True, False, {}\n"
                f"PPO('MlpPolicy', E(), n_steps=64, batch_size=64, device='cpu').save({str(cache)!r})\n")
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300, env=_env())
    return cache


class _Touch:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _evil_model(where: str) -> Callable[[Path], None]:
    def prepare(d: Path) -> None:
        with zipfile.ZipFile(_model_zip(d)) as z:
            members = {n: z.read(n) for n in z.namelist()}
        marker = str(d / "marker")
        if where == "policy.pth":
            import io

            import torch

            buf = io.BytesIO()
            torch.save({"w": _Touch(marker)}, buf)
            members["policy.pth"] = buf.getvalue()
        else:
            data = json.loads(members["data"])
            data[where][":serialized:"] = base64.b64encode(pickle.dumps(_Touch(marker))).decode()
            members["data"] = json.dumps(data).encode()
        with zipfile.ZipFile(d / "m.zip", "w") as z:
            for n, b in members.items():
                z.writestr(n, b)
    return prepare


def _marker(d: Path, res: Result) -> str | None:
    return "code ran" if (d / "marker").exists() else None


def _sqlite(d: Path) -> None:
    (d / "sq").mkdir()
    con = sqlite3.connect(d / "sq" / "results.duckdb")
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.commit()
    con.close()


def _truncated(frac: float) -> Callable[[Path], None]:
    def prepare(d: Path) -> None:
        data = _store(d).read_bytes()
        (d / "results.duckdb").write_bytes(data[:int(frac * len(data))])
    return prepare


def _other_schema(d: Path) -> None:
    code = ("import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
            "c.execute('CREATE TABLE runs (run_id VARCHAR, status INTEGER)'); c.close()")
    subprocess.run([sys.executable, "-c", code, str(d / "results.duckdb")], check=True, timeout=120, env=_env())


def _copy_store(d: Path) -> None:
    shutil.copytree(_store(d).parent, d / "run")


def _network(d: Path, res: Result) -> str | None:
    return "network" if re.search(r"download|https?://", res.err + res.out, re.I) else None


def _no_png(d: Path, res: Result) -> str | None:
    left = [p for p in (d / "mnt").rglob("*") if p.is_file() and p.name != "fill"] if (d / "mnt").exists() else []
    return "lost" if left else None


def _json_kept(d: Path, res: Result) -> str | None:
    try:
        return None if json.loads(res.out)["jobs_total"] == 3 else "lost"
    except (ValueError, KeyError, TypeError):
        return "lost"


def _runs_stored(store: str) -> Callable[[Path, Result], str | None]:
    def check(d: Path, res: Result) -> str | None:
        path = d / store
        if not path.is_file():
            return "lost"
        code = ("import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
                "print(c.execute('SELECT count(*) FROM runs').fetchone()[0])")
        got = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
        return None if got.returncode == 0 and int(got.stdout.strip() or 0) > 0 else "lost"
    return check


def _trace_names(d: Path) -> None:
    (d / "t.csv").write_text("job_id,submit_time_s,duration_s,num_gpus\n"
                             f"{HOSTILE_NAME},0,100,8\nk\u202eb\x1b[31m,1,100,8\n")


BIG_FABRIC = {"kind": "leaf-spine", "servers": 125_000, "gpus_per_server": 8, "leaves": 1000, "spines": 64}
GRID = {"name": "grid", "base": "s.yaml", "seeds": 1,
        "axes": {"workload.jobs[0].iterations": list(range(1, 1001)),
                 "workload.jobs[1].iterations": list(range(1, 1001))}}
SMALL_SWEEP = {"name": "small", "base": "s.yaml", "seeds": 1, "axes": {"workload.jobs[0].iterations": [1, 2]}}
SLOW_SWEEP = {"name": "slow", "base": "s.yaml", "seeds": 1,
              "axes": {"workload.jobs[0].iterations": list(range(1, 41))}}

CASES: list[Case] = [
    # ---- model files --------------------------------------------------------------------------------------
    Case("model-pickle-policy-class", ["simulate", "s.yaml", "--controller", "m.zip"],
         ("m.zip", "system", "(controller.name)"), prepare=_evil_model("policy_class"), check=_marker),
    Case("model-pickle-observation-space", ["simulate", "s.yaml", "--controller", "m.zip"],
         ("m.zip", "system", "(controller.name)"), prepare=_evil_model("observation_space"), check=_marker),
    Case("model-pickle-lr-schedule", ["simulate", "s.yaml", "--controller", "m.zip"],
         ("m.zip", "system", "(controller.name)"), prepare=_evil_model("lr_schedule"), check=_marker),
    Case("model-pickle-weights", ["simulate", "s.yaml", "--controller", "m.zip"],
         ("m.zip", "policy.pth", "(controller.name)"), prepare=_evil_model("policy.pth"), check=_marker),
    # ---- names on the terminal ------------------------------------------------------------------------------
    Case("names-escapes-simulate", ["simulate", "s.yaml"], outcome="run",
         files={"s.yaml": scen(name=HOSTILE_NAME, **{"workload.jobs[0].name": HOSTILE_NAME,
                                                     "workload.jobs[1].tenant": "lab\u202egnp.exe\x00",
                                                     "workload.jobs[2].name": "c\x1b]8;;http://x/\x1b\\y\x1b]8;;\x1b\\"})}),
    Case("names-escapes-trace-csv", ["simulate", "s.yaml"], outcome="run", prepare=_trace_names,
         files={"s.yaml": scen(**{"workload.jobs": [], "workload.traces": [{"path": "t.csv"}]})}),
    Case("names-escapes-plan", ["plan", "s.yaml", "--method", "packed"], outcome="run",
         files={"s.yaml": scen(**{"workload.jobs[0].name": HOSTILE_NAME})}),
    Case("names-escapes-error-line", ["simulate", "s.yaml"], ("twice",),
         files={"s.yaml": scen(**{"workload.jobs[0].name": HOSTILE_NAME, "workload.jobs[1].name": HOSTILE_NAME})}),
    Case("names-escapes-file-name", ["simulate", "no\x1b]0;t\x07.yaml"], ("no scenario file",)),
    # ---- result stores ---------------------------------------------------------------------------------------
    Case("store-sqlite-no-network", ["report", "sq"], ("results.duckdb", "SQLite"), prepare=_sqlite,
         netns=True, check=_network),
    Case("store-truncated-30pct", ["report", "results.duckdb", "--out", "rep"], ("results.duckdb",),
         prepare=_truncated(0.3)),
    Case("store-truncated-95pct", ["report", "results.duckdb", "--out", "rep"], ("results.duckdb",),
         prepare=_truncated(0.95)),
    Case("store-other-schema", ["report", "results.duckdb"], ("results.duckdb", "runs"), prepare=_other_schema),
    Case("report-out-is-a-file", ["report", "run", "--out", "s.yaml"], ("s.yaml", "(--out)"), prepare=_copy_store),
    Case("report-out-read-only", ["report", "run", "--out", "mnt/rep"], ("mnt/rep", "Read-only", "(--out)"),
         prepare=_copy_store, mount="ro"),
    # ---- memory and time before the work starts ---------------------------------------------------------------
    Case("memory-global-batch-1e15", ["simulate", "s.yaml"], ("global_batch",),
         files={"s.yaml": scen(**{"workload.jobs[0].global_batch": 10**15})}, limit_as_bytes=4 * GiB),
    Case("memory-trace-dev-zero", ["simulate", "s.yaml"], ("/dev/zero", "traces"),
         files={"s.yaml": scen(**{"workload.traces": [{"path": "/dev/zero"}]})}, limit_as_bytes=4 * GiB),
    Case("memory-background-horizon-1e9s", ["simulate", "s.yaml"], ("would use about", "max_flows_per_s"),
         files={"s.yaml": scen(**{"simulation.horizon": "1e9s", "workload.background": {"load": 0.1}})},
         limit_as_bytes=4 * GiB),
    Case("memory-collective-1e6-gpus", ["collective", "--op", "allgather", "--size", "1GiB", "--gpus", "1000000",
                                        "--fabric", "f.yaml"], ("(--gpus)",),
         files={"f.yaml": BIG_FABRIC}, limit_as_bytes=12 * GiB, slow=True),  # the fabric fits, not it
    # 2.3 kB a point measured: under 4 GiB the million points fit (and the sweep runs, with progress)
    Case("memory-sweep-grid-1000x1000", ["sweep", "w.yaml", "--inline", "--out", "o"], ("(axes)",),
         files={"w.yaml": GRID, "s.yaml": TINY}, limit_as_bytes=2 * GiB, slow=True),
    Case("sweep-ray-under-6gib", ["sweep", "w.yaml", "--out", "o", "--ray"], ("ulimit", "--inline"),
         files={"w.yaml": SMALL_SWEEP, "s.yaml": TINY}, limit_as_bytes=6 * GiB, slow=True),
    # ---- signals ----------------------------------------------------------------------------------------------
    # SIGINT once a simulation has finished ("[1/10] ..."; about 30 s in on a quiet machine)
    Case("sigint-demo", ["demo", "--out", "demo", "--seeds", "2"], ("interrupted", "demo/results.duckdb"),
         outcome="stop", send=(signal.SIGINT, r"\[\d+/\d+\]", 400.0), check=_runs_stored("demo/results.duckdb"),
         slow=True, deadline_s=900),
    Case("sigterm-sweep-inline", ["sweep", "w.yaml", "--inline", "--out", "o"], ("interrupted", "o/results.duckdb"),
         outcome="stop", files={"w.yaml": SLOW_SWEEP, "s.yaml": TINY}, send=(signal.SIGTERM, r"\[2/40\]", 60.0),
         check=_runs_stored("o/results.duckdb"), slow=True),
    # ---- a full disk -----------------------------------------------------------------------------------------
    Case("full-disk-simulate-json", ["simulate", "s.yaml", "--out", "mnt/out", "--json"],
         ("mnt/out", "No space left on device"), outcome="keep", mount="full", check=_json_kept),
    Case("full-disk-report", ["report", "run", "--out", "mnt/rep"], ("mnt/rep", "No space left on device"),
         prepare=_copy_store, mount="full", check=_no_png),
    # ---- values out of range, and the form of two messages ----------------------------------------------------
    Case("range-link-latency-1e9s", ["simulate", "s.yaml"], ("'1e9s'", "(fabric.link_latency)", "at most"),
         files={"s.yaml": scen(**{"fabric.link_latency": "1e9s"})}),
    Case("range-seq-len-1e12", ["simulate", "s.yaml"], ("1000000000000", "seq_len", "less than or equal"),
         files={"s.yaml": scen(**{"workload.jobs[0].seq_len": 10**12})}),
    Case("range-channels-1e9", ["collective", "--op", "allreduce", "--size", "1MiB", "--gpus", "8",
                                "--fabric", "dgx-superpod-h100-1su", "--channels", str(10**9)],
         ("1,000,000,000", "(--channels)", "64")),
    Case("range-leaves-1e9", ["simulate", "s.yaml"], ("(fabric.leaves)",),
         files={"s.yaml": scen(**{"fabric.leaves": 10**9})}),
    Case("range-spines-1e9", ["simulate", "s.yaml"], ("(fabric.spines)",),
         files={"s.yaml": scen(**{"fabric.spines": 10**9})}),
    Case("message-unknown-job-key-short", ["simulate", "s.yaml"], ("did you mean 'iterations'",),
         files={"s.yaml": scen(**{"workload.jobs[0].iteratons": 3})}, check=lambda d, r: "unclear" if len(r.err) > 200 else None),
    Case("message-negative-rate-before-missing-name", ["simulate", "s.yaml"], ("rate", "'-4/h'"),
         files={"s.yaml": scen(**{"workload.arrivals": [{"rate": "-4/h", "until": "1h", "mix": [
             {k: v for k, v in TINY["workload"]["jobs"][0].items() if k != "name"}]}]})}),
]


# ---- running a case --------------------------------------------------------------------------------------
def _write_files(case: Case, d: Path) -> None:
    for name, content in case.files.items():
        path = d / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        else:
            path.write_text(yaml.safe_dump(content, sort_keys=False, allow_unicode=False))
    if "s.yaml" in " ".join(case.argv) and not (d / "s.yaml").exists():
        (d / "s.yaml").write_text(yaml.safe_dump(TINY))


def _mount(case: Case, d: Path) -> str | None:
    """Mount the case's tmpfs; the reason it cannot be, or None."""
    if case.mount is None:
        return None
    if not IS_ROOT or shutil.which("mount") is None:
        return "needs root to mount a tmpfs"
    mnt = d / "mnt"
    mnt.mkdir(exist_ok=True)
    opts = "ro,size=64k" if case.mount == "ro" else "size=64k"
    if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True).returncode:
        return "cannot mount a tmpfs here"
    if case.mount == "full":
        try:
            with open(mnt / "fill", "wb", buffering=0) as fh:
                while True:
                    fh.write(b"\0" * 4096)
        except OSError:
            pass
    return None


def run_case(case: Case, d: Path) -> Result:
    """Run `case` in directory `d` (created) and time its output."""
    d.mkdir(parents=True, exist_ok=True)
    _write_files(case, d)
    if case.prepare is not None:
        case.prepare(d)
    why = _mount(case, d)
    if why is not None:
        return Result(rc=None, out="", err="", wall_s=0.0, cpu_s=0.0, first_output_s=None, max_gap_s=0.0,
                      timed_out=False, skipped=why)
    cmd = [sys.executable, "-c", "import sys; from flowherd.cli import main; sys.exit(main())", *case.argv]
    if case.netns:
        if not IS_ROOT or shutil.which("unshare") is None or \
                subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
            return Result(rc=None, out="", err="", wall_s=0.0, cpu_s=0.0, first_output_s=None, max_gap_s=0.0,
                          timed_out=False, skipped="unshare -n does not work here")
        cmd = ["unshare", "-n", *cmd]

    def limits() -> None:
        if case.limit_as_bytes is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (case.limit_as_bytes, case.limit_as_bytes))

    env = _env()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            preexec_fn=limits, start_new_session=True)
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}
    stamps: list[float] = []
    lock = threading.Lock()

    def pump(stream: Any, key: str) -> None:
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            with lock:
                chunks[key].append(chunk)
                stamps.append(time.monotonic() - t0)

    threads = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    sent_at = None
    timed_out = False
    status = usage = None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # its CPU time too (poll() would not)
        if pid:
            break
        now = time.monotonic() - t0
        if now > case.deadline_s and not timed_out:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
        if case.send is not None and sent_at is None:
            sig, pattern, after_s = case.send
            with lock:
                text = b"".join(chunks["out"] + chunks["err"]).decode("utf-8", "replace")
            if re.search(pattern, text) or now >= after_s:
                os.kill(proc.pid, sig)
                sent_at = now
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    end = time.monotonic() - t0
    for t in threads:
        t.join(timeout=5)
    if case.mount is not None:
        subprocess.run(["umount", "-l", str(d / "mnt")], capture_output=True)
    gaps = [b - a for a, b in zip([0.0, *stamps], [*stamps, end], strict=True)]
    return Result(rc=proc.returncode, out=b"".join(chunks["out"]).decode("utf-8", "replace"),
                  err=b"".join(chunks["err"]).decode("utf-8", "replace"), wall_s=end,
                  cpu_s=usage.ru_utime + usage.ru_stime,
                  first_output_s=stamps[0] if stamps else None, max_gap_s=max(gaps), timed_out=timed_out,
                  sent_at_s=sent_at, stop_s=None if sent_at is None else end - sent_at)


def verdict(case: Case, res: Result, d: Path) -> str:
    """The verdict on one case (module docstring)."""
    if res.skipped:
        return "skipped"
    text = res.out + res.err
    sent = case.send[0] if case.send is not None and res.sent_at_s is not None else None
    if res.timed_out:
        return "silent"
    if "Traceback" in text or (res.rc is not None and res.rc < 0 and -res.rc != sent):
        return "traceback"
    if case.check is not None:
        extra = case.check(d, res)
        if extra is not None:
            return extra
    if RAW.search(text.replace("\n", "")):
        return "raw"
    if res.stop_s is not None and res.stop_s > STOP_S:
        return "silent"
    # nothing said for FIRST_OUTPUT_S; a process that spent less CPU than that in all was slowed by
    # the machine's load (imports on a shared machine), not silent about work
    first = res.first_output_s if res.first_output_s is not None else res.wall_s
    if first > FIRST_OUTPUT_S and min(res.wall_s, res.cpu_s) > FIRST_OUTPUT_S:
        return "silent"
    if res.max_gap_s > MAX_GAP_S:
        return "silent"
    if case.outcome == "run":
        return "clear" if res.rc == 0 else "unclear"
    if case.outcome == "refuse" and res.rc == 0:
        return "accepted"
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    if case.outcome == "refuse":
        lines = [ln for ln in lines if ln.startswith("error: ")] if len(lines) > 1 else lines
        one = len(lines) == 1 and lines[0].startswith("error: ")
    else:  # keep / stop: a line says what happened and where (progress lines may come before it)
        lines = [ln for ln in lines if all(p in ln for p in case.expect)]
        one = len(lines) == 1
    if not one or not all(p in lines[0] for p in case.expect):
        return "unclear"
    return "clear"
