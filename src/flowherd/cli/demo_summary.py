"""The demo's conclusions: the best controller of each group over the seeds, the ties, and the
tables and lines it prints about them (`flowherd demo`, `flowherd.cli.demo_cmd`).

Apart from `flowherd.cli.demo_cmd`, which runs the demo's simulations and stores them, because
these only read the runs' summaries: choosing among candidates and saying what was chosen, what it
costs others and which controllers changed nothing. `flowherd.cli.demo_cmd` re-exports them.
"""

from __future__ import annotations

import math
from typing import Any

from flowherd.cli.checks import plain
from flowherd.cli.columns import cell

__all__ = ["NO_EFFECT", "SAME_AS_NONE"]


def _jcts(per_seed: dict[int, dict[str, Any]]) -> dict[int, float]:
    return {s: float(r["mean_jct_s"]) for s, r in per_seed.items() if r["mean_jct_s"] is not None}


def _group_rank(per_seed: dict[int, dict[str, Any]]) -> tuple[float, float]:
    # most jobs finished over the seeds first (a controller that stalls jobs must not win on the
    # few that end), then the lowest mean over the seeds of the mean JCT
    jcts = list(_jcts(per_seed).values())
    finished = sum(float(r.get("jobs_finished") or 0) for r in per_seed.values())
    return -finished, (math.fsum(jcts) / len(jcts) if len(jcts) == len(per_seed) else math.inf)


def _group_ties(chosen: str, candidates: dict[str, dict[int, dict[str, Any]] | None],
                names: tuple[str, ...]) -> tuple[str, ...]:
    """The other candidates the seeds cannot tell from the chosen one (same jobs finished on every
    seed, and a paired difference of mean JCT whose 95% interval holds 0)."""
    from flowherd.experiments.stats import paired

    best = candidates[chosen]
    assert best is not None
    out = []
    for n in names:
        other = candidates.get(n)
        if n == chosen or other is None or set(other) != set(best):
            continue
        if any(other[s]["jobs_finished"] != best[s]["jobs_finished"] for s in best):
            continue
        a, b = _jcts(other), _jcts(best)
        if len(a) == len(b) == len(best) and paired(a, b).tie:
            out.append(n)
    return tuple(out)


def _print_cost(con: Any, chosen: dict[str, dict[int, dict[str, Any]] | None],
                none: dict[int, dict[str, Any]]) -> None:
    """What each chosen controller costs the others against no control on the same plan and seeds:
    the background flows' mean and p99 FCT, and Jain's index of the tenants' slowdowns (paired)."""
    from flowherd.experiments.stats import paired

    def per_seed(runs: dict[int, dict[str, Any]], get: Any) -> dict[int, float]:
        out = {}
        for seed, r in runs.items():
            v = get(r)
            if v is not None:
                out[seed] = float(v)
        return out

    getters = {"background mean FCT": lambda r: (r.get("background") or {}).get("mean_fct_s"),
               "background p99 FCT": lambda r: (r.get("background") or {}).get("p99_fct_s"),
               "Jain's index": lambda r: r.get("tenant_jain")}
    for role, runs in chosen.items():
        if not runs:
            continue
        parts = []
        for what, get in getters.items():
            a, b = per_seed(runs, get), per_seed(none, get)
            if set(a) & set(b):
                p = paired(a, b)
                parts.append(f"{what} {100 * p.relative:+.1f}%" + (" (a tie)" if p.tie else ""))
        if parts:
            con.print(f"  cost to others, {role} vs no control: {', '.join(parts)}", highlight=False)


def _print_candidates(con: Any, candidates: dict[str, dict[int, dict[str, Any]] | None],
                      baselines: tuple[str, ...], policies: tuple[str, ...], chosen: dict[str, str | None],
                      ties: dict[str, tuple[str, ...]]) -> None:
    from rich.table import Table

    table = Table(title="controllers on the heuristic plan, means over the seeds (best of each "
                        "group: most jobs finished, then lowest mean JCT; candidates the seeds cannot "
                        "tell apart are ties)")
    for col in ("controller", "group", "jobs finished", "mean JCT (s)", "p99 JCT (s)", "mean slowdown (x)",
                ""):
        table.add_column(col, justify="left" if col in ("controller", "group", "") else "right")

    def mean(rs: list[dict[str, Any]], key: str) -> float | None:
        xs = [float(r[key]) for r in rs if r.get(key) is not None]
        return math.fsum(xs) / len(xs) if len(xs) == len(rs) and xs else None

    for group, names in (("baseline", baselines), ("policy", policies)):
        for name in names:
            per_seed = candidates.get(name)
            tied = (chosen[group] == name and ties[group]) or name in ties[group]
            kind = "literature" if group == "baseline" else "flowherd"
            mark = f"tied best {kind}" if tied else (f"best {kind}" if chosen[group] == name else "")
            if per_seed is None:
                table.add_row(plain(name), kind, "failed", "-", "-", "-", "")
                continue
            rs = list(per_seed.values())
            jobs = f"{sum(r['jobs_finished'] for r in rs)}/{sum(r['jobs_total'] for r in rs)}"
            table.add_row(plain(name), kind, jobs, cell(mean(rs, "mean_jct_s")), cell(mean(rs, "p99_jct_s")),
                          cell(mean(rs, "mean_slowdown")), mark)
    con.print(table)


def _print_methods(con: Any, data: Any) -> None:
    from rich.table import Table

    seeds = len({r["seed"] for r in data.runs})
    table = Table(title=f"the report's methods, means over the {seeds} seeds")
    for col in ("method", "jobs finished", "mean JCT (s)", "p99 JCT (s)", "mean slowdown (x)",
                "makespan (s)"):
        table.add_column(col, justify="left" if col == "method" else "right")

    def mean(rs: list[dict[str, Any]], key: str) -> float | None:
        xs = [float(r[key]) for r in rs if r.get(key) is not None]
        return math.fsum(xs) / len(xs) if xs else None

    for m in data.methods:
        rs = [r for r in data.runs if r["method"] == m and r["status"] == "ok"]
        table.add_row(plain(m), f"{sum(r['jobs_finished'] for r in rs)}/{sum(r['jobs_total'] for r in rs)}",
                      cell(mean(rs, "mean_jct_s")), cell(mean(rs, "p99_jct_s")),
                      cell(mean(rs, "mean_slowdown")), cell(mean(rs, "makespan_s")))
    con.print(table)


#: A controller whose mean JCT is within this fraction of no control's on every seed is said to
#: equal it, with the reason below.
SAME_AS_NONE = 1e-3
#: Why a controller's runs can equal those without control on every seed, said when they do.
NO_EFFECT = {
    "cassini": "CASSINI time-shifts jobs whose periodic traffic shares a link, and the heuristic plan routes "
               "the trainings apart (a link rarely carries two of them), so it shifts next to nothing",
    "crux": "its decisions set priority classes, which the grant does not hold, so they are refused",
    "sincronia": "its lever (priority classes) is not in the grant, so its decisions are refused",
    "varys": "its levers (rates, priority classes) are not in the grant, so its decisions are refused",
}


def _print_no_effect(con: Any, candidates: dict[str, dict[int, dict[str, Any]] | None],
                     none: dict[int, dict[str, Any]]) -> None:
    """Name the controllers whose mean JCT is no control's on every seed (within `SAME_AS_NONE`),
    with the reason."""
    for name, runs in candidates.items():
        if not runs or set(runs) != set(none):
            continue
        a, b = _jcts(runs), _jcts(none)
        if len(a) == len(b) == len(runs) and all(abs(a[s] - b[s]) <= SAME_AS_NONE * b[s] for s in a):
            exact = all(a[s] == b[s] for s in a)
            why = NO_EFFECT.get(name, "its decisions hardly changed a run")
            same = "equals no control" if exact else f"is within {100 * SAME_AS_NONE:g}% of no control"
            con.print(f"  {name} {same} on every seed: {why}", highlight=False, markup=False)
