"""Cells of the terminal tables: one unit per column, named in its header (``JCT (s)``), and the
cells plain numbers with the same decimals down the column."""

from __future__ import annotations

import math


def cell(x: float | None, digits: int = 2, *, scale: float = 1.0) -> str:
    """``x * scale`` with `digits` decimals and thousands separators; ``-`` for none or nan.

    >>> cell(21.634), cell(1234.5, 1), cell(None), cell(0.404, 1, scale=1e3)
    ('21.63', '1,234.5', '-', '404.0')
    """
    if x is None:
        return "-"
    v = float(x) * scale
    if not math.isfinite(v):
        return "-"
    return f"{v:,.{digits}f}"
