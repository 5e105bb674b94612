"""The demo's controller table names the group each "best" is the best of (a literature baseline
and a flowherd policy are each the best of their own group, not of the table)."""

from rich.console import Console

from flowherd.cli.demo_cmd import _print_candidates


def _runs(jct: float) -> dict[int, dict]:
    return {s: {"jobs_finished": 2, "jobs_total": 2, "mean_jct_s": jct + s, "p99_jct_s": jct + s,
                "mean_slowdown": 1.1} for s in (0, 1)}


def test_best_marks_name_their_group_and_ties():
    con = Console(record=True, width=200)
    candidates = {"adaptive": _runs(18.0), "cassini": _runs(20.0), "flowherd": _runs(17.0),
                  "crux": _runs(17.1)}
    _print_candidates(con, candidates, ("adaptive", "cassini"), ("flowherd", "crux"),
                      {"baseline": "adaptive", "policy": "flowherd"},
                      {"baseline": (), "policy": ("crux",)})
    text = con.export_text().splitlines()
    rows = {line.split("│")[1].strip(): line for line in text if line.count("│") > 3}
    assert "best literature" in rows["adaptive"] and "tied" not in rows["adaptive"]
    assert "best" not in rows["cassini"]
    assert "tied best flowherd" in rows["flowherd"] and "tied best flowherd" in rows["crux"]
