"""The warp-segment layouts (`WarpELL`, `CompactWarpELL`) built on the device
from device CSR arrays, with no host copy of the matrix.

`warp_from_device` and `compact_from_device` take `row_ptr`, `col`, `val`
as JAX arrays (a device explorer's output, or host arrays moved once) and
return the same arrays, bit for bit, as `WarpELL.from_csr` and
`CompactWarpELL.from_csr` (without `sort_rows`) build on the host. Shapes
are static, so each build is two jitted passes:

1. `warp_stats` (O(rows + nnz)): the stored size `total` (the segments'
   widths from the row lengths), and for the compact layout the number of
   distinct values and the range of the column offsets, which fix the
   table's length and the index types. Only these few scalars come back to
   the host.
2. the placement (`_warp_arrays`): every CSR entry's stored position by
   the placement of `jaxmc.layout.warp` (a prefix sum of the segment widths,
   then a scatter), and the row of every stored element by a scatter of
   segment starts and a running maximum; the compact table by a sort.

Rows, entries, the stored size and the table are padded up to size
buckets (`jaxmc.layout.device_pad.bucket`: padding rows are empty, padding
entries are dropped, the results cut back to their sizes), so both passes
compile once per bucket, lanes and index types: models of similar size
share them.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .compact import narrow_int
from .device_pad import bucket, pad_tail
from .warp import WARP, CompactWarpELL, WarpELL, check_stored


def _spb(lanes: int, segs_per_block: int | None) -> int:
    if lanes not in (1, 2):
        raise ValueError(f"`lanes` must be 1 (full warp) or 2 (half warp), not {lanes}")
    return segs_per_block or (8 if lanes == 1 else 16)


def _nseg(nrows: int, lanes: int, spb: int) -> int:
    seg_rows = WARP // lanes
    nseg = -(-max(nrows, 1) // seg_rows)
    return -(-nseg // spb) * spb


def _padded_csr(row_ptr, col, val):
    """`(row_ptr, col, val, nrows, nnz)`: the CSR padded to buckets (empty
    padding rows; padding entries past `nnz`), as JAX arrays."""
    nrows, nnz = row_ptr.shape[0] - 1, col.shape[0]
    rb, eb = bucket(nrows + 1), bucket(nnz)
    return (
        jnp.asarray(pad_tail(row_ptr, rb + 1, nnz)),
        jnp.asarray(pad_tail(col, eb, 0)),
        jnp.asarray(pad_tail(val, eb, 0)),
        nrows,
        nnz,
    )


def _seg_width(row_ptr, lanes: int, spb: int):
    """Each segment's width (steps): its longest row, in steps of `lanes`
    (the padding rows' segments are empty)."""
    seg_rows = WARP // lanes
    nrows = row_ptr.shape[0] - 1
    nseg = _nseg(nrows, lanes, spb)
    lengths = (row_ptr[1:] - row_ptr[:-1]).astype(jnp.int64)
    steps = jnp.zeros(nseg * seg_rows, jnp.int64).at[:nrows].set(-(-lengths // lanes))
    return steps.reshape(nseg, seg_rows).max(axis=1)


def _entry_rows(row_ptr, nnz: int):
    """The row of every CSR entry (empty rows allowed)."""
    marks = jnp.zeros(nnz + 1, jnp.int64).at[row_ptr[1:-1]].add(1)
    return jnp.cumsum(marks)[:nnz]


@functools.partial(jax.jit, static_argnames=("lanes", "spb", "compact"))
def _stats(row_ptr, col, val, nnz, *, lanes, spb, compact):
    width = _seg_width(row_ptr, lanes, spb)
    total = width.sum() * WARP + WARP
    if not compact:
        return total, jnp.int64(0), jnp.int64(0), jnp.int64(0)
    s = jnp.sort(jnp.append(val, jnp.zeros((), val.dtype)))  # (padding: 0)
    distinct = 1 + jnp.count_nonzero(s[1:] != s[:-1])
    valid = jnp.arange(col.shape[0]) < nnz
    off = jnp.where(
        valid, col.astype(jnp.int64) - _entry_rows(row_ptr, col.shape[0]), 0
    )
    # padding (offset 0) is always stored: the trailing warp
    return total, distinct, off.min(initial=0), off.max(initial=0)


def warp_stats(row_ptr, col, val, lanes: int = 1, spb=None, compact=False):
    """`(total, distinct, off_lo, off_hi)` as Python ints: stored entries of
    the warp layout of the CSR `(row_ptr, col, val)`, and (with `compact`)
    the distinct values among the entries and 0, and the range of column
    offsets (0 included)."""
    row_ptr, col, val, _, nnz = _padded_csr(row_ptr, col, val)
    got = _stats(
        row_ptr, col, val, nnz, lanes=lanes, spb=_spb(lanes, spb), compact=compact
    )
    return tuple(int(v) for v in jax.device_get(got))


@functools.partial(jax.jit, static_argnames=("lanes", "spb", "total", "vdtype"))
def _warp_arrays(row_ptr, col, val, nrows, ncols, nnz, *, lanes, spb, total, vdtype):
    """The `WarpELL` arrays, `total` (a bucket) long; `nrows`, `ncols`,
    `nnz` the real sizes (traced: padding rows and entries past them)."""
    nb = col.shape[0]
    seg_rows = WARP // lanes
    row_ptr = row_ptr.astype(jnp.int64)
    width = _seg_width(row_ptr, lanes, spb)
    nseg = width.shape[0]
    seg_ptr = jnp.concatenate([jnp.zeros(1, jnp.int64), jnp.cumsum(width * WARP)])
    block_width = width.reshape(-1, spb).max(axis=1)
    rows = _entry_rows(row_ptr, nb)
    e = jnp.arange(nb, dtype=jnp.int64)
    k = e - row_ptr[rows]
    pos = seg_ptr[rows // seg_rows] + WARP * (k // lanes) + seg_rows * (k % lanes)
    pos = jnp.where(e < nnz, pos + rows % seg_rows, total)  # padding: dropped
    slot = jnp.full(total, nnz, jnp.int64).at[pos].set(e, mode="drop")
    # The segment of each stored element: the last segment starting at or
    # before it (empty segments start where the next one does).
    start = jnp.zeros(total, jnp.int64).at[seg_ptr[:-1]].max(jnp.arange(nseg))
    seg = jax.lax.cummax(start)
    i = jnp.arange(total, dtype=jnp.int64)
    srow = jnp.where(i < seg_ptr[-1], seg * seg_rows + (i - seg_ptr[seg]) % seg_rows, 0)
    cols = jnp.minimum(srow, ncols - 1).at[pos].set(col.astype(jnp.int64), mode="drop")
    data = jnp.zeros(total, vdtype).at[pos].set(val.astype(vdtype), mode="drop")
    i32 = jnp.int32
    return dict(
        data=data,
        cols=cols.astype(i32),
        rows=jnp.minimum(srow, jnp.maximum(nrows - 1, 0)).astype(i32),
        slot=slot.astype(i32),
        seg_ptr=seg_ptr.astype(i32),
        seg_width=width.astype(i32),
        block_width=block_width.astype(i32),
    )


def _cut(arrays: dict, total: int, nseg: int, spb: int) -> dict:
    """The bucketed arrays cut to the real stored size and segments."""
    sizes = dict(seg_ptr=nseg + 1, seg_width=nseg, block_width=nseg // spb)
    return {k: v[: sizes.get(k, total)] for k, v in arrays.items()}


def _warp(row_ptr, col, val, shape, lanes, spb, dtype, total):
    """`(WarpELL, padded arrays, total bucket)` (the padded arrays feed the
    compact build)."""
    row_ptr, col, val, nrows, nnz = _padded_csr(row_ptr, col, val)
    if total is None:
        total = _stats(row_ptr, col, val, nnz, lanes=lanes, spb=spb, compact=False)[0]
        total = int(total)
    check_stored(total)
    vdtype = np.dtype(val.dtype if dtype is None else dtype)
    tb = bucket(total)
    padded = _warp_arrays(
        row_ptr,
        col,
        val,
        nrows,
        shape[1],
        nnz,
        lanes=lanes,
        spb=spb,
        total=tb,
        vdtype=vdtype,
    )
    arrays = _cut(padded, total, _nseg(nrows, lanes, spb), spb)
    w = WarpELL(
        **arrays,
        shape=shape,
        lanes=lanes,
        segs_per_block=spb,
        nnz=nnz,
        lane_info=None,
    )
    return w, padded, tb


def warp_from_device(
    row_ptr,
    col,
    val,
    shape,
    lanes: int = 1,
    segs_per_block=None,
    dtype=None,
    total=None,
) -> WarpELL:
    """`WarpELL.from_csr` of the CSR `(row_ptr, col, val)` (JAX arrays, or
    numpy), built on the device. `total` (the stored size, `warp_stats`'s
    first value) skips the statistics pass."""
    shape = (int(shape[0]), int(shape[1]))
    spb = _spb(lanes, segs_per_block)
    return _warp(row_ptr, col, val, shape, lanes, spb, dtype, total)[0]


@functools.partial(jax.jit, static_argnames=("distinct", "vt", "ot"))
def _compact_arrays(data, cols, rows, slot, nnz, *, distinct, vt, ot):
    # One sort of the stored values and 0: each run of equal values is a
    # table entry, and its rank is the index of every element of the run.
    x = jnp.append(data, jnp.zeros((), data.dtype))
    order = jnp.argsort(x)
    s = x[order]
    first = jnp.concatenate([jnp.ones(1, bool), s[1:] != s[:-1]])
    rank = jnp.cumsum(first) - 1
    table = jnp.zeros(distinct, data.dtype).at[rank].set(s)
    idx = jnp.zeros(x.shape[0], rank.dtype).at[order].set(rank)
    off = jnp.where(slot == nnz, 0, cols.astype(jnp.int64) - rows)
    return table, idx[:-1].astype(vt), off.astype(ot), idx[-1]


def compact_from_device(
    row_ptr, col, val, shape, lanes: int = 1, segs_per_block=None, dtype=None
) -> CompactWarpELL:
    """`CompactWarpELL.from_csr` of the CSR `(row_ptr, col, val)`, built on
    the device; the same `ValueError`s where the layout cannot hold the
    matrix (not square, more than 65536 distinct values)."""
    spb = _spb(lanes, segs_per_block)
    shape = (int(shape[0]), int(shape[1]))
    total, distinct, lo, hi = warp_stats(row_ptr, col, val, lanes, spb, True)
    if shape[0] != shape[1]:
        raise ValueError(
            "the compact layout needs a square matrix (columns as row offsets)"
        )
    vt = narrow_int(0, distinct - 1, signed=False)
    if vt == np.uint32 or vt == np.int64:
        raise ValueError(
            f"the matrix has {distinct} distinct values; the compact layout "
            "holds at most 65536"
        )
    w, p, _ = _warp(row_ptr, col, val, shape, lanes, spb, None, total)
    table, vidx, offs, zero = _compact_arrays(
        p["data"],
        p["cols"],
        p["rows"],
        p["slot"],
        w.nnz,
        distinct=bucket(distinct),
        vt=np.dtype(vt),
        ot=np.dtype(narrow_int(lo, hi)),
    )
    table = table[:distinct]
    return CompactWarpELL(
        table=table if dtype is None else table.astype(dtype),
        vidx=vidx[:total],
        offs=offs[:total],
        rows=w.rows,
        seg_ptr=w.seg_ptr,
        seg_width=w.seg_width,
        block_width=w.block_width,
        shape=shape,
        lanes=lanes,
        segs_per_block=spb,
        nnz=w.nnz,
        zero=int(zero),
        lane_info=None,
    )


#: `layout.build.VECTOR_MIN_MEAN` (repeated: `build` imports this module).
_VECTOR_MIN_MEAN = 64

#: A row longer than `LONG_ROW` entries and `LONG_ROW_FACTOR` times the mean
#: makes `layout_kind` (and `device_layout_kind`) pick CSR (a segment sum
#: over all entries) on a GPU: the warp layouts walk a row with one thread
#: (the CSR-vector layout with one warp), so a single long row sets every
#: SpMV's time. leader_sync's initial state has K^N successors (262,144 for
#: N=6, K=8) beside rows of one or two (benchmarks/RESULTS.md, session 17).
LONG_ROW = 4096
LONG_ROW_FACTOR = 64


def long_rows(longest: int, mean: float) -> bool:
    """Whether the longest row makes the warp and vector layouts slow."""
    return longest > LONG_ROW and longest > LONG_ROW_FACTOR * mean


def device_layout_kind(row_ptr, col, val, shape, *, fixed_values: bool = False) -> str:
    """`jaxmc.layout.layout_kind(csr, "gpu", fixed_values=...)` from
    statistics computed on the device (the warp layouts' stored sizes, and
    with `fixed_values` the distinct values and column offsets): the same
    choice, with only a few scalars brought back."""
    nrows, nnz = int(shape[0]), int(col.shape[0])
    mean = nnz / nrows if nrows else 0.0
    if nrows:
        longest = int(jnp.max(jnp.diff(jnp.asarray(row_ptr))))
        if long_rows(longest, mean):
            return "csr"
    if nrows and mean >= _VECTOR_MIN_MEAN:
        return "vector"
    nz = max(nnz, 1)
    full = (warp_stats(row_ptr, col, val, 1)[0] - WARP) / nz
    half = (warp_stats(row_ptr, col, val, 2)[0] - WARP) / nz
    lanes = 2 if (half < 0.9 * full or mean >= 24) else 1
    suffix = "2" if lanes == 2 else ""
    if fixed_values and shape[0] == shape[1] and nnz:
        _, distinct, lo, hi = warp_stats(row_ptr, col, val, 1, compact=True)
        # (`layout_kind` counts the values without the padding 0)
        distinct -= not bool(jnp.any(jnp.asarray(val) == 0))
        if distinct < 65536 and np.dtype(narrow_int(lo, hi)).itemsize <= 2:
            return "compact" + suffix
    return "warp" + suffix
