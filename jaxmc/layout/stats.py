"""Storage statistics shared by the layouts: padding and bytes per non-zero
(`stats()` of every layout), and the count of real entries among stored
ones."""

from __future__ import annotations

import numpy as np


def layout_stats(name, nnz, stored, mbytes, shape, itemsize) -> dict:
    """Padding and bytes per non-zero; `spmv_bytes` counts the matrix once,
    `x` once and `y` once (the compulsory traffic of one SpMV)."""
    nnz = max(nnz, 1)
    return dict(
        layout=name,
        nnz=nnz,
        stored=stored,
        padding=stored / nnz - 1.0,
        matrix_bytes=mbytes,
        bytes_per_nnz=mbytes / nnz,
        spmv_bytes=mbytes + itemsize * (shape[0] + shape[1]),
    )


def real_entries(slots) -> int:
    """Stored entries that are not padding: padding repeats the largest slot
    (`nnz`), real entries hold each slot once. (A single padding entry cannot
    be told apart from a real one; it is counted as real.)"""
    s = np.concatenate([np.ravel(a) for a in slots]) if slots else np.zeros(0)
    if s.size == 0:
        return 0
    mx = s.max()
    pads = int(np.count_nonzero(s == mx))
    return int(s.size - pads) if pads > 1 else int(s.size)
