"""Job migration: MonkeyTree's defragmentation ILP, its rule as a baseline, and migration as a
cost-aware lever of the plan (flowherd.planning.migration)."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.errors import ConfigError
from flowherd.fabric.generators import leaf_spine
from flowherd.planning import migration as mig
from flowherd.planning.estimate import simulate_plan
from flowherd.planning.plan import SimCheck, make_plan
from flowherd.planning.predict import fabric_view, profile_job
from flowherd.workload import TrainingJob


def _job(name, gpus, iterations, submit_s=0.0):
    # Llama 3 8B as NeMo trains it (TP 1, CP 2): one pipeline stage, a data-parallel ring across all
    return TrainingJob(model="llama3-8b", gpus=gpus, tp=1, cp=2, dp=gpus // 2, name=name,
                       iterations=iterations, submit_s=submit_s, global_batch=4 * gpus)


def _fabric(oversubscription=8):
    # 3 leaves of 4 servers of 8 GPUs: a leaf's 32 NICs over 8:1 uplinks carry 4 rings, fewer than
    # one fragmented segment's 8 (one per NIC of a server): no segment may span leaves
    return leaf_spine(servers=12, gpus_per_server=8, leaves=3, spines=2, oversubscription=oversubscription)


def test_leaf_bound_is_the_rings_its_uplinks_carry():
    assert mig.leaf_bounds(fabric_view(_fabric(8))).tolist() == [4, 4, 4]
    assert mig.leaf_bounds(fabric_view(_fabric(4))).tolist() == [8, 8, 8]
    assert mig.leaf_bounds(fabric_view(_fabric(1))).tolist() == [32, 32, 32]


def test_defragment_moves_the_fewest_servers_to_a_congestion_free_placement():
    f = _fabric()
    v = fabric_view(f)
    jobs = [_job("b", 24, 40), _job("c", 24, 40), _job("d", 16, 40)]
    prof = [profile_job(j, v) for j in jobs]

    def gpus(*servers):
        return np.concatenate([v.gpus_of(s) for s in servers])

    # c spans leaf 0 (server 3) and leaf 1 (6, 7); servers 0-2 and 11 are free
    placed = [(0, gpus(8, 9, 10)), (1, gpus(3, 6, 7)), (2, gpus(4, 5))]
    free = np.ones(f.num_gpus, bool)
    for _, g in placed:
        free[g] = False
    segs, _ = mig.segments(v, prof, placed)
    assert mig.leaf_fragmentation(v, segs).tolist() == [8, 8, 0]
    moved = mig.defragment(v, prof, placed, free)
    # the one congestion-free choice of 2 moves: c's two servers of leaf 1 to leaf 0's lowest free
    assert list(moved) == [1]
    assert np.array_equal(moved[1], gpus(0, 1, 3))


def test_nothing_moves_while_every_leaf_is_within_its_bound():
    f = _fabric(1)  # 1:1: 32 rings per leaf
    v = fabric_view(f)
    prof = [profile_job(_job("c", 24, 40), v)]
    placed = [(0, np.concatenate([v.gpus_of(s) for s in (3, 6, 7)]))]
    free = np.ones(f.num_gpus, bool)
    free[placed[0][1]] = False
    assert mig.defragment(v, prof, placed, free) == {}


def _instance():
    # a (3 servers, 3 iterations) ends early; c is placed across leaves 0 and 1 at time 0
    return _fabric(), [_job("a", 24, 3), _job("b", 24, 40), _job("c", 24, 40), _job("d", 16, 40)]


def test_monkeytree_migrates_whatever_the_stall_costs():
    f, jobs = _instance()
    plan = make_plan(f, jobs, method="monkeytree", backfill=True)
    moves = plan.info["migrations"]
    assert [m["job"] for m in moves] == ["c"]
    assert moves[0]["stall_s"] == pytest.approx(mig.MONKEYTREE_COST_PER_WORKER_S)
    assert moves[0]["moved_gpus"] == 16 and 1 <= moves[0]["iterations_before"] < 40
    topo = make_plan(f, jobs, method="topology", backfill=True)
    assert "migrations" not in topo.info
    # the stall (9.02 s) is more than the defragmentation saves c here: its JCT grows
    by = {j.name: j.predicted_jct_s for j in plan.jobs}
    assert by["c"] > {j.name: j.predicted_jct_s for j in topo.jobs}["c"]


def test_the_plan_migrates_only_when_the_model_predicts_a_gain_over_the_stall():
    f, jobs = _instance()
    free_move = make_plan(f, jobs, method="bilevel", migration_cost_per_worker_s=0.0)
    costly = make_plan(f, jobs, method="bilevel", migration_cost_per_worker_s=1e6)
    none = make_plan(f, jobs, method="bilevel")
    assert [m["job"] for m in free_move.info["migrations"]] == ["c"]
    assert costly.info["migrations"] == [] and "migrations" not in none.info
    assert free_move.predicted_mean_jct_s < none.predicted_mean_jct_s
    assert costly.predicted_mean_jct_s == pytest.approx(none.predicted_mean_jct_s)


def test_a_migrated_job_runs_in_parts_and_its_jct_spans_them():
    f, jobs = _instance()
    plan = make_plan(f, jobs, method="monkeytree", backfill=True)
    sim = simulate_plan(f, jobs, plan, SimCheck(horizon_s=3600.0, fidelity="phase", seed=0))
    recs = {r.name: r for r in sim.cluster.jobs}
    m = plan.info["migrations"][0]
    assert set(recs) == {"a", "b", "c", "c~1", "d"}
    assert recs["c"].iterations_planned + recs["c~1"].iterations_planned == 40
    assert tuple(recs["c~1"].gpus) == tuple(m["to_gpus"])
    assert recs["c~1"].start_s >= m["time_s"] + m["stall_s"] - 1e-9
    ends = [recs["a"].finish_s, recs["b"].finish_s, recs["c~1"].finish_s, recs["d"].finish_s]
    assert sim.mean_jct_s == pytest.approx(np.mean(ends))  # every job submitted at 0


def test_split_parts_keep_every_iteration_in_order():
    jobs = [_job("x", 16, 10, submit_s=1.0)]
    moves = [mig.Move(job=0, time_s=5.0, old_gpus=np.arange(16), new_gpus=np.arange(16, 32), moved_gpus=16,
                      iterations_before=4, stall_s=2.0),
             mig.Move(job=0, time_s=9.0, old_gpus=np.arange(16, 32), new_gpus=np.arange(32, 48),
                      moved_gpus=16, iterations_before=7, stall_s=2.0)]
    parts = mig.split_parts(jobs, [1.5], [np.arange(32, 48)], moves)
    assert [(spec.name, spec.iterations, start) for _, spec, _, start in parts] == [
        ("x", 4, 1.5), ("x~1", 3, 7.0), ("x~2", 3, 11.0)]
    assert [int(g[0]) for _, _, g, _ in parts] == [0, 16, 32]
    assert parts[0][1].submit_s == 1.0 and parts[1][1].submit_s == 7.0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "9 s", True])
def test_a_bad_migration_cost_is_one_clear_line(bad):
    f, jobs = _instance()
    with pytest.raises(ConfigError) as err:
        make_plan(f, jobs, method="bilevel", migration_cost_per_worker_s=bad)
    msg = str(err.value)
    assert "\n" not in msg and "migration_cost_per_worker_s" in msg and repr(bad) in msg and ">= 0" in msg


def test_a_negative_migration_cost_in_a_scenario_names_the_field():
    from flowherd.experiments.scenario import scenario_from_mapping

    data = {"fabric": {"kind": "leaf-spine", "servers": 4, "gpus_per_server": 8, "leaves": 2, "spines": 2},
            "workload": {"jobs": [{"name": "a", "model": "llama3-8b", "gpus": 16, "iterations": 2}]},
            "planner": {"migration_cost_per_worker_s": -1}}
    with pytest.raises(ConfigError, match=r"invalid value -1 \(planner\.migration_cost_per_worker_s\)"):
        scenario_from_mapping(data)
    ok = scenario_from_mapping({**data, "planner": {"migration_cost_per_worker_s": 9.02}})
    assert ok.migration_cost_per_worker_s == 9.02
