"""Linear-system solvers for `(D - A) x = b`, the form that reachability
takes in model checking: for a DTMC, `x = P x + b` on the "maybe" states
(rows of the other states masked to zero by the caller) is `D = 1`, `A = P`;
Jacobi splits off the diagonal, `D = 1 - P_ii` and `A = P` without it.

All loops are `lax.while_loop`s under `eqx.filter_jit`. Fixed-point methods
do two (fused Pallas path: sixteen) steps per trip so the iterate ping-pongs
between buffers instead of being copied, and test PRISM's criterion
(`sup_norm`) on every step (fused Pallas path: on each trip's last step).
Hyperparameters `epsilon` and `max_iters` are traced, `relative` is static:
changing any numeric input, or the tolerances, does not recompile.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jax import lax

from ..kernels import sharded_fused
from ..kernels.fused import jacobi_step, power_step
from ..kernels.spmv import spmv, use_pallas
from ..layout import CompactVector
from ._results import RUNNING, Solution, Status, check_solution, next_status, sup_norm
from .progress import report


def fixed_point(
    step,
    x0,
    epsilon,
    relative: bool,
    max_iters,
    *,
    fused=False,
    steps_per_trip=2,
    plain_step=None,
) -> Solution:
    """Iterate `x <- step(x)` from `x0` until PRISM's criterion
    `sup_norm(x', x) < epsilon` holds, or `max_iters` steps. Two steps per loop
    trip. Must be called under `jit` (it is, by the public solvers).

    With `fused=True`, `step` returns `(x', sup_norm(x', x), all finite)`
    itself (see `fixed_point_fused`, also for `plain_step`)."""
    if fused:
        return fixed_point_fused(
            step, x0, epsilon, max_iters, steps_per_trip, plain_step
        )

    def step3(x):
        x1 = step(x)
        return x1, sup_norm(x1, x, relative), jnp.all(jnp.isfinite(x1))

    return fixed_point_fused(step3, x0, epsilon, max_iters)


def fixed_point_fused(
    step, x0, epsilon, max_iters, steps_per_trip: int = 2, plain_step=None
) -> Solution:
    """`fixed_point` for a step that returns `(x', sup_norm(x', x), all
    finite)` itself, as the fused kernels of `jaxmc.kernels.fused` do in one
    pass over the matrix and vectors. `steps_per_trip` steps are done per
    loop trip (at least 2, so the iterate ping-pongs instead of being
    copied); the criterion is tested on every step, and the loop stops after
    the trip in which it held. More steps per trip spread the loop's fixed
    cost (the condition's round trip to the host) over more steps.

    With `plain_step` (`x -> x'`, no measure), the first `steps_per_trip - 1`
    steps of a trip use it and only the trip's last step is measured: the
    loop stops at the first trip end whose last step meets the criterion, so
    the returned iterate carries PRISM's guarantee (`sup_norm(x, x_prev) <
    epsilon` for the step that produced it), and the steps in between skip
    the measure's extra read of `x` and its reduction."""
    k = max(int(steps_per_trip), 2)

    def cond(c):
        return c[3] == RUNNING

    def body(c):
        x, it, _, _ = c
        diff = jnp.asarray(jnp.inf, x.dtype)
        finite = jnp.asarray(True)
        for i in range(k):
            if plain_step is not None and i < k - 1:
                x = plain_step(x)
                continue
            x, d, f = step(x)
            diff = jnp.minimum(diff, d)
            finite = finite & f
        it = it + k
        status = next_status(x, diff, it, epsilon, max_iters, finite=finite)
        report(it, d, x.shape[0], k)
        return x, it, d, status

    init = (
        x0,
        jnp.zeros((), jnp.int32),
        jnp.asarray(jnp.inf, x0.dtype),
        jnp.where(max_iters <= 0, Status.MAX_ITERS, RUNNING).astype(jnp.int32),
    )
    x, it, res, status = lax.while_loop(cond, body, init)
    return Solution(value=x, status=status, iterations=it, residual=res)


#: Steps per loop trip of the fused Pallas path (the reference path keeps 2,
#: PRISM's iteration counts up to one step). More steps per trip are faster
#: per step (only the last step of a trip is measured, and the loop's
#: per-trip cost is spread; `benchmarks/RESULTS.md`, steps per trip); the
#: price is up to 15 steps past PRISM's stopping point.
PALLAS_STEPS_PER_TRIP = 16

#: Where the fused Pallas path measures convergence: "last" (the last step of
#: each trip; see `fixed_point_fused`) or "every" step. The reference path
#: always measures every step.
PALLAS_MEASURE = "last"


def _kernel(A) -> bool:
    """Whether `A`'s fused steps are the Pallas kernel (one device's, or
    each device's of an extended partition)."""
    if sharded_fused.is_extended(A):
        return sharded_fused.uses_pallas(A)
    return use_pallas(A, "auto")


def _trip(A, steps_per_trip=None) -> int:
    if steps_per_trip is not None:
        return int(steps_per_trip)
    return PALLAS_STEPS_PER_TRIP if _kernel(A) else 2


def _plain(A, measure, f):
    """The unmeasured step for `fixed_point_fused`, or None."""
    m = measure or (PALLAS_MEASURE if _kernel(A) else "every")
    if m not in ("every", "last"):
        raise ValueError(f"`measure` must be 'every' or 'last', not {m!r}")
    return (lambda x: f(x)[0]) if m == "last" else None


def _vec(v):
    if v is None or isinstance(v, CompactVector):
        return v
    return jnp.asarray(v)


def _extended(A, epilogue, b, inv, x0, epsilon, max_iters, relative, trip, measure):
    """Jacobi or power iteration on an extended partition
    (`jaxmc.kernels.sharded_fused`): the iterate, `b` and `inv` extended
    (halo entries of `b` 0, of `inv` 1), the same loop, the states' entries
    of the result."""
    ext = sharded_fused.extend
    dense = [v.dense() if isinstance(v, CompactVector) else v for v in (b, inv)]
    be, ie = (None if v is None else ext(A, v, f) for v, f in zip(dense, (0.0, 1.0)))

    def step(x, measure=True):
        return sharded_fused.step(A, be, ie, x, epilogue, relative, measure)

    sol = fixed_point(
        step,
        ext(A, x0),
        epsilon,
        relative,
        max_iters,
        fused=True,
        steps_per_trip=_trip(A, trip),
        plain_step=_plain(A, measure, lambda x: step(x, measure=False)),
    )
    return eqx.tree_at(lambda s: s.value, sol, sharded_fused.restrict(A, sol.value))


@eqx.filter_jit
def _jacobi(A, diag, b, x0, epsilon, max_iters, relative, trip=None, measure=None):
    # The diagonal is inverted once; a compact diagonal only in its table.
    inv = diag.map(lambda t: 1.0 / t) if isinstance(diag, CompactVector) else 1.0 / diag
    if sharded_fused.is_extended(A):
        args = (b, inv, x0, epsilon, max_iters, relative, trip, measure)
        return _extended(A, "jacobi", *args)
    plain = _plain(
        A, measure, lambda x: jacobi_step(A, inv, b, x, relative, measure=False)
    )
    return fixed_point(
        lambda x: jacobi_step(A, inv, b, x, relative),
        x0,
        epsilon,
        relative,
        max_iters,
        fused=True,
        steps_per_trip=_trip(A, trip),
        plain_step=plain,
    )


@eqx.filter_jit
def _power(A, b, x0, epsilon, max_iters, relative, trip=None, measure=None):
    if sharded_fused.is_extended(A):
        args = (b, None, x0, epsilon, max_iters, relative, trip, measure)
        return _extended(A, "power", *args)
    plain = _plain(A, measure, lambda x: power_step(A, b, x, relative, measure=False))
    return fixed_point(
        lambda x: power_step(A, b, x, relative),
        x0,
        epsilon,
        relative,
        max_iters,
        fused=True,
        steps_per_trip=_trip(A, trip),
        plain_step=plain,
    )


def _args(epsilon, max_iters, dtype=jnp.float64):
    return jnp.asarray(epsilon, dtype), jnp.asarray(max_iters, jnp.int32)


def jacobi(
    A,
    diag,
    b,
    x0,
    *,
    epsilon=1e-6,
    relative=True,
    max_iters=10000,
    throw=True,
    steps_per_trip=None,
    measure=None,
) -> Solution:
    """Jacobi iteration `x' = (b + A x) / diag` for `(diag - A) x = b`.

    **Arguments:**
    - `A`: off-diagonal part (a `jaxmc.layout` matrix), usually nonnegative.
      On a GPU a warp-segment layout (`"warp"`, `"compact"`, ...) runs the
      fused Pallas step (SpMV, update and convergence measure in one pass).
    - `diag`: the diagonal of the system, `1 - P_ii` (nonzero); an array or a
      `jaxmc.layout.CompactVector`.
    - `b`, `x0`: right-hand side (array, `CompactVector`, or `None` for zero:
      the steady-state system, whose fused step then reads no `b`) and start
      vector.
    - `epsilon`, `relative`, `max_iters`: PRISM's termination criterion.
    - `throw`: raise `ConvergenceError` unless converged.
    - `steps_per_trip`: steps per loop trip (default: `PALLAS_STEPS_PER_TRIP`,
      16, for the fused Pallas step, 2 otherwise); the loop may run up to
      this many minus one steps past the criterion.
    - `measure`: `"every"` step or the `"last"` step of each trip is tested
      (default: `PALLAS_MEASURE`, "last", on the fused Pallas path; "every"
      elsewhere). See `fixed_point_fused`.
    """
    eps, mi = _args(epsilon, max_iters)
    sol = _jacobi(
        A,
        _vec(diag),
        _vec(b),
        jnp.asarray(x0),
        eps,
        mi,
        bool(relative),
        steps_per_trip,
        measure,
    )
    return check_solution(sol, throw, "Jacobi")


def power(
    A,
    b,
    x0,
    *,
    epsilon=1e-6,
    relative=True,
    max_iters=10000,
    throw=True,
    steps_per_trip=None,
    measure=None,
) -> Solution:
    """Power (fixed-point) iteration `x' = A x + b`. Arguments as `jacobi`."""
    eps, mi = _args(epsilon, max_iters)
    sol = _power(
        A, _vec(b), jnp.asarray(x0), eps, mi, bool(relative), steps_per_trip, measure
    )
    return check_solution(sol, throw, "Power method")


@eqx.filter_jit
def _bicgstab(A, diag, b, x0, epsilon, max_iters, relative):
    def op(x):
        return diag * x - spmv(A, x)

    bnorm = jnp.max(jnp.abs(b), initial=0.0)
    tol = epsilon * bnorm if relative else epsilon
    return bicgstab_loop(
        op, b, x0, tol, max_iters, lambda r: jnp.max(jnp.abs(r), initial=0.0)
    )


def bicgstab_loop(op, b, x0, tol, max_iters, rnorm, rhat0=None) -> Solution:
    """The BiCGStab iteration for `op(x) = b` until `rnorm(r) <= tol` (`r` the
    recursive residual, reported as `residual`), breakdown, a non-finite
    iterate or `max_iters` iterations. `rhat0`: the shadow residual (default
    the initial residual). Shared by `bicgstab` (operator `diag x - A x`) and
    the device Krylov solve of steady state (`jaxmc.numerics.krylov`, whose
    operator has dense normalisation rows); traced inside their `jit`."""
    r0 = b - op(x0)
    one = jnp.ones((), b.dtype)
    res0 = rnorm(r0)
    status0 = jnp.where(
        res0 <= tol,
        Status.CONVERGED,
        jnp.where(max_iters <= 0, Status.MAX_ITERS, RUNNING),
    ).astype(jnp.int32)
    init = (
        x0,
        r0,
        r0 if rhat0 is None else rhat0,
        jnp.zeros_like(b),
        jnp.zeros_like(b),
        one,
        one,
        one,
        jnp.zeros((), jnp.int32),
        res0,
        status0,
    )

    def cond(c):
        return c[-1] == RUNNING

    def body(c):
        x, r, rhat, p, v, rho, alpha, omega, it, _, _ = c
        rho_new = jnp.vdot(rhat, r)
        # rhat . r = 0 happens structurally on sparse model-checking systems
        # (the residual's support moves away from rhat's): restart with the
        # current residual as shadow vector instead of giving up.
        restart = rho_new == 0
        rhat = jnp.where(restart, r, rhat)
        rho_new = jnp.where(restart, jnp.vdot(r, r), rho_new)
        beta = jnp.where(restart, 0.0, (rho_new / rho) * (alpha / omega))
        p = r + beta * (p - omega * v)
        v = op(p)
        rv = jnp.vdot(rhat, v)
        alpha = rho_new / rv
        h = x + alpha * p
        s = r - alpha * v
        s_ok = rnorm(s) <= tol
        t = op(s)
        tt = jnp.vdot(t, t)
        omega = jnp.where(s_ok, one, jnp.vdot(t, s) / jnp.where(tt == 0, one, tt))
        x = jnp.where(s_ok, h, h + omega * s)
        r = jnp.where(s_ok, s, s - omega * t)
        it = it + 1
        res = rnorm(r)
        report(it, res, x.shape[0])
        broke = (rho_new == 0) | (rv == 0) | (~s_ok & ((omega == 0) | (tt == 0)))
        status = jnp.where(
            ~jnp.all(jnp.isfinite(x)),
            Status.NONFINITE,
            jnp.where(
                res <= tol,
                Status.CONVERGED,
                jnp.where(
                    broke,
                    Status.BREAKDOWN,
                    jnp.where(it >= max_iters, Status.MAX_ITERS, RUNNING),
                ),
            ),
        ).astype(jnp.int32)
        return x, r, rhat, p, v, rho_new, alpha, omega, it, res, status

    out = lax.while_loop(cond, body, init)
    return Solution(value=out[0], status=out[-1], iterations=out[-3], residual=out[-2])


def bicgstab(
    A, diag, b, x0, *, epsilon=1e-6, relative=True, max_iters=10000, throw=True
) -> Solution:
    """BiCGStab for `(diag - A) x = b`.

    Converged when the residual `max|b - (diag - A) x|` is at most `epsilon`
    (absolute) or `epsilon * max|b|` (relative). When `rhat . r` vanishes the
    method restarts with `rhat = r`; any other zero inner product is reported
    as `Status.BREAKDOWN`. `iterations` counts BiCGStab iterations
    (two matrix-vector products each)."""
    eps, mi = _args(epsilon, max_iters)
    sol = _bicgstab(
        A, jnp.asarray(diag), jnp.asarray(b), jnp.asarray(x0), eps, mi, bool(relative)
    )
    return check_solution(sol, throw, "BiCGStab")


def bicgstab_l_start(op, b, x0, rhat0=None):
    """The state of `bicgstab_l_loop` at `x0`: `(x, r, u, rhat, rho0, alpha,
    omega)`, the shadow residual `rhat0` (default the initial residual)."""
    one = jnp.ones((), b.dtype)
    r0 = b - op(x0)
    rhat = r0 if rhat0 is None else rhat0
    return (x0, r0, jnp.zeros_like(b), rhat, one, jnp.zeros((), b.dtype), one)


def bicgstab_l_loop(op, state, tol, max_spmv, rnorm, ell: int):
    """BiCGStab(ell) (Sleijpen and Fokkema) for `op(x) = b` from `state`
    (`bicgstab_l_start`, or the state a previous call returned: the
    iteration goes on where it stopped) until `rnorm(r) <= tol` (`r` the
    recursive residual, reported as `residual`), breakdown, a non-finite
    step or `max_spmv` matrix-vector products (`iterations` counts them:
    `2 ell` per cycle). Returns `(Solution, state)`. Traced inside the
    caller's `jit`; `ell` is static.

    Why: plain BiCGStab (`ell = 1`) minimises the residual over one step per
    cycle; on the strongly non-normal systems of model checking (a queue
    filled by fast arrivals, stiff failure/repair rates) its residual first
    grows by many orders of magnitude, which costs the accuracy it can reach
    or overflows. A degree-`ell` minimal-residual polynomial per cycle keeps
    the residual near its start. A cycle whose iterate would not be finite
    is not taken: the loop stops with `NONFINITE` and the last finite
    iterate, from which the caller may restart."""
    x0, r0, u0, rhat, rho00, alpha0, omega0 = state
    one = jnp.ones((), r0.dtype)
    res0 = rnorm(r0)
    status0 = jnp.where(
        res0 <= tol,
        Status.CONVERGED,
        jnp.where(max_spmv <= 0, Status.MAX_ITERS, RUNNING),
    ).astype(jnp.int32)
    init = (x0, r0, u0, rho00, alpha0, omega0, jnp.zeros((), jnp.int32), res0, status0)

    def cond(c):
        return c[-1] == RUNNING

    def body(c):
        x0_, r, u, rho0, alpha, omega, it, _, _ = c
        x = x0_
        rho0 = -omega * rho0
        rs, us = [r], [u]
        broke = jnp.zeros((), bool)
        for j in range(ell):  # the BiCG part: ell steps
            rho1 = jnp.vdot(rhat, rs[j])
            broke = broke | (rho0 == 0)
            beta = alpha * rho1 / jnp.where(rho0 == 0, one, rho0)
            rho0 = rho1
            us = [rs[i] - beta * us[i] for i in range(j + 1)]
            us.append(op(us[j]))
            gamma = jnp.vdot(rhat, us[j + 1])
            # Only an exact zero is a breakdown: a relative threshold stops
            # the iteration on stiff chains (tandem) whose residual grows
            # far above the shadow vector before it converges; a step taken
            # on rounding noise is caught by the caller's true residual.
            broke = broke | (gamma == 0)
            alpha = rho0 / jnp.where(gamma == 0, one, gamma)
            rs = [rs[i] - alpha * us[i + 1] for i in range(j + 1)]
            rs.append(op(rs[j]))
            x = x + alpha * us[0]
        # The minimal-residual part: r <- r - sum_j g_j A^j r over j = 1..ell,
        # by the normal equations of the ell x ell Gram matrix.
        Z = jnp.stack(rs[1:])
        g = jnp.linalg.solve(Z @ Z.T, Z @ rs[0])
        broke = broke | ~jnp.all(jnp.isfinite(g)) | (jnp.abs(g[-1]) == 0)
        g = jnp.where(jnp.isfinite(g), g, 0.0)
        x = x + g @ jnp.stack(rs[:-1])
        r = rs[0] - g @ Z
        u = us[0] - g @ jnp.stack(us[1:])
        omega = g[-1]
        it = it + 2 * ell
        finite = jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(r))
        res = jnp.where(finite, rnorm(r), jnp.inf)
        report(it, res, x.shape[0], 2 * ell)
        status = jnp.where(
            ~finite,
            Status.NONFINITE,
            jnp.where(
                broke,
                Status.BREAKDOWN,
                jnp.where(
                    res <= tol,
                    Status.CONVERGED,
                    jnp.where(it >= max_spmv, Status.MAX_ITERS, RUNNING),
                ),
            ),
        ).astype(jnp.int32)
        # Keep the last finite iterate (and, after a breakdown, the one
        # before the broken cycle).
        x = jnp.where(finite & ~broke, x, x0_)
        return x, r, u, rho0, alpha, omega, it, res, status

    x, r, u, rho0, alpha, omega, it, res, status = lax.while_loop(cond, body, init)
    sol = Solution(value=x, status=status, iterations=it, residual=res)
    return sol, (x, r, u, rhat, rho0, alpha, omega)
