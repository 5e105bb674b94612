"""The LLM-era planner benchmark's verdicts and gain split (benchmarks/planner_llm.py)."""

import sys
from pathlib import Path

import numpy as np
import pytest

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


def test_the_split_ends_with_migration_on_top_of_the_paced_plan():
    assert planner_llm.CHAIN[4] == ("bilevel+pacing", "bilevel+migration", "migration")
    labels = {label for label, _, _ in planner_llm.LLM_VARIANTS}
    assert {"monkeytree+backfill", "bilevel+migration", "arnold+backfill"} <= labels


def test_why_splits_a_jct_into_queueing_alone_and_sharing():
    # two spread jobs on a common leaf overlap for 2 s of their 4 + 6 s of run; a third job on
    # other leaves shares nothing; per job: [name, submit, start, finish, iterations, solo s, leaves]
    row = {"simulated_mean_jct_s": 6.0,
           "per_job": [["a", 0.0, 0.0, 4.0, 2, 1.5, [0, 1]],
                       ["b", 0.0, 2.0, 8.0, 3, 1.8, [1, 2]],
                       ["c", 1.0, 1.0, 7.0, 6, 1.0, [3]]]}
    w = planner_llm.why(row)
    assert w["queue_s"] == pytest.approx((0 + 2 + 0) / 3)
    assert w["alone_s"] == pytest.approx((3.0 + 5.4 + 6.0) / 3)
    assert w["sharing_s"] == pytest.approx(6.0 - (3.0 + 7.4 + 6.0) / 3)
    assert w["shared_share"] == pytest.approx((2.0 + 2.0) / (4 + 6 + 6))


def test_a_migrated_jobs_parts_are_one_job_in_why():
    row = {"simulated_mean_jct_s": 10.0,
           "per_job": [["a", 0.0, 0.0, 3.0, 2, 1.0, [0, 1]], ["a~1", 4.0, 4.0, 10.0, 4, 1.5, [0]]]}
    w = planner_llm.why(row)
    assert w["queue_s"] == 0.0 and w["run_s"] == 10.0 and w["alone_s"] == pytest.approx(6 * 1.0)


def test_the_families_are_the_acme_clusters_at_their_own_size():
    # Kalos: 302 servers of 8 GPUs (2,416), Seren: 286 (2,288), rounded up to whole leaves / SUs;
    # the jobs as published: at most 1,024 GPUs (the traces' largest), at least 16
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.planning.predict import fabric_view

    size = {"llm_kalos_4to1": 2416, "llm_kalos_8to1": 2416, "llm_seren_1to1": 2288, "llm_kalos_rail": 2416}
    assert set(planner_llm.OVERSUBSCRIBED) <= set(planner_llm.FAMILIES) | set(planner_llm.LINGJUN_FAMILIES)
    assert set(planner_llm.FAMILIES) == set(size)
    for fam, gpus in size.items():
        sc = scenario_from_mapping(read_scenario_mapping(planner_llm.SCENARIOS / f"{fam}.yaml"))
        unit = sc.fabric.num_gpus // fabric_view(sc.fabric).num_leaves
        assert gpus <= sc.fabric.num_gpus < gpus + unit, fam
        assert all(16 <= j.world_size <= 1024 for j in sc.jobs) and len(sc.jobs) == 16


def test_cells_run_variant_by_variant_or_seed_by_seed():
    labels = ["topology+backfill", "bilevel+pacing"]
    assert planner_llm.cell_order(labels, 2) == [("topology+backfill", 0), ("topology+backfill", 1),
                                                 ("bilevel+pacing", 0), ("bilevel+pacing", 1)]
    by_seed = planner_llm.cell_order(labels, 2, by_seed=True)
    assert by_seed == [("topology+backfill", 0), ("bilevel+pacing", 0), ("topology+backfill", 1),
                       ("bilevel+pacing", 1)]


def test_the_lingjun_families_are_the_real_mapping_with_the_kalos_jobs():
    # 847 hosts of 8 GPUs under 119 ToR groups (topo.csv); 45 Kalos jobs of 16-1,024 GPUs per window
    from flowherd.experiments.scenario import read_scenario_mapping, scenario_from_mapping
    from flowherd.planning.predict import fabric_view

    for fam in planner_llm.LINGJUN_FAMILIES:
        sc = scenario_from_mapping(read_scenario_mapping(planner_llm.SCENARIOS / f"{fam}.yaml"))
        assert sc.fabric.num_gpus == 847 * 8 and fabric_view(sc.fabric).num_leaves == 119
        assert len(sc.jobs) == 45 and all(16 <= j.world_size <= 1024 for j in sc.jobs)


def test_pods_are_the_aggregation_groups_the_leaves_hang_from():
    from flowherd.fabric import lingjun_fabric
    from flowherd.fabric.spec import fabric_from_mapping

    pods = planner_llm.leaf_pods(lingjun_fabric())
    # the PSW groups P8, P10, P12 hold 29, 48 and 42 ToR groups (the dataset's README)
    assert sorted(np.bincount(pods).tolist()) == [29, 42, 48]
    flat = fabric_from_mapping({"kind": "leaf-spine", "servers": 8, "leaves": 4, "spines": 2})
    assert planner_llm.leaf_pods(flat).tolist() == [0, 0, 0, 0]


def test_why_counts_spread_jobs_meeting_on_a_pod_but_not_on_a_leaf():
    # leaves 0, 1 in pod 0; leaves 2, 3 in pod 1: a on leaves 0 and 2, b on leaves 1 and 3 share no
    # leaf but both pods for the 2 s they overlap; c stays on one leaf
    row = {"simulated_mean_jct_s": 6.0,
           "per_job": [["a", 0.0, 0.0, 4.0, 2, 1.5, [0, 2]],
                       ["b", 0.0, 2.0, 8.0, 3, 1.8, [1, 3]],
                       ["c", 1.0, 1.0, 7.0, 6, 1.0, [0]]]}
    w = planner_llm.why(row, np.array([0, 0, 1, 1]))
    assert w["shared_share"] == 0.0
    assert w["pod_shared_share"] == pytest.approx((2.0 + 2.0) / (4 + 6 + 6))
    assert "pod_shared_share" not in planner_llm.why(row, np.array([0, 0, 0, 0]))
