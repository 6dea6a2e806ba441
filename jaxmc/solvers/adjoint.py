"""Implicitly differentiated linear solves `(I - A) x = b`, on one vector
or a batch (`linear_solve`, `jacobi_solver`), and matrix-free ones by
GMRES (`implicit_gmres`).

Everything here works on one right-hand side (`x` of shape `[n]`) or on
many at once (`[n, k]`, with values `[nnz]` shared or `[nnz, k]` per
column): a batch of parameter points goes through the *same* gathers, one pass over
the matrix's indices for all columns.
The loops never scatter: every sweep, forward or transposed, one vector or
many, is a sequence of row gathers in a hybrid ELL layout
(`hybrid_ell`: slot-major ELL plus a few scatter-added overflow entries for
very long rows), because a scatter-add (`segment_sum`) is much slower than a
gather on a GPU. Under `jax.vmap` the Jacobi loop is not vmapped as is (that
runs a batched scatter per step): `jacobi_solver` is a `custom_vmap` whose
rule runs the explicit multi-vector iteration, batch axis last, with a
per-column convergence mask. Gradients are unaffected:
`custom_linear_solve` never differentiates its solver.

Failures: `linear_solve` returns a `Solution`, the status of the forward
solve (per point under `jax.vmap`) next to the values; the values of a
column that did not converge are NaN. The tangent and adjoint solves of
`jax.jvp`/`jax.grad` have no way out but their values: a column of theirs
that does not converge is NaN (so is the derivative).

`linear_solve` solves `(I - A) x = b` by multicolour Gauss-Seidel (Jacobi's
parallelism, at most Jacobi's iterations), over-relaxed with a guarded
automatic `w` (`jaxmc.solvers.sor`; fewer sweeps on slowly mixing chains),
wrapped in `lax.custom_linear_solve`, so its derivative is the
implicit-function theorem's: a tangent costs one more solve with the same
matrix, a cotangent one solve with `(I - A)^T` (the transposed structure is
precomputed on the host, the values are gathered). The forward
`lax.while_loop` is never differentiated. Given `relevance`, that cotangent
solve stops when the *gradient* has converged (`Relevance`: adjoint entries
weighted by the values their row's derivative multiplies) rather than when
every adjoint entry has, down to 1e-200 far from the initial state
(`benchmarks/grad.py` measures the adjoint's sweeps against the forward's).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kernels.coo import bcast, coo_spmv
from ..kernels.sweep import gs_sweep, make_sweep
from ..kernels.sweep_dia import dia_active
from ..layout.sweep import Pattern
from ..options import SolveOptions
from ._results import Solution, Status
from .sor import flag, iterate, shrinks, sor_shrinking


def _out(sol: Solution, from_p, batched=False):
    """A solver's outputs: the values in the caller's order (NaN where not
    converged), the status, iterations and residual (`[k]` each, batch
    last, when `batched`)."""
    x = from_p(flag(sol))
    if not batched:
        return x, sol.status, sol.iterations, sol.residual
    k = x.shape[-1]
    return (
        x.T,
        jnp.broadcast_to(sol.status, (k,)),
        jnp.broadcast_to(sol.iterations, (k,)),
        jnp.broadcast_to(sol.residual, (k,)),
    )


def jacobi_solver(n: int, eps, max_iters: int, bounds, omega=None, dia=None):
    """`jac(off, dg, rhs, order, lay, rows, classes, weights, rhs_rows) ->
    (x, status, iterations, residual)` with `x = (rhs + off x) / dg` by
    multicolour Gauss-Seidel (`gs_sweep`; plain Jacobi when there is one
    colour), stopped by `fixed_point_loop`'s criterion (`weights`, optional:
    its `Relevance` floor); `x` NaN if not converged.
    `rhs_rows` (optional): the rows where `rhs` can be non-zero (`gs_sweep`).
    Under `jax.vmap` it runs the explicit multi-vector iteration instead of
    vmapping the loop: the iterate is `[n, k]` with the batch axis last, the
    values `[nnz, k]` (or shared `[nnz]`), one gather over the shared column
    indices per slot and sweep, and a per-column convergence mask; where
    the SOR kernel runs, a batch halves its width as its columns converge
    (`sor_shrinking`). `dia` (static offsets): `lay` and `order` are the
    diagonal layout's (`dia_sweep`)."""

    @jax.custom_batching.custom_vmap
    def jac(off, dg, rhs, order, lay, rows, classes, weights, rhs_rows=None):
        sweep, to_p, from_p = make_sweep(off, dg, rhs, lay, order, bounds, n, dia=dia)
        wp = None if weights is None else to_p(weights)
        return _out(
            iterate(sweep, jnp.zeros_like(rhs), eps, max_iters, omega, wp), from_p
        )

    @jac.def_vmap
    def _rule(
        k, in_batched, off, dg, rhs, order, lay, rows, classes, weights, rhs_rows=None
    ):
        b_off, b_dg, b_rhs = in_batched[:3]
        if any(
            jax.tree_util.tree_leaves(in_batched[3:7] + in_batched[8:])
        ):  # a batched structure
            axes = tuple(
                jax.tree_util.tree_map(lambda b: 0 if b else None, b)
                for b in in_batched
            )
            return jax.vmap(jac.fun, in_axes=axes)(
                off, dg, rhs, order, lay, rows, classes, weights, rhs_rows
            ), (True,) * 4
        off = off.T if b_off else off  # [nnz, k] or [nnz]
        dg = dg.T if b_dg else dg  # [n, k] or [n]
        rhs = rhs.T if b_rhs else jnp.broadcast_to(rhs[:, None], (rhs.shape[0], k))
        if weights is not None and in_batched[7]:
            weights = weights.T  # [n, k]

        def run(cl):
            sweep, to_p, from_p = make_sweep(
                off, dg, rhs, lay, order, bounds, n, cl, rhs_rows, dia
            )
            wp = None if weights is None else to_p(weights)
            if dia is not None or not shrinks(k, omega):
                sol = iterate(sweep, jnp.zeros_like(rhs), eps, max_iters, omega, wp)
                return _out(sol, from_p, batched=True)

            def build(c):  # the sweep of columns `c` (None: all)
                if c is None:
                    return sweep

                def sub(a):
                    return a[:, c] if a.ndim == 2 else a

                cc = (
                    None
                    if cl is None
                    else {"cls": cl["cls"], "table": cl["table"][:, c]}
                )
                return gs_sweep(
                    sub(off), sub(dg), rhs[:, c], lay, order, bounds, n, cc, rhs_rows
                )[0]

            sol = sor_shrinking(build, jnp.zeros_like(rhs), eps, max_iters, omega, wp)
            return _out(sol, from_p, batched=True)

        if not classes or not b_off:
            return run(None), (True,) * 4
        # Per-point weights in classes: gather a [C, k] table per sweep
        # instead of [nnz, k] values, if the classes hold at these points
        # (checked exactly; else the plain path).
        d = dg if dg.ndim == 2 else dg[:, None]
        s = off / d[rows]
        table = s[classes["rep"]]
        ok = jnp.all(s == table[classes["cls"]])
        out = lax.cond(
            ok, lambda: run({"cls": classes["cls"], "table": table}), lambda: run(None)
        )
        return out, (True,) * 4

    return jac


def linear_solve(
    data,
    pat: Pattern,
    arrays: dict,
    b,
    opts: SolveOptions,
    classes=None,
    relevance=None,
    rhs_rows=None,
):
    """A `Solution` whose `value` is `x` with `x = A x + b`, i.e. `(I - A) x
    = b`, for `A` = `data` on `pat` (spectral radius < 1: the caller
    restricts `A` to the transient "maybe" states), NaN where the solve did
    not converge, and whose status, iterations and residual are the forward
    solve's (`jaxmc.solvers.sor`; per point under `jax.vmap`). The value is
    differentiable in `data` and `b` by the implicit function theorem.
    `arrays` are `pat.arrays` on the device; `classes` (optional,
    `{"cls": [nnz], "rep": [C]}`) guesses which entries have equal Jacobi
    weights `A[e] / (1 - A_ii)` at every parameter point (used, after an
    exact check, by batched forward solves).

    `relevance` (optional, `{"b_scale": [n], "offset": [n]}`) lets the
    adjoint solve of a gradient stop when the *gradient* has converged
    rather than every entry of the adjoint: a cotangent `g` of `x` reaches
    the parameters as `lam^T (dA x + db)` with `lam = (I - A)^-T g`, and
    row `s` of `dA x + db` is bounded by the values it multiplies, `w_s =
    max(b_scale_s, max_{c in row s} |offset_c + x_c|)` (times the
    parameters' relative sensitivities). So `w` weighs the adjoint's stop
    rule (`Relevance`): entries far from where the probability flows
    (adjoint entries of 1e-200, say) no longer hold up the loop. Without
    it (or for tangents: `jax.jvp`) every entry converges relative to
    itself. `offset`: what `x` is a correction to (e.g. the value-iteration
    result), so that `offset + x` are the values; `b_scale`: a bound on
    `|db_s|`'s scale (the values `b_s` is made of).

    `rhs_rows` (optional, int `[m]`, with `relevance`): the rows where `b`
    can be non-zero; batched forward solves on a GPU then read only those
    rows of it per sweep (`gs_sweep`). Tangent and adjoint solves, whose
    right-hand sides are dense, ignore it."""
    n = pat.shape[0]
    eps = jnp.asarray(opts.epsilon, jnp.float64)
    mi = opts.max_iters
    omega = getattr(opts, "omega", None)
    dia = pat.dia if pat.dia is not None and "dia" in arrays and dia_active() else None
    jacs = {
        False: jacobi_solver(n, opts.epsilon, mi, pat.bounds, omega, dia and dia[0]),
        True: jacobi_solver(n, opts.epsilon, mi, pat.bounds, omega, dia and dia[1]),
    }
    # Everything the solves read is passed explicitly (`st`), never closed
    # over: the custom JVP below must not capture traced arrays.
    st = {"arrays": arrays, "classes": classes or {}}

    def _solver(
        st, dat, r, c, transposed, rhs, cl, weights=None, rhs_rows=None, diag=None
    ):
        d = jax.lax.stop_gradient(dat)
        if diag is not None:  # (the same values as the scatter-add: one term per row)
            dg = (
                1.0 - jnp.concatenate([d, jnp.zeros((1,) + d.shape[1:], d.dtype)])[diag]
            )
        else:
            dg = 1.0 - jax.ops.segment_sum(
                jnp.where(bcast(r == c, d), d, 0.0), r, num_segments=n
            )
        off = jnp.where(bcast(r == c, d), 0.0, d)
        a = st["arrays"]
        if dia is not None:
            lay = a["dia"]["t" if transposed else "fwd"]
            order, offsets = lay["order"], dia[int(transposed)]
        else:
            lay, order, offsets = a["t_lay" if transposed else "lay"], a["order"], None
        if d.ndim > 1 or rhs.ndim > 1:  # explicit multi-vector call
            rhs = jnp.broadcast_to(rhs, dg.shape) if rhs.ndim < dg.ndim else rhs
            sweep, to_p, from_p = make_sweep(
                off, dg, rhs, lay, order, pat.bounds, n, dia=offsets
            )
            wp = None if weights is None else to_p(weights)  # [n] or [n, k]
            out = _out(iterate(sweep, jnp.zeros_like(rhs), eps, mi, omega, wp), from_p)
        else:
            out = jacs[transposed](off, dg, rhs, order, lay, r, cl, weights, rhs_rows)
        return out[0], out[1:]

    def pieces(st, dat, weights, rhs_rows=None):
        """`(matvec, solve, transpose_solve)` of `custom_linear_solve` for
        the values `dat` (the solves return `(x, (status, iterations,
        residual))`: `has_aux`); `weights` weigh the transposed solve's stop
        rule; `rhs_rows` (the primal solve only) the rows where `solve`'s
        right-hand side can be non-zero."""
        a = st["arrays"]
        rows, cols = a["rows"], a["cols"]

        def matvec(x):
            return x - coo_spmv(dat, rows, cols, n, x)

        def solve(_, rhs):
            return _solver(
                st,
                dat,
                rows,
                cols,
                False,
                rhs,
                st["classes"],
                None,
                rhs_rows,
                a.get("diag"),
            )

        def transpose_solve(_, rhs):
            return _solver(
                st,
                dat[a["perm"]],
                a["t_rows"],
                a["t_cols"],
                True,
                rhs,
                {},
                weights,
                None,
                a.get("t_diag"),
            )

        return matvec, solve, transpose_solve

    if relevance is None:
        matvec, solve, transpose_solve = pieces(st, data, None)
        x, aux = lax.custom_linear_solve(
            matvec, b, solve, transpose_solve, has_aux=True
        )
        return Solution(x, *aux)

    # The adjoint's weights depend on the solution, so the derivative is
    # written out: a custom JVP whose tangent solve, transposed by
    # `jax.grad`, is the weighted adjoint solve. The primal solve is the
    # one above.
    @jax.custom_jvp
    def solve_x(dat, rhs, rel, st):
        return pieces(st, dat, None, st.get("rhs_rows"))[1](None, rhs)

    @solve_x.defjvp
    def solve_x_jvp(primals, tangents):
        dat, rhs, rel, st = primals
        d_dat, d_rhs = tangents[:2]
        x, aux = solve_x(dat, rhs, rel, st)
        rows, cols = st["arrays"]["rows"], st["arrays"]["cols"]
        full = jnp.abs(rel["offset"] + x)
        w = jnp.maximum(
            rel["b_scale"],
            jax.ops.segment_max(
                full[cols], rows, num_segments=n, indices_are_sorted=True
            ),
        )
        matvec, solve, transpose_solve = pieces(st, dat, w)
        t = d_rhs + coo_spmv(d_dat, rows, cols, n, x)
        dx = lax.custom_linear_solve(
            matvec, t, _values_of(solve), _values_of(transpose_solve)
        )
        return (x, aux), (dx, jax.tree_util.tree_map(_zero_tangent, aux))

    rel = jax.tree_util.tree_map(
        lax.stop_gradient,
        {
            "b_scale": jnp.asarray(relevance["b_scale"], jnp.float64),
            "offset": jnp.asarray(relevance.get("offset", 0.0), jnp.float64)
            + jnp.zeros(n),
        },
    )
    if rhs_rows is not None:
        st = dict(st, rhs_rows=rhs_rows)
    x, aux = solve_x(data, b, rel, st)
    return Solution(x, *aux)


def _values_of(solve):
    """A solve of `pieces` without its status (the tangent and adjoint
    solves: their values are NaN where they fail)."""
    return lambda mv, rhs: solve(mv, rhs)[0]


def _zero_tangent(a):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return np.zeros(a.shape, jax.dtypes.float0)
    return jnp.zeros_like(a)


def implicit_gmres(matvec, rhs, tol: float, restart: int = 50, maxiter: int = 200):
    """A `Solution` whose value is `matvec^{-1} rhs`, by restarted GMRES
    (`jax.scipy.sparse.linalg.gmres`: `restart` Arnoldi steps per cycle,
    at most `maxiter` cycles, stopped at a residual of `tol |rhs|`),
    differentiable implicitly (GMRES for the primal, tangent and cotangent
    solves). Its status: NONFINITE where the solution is not finite,
    MAX_ITERS where the true residual `|matvec(x) - rhs|` (the residual, as
    a fraction of `|rhs|`, 2-norms) is above `GMRES_SLACK * tol` (GMRES's
    own test is on its recurrence, which rounding separates from the true
    residual), else CONVERGED; `iterations` is the bound on the Arnoldi
    steps (GMRES does not say how many it took)."""
    from jax.scipy.sparse.linalg import gmres

    def solve(mv, b):
        x, _ = gmres(mv, b, tol=tol, atol=0.0, restart=restart, maxiter=maxiter)
        return x

    x = lax.custom_linear_solve(matvec, rhs, solve, solve)
    res = lax.stop_gradient(
        jnp.linalg.norm(matvec(x) - rhs)
        / jnp.maximum(jnp.linalg.norm(rhs), jnp.finfo(rhs.dtype).tiny)
    )
    finite = jnp.all(jnp.isfinite(x))
    status = jnp.where(
        ~finite,
        Status.NONFINITE,
        jnp.where(res <= GMRES_SLACK * tol, Status.CONVERGED, Status.MAX_ITERS),
    ).astype(jnp.int32)
    return Solution(x, status, jnp.int32(restart * maxiter), res)


#: `implicit_gmres`: how far above `tol` the true relative residual may be.
GMRES_SLACK = 1e3
