"""Multi-vector SpMV and implicitly differentiated linear solves.

Everything here works on one right-hand side (`x` of shape `[n]`) or on
many at once (`[n, k]`, with values `[nnz]` shared or `[nnz, k]` per
column): a batch of parameter points goes through the *same* gather
`x[cols]` and `segment_sum`, one pass over the matrix for all columns.
Under `jax.vmap` the same code batches along a leading axis instead; it is
still one gather per step, never one launch per point.

`solve(system, b)` solves `(I - A) x = b` by Jacobi and is wrapped in
`lax.custom_linear_solve`, so its derivative is the implicit-function
theorem's: a tangent costs one more solve with the same matrix, a cotangent
one solve with `(I - A)^T` (the transposed structure is precomputed on the
host, the values are gathered). The forward `lax.while_loop` is never
differentiated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..errors import ConvergenceError


class Pattern:
    """The sparsity of a square-ish matrix on the host: entry `e` is at
    `(rows[e], cols[e])`, rows sorted. Precomputes the transpose permutation.
    """

    def __init__(self, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]):
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        self.shape = (int(shape[0]), int(shape[1]))
        perm = np.lexsort((rows, cols))
        self.arrays = {
            "rows": rows.astype(np.int32),
            "cols": cols.astype(np.int32),
            "perm": perm.astype(np.int32),
            "t_rows": cols[perm].astype(np.int32),
            "t_cols": rows[perm].astype(np.int32),
        }


def _bcast(data, g):
    return data if data.ndim == g.ndim else data.reshape(data.shape + (1,) * (g.ndim - 1))


def spmv(data, rows, cols, n_rows: int, x):
    """`y = A x` for `A` given by entries `data` at `(rows, cols)`; `x` is
    `[n]` or `[n, k]` and `data` `[nnz]` or `[nnz, k]`."""
    g = x[cols]
    return jax.ops.segment_sum(
        _bcast(data, g) * g, rows, num_segments=n_rows, indices_are_sorted=True
    )


def spmv_t(data, pat: dict, n_cols: int, x):
    """`y = A^T x` through the precomputed transpose (sorted segments)."""
    return spmv(data[pat["perm"]], pat["t_rows"], pat["t_cols"], n_cols, x)


def _col_max(v):
    a = jnp.abs(v)
    return jnp.max(a, axis=0) if a.ndim else a


def _jacobi(step, x0, eps, max_iters):
    """Iterate `x <- step(x)` until every entry changes by at most `eps`
    relative to itself (PRISM's relative criterion, so that small values,
    such as a tiny probability at the initial state, are accurate too;
    entries below 1e-300 count as converged), or `max_iters`. Returns
    `(x, iterations, converged)`."""

    def cond(c):
        _, it, done = c
        return (~done) & (it < max_iters)

    def body(c):
        x, it, _ = c
        x1 = step(x)
        x2 = step(x1)
        d = jnp.abs(x2 - x1)
        ok = jnp.all(d <= eps * jnp.maximum(jnp.abs(x2), 1e-300)) & jnp.all(jnp.isfinite(x2))
        return x2, it + 2, ok

    x, it, ok = lax.while_loop(cond, body, (x0, jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    return x, it, ok


class Options:
    """Tolerance and iteration limit of the differentiable path. The
    default is much tighter than PRISM's 1e-6: derivatives inherit the
    solver's error, and finite-difference checks need ~1e-10."""

    def __init__(self, epsilon: float = 1e-12, max_iters: int = 200_000):
        self.epsilon = float(epsilon)
        self.max_iters = int(max_iters)


def linear_solve(data, pat: Pattern, arrays: dict, b, opts: Options):
    """`x` with `x = A x + b`, i.e. `(I - A) x = b`, for `A` = `data` on
    `pat` (spectral radius < 1: the caller restricts `A` to the transient
    "maybe" states). Differentiable in `data` and `b` by the implicit function
    theorem. `arrays` are `pat.arrays` on the device."""
    n = pat.shape[0]
    rows, cols = arrays["rows"], arrays["cols"]
    on_diag = rows == cols
    eps = jnp.asarray(opts.epsilon, jnp.float64)
    mi = opts.max_iters

    def matvec(x):
        return x - spmv(data, rows, cols, n, x)

    def _solver(dat, r, c, rhs):
        d = jax.lax.stop_gradient(dat)
        dg = 1.0 - jax.ops.segment_sum(
            jnp.where(_bcast(r == c, d), d, 0.0), r, num_segments=n
        )
        off = jnp.where(_bcast(r == c, d), 0.0, d)
        dg = dg if dg.ndim == rhs.ndim else dg.reshape(dg.shape + (1,) * (rhs.ndim - dg.ndim))
        x, it, ok = _jacobi(lambda x: (rhs + spmv(off, r, c, n, x)) / dg, jnp.zeros_like(rhs), eps, mi)
        x = _flag(x, ok)
        return x

    def solve(_, rhs):
        return _solver(data, rows, cols, rhs)

    def transpose_solve(_, rhs):
        perm = arrays["perm"]
        return _solver(data[perm], arrays["t_rows"], arrays["t_cols"], rhs)

    del on_diag
    return lax.custom_linear_solve(matvec, b, solve, transpose_solve)


def _flag(x, ok):
    """NaN out a solution that did not converge (the caller raises
    `ConvergenceError` on NaN results outside of tracing)."""
    return jnp.where(ok, x, jnp.nan)


def raise_if_nan(value, what: str = "the solver") -> None:
    """Host check after a concrete call."""
    try:
        v = np.asarray(value)
    except Exception:  # a tracer: nothing to check
        return
    if np.any(np.isnan(v)):
        raise ConvergenceError(
            f"{what} did not converge (or produced NaN)",
            hint="raise `max_iters`, loosen `epsilon`, or check that the parameter "
            "point gives a valid model",
        )
