"""The outcome of a traced execution's solves: every solve a plan runs
(`jaxmc.solvers`: a linear solve, value or power iteration, GMRES)
records its `Solution` in the `Problem`'s `SolveLog` while the plan is
traced, and `Problem.solve_report` returns them, as a `SolveReport`, next
to the value. The failure model of the differentiable path:

- eagerly (`jaxmc.solve(..., params=...)`, `jaxmc.sweep`), a report with a
  failed solve becomes a `ConvergenceError` naming the method, iterations
  and residual (`raise_on_failure`, the rule of `solvers.convergence_error`
  that the checking path's throw uses too);
- under the caller's own `jax.jit`, `jax.grad` or `jax.vmap`, where
  nothing can raise, the value of a failed solve is NaN (and so is what is
  computed from it, a derivative included), and `Problem.solve_report`
  gives the report as arrays (per point under `jax.vmap`).
"""

from __future__ import annotations

import contextlib

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..errors import ConvergenceError
from ..solvers import Solution, Status, convergence_error


class SolveReport(eqx.Module):
    """The solves of one execution, in the order the plan runs them:
    `status`, `iterations`, `residual` (`[m]` each; `[..., m]` under
    `jax.vmap`), `methods` their names (static; `solvers.METHOD_NAMES`)."""

    status: jnp.ndarray
    iterations: jnp.ndarray
    residual: jnp.ndarray
    methods: tuple = eqx.field(static=True, default=())

    @property
    def ok(self):
        """Whether every solve converged (per point under `jax.vmap`)."""
        return jnp.all(self.status == Status.CONVERGED, axis=-1)


class SolveLog:
    """Where the solves of a plan record their outcome while it is traced
    (`record`), between `collect`'s start and end; outside it, recording
    is a no-op (`Problem.__call__` traces the plan for its value alone)."""

    def __init__(self):
        self._open: list | None = None

    def record(self, method: str, sol: Solution):
        """`sol.value`, after noting `sol`'s outcome (reduced to its worst
        column where the solve ran several right-hand sides at once)."""
        if self._open is not None:
            s, it, r = sol.status, sol.iterations, sol.residual
            if s.ndim:
                worst = jnp.argmax(s)
                s, r = s[worst], jnp.max(r)
                it = jnp.max(it)
            self._open.append((method, s, it, r))
        return sol.value

    @contextlib.contextmanager
    def collect(self):
        """Open the log for one trace of a plan; yields a function that makes
        the `SolveReport` of what was recorded."""
        saved, self._open = self._open, []
        entries = self._open

        def report() -> SolveReport:
            if not entries:
                z = jnp.zeros((0,), jnp.int32)
                return SolveReport(z, z, jnp.zeros((0,)), ())
            return SolveReport(
                jnp.stack([jnp.asarray(e[1], jnp.int32) for e in entries]),
                jnp.stack([jnp.asarray(e[2], jnp.int32) for e in entries]),
                jnp.stack([jnp.asarray(e[3], jnp.float64) for e in entries]),
                tuple(e[0] for e in entries),
            )

        try:
            yield report
        finally:
            self._open = saved


def raise_on_failure(report: SolveReport) -> None:
    """Raise the `ConvergenceError` of the first solve that failed (at any
    point of a batch: the first such point, with how many failed) of a
    concrete `report`; nothing if every solve converged."""
    status = np.asarray(report.status)
    if status.size == 0 or not status.any():
        return
    flat = status.reshape(-1, status.shape[-1])
    bad = np.flatnonzero(flat.any(axis=1))
    point = int(bad[0])
    j = int(np.flatnonzero(flat[point])[0])
    its = np.asarray(report.iterations).reshape(flat.shape)[point, j]
    res = np.asarray(report.residual).reshape(flat.shape)[point, j]
    err = convergence_error(report.methods[j], Status(int(flat[point, j])), its, res)
    if status.ndim > 1:
        raise ConvergenceError(
            f"at {bad.size} of {flat.shape[0]} points (the first: point {point}): "
            f"{err.message}",
            hint=err.hint,
        )
    raise err
