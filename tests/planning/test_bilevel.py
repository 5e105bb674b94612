"""The bi-level coupling: the routing LP's cost changes the placement the group rule alone makes."""

from __future__ import annotations

import dataclasses

import numpy as np

from flowherd.fabric.generators import leaf_spine
from flowherd.planning.batch import LeafCongestion
from flowherd.planning.bilevel import _candidates, place_groups, pod_fill
from flowherd.planning.predict import _layout, evaluate, fabric_view, profile_job
from flowherd.planning.timeline import Congestion
from flowherd.workload import TrainingJob
from flowherd.workload.llm_cluster import recipe_shape


def _job(name, model, gpus):
    sh = recipe_shape(model, gpus)
    return TrainingJob(model=model, gpus=gpus, name=name, global_batch=max(8, sh["pp"]) * sh["dp"],
                       iterations=5, **sh)


class _Run:  # the timeline's state the congestion score reads
    def __init__(self, profiles, gpus, running):
        self.profiles, self.gpus, self.running = profiles, gpus, running


def test_the_routing_lp_moves_a_job_off_the_leaves_two_rings_already_cross():
    # 6 leaves of 4 servers (8 H100 each) at 8:1; running: two Llama 3 8B jobs (TP 1, CP 2, one
    # stage: their data-parallel rings cross every leaf they touch) scattered over leaves 0-4.
    # A Mixtral 8x7B of 64 GPUs (NeMo: PP 4, EP 8; a stage is 2 servers) needs 3 leaves.
    # The group rule alone (Arnold's MIP: fewest leaves, no stage split, then best fit) takes
    # servers 0, 2 (leaf 0, beside both rings), 13, 14 (leaf 3) and 20-23 (leaf 5); the routing
    # LP scores that 0.110 (largest link load, nothing over the target) and the least-loaded
    # aligned candidate, servers 13, 14, 16, 17 (leaf 4), 20-23, 0.097, and takes it
    f = leaf_spine(servers=24, gpus_per_server=8, leaves=6, spines=2, oversubscription=8)
    v = fabric_view(f)

    def gpus(servers):
        return np.concatenate([v.gpus_of(s) for s in servers])

    running = [(profile_job(_job("r0", "llama3-8b", 48), v), gpus([1, 8, 11, 12, 15, 18])),
               (profile_job(_job("r1", "llama3-8b", 32), v), gpus([3, 6, 7, 9]))]
    new = profile_job(_job("n", "mixtral-8x7b", 64), v)
    free = np.ones(f.num_gpus, bool)
    for _, g in running:
        free[g] = False
    rule = place_groups(v, [new], free.copy(), running).placements[0]
    run = _Run([p for p, _ in running] + [new], [g for _, g in running] + [None], [0, 1])
    cong = Congestion(leaf=LeafCongestion(target=0.9, background_bytes_per_s=np.zeros(v.num_leaves)),
                      fabric=f, target=0.9).for_batch(run, [2])
    res = place_groups(v, [new], free.copy(), running, congestion=cong)
    lp = res.placements[0]
    assert sorted(set((rule // 8).tolist())) == [0, 2, 13, 14, 20, 21, 22, 23]
    assert sorted(set((lp // 8).tolist())) == [13, 14, 16, 17, 20, 21, 22, 23]
    assert res.notes and res.notes[0].startswith("n: arnold") and "aligned-least-loaded" in res.notes[0]
    profiles = [p for p, _ in running] + [new]
    before = evaluate(v, profiles, [g for _, g in running] + [rule], start_s=[0.0, 0.0, 0.0]).jct_s
    after = evaluate(v, profiles, [g for _, g in running] + [lp], start_s=[0.0, 0.0, 0.0]).jct_s
    assert after[2] < 0.95 * before[2]  # the new job: 17.3 s against 19.4 s predicted
    assert np.all(after <= before + 1e-9)  # and no running job is slower for it


def _two_pods():
    # 2 pods (aggregation groups) of 3 ToR groups of 4 servers (8 H100 each), 8:1 to the core
    from flowherd.fabric.generators import clos3

    return clos3(servers=24, servers_per_tor=4, tors_per_pod=3, spines_per_pod=2, cores=2,
                 spine_oversubscription=8)


def test_a_job_one_pod_holds_is_placed_inside_one_pod():
    # whole free servers per ToR group: pod 0 has 4, 2, 0; pod 1 has 4, 2, 2. A Llama 3 8B on 64
    # GPUs (TP 8, PP 4, DP 2: a stage is 2 servers) needs 8 servers. Arnold's MIP and the aligned
    # fills take the fewest ToR groups, groups 0 and 3, one in each pod (its pipeline then crosses
    # the 8:1 core every iteration); only pod 1 holds it alone, in groups 3, 4, 5
    f = _two_pods()
    v = fabric_view(f)
    assert v.num_pods == 2 and v.leaf_pod.tolist() == [0, 0, 0, 1, 1, 1]
    busy = [4, 5, 8, 9, 10, 11, 18, 19, 22, 23]  # servers taken by other jobs
    free = np.ones(f.num_gpus, bool)
    for s in busy:
        free[v.gpus_of(s)] = False
    job = TrainingJob(model="llama3-8b", gpus=64, tp=8, pp=4, dp=2, name="n", global_batch=16,
                      iterations=5)
    p = profile_job(job, v)
    flat = dataclasses.replace(v, leaf_pod=None)  # the view without the aggregation tier
    cands = dict(_candidates(flat, p, free, np.zeros(v.num_leaves)))
    assert "aligned-fewest-pods" not in cands
    for gp in cands.values():  # every candidate without pods spreads over both pods
        assert np.unique(v.leaf_pod[_layout(v, gp)[1]]).size == 2
    cands = dict(_candidates(v, p, free, np.zeros(v.num_leaves)))
    pod = cands["aligned-fewest-pods"]
    assert sorted(set((pod // 8).tolist())) == [12, 13, 14, 15, 16, 17, 20, 21]
    # the routing LP's score, the core at 8:1: the pod's fill is chosen
    running = []
    run = _Run([p], [None], [])
    cong = Congestion(leaf=LeafCongestion(target=0.9, background_bytes_per_s=np.zeros(v.num_leaves)),
                      fabric=f, target=0.9).for_batch(run, [0])
    res = place_groups(v, [p], free.copy(), running, congestion=cong)
    assert np.array_equal(res.placements[0], pod)
    assert res.notes and "aligned-fewest-pods" in res.notes[0]


def test_one_pod_fabrics_keep_the_candidates_without_pods():
    # a leaf-spine is one pod: no pod candidate, and place_groups' choice is the same with or
    # without the pods in the view (the Kalos families' plans do not move)
    f = leaf_spine(servers=24, gpus_per_server=8, leaves=6, spines=2, oversubscription=8)
    v = fabric_view(f)
    assert v.num_pods == 1 and pod_fill(v, np.full(6, 4), 8, 2, np.zeros(6)) is None
    p = profile_job(_job("n", "mixtral-8x7b", 64), v)
    free = np.ones(f.num_gpus, bool)
    free[v.gpus_of(0)] = False
    assert [r for r, _ in _candidates(v, p, free, np.zeros(6))] == \
        [r for r, _ in _candidates(dataclasses.replace(v, leaf_pod=None), p, free, np.zeros(6))]


def test_the_routing_lps_scores_are_memoized_by_the_jobs_and_gpus_routed(monkeypatch):
    # the timeline scores the same jobs on the same GPUs at every event and in every restore
    # round: a second score of the same placements must not solve the LP again, and must be the
    # number the LP gave; another placement is solved
    import flowherd.planning.congestion as congestion

    f = leaf_spine(servers=24, gpus_per_server=8, leaves=6, spines=2, oversubscription=8)
    v = fabric_view(f)
    running = [(profile_job(_job("r0", "llama3-8b", 48), v),
                np.concatenate([v.gpus_of(s) for s in [1, 8, 11, 12, 15, 18]]))]
    new = profile_job(_job("n", "mixtral-8x7b", 64), v)
    run = _Run([running[0][0], new], [running[0][1], None], [0])
    solves = []
    real = congestion.route_windows
    monkeypatch.setattr(congestion, "route_windows", lambda *a, **k: solves.append(1) or real(*a, **k))
    guard = Congestion(leaf=LeafCongestion(target=0.9, background_bytes_per_s=np.zeros(v.num_leaves)),
                       fabric=f, target=0.9, scores={})
    a = np.concatenate([v.gpus_of(s) for s in [13, 14, 16, 17, 20, 21, 22, 23]])
    b = np.concatenate([v.gpus_of(s) for s in [0, 2, 13, 14, 20, 21, 22, 23]])
    first = guard.for_batch(run, [1]).route_score([a])
    again = dataclasses.replace(guard, leaf=dataclasses.replace(guard.leaf, target=0.5))
    assert again.for_batch(run, [1]).route_score([a.copy()]) == first and len(solves) == 1
    other = again.for_batch(run, [1]).route_score([b])
    assert len(solves) == 2 and other > 0
    alone = again.for_batch(_Run(run.profiles, run.gpus, []), [1]).route_score([a])
    assert len(solves) == 3 and alone < first  # the same GPUs without the running job: solved
    fresh = Congestion(leaf=guard.leaf, fabric=f, target=0.9).for_batch(run, [1]).route_score([a])
    assert fresh == first and len(solves) == 4  # no memo: solved, the same score
