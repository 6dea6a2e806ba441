"""Long-run (steady-state) behaviour of DTMCs and CTMCs via BSCCs:

1. BSCC decomposition (`graph.bsccs`);
2. the stationary distribution of every BSCC, the solution of the linear
   system `pi Q_B = 0, sum(pi) = 1` (`Q = P - I` for a DTMC, the generator
   `R - diag(E)` for a CTMC), as PRISM does;
3. absorption: the probability of ending in each BSCC, combined with the
   BSCC's long-run values, by one linear solve over the transient states.

All BSCCs are solved in one system: their equations are independent blocks,
with one equation of each block replaced by its normalisation.

This module serves the long-run distribution (`steady_state`,
`stationary_distributions`); the per-state values of `S=? [phi]` and
`R=? [S]`, which need only each BSCC's gain and come with a certified error
bound, are `jaxmc.numerics.steady_values` (which reuses the absorption
here).

How the systems are solved (sparse LU, GMRES, on the host or the device,
then PRISM's Jacobi where those fail) is `jaxmc.numerics.steady_solve`.

With `SolveOptions(precision="fp32")` the direct and Krylov solves are skipped (their
stopping test, a relative residual of 1e-13, is below float32's rounding):
the stationary system and the absorption are solved by PRISM's (damped)
Jacobi with the matrix and the iterate in float32, which is what fp32 is
for (the SpMV of large chains on a GPU); values agree with fp64 to ~1e-5.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel
from ..lang.ast import ModelType
from ..options import SolveOptions, check_options
from ..solvers import Status, jacobi
from . import graph
from .device import DeviceModel, device_model_for
from .fixed_point import solve_fixed
from .matrices import build_ordered, layout_name, undo_order
from .precision import to_precision
from .result import NumericResult
from .steady_solve import (
    canonical,
    device_solve,
    host_solve,
    solves_on_device,
    system_kind,
)
from .timing import stage
from .transitions import probabilities, state_of_entry


def _require_markov(model):
    if model.model_type not in (ModelType.DTMC, ModelType.CTMC):
        raise ModelCheckingError(
            "steady-state and long-run properties need a DTMC or CTMC",
        )


def _off_diagonal(model: ExplicitModel, keep: np.ndarray):
    """Entries `(src, dst, value)` of positive off-diagonal rates (CTMC) or
    probabilities (DTMC) leaving states in `keep`. Self-loops cancel out of
    `Q` (they add to the row sum and to the diagonal), so they are dropped."""
    src = state_of_entry(model)
    dst = model.col
    ok = keep[src] & (src != dst) & (model.val > 0)
    return src[ok], dst[ok], np.asarray(model.val, np.float64)[ok]


def _aperiodic(labels, count, src, dst) -> bool:
    """Whether every BSCC of the graph `src -> dst` (edges inside BSCCs) is
    aperiodic: the period is the gcd of `level(u) + 1 - level(v)` over its
    edges, for BFS levels from any one state per BSCC."""
    n = len(labels)
    inb = labels >= 0
    reps = np.unique(labels[inb], return_index=True)[1]
    reps = np.nonzero(inb)[0][reps]
    g = sp.csr_matrix(
        (
            np.ones(len(src) + len(reps)),
            (np.concatenate([src, np.full(len(reps), n)]), np.concatenate([dst, reps])),
        ),
        shape=(n + 1, n + 1),
    )
    level = csgraph.shortest_path(g, indices=n, unweighted=True, directed=True)
    level = level[:n].astype(np.int64)
    gaps = np.abs(level[src] + 1 - level[dst])
    period = np.zeros(count, dtype=np.int64)
    np.gcd.at(period, labels[src], gaps)
    return bool(np.all(period[np.bincount(labels[src], minlength=count) > 0] == 1))


def _stationary_linear(
    k, src, dst, val, diag, lab, reps, max_iters, dm=None, rank=None
):
    """Solve `Q^T pi = 0` on `k` local states, the equation of each BSCC's
    representative replaced by `sum_{s in B} pi_s = 1`, in the jump-chain
    variables `y = pi * d`: `sum_s y_s P(s,t) - y_t = 0`, `P = Q_off / d`.
    On the host (`dm=None`) or by device Krylov solves on `dm`'s layout.
    Returns `(pi, info)`, `pi` None if GMRES fails; `info` holds `method`,
    `layout` and (device) `iterations`."""
    is_rep = np.zeros(k, dtype=bool)
    is_rep[reps] = True
    if dm is not None:
        keep = ~is_rep[dst]
        off = sp.csr_matrix(
            (val[keep] / diag[src[keep]], (dst[keep], src[keep])), shape=(k, k)
        )
        nb = int(lab.max(initial=-1)) + 1
        sol, method, name = device_solve(
            off,
            is_rep.astype(np.float64),
            dm,
            max_iters,
            norm=(is_rep, lab, 1.0 / diag, nb),
            rank=rank,
        )
        info = dict(method=method, layout=name, iterations=int(sol.iterations))
        if Status(int(sol.status)) != Status.CONVERGED:
            return None, info
        return np.asarray(sol.value) / diag, info
    rows = np.concatenate([dst, np.arange(k)])
    cols = np.concatenate([src, np.arange(k)])
    vals = np.concatenate([val / diag[src], -np.ones(k)])
    keep = ~is_rep[rows]
    rows = np.concatenate([rows[keep], reps[lab]])
    cols = np.concatenate([cols[keep], np.arange(k)])
    vals = np.concatenate([vals[keep], 1.0 / diag])
    A = sp.csr_matrix((vals, (rows, cols)), shape=(k, k))
    y, method = host_solve(A, is_rep.astype(np.float64), max_iters)
    info = dict(method=method or "gmres", layout="host")
    return (None, info) if y is None else (y / diag, info)


def _stationary_jacobi(
    k,
    src,
    dst,
    val,
    diag,
    lab,
    sizes,
    damped,
    kw,
    dm=None,
    precision="fp64",
    rank=None,
):
    """PRISM's Jacobi for `Q^T pi = 0`: `pi'_t = sum_s pi_s Q(s,t) / d_t`,
    the damped variant `pi' = (pi + Jacobi(pi)) / 2` being Jacobi on the
    splitting `2d - (Q_off^T + d)` of the same system (SpMV on `dm`'s
    layout, CSR for None,
    matrix and iterate in `precision`)."""
    rows, cols, vals = dst, src, val
    d = diag
    if damped:
        rows = np.concatenate([rows, np.arange(k)])
        cols = np.concatenate([cols, np.arange(k)])
        vals = np.concatenate([vals, diag])
        d = 2.0 * diag
    A = canonical(sp.csr_matrix((vals, (rows, cols)), shape=(k, k)))
    kind, fallback = system_kind(A, dm, rank)
    with stage("layout"):
        mat, order = build_ordered(
            A.indptr, A.indices, A.data, (k, k), kind, rank, fallback
        )
    x0 = 1.0 / sizes[lab]
    if order is not None:
        d, x0 = order.apply(d), order.apply(x0)
    if precision == "fp64":
        sol = jacobi(mat, jnp.asarray(d), jnp.zeros(k), jnp.asarray(x0), **kw)
    else:
        f32 = lambda v: jnp.asarray(v, jnp.float32)  # noqa: E731
        sol = jacobi(
            to_precision(mat, precision), f32(d), f32(np.zeros(k)), f32(x0), **kw
        )
    return undo_order(sol, order), layout_name(mat)


def stationary_distributions(
    model: ExplicitModel,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
    device: bool | None = None,
):
    """Stationary distribution of every BSCC.

    Solved by sparse LU or GMRES to rounding accuracy, else (GMRES not
    converged within `max_iters`) by Jacobi with PRISM's criterion
    (`options`: `epsilon`, `relative`, `max_iters`; `throw` raises
    `ConvergenceError`). GMRES and Jacobi run on the device (matrix in
    `device_model`'s layout) when `device` is True, or, for `device=None`,
    when the system is large on a GPU or the options name a layout other
    than "auto"/"csr" (module docstring).

    **Returns:** `(pi, labels, count, result)`: `pi[s]` the stationary
    probability of `s` within its BSCC `labels[s]` (0 outside BSCCs; each
    BSCC sums to 1); `result` a `NumericResult` holding `pi`, with `method`
    `"direct"`, `"gmres"` or `"jacobi"`, `residual` the largest
    `|(pi Q)_s|`, `extra["layout"]` the device layout ("host" for the
    host's LU/GMRES) and `extra["precision"]` the float type of the solve
    (with `precision="fp32"`, Jacobi in float32: module docstring).
    """
    _require_markov(model)
    options = check_options(options)
    dm = device_model_for(model, options, device_model)
    precision, max_iters = options.precision, options.max_iters
    n = model.num_states
    with stage("precompute"):
        labels, count = graph.bsccs(model)
    inb = labels >= 0
    sizes = np.bincount(labels[inb], minlength=count)
    pi = np.where(inb & (sizes[np.maximum(labels, 0)] == 1), 1.0, 0.0)
    big = inb & (sizes[np.maximum(labels, 0)] > 1)
    if not big.any():  # only absorbing BSCCs
        return (
            pi,
            labels,
            count,
            NumericResult(
                pi, method="direct", extra={"layout": "host", "precision": "fp64"}
            ),
        )
    with stage("solve"):
        idx = np.nonzero(big)[0]
        k = len(idx)
        local = np.full(n, -1, dtype=np.int64)
        local[idx] = np.arange(k)
        src, dst, val = _off_diagonal(model, big)
        src, dst = local[src], local[dst]
        diag = np.bincount(src, weights=val, minlength=k)
        # BSCCs renumbered 0..nb-1 over the non-trivial ones.
        uniq, lab = np.unique(labels[idx], return_inverse=True)
        reps = np.unique(lab, return_index=True)[1]
    kw = _solver_kw(options)
    on_device = solves_on_device(k, dm, device)
    rank = dm.dia_rank(idx)
    if precision == "fp64":
        with stage("solve"):
            x, info = _stationary_linear(
                k,
                src,
                dst,
                val,
                diag,
                lab,
                reps,
                max_iters,
                dm if on_device else None,
                rank,
            )
        res = dict(
            method=info["method"],
            iterations=info.get("iterations", 0),
            extra={"layout": info["layout"], "precision": "fp64"},
        )
    else:  # fp32: straight to Jacobi (module docstring)
        x, res = None, dict(iterations=0)
    if x is None:
        with stage("precompute"):
            damped = not _aperiodic(lab, len(uniq), src, dst)
        with stage("solve"):
            sol, name = _stationary_jacobi(
                k,
                src,
                dst,
                val,
                diag,
                lab,
                sizes[uniq],
                damped,
                kw,
                dm if on_device else None,
                precision,
                rank,
            )
            x = np.asarray(sol.value, dtype=np.float64)
        res = dict(
            method="jacobi",
            status=Status(int(sol.status)),
            iterations=int(sol.iterations) + res["iterations"],
            extra={"layout": name, "precision": precision},
        )
    with stage("solve"):
        x = np.maximum(x, 0.0)  # rounding can leave -1e-17 on tiny probabilities
        tot = np.bincount(lab, weights=x, minlength=len(uniq))
        x = x / np.where(tot > 0, tot, 1.0)[lab]
        residual = np.abs(
            np.bincount(dst, weights=x[src] * val, minlength=k) - x * diag
        )
    pi[idx] = x
    out = NumericResult(pi, residual=float(residual.max(initial=0.0)), **res)
    return pi, labels, count, out


# ---------------------------------------------------------------------------
# absorption into BSCCs


def _transient_system(model, trans):
    """`P_TT` over the transient states `trans` (CSC, local indices), and
    the entries from transient states to the others: `(rows, cols, p)` with
    rows local and cols global."""
    n = model.num_states
    idx = np.nonzero(trans)[0]
    local = np.full(n, -1, dtype=np.int64)
    local[idx] = np.arange(len(idx))
    rows = state_of_entry(model)
    p = probabilities(model)
    out = trans[rows] & (p > 0)
    r, c, v = local[rows[out]], model.col[out], p[out]
    tt = trans[c]
    P = sp.csc_matrix((v[tt], (r[tt], local[c[tt]])), shape=(len(idx), len(idx)))
    return idx, P, (r[~tt], c[~tt], v[~tt])


def _solve_transient(P, rhs, max_iters, trans, dm, device, rank=None):
    """`(I - P) x = rhs` (`(I - P)^T x = rhs` if `trans`), on the host
    (LU or GMRES) or by device Krylov solves on `dm`'s layout (see
    `solves_on_device`; `rank`: the unknowns' lexicographic ranks).
    Returns `(x or None, info)`."""
    k = P.shape[0]
    if solves_on_device(k, dm, device):
        sol, method, name = device_solve(
            P.T if trans else P, rhs, dm, max_iters, rank=rank
        )
        info = dict(method=method, layout=name, iterations=int(sol.iterations))
        ok = Status(int(sol.status)) == Status.CONVERGED
        return (np.asarray(sol.value) if ok else None), info
    y, method = host_solve(sp.eye(k, format="csc") - P, rhs, max_iters, trans=trans)
    return y, dict(method=method or "gmres", layout="host")


def _absorb(model, labels, c_bscc, *, options, dm, device=None) -> NumericResult:
    """Per-state `sum_B P(reach B) c_B` (with fp32 by `solve_fixed`'s Jacobi
    in float32, else by LU/GMRES first)."""
    precision = options.precision
    inb = labels >= 0
    fixed = np.where(inb, c_bscc[np.maximum(labels, 0)], 0.0)
    trans = ~inb
    k = int(trans.sum())
    if k == 0:
        return NumericResult(fixed, method="none")
    with stage("solve"):
        idx, P, (r, c, v) = _transient_system(model, trans)
        rhs = np.bincount(r, weights=v * fixed[c], minlength=k)
        y, info = (
            (None, None)
            if precision != "fp64"
            else _solve_transient(
                P,
                rhs,
                options.max_iters,
                False,
                dm,
                device,
                dm.dia_rank(idx),
            )
        )
    if y is not None:
        x = fixed.copy()
        x[idx] = y
        return NumericResult(
            x,
            method=info["method"],
            iterations=info.get("iterations", 0),
            extra={"layout": info["layout"], "precision": "fp64"},
        )
    b = np.zeros(model.num_choices)
    return solve_fixed(
        model,
        probabilities(model),
        trans,
        fixed,
        b,
        opt=None,
        method="jacobi",
        options=options,
        device_model=dm if solves_on_device(k, dm, device) else dm.on_csr(),
    )


def _solver_kw(o: SolveOptions):
    return dict(
        epsilon=o.epsilon, relative=o.relative, max_iters=o.max_iters, throw=o.throw
    )


def steady_state(
    model: ExplicitModel,
    init=None,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
    device: bool | None = None,
) -> np.ndarray:
    """The long-run distribution [n] from `init` (a distribution; default
    uniform over the initial states): `sum_B P_init(reach B) pi_B`.

    The absorption probabilities come from one transposed solve for the
    expected visits `y = init_T + P_TT^T y` of the transient states."""
    options = check_options(options)
    dm = device_model_for(model, options, device_model)
    max_iters, kw = options.max_iters, _solver_kw(options)
    pi, labels, count, _ = stationary_distributions(
        model, options=options, device_model=dm, device=device
    )
    n = model.num_states
    if init is None:
        init = np.zeros(n)
        init[model.initial_states] = 1.0 / len(model.initial_states)
    init = np.asarray(init, dtype=np.float64)
    inb = labels >= 0
    trans = ~inb
    reach = np.bincount(labels[inb], weights=init[inb], minlength=count)
    if (trans & (init > 0)).any():
        idx, P, (r, c, v) = _transient_system(model, trans)
        y, _ = _solve_transient(
            P, init[idx], max_iters, True, dm, device, dm.dia_rank(idx)
        )
        if y is not None:
            reach += np.bincount(labels[c], weights=y[r] * v, minlength=count)
        else:
            reach += _reach_jacobi(
                model,
                labels,
                count,
                init,
                trans,
                kw,
                dm if solves_on_device(len(idx), dm, device) else None,
            )
    return np.where(inb, reach[np.maximum(labels, 0)] * pi, 0.0)


def _reach_jacobi(model, labels, count, init, trans, kw, dm=None):
    """`P_init(reach B)` per BSCC by Jacobi on `y = init_T + P_TT^T y`, on
    `dm`'s layout (CSR without one)."""
    n = model.num_states
    inb = ~trans
    rows = state_of_entry(model)
    p = probabilities(model)
    tt = trans[rows] & trans[model.col]
    diag_e = tt & (rows == model.col)
    off = np.where(tt & ~diag_e, p, 0.0)
    diag = 1.0 - np.bincount(rows[diag_e], weights=p[diag_e], minlength=n)
    At = canonical(sp.csr_matrix((off, (model.col, rows)), shape=(n, n)))
    rank = None if dm is None else dm.dia_rank()
    kind, fallback = system_kind(At, dm, rank)
    mat, order = build_ordered(
        At.indptr, At.indices, At.data, (n, n), kind, rank, fallback
    )
    at = (lambda v: v) if order is None else order.apply
    y0 = at(np.where(trans, init, 0.0))
    sol = jacobi(
        mat,
        jnp.asarray(at(np.where(trans, diag, 1.0))),
        jnp.asarray(y0),
        jnp.asarray(y0),
        **kw,
    )
    y = np.asarray(undo_order(sol, order).value)
    into = trans[rows] & inb[model.col]
    return np.bincount(
        labels[model.col[into]], weights=y[rows[into]] * p[into], minlength=count
    )
