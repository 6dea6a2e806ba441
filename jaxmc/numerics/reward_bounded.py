"""Reward-bounded until (Storm's `φ U^{rew{"r"}<=b} ψ`) by unfolding the
accumulated reward into the state space.

Semantics (Storm's): along a path `s0 s1 ...`, the accumulated reward at
position `i` is the sum, over the steps `j < i`, of the state reward of
`s_j` and the transition reward of the step taken from it (the reward of the
target state `s_i` itself is not counted). `φ U^{rew∈I} ψ` holds if some
position `i` has `ψ`, accumulated reward in `I`, and `φ` at every position
before it. `I` is `<=b`, `<b`, `>=a`, `>a` or `[a,b]`.

Rewards must be non-negative. They are made integers exactly: every reward
value is read as a fraction (the simplest within rounding error of the
double, so `1/3` and a `0.1` computed by arithmetic are what they say), and
all are multiples of the largest `f` that divides them all (a gcd of
rationals), so "accumulated reward <= b" is "accumulated multiples of f <=
floor(b / f)" with no rounding; Storm's unfolding scales the same way.
Rewards without a common step of reasonable size make a huge counter and
are refused.

The unfolding is the product of the model with a counter `c` of accumulated
multiples of `f`, saturated at `C` (`K + 1` for an upper bound `K`: "over";
`L` for a lower bound `L` alone): state `(s, c)`, step `(s, c) -> (t, min(c +
k, C))`. The product is built over the whole grid `c = 0..C` (every model
state's value is needed, and nearly every `(s, c)` is reachable from some
`(s', 0)`), target and failed states made absorbing; then it is an ordinary
until (`numerics.until_probabilities`: DTMC, or `Pmin`/`Pmax` on an MDP with
the product's own end components), and the value of `s` is that of `(s, 0)`.

The counter never decreases, so the grid is solved in blocks of counter
values, highest first, each of bounded size (`blocks_of`): a step into
a block already solved goes to an absorbing `goal` with the probability of
its known value and to a `sink` with the rest. One block is the whole
product (one solve, the fewest); one counter value per block is Storm's
epoch method (least memory). The blocks are built by
`jaxmc.numerics.reward_unfold`, which builds the shape shared by the
blocks between the top and the bottom once. A CTMC is checked through
its embedded DTMC: with transition (impulse) rewards only, the accumulated
reward does not depend on the sojourn times; a CTMC's state rewards are
rates, accumulated continuously, and are refused.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ..errors import UnsupportedError
from ..explore.model import ExplicitModel, RewardStructure
from ..lang.ast import ModelType
from ..solvers import Status
from .reach import until_probabilities
from .result import NumericResult
from .reward_unfold import Block, Shapes, Window, unfold
from .transitions import exit_rates, state_of_entry


#: The size aimed at for a block of the unfolded product (states), and the
#: fewest counter values a block holds: the graph precomputation and the
#: topological levels of a product grow faster than its size, so blocks of
#: a few hundred thousand states are solved faster than one whole product.
BLOCK_STATES = 250_000
MIN_BLOCK_COUNTERS = 8
#: The largest block ever built (states), whatever `MIN_BLOCK_COUNTERS` asks.
MAX_PRODUCT_STATES = 20_000_000
#: The most counter values (multiples of the rewards' common step) allowed.
MAX_COUNTER = 10_000_000


#: Rewards are read as fractions with denominators up to this where the
#: double is that fraction up to rounding (`1/3`, or `0.1` after arithmetic).
_MAX_DENOMINATOR = 10**6


def _fraction(x: float) -> Fraction:
    """`x` as a fraction: the simplest one with a denominator of at most
    `_MAX_DENOMINATOR` within rounding error of the double, else the
    shortest decimal that reads back as the double."""
    x = float(x)
    exact = Fraction(repr(x))
    if exact.denominator <= _MAX_DENOMINATOR:
        return exact
    near = exact.limit_denominator(_MAX_DENOMINATOR)
    if abs(float(near) - x) <= 4 * np.spacing(abs(x)):
        return near
    return exact


def reward_step(values: np.ndarray) -> Fraction:
    """The largest `f` such that every value is an integer multiple of it
    (1 if all values are 0)."""
    distinct = [_fraction(v) for v in np.unique(values) if v != 0]
    if not distinct:
        return Fraction(1)
    num = 0
    den = 1
    for q in distinct:
        num = math.gcd(num, q.numerator)
        den = den * q.denominator // math.gcd(den, q.denominator)
    return Fraction(num, den)


def window(
    step: Fraction,
    low: float | None,
    high: float | None,
    low_strict: bool = False,
    high_strict: bool = False,
) -> Window:
    """The counter window of a bound `low (<|<=) acc (<|<=) high` on
    accumulated reward in multiples of `step`."""
    lo = 0
    if low is not None:
        a = _fraction(low) / step
        lo = max(0, math.floor(a) + 1 if low_strict else math.ceil(a))
    hi = None
    if high is not None:
        b = _fraction(high) / step
        hi = math.ceil(b) - 1 if high_strict else math.floor(b)
    return Window(lo, hi)


def _increments(model: ExplicitModel, reward: RewardStructure | None) -> np.ndarray:
    """The reward earned by every entry (transition) of `model`: the state
    reward of its source plus its transition reward; 1 per step if `reward`
    is None."""
    if reward is None:
        return np.ones(model.num_transitions)
    inc = np.zeros(model.num_transitions)
    if reward.state is not None:
        inc += np.asarray(reward.state, dtype=np.float64)[state_of_entry(model)]
    if reward.transition is not None:
        inc += np.asarray(reward.transition, dtype=np.float64)
    return inc


def _markov(model: ExplicitModel, reward: RewardStructure | None) -> ExplicitModel:
    """The model whose steps are counted: a CTMC's embedded DTMC (entries
    kept, so that transition rewards stay aligned; absorbing states keep no
    entry and are made absorbing in the product)."""
    if model.model_type != ModelType.CTMC:
        return model
    if reward is None:
        raise UnsupportedError(
            "a step bound (steps<=k) on a CTMC",
            hint="use a time bound (F<=t or F^{time<=t}) on a CTMC, as Storm does",
        )
    if reward.state is not None and np.any(np.asarray(reward.state) != 0):
        raise UnsupportedError(
            "a reward bound on a CTMC with state rewards: a CTMC's state "
            "rewards are rates, accumulated continuously over time",
            hint="bound a reward structure of transition (action) rewards "
            "only, e.g. rewards [a] true : 1; endrewards",
        )
    e = exit_rates(model)
    val = model.val / np.where(e > 0, e, 1.0)[state_of_entry(model)]
    return dataclasses.replace(model, model_type=ModelType.DTMC, val=val)


def blocks_of(n: int, win: Window) -> list[tuple[int, int]]:
    """The counter blocks `(lo, hi)` solved in turn, highest first: about
    `BLOCK_STATES` product states each, at least `MIN_BLOCK_COUNTERS`
    counter values, at most `MAX_PRODUCT_STATES` states."""
    C = win.cap
    if (C + 1) > MAX_COUNTER:
        raise UnsupportedError(
            f"the reward bound is {C - 1:,} multiples of the rewards' common "
            f"step, more than {MAX_COUNTER:,}",
            hint="use a smaller bound, or rewards with a larger common step "
            "(the bound is counted in multiples of the greatest common divisor "
            "of the rewards)",
        )
    n = max(n, 1)
    width = max(MIN_BLOCK_COUNTERS, BLOCK_STATES // n)
    width = max(1, min(width, MAX_PRODUCT_STATES // n))
    out = []
    hi = C
    while hi >= 0:
        lo = max(0, hi - width + 1)
        out.append((lo, hi))
        hi = lo - 1
    return out


def reward_bounded_until(
    model: ExplicitModel,
    phi: np.ndarray,
    psi: np.ndarray,
    reward: RewardStructure | None,
    low: float | None = None,
    high: float | None = None,
    *,
    low_strict: bool = False,
    high_strict: bool = False,
    opt: str | None = None,
    **kw,
) -> NumericResult:
    """Per-state `P(φ U^{rew∈I} ψ)` (`Pmin`/`Pmax` on an MDP by `opt`) for
    the reward structure `reward` (None: count steps), `I` given by `low`,
    `high` (None: absent) and their strictness; `kw` go to
    `until_probabilities` (not a device model: the product is a model of its
    own). The certified bound, where the solves give one, is the sum of the
    blocks' bounds (an error in a block's values moves the values of the
    blocks below by at most as much)."""
    n = model.num_states
    phi = np.asarray(phi, dtype=bool)
    psi = np.asarray(psi, dtype=bool)
    base = _markov(model, reward)
    inc = _increments(model, reward)
    if np.any(inc < 0):
        raise UnsupportedError(
            "a reward bound on a reward structure with negative rewards",
            hint="reward-bounded reachability needs non-negative rewards",
        )
    step = reward_step(inc)
    win = window(step, low, high, low_strict, high_strict)
    if win.empty:
        return NumericResult(np.zeros(n), method="reward unfolding", bound=0.0)
    values, where = np.unique(inc, return_inverse=True)
    multiples = [_fraction(v) / step for v in values.tolist()]
    steps = np.array([int(q) for q in multiples], dtype=np.int64)[where]
    kw.pop("device_model", None)
    known = None
    shapes = Shapes(steps, win)
    bound: float | None = 0.0
    iterations = 0
    failed = None
    below: float | None = 0.0  # the error carried in from the blocks above
    for lo, hi in blocks_of(n, win):
        block = Block(lo, hi, known)
        product, phi_p, psi_p = unfold(base, phi, psi, steps, win, block, shapes)
        res = until_probabilities(product, phi_p, psi_p, opt=opt, **kw)
        if failed is None and res.status != Status.CONVERGED:
            failed = res
        below = bound
        bound = None if (bound is None or res.bound is None) else bound + res.bound
        iterations += int(res.iterations)
        solved = np.asarray(res.values)[: n * (hi - lo + 1)].reshape(-1, n)
        known = solved if known is None else np.concatenate([solved, known])
        # a step adds at most max(steps) (or saturates at a counter that is
        # that close): only those counters are needed below
        known = known[: max(1, int(steps.max(initial=0)))]
    res = _restrict(res, n, below)
    res = dataclasses.replace(res, bound=bound, iterations=iterations)
    if failed is not None:
        res = dataclasses.replace(
            res, status=failed.status, residual=failed.residual, bound=None
        )
    return res


def _restrict(res: NumericResult, n: int, below: float | None) -> NumericResult:
    """The product's values at `(s, 0)`, i.e. its first `n` states, with
    per-state bounds widened by the error `below` carried in from the
    blocks solved before (dropped if that is unknown)."""

    def first(v):
        return None if v is None else np.asarray(v)[:n]

    def widen(v, sign):
        if v is None or below is None:
            return None
        return np.clip(first(v) + sign * below, 0.0, 1.0)

    extra = dict(res.extra or {})
    if "lower" in extra:
        extra["lower"], extra["upper"] = (
            widen(extra["lower"], -1),
            widen(extra["upper"], 1),
        )
        if extra["lower"] is None:
            del extra["lower"], extra["upper"]
    return dataclasses.replace(
        res,
        values=first(res.values),
        lower=widen(res.lower, -1),
        upper=widen(res.upper, 1),
        extra=extra,
    )
