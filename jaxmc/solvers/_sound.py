"""Sound value iteration for `x = inv * (b + A x)` (Quatmann & Katoen, "Sound
value iteration", CAV 2018), the certified solve of DTMC/CTMC reachability
and expected rewards: one fused loop advances the iterate and the
probability of not having left the iterated states yet, and stops on a
certified bound on the error instead of on the change between iterates.

The system is a substochastic fixed point: `Q = inv * A` is nonnegative,
rows of the states that are not iterated (`live` false) are zero (their
value is `inv * b`, fixed), and from every live state the chain `Q` leaves
the live states almost surely (the caller's precomputation guarantees it),
so the fixed point `v` is unique. From any start `x0` (equal to `v` outside
`live`), with `x_k = B^k(x0)` (`B(z) = inv * (b + A z)`) and `y_k = Q^k 1`
on the live states,

    v = x_k + Q^k e,   e = v - x0 (zero outside `live`),

so with `d_k = x_k - x0` and all `y_k < 1` on `live`, the extremes of `e`
satisfy `min d_k/(1 - y_k) <= e <= max d_k/(1 - y_k)` (evaluate the
identity at the state where `e` is largest / smallest), and per state

    x_k + y_k * lo_k  <=  v  <=  x_k + y_k * hi_k.

`lo_k`/`hi_k` are kept monotone (the best seen so far). With `x0` below
the solution (0 on `live`, as for probabilities and rewards from 0), this
is Quatmann and Katoen's iteration; a warm start `x0` (a Gauss-Seidel or
Krylov solution) is certified in a few steps when it is accurate, since
`d_k` is then its tiny residual propagated.

The loop stops when every live state's interval `y_k (hi_k - lo_k)` is at
most `2 epsilon` (absolute) or `2 epsilon` times the interval's lower end
(relative; the values are nonnegative where this is used); the midpoint is
returned, within `epsilon` (absolute or relative) of `v`. Floating-point
rounding of the iterates themselves is not included in the bound.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jax import lax

from ..kernels.spmv import spmv
from ._results import RUNNING, Solution, Status, check_solution
from .progress import report


#: Steps per loop trip; the bound is tested after the last step of each
#: trip (so the loop may run this many minus one steps past the point
#: where the bound first held).
STEPS_PER_TRIP = 4


def _step2(A, inv, b, x, y):
    """`(inv * (b + A x), inv * (A y))`, one pass over `A` where the layout
    has a multi-vector SpMV."""
    try:
        xy = spmv(A, jnp.stack([x, y], axis=1))
        ax, ay = xy[:, 0], xy[:, 1]
    except TypeError:  # (no multi-vector SpMV for this layout)
        ax, ay = spmv(A, x), spmv(A, y)
    return (b + ax) * inv, ay * inv


def _bounds(x, y, x0, live, lo, hi, nonneg):
    """The monotone extremes `(lo, hi)` of `v - x0` after this step."""
    d = x - x0
    below = y < 1
    ok = jnp.all(below | ~live)
    ratio = d / jnp.where(below, 1.0 - y, 1.0)
    r_lo = jnp.min(jnp.where(live, ratio, jnp.inf), initial=jnp.inf)
    r_hi = jnp.max(jnp.where(live, ratio, -jnp.inf), initial=-jnp.inf)
    lo = jnp.maximum(lo, jnp.where(ok, r_lo, -jnp.inf))
    hi = jnp.minimum(hi, jnp.where(ok, r_hi, jnp.inf))
    if nonneg:  # v >= 0, so e >= -x0 everywhere; and x_k <= v from below
        lo = jnp.maximum(lo, -jnp.max(jnp.where(live, x0, 0.0), initial=0.0))
    return lo, hi


def _gap(x, y, live, lo, hi, relative):
    """Largest (relative) half-width of the per-state intervals on `live`."""
    low = x + y * lo
    width = jnp.where(live & (y > 0), y * (hi - lo), 0.0)
    if relative:
        width = jnp.where(width == 0, 0.0, width / jnp.abs(low))
    return 0.5 * jnp.max(width, initial=0.0)


@eqx.filter_jit
def _svi(A, inv, b, x0, live, epsilon, max_iters, relative, nonneg):
    dtype = x0.dtype
    y0 = live.astype(dtype)
    inf = jnp.asarray(jnp.inf, dtype)

    def cond(c):
        return c[-1] == RUNNING

    def body(c):
        x, y, lo, hi, it, _, _ = c
        for _ in range(STEPS_PER_TRIP):
            x, y = _step2(A, inv, b, x, y)
        lo, hi = _bounds(x, y, x0, live, lo, hi, nonneg)
        it = it + STEPS_PER_TRIP
        g = _gap(x, y, live, lo, hi, relative)
        g = jnp.where(jnp.isnan(g), inf, g)
        report(it, g, x.shape[0], STEPS_PER_TRIP)
        finite = jnp.all(jnp.isfinite(x))
        status = jnp.where(
            ~finite,
            Status.NONFINITE,
            jnp.where(
                g <= epsilon,
                Status.CONVERGED,
                jnp.where(it >= max_iters, Status.MAX_ITERS, RUNNING),
            ),
        ).astype(jnp.int32)
        return x, y, lo, hi, it, g, status

    start = jnp.where(jnp.any(live), RUNNING, Status.CONVERGED).astype(jnp.int32)
    init = (x0, y0, -inf, inf, jnp.zeros((), jnp.int32), jnp.zeros((), dtype), start)
    x, y, lo, hi, it, g, status = lax.while_loop(cond, body, init)
    inner = live & (y > 0)
    lower = jnp.where(inner, x + y * lo, x)
    upper = jnp.where(inner, x + y * hi, x)
    mid = jnp.where(inner, x + y * (0.5 * (lo + hi)), x)
    sol = Solution(value=mid, status=status, iterations=it, residual=g)
    return sol, lower, upper


def sound_value_iteration(
    A,
    inv,
    b,
    x0,
    live,
    *,
    epsilon=1e-6,
    relative=True,
    max_iters=10000,
    throw=True,
    nonneg=True,
    name="Sound value iteration",
):
    """Sound value iteration for `x = inv * (b + A x)` (see the module).

    **Arguments:**
    - `A`: nonnegative matrix (a `jaxmc.layout` matrix), rows of states
      outside `live` zero; `inv`: per-state factor (`1 / (1 - P_ss)` for
      the Jacobi splitting, ones for the power iteration; 1 outside `live`);
      `b`: constant term (the fixed value outside `live`).
    - `x0`: the start, equal to the solution outside `live` (any values on
      `live`: 0, or a warm start to certify).
    - `live`: bool [n], the iterated states; from each of them the chain
      must leave `live` almost surely (else the loop runs to `max_iters`).
    - `epsilon`, `relative`: the certified bound asked for (half-width of
      every live state's interval, absolute or relative to its lower end).
    - `nonneg`: the solution is known to be nonnegative (a better lower
      bound while the intervals are still unbounded).

    **Returns:** `(solution, lower, upper)`: the midpoints (`solution.value`),
    the largest half-width reached (`solution.residual`), and the per-state
    bounds.
    """
    eps = jnp.asarray(epsilon, jnp.float64)
    mi = jnp.asarray(max_iters, jnp.int32)
    sol, lo, up = _svi(
        A,
        jnp.asarray(inv),
        jnp.asarray(b),
        jnp.asarray(x0),
        jnp.asarray(live, bool),
        eps,
        mi,
        bool(relative),
        bool(nonneg),
    )
    return check_solution(sol, throw, name), lo, up
