"""Long-run (steady-state) behaviour of DTMCs and CTMCs via BSCCs:

1. BSCC decomposition (`graph.bsccs`);
2. the stationary distribution of every BSCC at once, by power iteration on
   an aperiodic chain with the same stationary distributions: `(I + P)/2` for
   a DTMC (so periodic BSCCs converge), the uniformised `I + Q/q` for a CTMC;
3. absorption: the probability of ending in each BSCC, combined with the
   BSCC's long-run values, by one linear solve over the transient states.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel, RewardStructure
from ..kernels.spmv import spmv
from ..lang.ast import ModelType
from ..layout import CSR
from ..solvers import check_solution, jacobi
from ..solvers._linear import _args, fixed_point
from . import graph
from ._common import NumericResult, exit_rates, probabilities, solve_fixed, state_of_entry
from .ctmc import UNIF_FACTOR


def _require_markov(model):
    if model.model_type not in (ModelType.DTMC, ModelType.CTMC):
        raise ModelCheckingError(
            "steady-state and long-run properties need a DTMC or CTMC",
        )


@eqx.filter_jit
def _stationary(AT, e, q, x0, epsilon, max_iters, relative):
    return fixed_point(lambda x: x + (spmv(AT, x) - e * x) / q, x0, epsilon, relative, max_iters)


def stationary_distributions(
    model: ExplicitModel, *, epsilon=1e-6, relative=True, max_iters=100000, throw=True
):
    """Stationary distribution of every BSCC.

    **Returns:** `(pi, labels, count, result)`: `pi[s]` the stationary
    probability of `s` within its BSCC `labels[s]` (0 outside BSCCs; each
    BSCC sums to 1).
    """
    _require_markov(model)
    n = model.num_states
    labels, count = graph.bsccs(model)
    inb = labels >= 0
    rows = state_of_entry(model)
    keep = inb[rows] & (model.val > 0)
    vals = np.where(keep, model.val, 0.0)
    if model.model_type == ModelType.CTMC:
        e = np.where(inb, exit_rates(model), 0.0)
        q = UNIF_FACTOR * float(e.max(initial=0.0))
    else:
        e = np.bincount(rows, weights=vals, minlength=n)
        q = 2.0
    sizes = np.bincount(labels[inb], minlength=count)
    x0 = np.where(inb, 1.0 / sizes[np.maximum(labels, 0)], 0.0)
    if q == 0:  # only absorbing BSCCs
        return x0, labels, count, NumericResult(x0, method="power")
    csr = CSR.from_arrays(model.row_ptr, model.col, vals, (n, n))
    AT = csr.transpose()
    eps, mi = _args(epsilon, max_iters)
    sol = _stationary(AT, jnp.asarray(e), jnp.asarray(q), jnp.asarray(x0), eps, mi, bool(relative))
    sol = check_solution(sol, throw, "Steady-state power iteration")
    pi = np.asarray(sol.value)
    tot = np.bincount(labels[inb], weights=pi[inb], minlength=count)
    pi = np.where(inb, pi / np.where(tot > 0, tot, 1.0)[np.maximum(labels, 0)], 0.0)
    res = NumericResult(pi, method="power", iterations=int(sol.iterations),
                        residual=float(sol.residual))
    return pi, labels, count, res


def _absorb(model, labels, c_bscc, **kw) -> NumericResult:
    """Per-state `sum_B P(reach B) c_B`."""
    inb = labels >= 0
    fixed = np.where(inb, c_bscc[np.maximum(labels, 0)], 0.0)
    b = np.zeros(model.num_choices)
    return solve_fixed(
        model, probabilities(model), ~inb, fixed, b, opt=None,
        method=kw.pop("method", "jacobi"), **kw,
    )


def _solver_kw(epsilon, relative, max_iters, throw):
    return dict(epsilon=epsilon, relative=relative, max_iters=max_iters, throw=throw)


def steady_state_values(
    model: ExplicitModel, phi, *, epsilon=1e-6, relative=True, max_iters=10000,
    throw=True,
) -> NumericResult:
    """Per-state `S=?[φ]`: the long-run probability of being in φ from each
    start state, `sum_B P(reach B) pi_B(φ)`."""
    pi, labels, count, _ = stationary_distributions(
        model, epsilon=epsilon, relative=relative, throw=throw
    )
    phi = np.asarray(phi, dtype=bool)
    inb = labels >= 0
    c = np.bincount(labels[inb & phi], weights=pi[inb & phi], minlength=count)
    return _absorb(model, labels, c, **_solver_kw(epsilon, relative, max_iters, throw))


def long_run_rewards(
    model: ExplicitModel, reward: RewardStructure, *, epsilon=1e-6, relative=True,
    max_iters=10000, throw=True,
) -> NumericResult:
    """Per-state `R=?[S]`: the long-run average reward. For a DTMC the
    expected one-step reward `state[s] + sum_j P(s,j) trans(s,j)`; for a CTMC
    the reward rate `state[s] + sum_j R(s,j) trans(s,j)`."""
    pi, labels, count, _ = stationary_distributions(
        model, epsilon=epsilon, relative=relative, throw=throw
    )
    n = model.num_states
    r = np.zeros(n) if reward.state is None else np.asarray(reward.state, float).copy()
    if reward.transition is not None:
        r += np.bincount(
            state_of_entry(model), weights=model.val * np.asarray(reward.transition),
            minlength=n,
        )
    inb = labels >= 0
    c = np.bincount(labels[inb], weights=(pi * r)[inb], minlength=count)
    return _absorb(model, labels, c, **_solver_kw(epsilon, relative, max_iters, throw))


def steady_state(
    model: ExplicitModel, init=None, *, epsilon=1e-6, relative=True, max_iters=10000,
    throw=True,
) -> np.ndarray:
    """The long-run distribution [n] from `init` (a distribution; default
    uniform over the initial states): `sum_B P_init(reach B) pi_B`.

    The absorption probabilities come from one transposed solve for the
    expected visits `y = init_T + P_TT^T y` of the transient states."""
    pi, labels, count, _ = stationary_distributions(
        model, epsilon=epsilon, relative=relative, throw=throw
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
        rows = state_of_entry(model)
        p = probabilities(model)
        tt = trans[rows] & trans[model.col]
        diag_e = tt & (rows == model.col)
        off = np.where(tt & ~diag_e, p, 0.0)
        diag = 1.0 - np.bincount(rows[diag_e], weights=p[diag_e], minlength=n)
        csr = CSR.from_arrays(model.row_ptr, model.col, off, (n, n)).transpose()
        y0 = np.where(trans, init, 0.0)
        sol = jacobi(csr, jnp.asarray(np.where(trans, diag, 1.0)), jnp.asarray(y0),
                     jnp.asarray(y0), **_solver_kw(epsilon, relative, max_iters, throw))
        y = np.asarray(sol.value)
        into = trans[rows] & inb[model.col]
        reach += np.bincount(
            labels[model.col[into]], weights=y[rows[into]] * p[into], minlength=count
        )
    return np.where(inb, reach[np.maximum(labels, 0)] * pi, 0.0)
