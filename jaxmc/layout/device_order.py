"""`window_order` and the symmetric permutation `P A P^T` on the device:
the same order and the same CSR arrays, bit for bit, as
`jaxmc.layout.window_order` and `Permutation.csr(host=True)`, from device
CSR arrays (sizes padded to buckets as in `jaxmc.layout.device_warp`)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .csr import CSR
from .device_warp import _entry_rows, _padded_csr
from .order import Permutation


@functools.partial(jax.jit, static_argnames=("window",))
def _window_order(row_ptr, nrows, *, window):
    lengths = (row_ptr[1:] - row_ptr[:-1]).astype(jnp.int64)
    i = jnp.arange(lengths.shape[0], dtype=jnp.int64)
    top = lengths.max(initial=0) + 1
    # window first, longest first within it, then the old place (stable);
    # padding rows (past `nrows`) after every real one
    key = jnp.where(i < nrows, (i // window) * top + (top - 1 - lengths), -1)
    key = jnp.where(key < 0, jnp.iinfo(jnp.int64).max, key)
    return jnp.argsort(key, stable=True)


@jax.jit
def _permuted(row_ptr, col, val, order, nnz):
    rb, eb = row_ptr.shape[0] - 1, col.shape[0]
    row_ptr = row_ptr.astype(jnp.int64)
    lengths = row_ptr[1:] - row_ptr[:-1]
    inv = jnp.zeros(rb, jnp.int64).at[order].set(jnp.arange(rb, dtype=jnp.int64))
    ptr = jnp.concatenate([jnp.zeros(1, jnp.int64), jnp.cumsum(lengths[order])])
    e = jnp.arange(eb, dtype=jnp.int64)
    new_row = inv[_entry_rows(row_ptr, eb)]
    new_col = inv[col.astype(jnp.int64)]
    key = jnp.where(e < nnz, new_row * rb + new_col, jnp.iinfo(jnp.int64).max)
    perm = jnp.argsort(key, stable=True)
    return ptr, new_col[perm], val[perm]


def window_order_device(row_ptr, window: int) -> jax.Array:
    """`window_order`'s permutation (`order[i]`: the old row at place `i`)
    of the rows of `row_ptr`, on the device (int64)."""
    if window < 1:
        raise ValueError(f"`window` must be positive, not {window}")
    nrows = row_ptr.shape[0] - 1
    padded, _, _, _, _ = _padded_csr(row_ptr, row_ptr[:0], row_ptr[:0])
    return _window_order(padded, nrows, window=window)[:nrows]


def permute_device(row_ptr, col, val, order) -> tuple:
    """`(row_ptr, col, val)` of `P A P^T` for the square CSR `(row_ptr, col,
    val)` and the order `order` (the old row of each new place): columns
    sorted within rows; int32 indices, as `Permutation.csr(host=True)`."""
    nrows, nnz = row_ptr.shape[0] - 1, col.shape[0]
    row_ptr, col, val, _, _ = _padded_csr(row_ptr, col, val)
    rb = row_ptr.shape[0] - 1
    full = jnp.concatenate(
        [jnp.asarray(order, jnp.int64), jnp.arange(nrows, rb, dtype=jnp.int64)]
    )
    ptr, cols, vals = _permuted(row_ptr, col, val, full, nnz)
    return ptr[: nrows + 1].astype(jnp.int32), cols[:nnz].astype(jnp.int32), vals[:nnz]


def window_permuted(csr: CSR, window: int) -> tuple[Permutation, CSR]:
    """`(window_order(csr, window), P A P^T)` built on the device: the
    permutation on the host (the solve applies it to host vectors), the
    matrix a device `CSR`."""
    order = window_order_device(jnp.asarray(csr.indptr), window)
    ptr, cols, vals = permute_device(
        jnp.asarray(csr.indptr), jnp.asarray(csr.indices), jnp.asarray(csr.data), order
    )
    n = csr.shape[0]
    rows = _entry_rows(ptr, cols.shape[0]).astype(jnp.int32)
    B = CSR(data=vals, indices=cols, row_ids=rows, indptr=ptr, shape=(n, n))
    return Permutation(np.asarray(order)), B
