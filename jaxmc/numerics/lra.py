"""Long-run averages on MDPs: `Smin/Smax=? [φ]` and `R{..}min/max=? [S]`.

The long-run average reward of a path is `lim 1/n sum_{k<n} r(s_k, c_k)`,
with `r` the expected one-step reward of the choice taken (state reward
plus the choice's transition rewards weighted by their probabilities: a
reward per step, as Storm counts it); `S [φ]` is the same with reward 1 in
the states of φ. As in Storm (and de Alfaro's thesis), the optimum is
found in two stages:

1. every path ends in an end component, so the maximal end components
   (`graph.mecs`) are decomposed and the optimal gain `g_M` of each is
   computed by relative value iteration with certified bounds
   (`jaxmc.solvers.lra_value_iteration`, all components at once; a
   component it leaves short of the tolerance by linear programming,
   certified by one Bellman step: `jaxmc.numerics.lra_lp`);
2. the value of a state is the best (or worst) expectation of `g_M` over
   the component a path ends in: a reachability problem on the quotient
   that collapses each component into one state whose extra "stay" choice
   ends the path, going to `goal` with probability `g_M / G` and to `fail`
   otherwise (`G` the largest gain). The quotient has no end component but
   `goal` and `fail`, so the optimum of `G * P(F goal)` is the answer, and
   it is solved by `until_probabilities` (interval iteration by default:
   certified bounds).

The error bound combines both stages: the quotient's bounds scaled by `G`,
widened by the gains' uncertainty (the value is monotone and positively
homogeneous in the gains, so a relative error `eta` in every gain is at most
a relative error `eta` in the value, and an absolute one `delta` at most
`delta` in the value). Each stage gets half of `epsilon`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from .._arrays import unique
from ..explore.model import ExplicitModel, RewardStructure, StateVar
from ..lang.ast import ModelType
from ..options import SolveOptions, check_options
from ..solvers import Status, gain_tolerance_met, lra_value_iteration
from . import graph
from .device import DeviceModel, device_model_for
from .lra_lp import LP_MAX_STATES, lp_gain
from .methods import check_type
from .reach import until_probabilities
from .result import Attempt, NumericResult
from .timing import stage
from .transitions import choice_rewards, probabilities


def mdp_steady_state_values(
    model: ExplicitModel,
    phi,
    *,
    opt: str,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state `Sopt=? [φ]` on an MDP: the optimal long-run fraction of
    time spent in φ."""
    r = np.asarray(phi, dtype=bool).astype(np.float64)[model.state_of_choice()]
    return long_run_average(
        model, r, opt=opt, options=options, device_model=device_model
    )


def mdp_long_run_rewards(
    model: ExplicitModel,
    reward: RewardStructure,
    *,
    opt: str,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state `R{..}opt=? [S]` on an MDP: the optimal long-run average
    of the expected one-step reward of the choices taken."""
    r = choice_rewards(model, reward)
    return long_run_average(
        model, r, opt=opt, options=options, device_model=device_model
    )


@dataclasses.dataclass(frozen=True)
class Gains:
    """The optimal gain of each maximal end component, within bounds."""

    labels: np.ndarray  # int64 [n]: the component of each state, or -1
    inside: np.ndarray  # bool [m]: the choice stays in its state's component
    lower: np.ndarray  # float64 [count]
    upper: np.ndarray  # float64 [count]
    iterations: int
    status: Status
    #: Value iteration, when linear programming took over (`lra_lp`).
    attempts: tuple[Attempt, ...] = ()

    @property
    def count(self) -> int:
        return len(self.lower)

    @property
    def mid(self) -> np.ndarray:
        return 0.5 * (self.lower + self.upper)


#: The sweeps of value iteration before linear programming takes over
#: (where every component is small enough for it, `LP_MAX_STATES`).
VI_BEFORE_LP = 2000


def mec_gains(
    model: ExplicitModel,
    reward: np.ndarray,
    opt: str,
    *,
    epsilon: float,
    relative: bool,
    max_iters: int,
) -> Gains:
    """The optimal (`opt`) long-run average of the per-choice `reward` in
    each maximal end component of `model`, using only the choices that stay
    in it (`jaxmc.solvers.lra_value_iteration`'s stopping rule). Components
    that value iteration leaves short of the tolerance (slowly mixing ones)
    go to linear programming (`jaxmc.numerics.lra_lp`) where they have at
    most `LP_MAX_STATES` states; value iteration then stops after
    `VI_BEFORE_LP` sweeps (recorded as an `Attempt`)."""
    with stage("precompute"):
        labels, count, inside = graph.mecs(model)
    members = np.nonzero(labels >= 0)[0]
    local = np.full(model.num_states, -1, dtype=np.int64)
    local[members] = np.arange(len(members))
    choices = np.nonzero(inside)[0]
    new_choice = np.full(model.num_choices, -1, dtype=np.int64)
    new_choice[choices] = np.arange(len(choices))
    rows = model.row_of_entry()
    entries = np.nonzero(inside[rows])[0]
    if count == 0:  # (never: every path ends in an end component)
        empty = np.zeros(0)
        return Gains(labels, inside, empty, empty, 0, Status.CONVERGED)
    probs = probabilities(model)
    reward = np.asarray(reward, dtype=np.float64)
    if np.bincount(labels[members]).max() <= LP_MAX_STATES:
        # (linear programming can take over any component that value
        # iteration leaves short: a slowly mixing one need not use it all)
        max_iters = min(max_iters, VI_BEFORE_LP)
    with stage("solve"):
        lo, hi, iterations, status = lra_value_iteration(
            local[model.state_of_choice()[choices]],
            new_choice[rows[entries]],
            local[model.col[entries]],
            probs[entries],
            reward[choices],
            labels[members],
            count,
            opt,
            epsilon=epsilon,
            relative=relative,
            max_iters=max_iters,
        )
    gains = Gains(labels, inside, lo, hi, iterations, status)
    if status == Status.CONVERGED:
        return gains
    scale = float(np.max(np.abs(reward[choices]), initial=0.0))
    return _by_lp(model, probs, reward, opt, gains, (epsilon, relative, scale))


def _by_lp(model, probs, reward, opt, gains: Gains, rule) -> Gains:
    """`gains` with the components that value iteration left short of its
    tolerance (`rule`: epsilon, relative, reward scale) solved by linear
    programming (`lra_lp`), where they are small enough."""
    lo, hi = gains.lower.copy(), gains.upper.copy()
    short = np.nonzero(~gain_tolerance_met(lo, hi, *rule))[0]
    sizes = np.bincount(gains.labels[gains.labels >= 0], minlength=gains.count)
    short = short[sizes[short] <= LP_MAX_STATES]
    if not len(short):
        return gains
    soc = model.state_of_choice()
    with stage("solve"):
        for k in short:
            states = np.nonzero(gains.labels == k)[0]
            choices = np.nonzero(gains.inside & (gains.labels[soc] == k))[0]
            got = lp_gain(model, probs, states, choices, reward, opt)
            if got is not None:  # (both brackets hold: keep the tighter ends)
                lo[k], hi[k] = max(lo[k], got[0]), min(hi[k], got[1])
    met = bool(gain_tolerance_met(lo, hi, *rule).all())
    vi = Attempt(
        "value_iteration",
        gains.status,
        gains.iterations,
        float(np.max(0.5 * (gains.upper - gains.lower))),
        note=f"linear programming took over for {len(short)} end component(s)",
    )
    status = Status.CONVERGED if met else gains.status
    return dataclasses.replace(gains, lower=lo, upper=hi, status=status, attempts=(vi,))


def long_run_average(
    model: ExplicitModel,
    reward: np.ndarray,
    *,
    opt: str,
    options: SolveOptions | None = None,
    device_model: DeviceModel | None = None,
) -> NumericResult:
    """Per-state optimal (`opt`: "min" or "max") long-run average of the
    per-choice `reward` (float [m], non-negative) on an MDP (module
    docstring). `options`: the criterion (`epsilon`, `relative`,
    `max_iters`, `method` and `criterion` of the reachability stage),
    `throw`; `device_model`: `model`'s (the quotient's is derived from it).
    """
    check_type(model, opt)
    options = check_options(options).resolved("check")
    device_model = device_model_for(model, options, device_model)
    half = options
    if options.precision == "fp64":  # (fp32 has no room below its epsilon)
        half = dataclasses.replace(options, epsilon=options.epsilon / 2)
    gains = mec_gains(
        model,
        reward,
        opt,
        epsilon=half.epsilon,
        relative=options.relative,
        max_iters=options.max_iters,
    )
    G = float(np.max(gains.mid, initial=0.0))
    if G == 0.0 or not np.isfinite(G):
        # every gain is 0 (within its bounds), or they did not converge to
        # finite values: no reachability stage
        return _result(model, gains, np.zeros(model.num_states), None, G)
    quotient, rep, goal = _quotient(model, gains, gains.mid / G)
    ones = np.ones(quotient.num_states, dtype=bool)
    reach = until_probabilities(
        quotient, ones, goal, opt=opt, options=half,
        device_model=device_model.derived(quotient),
    )  # fmt: skip
    return _result(model, gains, rep, reach, G)


def _quotient(model: ExplicitModel, gains: Gains, weight: np.ndarray):
    """The reachability MDP of stage 2 (module docstring): `(quotient, rep,
    goal)`, `rep[s]` the quotient state of `s`, `goal` its target mask."""
    n = model.num_states
    labels, inside = gains.labels, gains.inside
    ec = labels >= 0
    others = np.nonzero(~ec)[0]
    rep = np.empty(n, dtype=np.int64)
    rep[others] = np.arange(len(others))
    rep[ec] = len(others) + labels[ec]
    goal, fail = len(others) + gains.count, len(others) + gains.count + 1
    n2 = fail + 1
    # choices: the ones leaving a component (or of a state in none), one
    # "stay" choice per component, a self-loop at goal and at fail
    keep = np.nonzero(~inside)[0]
    soc = model.state_of_choice()
    owner = np.concatenate(
        [rep[soc[keep]], len(others) + np.arange(gains.count), [goal, fail]]
    )
    order = np.argsort(owner, kind="stable")
    new_id = np.empty(len(owner), dtype=np.int64)
    new_id[order] = np.arange(len(owner))
    rows = model.row_of_entry()
    kept = np.zeros(model.num_choices, dtype=np.int64)
    kept[keep] = new_id[: len(keep)]
    entries = np.nonzero(~inside[rows])[0]
    stay = new_id[len(keep) : len(keep) + gains.count]
    w = np.clip(weight, 0.0, 1.0)
    coo_row = np.concatenate([kept[rows[entries]], stay, stay, new_id[-2:]])
    coo_col = np.concatenate(
        [rep[model.col[entries]], np.full(gains.count, goal),
         np.full(gains.count, fail), [goal, fail]]
    )  # fmt: skip
    coo_val = np.concatenate([probabilities(model)[entries], w, 1.0 - w, [1.0, 1.0]])
    live = coo_val > 0
    m2 = len(owner)
    A = sp.csr_matrix((coo_val[live], (coo_row[live], coo_col[live])), shape=(m2, n2))
    A.sum_duplicates()
    A.sort_indices()
    counts = np.bincount(owner, minlength=n2)
    init = unique(rep[np.asarray(model.initial_states)])
    init_mask = np.zeros(n2, dtype=bool)
    init_mask[init] = True
    q = ExplicitModel(
        model_type=ModelType.MDP,
        variables=(StateVar("_lra_state", 0, n2 - 1),),
        states=np.arange(n2, dtype=np.int32)[:, None],
        initial_states=init.astype(np.int64),
        choice_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        row_ptr=A.indptr.astype(np.int64),
        col=A.indices.astype(np.int64),
        val=A.data.astype(np.float64),
        labels={"init": init_mask, "deadlock": np.zeros(n2, dtype=bool)},
    )
    target = np.zeros(n2, dtype=bool)
    target[goal] = True
    return q, rep, target


def _result(model, gains: Gains, rep, reach: NumericResult | None, G: float):
    """The stages' results combined on `model`'s states (module docstring)."""
    spread = 0.5 * (gains.upper - gains.lower)
    delta = float(np.max(spread, initial=0.0))
    mid = gains.mid
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(spread == 0, 0.0, spread / np.abs(mid))
    eta = float(np.max(rel, initial=0.0))
    extra = {"gain_iterations": gains.iterations, "mecs": gains.count}
    status = gains.status
    if reach is None:  # (all gains 0: every value 0 within delta)
        values = np.zeros(model.num_states)
        lo, hi = values - delta, values + delta
        res = NumericResult(
            values, status, gains.iterations, delta, "value_iteration",
            attempts=gains.attempts,
        )  # fmt: skip
    else:
        values = G * np.asarray(reach.values)[rep]
        kept = ("layout", "precision")
        extra.update({k: v for k, v in (reach.extra or {}).items() if k in kept})
        residual = reach.residual
        if status == Status.CONVERGED:
            status = reach.status
        else:  # (the gains' stage failed: its residual is the one to show)
            residual = delta
        res = dataclasses.replace(
            reach,
            values=values,
            status=status,
            residual=residual,
            attempts=gains.attempts + tuple(reach.attempts),
            iterations=gains.iterations + reach.iterations,
            lower=None,
            upper=None,
            bound=None,
        )
        if reach.lower is not None:
            pl = G * np.asarray(reach.lower)[rep]
            pu = G * np.asarray(reach.upper)[rep]
        elif reach.bound is not None:  # (one bound for all: e.g. exact, 0)
            pl, pu = values - G * reach.bound, values + G * reach.bound
        else:  # (no certified bounds: PRISM's criterion)
            return dataclasses.replace(res, extra=extra)
        lo, hi = pl - delta, pu + delta
        if eta < 1.0:
            lo = np.maximum(lo, pl * (1.0 - eta))
            hi = np.minimum(hi, pu * (1.0 + eta))
    lo = np.minimum(lo, values)
    hi = np.maximum(hi, values)
    bound = float(np.max(np.maximum(hi - values, values - lo), initial=0.0))
    extra.update(lower=lo, upper=hi)
    return dataclasses.replace(res, extra=extra, lower=lo, upper=hi, bound=bound)
