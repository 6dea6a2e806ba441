"""Value iteration and interval iteration for `x_s = opt_{c in s} (b_c +
(A x)_c)`, the Bellman equations of MDP reachability and rewards (rows =
choices, grouped by state in a `SparseModel`). For a DTMC/CTMC the min/max is
the identity and these are power iterations.

The caller masks the rows: a state whose value is fixed (0, 1, a reward
already known) gets all-zero rows and `b_c` = its value; a choice that must
not be taken gets `b_c = ±inf` so the min/max never picks it.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jax import lax

from ..kernels.fused import bellman_step
from ..kernels.spmv import spmv
from ._linear import _args, fixed_point
from ._results import RUNNING, Solution, Status, check_solution
from .progress import report


def bellman(M, b, x, opt: str):
    """One step `opt_{c in s} (b_c + (A x)_c)` (`opt` ignored for DTMCs)."""
    return M.group_reduce(b + spmv(M.matrix, x), opt)


@eqx.filter_jit
def _sweeps(M, b, x, count, opt):
    return lax.fori_loop(0, count, lambda _, x: bellman(M, b, x, opt), x)


def sweeps(M, b, x, count: int, opt: str):
    """`count` Bellman steps `x <- opt_{c in s} (b_c + (A x)_c)` from `x`
    (no criterion: policy iteration's improvement steps)."""
    return _sweeps(M, jnp.asarray(b), jnp.asarray(x), jnp.asarray(count), opt)


@eqx.filter_jit
def _vi(M, b, x0, epsilon, max_iters, relative, opt):
    return fixed_point(
        lambda x: bellman_step(M, b, x, opt, relative),
        x0,
        epsilon,
        relative,
        max_iters,
        fused=True,
    )


def value_iteration(
    M,
    b,
    x0,
    opt: str = "max",
    *,
    epsilon=1e-6,
    relative=True,
    max_iters=10000,
    throw=True,
) -> Solution:
    """Value iteration from `x0` with PRISM's termination criterion.

    **Arguments:**
    - `M`: a `jaxmc.layout.SparseModel` (rows masked by the caller).
    - `b`: per-choice constant term [m].
    - `x0`: start vector [n] (0 below the solution gives the least fixed point).
    - `opt`: `"min"` or `"max"` over each state's choices.
    """
    if opt not in ("min", "max"):
        raise ValueError(f"`opt` must be 'min' or 'max', not {opt!r}")
    eps, mi = _args(epsilon, max_iters)
    sol = _vi(M, jnp.asarray(b), jnp.asarray(x0), eps, mi, bool(relative), opt)
    return check_solution(sol, throw, "Value iteration")


@eqx.filter_jit
def _ii(M, b, b_up, lo, up, epsilon, max_iters, relative, opt):
    def gap(lo, up):
        g = up - lo
        if relative:
            mid = 0.5 * jnp.abs(up + lo)
            # (absolute where the lower bound is 0: see `gaps`)
            g = jnp.where((g == 0) | (lo == 0), g, g / mid)
        return jnp.max(g, initial=0.0)

    def cond(c):
        return c[-1] == RUNNING

    def body(c):
        lo, up, it, _, _ = c
        lo = bellman(M, b, bellman(M, b, lo, opt), opt)
        up = bellman(M, b_up, bellman(M, b_up, up, opt), opt)
        it = it + 2
        g = gap(lo, up)
        report(it, g, lo.shape[0], 2)
        status = jnp.where(
            ~(jnp.all(jnp.isfinite(lo)) & jnp.all(jnp.isfinite(up))),
            Status.NONFINITE,
            jnp.where(
                g <= 2 * epsilon,
                Status.CONVERGED,
                jnp.where(it >= max_iters, Status.MAX_ITERS, RUNNING),
            ),
        ).astype(jnp.int32)
        return lo, up, it, g, status

    g0 = gap(lo, up)
    s0 = jnp.where(g0 <= 2 * epsilon, Status.CONVERGED, RUNNING).astype(jnp.int32)
    lo, up, it, g, status = lax.while_loop(
        cond, body, (lo, up, jnp.zeros((), jnp.int32), g0, s0)
    )
    return (
        Solution(value=0.5 * (lo + up), status=status, iterations=it, residual=g),
        lo,
        up,
    )


def interval_iteration(
    M,
    b,
    lower,
    upper,
    opt: str = "max",
    *,
    epsilon=1e-6,
    relative=True,
    max_iters=10000,
    throw=True,
    b_upper=None,
) -> tuple[Solution, jnp.ndarray, jnp.ndarray]:
    """Interval iteration (Haddad & Monmege; Baier et al. 2017): value
    iteration from a lower and an upper bound at once, stopping when
    `max(upper - lower) <= 2 epsilon` (relative: `<= 2 epsilon |midpoint|`),
    so that the midpoint is within `epsilon` of the true value.

    Sound only when the Bellman operator has a unique fixed point on the
    iterated states: for MDPs the caller must remove end components among
    them (`jaxmc.numerics` does so).

    `b_upper`, if given, is the constant term of the upper iterate (`b` is
    then the lower one's): a system solved piecewise, whose known part
    enters through `b` as bounds from below and from above.

    **Returns:** `(solution, lower, upper)`; `solution.value` is the midpoint
    and `solution.residual` the final gap.
    """
    if opt not in ("min", "max"):
        raise ValueError(f"`opt` must be 'min' or 'max', not {opt!r}")
    eps, mi = _args(epsilon, max_iters)
    b = jnp.asarray(b)
    sol, lo, up = _ii(
        M,
        b,
        b if b_upper is None else jnp.asarray(b_upper),
        jnp.asarray(lower),
        jnp.asarray(upper),
        eps,
        mi,
        bool(relative),
        opt,
    )
    return check_solution(sol, throw, "Interval iteration"), lo, up
