"""Set operations on integer arrays that stay fast at any size.

numpy's `np.unique(a)` without `return_index`/`return_inverse`/
`return_counts` takes a hash-table path for integers (numpy 2.3 on), which
is far slower than sorting once the array has millions of distinct values
(index arrays of states, columns, components);
`np.union1d` and `np.setdiff1d` call it. These functions sort instead
(`benchmarks/RESULTS.md`, session 18, has the measurement).
"""

from __future__ import annotations

import numpy as np


def unique(a) -> np.ndarray:
    """The sorted distinct values of `a` (flattened), as `np.unique(a)`."""
    s = np.sort(np.asarray(a).ravel())
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def union1d(a, b) -> np.ndarray:
    """`np.union1d(a, b)` through `unique`."""
    return unique(np.concatenate([np.ravel(a), np.ravel(b)]))


def unique_counts(a) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values of `a` and how often each occurs, as
    `np.unique(a, return_counts=True)`."""
    s = np.sort(np.asarray(a).ravel())
    if s.size == 0:
        return s, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
    return s[starts], np.diff(np.append(starts, s.size))
