"""Long-run averages on MDPs (`jaxmc.numerics.lra`) against references that
share no code with it: hand-computed values, and the optimum over every
memoryless deterministic policy (optimal for long-run averages in finite
MDPs) of the induced chain's Cesàro limit, by repeated squaring of its lazy
version."""

from __future__ import annotations

import numpy as np
import pytest
from test_numerics_helpers import (
    dense,
    dense_trans_reward,
    make_model,
    policies,
    random_choices,
)

from jaxmc.numerics import lra
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status


def cesaro_limit(P: np.ndarray) -> np.ndarray:
    """`lim 1/N sum_k P^k`: the limit of the lazy chain `(I + P) / 2`
    (aperiodic, same Cesàro limit), by squaring."""
    L = 0.5 * (np.eye(len(P)) + P)
    for _ in range(64):  # 2^64 steps
        L = L @ L
        L /= L.sum(1, keepdims=True)  # (rounding would compound)
    return L


def reference(model, r_choice, opt):
    """The optimal long-run average per state over all memoryless
    deterministic policies."""
    P = dense(model)
    best = None
    for pol in policies(model):
        pol = np.asarray(pol)
        v = cesaro_limit(P[pol]) @ r_choice[pol]
        if best is None:
            best = v
        else:
            best = np.maximum(best, v) if opt == "max" else np.minimum(best, v)
    return best


def choice_reward(model, k=0):
    r = model.rewards[k]
    soc = model.state_of_choice()
    return r.state[soc] + (dense(model) * dense_trans_reward(model, k)).sum(1)


# The MDP of the module docstring's example: components {0, 3} and {1, 2}.
HAND = [
    [{1: 0.5, 2: 0.5}, {3: 1.0}],
    [{2: 1.0}],
    [{1: 0.3, 2: 0.7}, {1: 1.0}],
    [{3: 1.0}, {0: 1.0}],
]


def hand_model():
    state = np.array([0.0, 2.0, 0.0, 0.5])

    def trans(s, c, t):  # action rewards: e (state 2, choice 1), f (3, 0)
        return {(2, 1): 1.0, (3, 0): 0.2}.get((s, c), 0.0)

    return make_model("mdp", HAND, rewards=[(state, trans)])


@pytest.mark.parametrize(
    "opt, want", [("max", 1.5), ("min", 0.25)]
)  # max: alternate 1, 2 (2 + 1) / 2; min: cycle 0, 3 (0 + 0.5) / 2
def test_hand_rewards(opt, want):
    m = hand_model()
    res = lra.mdp_long_run_rewards(m, m.rewards[0], opt=opt)
    assert res.status == Status.CONVERGED
    assert res.values[0] == pytest.approx(want, abs=1e-6)
    assert res.lower[0] <= want <= res.upper[0]
    assert res.bound is not None and res.bound <= 1e-6 * want


@pytest.mark.parametrize("opt, want", [("max", 0.5), ("min", 0.0)])
def test_hand_steady(opt, want):
    m = hand_model()
    res = lra.mdp_steady_state_values(m, np.arange(4) == 1, opt=opt)
    # from state 1 only the component {1, 2}: max 1/2, min 0.3/1.3
    inside = 0.5 if opt == "max" else 0.3 / 1.3
    assert res.values[0] == pytest.approx(want, abs=1e-7)
    assert res.values[1] == pytest.approx(inside, rel=1e-6)
    assert np.all(res.lower <= res.values) and np.all(res.values <= res.upper)


def test_periodic_component_converges():
    # a deterministic 3-cycle (period 3) with one reward: gain 1/3; without
    # the aperiodicity transformation the span of the differences never shrinks
    cyc = [[{1: 1.0}], [{2: 1.0}], [{0: 1.0}]]
    m = make_model("mdp", cyc, rewards=[(np.array([1.0, 0, 0]), None)])
    res = lra.mdp_long_run_rewards(m, m.rewards[0], opt="max")
    assert res.status == Status.CONVERGED
    np.testing.assert_allclose(res.values, 1 / 3, rtol=1e-6)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("opt", ["max", "min"])
def test_random_against_policy_enumeration(seed, opt):
    rng = np.random.default_rng(100 + seed)
    n = 6
    ch = random_choices(rng, n, max_choices=2, absorbing=seed % 2, max_succ=2)
    st = rng.integers(0, 4, n).astype(float)
    m = make_model(
        "mdp", ch, rewards=[(st, lambda s, c, t: float((s * 3 + t + c) % 3))]
    )
    r = choice_reward(m)
    want = reference(m, r, opt)
    res = lra.long_run_average(m, r, opt=opt)
    assert res.status == Status.CONVERGED
    np.testing.assert_allclose(res.values, want, rtol=2e-6, atol=1e-9)
    # the certified bounds hold, and are about epsilon (relative) wide
    assert np.all(res.lower <= want + 1e-12) and np.all(want <= res.upper + 1e-12)
    assert np.all(res.upper - res.lower <= 2.2e-6 * np.abs(want) + 1e-9)


@pytest.mark.parametrize("opt", ["max", "min"])
def test_absolute_criterion(opt):
    rng = np.random.default_rng(7)
    ch = random_choices(rng, 6, max_choices=2, absorbing=0, max_succ=2)
    m = make_model("mdp", ch, rewards=[(rng.integers(0, 5, 6) * 10.0, None)])
    r = choice_reward(m)
    want = reference(m, r, opt)
    o = SolveOptions(epsilon=1e-4, relative=False)
    res = lra.long_run_average(m, r, opt=opt, options=o)
    assert np.all(res.lower <= want + 1e-12) and np.all(want <= res.upper + 1e-12)
    assert res.bound <= 1e-4
    np.testing.assert_allclose(res.values, want, atol=1e-4)


def test_iteration_limit_keeps_certified_bounds(monkeypatch):
    # a slowly mixing component, no linear programming: few sweeps cannot
    # meet epsilon, but the bounds that come back still hold
    monkeypatch.setattr(lra, "LP_MAX_STATES", 0)
    p = 1e-3
    ch = [[{0: 1 - p, 1: p}], [{1: 1 - p, 0: p}]]
    m = make_model("mdp", ch, rewards=[(np.array([1.0, 0.0]), None)])
    res = lra.long_run_average(
        m, choice_reward(m), opt="max", options=SolveOptions(max_iters=5)
    )
    assert res.status == Status.MAX_ITERS
    assert np.all(res.lower <= 0.5) and np.all(0.5 <= res.upper)
    assert res.bound >= 1e-3


def test_change_criterion_has_no_bound():
    m = hand_model()
    o = SolveOptions(criterion="change")
    res = lra.mdp_long_run_rewards(m, m.rewards[0], opt="min", options=o)
    assert res.values[0] == pytest.approx(0.25, rel=1e-5)
    assert res.bound is None and res.lower is None


def test_all_gains_zero():
    m = make_model("mdp", HAND, rewards=[(np.zeros(4), None)])
    res = lra.mdp_long_run_rewards(m, m.rewards[0], opt="max")
    assert np.array_equal(res.values, np.zeros(4)) and res.bound == 0.0


def walk(n):
    """A cycle of `n` states, a fair and a biased step in each; reward in
    the first two states: a slowly mixing end component."""
    ch = [
        [{(s - 1) % n: 0.5, (s + 1) % n: 0.5}, {(s + 1) % n: 0.4, (s - 1) % n: 0.6}]
        for s in range(n)
    ]
    st = np.zeros(n)
    st[:2] = 1.0
    return make_model("mdp", ch, rewards=[(st, None)])


@pytest.mark.parametrize("opt", ["max", "min"])
def test_linear_programming_takes_over(opt):
    m = walk(8)
    r = choice_reward(m)
    want = reference(m, r, opt)
    res = lra.long_run_average(m, r, opt=opt, options=SolveOptions(max_iters=3))
    assert res.status == Status.CONVERGED
    (vi,) = res.attempts  # value iteration, out of sweeps, handed over
    assert vi.status == Status.MAX_ITERS and "linear programming" in vi.note
    np.testing.assert_allclose(res.values, want, rtol=1e-9)
    assert np.all(res.lower <= want + 1e-12) and np.all(want <= res.upper + 1e-12)
    assert res.bound <= 1e-6 * want.min()
