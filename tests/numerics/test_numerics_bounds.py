"""Interval iteration for expected reachability rewards: the Baier et al.
upper bound is an upper bound (against dense references and policy
enumeration), and `method="interval_iteration"` brackets the true value with
a gap of at most 2 epsilon, for DTMCs, CTMCs and MDPs (min and max)."""

import numpy as np
import pytest
from test_numerics_helpers import (
    by_policy,
    dense,
    dense_trans_reward,
    dtmc_reach_reward,
    make_model,
    random_model,
)

from jaxmc import numerics as nm
from jaxmc.errors import ModelCheckingError
from jaxmc.explore.model import RewardStructure
from jaxmc.numerics.bounds import reward_upper_bound
from jaxmc.options import SolveOptions


def _one_step(m, P=None):
    P = dense(m) if P is None else P
    return m.rewards[0].state[m.state_of_choice()] + (P * dense_trans_reward(m)).sum(1)


def _bound(m, b, maybe, opt):
    return reward_upper_bound(
        m.state_of_choice(),
        m.row_of_entry(),
        m.col,
        m.val,
        b,
        maybe,
        np.zeros(m.num_states),
        opt,
    )


def test_bound_chain_closed_form():
    # 0 -> 1 -> 2 (target) w.p. p each, else back to the state itself:
    # expected steps 2/p; layers give d = p (state 1) and p^2 (state 0).
    p = 0.25
    m = make_model("dtmc", [[{0: 1 - p, 1: p}], [{1: 1 - p, 2: p}], [{2: 1.0}]])
    maybe = np.array([True, True, False])
    u = _bound(m, np.ones(3), maybe, None)
    assert u == pytest.approx(1 / p + 1 / p**2)
    assert u >= 2 / p


@pytest.mark.parametrize("seed", range(5))
def test_interval_iteration_dtmc(seed):
    m, rng = random_model("dtmc", 25, seed, absorbing=3)
    target = rng.random(25) < 0.2
    target[-1] = True
    ref = dtmc_reach_reward(dense(m), _one_step(m), target)
    fin = np.isfinite(ref)
    maybe = fin & ~target
    if maybe.any():
        u = _bound(m, _one_step(m), maybe, None)
        assert u >= ref[fin].max() - 1e-12
    eps = 1e-8
    res = nm.reachability_rewards(
        m,
        m.rewards[0],
        target,
        options=SolveOptions(method="interval_iteration", epsilon=eps),
    )
    assert (np.isinf(res.values) == ~fin).all()
    np.testing.assert_allclose(res.values[fin], ref[fin], rtol=2 * eps)
    if maybe.any():
        lo, up = res.lower[maybe], res.upper[maybe]
        assert (lo <= ref[maybe] * (1 + 1e-12)).all() and (
            ref[maybe] <= up * (1 + 1e-12)
        ).all()
        assert (up - lo <= 2 * eps * 0.5 * (up + lo) * (1 + 1e-9)).all()
        assert res.residual <= 2 * eps


def test_interval_iteration_ctmc():
    m, rng = random_model("ctmc", 20, 3, absorbing=2)
    target = np.zeros(20, bool)
    target[-2:] = True
    vi = nm.reachability_rewards(
        m, m.rewards[0], target, options=SolveOptions(epsilon=1e-12)
    )
    ii = nm.reachability_rewards(
        m,
        m.rewards[0],
        target,
        options=SolveOptions(method="interval_iteration", epsilon=1e-09),
    )
    fin = np.isfinite(vi.values)
    assert (np.isinf(ii.values) == ~fin).all()
    np.testing.assert_allclose(ii.values[fin], vi.values[fin], rtol=3e-9)


def _mdp_with_rewards(seed, zero_frac):
    m, rng = random_model("mdp", 7, seed, absorbing=1, max_succ=2)
    st = m.rewards[0].state * (rng.random(7) >= zero_frac)
    tr = m.rewards[0].transition * (rng.random(len(m.col)) >= zero_frac)
    return m, RewardStructure("z", st, tr)


@pytest.mark.parametrize("opt", ["min", "max"])
@pytest.mark.parametrize("seed", range(6))
def test_interval_iteration_mdp_against_policies(opt, seed):
    m, rew = _mdp_with_rewards(seed, 0.5)  # zero-reward cycles likely (Rmin)
    target = np.zeros(7, bool)
    target[[3, 6]] = True
    P = dense(m)
    R = np.zeros_like(P)
    np.add.at(R, (m.row_of_entry(), m.col), rew.transition)
    r_choice = rew.state[m.state_of_choice()] + (P * R).sum(1)
    ref = by_policy(
        m, lambda Pp, pol: dtmc_reach_reward(Pp, r_choice[pol], target), opt
    )
    eps = 1e-9
    res = nm.reachability_rewards(
        m,
        rew,
        target,
        opt=opt,
        options=SolveOptions(method="interval_iteration", epsilon=eps),
    )
    assert (np.isinf(res.values) == np.isinf(ref)).all(), (res.values, ref)
    fin = np.isfinite(ref)
    # (where the value is 0 the relative criterion falls back to the
    # absolute gap: within eps of 0)
    np.testing.assert_allclose(res.values[fin], ref[fin], rtol=2 * eps, atol=eps)
    assert res.method == "interval_iteration"
    assert res.residual <= 2 * eps


def test_bound_above_every_policy_max():
    # For max, the bound holds for every scheduler: check it against all
    # memoryless policies on the states where all of them reach the target.
    checked = 0
    for seed in range(30):
        m, rew = _mdp_with_rewards(seed, 0.0)
        target = np.zeros(7, bool)
        target[[3, 6]] = True
        finite = nm.prob1A(m, np.ones(7, bool), target)
        maybe = finite & ~target
        if not maybe.any():
            continue
        P = dense(m)
        R = np.zeros_like(P)
        np.add.at(R, (m.row_of_entry(), m.col), rew.transition)
        b = rew.state[m.state_of_choice()] + (P * R).sum(1)
        ref = by_policy(m, lambda Pp, pol: dtmc_reach_reward(Pp, b[pol], target), "max")
        u = _bound(m, b, maybe, "max")
        assert np.isfinite(ref[maybe]).all()
        assert u >= ref[maybe].max()
        checked += 1
    assert checked >= 5


def test_bound_rejects_unreachable_target():
    # state 0 loops forever: no layer ever holds it.
    m = make_model("dtmc", [[{0: 1.0}], [{1: 1.0}]])
    with pytest.raises(ModelCheckingError):
        _bound(m, np.ones(2), np.array([True, False]), None)


def test_interval_iteration_total_rewards():
    """Total rewards reduce to reachability rewards of the zero-reward bottom
    parts (for MDP max after collapsing zero-reward end components), so
    interval iteration certifies them."""
    m, _ = random_model("dtmc", 6, 0, absorbing=1)
    ref = nm.total_rewards(m, m.rewards[0], options=SolveOptions(epsilon=1e-12))
    ii = nm.total_rewards(
        m,
        m.rewards[0],
        options=SolveOptions(method="interval_iteration", epsilon=1e-09),
    )
    finite = np.isfinite(ref.values)
    np.testing.assert_allclose(ii.values[finite], ref.values[finite], rtol=1e-6)
    assert np.array_equal(np.isinf(ii.values), np.isinf(ref.values))
    for seed in range(4):
        mdp, _ = random_model("mdp", 8, seed, absorbing=1)
        for opt in ("min", "max"):
            ref = nm.total_rewards(
                mdp, mdp.rewards[0], opt=opt, options=SolveOptions(epsilon=1e-12)
            )
            ii = nm.total_rewards(
                mdp,
                mdp.rewards[0],
                opt=opt,
                options=SolveOptions(method="interval_iteration", epsilon=1e-09),
            )
            ok = np.isfinite(ref.values)
            assert np.array_equal(np.isinf(ii.values), np.isinf(ref.values))
            np.testing.assert_allclose(ii.values[ok], ref.values[ok], rtol=1e-6)
            if "lower" in ii.extra:
                lo, hi = ii.lower, ii.upper
                assert np.all(lo[ok] <= ref.values[ok] + 1e-9)
                assert np.all(ref.values[ok] <= hi[ok] + 1e-9)
