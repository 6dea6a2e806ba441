"""`NumericResult`: what every numerics helper returns, per-state values
plus how they were obtained."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..solvers import Status


@dataclass(frozen=True)
class NumericResult:
    """Per-state values plus how they were obtained.

    - `values`: float64 [n] (may hold `inf` for rewards).
    - `status`: the solver `Status` (CONVERGED for direct computations).
    - `iterations`, `residual`: from the iterative solver (0 if none ran).
    - `method`: the method used.
    """

    values: np.ndarray
    status: Status = Status.CONVERGED
    iterations: int = 0
    residual: float = 0.0
    method: str = "none"
    extra: dict = field(default_factory=dict, repr=False)


def from_solution(sol, method, extra=None) -> NumericResult:
    """The `NumericResult` of a solver's `Solution`."""
    return NumericResult(
        values=np.asarray(sol.value, dtype=np.float64),
        status=Status(int(sol.status)),
        iterations=int(sol.iterations),
        residual=float(sol.residual),
        method=method,
        extra=extra or {},
    )
