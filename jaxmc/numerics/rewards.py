"""Expected rewards of DTMCs and MDPs (and CTMC reachability rewards, on the
embedded DTMC): reachability `R=?[F ψ]`, cumulative `C<=k`, instantaneous
`I=k`, total `C`.

PRISM's conventions: the reward to reach ψ is infinite from every state that
does not reach ψ with probability 1 (for Rmin: under the best scheduler,
`Pmax(F ψ) < 1`; for Rmax: under the worst one, `Pmin(F ψ) < 1`). The total
reward is infinite where a BSCC (DTMC) or end component (MDP) with positive
reward can be reached (max) or cannot be avoided (min).

Value iteration from 0 converges to the least fixed point, which is the
answer once zero-reward end components are collapsed (needed for Rmin, where
a scheduler looping at no cost forever would otherwise count as 0).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import UnsupportedError
from ..explore.model import ExplicitModel, RewardStructure
from ..lang.ast import ModelType
from ..options import SolveOptions, check_options
from . import graph
from .bounded import _discrete, masked_steps
from .bounds import reward_upper_bound_model
from .device import DeviceModel, device_model_for
from .fixed_point import solve_fixed
from .methods import check_type, default_method
from .minmax import solve_with_fallback
from .quotient import expand_result, quotient
from .result import NumericResult
from .timing import stage
from .transitions import choice_rewards, exit_rates, probabilities


def _kw(model, opt, options, device_model):
    options = check_options(options)
    return dict(
        opt=opt,
        method=default_method(model, options.method, options.criterion),
        options=options,
        device_model=device_model_for(model, options, device_model),
    )


def _pre(fn, *args, **kwargs):
    """`fn(*args, **kwargs)`, timed as precomputation."""
    with stage("precompute"):
        return fn(*args, **kwargs)


def _leaves(model, bad) -> np.ndarray:
    """Choices with a positive-probability successor in `bad`."""
    keep = model.val > 0
    ch = model.row_of_entry()[keep]
    return np.bincount(ch[bad[model.col[keep]]], minlength=model.num_choices) > 0


def _upper(M, probs, b, maybe, fixed, kw):
    """For interval iteration, the upper start vector: the Baier et al.
    bound (`jaxmc.numerics.bounds`; for MDPs infinite here, bounded per
    component by the solver), which needs the maybe states to reach
    the target almost surely (max: under every scheduler), as here."""
    if kw["method"] != "interval_iteration":
        return None
    topological = (
        kw["device_model"].requested == "auto" and kw["options"].precision == "fp64"
    )
    if M.nondeterministic and topological:
        # topological interval iteration bounds each component on its own
        # (`jaxmc.numerics.minmax`): no product over the whole system
        return np.full(len(maybe), np.inf)
    with stage("precompute"):
        bound = reward_upper_bound_model(M, probs, b, maybe, fixed, kw["opt"])
    if not np.isfinite(bound):
        raise UnsupportedError(
            "interval iteration: the upper bound on the expected reward "
            "overflows (probabilities too small along the paths to the target)",
            hint="use method='value_iteration'",
        )
    return np.full(len(maybe), bound)


def _infinite_at(res: NumericResult, inf: np.ndarray) -> NumericResult:
    """`res` with the value, and the interval-iteration bounds if any, set to
    `inf` in the states `inf` (left out of the solve)."""
    extra = dict(res.extra or {})
    for key in ("lower", "upper"):
        if key in extra:
            extra[key] = np.where(inf, np.inf, extra[key])
    vals = np.where(inf, np.inf, res.values)
    bounds = {
        key: None if v is None else np.where(inf, np.inf, v)
        for key, v in (("lower", res.lower), ("upper", res.upper))
    }
    return replace(res, values=vals, extra=extra, **bounds)


def _solve(model, probs, maybe, fixed, b, kw) -> NumericResult:
    upper = _upper(kw["device_model"].sparse(), probs, b, maybe, fixed, kw)
    return solve_fixed(model, probs, maybe, fixed, b, upper=upper, **kw)


def _solve_min_collapsed(model, probs, maybe, r, b, fixed, kw) -> NumericResult:
    """Solve a min problem after collapsing the zero-reward end components
    among the `maybe` states (choices with `r == 0` and finite `b`)."""
    with stage("precompute"):
        labels, count, inside = graph.mecs(
            model, states=maybe, choices=(r == 0) & np.isfinite(b)
        )
        if count:
            M, rep, keep, _, qprobs = quotient(
                model, probs, labels, count, inside, kw["device_model"].kind
            )
    if not count:
        return _solve(model, probs, maybe, fixed, b, kw)
    n2 = M.n_states
    maybe2 = np.zeros(n2, dtype=bool)
    maybe2[rep[maybe]] = True
    fixed2 = np.zeros(n2)
    fixed2[rep[~maybe]] = fixed[~maybe]
    upper = _upper(M, qprobs, b[keep], maybe2, fixed2, kw)
    res = solve_fixed(model, qprobs, maybe2, fixed2, b[keep], M=M, upper=upper, **kw)
    return expand_result(res, rep)


def reachability_rewards(
    model: ExplicitModel, reward: RewardStructure, *args, **kw
) -> NumericResult:
    """`_reachability_rewards`; on an MDP, value iteration that does not converge
    hands over to interval iteration (`jaxmc.numerics.minmax`)."""
    return solve_with_fallback(_reachability_rewards, model, reward, *args, **kw)


def _reachability_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    target,
    *,
    opt: str | None = None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state expected reward accumulated until reaching `target`
    (`R=?[F target]`); `inf` where the target is not reached with
    probability 1. For a CTMC, state rewards are rates: on the embedded DTMC
    state `s` earns `state[s] / E(s)`. `options`, `device_model`: as
    `until_probabilities`."""
    check_type(model, opt)
    n = model.num_states
    target = np.asarray(target, dtype=bool)
    true = np.ones(n, dtype=bool)
    probs = probabilities(model)
    if model.model_type == ModelType.CTMC:
        e = exit_rates(model)
        st = np.zeros(n) if reward.state is None else np.asarray(reward.state, float)
        rate_reward = np.divide(st, e, out=np.zeros(n), where=e > 0)
        reward = RewardStructure(reward.name, rate_reward, reward.transition)
    r = choice_rewards(model, reward, probs)
    kw = _kw(model, opt, options, device_model)
    if not model.is_nondeterministic:
        finite = _pre(graph.prob1, model, true, target)
    elif opt == "max":
        finite = _pre(graph.prob1A, model, true, target)
    else:
        finite = _pre(graph.prob1E, model, true, target)
    inf = ~finite
    maybe = ~target & finite
    fixed = np.zeros(n)
    b = r.copy()
    if model.is_nondeterministic and opt == "min":
        b[_leaves(model, inf)] = np.inf
        res = _solve_min_collapsed(model, probs, maybe, r, b, fixed, kw)
    else:
        res = _solve(model, probs, maybe, fixed, b, kw)
    return _infinite_at(res, inf)


def total_rewards(
    model: ExplicitModel, reward: RewardStructure, *args, **kw
) -> NumericResult:
    """`_total_rewards`; on an MDP, value iteration that does not converge
    hands over to interval iteration (`jaxmc.numerics.minmax`)."""
    return solve_with_fallback(_total_rewards, model, reward, *args, **kw)


def _total_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    *,
    opt: str | None = None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state expected total reward (`R=?[C]`), `inf` where it diverges.
    For a CTMC, the embedded DTMC with state rewards `state[s] / E(s)`.
    `options`, `device_model`: as `until_probabilities`."""
    check_type(model, opt)
    n = model.num_states
    probs = probabilities(model)
    if model.model_type == ModelType.CTMC:
        e = exit_rates(model)
        st = np.zeros(n) if reward.state is None else np.asarray(reward.state, float)
        rate_reward = np.divide(st, e, out=np.zeros(n), where=e > 0)
        reward = RewardStructure(reward.name, rate_reward, reward.transition)
    r = choice_rewards(model, reward, probs)
    kw = _kw(model, opt, options, device_model)
    true = np.ones(n, dtype=bool)
    fixed = np.zeros(n)
    if not model.is_nondeterministic:
        labels, count = _pre(graph.bsccs, model)
        inb = labels >= 0
        pos = np.zeros(count + 1, dtype=bool)
        np.logical_or.at(pos, np.where(inb, labels, count), r > 0)
        pos_states = inb & pos[labels]
        inf = ~_pre(graph.prob0, model, true, pos_states)
        maybe = ~inf & ~inb
        # From `maybe` the chain reaches its (zero-reward) BSCCs almost
        # surely: a reachability reward, with the same upper bound for II.
        res = _solve(model, probs, maybe, fixed, r, kw)
    elif opt == "max":
        labels, count, inside = _pre(graph.mecs, model)
        soc = model.state_of_choice()
        pos = np.zeros(count + 1, dtype=bool)
        np.logical_or.at(pos, np.where(inside, labels[soc], count), r > 0)
        pos_states = (labels >= 0) & pos[labels]
        inf = ~_pre(graph.prob0A, model, true, pos_states)
        maybe = ~inf
        if kw["method"] == "interval_iteration":
            res = _total_max_collapsed(model, probs, maybe, r, kw)
        else:
            res = solve_fixed(model, probs, maybe, fixed, r, **kw)
    else:
        labels, _, _ = _pre(graph.mecs, model, choices=r == 0)
        zero = labels >= 0
        inf = ~_pre(graph.prob1E, model, true, zero)
        maybe = ~inf & ~zero
        b = r.copy()
        b[_leaves(model, inf)] = np.inf
        res = _solve(model, probs, maybe, fixed, b, kw)
    return _infinite_at(res, inf)


def _total_max_collapsed(model, probs, maybe, r, kw) -> NumericResult:
    """Rmax [C] by interval iteration. The end components among the maybe
    states all have zero reward (positive ones make the value infinite);
    those without an exit are worth 0 and leave the system, the others are
    collapsed (as for Pmax), so that every scheduler of the quotient leaves
    the maybe states almost surely, which the upper bound needs."""
    n = model.num_states
    labels, count, inside = _pre(graph.mecs, model, states=maybe)
    if not count:
        return _solve(model, probs, maybe, np.zeros(n), r, kw)
    soc = model.state_of_choice()
    has_exit = np.zeros(count + 1, dtype=bool)
    np.logical_or.at(has_exit, np.where(labels[soc] >= 0, labels[soc], count), ~inside)
    stuck = (labels >= 0) & ~has_exit[np.maximum(labels, 0)]
    maybe = maybe & ~stuck
    fixed = np.zeros(n)
    # Renumber the components that are collapsed (the ones with an exit).
    keep_ec = np.nonzero(has_exit[:count])[0]
    new_label = np.full(count, -1)
    new_label[keep_ec] = np.arange(len(keep_ec))
    labels = np.where(labels >= 0, new_label[np.maximum(labels, 0)], -1)
    inside = inside & (labels[soc] >= 0)
    if not len(keep_ec):
        return _solve(model, probs, maybe, fixed, r, kw)
    M, rep, keep, _, qprobs = _pre(
        quotient, model, probs, labels, len(keep_ec), inside, kw["device_model"].kind
    )
    n2 = M.n_states
    maybe2 = np.zeros(n2, dtype=bool)
    maybe2[rep[maybe]] = True
    fixed2 = np.zeros(n2)
    b = r[keep]
    upper = _upper(M, qprobs, b, maybe2, fixed2, kw)
    res = solve_fixed(model, qprobs, maybe2, fixed2, b, upper=upper, M=M, **kw)
    return expand_result(res, rep)


def cumulative_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    k: int,
    *,
    opt: str | None = None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state expected reward in the first `k` steps (`C<=k`), DTMC/MDP."""
    check_type(model, opt)
    _discrete(model)
    r = choice_rewards(model, reward)
    info = {}
    dm = device_model_for(model, options, device_model)
    x = masked_steps(
        model, np.zeros(model.num_states), k, opt=opt, b=r, device_model=dm, info=info
    )
    return NumericResult(x, method="cumulative", extra=info, bound=0.0)


def instantaneous_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    k: int,
    *,
    opt: str | None = None,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state expected state reward at step `k` (`I=k`), DTMC/MDP."""
    check_type(model, opt)
    _discrete(model)
    n = model.num_states
    st = np.zeros(n) if reward.state is None else np.asarray(reward.state, float)
    info = {}
    dm = device_model_for(model, options, device_model)
    x = masked_steps(model, st, k, opt=opt, device_model=dm, info=info)
    return NumericResult(x, method="instantaneous", extra=info, bound=0.0)
