"""Multi-vector SpMV and implicitly differentiated linear solves.

Everything here works on one right-hand side (`x` of shape `[n]`) or on
many at once (`[n, k]`, with values `[nnz]` shared or `[nnz, k]` per
column): a batch of parameter points goes through the *same* gather
`x[cols]` and `segment_sum`, one pass over the matrix for all columns.
Under `jax.vmap` the Jacobi loop is not vmapped as is (that runs a batched
scatter-add per step, slow on CPU): `_jacobi_solver` is a `custom_vmap`
whose rule runs the explicit multi-vector iteration, batch axis last, in an
ELL layout, with a per-column convergence mask. Gradients are unaffected:
`custom_linear_solve` never differentiates its solver.

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
            "ell": _ell(rows, self.shape[0]),
            "t_ell": _ell(cols[perm], self.shape[1]),
        }


def _ell(rows: np.ndarray, n: int) -> np.ndarray:
    """ELL slots of sorted `rows`: `[n, w]` entry indices (`w` the longest
    row), padded with `nnz` (a zero entry appended by the user). Used by the
    multi-vector solve, where a gather + sum over a short axis is much
    cheaper than a scatter-add of `[nnz, k]` on CPU. `[n, 0]` when the rows
    are too skewed for a dense `w` (then the scatter path is used)."""
    nnz = rows.size
    counts = np.bincount(rows, minlength=n) if nnz else np.zeros(n, np.int64)
    w = int(counts.max()) if nnz else 0
    if nnz == 0 or w * n > 4 * nnz + 4 * n:
        return np.zeros((n, 0), np.int32)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(nnz) - start[rows]
    ell = np.full((n, w), nnz, np.int64)
    ell[rows, slot] = np.arange(nnz)
    return ell.astype(np.int32)


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


def _jacobi_columns(step, x0, eps, max_iters):
    """`_jacobi` for `x0` of shape `[n, k]`: each column has its own
    convergence flag and stops changing once converged (so it ends exactly
    where a single-vector `_jacobi` would); the loop runs until every column
    has converged or `max_iters`. Returns `x` with non-converged columns NaN.
    """

    def cond(c):
        _, it, done = c
        return (~jnp.all(done)) & (it < max_iters)

    def body(c):
        x, it, done = c
        x1 = step(x)
        x2 = step(x1)
        d = jnp.abs(x2 - x1)
        ok = jnp.all(d <= eps * jnp.maximum(jnp.abs(x2), 1e-300), axis=0) & jnp.all(
            jnp.isfinite(x2), axis=0
        )
        return jnp.where(done, x, x2), it + 2, done | ok

    done0 = jnp.zeros(x0.shape[1:], bool)
    x, _, done = lax.while_loop(cond, body, (x0, jnp.zeros((), jnp.int32), done0))
    return jnp.where(done, x, jnp.nan)


def _jacobi_solver(n: int, eps, max_iters: int):
    """`jac(off, dg, rhs, rows, cols, ell) -> x` with `x = (rhs + off x) / dg`
    by Jacobi (NaN if not converged). Under `jax.vmap` it runs the explicit
    multi-vector iteration instead of vmapping the loop: the iterate is
    `[n, k]` with the batch axis last, the values `[nnz, k]` (or shared
    `[nnz]`), one gather over the shared column indices per step (ELL
    layout when the rows are not too skewed, else `segment_sum`), and a
    per-column convergence mask."""

    @jax.custom_batching.custom_vmap
    def jac(off, dg, rhs, rows, cols, ell):
        x, _, ok = _jacobi(lambda x: (rhs + spmv(off, rows, cols, n, x)) / dg, jnp.zeros_like(rhs), eps, max_iters)
        return _flag(x, ok)

    @jac.def_vmap
    def _rule(k, in_batched, off, dg, rhs, rows, cols, ell):
        b_off, b_dg, b_rhs, b_rows, b_cols, b_ell = in_batched
        if b_rows or b_cols or b_ell:  # a batched structure: plain vmap
            axes = tuple(0 if b else None for b in in_batched)
            return jax.vmap(jac.fun, in_axes=axes)(off, dg, rhs, rows, cols, ell), True
        off = off.T if b_off else off  # [nnz, k] or [nnz]
        dg = dg.T if b_dg else dg[:, None]  # [n, k] or [n, 1]
        rhs = rhs.T if b_rhs else jnp.broadcast_to(rhs[:, None], (rhs.shape[0], k))
        if ell.shape[1] > 0:
            # Slot-major ELL: for each slot j one row gather x[cols_j] of
            # [n, k] times its values (4x faster on CPU than one [n, w, k]
            # gather and sum; ~10x less per point than the 1-vector SpMV).
            pad = jnp.zeros((1,) + off.shape[1:], off.dtype)
            vals = jnp.concatenate([off, pad])[ell.T]  # [w, n, k] or [w, n]
            vals = vals if vals.ndim == 3 else vals[..., None]
            ecols = jnp.concatenate([cols, jnp.zeros((1,), cols.dtype)])[ell.T]  # [w, n]
            w = ell.shape[1]

            def ax(x):
                if w <= 32:
                    acc = x[ecols[0]] * vals[0]
                    for j in range(1, w):
                        acc = acc + x[ecols[j]] * vals[j]
                    return acc
                return lax.fori_loop(
                    1, w, lambda j, a: a + x[ecols[j]] * vals[j], x[ecols[0]] * vals[0]
                )

            def step(x):
                return (rhs + ax(x)) / dg
        else:
            def step(x):
                return (rhs + spmv(off, rows, cols, n, x)) / dg

        x = _jacobi_columns(step, jnp.zeros_like(rhs), eps, max_iters)
        return x.T, True

    return jac


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

    jac = _jacobi_solver(n, opts.epsilon, mi)

    def _solver(dat, r, c, ell, rhs):
        d = jax.lax.stop_gradient(dat)
        dg = 1.0 - jax.ops.segment_sum(
            jnp.where(_bcast(r == c, d), d, 0.0), r, num_segments=n
        )
        off = jnp.where(_bcast(r == c, d), 0.0, d)
        if d.ndim > 1 or rhs.ndim > 1:  # explicit multi-vector call
            dg = dg if dg.ndim == rhs.ndim else dg.reshape(dg.shape + (1,) * (rhs.ndim - dg.ndim))
            x, it, ok = _jacobi(lambda x: (rhs + spmv(off, r, c, n, x)) / dg, jnp.zeros_like(rhs), eps, mi)
            return _flag(x, ok)
        return jac(off, dg, rhs, r, c, ell)

    def solve(_, rhs):
        return _solver(data, rows, cols, arrays["ell"], rhs)

    def transpose_solve(_, rhs):
        perm = arrays["perm"]
        return _solver(data[perm], arrays["t_rows"], arrays["t_cols"], arrays["t_ell"], rhs)

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
