"""CTMC numerics: exit rates, the embedded and uniformised DTMCs, and the
time-bounded properties computed by uniformisation with Fox–Glynn weights
(PRISM's approach): `U<=t`, `U[t1,t2]`, `U>=t`, `I=t`, `C<=t` and transient
distributions.

The uniformised matrix `P = I + Q/q` (q = 1.02 max E, as PRISM) is never
built: one step is `x + (R x - E x) / q` with the rate matrix `R`, so states
are made absorbing by zeroing their rates (values, not structure). The sum
`sum_i w_i P^i x` runs in one jitted `lax.fori_loop` with a traced trip count
and weights padded to a power of two, so new times rarely recompile.

Each result's certified `bound` is the Fox–Glynn truncation error: the
Poisson mass outside the window is at most `delta` (PRISM's `epsilon / 8`),
so a sum of `P^i x` (each at most `max|x|`) with the window's renormalised
weights is within `2 delta max|x|` of the infinite sum; the cumulative
weights' bound is in `_cumulative_bound`. `delta` is the Chernoff bound on
the mass outside the window (`tail_mass`), plus the rounding of the steps.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax import lax

from ..errors import ModelCheckingError
from ..explore.model import ExplicitModel, RewardStructure
from ..kernels.spmv import spmv
from ..lang.ast import ModelType
from ..layout import host_array
from ..options import SolveOptions, check_options
from .device import DeviceModel, device_model_for
from .foxglynn import fox_glynn
from .matrices import (
    build_matrix,
    build_ordered,
    host_structure,
    layout_name,
    valued,
)
from .result import NumericResult
from .timing import stage
from .transitions import exit_rates, state_of_entry


#: PRISM's uniformisation rate factor: q = 1.02 * max exit rate.
UNIF_FACTOR = 1.02


def _require_ctmc(model):
    if model.model_type != ModelType.CTMC:
        raise ModelCheckingError(
            f"this computation needs a CTMC, not a {model.model_type.value.upper()}"
        )


def _with_self_loops(model: ExplicitModel, val, add_diag) -> ExplicitModel:
    """DTMC with entry values `val` plus `add_diag[s]` on the diagonal
    (merged into existing diagonal entries); transition rewards of new
    entries are 0."""
    n = model.num_states
    rows = state_of_entry(model)
    P = sp.csr_matrix((val, (rows, model.col)), shape=(n, n))
    D = sp.diags(add_diag)
    out = (P + D).tocsr()
    out.sort_indices()
    out.eliminate_zeros()
    # Re-align transition rewards with the new entry order.
    key_old = rows * n + model.col
    key_new = np.repeat(np.arange(n), np.diff(out.indptr)) * n + out.indices
    pos = np.searchsorted(key_old, key_new)
    pos = np.minimum(pos, len(key_old) - 1) if len(key_old) else pos
    found = (key_old[pos] == key_new) if len(key_old) else np.zeros(len(key_new), bool)
    rewards = []
    for r in model.rewards:
        tr = None
        if r.transition is not None:
            tr = np.where(found, np.asarray(r.transition)[pos], 0.0)
        rewards.append(RewardStructure(r.name, r.state, tr))
    return dataclasses.replace(
        model,
        model_type=ModelType.DTMC,
        row_ptr=out.indptr.astype(np.int64),
        col=out.indices.astype(np.int64),
        val=out.data.astype(np.float64),
        rewards=tuple(rewards),
        provenance=None,
    )


def embedded_dtmc(model: ExplicitModel) -> ExplicitModel:
    """The embedded DTMC (jump chain): `P(s, t) = R(s, t) / E(s)`; absorbing
    states get a self-loop."""
    _require_ctmc(model)
    e = exit_rates(model)
    val = model.val / np.where(e > 0, e, 1.0)[state_of_entry(model)]
    return _with_self_loops(model, val, (e == 0).astype(np.float64))


def uniformisation_rate(model: ExplicitModel) -> float:
    return UNIF_FACTOR * float(exit_rates(model).max(initial=0.0))


def uniformise(model: ExplicitModel, q: float | None = None) -> ExplicitModel:
    """The uniformised DTMC `I + Q/q` (default `q = 1.02 max E`)."""
    _require_ctmc(model)
    e = exit_rates(model)
    q = uniformisation_rate(model) if q is None else q
    if q <= 0:
        q = 1.0
    if q < e.max(initial=0.0):
        raise ModelCheckingError(f"uniformisation rate {q} below the maximum exit rate")
    return _with_self_loops(model, model.val / q, 1.0 - e / q)


@eqx.filter_jit
def _weighted_sum(A, e, q, x0, weights, left, right):
    """`sum_{i=left}^{right} weights[i-left] (I + (A - diag e)/q)^i x0`."""

    def body(i, c):
        x, acc = c
        w = jnp.where(
            i >= left, weights[jnp.clip(i - left, 0, weights.shape[0] - 1)], 0.0
        )
        acc = acc + w * x
        x = x + (spmv(A, x) - e * x) / q
        return x, acc

    _, acc = lax.fori_loop(0, right + 1, body, (x0, jnp.zeros_like(x0)))
    return acc


def _pad(w):
    size = 1 << max(int(len(w) - 1).bit_length(), 4)
    return np.concatenate([w, np.zeros(size - len(w))])


def _uniformised_sum(
    model, x0, t, absorbing, *, epsilon, dm, weights_fn=None, transpose=False
):
    """`sum_i w_i P^i x0` (or `x0 P^i` if `transpose`) for the uniformised
    chain of `model` with `absorbing` states made absorbing; `w_i` are the
    Poisson(q t) probabilities, or `weights_fn(left, probs, q)` -> (left,
    weights) for cumulative variants."""
    n = model.num_states
    x0 = np.asarray(x0, dtype=np.float64)
    rows = state_of_entry(model)
    vals = np.where(absorbing[rows], 0.0, model.val)
    e = np.where(absorbing, 0.0, exit_rates(model))
    q = UNIF_FACTOR * float(e.max(initial=0.0))
    if t == 0 or q == 0:
        if weights_fn is not None:
            raise ValueError("cumulative weights need t > 0 and a positive rate")
        info = {"left": 0, "right": 0, "q": q, "layout": "none", "truncation": 0.0}
        return x0.copy(), info
    left, right, w, total = fox_glynn(q * t, epsilon)
    mass = tail_mass(q * t, left, right, epsilon)
    probs = w / total
    if weights_fn is not None:
        left, probs = weights_fn(left, probs, q)
    kind = dm.kind
    order = None  # (the diagonal layout's state order: every vector in it)
    if transpose or kind == "dia":
        with stage("layout"):
            if transpose:
                perm = np.lexsort((rows, model.col))
                indptr = np.concatenate(
                    [[0], np.cumsum(np.bincount(model.col, minlength=n))]
                )
                cols, vals = rows[perm], vals[perm]
            else:
                _, _, cols, indptr = host_structure(model)
            if kind == "dia":
                A, order = build_ordered(
                    indptr, cols, vals, (n, n), kind, dm.lex_rank()
                )
            else:
                A = build_matrix(indptr, cols, vals, (n, n), kind)
    else:
        M = dm.sparse()
        with stage("layout"):
            _, _, cols, indptr = host_structure(model)
            A = valued(M, kind, vals, indptr, cols).matrix
    at = (lambda v: v) if order is None else order.apply
    with stage("solve"):
        out = _weighted_sum(
            A,
            jnp.asarray(at(e)),
            jnp.asarray(q),
            jnp.asarray(at(x0)),
            jnp.asarray(_pad(probs)),
            jnp.asarray(left, jnp.int32),
            jnp.asarray(right, jnp.int32),
        )
        out = host_array(out)
        out = out if order is None else order.undo(out)
    info = {"left": left, "right": right, "q": q, "layout": layout_name(A)}
    # (and the rounding of `right + 1` steps, each a convex combination of
    # at most `width + 1` terms: the uniformised matrix is stochastic)
    width = int(np.max(np.bincount(rows, minlength=n), initial=0))
    ulp = float(np.finfo(np.float64).eps)
    rounding = (right + 1) * (width + 3) * ulp
    return out, dict(info, truncation=mass + 0.5 * rounding)


def tail_mass(q_t: float, left: int, right: int, epsilon: float) -> float:
    """A bound on the Poisson(`q_t`) mass outside `[left, right]`: the
    Chernoff bounds `P(N >= k) <= exp(-q_t) (e q_t / k)^k` (k > q_t) and
    `P(N <= k) <= exp(-q_t) (e q_t / k)^k` (k < q_t), capped by Fox and
    Glynn's guarantee `epsilon` (their window is wider than it needs to be
    for small `q_t`)."""

    def chernoff(k):
        if k <= 0:
            return math.exp(-q_t)
        return math.exp(-q_t + k - k * math.log(k / q_t))

    up = chernoff(right + 1) if right + 1 > q_t else 1.0
    low = 0.0 if left == 0 else (chernoff(left - 1) if left - 1 < q_t else 1.0)
    return float(min(epsilon, up + low))


def ctmc_bounded_until(
    model: ExplicitModel,
    phi,
    psi,
    upper: float | None,
    *,
    lower: float = 0.0,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state `P(φ U[lower, upper] ψ)` for a CTMC (times are reals).

    - `upper=t`: `U<=t`; `upper=None, lower=t`: `U>=t`; both: `U[t1,t2]`.
    - `options.epsilon`: accuracy; Fox–Glynn runs with `epsilon / 8` as in
      PRISM. `options` also serve the unbounded part of `U>=t`.
    """
    _require_ctmc(model)
    options = check_options(options)
    dm = device_model_for(model, options, device_model)
    epsilon = options.epsilon
    phi = np.asarray(phi, dtype=bool)
    psi = np.asarray(psi, dtype=bool)
    if upper is not None and upper < lower:
        return NumericResult(
            np.zeros(model.num_states), method="uniformisation", bound=0.0
        )
    fg_eps = epsilon / 8.0
    info = {}
    if upper is None:
        from .reach import until_probabilities

        res = until_probabilities(model, phi, psi, options=options, device_model=dm)
        x, info, bound = res.values, res.extra, res.bound
    else:
        x, info = _uniformised_sum(
            model,
            psi.astype(float),
            upper - lower,
            psi | ~phi,
            epsilon=fg_eps,
            dm=dm,
        )
        bound = 2.0 * info["truncation"]  # (values in [0, 1])
    if lower > 0:
        x, info = _uniformised_sum(
            model, np.where(phi, x, 0.0), lower, ~phi, epsilon=fg_eps, dm=dm
        )
        # (the sum does not increase the first part's error)
        bound = None if bound is None else bound + 2.0 * info["truncation"]
    return NumericResult(
        x, method="uniformisation", extra={"layout": info.get("layout")}, bound=bound
    )


def transient_probabilities(
    model: ExplicitModel,
    t: float,
    init=None,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> np.ndarray:
    """The state distribution at time `t` from `init` (a distribution [n];
    default uniform over the initial states)."""
    _require_ctmc(model)
    n = model.num_states
    if init is None:
        init = np.zeros(n)
        init[model.initial_states] = 1.0 / len(model.initial_states)
    x, _ = _uniformised_sum(
        model,
        init,
        t,
        np.zeros(n, bool),
        epsilon=check_options(options).epsilon / 8.0,
        transpose=True,
        dm=device_model_for(model, options, device_model),
    )
    return x


def ctmc_instantaneous_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    t: float,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state expected state reward at time `t` (`R=?[I=t]`)."""
    _require_ctmc(model)
    n = model.num_states
    st = np.zeros(n) if reward.state is None else np.asarray(reward.state, float)
    x, info = _uniformised_sum(
        model,
        st,
        t,
        np.zeros(n, bool),
        epsilon=check_options(options).epsilon / 8.0,
        dm=device_model_for(model, options, device_model),
    )
    bound = 2.0 * info["truncation"] * float(np.max(np.abs(st), initial=0.0))
    return NumericResult(
        x, method="uniformisation", extra={"layout": info["layout"]}, bound=bound
    )


def _cumulative_weights(left, probs, q):
    """PRISM's weights for `C<=t`: `(1 - sum_{j<=i} p_j) / q` for i in
    `0..right` (the Poisson mass below `left` counts as 0)."""
    full = np.concatenate([np.zeros(left), probs])
    return 0, (1.0 - np.cumsum(full)) / q


def ctmc_cumulative_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    t: float,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state expected reward accumulated up to time `t` (`R=?[C<=t]`):
    state rewards are rates; a transition reward is earned per jump, i.e. at
    rate `sum_j R(s, j) trans(s, j)`."""
    _require_ctmc(model)
    n = model.num_states
    r = np.zeros(n) if reward.state is None else np.asarray(reward.state, float).copy()
    if reward.transition is not None:
        r += np.bincount(
            state_of_entry(model),
            weights=model.val * np.asarray(reward.transition),
            minlength=n,
        )
    if t == 0:
        return NumericResult(np.zeros(n), method="uniformisation", bound=0.0)
    if exit_rates(model).max(initial=0.0) == 0:
        return NumericResult(r * t, method="uniformisation", bound=0.0)
    x, info = _uniformised_sum(
        model,
        r,
        t,
        np.zeros(n, bool),
        epsilon=check_options(options).epsilon / 8.0,
        weights_fn=_cumulative_weights,
        dm=device_model_for(model, options, device_model),
    )
    bound = _cumulative_bound(info, t, float(np.max(np.abs(r), initial=0.0)))
    return NumericResult(
        x, method="uniformisation", extra={"layout": info["layout"]}, bound=bound
    )


def _cumulative_bound(info, t, top) -> float:
    """The truncation error of `C<=t` with reward rates at most `top`: the
    exact weights are `(1 - F(i)) / q` for all `i >= 0` (`F` the Poisson
    cdf); the window's weights differ by at most `2 delta / q` for `i <=
    right`, and the tail `sum_{i > right} (1 - F(i)) / q` is at most
    `t P(N >= right) <= delta (t + (right + 1) / q) / 2`."""
    delta, q, right = info["truncation"], info["q"], info["right"]
    if delta == 0 or q == 0:
        return 0.0
    return top * delta * (3.0 * (right + 1) / q + t)


def ctmc_reachability_rewards(
    model: ExplicitModel, reward, target, **kw
) -> NumericResult:
    """`R=?[F target]` for a CTMC (on the embedded DTMC); see
    `jaxmc.numerics.reachability_rewards`."""
    _require_ctmc(model)
    from .rewards import reachability_rewards

    return reachability_rewards(model, reward, target, **kw)
