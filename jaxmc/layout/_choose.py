"""Automatic layout choice from the matrix and the device.

On a CPU the plain CSR `segment_sum` is best (no padding, and XLA:CPU has no
use for coalescing). On a GPU the warp-segment layouts coalesce the matrix
reads; the half warp halves the steps of long rows and wins when the rows are
long or irregular within segments (its padding is then smaller); the compact
variant moves 2-6 bytes per entry instead of 12 and is chosen when the values
are fixed (it cannot take new values under `jit`) and the table fits. Rows of
`VECTOR_MIN_MEAN` entries or more on average (herman N=15: 438) get the
CSR-vector layout, a warp per row: a thread per row would walk each row
alone, and few long rows make too few segments to fill the GPU.
"""

from __future__ import annotations

import jax
import numpy as np

from ._matrix import CSR, make_layout
from ._vector import VectorCSR
from ._warp import WARP, CompactWarpELL, WarpELL, narrow_int


#: Mean row length from which `layout_kind` picks the CSR-vector layout.
VECTOR_MIN_MEAN = 64


def _padded(lengths: np.ndarray, lanes: int) -> int:
    seg_rows = WARP // lanes
    n = len(lengths)
    nseg = -(-max(n, 1) // seg_rows)
    steps = np.zeros(nseg * seg_rows, dtype=np.int64)
    steps[:n] = -(-lengths // lanes)
    return int(steps.reshape(nseg, seg_rows).max(axis=1).sum() * WARP)


def layout_kind(csr: CSR, device_kind: str | None = None, *, fixed_values: bool = False) -> str:
    """The layout name `choose_layout` picks (see the module docstring).

    **Arguments:**
    - `csr`: the matrix.
    - `device_kind`: `"cpu"` or `"gpu"` (default: JAX's default backend).
    - `fixed_values`: whether the values stay as they are (allows `compact`).
    """
    device_kind = device_kind or jax.default_backend()
    if device_kind != "gpu":
        return "csr"
    lengths = np.diff(np.asarray(csr.indptr, dtype=np.int64))
    if len(lengths) and lengths.mean() >= VECTOR_MIN_MEAN:
        return "vector"
    nnz = max(int(lengths.sum()), 1)
    full = _padded(lengths, 1) / nnz
    half = _padded(lengths, 2) / nnz
    # Half warp: fewer padded bytes, or long rows (half the loop trips).
    lanes = 2 if (half < 0.9 * full or (lengths.mean() if len(lengths) else 0) >= 24) else 1
    suffix = "2" if lanes == 2 else ""
    if fixed_values and csr.shape[0] == csr.shape[1] and csr.nnz:
        distinct = len(np.unique(np.asarray(csr.data)))
        rows = np.asarray(csr.row_ids, np.int64)
        off = np.asarray(csr.indices, np.int64) - rows
        otype = narrow_int(int(off.min()), int(off.max()))
        if distinct < 65536 and np.dtype(otype).itemsize <= 2:
            return "compact" + suffix
    return "warp" + suffix


def build_layout(csr: CSR, kind: str, device_kind: str | None = None):
    """Build named layout `kind` (`"auto"` asks `layout_kind`)."""
    if kind == "auto":
        kind = layout_kind(csr, device_kind)
    if kind in ("warp", "warp2"):
        return WarpELL.from_csr(csr, lanes=2 if kind == "warp2" else 1)
    if kind in ("compact", "compact2"):
        return CompactWarpELL.from_csr(csr, lanes=2 if kind == "compact2" else 1)
    if kind == "vector":
        return VectorCSR.from_csr(csr)
    return make_layout(csr, kind)


def choose_layout(
    csr: CSR, device_kind: str | None = None, *, kind: str | None = None,
    fixed_values: bool = False,
):
    """The layout for `csr` on `device_kind`: `kind` if given (any name of
    `jaxmc.layout.make_layout`), else the automatic choice."""
    if kind is None or kind == "auto":
        kind = layout_kind(csr, device_kind, fixed_values=fixed_values)
    return build_layout(csr, kind, device_kind)
