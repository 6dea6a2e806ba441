"""Gauss–Seidel for `x = b + A x` (PRISM's `-gs`, its explicit engine's
default).

Each sweep uses the values already updated in the same sweep, which is what
makes Gauss–Seidel converge faster and closer than Jacobi on chains such as
birth–death processes — and also what makes it sequential. So it runs on the
host: one sweep is one sparse lower-triangular solve (`scipy`'s compiled
`spsolve_triangular`), `(I - D - L) x' = b + U x`, with PRISM's convergence
criterion checked after every sweep. For the GPU, use Jacobi.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve_triangular

from . import _progress
from ._results import Solution, Status, check_solution


def gauss_seidel(
    A: sp.csr_matrix,
    b: np.ndarray,
    x0: np.ndarray,
    *,
    epsilon: float = 1e-6,
    relative: bool = True,
    max_iters: int = 10000,
    throw: bool = True,
) -> Solution:
    """Solve `x = b + A x` by Gauss–Seidel sweeps in index order.

    **Arguments:** `A` (n×n, scipy), `b`, `x0` as numpy vectors; the criterion
    as in [`jaxmc.solvers.jacobi`][]: stop when the largest (relative) change
    of a sweep is below `epsilon`.

    **Returns:** a `Solution` (value, status, iterations, residual).
    """
    A = sp.csr_matrix(A)
    n = A.shape[0]
    lower = sp.tril(A, k=0, format="csr")
    upper = sp.triu(A, k=1, format="csr")
    T = (sp.identity(n, format="csr") - lower).tocsr()
    x = np.asarray(x0, dtype=np.float64).copy()
    b = np.asarray(b, dtype=np.float64)
    status, it, diff = Status.MAX_ITERS, 0, np.inf
    while it < max_iters:
        new = spsolve_triangular(T, b + upper @ x, lower=True)
        it += 1
        diff = _difference(new, x, relative)
        x = new
        if _progress._reporter is not None and n >= _progress.MIN_STATES and it % 16 == 0:
            _progress._reporter(it, diff)
        if not np.all(np.isfinite(x)):
            status = Status.NONFINITE
            break
        if diff < epsilon:
            status = Status.CONVERGED
            break
    sol = Solution(
        value=x, status=np.int32(status), iterations=np.int32(it), residual=diff
    )
    return check_solution(sol, throw, "Gauss–Seidel")


def _difference(new: np.ndarray, old: np.ndarray, relative: bool) -> float:
    """PRISM's measure: max |new − old|, divided by |new| when relative (a
    change of zero counts 0, a change to exactly zero counts as infinite)."""
    d = np.abs(new - old)
    if not relative:
        return float(d.max(initial=0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(d == 0, 0.0, d / np.abs(new))
    return float(r.max(initial=0.0))
