"""nccl-tests' conventions (NVIDIA/nccl-tests a0b82b2, src/common.cu and the per-op *.cu files)."""

import pytest

from flowherd.collectives.nccl_tests import (
    redop_shown,
    root_shown,
    shown_size_and_count,
    sizes_of_sweep,
)
from flowherd.errors import ConfigError
from flowherd.units import parse_nccl_size


def test_sizes_follow_the_timetest_loop():
    # for (size = min; size <= max; size = f > 1 ? size * f : size + i)
    assert sizes_of_sweep(8, 100, factor=3) == [8, 24, 72]
    assert sizes_of_sweep(2**20, 3 * 2**20, step_bytes=2**20) == [2**20, 2 * 2**20, 3 * 2**20]
    assert sizes_of_sweep(5, 5) == [5]
    assert sizes_of_sweep(0, 64, factor=2) == [0]  # 0 * f would never end


def test_a_sweep_of_too_many_sizes_is_refused():
    with pytest.raises(ConfigError, match="more than 1000 sizes"):
        sizes_of_sweep(1, 2**30, step_bytes=1)


@pytest.mark.parametrize(("op", "size", "ranks", "type_bytes", "expected"), [
    # AllReduce, Broadcast, Reduce: count = size / type bytes, the whole buffer
    ("allreduce", 1001, 8, 4, (1000, 250)),
    ("broadcast", 64, 8, 2, (64, 32)),
    # AllGather / ReduceScatter / AllToAll: base = (count / n) & ~(16 / type bytes - 1) per rank
    ("allgather", 1000, 8, 4, (896, 28)),
    ("reducescatter", 2**20, 16, 4, (2**20, 2**14)),
    ("alltoall", 1000, 8, 8, (896, 14)),
    ("alltoall", 1000, 8, 1, (896, 112)),
    ("allgather", 8, 16, 4, (0, 0)),
])
def test_size_and_count_are_nccl_tests(op, size, ranks, type_bytes, expected):
    assert shown_size_and_count(op, size, ranks=ranks, type_bytes=type_bytes) == expected


def test_redop_and_root_columns():
    assert [redop_shown(op, "sum") for op in ("allreduce", "allgather", "broadcast", "reduce")] == [
        "sum", "none", "none", "sum"]
    assert [root_shown(op, 2) for op in ("allreduce", "broadcast", "reduce", "alltoall")] == [-1, 2, 2, -1]


def test_letters_are_binary_as_in_parsesize_and_b_suffixes_keep_their_meaning():
    # parsesize: "We use the binary system, so M=Mebibytes and G=Gibibytes"; k/m/g lower case too
    assert [parse_nccl_size(s) for s in ("8", "1K", "1k", "2M", "1G", "0.5G")] == [
        8, 1024, 1024, 2 * 2**20, 2**30, 2**29]
    assert [parse_nccl_size(s) for s in ("1KB", "1MB", "1GiB")] == [1000, 10**6, 2**30]
    with pytest.raises(ConfigError, match=r"\(-b\)"):
        parse_nccl_size("1X", field="-b")
