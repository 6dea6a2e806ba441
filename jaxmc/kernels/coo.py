"""Products with a matrix given as coordinates (entries `data` at `(rows,
cols)`, rows sorted): scatter-adds, for one-off products (residuals, a
tangent's `A' x`), never inside a loop (the loops' sweeps gather:
`jaxmc.kernels.sweep`)."""

from __future__ import annotations

import jax


def bcast(data, g):
    """`data` (`[nnz]` or `[nnz, k]`) shaped to multiply the gathered `g`."""
    return (
        data if data.ndim == g.ndim else data.reshape(data.shape + (1,) * (g.ndim - 1))
    )


def coo_spmv(data, rows, cols, n_rows: int, x):
    """`y = A x` for `A` given by entries `data` at `(rows, cols)`; `x` is
    `[n]` or `[n, k]` and `data` `[nnz]` or `[nnz, k]`. A scatter-add: used
    once per call (residuals, the JVP's `A' x`), never inside a loop."""
    g = x[cols]
    return jax.ops.segment_sum(
        bcast(data, g) * g, rows, num_segments=n_rows, indices_are_sorted=True
    )


def coo_spmv_t(data, pat: dict, n_cols: int, x):
    """`y = A^T x` through the precomputed transpose (sorted segments)."""
    return coo_spmv(data[pat["perm"]], pat["t_rows"], pat["t_cols"], n_cols, x)
