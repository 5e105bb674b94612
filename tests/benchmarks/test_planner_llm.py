"""The LLM-era planner benchmark's verdicts and gain split (benchmarks/planner_llm.py)."""

import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import planner_llm  # noqa: E402


def test_a_difference_whose_ci_holds_zero_is_a_tie():
    assert planner_llm.verdict(np.array([-0.1, 0.1, -0.05, 0.08])) == "tie"
    assert planner_llm.verdict(np.array([-1.0, -1.1, -0.9, -1.05])) == "better"
    assert planner_llm.verdict(np.array([1.0, 1.1, 0.9, 1.05])) == "worse"
    assert planner_llm.verdict(np.array([1.0])) == "n/a"


def test_paired_takes_the_seeds_both_variants_have():
    rows = {"a": {0: {"simulated_mean_jct_s": 1.0}, 1: {"simulated_mean_jct_s": 2.0}},
            "b": {1: {"simulated_mean_jct_s": 3.0}, 2: {"simulated_mean_jct_s": 4.0}}}
    xa, xb = planner_llm.paired(rows, "a", "b")
    assert xa.tolist() == [2.0] and xb.tolist() == [3.0]


def test_the_split_chain_steps_from_fifo_topology_to_the_plan():
    labels = {label for label, _, _ in planner_llm.LLM_VARIANTS}
    steps = [what for _, _, what in planner_llm.CHAIN]
    assert steps[:4] == ["backfilling", "placement", "routing", "pacing"]
    assert planner_llm.CHAIN[0][0] == "topology" and planner_llm.CHAIN[3][1] == "bilevel+pacing"
    assert all(a in labels and b in labels for a, b, _ in planner_llm.CHAIN[:4])
