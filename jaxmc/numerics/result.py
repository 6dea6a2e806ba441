"""`NumericResult`: what every numerics helper returns, per-state values
plus how they were obtained (the methods tried, in order, and the error
bound the last one certifies)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..layout import host_array
from ..solvers import Status


@dataclass(frozen=True)
class Attempt:
    """One method tried by a solve: what ran, how it stopped.

    A solve that hands over to another method (a stall, a breakdown, a
    non-finite iterate, `max_iters` reached, a layout refused) records each
    attempt in order; the last one produced the values. `note` says why the
    next one took over, or why a layout or method other than the one asked
    for ran (empty for the attempt that succeeded as asked)."""

    method: str
    status: Status = Status.CONVERGED
    iterations: int = 0
    residual: float = 0.0
    layout: str | None = None
    note: str = ""

    def describe(self) -> str:
        where = f" on {self.layout}" if self.layout else ""
        what = f"{self.method}{where}: {self.status.name.lower()}"
        if self.status != Status.REFUSED:
            what += f", {self.iterations} iterations, residual {self.residual:.3g}"
        return what + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class NumericResult:
    """Per-state values plus how they were obtained.

    - `values`: float64 [n] (may hold `inf` for rewards).
    - `status`: the solver `Status` (CONVERGED for direct computations).
    - `iterations`, `residual`: from the iterative solver (0 if none ran).
    - `method`: the method used.
    - `attempts`: the methods tried before the one that produced `values`
      (fallbacks), oldest first; empty when the first method succeeded.
    - `bound`: a certified bound on the absolute error of every value
      (None where the method certifies none, e.g. PRISM's change criterion).
    - `lower`, `upper`: per-state certified bounds where the method keeps
      them (interval iteration), else None.
    """

    values: np.ndarray
    status: Status = Status.CONVERGED
    iterations: int = 0
    residual: float = 0.0
    method: str = "none"
    extra: dict = field(default_factory=dict, repr=False)
    attempts: tuple[Attempt, ...] = ()
    bound: float | None = None
    lower: np.ndarray | None = field(default=None, repr=False)
    upper: np.ndarray | None = field(default=None, repr=False)


def from_solution(sol, method, extra=None) -> NumericResult:
    """The `NumericResult` of a solver's `Solution`."""
    return NumericResult(
        values=host_array(sol.value, np.float64),
        status=Status(int(sol.status)),
        iterations=int(sol.iterations),
        residual=float(sol.residual),
        method=method,
        extra=extra or {},
    )
