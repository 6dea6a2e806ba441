"""Multi-vector SpMV and implicitly differentiated linear solves.

Everything here works on one right-hand side (`x` of shape `[n]`) or on
many at once (`[n, k]`, with values `[nnz]` shared or `[nnz, k]` per
column): a batch of parameter points goes through the *same* gathers, one pass over
the matrix's indices for all columns.
The loops never scatter: every Jacobi step, forward or transposed, one
vector or many, is a sequence of row gathers in a hybrid ELL layout
(`hybrid_ell`: slot-major ELL plus a few scatter-added overflow entries for
very long rows), because a scatter-add (`segment_sum`) is ~13x slower than a
gather on a GPU. Under `jax.vmap` the Jacobi loop is not vmapped as is (that
runs a batched scatter per step): `_jacobi_solver` is a `custom_vmap` whose
rule runs the explicit multi-vector iteration, batch axis last, with a
per-column convergence mask. Gradients are unaffected:
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
    `(rows[e], cols[e])`, rows sorted. Precomputes the transpose permutation
    and, for both orientations, the gather layout of the Jacobi steps
    (`hybrid_ell`).
    """

    def __init__(self, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]):
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        self.shape = (int(shape[0]), int(shape[1]))
        perm = np.lexsort((rows, cols))
        ell, ovf = hybrid_ell(rows, self.shape[0])
        t_ell, t_ovf = hybrid_ell(cols[perm], self.shape[1])
        self.arrays = {
            "rows": rows.astype(np.int32),
            "cols": cols.astype(np.int32),
            "perm": perm.astype(np.int32),
            "t_rows": cols[perm].astype(np.int32),
            "t_cols": rows[perm].astype(np.int32),
            "ell": ell,
            "ovf": ovf,
            "t_ell": t_ell,
            "t_ovf": t_ovf,
        }


#: Relative cost of one scatter-added entry against one gathered ELL slot
#: when choosing the ELL width (a scatter-add is ~13x slower than a gather on
#: a GPU, ~2-4x on CPU).
SCATTER_COST = 4


def hybrid_ell(rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The hybrid ELL + COO layout ("HYB") of sorted `rows`.

    Returns `(ell, ovf)`: `ell` `[w, n]` holds, slot-major (column-major ELL:
    slot `j` of every row is contiguous, so that step `j` is one coalesced
    gather), the entry indices of the first `w` entries of each row, padded
    with `nnz` (a zero entry appended by the user); `ovf` `[m]` the entries
    beyond slot `w` (in row order), which are scatter-added. `w` is the
    longest row (no scatter at all) unless that pads the matrix more than
    4x; then `w` minimises `w n + SCATTER_COST m` (a few very long rows).

    Why: `segment_sum` is a scatter-add, ~13x slower than a gather on a GPU
    and slower on CPU too for `[nnz, k]` values (many right-hand sides)."""
    nnz = rows.size
    if nnz == 0 or n == 0:
        return np.zeros((0, n), np.int32), np.zeros(0, np.int32)
    counts = np.bincount(rows, minlength=n)
    w = int(counts.max())
    if w * n > 4 * (nnz + n):  # padding > 4x: move the long rows' tails out
        srt = np.sort(counts)
        cand = np.unique(np.concatenate([[0], srt]))
        # overflow(w) = sum over rows of max(count - w, 0)
        idx = np.searchsorted(srt, cand, side="right")
        tail = np.concatenate([np.cumsum(srt[::-1])[::-1], [0]])
        over = tail[idx] - cand * (n - idx)
        w = int(cand[np.argmin(cand * n + SCATTER_COST * over)])
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(nnz) - start[rows]
    inside = slot < w
    ell = np.full((w, n), nnz, np.int64)
    ell[slot[inside], rows[inside]] = np.flatnonzero(inside)
    return ell.astype(np.int32), np.flatnonzero(~inside).astype(np.int32)


def _bcast(data, g):
    return data if data.ndim == g.ndim else data.reshape(data.shape + (1,) * (g.ndim - 1))


def spmv(data, rows, cols, n_rows: int, x):
    """`y = A x` for `A` given by entries `data` at `(rows, cols)`; `x` is
    `[n]` or `[n, k]` and `data` `[nnz]` or `[nnz, k]`. A scatter-add: used
    once per call (residuals, the JVP's `A' x`), never inside a loop."""
    g = x[cols]
    return jax.ops.segment_sum(
        _bcast(data, g) * g, rows, num_segments=n_rows, indices_are_sorted=True
    )


def spmv_t(data, pat: dict, n_cols: int, x):
    """`y = A^T x` through the precomputed transpose (sorted segments)."""
    return spmv(data[pat["perm"]], pat["t_rows"], pat["t_cols"], n_cols, x)


def gather_matvec(data, rows, cols, ell, ovf, n: int):
    """`x -> A x` in the hybrid ELL layout of `hybrid_ell` (`ell` `[w, n]`,
    `ovf` `[m]`), for the loops: the values are laid out once, here, and each
    product is `w` row gathers `x[cols_j]` times values (no scatter) plus a
    scatter-add of the `m` overflow entries. `data` is `[nnz]` or `[nnz, k]`,
    `x` then `[n]` or `[n, k]` (one pass over the indices for all `k`
    columns: 4x faster on CPU than one `[w, n, k]` gather and sum, and ~10x
    less per column than `k` one-vector products)."""
    w = ell.shape[0]
    pad = jnp.zeros((1,) + data.shape[1:], data.dtype)
    vals = jnp.concatenate([data, pad])[ell]  # [w, n] or [w, n, k]
    ecols = jnp.concatenate([cols, jnp.zeros((1,), cols.dtype)])[ell]  # [w, n]
    o_vals, o_cols, o_rows = data[ovf], cols[ovf], rows[ovf]

    def ax(x):
        v = vals if data.ndim == x.ndim else vals[..., None]  # shared values, [n, k] iterate
        if w == 0:
            acc = jnp.zeros((n,) + x.shape[1:], x.dtype)
        elif w <= 32:
            acc = x[ecols[0]] * v[0]
            for j in range(1, w):
                acc = acc + x[ecols[j]] * v[j]
        else:
            acc = lax.fori_loop(1, w, lambda j, a: a + x[ecols[j]] * v[j], x[ecols[0]] * v[0])
        if ovf.shape[0]:
            g = x[o_cols]
            acc = acc + jax.ops.segment_sum(
                _bcast(o_vals, g) * g, o_rows, num_segments=n, indices_are_sorted=True
            )
        return acc

    return ax


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
    """`jac(off, dg, rhs, rows, cols, ell, ovf) -> x` with `x = (rhs + off
    x) / dg` by Jacobi in the hybrid ELL layout (`gather_matvec`; NaN if not
    converged). Under `jax.vmap` it runs the explicit multi-vector iteration
    instead of vmapping the loop: the iterate is `[n, k]` with the batch axis
    last, the values `[nnz, k]` (or shared `[nnz]`), one gather over the
    shared column indices per slot and step, and a per-column convergence
    mask."""

    @jax.custom_batching.custom_vmap
    def jac(off, dg, rhs, rows, cols, ell, ovf):
        ax = gather_matvec(off, rows, cols, ell, ovf, n)
        x, _, ok = _jacobi(lambda x: (rhs + ax(x)) / dg, jnp.zeros_like(rhs), eps, max_iters)
        return _flag(x, ok)

    @jac.def_vmap
    def _rule(k, in_batched, off, dg, rhs, rows, cols, ell, ovf):
        b_off, b_dg, b_rhs = in_batched[:3]
        if any(in_batched[3:]):  # a batched structure: plain vmap
            axes = tuple(0 if b else None for b in in_batched)
            return jax.vmap(jac.fun, in_axes=axes)(off, dg, rhs, rows, cols, ell, ovf), True
        off = off.T if b_off else off  # [nnz, k] or [nnz]
        dg = dg.T if b_dg else dg[:, None]  # [n, k] or [n, 1]
        rhs = rhs.T if b_rhs else jnp.broadcast_to(rhs[:, None], (rhs.shape[0], k))
        ax = gather_matvec(off, rows, cols, ell, ovf, n)
        x = _jacobi_columns(lambda x: (rhs + ax(x)) / dg, jnp.zeros_like(rhs), eps, max_iters)
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

    def _solver(dat, r, c, ell, ovf, rhs):
        d = jax.lax.stop_gradient(dat)
        dg = 1.0 - jax.ops.segment_sum(
            jnp.where(_bcast(r == c, d), d, 0.0), r, num_segments=n
        )
        off = jnp.where(_bcast(r == c, d), 0.0, d)
        if d.ndim > 1 or rhs.ndim > 1:  # explicit multi-vector call
            dg = dg if dg.ndim == rhs.ndim else dg.reshape(dg.shape + (1,) * (rhs.ndim - dg.ndim))
            ax = gather_matvec(off, r, c, ell, ovf, n)
            x, it, ok = _jacobi(lambda x: (rhs + ax(x)) / dg, jnp.zeros_like(rhs), eps, mi)
            return _flag(x, ok)
        return jac(off, dg, rhs, r, c, ell, ovf)

    def solve(_, rhs):
        return _solver(data, rows, cols, arrays["ell"], arrays["ovf"], rhs)

    def transpose_solve(_, rhs):
        perm = arrays["perm"]
        return _solver(
            data[perm], arrays["t_rows"], arrays["t_cols"], arrays["t_ell"], arrays["t_ovf"], rhs
        )

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
