"""Per-state long-run values, `S=? [phi]` and `R=? [S]`, with a certified
error bound: the gain of every BSCC (`steady_longrun.gains`: a bracket that
holds whatever method found it), then the absorption of the transient states
into the BSCCs (`steady._absorb`) with its error bounded by its residual
(`_absorption_error`).

`NumericResult.bound` bounds the absolute error of every state's value:
the largest half-width of a BSCC's bracket (a transient state's value is a
convex combination of the gains it reaches) plus the absorption solve's
error. It is None only when the absorption's bound could not be
established (its second solve failed).
"""

from __future__ import annotations

import weakref

import numpy as np
import scipy.sparse as sp

from ..explore.model import RewardStructure
from ..options import SolveOptions, check_options
from ..solvers import Status
from . import graph
from .device import DeviceModel, device_model_for
from .result import NumericResult
from .steady import (
    _absorb,
    _off_diagonal,
    _require_markov,
    _solve_transient,
    _transient_system,
)
from .steady_longrun import Bsccs, budget_for, gains
from .steady_solve import solves_on_device
from .timing import stage
from .transitions import cached, state_sums


_U = np.finfo(np.float64).eps


#: Each model's `_bsccs`, kept while the model lives: the decomposition and
#: the BSCCs' system depend on the model alone, so a second long-run
#: property (or the same one again) does no O(transitions) host work for
#: them, and the system's device layout (`Bsccs.device`) is built once.
_BSCCS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _bsccs(model):
    """`(labels, count, Bsccs or None, idx, uniq)`: the BSCC decomposition,
    the non-trivial BSCCs' system over their states `idx` (global), and
    their labels `uniq` among all BSCCs (made once per model)."""
    got = _BSCCS.get(model)
    if got is None:
        got = _BSCCS[model] = _make_bsccs(model)
    return got


def _singles(model, labels):
    """`(states, all in BSCCs)`: the states that are a BSCC alone, and
    whether every state lies in a BSCC (once per model: a warm check then
    does no pass over all the states here)."""

    def make():
        inb = labels >= 0
        sizes = np.bincount(labels[inb], minlength=int(labels.max(initial=-1)) + 1)
        return np.flatnonzero(inb & (sizes[np.maximum(labels, 0)] == 1))

    one = cached(model, "bscc_singles", make)
    return one, bool(cached(model, "bscc_all_states", lambda: (labels >= 0).all()))


def _make_bsccs(model):
    labels, count = graph.bsccs(model)
    inb = labels >= 0
    sizes = np.bincount(labels[inb], minlength=count)
    big = inb & (sizes[np.maximum(labels, 0)] > 1)
    if not big.any():
        return labels, count, None, None, None
    idx = np.nonzero(big)[0]
    k = len(idx)
    local = np.full(model.num_states, -1, dtype=np.int64)
    local[idx] = np.arange(k)
    src, dst, val = _off_diagonal(model, big)
    src, dst = local[src], local[dst]
    d = np.bincount(src, weights=val, minlength=k)
    uniq, lab = np.unique(labels[idx], return_inverse=True)
    reps = np.unique(lab, return_index=True)[1]
    return labels, count, Bsccs(k, src, dst, val, d, lab, reps), idx, uniq


def _absorption_error(model, labels, fixed, x, **kw):
    """A certified bound on the absolute error of the transient values `x`
    of `x = P_TT x + b` (`b` from the BSCC values `fixed`): with `t` any
    vector such that `(I - P_TT) t >= c > 0` componentwise, the inverse
    `N = (I - P_TT)^-1 >= 0` has `||N||_inf <= ||t||_inf / c`, and the error
    is `N` times the residual. `t` comes from a second solve for the
    expected time to absorption. None if that solve fails."""
    trans = labels < 0
    idx, P, (r, c, v) = _transient_system(model, trans)
    k = len(idx)
    b = np.bincount(r, weights=v * fixed[c], minlength=k)
    y = x[idx]
    Py = P @ y
    res = np.abs(b - (y - Py))
    deg = np.diff(sp.csr_matrix(P).indptr) + 3
    res += deg * _U * 1.01 * (np.abs(b) + (abs(P) @ np.abs(y)) + np.abs(y))
    if not np.any(res > 0):
        return 0.0
    t, _ = _solve_transient(P, np.ones(k), trans=False, **kw)
    if t is None or not np.all(np.isfinite(t)):
        return None
    t = np.maximum(t, 0.0)
    lhs = t - P @ t
    lhs -= deg * _U * 1.01 * (t + (abs(P) @ t))
    low = float(lhs.min())
    if low <= 0:
        return None
    return float(res.max()) * float(t.max()) / low * (1 + 4 * _U)


def _long_run(model, r, options, device_model, device):
    """Per-state long-run average of the reward rate `r` (see the module
    docstring) with `options` and `device_model` (the layout it asks for),
    `device` as `steady_solve.solves_on_device`."""
    _require_markov(model)
    options = check_options(options)
    dm = device_model_for(model, options, device_model)
    method, epsilon, relative = options.method, options.epsilon, options.relative
    max_iters, throw = options.max_iters, options.throw
    precision = options.precision
    with stage("precompute"):
        labels, count, B, idx, uniq = _bsccs(model)
    single, all_in = _singles(model, labels)
    c = np.zeros(count)
    half = np.zeros(count)
    c[labels[single]] = r[single]  # single-state BSCCs: their own reward
    attempts, last = (), None
    if B is not None:
        on_device = solves_on_device(B.k, dm, device)
        with stage("solve"):
            mid, hw, attempts, last = gains(
                B,
                # (the same array for every check of `r`: what `gains`
                # derives from it is kept, `Bsccs.per_reward`)
                B.per_reward(r, "local", lambda: r[idx]),
                method=method,
                epsilon=epsilon,
                relative=relative,
                max_iters=max_iters,
                throw=throw,
                dm=dm if on_device else None,
                rank=(lambda: dm.dia_rank(idx)) if on_device else None,
                precision=precision,
                budget=budget_for(max_iters, options.max_iters_given),
            )
        c[uniq], half[uniq] = mid, hw
    if all_in:  # (no transient state: each state's value is its BSCC's)
        absorb = NumericResult(c[labels], method="none")
    else:
        absorb = _absorb(model, labels, c, options=options, dm=dm, device=device)
    bound = float(half.max(initial=0.0))
    if absorb.method != "none":
        with stage("solve"):
            fixed = np.where(labels >= 0, c[np.maximum(labels, 0)], 0.0)
            err = _absorption_error(
                model,
                labels,
                fixed,
                np.asarray(absorb.values),
                max_iters=max_iters,
                dm=dm,
                device=device,
                rank=None,
            )
        bound = None if err is None else bound + err
    s_method = "none" if last is None else last.method
    s_layout = "host" if last is None else last.layout
    method_name = s_method
    extra = dict(
        absorb.extra,
        stationary_method=s_method,
        stationary_layout=s_layout,
        stationary_residual=0.0 if last is None else last.residual,
    )
    extra.setdefault("precision", precision)
    if last is not None:
        extra["stationary_attempt"] = last
    extra["layout"] = s_layout
    if absorb.method != "none":
        method_name = f"{s_method}+{absorb.method}"
        a_layout = absorb.extra.get("layout")
        if a_layout != s_layout:
            extra["layout"] = f"{s_layout}+{a_layout}"
    s_status = Status.CONVERGED if last is None else last.status
    iters = sum(a.iterations for a in attempts)
    iters += 0 if last is None else last.iterations
    return NumericResult(
        absorb.values,
        max(s_status, absorb.status),
        iters + absorb.iterations,
        0.0 if last is None else last.residual,
        method_name,
        extra,
        attempts=tuple(attempts),
        bound=bound,
    )


def steady_state_values(
    model,
    phi,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
    device: bool | None = None,
) -> NumericResult:
    """Per-state `S=?[φ]`: the long-run probability of being in φ from each
    start state, `sum_B P(reach B) pi_B(φ)`, with a certified `bound`
    (module docstring). `options.method` is the first method of the chain
    (`steady_longrun.chain`); `device_model`, `device`: where the systems
    are solved."""
    r = np.asarray(phi, dtype=bool).astype(np.float64)
    return _long_run(model, r, options, device_model, device)


def long_run_rewards(
    model,
    reward: RewardStructure,
    *,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
    device: bool | None = None,
) -> NumericResult:
    """Per-state `R=?[S]`: the long-run average reward. For a DTMC the
    expected one-step reward `state[s] + sum_j P(s,j) trans(s,j)`; for a CTMC
    the reward rate `state[s] + sum_j R(s,j) trans(s,j)`. Options as
    `steady_state_values`."""
    return _long_run(model, _reward_rates(model, reward), options, device_model, device)


def _reward_rates(model, reward: RewardStructure) -> np.ndarray:
    """`long_run_rewards`' per-state reward (rate): once per model and
    reward structure of it (an O(transitions) pass for transition
    rewards), read-only."""

    def make():
        n = model.num_states
        st = reward.state
        r = np.zeros(n) if st is None else np.asarray(st, float).copy()
        if reward.transition is not None:
            r += state_sums(model, model.val * np.asarray(reward.transition))
        return r

    for i, own in enumerate(model.rewards):
        if own is reward:
            return cached(model, f"reward_rates_{i}", make)
    return make()
