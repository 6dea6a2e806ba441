"""Shared machinery of the numerics helpers: the result type, the device
matrix cache, one-step rewards, and `solve_fixed`, the one engine behind
unbounded reachability, reachability/total rewards and BSCC absorption:

    x_s = opt_{c in s} (b_c + sum_t P(c, t) x_t)   for s in `maybe`,
    x_s = fixed_s                                  otherwise.

Rows of non-`maybe` states are masked by *values* (never by shape), so the
compiled solver is reused for every property on a model.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from ..errors import ModelCheckingError, UnsupportedError
from ..explore.model import ExplicitModel
from ..lang.ast import ModelType
from ..layout import SparseModel, from_arrays, from_model
from ..solvers import (
    Status,
    bicgstab,
    gauss_seidel,
    interval_iteration,
    jacobi,
    power,
    value_iteration,
)


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


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def sparse(model: ExplicitModel, kind: str = "csr") -> SparseModel:
    """The device matrix of `model` (cached per model and layout kind)."""
    per = _CACHE.setdefault(model, {})
    if kind not in per:
        per[kind] = from_model(model, kind)
    return per[kind]


def state_of_entry(model: ExplicitModel) -> np.ndarray:
    return model.state_of_choice()[model.row_of_entry()]


def exit_rates(model: ExplicitModel) -> np.ndarray:
    """E(s): the row sums of a CTMC's rate matrix (0 for absorbing states)."""
    return np.bincount(state_of_entry(model), weights=model.val, minlength=model.num_states)


def probabilities(model: ExplicitModel) -> np.ndarray:
    """Entry probabilities: `val` for DTMCs/MDPs; for a CTMC those of the
    embedded DTMC (`rate / E(s)`). An absorbing CTMC state has no entries;
    callers treat it as a self-loop (it is never a "maybe" state)."""
    if model.model_type == ModelType.CTMC:
        e = exit_rates(model)
        return model.val / e[state_of_entry(model)]
    return np.asarray(model.val, dtype=np.float64)


def check_type(model: ExplicitModel, opt):
    """Validate `opt` against the model type."""
    if model.model_type not in (ModelType.DTMC, ModelType.CTMC, ModelType.MDP):
        raise UnsupportedError(f"model type {model.model_type.value} is not supported")
    if model.is_nondeterministic:
        if opt not in ("min", "max"):
            raise ModelCheckingError(
                "an MDP property needs `min` or `max`",
                hint="write Pmin=?/Pmax=? or Rmin=?/Rmax=?",
            )
    elif opt not in (None, "min", "max"):
        raise ValueError(f"`opt` must be None, 'min' or 'max', not {opt!r}")


def choice_rewards(model: ExplicitModel, reward, probs=None) -> np.ndarray:
    """Expected one-step reward of each choice: `state[s] + sum_e P_e trans_e`."""
    m = model.num_choices
    r = np.zeros(m)
    if reward.state is not None:
        r += np.asarray(reward.state, dtype=np.float64)[model.state_of_choice()]
    if reward.transition is not None:
        p = probabilities(model) if probs is None else probs
        r += np.bincount(
            model.row_of_entry(), weights=p * np.asarray(reward.transition), minlength=m
        )
    return r


LINEAR = ("jacobi", "gauss_seidel", "power", "bicgstab")
MINMAX = ("value_iteration", "interval_iteration")


def default_method(model, method):
    if method is None:
        return "value_iteration" if model.is_nondeterministic else "jacobi"
    if method not in LINEAR + MINMAX:
        raise ValueError(
            f"unknown `method` {method!r}; expected one of {LINEAR + MINMAX}"
        )
    if model.is_nondeterministic and method in LINEAR:
        raise ModelCheckingError(
            f"method {method!r} solves linear systems and cannot solve an MDP",
            hint="use method='value_iteration' or 'interval_iteration'",
        )
    return method


def _result(sol, method, extra=None) -> NumericResult:
    return NumericResult(
        values=np.asarray(sol.value, dtype=np.float64),
        status=Status(int(sol.status)),
        iterations=int(sol.iterations),
        residual=float(sol.residual),
        method=method,
        extra=extra or {},
    )


def solve_fixed(
    model: ExplicitModel,
    probs: np.ndarray,
    maybe: np.ndarray,
    fixed: np.ndarray,
    b: np.ndarray,
    *,
    opt: str | None,
    method: str,
    epsilon: float,
    relative: bool,
    max_iters: int,
    throw: bool,
    upper: np.ndarray | None = None,
    layout: str = "csr",
    M: SparseModel | None = None,
) -> NumericResult:
    """Solve `x = opt(b + P x)` on `maybe`, `x = fixed` elsewhere.

    `probs` are the entry probabilities of `model` (or of `M` if given), `b`
    the per-choice constants (±inf disables a choice of an MDP). `upper` is an
    upper bound on the solution for interval iteration (which also needs the
    maybe states free of end components; see `jaxmc.numerics.reach`).
    """
    if M is None:
        M = sparse(model, layout)
    n = M.n_states
    soc = np.asarray(M.group_ids)
    rows = np.asarray(M.csr.row_ids)
    cols = np.asarray(M.csr.indices)
    maybe = np.asarray(maybe, dtype=bool)
    fixed = np.where(maybe, 0.0, np.asarray(fixed, dtype=np.float64))
    if not maybe.any():
        return NumericResult(values=fixed.copy(), method=method)
    state_row = soc[rows]
    data = np.where(maybe[state_row], probs, 0.0)
    bb = np.where(maybe[soc], b, fixed[soc])
    x0 = fixed
    kw = dict(epsilon=epsilon, relative=relative, max_iters=max_iters, throw=throw)
    if method == "jacobi":
        on_diag = cols == state_row
        diag = 1.0 - np.bincount(rows[on_diag], weights=data[on_diag], minlength=n)
        A = M.with_values(jnp.asarray(np.where(on_diag, 0.0, data))).matrix
        sol = jacobi(A, jnp.asarray(diag), jnp.asarray(bb), jnp.asarray(x0), **kw)
    elif method == "gauss_seidel":
        import scipy.sparse as scipy_sparse

        A = scipy_sparse.csr_matrix((data, (state_row, cols)), shape=(n, n))
        sol = gauss_seidel(A, bb, x0, **kw)
    elif method == "power":
        A = M.with_values(jnp.asarray(data)).matrix
        sol = power(A, jnp.asarray(bb), jnp.asarray(x0), **kw)
    elif method == "bicgstab":
        A = M.with_values(jnp.asarray(data)).matrix
        sol = bicgstab(A, jnp.ones(n), jnp.asarray(bb), jnp.asarray(x0), **kw)
    elif method == "value_iteration":
        Mv = M.with_values(jnp.asarray(data))
        sol = value_iteration(Mv, jnp.asarray(bb), jnp.asarray(x0), opt or "max", **kw)
    elif method == "interval_iteration":
        if upper is None:
            raise UnsupportedError(
                "interval iteration needs an upper bound, which jaxmc only has "
                "for probabilities",
                hint="use method='value_iteration'",
            )
        Mv = M.with_values(jnp.asarray(data))
        up = np.where(maybe, upper, fixed)
        sol, lo, hi = interval_iteration(
            Mv, jnp.asarray(bb), jnp.asarray(x0), jnp.asarray(up), opt or "max", **kw
        )
        return _result(sol, method, {"lower": np.asarray(lo), "upper": np.asarray(hi)})
    else:  # pragma: no cover - validated by default_method
        raise ValueError(method)
    return _result(sol, method)


def quotient(model: ExplicitModel, probs, labels, count, inside):
    """Collapse end components: every state with `labels[s] = k >= 0` becomes
    one state; choices inside (`inside[c]`) are dropped, the others kept with
    successors renamed. Returns `(M, rep, keep, idx, probs)`: the quotient
    `SparseModel`, the new state of every old state, the old index of every
    kept choice, the old index of every kept entry and their probabilities.
    The caller restricts per-choice data with `keep`."""
    n = model.num_states
    ec = labels >= 0
    others = np.nonzero(~ec)[0]
    rep = np.empty(n, dtype=np.int64)
    rep[others] = np.arange(len(others))
    rep[ec] = len(others) + labels[ec]
    n2 = len(others) + count
    soc = model.state_of_choice()
    keep = np.nonzero(~inside)[0]
    keep = keep[np.argsort(rep[soc[keep]], kind="stable")]
    new_state = rep[soc[keep]]
    counts = np.bincount(new_state, minlength=n2)
    if (counts == 0).any():
        raise ModelCheckingError("an end component without exit was not removed")
    choice_ptr = np.concatenate([[0], np.cumsum(counts)])
    starts, ends = model.row_ptr[keep], model.row_ptr[keep + 1]
    lens = ends - starts
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
    row_ptr = np.concatenate([[0], np.cumsum(lens)])
    M = from_arrays(
        choice_ptr, row_ptr, rep[model.col[idx]], np.zeros(len(idx)),
        nondeterministic=True,
    )
    return M, rep, keep, idx, probs[idx]
