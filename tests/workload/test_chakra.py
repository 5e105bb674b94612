"""Chakra execution traces as jobs: the schema, the writer, the reader, the graph built from them."""

import hashlib
import json

import pytest

from flowherd.collectives.ops import Op
from flowherd.errors import ConfigError
from flowherd.workload import ChakraJob, Granularity, TrainingJob
from flowherd.workload.chakra_graph import rescale, trace_graph
from flowherd.workload.chakra_read import read_trace_dir
from flowherd.workload.chakra_schema import CollectiveCommType as CT
from flowherd.workload.chakra_schema import NodeType, message_classes
from flowherd.workload.chakra_write import encode_messages, export_graph, microbenchmark
from flowherd.workload.opgraph import TaskKind


def _write(d, per_rank, groups=None, prefix="t"):
    """Each rank's nodes as dicts of Node fields (attrs: name -> (field, value))."""
    cls = message_classes()
    d.mkdir(parents=True, exist_ok=True)
    for r, nodes in enumerate(per_rank):
        msgs = [cls["GlobalMetadata"](version="0.0.4")]
        for n in nodes:
            n = dict(n)
            attrs = n.pop("attrs", {})
            node = cls["Node"](**n)
            for k, (f, v) in attrs.items():
                node.attr.append(cls["AttributeProto"](name=k, **{f: v}))
            msgs.append(node)
        (d / f"{prefix}.{r}.et").write_bytes(encode_messages(msgs))
    if groups is not None:
        (d / "comm_group.json").write_text(json.dumps(groups))
    return d


def _coll(nid, ct, size, deps=(), pg=None, name=None):
    attrs = {"comm_type": ("int64_val", int(ct)), "comm_size": ("int64_val", size)}
    if pg is not None:
        attrs["pg_name"] = ("string_val", pg)
    return {"id": nid, "name": name or f"coll{nid}", "type": int(NodeType.COMM_COLL_NODE),
            "data_deps": list(deps), "attrs": attrs}


def _comp(nid, micros, deps=(), ctrl=()):
    return {"id": nid, "name": f"comp{nid}", "type": int(NodeType.COMP_NODE), "duration_micros": micros,
            "data_deps": list(deps), "ctrl_deps": list(ctrl)}


def _p2p(nid, send, src, dst, size, deps=()):
    t = NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE
    return {"id": nid, "name": f"{'send' if send else 'recv'}{nid}", "type": int(t), "data_deps": list(deps),
            "attrs": {"comm_src": ("int32_val", src), "comm_dst": ("int32_val", dst),
                      "comm_size": ("int64_val", size)}}


def test_microbenchmarks_are_the_shipped_files_byte_for_byte(tmp_path):
    # sha256 of astra-sim 518bd51's examples/workload/microbenchmarks/all_reduce/8npus_1MB/
    # all_reduce.{0,7}.et and all_gather/16npus_1MB/all_gather.3.et (written by its
    # generator_scripts with Chakra's et_def_pb2 and protolib.encodeMessage)
    d = microbenchmark(tmp_path / "ar", CT.ALL_REDUCE, 8, 1)
    assert hashlib.sha256((d / "all_reduce.0.et").read_bytes()).hexdigest() == \
        "df90fd189b4f964a87ba9d70115b7b48012a9da57e2254f8365de03f05bc9f74"
    assert hashlib.sha256((d / "all_reduce.7.et").read_bytes()).hexdigest() == \
        "28e5c9355ff2dd8e38b3afe2ac0012b606ae1b9519ed803eaaa67d49448667a8"
    d = microbenchmark(tmp_path / "ag", CT.ALL_GATHER, 16, 1)
    assert hashlib.sha256((d / "all_gather.3.et").read_bytes()).hexdigest() == \
        "e3916c6a6e9d85732be0051d810131c4e354902413910b65db0d9ddbf1cbe47c"


@pytest.mark.parametrize(("ct", "op", "factor"), [
    (CT.ALL_REDUCE, Op.ALLREDUCE, 1), (CT.ALL_GATHER, Op.ALLGATHER, 8), (CT.ALL_TO_ALL, Op.ALLTOALL, 1),
    (CT.REDUCE_SCATTER, Op.REDUCESCATTER, 1)])
def test_a_microbenchmark_is_one_collective_over_all_ranks_with_astra_sims_sizes(tmp_path, ct, op, factor):
    # ASTRA-sim's comm_size of an AllGather is each rank's contribution (its ring sends n-1
    # messages of it): flowherd's AllGather size is the gathered buffer, n times it
    g = trace_graph(read_trace_dir(microbenchmark(tmp_path, ct, 8, 1)))
    assert len(g.tasks) == 1 and g.world_size == 8
    (c,) = g.tasks[0].collectives
    assert c.op == op and c.gpus == tuple(range(8)) and c.size_bytes == factor * 2**20


def test_identical_ranks_share_their_tasks_and_groups_run_concurrently(tmp_path):
    # 4 ranks, tp groups {0,1} {2,3}, dp groups {0,2} {1,3}: compute, a tp AllReduce, compute, a
    # dp AllReduce; ranks are alike, so each position is one task (the two groups' calls concurrent)
    groups = {"1": [0, 1], "2": [2, 3], "3": [0, 2], "4": [1, 3]}
    ranks = [[_comp(0, 100), _coll(1, CT.ALL_REDUCE, 1000, [0], pg=str(1 + r // 2)), _comp(2, 50, [1]),
              _coll(3, CT.ALL_REDUCE, 4000, [2], pg=str(3 + r % 2))] for r in range(4)]
    g = trace_graph(read_trace_dir(_write(tmp_path, ranks, groups)))
    assert [t.kind for t in g.tasks] == [TaskKind.COMPUTE, TaskKind.COMM, TaskKind.COMPUTE, TaskKind.COMM]
    assert g.stage_ranks == ((0, 1, 2, 3),)
    assert sorted(c.gpus for c in g.tasks[1].collectives) == [(0, 1), (2, 3)]
    assert sorted(c.gpus for c in g.tasks[3].collectives) == [(0, 2), (1, 3)]
    assert [t.group for t in g.tasks if t.kind == TaskKind.COMM] == ["tp", "dp"]
    assert g.critical_path_s() == pytest.approx(150e-6)
    assert [t.deps for t in g.tasks] == [(), (0,), (1,), (2,)]


def test_send_and_receive_pair_into_one_transfer_after_both_sides(tmp_path):
    # rank 0 computes 100 us then sends to 1; rank 1 computes 300 us, receives, computes 10 us
    r0 = [_comp(0, 100), _p2p(1, True, 0, 1, 5000, [0])]
    r1 = [_comp(0, 300), _p2p(1, False, 0, 1, 5000, [0]), _comp(2, 10, [1])]
    g = trace_graph(read_trace_dir(_write(tmp_path, [r0, r1])))
    (x,) = [t for t in g.tasks if t.kind == TaskKind.COMM]
    assert x.collectives[0].op == Op.SENDRECV and x.collectives[0].gpus == (0, 1)
    assert len(x.deps) == 2  # both computes
    assert g.critical_path_s() == pytest.approx(310e-6)
    assert len(g.stage_ranks) == 2


def test_control_dependencies_are_kept(tmp_path):
    ranks = [[_comp(0, 100), _comp(1, 200), _comp(2, 5, ctrl=[0, 1])]]
    g = trace_graph(read_trace_dir(_write(tmp_path, ranks)))
    assert g.critical_path_s() == pytest.approx(205e-6)


def test_a_native_megatron_iteration_written_as_ets_reads_back_as_the_same_work(tmp_path):
    job = TrainingJob(model="llama3-8b", gpus=16, tp=4, pp=2, seq_len=2048, global_batch=16)
    g0 = job.iteration_graph(Granularity.STAGE)
    g1 = trace_graph(read_trace_dir(export_graph(g0, tmp_path)))
    assert g1.world_size == 16
    assert g1.bytes_by_group_op() == g0.bytes_by_group_op()
    assert g1.compute_s_by_stage() == pytest.approx(g0.compute_s_by_stage(), abs=1e-5)  # us rounding
    assert g1.critical_path_s() == pytest.approx(g0.critical_path_s(), rel=1e-4)


def test_a_data_parallel_trace_rescales_its_collectives_to_the_new_width(tmp_path):
    ranks = [[_comp(0, 100), _coll(1, CT.ALL_REDUCE, 1000, [0]), _coll(2, CT.ALL_GATHER, 10, [1])]] * 4
    g = trace_graph(read_trace_dir(_write(tmp_path, ranks)))
    big = rescale(g, read_trace_dir(tmp_path), 32)
    ar, ag = (t.collectives[0] for t in big.tasks if t.kind == TaskKind.COMM)
    assert big.world_size == 32 and ar.gpus == tuple(range(32)) and ar.size_bytes == 1000
    assert ag.size_bytes == 320  # each rank still contributes 10 bytes


def test_a_trace_with_model_parallel_groups_does_not_rescale(tmp_path):
    r0 = [_comp(0, 100), _p2p(1, True, 0, 1, 5000, [0])]
    r1 = [_p2p(0, False, 0, 1, 5000)]
    job_dir = _write(tmp_path, [r0, r1])
    with pytest.raises(ConfigError, match="not purely data parallel"):
        ChakraJob(path=str(job_dir), name="x", ranks=8)


# ---- malformed traces: one line naming the file and the node ---------------------------------------
def _one_line(err):
    msg = str(err.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def test_a_truncated_file_names_the_file_and_the_last_good_node(tmp_path):
    d = microbenchmark(tmp_path, CT.ALL_REDUCE, 4, 1)
    f = d / "all_reduce.2.et"
    f.write_bytes(f.read_bytes()[:-7])
    with pytest.raises(ConfigError) as err:
        read_trace_dir(d)
    msg = _one_line(err)
    assert "all_reduce.2.et" in msg and "truncated protobuf" in msg and "node message 0" in msg


def test_a_missing_rank_names_the_missing_file(tmp_path):
    d = microbenchmark(tmp_path, CT.ALL_REDUCE, 4, 1)
    (d / "all_reduce.1.et").unlink()
    with pytest.raises(ConfigError) as err:
        read_trace_dir(d)
    msg = _one_line(err)
    assert "all_reduce.1.et" in msg and "rank 1 is missing" in msg


def test_a_process_group_naming_a_rank_the_job_lacks_names_the_group_file(tmp_path):
    ranks = [[_coll(0, CT.ALL_REDUCE, 10, pg="1")]] * 2
    d = _write(tmp_path, ranks, {"1": [0, 1, 5]})
    with pytest.raises(ConfigError) as err:
        read_trace_dir(d)
    msg = _one_line(err)
    assert "comm_group.json" in msg and "rank 5" in msg and "ranks 0..1" in msg


def test_a_pytorch_process_group_naming_a_rank_the_job_lacks_names_the_file_and_node(tmp_path):
    meta = {"id": 7, "name": "process_group:init", "type": int(NodeType.METADATA_NODE),
            "inputs": message_classes()["IOInfo"](values='[{"pg_name": "3", "ranks": [0, 9]}]')}
    d = _write(tmp_path, [[meta], [meta]])
    with pytest.raises(ConfigError) as err:
        read_trace_dir(d)
    msg = _one_line(err)
    assert "t.0.et" in msg and "node 7 'process_group:init'" in msg and "rank 9" in msg


def test_a_cycle_in_the_dependencies_names_the_file_and_a_node_on_it(tmp_path):
    ranks = [[_comp(0, 1, [2]), _comp(1, 1, [0]), _comp(2, 1, [1])]]
    with pytest.raises(ConfigError) as err:
        read_trace_dir(_write(tmp_path, ranks))
    msg = _one_line(err)
    assert "t.0.et: node" in msg and "cycle" in msg


def test_ranks_waiting_for_each_other_are_a_cycle_naming_a_node(tmp_path):
    # each rank receives before it sends: neither receive can ever be matched
    r0 = [_p2p(0, False, 1, 0, 8), _p2p(1, True, 0, 1, 8, [0])]
    r1 = [_p2p(0, False, 0, 1, 8), _p2p(1, True, 1, 0, 8, [0])]
    with pytest.raises(ConfigError) as err:
        trace_graph(read_trace_dir(_write(tmp_path, [r0, r1])))
    msg = _one_line(err)
    assert ".et: node" in msg and "cycle" in msg


def test_a_collective_a_rank_does_not_call_names_the_unmatched_node(tmp_path):
    ranks = [[_coll(0, CT.ALL_REDUCE, 10), _coll(1, CT.ALL_REDUCE, 10, [0], name="extra")],
             [_coll(0, CT.ALL_REDUCE, 10)]]
    with pytest.raises(ConfigError) as err:
        trace_graph(read_trace_dir(_write(tmp_path, ranks)))
    msg = _one_line(err)
    assert "t.0.et: node 1 'extra'" in msg and "rank 1" in msg


def test_mismatched_collective_sizes_name_both_nodes(tmp_path):
    ranks = [[_coll(0, CT.ALL_REDUCE, 10)], [_coll(0, CT.ALL_REDUCE, 12)]]
    with pytest.raises(ConfigError) as err:
        trace_graph(read_trace_dir(_write(tmp_path, ranks)))
    msg = _one_line(err)
    assert "t.1.et: node 0" in msg and "12 bytes" in msg and "t.0.et" in msg


def test_a_group_that_does_not_hold_the_calling_rank_is_refused(tmp_path):
    ranks = [[_coll(0, CT.ALL_REDUCE, 10, pg="1")], [_coll(0, CT.ALL_REDUCE, 10, pg="1")]]
    with pytest.raises(ConfigError, match=r"t\.1\.et: node 0 .*do not include it"):
        trace_graph(read_trace_dir(_write(tmp_path, ranks, {"1": [0]})))


def test_a_dependency_on_a_node_the_file_lacks_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"t\.0\.et: node 0 'comp0': depends on node 42"):
        read_trace_dir(_write(tmp_path, [[_comp(0, 1, [42])]]))
