"""Which module holds each command, with the line `flowherd --help` shows for it.

`flowherd --help` lists the commands from this table without importing their modules (each pulls
in numpy, the simulator or the planner); `flowherd COMMAND ...` imports only COMMAND's module,
which registers itself on `flowherd.cli.app`. A test checks that every module registers the
command named here and that the lines are the first sentences of the commands' docstrings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandEntry:
    """One command of the table.

    Attributes:
        module: The module whose import registers the command.
        summary: The one line of `flowherd --help`.
        extras: Optional dependency groups (pyproject extras) the command needs; named by the
            missing-dependency hint.
        writes_nothing: The command only prints (no file, store or connection left open): the
            console script leaves its objects out of the collector's passes at exit
            (`flowherd.cli.main`).
    """

    module: str
    summary: str
    extras: tuple[str, ...] = ()
    writes_nothing: bool = False


COMMANDS: dict[str, CommandEntry] = {
    "demo": CommandEntry(
        module="flowherd.cli.demo_cmd", extras=("plan", "report"),  # no Ray: its own processes
        summary="The whole pipeline on the embedded default: plan, simulate without and with control, "
                "store, report."),
    "simulate": CommandEntry(
        module="flowherd.cli.simulate_cmd", extras=(),
        summary="Simulate a scenario: jobs arrive, get placed, run on the shared fabric; print per-job "
                "metrics."),
    "collective": CommandEntry(
        module="flowherd.cli.collective_cmd", writes_nothing=True,
        summary="Simulate one collective on an idle fabric; print time, algbw and busbw (nccl-tests)."),
    "fabric": CommandEntry(
        module="flowherd.cli.fabric_cmd",
        summary="Build FABRIC and print its counts, bisection bandwidth and GPU-to-GPU diameter."),
    "plan": CommandEntry(
        module="flowherd.cli.plan_cmd", extras=("plan",),
        summary="Plan where (and when) each job of a scenario runs; `flowherd simulate --plan` executes "
                "it."),
    "sweep": CommandEntry(
        module="flowherd.cli.sweep_cmd", extras=("sweep",),
        summary="Run a sweep: every point x seed, in this process or on Ray, stored run by run."),
    "report": CommandEntry(
        module="flowherd.cli.report_cmd", extras=("report",),
        summary="Draw a result store: JCT CDF, slowdown against load, fairness, utilization, Gantt, "
                "fabric."),
    "results": CommandEntry(
        module="flowherd.cli.results_cmd", extras=("store",),
        summary="Print a result store's numbers: per point (means over seeds), per run, CSV, JSON or "
                "Parquet."),
    "train": CommandEntry(
        module="flowherd.cli.train_cmd", extras=("rl",),
        summary="Train a policy for a scenario's collectives (priority class, buffer or not) and save "
                "it."),
    "models": CommandEntry(
        module="flowherd.cli.catalog_cmd",
        summary="List the model catalog: parameters, layers, width, heads, experts and source."),
    "gpus": CommandEntry(
        module="flowherd.cli.catalog_cmd",
        summary="List the GPU catalog: BF16 peak, memory, HBM, NVLink and NIC bandwidth, source."),
}

#: The pyproject extras and the top-level modules each installs (pyproject.toml says the same; a
#: test compares them).
EXTRAS: dict[str, tuple[str, ...]] = {
    "plan": ("highspy",),
    "store": ("duckdb",),
    "results": ("duckdb", "pandas"),
    "sweep": ("ray", "duckdb"),
    "report": ("matplotlib", "plotly", "duckdb"),
    "rl": ("gymnasium", "stable_baselines3", "torch"),
}


def missing_extra_hint(module: str, command: str | None = None) -> str | None:
    """The one line a missing optional dependency gets, or None if `module` is not optional.

    The command's own extras are named when one of them installs the module (one install, not
    one per retry); otherwise the first extra that does.

    >>> missing_extra_hint("highspy", "plan")
    "flowherd plan needs highspy (not installed): pip install 'flowherd[plan]'"
    >>> missing_extra_hint("duckdb", "demo")
    "flowherd demo needs duckdb (not installed): pip install 'flowherd[plan,report]'"
    >>> missing_extra_hint("numpy") is None
    True
    """
    top = module.split(".")[0]
    providers = [name for name, modules in EXTRAS.items() if top in modules]
    if not providers:
        return None
    entry = COMMANDS.get(command or "")
    own = entry is not None and any(top in EXTRAS[e] for e in entry.extras)
    extras = entry.extras if own else providers[:1]
    who = f"flowherd {command}" if entry else "this command"
    return f"{who} needs {top} (not installed): pip install 'flowherd[{','.join(extras)}]'"
