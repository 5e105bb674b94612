"""`flowherd demo`'s terminal output: units in the headers, one row per method, and a controller
whose runs equal no control's named with the reason."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from flowherd.cli.columns import cell
from flowherd.cli.demo_cmd import NO_EFFECT, _print_methods, _print_no_effect


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200), buf


def test_a_controller_equal_to_no_control_on_every_seed_is_explained():
    none = {7: {"mean_jct_s": 20.0, "makespan_s": 60.0}, 8: {"mean_jct_s": 21.0, "makespan_s": 61.0}}
    same = {s: dict(r) for s, r in none.items()}
    moved = {7: {"mean_jct_s": 19.0, "makespan_s": 60.0}, 8: {"mean_jct_s": 21.0, "makespan_s": 61.0}}
    close = {7: {"mean_jct_s": 20.0 * (1 - 1e-4), "makespan_s": 60.0}, 8: dict(none[8])}
    con, buf = _console()
    _print_no_effect(con, {"cassini": same, "adaptive": moved, "crux": None, "varys": close}, none)
    out = " ".join(buf.getvalue().split())
    assert out.count("cassini equals no control on every seed") == 1 and NO_EFFECT["cassini"] in out
    assert "varys is within 0.1% of no control on every seed" in out and NO_EFFECT["varys"] in out
    assert "adaptive" not in out  # 5% apart on seed 7


def test_the_methods_table_is_one_row_per_method_with_units_in_the_headers():
    runs = [{"method": m, "status": "ok", "seed": s, "jobs_finished": 2, "jobs_total": 2, "mean_jct_s": j,
             "p99_jct_s": j + 1, "mean_slowdown": 1.1, "makespan_s": 60.0}
            for m, js in (("a", (20.0, 22.0)), ("b", (18.0, 19.0))) for s, j in zip((7, 8), js, strict=True)]
    con, buf = _console()
    _print_methods(con, SimpleNamespace(methods=["a", "b"], runs=runs))
    out = buf.getvalue()
    for header in ("mean JCT (s)", "p99 JCT (s)", "mean slowdown (x)", "makespan (s)", "2 seeds"):
        assert header in out, header
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 2 and "21.00" in rows[0] and "4/4" in rows[0] and "18.50" in rows[1]
    assert " s " not in " ".join(rows)  # no unit in the cells


def test_cells_keep_one_unit_and_fixed_decimals():
    assert [cell(x) for x in (0.0, 1.5, 1234.567, None, float("nan"))] == [
        "0.00", "1.50", "1,234.57", "-", "-"]
