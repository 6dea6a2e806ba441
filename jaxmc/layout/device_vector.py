"""The CSR-vector layout (`VectorCSR`) built on the device from device CSR
arrays: the same arrays, bit for bit, as `VectorCSR.from_csr`, with the
sizes padded to buckets as in `jaxmc.layout.device_warp` (a statistics
pass brings back the stored size, then one jitted placement)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .device_pad import bucket
from .device_warp import _entry_rows, _padded_csr
from .vector import VectorCSR, default_lanes


@functools.partial(jax.jit, static_argnames=("align",))
def _stored(row_ptr, *, align):
    lengths = (row_ptr[1:] - row_ptr[:-1]).astype(jnp.int64)
    return (-(-lengths // align) * align).sum()


@functools.partial(
    jax.jit, static_argnames=("lanes", "rpb", "align", "total", "vdtype")
)
def _vector_arrays(
    row_ptr, col, val, nrows, ncols, nnz, *, lanes, rpb, align, total, vdtype
):
    rb, eb = row_ptr.shape[0] - 1, col.shape[0]
    row_ptr = row_ptr.astype(jnp.int64)
    lengths = row_ptr[1:] - row_ptr[:-1]
    padded = -(-lengths // align) * align
    vptr = jnp.concatenate([jnp.zeros(1, jnp.int64), jnp.cumsum(padded)])
    nblocks = max(-(-rb // rpb), 1)
    steps = jnp.zeros(nblocks * rpb, jnp.int64).at[:rb].set(-(-padded // lanes))
    block_width = steps.reshape(nblocks, rpb).max(axis=1)
    rows = _entry_rows(row_ptr, eb)
    e = jnp.arange(eb, dtype=jnp.int64)
    pos = jnp.where(e < nnz, vptr[rows] + e - row_ptr[rows], total)
    slot = jnp.full(total, nnz, jnp.int64).at[pos].set(e, mode="drop")
    i = jnp.arange(total, dtype=jnp.int64)
    srow = _entry_rows(vptr, total)
    last = jnp.maximum(nrows - 1, 0)
    allrows = jnp.where(i < vptr[nrows], srow, last)
    cols = (
        jnp.minimum(allrows, ncols - 1).at[pos].set(col.astype(jnp.int64), mode="drop")
    )
    data = jnp.zeros(total, vdtype).at[pos].set(val.astype(vdtype), mode="drop")
    i32 = jnp.int32
    return dict(
        data=data,
        cols=cols.astype(i32),
        rows=allrows.astype(i32),
        slot=slot.astype(i32),
        row_ptr=vptr.astype(i32),
        block_width=block_width.astype(i32),
    )


def vector_from_device(
    row_ptr,
    col,
    val,
    shape,
    lanes=None,
    rows_per_block=None,
    align: int = 8,
    dtype=None,
) -> VectorCSR:
    """`VectorCSR.from_csr` of the CSR `(row_ptr, col, val)` (JAX arrays,
    or numpy), built on the device."""
    nrows, ncols = int(shape[0]), int(shape[1])
    nnz = int(col.shape[0])
    if lanes is None:  # (the mean row length: from the sizes alone)
        lanes = default_lanes(np.array([nnz / nrows]) if nrows else np.zeros(0))
    if lanes < 1 or lanes & (lanes - 1):
        raise ValueError(f"`lanes` must be a power of two, not {lanes}")
    rpb = rows_per_block or max(1, 128 // lanes)
    if rpb & (rpb - 1):
        raise ValueError(f"`rows_per_block` must be a power of two, not {rpb}")
    row_ptr, col, val, _, _ = _padded_csr(row_ptr, col, val)
    total = int(_stored(row_ptr, align=align)) + max(lanes, align)
    vdtype = np.dtype(val.dtype if dtype is None else dtype)
    arrays = _vector_arrays(
        row_ptr,
        col,
        val,
        nrows,
        ncols,
        nnz,
        lanes=lanes,
        rpb=rpb,
        align=align,
        total=bucket(total),
        vdtype=vdtype,
    )
    sizes = dict(row_ptr=nrows + 1, block_width=max(-(-nrows // rpb), 1))
    arrays = {k: v[: sizes.get(k, total)] for k, v in arrays.items()}
    return VectorCSR(
        **arrays,
        shape=(nrows, ncols),
        lanes=int(lanes),
        rows_per_block=int(rpb),
        nnz=nnz,
    )
