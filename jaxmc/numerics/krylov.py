"""Krylov solvers on the device (restarted GMRES, BiCGStab) for the linear
systems of steady-state analysis (`jaxmc.numerics.steady`, which says when
it uses which), with the SpMV on any `jaxmc.layout` matrix (the
warp-segment Pallas kernel on a GPU).

The systems are `(I - A) x = b` with `A` sparse, some rows optionally
replaced by a normalisation `sum_{s in group g} w_s x_s` (one per BSCC): those
rows are dense, so they are not stored in the layout but computed by a
reduction beside the SpMV (`Operator`).

Why Krylov methods and not the stationary iterations of `jaxmc.solvers`: on
slowly mixing chains a Jacobi or power iteration stopped by PRISM's
relative-step criterion can be orders of magnitude further from the
solution than epsilon (see `steady.py`), and it may need 10^5 steps or never
converge (cluster N=256). Both methods here report the true residual, a
bound on what is left, and nothing of size n leaves the device during a
solve. `jaxmc.solvers.bicgstab` cannot be used as is: its operator is
`diag x - A x`, with no room for the dense normalisation rows.

GMRES: Arnoldi by modified Gram-Schmidt, the least-squares problem by Givens
rotations (so the residual norm is known at every step and a cycle stops as
soon as it is small enough), and the true residual recomputed after every
cycle, which is what the convergence test uses. `iterations` counts the
Arnoldi steps (one SpMV each; plus one per cycle for the true residual).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from ..kernels.spmv import spmv
from ..solvers import RUNNING, Solution, Status, bicgstab_loop, check_solution


class Operator(eqx.Module):
    """`x -> x - A x`, except in the rows where `norm` is set, which hold
    `sum_{s: group[s] = group[r]} weight[s] x[s]` (rows `r` with `norm[r]`)."""

    A: object
    norm: Bool[Array, " n"] | None = None
    group: Int[Array, " n"] | None = None
    weight: Float[Array, " n"] | None = None
    n_groups: int = eqx.field(static=True, default=0)

    def __call__(self, x):
        y = x - spmv(self.A, x).astype(x.dtype)
        if self.norm is None:
            return y
        wx = self.weight * x
        if self.n_groups == 1:
            # A tree reduction: its rounding grows with log(n), where the
            # scatter-add of `segment_sum` may grow with n (8M-state BSCCs).
            sums = jnp.sum(wx)[None]
        else:
            sums = jax.ops.segment_sum(wx, self.group, num_segments=self.n_groups)
        return jnp.where(self.norm, sums[self.group], y)


def _norm(v):
    return jnp.sqrt(jnp.vdot(v, v).real)


@eqx.filter_jit
def _gmres(op, b, x0, rtol, max_iters, restart: int):
    m = restart
    n = b.shape[0]
    dt = b.dtype
    tol = rtol * _norm(b)

    def cycle(carry):
        x, it, _, _ = carry
        r = b - op(x)
        beta = _norm(r)
        V = jnp.zeros((m + 1, n), dt).at[0].set(r / jnp.where(beta > 0, beta, 1.0))
        g = jnp.zeros(m + 1, dt).at[0].set(beta)
        H = jnp.zeros((m + 1, m), dt)
        cs = jnp.zeros(m, dt)
        sn = jnp.zeros(m, dt)

        def cond(c):
            j, _, _, _, _, g = c
            return (j < m) & (jnp.abs(g[j]) > tol) & (it + j < max_iters)

        def body(c):
            j, V, H, cs, sn, g = c
            w = op(V[j])

            def mgs(i, wh):
                w, h = wh
                hi = jnp.vdot(V[i], w)
                return w - hi * V[i], h.at[i].set(hi)

            w, h = lax.fori_loop(0, j + 1, mgs, (w, jnp.zeros(m + 1, dt)))
            hn = _norm(w)
            V = V.at[j + 1].set(w / jnp.where(hn > 0, hn, 1.0))
            h = h.at[j + 1].set(hn)

            def rotate(i, h):
                a, c2 = h[i], h[i + 1]
                return (
                    h.at[i]
                    .set(cs[i] * a + sn[i] * c2)
                    .at[i + 1]
                    .set(-sn[i] * a + cs[i] * c2)
                )

            h = lax.fori_loop(0, j, rotate, h)
            a, c2 = h[j], h[j + 1]
            den = jnp.hypot(a, c2)
            safe = jnp.where(den > 0, den, 1.0)
            c_, s_ = (
                jnp.where(den > 0, a / safe, 1.0),
                jnp.where(den > 0, c2 / safe, 0.0),
            )
            h = h.at[j].set(den).at[j + 1].set(0.0)
            g = g.at[j + 1].set(-s_ * g[j]).at[j].set(c_ * g[j])
            return j + 1, V, H.at[:, j].set(h), cs.at[j].set(c_), sn.at[j].set(s_), g

        j, V, H, _, _, g = lax.while_loop(
            cond, body, (jnp.zeros((), jnp.int32), V, H, cs, sn, g)
        )
        used = jnp.arange(m) < j
        R = jnp.where(used[:, None] & used[None, :], H[:m, :m], jnp.eye(m, dtype=dt))
        # Unused columns are the identity; a zero pivot (exact breakdown)
        # cannot happen on a used column of a nonsingular system.
        y = jax.scipy.linalg.solve_triangular(
            R, jnp.where(used, g[:m], 0.0), lower=False
        )
        x = x + V[:m].T @ y
        it = it + j
        res = _norm(b - op(x))
        status = jnp.where(
            ~jnp.all(jnp.isfinite(x)),
            Status.NONFINITE,
            jnp.where(
                res <= tol,
                Status.CONVERGED,
                jnp.where(
                    it >= max_iters,
                    Status.MAX_ITERS,
                    jnp.where(j == 0, Status.BREAKDOWN, RUNNING),
                ),
            ),
        ).astype(jnp.int32)
        return x, it, res, status

    res0 = _norm(b - op(x0))
    s0 = jnp.where(res0 <= tol, Status.CONVERGED, RUNNING).astype(jnp.int32)
    x, it, res, status = lax.while_loop(
        lambda c: c[3] == RUNNING, cycle, (x0, jnp.zeros((), jnp.int32), res0, s0)
    )
    return Solution(
        value=x,
        status=status,
        iterations=it,
        residual=res / jnp.where(tol > 0, tol / rtol, 1.0),
    )


def gmres(
    op: Operator, b, x0=None, *, rtol=1e-13, restart=40, max_iters=10000, throw=False
) -> Solution:
    """Restarted GMRES for `op(x) = b` on the device.

    **Arguments:**
    - `op`: an `Operator` (its matrix in any `jaxmc.layout`).
    - `b`, `x0`: right-hand side and start vector (default 0).
    - `rtol`: stop when `||b - op(x)||_2 <= rtol ||b||_2` (true residual).
    - `restart`: Krylov vectors per cycle (memory: `restart + 1` vectors).
    - `max_iters`: Arnoldi steps in all.
    - `throw`: raise `ConvergenceError` unless converged.

    **Returns:** a `jaxmc.solvers.Solution`; `residual` is the relative
    residual `||b - op(x)|| / ||b||`.
    """
    b = jnp.asarray(b, jnp.float64)
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, jnp.float64)
    sol = _gmres(
        op,
        b,
        x0,
        jnp.asarray(rtol, b.dtype),
        jnp.asarray(max_iters, jnp.int32),
        int(restart),
    )
    return check_solution(sol, throw, "GMRES")


@eqx.filter_jit
def _bicgstab(op, b, x0, rtol, max_iters, shadow):
    tol = rtol * _norm(b)
    sol = bicgstab_loop(op, b, x0, tol, max_iters, _norm, shadow)
    true = _norm(b - op(sol.value)) / jnp.where(tol > 0, tol / rtol, 1.0)
    return Solution(
        value=sol.value, status=sol.status, iterations=sol.iterations, residual=true
    )


def bicgstab(
    op: Operator, b, x0=None, *, rtol=1e-13, max_iters=10000, shadow=None, throw=False
) -> Solution:
    """BiCGStab for `op(x) = b` on the device, stopped when its recursive
    residual is below `rtol ||b||_2`. `residual` is the *true* relative
    residual of the result, which rounding may leave well above `rtol`:
    the caller decides whether that is good enough. `iterations` counts
    BiCGStab iterations (two SpMVs each). `shadow`: the shadow residual
    (default: the initial residual)."""
    b = jnp.asarray(b, jnp.float64)
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, jnp.float64)
    sol = _bicgstab(
        op,
        b,
        x0,
        jnp.asarray(rtol, b.dtype),
        jnp.asarray(max_iters, jnp.int32),
        None if shadow is None else jnp.asarray(shadow, b.dtype),
    )
    return check_solution(sol, throw, "BiCGStab")
