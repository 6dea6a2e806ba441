"""Rewards (reachability, cumulative, instantaneous, total) against dense
references and policy enumeration, including zero-reward cycles."""

import numpy as np
import pytest
from test_numerics_helpers import (
    by_policy,
    dense,
    dense_trans_reward,
    dtmc_reach_reward,
    embedded,
    make_model,
    random_model,
)

from jaxmc import numerics as nm
from jaxmc.explore.model import RewardStructure
from jaxmc.options import SolveOptions


def _one_step(m, P=None):
    P = dense(m) if P is None else P
    return m.rewards[0].state[m.state_of_choice()] + (P * dense_trans_reward(m)).sum(1)


@pytest.mark.parametrize("method", ["jacobi", "power", "bicgstab"])
@pytest.mark.parametrize("seed", range(4))
def test_reach_rewards_dtmc(method, seed):
    m, rng = random_model("dtmc", 25, seed, absorbing=3)
    target = rng.random(25) < 0.2
    target[-1] = True
    ref = dtmc_reach_reward(dense(m), _one_step(m), target)
    res = nm.reachability_rewards(
        m, m.rewards[0], target, options=SolveOptions(method=method, epsilon=1e-11)
    )
    assert (np.isinf(res.values) == np.isinf(ref)).all()
    fin = np.isfinite(ref)
    np.testing.assert_allclose(res.values[fin], ref[fin], rtol=1e-7)


@pytest.mark.parametrize("opt", ["min", "max"])
@pytest.mark.parametrize("seed", range(6))
def test_reach_rewards_mdp_against_policies(opt, seed):
    m, rng = random_model("mdp", 7, seed, absorbing=1, max_succ=2)
    # zero state rewards on some states make zero-reward cycles likely
    st = m.rewards[0].state * (rng.random(7) < 0.5)
    rew = RewardStructure(
        "z", st, m.rewards[0].transition * (rng.random(len(m.col)) < 0.5)
    )
    m = make_model(
        "mdp",
        [
            [
                dict(
                    zip(
                        m.col[m.row_ptr[c] : m.row_ptr[c + 1]].tolist(),
                        m.val[m.row_ptr[c] : m.row_ptr[c + 1]].tolist(),
                    )
                )
                for c in range(m.choice_ptr[s], m.choice_ptr[s + 1])
            ]
            for s in range(7)
        ],
    )
    target = np.zeros(7, bool)
    target[[3, 6]] = True
    R = np.zeros_like(dense(m))
    np.add.at(R, (m.row_of_entry(), m.col), rew.transition)
    r_choice = st[m.state_of_choice()] + (dense(m) * R).sum(1)
    ref = by_policy(
        m, lambda Pp, pol: dtmc_reach_reward(Pp, r_choice[pol], target), opt
    )
    res = nm.reachability_rewards(
        m, rew, target, opt=opt, options=SolveOptions(epsilon=1e-10, relative=False)
    )
    assert (np.isinf(res.values) == np.isinf(ref)).all(), (res.values, ref)
    fin = np.isfinite(ref)
    np.testing.assert_allclose(res.values[fin], ref[fin], atol=1e-7)


def test_rmin_zero_reward_cycle():
    # 0 <-> 1 free loop (choice 0), or pay 1 to go to target 2 from 1.
    # A value iteration without collapsing would report Rmin(0) = 0.
    m = make_model(
        "mdp",
        [[{1: 1.0}], [{0: 1.0}, {2: 1.0}], [{2: 1.0}]],
        rewards=[(np.zeros(3), lambda s, c, t: 1.0 if (s, c) == (1, 1) else 0.0)],
    )
    res = nm.reachability_rewards(m, m.rewards[0], np.array([0, 0, 1], bool), opt="min")
    np.testing.assert_allclose(res.values, [1, 1, 0])


def _total_ref_dtmc(P, r):
    n = len(P)
    big = dtmc_reach_reward  # noqa: F841
    x = np.zeros(n)
    for _ in range(20000):
        x = r + P @ x
    return x


def test_total_rewards_dtmc():
    # chain 0 -> 1 -> 2 (absorbing, reward 0); 3 -> 4 <-> 5 (reward 1 in 5)
    m = make_model(
        "dtmc",
        [
            [{1: 0.5, 3: 0.5}],
            [{2: 1.0}],
            [{2: 1.0}],
            [{4: 1.0}],
            [{5: 1.0}],
            [{4: 1.0}],
            [{2: 1.0}],
        ],
        rewards=[(np.array([1.0, 2, 0, 1, 0, 1, 3]), None)],
    )
    res = nm.total_rewards(m, m.rewards[0])
    np.testing.assert_allclose(res.values, [np.inf, 2, 0, np.inf, np.inf, np.inf, 3])


@pytest.mark.parametrize("opt", ["min", "max"])
@pytest.mark.parametrize("seed", range(4))
def test_total_rewards_mdp_against_policies(opt, seed):
    m, rng = random_model("mdp", 6, seed, absorbing=2, max_succ=2)
    keep = rng.random(len(m.col)) < 0.3
    rew = RewardStructure("t", np.zeros(6), m.rewards[0].transition * keep)
    R = np.zeros_like(dense(m))
    np.add.at(R, (m.row_of_entry(), m.col), rew.transition)
    r_choice = (dense(m) * R).sum(1)

    def total(Pp, pol):
        # DTMC total reward: inf where a positive BSCC is reachable
        x = np.zeros(6)
        for _ in range(3000):
            x = r_choice[pol] + Pp @ x
        y = r_choice[pol] + Pp @ x
        return np.where(y - x > 1e-9, np.inf, x)

    ref = by_policy(m, total, opt)
    res = nm.total_rewards(
        m, rew, opt=opt, options=SolveOptions(epsilon=1e-12, relative=False)
    )
    assert (np.isinf(res.values) == np.isinf(ref)).all(), (res.values, ref)
    fin = np.isfinite(ref)
    np.testing.assert_allclose(res.values[fin], ref[fin], atol=1e-6)


@pytest.mark.parametrize("kind,opt", [("dtmc", None), ("mdp", "min"), ("mdp", "max")])
def test_cumulative_and_instantaneous(kind, opt):
    m, _ = random_model(kind, 8, 4)
    P = dense(m)
    r = _one_step(m, P)
    st = m.rewards[0].state
    f = {"min": np.min, "max": np.max, None: np.max}[opt]

    def red(v):
        return np.array([f(v[m.choice_ptr[s] : m.choice_ptr[s + 1]]) for s in range(8)])

    x = np.zeros(8)
    y = st.copy()
    for _ in range(6):
        x = red(r + P @ x)
        y = red(P @ y)
    np.testing.assert_allclose(
        nm.cumulative_rewards(m, m.rewards[0], 6, opt=opt).values, x
    )
    np.testing.assert_allclose(
        nm.instantaneous_rewards(m, m.rewards[0], 6, opt=opt).values, y
    )


def test_ctmc_reach_rewards_embedded():
    m, rng = random_model("ctmc", 15, 1, absorbing=2)
    target = np.zeros(15, bool)
    target[-2:] = True
    Q = dense(m)
    e = Q.sum(1)
    P = embedded(m)
    r = np.divide(m.rewards[0].state, e, out=np.zeros(15), where=e > 0)
    r = r + (P * dense_trans_reward(m)).sum(1)
    ref = dtmc_reach_reward(P, r, target)
    res = nm.ctmc_reachability_rewards(
        m, m.rewards[0], target, options=SolveOptions(epsilon=1e-11)
    )
    fin = np.isfinite(ref)
    assert (np.isinf(res.values) == ~fin).all()
    np.testing.assert_allclose(res.values[fin], ref[fin], rtol=1e-7)
