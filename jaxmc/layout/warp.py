"""Warp-segment sliced ELL (the GPU-PRISM layouts), plain and compact.

Rows are cut into *segments* of `32 // lanes` consecutive rows. A segment is
stored column-major and padded to its own longest row, so a warp of 32
threads reads 32 consecutive stored entries per step:

- *full warp* (`lanes=1`): segments of 32 rows, one thread per row;
- *half warp* (`lanes=2`): segments of 16 rows, two threads per row; entry `k`
  of a row goes to thread `k % 2` at step `k // 2`, and the two partial sums
  are added at the end. Long rows take half as many steps.

Element `(step j, half h, row r)` of segment `s` sits at
`seg_ptr[s] + 32 j + (32 // lanes) h + r % (32 // lanes)`. Segments are grouped
into kernel blocks of `segs_per_block` segments; `block_width` holds each
block's largest segment width (the kernel's loop bound).

The *compact* variant (the compact-MSR idea) stores a table of the distinct
values with a narrow index per entry (uint8/uint16) and the column as a
narrow offset from the row (int8/int16 where the band allows, else int32):
1 + 1 to 2 + 4 bytes per entry instead of 8 + 4. The layouts keep the row
order they are given; reorder first (`jaxmc.layout.bfs_order`) if the
matrix's order is poor.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..errors import UnsupportedError
from .compact import narrow_int
from .csr import CSR
from .stats import layout_stats


#: Threads per warp: stored entries per segment step.
WARP = 32


def _host_csr(csr: CSR):
    return (
        np.asarray(csr.indptr, dtype=np.int64),
        np.asarray(csr.indices, dtype=np.int64),
        np.asarray(csr.data),
    )


def _placement(
    indptr: np.ndarray, nrows: int, lanes: int, segs_per_block: int, sort: bool = False
):
    """Host: where every CSR entry goes. Returns `(seg_ptr, seg_width,
    block_width, pos, total, lane_info)` with `pos[e]` the stored index of
    entry `e`; `lane_info` is None unless `sort` (see `WarpELL`)."""
    seg_rows = WARP // lanes
    lengths = np.diff(indptr)
    nseg = -(-max(nrows, 1) // seg_rows)
    nseg = -(-nseg // segs_per_block) * segs_per_block
    steps = np.zeros(nseg * seg_rows, dtype=np.int64)
    steps[:nrows] = -(-lengths // lanes)
    seg_width = steps.reshape(nseg, seg_rows).max(axis=1)
    seg_ptr = np.concatenate([[0], np.cumsum(seg_width * WARP)])
    block_width = seg_width.reshape(-1, segs_per_block).max(axis=1)
    rows = np.repeat(np.arange(nrows, dtype=np.int64), lengths)
    k = np.arange(len(rows), dtype=np.int64) - indptr[rows]
    lane_info = None
    if sort:
        # Lane l of segment s holds row s*S + perm[s, l]: longest rows first,
        # so that the padding of each step is a contiguous run of lanes.
        st = steps.reshape(nseg, seg_rows)
        perm = np.argsort(-st, axis=1, kind="stable")
        lane_of = np.empty_like(perm)
        np.put_along_axis(lane_of, perm, np.arange(seg_rows)[None, :], axis=1)
        lane_of = lane_of.reshape(-1)
        bits = seg_rows.bit_length() - 1
        cap = (1 << (8 - bits)) - 1
        lsteps = np.minimum(np.take_along_axis(st, perm, axis=1), cap)
        lane_info = (perm | (lsteps << bits)).reshape(-1).astype(np.uint8)
    else:
        lane_of = np.arange(nseg * seg_rows) % seg_rows
    pos = (
        seg_ptr[rows // seg_rows]
        + WARP * (k // lanes)
        + seg_rows * (k % lanes)
        + lane_of[rows]
    )
    # One warp of padding at the end, so no array is empty (an all-empty
    # matrix still has something to point at).
    return seg_ptr, seg_width, block_width, pos, int(seg_ptr[-1]) + WARP, lane_info


def _stored_rows(seg_ptr, seg_width, lanes, total, lane_info=None):
    """Host: the row of every stored element (padding included)."""
    seg_rows = WARP // lanes
    seg = np.repeat(np.arange(len(seg_width)), seg_width * WARP)
    within = np.arange(len(seg)) - seg_ptr[seg]
    lane = within % seg_rows
    if lane_info is not None:
        lane = np.asarray(lane_info, np.int64)[seg * seg_rows + lane] & (seg_rows - 1)
    rows = seg * seg_rows + lane
    return np.concatenate([rows, np.zeros(total - len(rows), np.int64)])


#: The most stored entries of one warp-segment matrix: its segment pointers,
#: columns and the kernels' offsets are int32.
MAX_STORED = 2**31 - 1


def check_stored(total: int) -> None:
    """Raise `UnsupportedError` for a warp-segment matrix of more than
    `MAX_STORED` stored entries (int32 offsets would wrap: wrong numbers)."""
    if int(total) > MAX_STORED:
        raise UnsupportedError(
            f"the warp-segment layout of this matrix needs {int(total):,} stored "
            f"entries, past its int32 offsets ({MAX_STORED:,})",
            hint="split it over several devices (`devices=N`, `--devices N`: "
            "each device's rows are a matrix of their own) or use layout='csr'",
        )


def host_arrays(indptr, indices, shape, lanes=1, segs_per_block=None, sort_rows=False):
    """Host (numpy) arrays of the warp-segment layout of the CSR structure
    `(indptr, indices)` of `shape`: `cols`, `rows` (int32), `slot` (each
    stored element's CSR entry, `nnz` for padding; int64), `pos` (each CSR
    entry's stored index), `seg_ptr`, `seg_width`, `block_width` (int32),
    `lane_info` and `segs_per_block`. The values are placed by `slot`."""
    if lanes not in (1, 2):
        raise ValueError(f"`lanes` must be 1 (full warp) or 2 (half warp), not {lanes}")
    spb = segs_per_block or (8 if lanes == 1 else 16)
    indptr = np.asarray(indptr, dtype=np.int64)
    nrows, ncols = int(shape[0]), int(shape[1])
    nnz = int(indptr[-1]) if len(indptr) else 0
    seg_ptr, seg_width, block_width, pos, total, lane_info = _placement(
        indptr, nrows, lanes, spb, sort_rows
    )
    check_stored(total)
    slot = np.full(total, nnz, dtype=np.int64)
    slot[pos] = np.arange(nnz)
    rows = _stored_rows(seg_ptr, seg_width, lanes, total, lane_info)
    cols = np.minimum(rows, ncols - 1)  # padding reads nothing
    cols[pos] = np.asarray(indices)
    return {
        "cols": cols.astype(np.int32),
        "rows": np.minimum(rows, max(nrows - 1, 0)).astype(np.int32),
        "slot": slot,
        "pos": pos,
        "seg_ptr": seg_ptr.astype(np.int32),
        "seg_width": seg_width.astype(np.int32),
        "block_width": block_width.astype(np.int32),
        "lane_info": lane_info,
        "segs_per_block": spb,
    }


class WarpELL(eqx.Module):
    """Warp-segment sliced ELL, full warp (`lanes=1`) or half warp
    (`lanes=2`). Flat arrays of `total` stored entries; see the module
    docstring for the placement."""

    data: Float[Array, " t"]
    cols: Int[Array, " t"]
    rows: Int[Array, " t"]  # row of each stored entry (reference path only)
    slot: Int[Array, " t"]  # CSR entry of each stored entry, nnz for padding
    seg_ptr: Int[Array, " s1"]
    seg_width: Int[Array, " s"]
    block_width: Int[Array, " b"]
    shape: tuple[int, int] = eqx.field(static=True)
    lanes: int = eqx.field(static=True)
    segs_per_block: int = eqx.field(static=True)
    nnz: int = eqx.field(static=True)
    lane_info: Int[Array, " r"] | None = None

    @property
    def seg_rows(self) -> int:
        return WARP // self.lanes

    @property
    def block_rows(self) -> int:
        return self.seg_rows * self.segs_per_block

    @classmethod
    def from_csr(
        cls,
        csr: CSR,
        lanes: int = 1,
        segs_per_block: int | None = None,
        dtype=None,
        sort_rows: bool = False,
    ) -> WarpELL:
        """`sort_rows`: within each segment, put the longest rows on the
        first lanes and keep each lane's row and length (capped) in
        `lane_info` (one byte per row): the kernel then masks every lane at
        its own row's length, and the masked tail of a step is a run of
        whole memory sectors that are not read. Off by default: measured
        slower on tandem c=2047 (the per-lane byte and the scattered
        row-wise epilogue cost more than the skipped padding saves)."""
        if lanes not in (1, 2):
            raise ValueError(
                f"`lanes` must be 1 (full warp) or 2 (half warp), not {lanes}"
            )
        indptr, indices, data = _host_csr(csr)
        h = host_arrays(indptr, indices, csr.shape, lanes, segs_per_block, sort_rows)
        vals = np.zeros(len(h["slot"]), dtype=data.dtype if dtype is None else dtype)
        vals[h["pos"]] = data
        return cls(
            data=jnp.asarray(vals),
            cols=jnp.asarray(h["cols"]),
            rows=jnp.asarray(h["rows"]),
            slot=jnp.asarray(h["slot"], dtype=jnp.int32),
            seg_ptr=jnp.asarray(h["seg_ptr"]),
            seg_width=jnp.asarray(h["seg_width"]),
            block_width=jnp.asarray(h["block_width"]),
            shape=(int(csr.shape[0]), int(csr.shape[1])),
            lanes=lanes,
            segs_per_block=h["segs_per_block"],
            nnz=len(data),
            lane_info=None if h["lane_info"] is None else jnp.asarray(h["lane_info"]),
        )

    def with_segs_per_block(self, segs_per_block: int):
        """The same stored entries grouped into kernel blocks of
        `segs_per_block` segments (a tuning knob; no entry moves). Trailing
        empty segments are added where the count does not divide."""
        return _regroup(self, segs_per_block)

    def with_values(self, vals: Float[Array, " nnz"]) -> WarpELL:
        vals = jnp.asarray(vals)
        padded = jnp.append(vals, jnp.zeros((), vals.dtype))
        return eqx.tree_at(
            lambda m: m.data, self, padded[self.slot].astype(self.data.dtype)
        )

    def astype(self, dtype) -> WarpELL:
        return eqx.tree_at(lambda m: m.data, self, self.data.astype(dtype))

    def stats(self) -> dict:
        stored = int(self.data.shape[0])
        mbytes = stored * (self.data.dtype.itemsize + 4) + self.seg_ptr.size * 8
        mbytes += 0 if self.lane_info is None else int(self.lane_info.size)
        return layout_stats(
            f"warp{self.lanes}",
            self.nnz,
            stored,
            mbytes,
            self.shape,
            self.data.dtype.itemsize,
        )


class CompactWarpELL(eqx.Module):
    """`WarpELL` with a value table and narrow indices: entry value
    `table[vidx]`, column `row + offs`. Padding has `vidx` pointing at a 0 in
    the table (`zero`) and offset 0."""

    table: Float[Array, " v"]
    vidx: Int[Array, " t"]
    offs: Int[Array, " t"]
    rows: Int[Array, " t"]
    seg_ptr: Int[Array, " s1"]
    seg_width: Int[Array, " s"]
    block_width: Int[Array, " b"]
    shape: tuple[int, int] = eqx.field(static=True)
    lanes: int = eqx.field(static=True)
    segs_per_block: int = eqx.field(static=True)
    nnz: int = eqx.field(static=True)
    zero: int = eqx.field(static=True)
    lane_info: Int[Array, " r"] | None = None

    seg_rows = WarpELL.seg_rows
    block_rows = WarpELL.block_rows

    @classmethod
    def from_csr(
        cls,
        csr: CSR,
        lanes: int = 1,
        segs_per_block: int | None = None,
        dtype=None,
        sort_rows: bool = False,
    ) -> CompactWarpELL:
        w = WarpELL.from_csr(csr, lanes, segs_per_block, sort_rows=sort_rows)
        if csr.shape[0] != csr.shape[1]:
            raise ValueError(
                "the compact layout needs a square matrix (columns as row offsets)"
            )
        data = np.asarray(w.data)
        table, vidx = np.unique(np.append(data, 0.0), return_inverse=True)
        zero = int(np.searchsorted(table, 0.0))
        vidx = vidx[:-1]
        vt = narrow_int(0, len(table) - 1, signed=False)
        if vt == np.uint32 or vt == np.int64:
            raise ValueError(
                f"the matrix has {len(table)} distinct values; the compact layout "
                "holds at most 65536"
            )
        rows = np.asarray(w.rows).astype(np.int64)
        off = np.asarray(w.cols).astype(np.int64) - rows
        off[np.asarray(w.slot) == w.nnz] = 0
        ot = narrow_int(int(off.min(initial=0)), int(off.max(initial=0)))
        return cls(
            table=jnp.asarray(table, dtype=data.dtype if dtype is None else dtype),
            vidx=jnp.asarray(vidx.astype(vt)),
            offs=jnp.asarray(off.astype(ot)),
            rows=w.rows,
            seg_ptr=w.seg_ptr,
            seg_width=w.seg_width,
            block_width=w.block_width,
            shape=w.shape,
            lanes=w.lanes,
            segs_per_block=w.segs_per_block,
            nnz=w.nnz,
            zero=zero,
            lane_info=w.lane_info,
        )

    with_segs_per_block = WarpELL.with_segs_per_block

    def astype(self, dtype) -> CompactWarpELL:
        return eqx.tree_at(lambda m: m.table, self, self.table.astype(dtype))

    @property
    def data(self):
        """The stored values, expanded (reference path)."""
        return self.table[self.vidx.astype(jnp.int32)]

    @property
    def cols(self):
        return self.rows + self.offs.astype(jnp.int32)

    def with_values(self, vals) -> CompactWarpELL:
        raise TypeError(
            "the compact layout tabulates its values on the host; rebuild it "
            "with `CompactWarpELL.from_csr(csr.with_values(vals))`"
        )

    def stats(self) -> dict:
        stored = int(self.vidx.shape[0])
        per = self.vidx.dtype.itemsize + self.offs.dtype.itemsize
        mbytes = (
            stored * per
            + self.seg_ptr.size * 8
            + self.table.size * self.table.dtype.itemsize
        )
        mbytes += 0 if self.lane_info is None else int(self.lane_info.size)
        s = layout_stats(
            f"compact{self.lanes}",
            self.nnz,
            stored,
            mbytes,
            self.shape,
            self.table.dtype.itemsize,
        )
        s.update(
            table=int(self.table.size),
            vidx=str(self.vidx.dtype),
            offs=str(self.offs.dtype),
        )
        return s


def _regroup(m, spb: int):
    width = np.asarray(m.seg_width)
    ptr = np.asarray(m.seg_ptr)
    nseg = -(-len(width) // spb) * spb
    width = np.concatenate([width, np.zeros(nseg - len(width), width.dtype)])
    ptr = np.concatenate([ptr, np.full(nseg + 1 - len(ptr), ptr[-1], ptr.dtype)])
    block = width.reshape(-1, spb).max(axis=1)
    info = m.lane_info
    if info is not None:  # the added segments: identity lanes, no steps
        S = m.seg_rows
        extra = np.tile(
            np.arange(S, dtype=np.uint8), nseg - len(np.asarray(m.seg_width))
        )
        info = jnp.asarray(np.concatenate([np.asarray(info), extra]))
    return dataclasses.replace(
        m,
        seg_ptr=jnp.asarray(ptr),
        seg_width=jnp.asarray(width),
        block_width=jnp.asarray(block),
        segs_per_block=int(spb),
        lane_info=info,
    )


def reference_spmv(matrix, x):
    """Plain-JAX `y = A x` for `WarpELL`/`CompactWarpELL` (the reference the
    Pallas kernels are tested against)."""
    data = matrix.data
    x = x.astype(data.dtype)
    prod = jnp.where(data == 0, 0, data * x[matrix.cols])
    return jax.ops.segment_sum(prod, matrix.rows, num_segments=matrix.shape[0])
