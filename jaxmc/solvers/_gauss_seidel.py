"""Gauss–Seidel for `x = b + A x` (PRISM's `-gs`, its explicit engine's
default), swept in topological order.

Each sweep uses the values already updated in the same sweep, which is what
makes Gauss–Seidel converge faster and closer than Jacobi on chains such as
birth–death processes — and also what makes it sequential. So it runs on the
host: one sweep is one sparse lower-triangular solve (`scipy`'s compiled
`spsolve_triangular`), `(I - D - L) x' = b + U x`, with PRISM's convergence
criterion checked after every sweep. For the GPU, use Jacobi.

The sweep visits the strongly connected components of `A`'s graph
successors first (a topological order of the component DAG; states of one
component in index order), as Storm's topological solver does: where the
graph is acyclic the sweep is a back-substitution, exact in one sweep
(where index order can take thousands of sweeps), and every component sees
the final values of the ones it leads to.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.sparse.linalg import spsolve_triangular

from .._arrays import unique
from . import progress
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
    order: np.ndarray | str = "topological",
) -> Solution:
    """Solve `x = b + A x` by Gauss–Seidel sweeps.

    **Arguments:** `A` (n×n, scipy), `b`, `x0` as numpy vectors; the criterion
    as in [`jaxmc.solvers.jacobi`][]: stop when the largest (relative) change
    of a sweep is below `epsilon`. `order`: the order in which a sweep
    visits the states: `"topological"` (`topological_order(A)`),
    `"index"`, or a permutation.

    **Returns:** a `Solution` (value, status, iterations, residual), in the
    original order.
    """
    A = sp.csr_matrix(A)
    n = A.shape[0]
    if isinstance(order, str):
        if order not in ("topological", "index"):
            raise ValueError(
                "`order` must be 'topological', 'index' or a permutation, not "
                f"{order!r}"
            )
        order = topological_order(A) if order == "topological" else None
    x = np.asarray(x0, dtype=np.float64).copy()
    b = np.asarray(b, dtype=np.float64)
    if order is not None:
        order = np.asarray(order, dtype=np.int64)
        A = A[order][:, order].tocsr()
        x, b = x[order], b[order]
    lower = sp.tril(A, k=0, format="csr")
    upper = sp.triu(A, k=1, format="csr")
    T = (sp.identity(n, format="csr") - lower).tocsr()
    status, it, diff = Status.MAX_ITERS, 0, np.inf
    while it < max_iters:
        new = spsolve_triangular(T, b + upper @ x, lower=True)
        it += 1
        diff = _difference(new, x, relative)
        x = new
        progress.report_host(it, diff, n)
        if not np.all(np.isfinite(x)):
            status = Status.NONFINITE
            break
        if diff < epsilon:
            status = Status.CONVERGED
            break
    if order is not None:
        out = np.empty_like(x)
        out[order] = x
        x = out
    sol = Solution(
        value=x, status=np.int32(status), iterations=np.int32(it), residual=diff
    )
    return check_solution(sol, throw, "Gauss–Seidel")


def scc_labels(A: sp.csr_matrix) -> tuple[int, np.ndarray]:
    """`(count, labels)`: the strongly connected components of the graph of
    `A`'s non-zero entries (an edge `u -> v` for `A[u, v] != 0`)."""
    return csgraph.connected_components(
        sp.csr_matrix(A), directed=True, connection="strong"
    )


def topological_order(
    A: sp.csr_matrix, scc: tuple[int, np.ndarray] | None = None
) -> np.ndarray:
    """The states of `A`'s graph, every strongly connected component after
    the components it has edges to (successors first), the states of one
    component in index order: sweeping `x = b + A x` in this order uses the
    new values of everything a state's component leads to."""
    A = sp.csr_matrix(A)
    count, lab = scc if scc is not None else scc_labels(A)
    coo = A.tocoo()
    between = lab[coo.row] != lab[coo.col]
    src, dst = lab[coo.row[between]], lab[coo.col[between]]
    # scipy numbers the components as Pearce's algorithm completes them,
    # which is successors first; checked here, and derived otherwise.
    if np.all(src > dst):
        rank = lab
    else:
        rank = _component_rank(count, src, dst)[lab]
    return np.lexsort((np.arange(A.shape[0]), rank))


def _component_rank(count: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """A rank of the components with `rank[u] > rank[v]` for every edge
    `u -> v` of the (acyclic) component graph: Kahn's algorithm from the
    sinks, one vectorised round per level."""
    g = sp.csr_matrix((np.ones(src.size, np.int8), (dst, src)), shape=(count, count))
    g.sum_duplicates()  # (one entry per distinct edge: row dst, column src)
    out_deg = np.bincount(g.indices, minlength=count)
    rank = np.full(count, -1, np.int64)
    front = np.flatnonzero(out_deg == 0)
    level = 0
    while front.size:
        rank[front] = level
        level += 1
        preds = g[front].tocoo()  # edges p -> f for f in the front
        np.subtract.at(out_deg, preds.col, 1)
        cand = unique(preds.col)
        front = cand[(out_deg[cand] == 0) & (rank[cand] < 0)]
    # a component left unranked would mean a cycle among components
    rank[rank < 0] = level
    # order components with equal rank by label, ranks first
    return rank * count + np.arange(count)


def _difference(new: np.ndarray, old: np.ndarray, relative: bool) -> float:
    """PRISM's measure: max |new − old|, divided by |new| when relative (a
    change of zero counts 0, a change to exactly zero counts as infinite)."""
    d = np.abs(new - old)
    if not relative:
        return float(d.max(initial=0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(d == 0, 0.0, d / np.abs(new))
    return float(r.max(initial=0.0))
