"""The linear systems of steady-state analysis (`jaxmc.numerics.steady`):
how they are solved, on the host or on the device.

Why linear-system solvers and not power iteration: an iteration stopped when
its relative step falls below epsilon is, on slowly mixing chains (polling,
kanban, fms), wrong by that step divided by the spectral gap, orders of
magnitude above epsilon. So both systems are solved to rounding accuracy:

- up to `DIRECT_MAX_STATES` unknowns by sparse LU (SuperLU); its fill-in on
  these lattice-like chains grows fast, so only small systems go this way;
- above, by restarted GMRES (`scipy.sparse.linalg.gmres`) to a relative
  residual of `GMRES_RTOL`; the stationary system is first scaled to the
  jump chain (`y = pi * d`, d the diagonal), which makes it well
  conditioned;
- if GMRES does not converge within `max_iters` iterations, by Jacobi with
  PRISM's criterion (`epsilon`, `relative`, `max_iters`, `throw`): PRISM's
  `-jacobi` for the stationary system (damped by 1/2 when the Jacobi
  iteration matrix, the jump chain, has a periodic BSCC, on which plain
  Jacobi oscillates forever), `solve_fixed`'s Jacobi for the absorption.

On the device: a system of at least `DEVICE_MIN_STATES` unknowns on a GPU
(or any size with `device=True`, or when a layout other than "auto"/"csr" is
asked for) is solved on the device (`jaxmc.numerics.krylov`), same system
and same stopping test (true relative residual below `GMRES_RTOL`), with
its SpMV on a `layout` matrix (on a GPU by default the warp-segment layout
through the Pallas kernel); the normalisation rows, dense, are computed by
a reduction beside the SpMV. The method is BiCGStab restarted from its true
residual (`device_krylov`), then GMRES from its best iterate: a Krylov
method rather than the device Jacobi because of the accuracy argument above
and because Jacobi does not converge at all on some of these systems;
BiCGStab rather than GMRES(40) because restarted GMRES stagnates on the
tandem queue's systems (host scipy and device alike), while restarted
BiCGStab reaches rounding accuracy, with memory for 8 vectors instead of
41. It too fails on the largest tandem chains, so it gets
`DEVICE_KRYLOV_MAX_SPMV` SpMVs; then PRISM's (damped)
Jacobi runs on the device on the same layout (`max_iters` iterations), as
on the host path, with PRISM's criterion and its accuracy caveat above.
The measurements behind these choices and constants are in
`benchmarks/RESULTS.md` ("Steady-state and linear-solve choices").
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..layout import layout_kind
from ..solvers import Solution, Status
from .device import DeviceModel
from .krylov import Operator, bicgstab as device_bicgstab, gmres as device_gmres
from .matrices import (
    build_ordered,
    host_csr,
    layout_name,
    on_gpu,
    undo_order,
)
from .timing import stage


#: Systems (BSCC states of all BSCCs together, or transient states) up to
#: this size are solved by sparse LU (fast even on random graphs, whose
#: fill-in is the worst); larger ones by GMRES.
DIRECT_MAX_STATES = 1000

#: Relative residual at which GMRES stops (rounding level for doubles,
#: leaving room for the condition number).
GMRES_RTOL = 1e-13

#: GMRES restart length (memory: this many vectors of the system's size).
GMRES_RESTART = 40

#: Host GMRES gives up when its residual has not halved over this many
#: iterations (checked at restarts): restarted GMRES stagnates for good on
#: some chains (tandem), where Jacobi then converges far sooner, while the
#: systems it solves gain a large factor per restart.
GMRES_STALL_ITERS = 320

#: On a GPU, systems of at least this many unknowns are solved on the device
#: (smaller ones: the host's LU/GMRES wins over the device loop's fixed costs).
DEVICE_MIN_STATES = 50_000

#: Device BiCGStab restarts (each from the true residual of the last).
BICGSTAB_RESTARTS = 8

#: SpMVs the device Krylov solve may take before PRISM's Jacobi takes over
#: (within `max_iters`): the systems it solves need far fewer, and on those
#: it does not solve (the largest tandem chains) Jacobi converges in fewer
#: iterations than the Krylov solve had already spent.
DEVICE_KRYLOV_MAX_SPMV = 4000


def solves_on_device(k: int, dm: DeviceModel, device: bool | None) -> bool:
    """Whether a system of `k` unknowns is solved on the device (on `dm`'s
    layout): `device` if given, else where `dm` asks for a layout other
    than "auto"/"csr" or the system is large on a GPU."""
    if device is not None:
        return bool(device)
    return dm.requested not in ("auto", "csr") or (on_gpu() and k >= DEVICE_MIN_STATES)


def system_kind(A: sp.csr_matrix, dm: DeviceModel | None, rank=None) -> tuple[str, str]:
    """`(kind, fallback)`: the layout of a derived system matrix and, for
    "dia", the one `build_ordered` takes where the matrix is no few
    diagonals. The layout `dm` asks for (falling back to "compact"), or for
    "auto" the automatic choice: on a GPU the compact diagonal layout where
    the states have lexicographic ranks (`rank`; the fastest fused Jacobi
    step on box-shaped models such as tandem), else and as its fallback
    `layout_kind`'s warp layout; CSR on a CPU. `dm` None: CSR (a system kept
    off the device layout)."""
    layout = "csr" if dm is None else dm.requested
    if layout != "auto":
        return layout, "compact"
    if not on_gpu():
        return "csr", "csr"
    if rank is not None:
        return "dia", "auto"
    return layout_kind(host_csr(A.indptr, A.indices, A.data, A.shape), "gpu"), "compact"


def canonical(A) -> sp.csr_matrix:
    A = sp.csr_matrix(A)
    A.sum_duplicates()
    A.sort_indices()
    return A


def device_solve(off, b, dm, max_iters, norm=None, rank=None):
    """`(I - off) x = b` (rows `norm = (rows, group, weight, n_groups)`
    replaced by group sums) by device GMRES with `off` on `dm`'s layout (`rank`:
    the unknowns' lexicographic ranks, for the diagonal layout). Returns
    the `Solution` (not raised on failure) and the layout's name."""
    off = canonical(off)
    kind, fallback = system_kind(off, dm, rank)
    with stage("layout"):
        A, order = build_ordered(
            off.indptr, off.indices, off.data, off.shape, kind, rank, fallback
        )
        # In the layout's numbering (`order`: see `build_ordered`).
        at = (lambda v: v) if order is None else order.apply
        if norm is None:
            op = Operator(A)
        else:
            rows, group, weight, ng = norm
            op = Operator(
                A,
                jnp.asarray(at(rows)),
                jnp.asarray(at(group), jnp.int32),
                jnp.asarray(at(weight), jnp.float64),
                int(ng),
            )
    sol, method = device_krylov(op, at(b), min(max_iters, DEVICE_KRYLOV_MAX_SPMV))
    return undo_order(sol, order), method, layout_name(A)


def device_krylov(op, b, max_iters):
    """BiCGStab restarted from its true residual until that is below
    `GMRES_RTOL` (relative, 2-norm), then, if that failed, GMRES from the
    best iterate; `(solution, method)`. Iterations count SpMVs.

    BiCGStab's recursive residual drifts from the true one: the first run
    typically stops at a true residual of 1e-8, and a restart from there
    reaches rounding accuracy (tandem). A restart can also wander (its residual is not
    monotone), so restarts after the first are capped at twice the first
    run's length, and the next one starts from where it stopped (a new
    Krylov sequence; restarting from the best iterate would repeat it).
    Restarts take the all-ones shadow vector: the default (the initial
    residual), once it is rounding-sized, made restarts wander (tandem)."""
    x, total, best, cap = None, 0, None, None
    for _ in range(BICGSTAB_RESTARTS):
        left = max(max_iters - total, 2) // 2
        sol = device_bicgstab(
            op,
            b,
            x,
            rtol=GMRES_RTOL,
            max_iters=left if cap is None else min(left, cap),
            shadow=None if cap is None else np.ones(len(b)),
        )
        if cap is None:
            cap = max(2 * int(sol.iterations), 100)
        total += 2 * int(sol.iterations)
        if Status(int(sol.status)) == Status.NONFINITE:
            break
        if best is None or float(sol.residual) < float(best.residual):
            best = sol
        x = sol.value
        if float(sol.residual) <= GMRES_RTOL:
            return sol.__class__(
                sol.value, Status.CONVERGED, total, sol.residual
            ), "bicgstab"
        if total >= max_iters or int(sol.iterations) == 0:
            break
    sol = device_gmres(
        op,
        b,
        None if best is None else best.value,
        rtol=GMRES_RTOL,
        restart=GMRES_RESTART,
        max_iters=max(max_iters - total, 1),
    )
    total += int(sol.iterations)
    return sol.__class__(sol.value, sol.status, total, sol.residual), "bicgstab+gmres"


class _Stalled(Exception):
    """Raised from GMRES's callback to stop a stagnating solve."""


def host_gmres(A, b, max_iters) -> Solution:
    """`A x = b` by restarted GMRES on the host: a `Solution` (numpy
    values) with status CONVERGED, MAX_ITERS (`max_iters` inner iterations),
    STALLED (the residual has not halved over `GMRES_STALL_ITERS`) or
    NONFINITE; `iterations` the inner iterations, `residual` the last
    relative residual GMRES reported."""
    cycles = max(1, -(-int(max_iters) // GMRES_RESTART))
    hist: list[float] = []

    def watch(res):  # the relative residual, once per inner iteration
        hist.append(float(res))
        k = len(hist)
        if k % GMRES_RESTART == 0 and k > GMRES_STALL_ITERS:
            if not hist[-1] <= 0.5 * hist[-1 - GMRES_STALL_ITERS]:
                raise _Stalled

    x, status = None, Status.CONVERGED
    try:
        x, info = spla.gmres(
            A,
            b,
            rtol=GMRES_RTOL,
            atol=0.0,
            restart=GMRES_RESTART,
            maxiter=cycles,
            callback=watch,
            callback_type="pr_norm",
        )
    except _Stalled:
        status = Status.STALLED
    else:
        if not np.all(np.isfinite(x)):
            status = Status.NONFINITE
        elif info != 0:
            status = Status.MAX_ITERS
    if x is None or status == Status.NONFINITE:
        x = np.zeros(len(b))
    res = hist[-1] if hist else 0.0
    return Solution(value=x, status=status, iterations=len(hist), residual=res)


def host_solve(A, b, max_iters, trans=False):
    """`A x = b` (`A^T x = b` if `trans`) directly or by GMRES (see the
    module docstring); `(x, method)` or `(None, None)` if GMRES fails."""
    if A.shape[0] <= DIRECT_MAX_STATES:
        lu = spla.splu(sp.csc_matrix(A), permc_spec="COLAMD")
        return lu.solve(b, trans="T" if trans else "N"), "direct"
    sol = host_gmres(sp.csr_matrix(A.T if trans else A), b, max_iters)
    if sol.status != Status.CONVERGED:
        return None, None
    return sol.value, "gmres"
