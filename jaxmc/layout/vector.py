"""CSR-vector layout: a group of threads (a warp by default) per row, for
matrices with long rows.

The thread-per-row warp-segment layouts walk each row with one thread: a
row of 438 entries (herman N=15) is 438 dependent steps of one thread, and
32,768 such rows make only 1,024 segments, too few to fill a GPU. Here each
row is read `lanes` entries at a time by a group of threads: at step `j`,
lane `l` of row `r` is stored entry `row_ptr[r] + lanes * j + l`
(consecutive threads, consecutive entries: coalesced), and the partial sums
are added at the end. The kernel gives each thread a few consecutive lanes
(`num_warps` sets how many). By default `lanes` is the mean row length
rounded up to a power of two (32 to 1024), so most rows take one or two
steps: on herman N=15 each halving of the dependent steps a row was
measured faster, down to one step at 512 lanes (figures in the benchmark
notes, `benchmarks/`).

The storage is CSR with each row padded to a multiple of `align` entries
(zeros), so that every row starts on a 32-byte sector boundary of both the
values (float64: 4 per sector) and the columns (int32: 8 per sector); for
long rows the padding is negligible. Rows are grouped into kernel blocks of
`rows_per_block` rows; `block_width` holds each block's largest row in steps
(the kernel's loop bound).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .csr import CSR
from .stats import layout_stats


class VectorCSR(eqx.Module):
    """CSR padded per row to `align` entries, read a row per thread group.

    `slot` is the CSR entry of every stored entry (`nnz` for padding), for
    `with_values`; `rows` the row of every stored entry (reference path)."""

    data: Float[Array, " t"]
    cols: Int[Array, " t"]
    rows: Int[Array, " t"]
    slot: Int[Array, " t"]
    row_ptr: Int[Array, " r1"]
    block_width: Int[Array, " b"]
    shape: tuple[int, int] = eqx.field(static=True)
    lanes: int = eqx.field(static=True)
    rows_per_block: int = eqx.field(static=True)
    nnz: int = eqx.field(static=True)

    @property
    def block_rows(self) -> int:
        return self.rows_per_block

    @classmethod
    def from_csr(
        cls,
        csr: CSR,
        lanes: int | None = None,
        rows_per_block: int | None = None,
        align: int = 8,
        dtype=None,
    ) -> VectorCSR:
        if lanes is None:
            lanes = default_lanes(np.diff(np.asarray(csr.indptr, dtype=np.int64)))
        if lanes < 1 or lanes & (lanes - 1):
            raise ValueError(f"`lanes` must be a power of two, not {lanes}")
        rpb = rows_per_block or max(1, 128 // lanes)
        if rpb & (rpb - 1):
            raise ValueError(f"`rows_per_block` must be a power of two, not {rpb}")
        indptr = np.asarray(csr.indptr, dtype=np.int64)
        data = np.asarray(csr.data)
        nrows, ncols = int(csr.shape[0]), int(csr.shape[1])
        lengths = np.diff(indptr)
        padded = -(-lengths // align) * align
        row_ptr = np.concatenate([[0], np.cumsum(padded)])
        nblocks = max(-(-nrows // rpb), 1)
        steps = np.zeros(nblocks * rpb, dtype=np.int64)
        steps[:nrows] = -(-padded // lanes)
        block_width = steps.reshape(nblocks, rpb).max(axis=1)
        # One group of `lanes` at the end: reads past the last row stay in
        # bounds, and no array is empty.
        total = int(row_ptr[-1]) + max(lanes, align)
        rows = np.repeat(np.arange(nrows, dtype=np.int64), padded)
        k = np.arange(len(rows), dtype=np.int64) - row_ptr[rows]
        real = k < lengths[rows]
        pos = np.nonzero(real)[0]
        slot = np.full(total, len(data), dtype=np.int64)
        slot[pos] = np.arange(len(data))
        allrows = np.concatenate([rows, np.full(total - len(rows), max(nrows - 1, 0))])
        cols = np.minimum(allrows, ncols - 1)
        cols[pos] = np.asarray(csr.indices, dtype=np.int64)
        vals = np.zeros(total, dtype=data.dtype if dtype is None else dtype)
        vals[pos] = data
        return cls(
            data=jnp.asarray(vals),
            cols=jnp.asarray(cols, dtype=jnp.int32),
            rows=jnp.asarray(allrows, dtype=jnp.int32),
            slot=jnp.asarray(slot, dtype=jnp.int32),
            row_ptr=jnp.asarray(row_ptr, dtype=jnp.int32),
            block_width=jnp.asarray(block_width, dtype=jnp.int32),
            shape=(nrows, ncols),
            lanes=int(lanes),
            rows_per_block=int(rpb),
            nnz=len(data),
        )

    def with_tiling(self, lanes: int | None = None, rows_per_block: int | None = None):
        """The same stored entries read by `lanes` threads per row in blocks
        of `rows_per_block` rows (tuning knobs; no entry moves)."""
        lanes = lanes or self.lanes
        rpb = rows_per_block or self.rows_per_block
        if lanes & (lanes - 1) or rpb & (rpb - 1):
            raise ValueError("`lanes` and `rows_per_block` must be powers of two")
        ptr = np.asarray(self.row_ptr).astype(np.int64)
        nrows = self.shape[0]
        nblocks = max(-(-nrows // rpb), 1)
        steps = np.zeros(nblocks * rpb, dtype=np.int64)
        steps[:nrows] = -(-np.diff(ptr) // lanes)
        return dataclasses.replace(
            self,
            block_width=jnp.asarray(steps.reshape(nblocks, rpb).max(axis=1), jnp.int32),
            lanes=int(lanes),
            rows_per_block=int(rpb),
        )

    def with_values(self, vals: Float[Array, " nnz"]) -> VectorCSR:
        vals = jnp.asarray(vals)
        padded = jnp.append(vals, jnp.zeros((), vals.dtype))
        return eqx.tree_at(
            lambda m: m.data, self, padded[self.slot].astype(self.data.dtype)
        )

    def astype(self, dtype) -> VectorCSR:
        return eqx.tree_at(lambda m: m.data, self, self.data.astype(dtype))

    def stats(self) -> dict:
        stored = int(self.data.shape[0])
        mbytes = stored * (self.data.dtype.itemsize + 4) + self.row_ptr.size * 4
        return layout_stats(
            f"vector{self.lanes}",
            self.nnz,
            stored,
            mbytes,
            self.shape,
            self.data.dtype.itemsize,
        )


def default_lanes(lengths: np.ndarray) -> int:
    """Lanes per row step: the mean row length rounded up to a power of two,
    clamped to 32..1024."""
    mean = float(np.mean(lengths)) if len(lengths) else 1.0
    return int(min(1024, max(32, 1 << max(0, int(np.ceil(np.log2(max(mean, 1.0))))))))


def vector_reference_spmv(matrix: VectorCSR, x):
    """Plain-JAX `y = A x` for `VectorCSR` (padding is 0 and skipped)."""
    data = matrix.data
    x = x.astype(data.dtype)
    prod = jnp.where(data == 0, 0, data * x[matrix.cols])
    return jax.ops.segment_sum(prod, matrix.rows, num_segments=matrix.shape[0])
