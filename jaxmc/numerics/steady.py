"""Long-run (steady-state) behaviour of DTMCs and CTMCs via BSCCs:

1. BSCC decomposition (`graph.bsccs`);
2. the stationary distribution of every BSCC, the solution of the linear
   system `pi Q_B = 0, sum(pi) = 1` (`Q = P - I` for a DTMC, the generator
   `R - diag(E)` for a CTMC), as PRISM does;
3. absorption: the probability of ending in each BSCC, combined with the
   BSCC's long-run values, by one linear solve over the transient states.

Why linear-system solvers and not power iteration: an iteration stopped when
its relative step falls below epsilon is, on slowly mixing chains (polling,
kanban, fms), wrong by that step divided by the spectral gap, orders of
magnitude above epsilon. So both systems are solved to rounding accuracy:

- up to `DIRECT_MAX_STATES` unknowns by sparse LU (SuperLU); its fill-in on
  these lattice-like chains grows fast (4,600 kanban states: 5M factor
  entries, 1.4 s), so only small systems go this way;
- above, by restarted GMRES (`scipy.sparse.linalg.gmres`) to a relative
  residual of `GMRES_RTOL`; the stationary system is first scaled to the
  jump chain (`y = pi * d`, d the diagonal), which makes it well
  conditioned: poll10 (15k states), fms n=4 (36k) and kanban t=3 (58k)
  converge in 0.4-2.5 s;
- if GMRES does not converge within `max_iters` iterations, by Jacobi with
  PRISM's criterion (`epsilon`, `relative`, `max_iters`, `throw`): PRISM's
  `-jacobi` for the stationary system (damped by 1/2 when the Jacobi
  iteration matrix, the jump chain, has a periodic BSCC, on which plain
  Jacobi oscillates forever), `solve_fixed`'s Jacobi for the absorption.

All BSCCs are solved in one system: their equations are independent blocks,
with one equation of each block replaced by its normalisation.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse import csgraph

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel, RewardStructure
from ..lang.ast import ModelType
from ..layout import CSR
from ..solvers import Status, check_solution, jacobi
from . import graph
from ._common import NumericResult, probabilities, solve_fixed, state_of_entry

#: Systems (BSCC states of all BSCCs together, or transient states) up to
#: this size are solved by sparse LU (at most ~0.1 s even on random graphs,
#: whose fill-in is the worst); larger ones by GMRES.
DIRECT_MAX_STATES = 1000

#: Relative residual at which GMRES stops (rounding level for doubles,
#: leaving room for the condition number).
GMRES_RTOL = 1e-13

#: GMRES restart length (memory: this many vectors of the system's size).
GMRES_RESTART = 40


def _gmres(A, b, max_iters):
    """`A x = b` by restarted GMRES, or `None` if it does not converge within
    `max_iters` inner iterations."""
    cycles = max(1, -(-int(max_iters) // GMRES_RESTART))
    x, info = spla.gmres(
        A, b, rtol=GMRES_RTOL, atol=0.0, restart=GMRES_RESTART, maxiter=cycles
    )
    if info != 0 or not np.all(np.isfinite(x)):
        return None
    return x


def _solve(A, b, max_iters, trans=False):
    """`A x = b` (`A^T x = b` if `trans`) directly or by GMRES (see the
    module docstring); `(x, method)` or `(None, None)` if GMRES fails."""
    if A.shape[0] <= DIRECT_MAX_STATES:
        lu = spla.splu(sp.csc_matrix(A), permc_spec="COLAMD")
        return lu.solve(b, trans="T" if trans else "N"), "direct"
    x = _gmres(sp.csr_matrix(A.T if trans else A), b, max_iters)
    return (x, "gmres") if x is not None else (None, None)


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
        (np.ones(len(src) + len(reps)), (np.concatenate([src, np.full(len(reps), n)]),
                                         np.concatenate([dst, reps]))),
        shape=(n + 1, n + 1),
    )
    level = csgraph.shortest_path(g, indices=n, unweighted=True, directed=True)
    level = level[:n].astype(np.int64)
    gaps = np.abs(level[src] + 1 - level[dst])
    period = np.zeros(count, dtype=np.int64)
    np.gcd.at(period, labels[src], gaps)
    return bool(np.all(period[np.bincount(labels[src], minlength=count) > 0] == 1))


def _stationary_linear(k, src, dst, val, diag, lab, reps, max_iters):
    """Solve `Q^T pi = 0` on `k` local states, the equation of each BSCC's
    representative replaced by `sum_{s in B} pi_s = 1`, in the jump-chain
    variables `y = pi * d`: `sum_s y_s P(s,t) - y_t = 0`, `P = Q_off / d`.
    Returns `(pi, method)`, or `(None, None)` if GMRES fails."""
    is_rep = np.zeros(k, dtype=bool)
    is_rep[reps] = True
    rows = np.concatenate([dst, np.arange(k)])
    cols = np.concatenate([src, np.arange(k)])
    vals = np.concatenate([val / diag[src], -np.ones(k)])
    keep = ~is_rep[rows]
    rows = np.concatenate([rows[keep], reps[lab]])
    cols = np.concatenate([cols[keep], np.arange(k)])
    vals = np.concatenate([vals[keep], 1.0 / diag])
    A = sp.csr_matrix((vals, (rows, cols)), shape=(k, k))
    y, method = _solve(A, is_rep.astype(np.float64), max_iters)
    return (None, None) if y is None else (y / diag, method)


def _stationary_jacobi(k, src, dst, val, diag, lab, sizes, damped, kw):
    """PRISM's Jacobi for `Q^T pi = 0`: `pi'_t = sum_s pi_s Q(s,t) / d_t`,
    the damped variant `pi' = (pi + Jacobi(pi)) / 2` being Jacobi on the
    splitting `2d - (Q_off^T + d)` of the same system."""
    rows, cols, vals = dst, src, val
    d = diag
    if damped:
        rows = np.concatenate([rows, np.arange(k)])
        cols = np.concatenate([cols, np.arange(k)])
        vals = np.concatenate([vals, diag])
        d = 2.0 * diag
    A = sp.csr_matrix((vals, (rows, cols)), shape=(k, k))
    A.sum_duplicates()
    A.sort_indices()
    csr = CSR.from_arrays(A.indptr, A.indices, A.data, (k, k))
    x0 = 1.0 / sizes[lab]
    sol = jacobi(csr, jnp.asarray(d), jnp.zeros(k), jnp.asarray(x0), **kw)
    return sol


def stationary_distributions(
    model: ExplicitModel, *, epsilon=1e-6, relative=True, max_iters=100000, throw=True
):
    """Stationary distribution of every BSCC.

    Solved by sparse LU or GMRES to rounding accuracy, else (GMRES not
    converged within `max_iters`) by Jacobi with PRISM's criterion
    (`epsilon`, `relative`, `max_iters`; `throw` raises `ConvergenceError`).

    **Returns:** `(pi, labels, count, result)`: `pi[s]` the stationary
    probability of `s` within its BSCC `labels[s]` (0 outside BSCCs; each
    BSCC sums to 1); `result` a `NumericResult` holding `pi`, with `method`
    `"direct"`, `"gmres"` or `"jacobi"` and `residual` the largest
    `|(pi Q)_s|`.
    """
    _require_markov(model)
    n = model.num_states
    labels, count = graph.bsccs(model)
    inb = labels >= 0
    sizes = np.bincount(labels[inb], minlength=count)
    pi = np.where(inb & (sizes[np.maximum(labels, 0)] == 1), 1.0, 0.0)
    big = inb & (sizes[np.maximum(labels, 0)] > 1)
    if not big.any():  # only absorbing BSCCs
        return pi, labels, count, NumericResult(pi, method="direct")
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
    kw = dict(epsilon=epsilon, relative=relative, max_iters=max_iters, throw=throw)
    x, method = _stationary_linear(k, src, dst, val, diag, lab, reps, max_iters)
    res = dict(method=method)
    if x is None:
        damped = not _aperiodic(lab, len(uniq), src, dst)
        sol = _stationary_jacobi(
            k, src, dst, val, diag, lab, sizes[uniq], damped, kw
        )
        x = np.asarray(sol.value)
        res = dict(method="jacobi", status=Status(int(sol.status)),
                   iterations=int(sol.iterations))
    x = np.maximum(x, 0.0)  # rounding can leave -1e-17 on tiny probabilities
    tot = np.bincount(lab, weights=x, minlength=len(uniq))
    x = x / np.where(tot > 0, tot, 1.0)[lab]
    residual = np.abs(np.bincount(dst, weights=x[src] * val, minlength=k) - x * diag)
    pi[idx] = x
    out = NumericResult(pi, residual=float(residual.max(initial=0.0)), **res)
    return pi, labels, count, out


# ---------------------------------------------------------------------------
# absorption into BSCCs


def _transient_system(model, trans):
    """`(I - P_TT)` over the transient states `trans` (CSC, local indices),
    and the entries from transient states: `(rows, cols, p)` with rows local
    and cols global."""
    n = model.num_states
    idx = np.nonzero(trans)[0]
    local = np.full(n, -1, dtype=np.int64)
    local[idx] = np.arange(len(idx))
    rows = state_of_entry(model)
    p = probabilities(model)
    out = trans[rows] & (p > 0)
    r, c, v = local[rows[out]], model.col[out], p[out]
    tt = trans[c]
    A = sp.eye(len(idx), format="csc") - sp.csc_matrix(
        (v[tt], (r[tt], local[c[tt]])), shape=(len(idx), len(idx))
    )
    return idx, A, (r[~tt], c[~tt], v[~tt])


def _absorb(model, labels, c_bscc, **kw) -> NumericResult:
    """Per-state `sum_B P(reach B) c_B`."""
    inb = labels >= 0
    fixed = np.where(inb, c_bscc[np.maximum(labels, 0)], 0.0)
    trans = ~inb
    k = int(trans.sum())
    if k == 0:
        return NumericResult(fixed, method="direct")
    idx, A, (r, c, v) = _transient_system(model, trans)
    rhs = np.bincount(r, weights=v * fixed[c], minlength=k)
    y, method = _solve(A, rhs, kw["max_iters"])
    if y is not None:
        x = fixed.copy()
        x[idx] = y
        return NumericResult(x, method=method)
    b = np.zeros(model.num_choices)
    return solve_fixed(
        model, probabilities(model), trans, fixed, b, opt=None, method="jacobi", **kw,
    )


def _solver_kw(epsilon, relative, max_iters, throw):
    return dict(epsilon=epsilon, relative=relative, max_iters=max_iters, throw=throw)


def _combine(stat: NumericResult, absorb: NumericResult) -> NumericResult:
    """The absorption result, with the stationary solve's method recorded
    and the worse status of the two."""
    status = max(stat.status, absorb.status)
    extra = dict(absorb.extra, stationary_method=stat.method,
                 stationary_residual=stat.residual)
    return NumericResult(
        absorb.values, status, absorb.iterations + stat.iterations,
        absorb.residual, absorb.method, extra,
    )


def steady_state_values(
    model: ExplicitModel, phi, *, epsilon=1e-6, relative=True, max_iters=10000,
    throw=True,
) -> NumericResult:
    """Per-state `S=?[φ]`: the long-run probability of being in φ from each
    start state, `sum_B P(reach B) pi_B(φ)`."""
    kw = _solver_kw(epsilon, relative, max_iters, throw)
    pi, labels, count, stat = stationary_distributions(model, **kw)
    phi = np.asarray(phi, dtype=bool)
    inb = labels >= 0
    c = np.bincount(labels[inb & phi], weights=pi[inb & phi], minlength=count)
    return _combine(stat, _absorb(model, labels, c, **kw))


def long_run_rewards(
    model: ExplicitModel, reward: RewardStructure, *, epsilon=1e-6, relative=True,
    max_iters=10000, throw=True,
) -> NumericResult:
    """Per-state `R=?[S]`: the long-run average reward. For a DTMC the
    expected one-step reward `state[s] + sum_j P(s,j) trans(s,j)`; for a CTMC
    the reward rate `state[s] + sum_j R(s,j) trans(s,j)`."""
    kw = _solver_kw(epsilon, relative, max_iters, throw)
    pi, labels, count, stat = stationary_distributions(model, **kw)
    n = model.num_states
    r = np.zeros(n) if reward.state is None else np.asarray(reward.state, float).copy()
    if reward.transition is not None:
        r += np.bincount(
            state_of_entry(model), weights=model.val * np.asarray(reward.transition),
            minlength=n,
        )
    inb = labels >= 0
    c = np.bincount(labels[inb], weights=(pi * r)[inb], minlength=count)
    return _combine(stat, _absorb(model, labels, c, **kw))


def steady_state(
    model: ExplicitModel, init=None, *, epsilon=1e-6, relative=True, max_iters=10000,
    throw=True,
) -> np.ndarray:
    """The long-run distribution [n] from `init` (a distribution; default
    uniform over the initial states): `sum_B P_init(reach B) pi_B`.

    The absorption probabilities come from one transposed solve for the
    expected visits `y = init_T + P_TT^T y` of the transient states."""
    kw = _solver_kw(epsilon, relative, max_iters, throw)
    pi, labels, count, _ = stationary_distributions(model, **kw)
    n = model.num_states
    if init is None:
        init = np.zeros(n)
        init[model.initial_states] = 1.0 / len(model.initial_states)
    init = np.asarray(init, dtype=np.float64)
    inb = labels >= 0
    trans = ~inb
    reach = np.bincount(labels[inb], weights=init[inb], minlength=count)
    if (trans & (init > 0)).any():
        idx, A, (r, c, v) = _transient_system(model, trans)
        y, _ = _solve(A, init[idx], max_iters, trans=True)
        if y is not None:
            reach += np.bincount(labels[c], weights=y[r] * v, minlength=count)
        else:
            reach += _reach_jacobi(model, labels, count, init, trans, kw)
    return np.where(inb, reach[np.maximum(labels, 0)] * pi, 0.0)


def _reach_jacobi(model, labels, count, init, trans, kw):
    """`P_init(reach B)` per BSCC by Jacobi on `y = init_T + P_TT^T y`."""
    n = model.num_states
    inb = ~trans
    rows = state_of_entry(model)
    p = probabilities(model)
    tt = trans[rows] & trans[model.col]
    diag_e = tt & (rows == model.col)
    off = np.where(tt & ~diag_e, p, 0.0)
    diag = 1.0 - np.bincount(rows[diag_e], weights=p[diag_e], minlength=n)
    csr = CSR.from_arrays(model.row_ptr, model.col, off, (n, n)).transpose()
    y0 = np.where(trans, init, 0.0)
    sol = jacobi(csr, jnp.asarray(np.where(trans, diag, 1.0)), jnp.asarray(y0),
                 jnp.asarray(y0), **kw)
    y = np.asarray(sol.value)
    into = trans[rows] & inb[model.col]
    return np.bincount(
        labels[model.col[into]], weights=y[rows[into]] * p[into], minlength=count
    )
