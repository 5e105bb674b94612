"""Communication groups and the placements that keep them in one leaf (Arnold's MIP, the plan's
upper level), and the planner's view of a rail-optimized fabric."""

from __future__ import annotations

import numpy as np
import pytest

from flowherd.fabric.generators import leaf_spine
from flowherd.fabric.generators.rail import rail_optimized
from flowherd.planning.groups import aligned_counts, arnold_counts, fragments, job_groups
from flowherd.planning.plan import make_plan
from flowherd.planning.predict import _server_of, fabric_view, profile_job
from flowherd.workload import TrainingJob


def _leaves_of_stages(view, gpus, job):
    """Leaves each pipeline stage's ranks touch, under the simulator's rank mapping."""
    from flowherd.workload.training import rank_to_gpu

    m = rank_to_gpu(job, gpus, view.gpus_per_server, gpu_server=view.fabric.gpu_server)
    stage = job.tp * job.cp * job.dp
    srv = _server_of(view)
    return [np.unique(view.server_leaf[srv[m[p * stage:(p + 1) * stage]]]).size for p in range(job.pp)]


def test_job_groups_are_the_megatron_blocks():
    f = leaf_spine(servers=16, gpus_per_server=8, leaves=4, spines=2)
    v = fabric_view(f)
    j = TrainingJob(model="llama3-70b", gpus=64, tp=4, pp=4, cp=2)  # stage: tp cp dp = 16 GPUs
    g = job_groups(profile_job(j, v), 8)
    assert (g.servers, g.stage_servers, g.stages) == (8, 2, 4)


def test_aligned_counts_keep_every_stage_in_one_leaf():
    room = np.array([3, 4, 1, 4])
    counts = aligned_counts(room, 8, 2, np.arange(4))
    assert counts.sum() == 8 and np.all(counts % 2 == 0) and np.all(counts <= room)
    assert np.count_nonzero(counts) == 2  # fewest leaves: the two of room 4
    assert aligned_counts(np.array([1, 1, 1, 1]), 4, 2, np.arange(4)) is None  # no whole stage fits


def test_arnold_mip_prefers_unsplit_stages_and_few_leaves():
    # 8 servers in blocks of 2: leaves with room 3, 3, 4: an aligned choice is 4 + 2 + 2 (3 leaves,
    # no stage split); 4 + 3 + 1 would split stages
    counts = arnold_counts(np.array([3, 3, 4]), 8, 2)
    assert counts.sum() == 8 and np.all(counts <= np.array([3, 3, 4]))
    assert np.all(counts % 2 == 0)
    assert arnold_counts(np.array([1, 1]), 4, 2) is None


def test_arnold_placer_keeps_stages_in_one_leaf_where_topology_splits_them():
    # leaves of 4 servers with 3, 3 and 4 whole servers free; a 64-GPU Llama 3 70B (NeMo's TP 4,
    # PP 4, CP 2: a stage is tp cp dp = 16 GPUs, 2 servers): topology takes the roomiest leaves
    # in turn (4 + 3 + 1: a stage across two leaves), Arnold 4 + 2 + 2 (every stage in one leaf)
    from flowherd.planning.placers import PLANNERS

    f = leaf_spine(servers=12, gpus_per_server=8, leaves=3, spines=2, oversubscription=4)
    v = fabric_view(f)
    job = TrainingJob(model="llama3-70b", gpus=64, tp=4, pp=4, cp=2, name="b", iterations=2)
    p = profile_job(job, v)
    free = np.ones(f.num_gpus, bool)
    free[v.gpus_of(0)] = False  # leaf 0
    free[v.gpus_of(4)] = False  # leaf 1
    rng = np.random.default_rng(0)
    topo = PLANNERS["topology"]().place_one(v, p, free.copy(), rng)
    arn = PLANNERS["arnold"]().place_one(v, p, free.copy(), rng)
    assert max(_leaves_of_stages(v, topo, job)) == 2
    assert max(_leaves_of_stages(v, arn, job)) == 1
    assert fragments(v, [topo]).tolist() == [1, 1, 1]


def test_rail_optimized_view_counts_every_rail_leafs_uplinks():
    # SuperPOD-like SU of 32 servers x 8 NICs at 400 Gb/s, leaves 1:1: the SU's uplinks carry
    # 32 x 8 x 50 GB/s = 12,800 GB/s (all eight rail leaves), not one rail leaf's 1,600
    f = rail_optimized(servers=64, gpus_per_server=8, servers_per_su=32, spines=16)
    v = fabric_view(f)
    assert v.num_leaves == 2
    assert v.leaf_uplink_bytes_per_s == pytest.approx([12.8e12, 12.8e12])


def test_bilevel_plan_places_whole_servers_and_notes_what_the_lp_changed():
    f = leaf_spine(servers=16, gpus_per_server=8, leaves=4, spines=2, oversubscription=4)
    jobs = [TrainingJob(model="llama3-70b", gpus=64, tp=4, pp=4, cp=2, name=f"j{i}", iterations=3,
                        submit_s=float(i)) for i in range(2)]
    plan = make_plan(f, jobs, method="bilevel", seed=0, routes=True)
    srv = np.asarray(f.gpu_server)
    for jp in plan.jobs:
        counts = np.bincount(srv[list(jp.gpus)])
        assert set(counts[counts > 0].tolist()) == {8}  # whole servers: rails and TP groups intact
    assert isinstance(plan.info.get("placement_notes", []), list)
