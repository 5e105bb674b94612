"""Small memory pages for a simulation's arrays (`small_pages`).

numpy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array of
4 MiB or more. Where the kernel's THP mode is ``madvise`` (Debian's default) and its ``defrag``
setting is ``madvise`` too, the first touch of each 2 MiB page then compacts memory to find
one and zeroes all of it. The engine's arrays are many and large (a 1,024-GPU ring AllReduce's
2 million flows, its buffers indexed by flow id) and many are touched sparsely: on the
machine of `benchmarks/results/astra_compare.txt` huge pages cost that ring 0.5-1.0 CPU-s of
system time out of 2 (``sys`` time, varying with how fragmented memory is), against 0.3 s with
4 KiB pages, and no user time was saved. The numbers do not depend on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["small_pages"]


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """numpy's huge-page request off inside the block, as it was after it (a no-op where this
    numpy has no switch: ``NUMPY_MADVISE_HUGEPAGE=0`` does the same for a whole process)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy < 2: the same switch under numpy.core
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:
            _set_madvise_hugepage = None
    if _set_madvise_hugepage is None:
        yield
        return
    before = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(before)
