"""What nccl-tests runs and prints for one size: the sizes of a ``-b/-e/-f/-i`` sweep, and each
size's byte count, element count, type, reduction and root as its output columns show them.

Everything here follows NVIDIA/nccl-tests (``src/common.cu`` and ``src/util.cu`` at a0b82b2; the
per-op ``*GetCollByteCount`` of ``src/all_reduce.cu``, ``all_gather.cu`` ...):

* the sizes run are ``b, b*f, b*f**2, ... <= e`` with ``-f F > 1``, else ``b, b+i, b+2i, ... <= e``
  (``TimeTest``); nccl-tests' defaults are ``-b 32M -e 32M -f 1 -i 1M``;
* a size becomes ``count = size // type_bytes`` elements; an op that splits its buffer among the
  ``n`` ranks (AllGather, ReduceScatter, AllToAll) runs ``count // n`` elements per rank, rounded
  down to a multiple of 16 bytes' worth of elements, and prints ``size`` as the whole buffer
  (per-rank elements x ``n`` x type bytes) and ``count`` as the per-rank elements;
* ``redop`` is ``none`` for the ops without a reduction (AllGather, AllToAll, Broadcast) and
  ``root`` is ``-1`` for the ops without a root.

>>> sizes_of_sweep(8, 64, factor=2)
[8, 16, 32, 64]
>>> shown_size_and_count("allgather", 1000, ranks=16, type_bytes=4)
(768, 12)
>>> shown_size_and_count("allreduce", 1000, ranks=16, type_bytes=4)
(1000, 250)
"""

from __future__ import annotations

from flowherd.errors import ConfigError
from flowherd.registry import Registry

__all__ = ["DATATYPES", "DEFAULT_MAX_BYTES", "DEFAULT_MIN_BYTES", "DEFAULT_STEP_BYTES", "MAX_SIZES",
           "REDOPS", "redop_shown", "root_shown", "shown_size_and_count", "sizes_of_sweep"]

#: nccl-tests' defaults of ``-b``, ``-e`` and ``-i`` (``src/common.cu``: minBytes, maxBytes, stepBytes).
DEFAULT_MIN_BYTES = 32 * 2**20
DEFAULT_MAX_BYTES = 32 * 2**20
DEFAULT_STEP_BYTES = 2**20
#: The most sizes one command runs (``-i 1`` from 8 B to 1 GiB would be a billion).
MAX_SIZES = 1000

#: NCCL's data types by nccl-tests' ``-d`` names, in bytes per element.
DATATYPES = Registry("datatype", {
    "int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "float": 4, "float64": 8, "double": 8,
    "f8e4m3": 1, "f8e5m2": 1,
})
#: NCCL's reduction operations by nccl-tests' ``-o`` names (the time does not depend on them here).
REDOPS = Registry("reduction", dict.fromkeys(("sum", "prod", "max", "min", "avg", "mulsum"), True))

_SPLIT = ("allgather", "reducescatter", "alltoall", "alltoallv")
_NO_REDUCTION = ("allgather", "alltoall", "alltoallv", "broadcast")
_ROOTED = ("broadcast", "reduce")


def sizes_of_sweep(min_bytes: int, max_bytes: int, *, factor: int = 1,
                   step_bytes: int = DEFAULT_STEP_BYTES) -> list[int]:
    """The sizes nccl-tests runs for ``-b min_bytes -e max_bytes -f factor -i step_bytes``.

    Raises:
        ConfigError: ``min_bytes > max_bytes``, a factor below 1, a zero step without a factor,
            or more than `MAX_SIZES` sizes.
    """
    if min_bytes > max_bytes:
        raise ConfigError(f"the smallest size must not exceed the largest: -b {min_bytes} > -e {max_bytes} "
                          "bytes (-b/--minbytes, -e/--maxbytes)")
    if factor < 1:
        raise ConfigError(f"the step factor must be an integer of at least 1, got {factor} (-f/--stepfactor)")
    if factor == 1 and step_bytes < 1:
        raise ConfigError(f"the increment must be at least 1 byte, got {step_bytes} (-i/--stepbytes)")
    sizes: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        if len(sizes) > MAX_SIZES:
            raise ConfigError(f"-b {min_bytes} -e {max_bytes} with "
                              f"{f'-f {factor}' if factor > 1 else f'-i {step_bytes}'} makes more than "
                              f"{MAX_SIZES} sizes; expected at most {MAX_SIZES} (-f/--stepfactor, "
                              "-i/--stepbytes)")
        if factor > 1:
            if size == 0:  # nccl-tests would loop forever on 0 * f: one size is what it means
                break
            size *= factor
        else:
            size += step_bytes
    return sizes


def shown_size_and_count(op: str, size_bytes: int, *, ranks: int, type_bytes: int) -> tuple[int, int]:
    """``(size, count)`` as nccl-tests prints them for a requested size (module docstring): the
    bytes actually run, the whole buffer; and the elements each rank passes to NCCL."""
    count = int(size_bytes) // type_bytes
    if op in _SPLIT:
        align = max(1, 16 // type_bytes)
        per_rank = (count // ranks) // align * align
        return per_rank * ranks * type_bytes, per_rank
    return count * type_bytes, count


def redop_shown(op: str, redop: str) -> str:
    """The ``redop`` column: the reduction, or ``none`` for an op without one."""
    return "none" if op in _NO_REDUCTION else redop


def root_shown(op: str, root: int) -> int:
    """The ``root`` column: the root rank of Broadcast and Reduce, ``-1`` for the other ops."""
    return root if op in _ROOTED else -1
