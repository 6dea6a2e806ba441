"""Solver outcomes as data (`Status`, `Solution`), PRISM's convergence test,
and the `throw=True` check that turns a failed status into a
`ConvergenceError`."""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..errors import ConvergenceError
from ..kernels.norms import sup_norm as sup_norm


class Status(enum.IntEnum):
    """How an iterative method stopped."""

    CONVERGED = 0
    #: `max_iters` reached before the convergence criterion held.
    MAX_ITERS = 1
    #: A Krylov method broke down (a zero inner product).
    BREAKDOWN = 2
    #: The iterate contains NaN or infinity.
    NONFINITE = 3
    #: Not run: the layout (or method) asked for cannot take this system,
    #: and another one took over (an `Attempt` of a fallback, not a failure).
    REFUSED = 4
    #: No progress over a window of iterations (the measure stopped
    #: decreasing: e.g. a gap held open by an end component, or rounding).
    STALLED = 5


#: Loop-internal status: still iterating.
RUNNING = -1

_MESSAGES = {
    Status.MAX_ITERS: "did not converge within {iters} iterations "
    "(last difference {res:.3g})",
    Status.BREAKDOWN: "broke down after {iters} iterations (residual {res:.3g})",
    Status.NONFINITE: "produced a non-finite value after {iters} iterations",
    Status.STALLED: "stalled after {iters} iterations (no progress; last "
    "difference {res:.3g})",
}

_HINTS = {
    Status.MAX_ITERS: "increase max_iters or use -epsilon with a larger value",
    Status.BREAKDOWN: "try another method, e.g. method='jacobi' or 'power'",
    Status.NONFINITE: "check the model for non-finite rates/rewards, "
    "or try another method",
    Status.STALLED: "try another method, or a larger -epsilon",
}


class Solution(eqx.Module):
    """Result of an iterative solver.

    - `value`: the final iterate (for interval iteration, the midpoint).
    - `status`: a `Status` value (int32 scalar array).
    - `iterations`: number of steps (matrix-vector products) done.
    - `residual`: the last sup-norm difference (relative or absolute as asked;
      for interval iteration, the gap between the bounds).
    """

    value: Float[Array, " n"]
    status: Int[Array, ""]
    iterations: Int[Array, ""]
    residual: Float[Array, ""]


def next_status(x, diff, iters, epsilon, max_iters, finite=None):
    """Status after a loop trip: nonfinite, converged, out of iterations or
    still running. `finite` (whether `x` is all finite) if already known."""
    if finite is None:
        finite = jnp.all(jnp.isfinite(x))
    return jnp.where(
        ~finite,
        Status.NONFINITE,
        jnp.where(
            diff < epsilon,
            Status.CONVERGED,
            jnp.where(iters >= max_iters, Status.MAX_ITERS, RUNNING),
        ),
    ).astype(jnp.int32)


def check_solution(sol: Solution, throw: bool, method: str = "solver") -> Solution:
    """If `throw`, raise `ConvergenceError` unless `sol.status` is CONVERGED.

    Outside `jit` the error names the iterations and residual; under an outer
    `jit` it is an `eqx.error_if` runtime error with a fixed message."""
    if not throw:
        return sol
    if isinstance(sol.status, jax.core.Tracer):
        msg = f"{method} did not converge; increase max_iters or use -epsilon"
        value = eqx.error_if(sol.value, sol.status != Status.CONVERGED, msg)
        return eqx.tree_at(lambda s: s.value, sol, value)
    status = Status(int(np.asarray(sol.status)))
    if status != Status.CONVERGED:
        raise convergence_error(
            method, status, int(sol.iterations), float(sol.residual)
        )
    return sol


#: How `convergence_error` names the methods of `jaxmc.SolveOptions`.
METHOD_NAMES = {
    "jacobi": "Jacobi",
    "gauss_seidel": "Gauss–Seidel",
    "power": "Power method",
    "bicgstab": "BiCGStab",
    "value_iteration": "Value iteration",
    "interval_iteration": "Interval iteration",
    "gmres": "GMRES",
    "sor": "SOR",
}


def convergence_error(
    method: str, status: Status, iterations: int, residual: float
) -> ConvergenceError:
    """The error of a solve by `method` (a name of `METHOD_NAMES` or a
    display name) that stopped with `status` (not CONVERGED)."""
    name = METHOD_NAMES.get(method, method)
    return ConvergenceError(
        f"{name} "
        + _MESSAGES[Status(status)].format(iters=int(iterations), res=float(residual)),
        hint=_HINTS[Status(status)],
    )
