"""Reachability, bounded and next probabilities against dense references."""

import numpy as np
import pytest
from test_numerics_helpers import (
    by_policy,
    dense,
    dtmc_until,
    embedded,
    make_model,
    random_model,
    reach_set,
)

from jaxmc import numerics as nm
from jaxmc.options import SolveOptions


def _masks(rng, n):
    phi = rng.random(n) < 0.8
    psi = rng.random(n) < 0.2
    psi[0] = False
    return phi, psi


@pytest.mark.parametrize("seed", range(6))
def test_prob01_dtmc(seed):
    m, rng = random_model("dtmc", 12, seed, absorbing=2)
    phi, psi = _masks(rng, 12)
    P = dense(m)
    no, yes = nm.prob01(m, phi, psi)
    ref = dtmc_until(P, phi, psi)
    assert (no == (ref == 0)).all()
    assert (yes == np.isclose(ref, 1.0, atol=1e-12)).all()


@pytest.mark.parametrize("seed", range(4))
def test_prob01_mdp_against_policies(seed):
    m, rng = random_model("mdp", 7, seed, absorbing=1, max_succ=2)
    phi, psi = _masks(rng, 7)
    P = dense(m)

    def pos(Pp, _):
        return reach_set(Pp, psi, phi & ~psi).astype(float)

    def one(Pp, _):
        return np.isclose(dtmc_until(Pp, phi, psi), 1.0, atol=1e-12).astype(float)

    del P
    assert (nm.prob0A(m, phi, psi) == (by_policy(m, pos, "max") == 0)).all()
    assert (nm.prob0E(m, phi, psi) == (by_policy(m, pos, "min") == 0)).all()
    assert (nm.prob1E(m, phi, psi) == (by_policy(m, one, "max") == 1)).all()
    assert (nm.prob1A(m, phi, psi) == (by_policy(m, one, "min") == 1)).all()


@pytest.mark.parametrize("seed", range(6))
def test_prob0e_attractor_against_a_naive_fixed_point(seed):
    """prob0E is the complement of the attractor `Y = ψ ∪ {s ∈ φ : every
    choice has a successor in Y}` (frontier rounds that count each choice
    once, however many of its entries and rounds reach it), on MDPs large
    enough for deep frontiers and choices hit by several entries at once."""
    m, rng = random_model("mdp", 300, seed, absorbing=3, max_succ=4)
    phi, psi = _masks(rng, 300)
    P = dense(m) > 0
    soc = m.state_of_choice()
    y = psi.copy()
    while True:
        hits = (P & y[None, :]).any(axis=1)
        every = np.ones(m.num_states, bool)
        np.logical_and.at(every, soc, hits)
        nxt = y | (phi & every)
        if (nxt == y).all():
            break
        y = nxt
    assert (nm.prob0E(m, phi, psi) == ~y).all()


@pytest.mark.parametrize(
    "method", ["jacobi", "power", "bicgstab", "value_iteration", "interval_iteration"]
)
@pytest.mark.parametrize("seed", range(4))
def test_until_dtmc(method, seed):
    m, rng = random_model("dtmc", 30, seed, absorbing=3)
    phi, psi = _masks(rng, 30)
    ref = dtmc_until(dense(m), phi, psi)
    res = nm.until_probabilities(
        m, phi, psi, options=SolveOptions(method=method, epsilon=1e-10)
    )
    assert res.status == nm.NumericResult(None).status
    np.testing.assert_allclose(res.values, ref, rtol=1e-7, atol=1e-9)
    assert (res.values[ref == 0] == 0).all() and (res.values[ref == 1] == 1).all()


def test_until_ctmc_uses_embedded_dtmc():
    m, rng = random_model("ctmc", 20, 3, absorbing=2)
    phi, psi = _masks(rng, 20)
    ref = dtmc_until(embedded(m), phi, psi)
    np.testing.assert_allclose(
        nm.until_probabilities(m, phi, psi, options=SolveOptions(epsilon=1e-10)).values,
        ref,
        rtol=1e-7,
    )


@pytest.mark.parametrize("method", ["value_iteration", "interval_iteration"])
@pytest.mark.parametrize("opt", ["min", "max"])
@pytest.mark.parametrize("seed", range(5))
def test_until_mdp_against_policies(method, opt, seed):
    m, rng = random_model("mdp", 7, seed, absorbing=1, max_succ=2)
    phi, psi = _masks(rng, 7)
    psi[3] = True
    ref = by_policy(m, lambda Pp, _: dtmc_until(Pp, phi, psi), opt)
    res = nm.until_probabilities(
        m,
        phi,
        psi,
        opt=opt,
        options=SolveOptions(method=method, epsilon=1e-09, relative=False),
    )
    np.testing.assert_allclose(res.values, ref, atol=1e-7)


def test_interval_iteration_collapses_end_components():
    # 0 <-> 1 is an end component (choice a), with exits: from 1 to goal 2
    # w.p. .5 / sink 3; max from 0 is .5. Plain iteration from 1 would stay 1.
    m = make_model(
        "mdp",
        [[{1: 1.0}, {3: 1.0}], [{0: 1.0}, {2: 0.5, 3: 0.5}], [{2: 1.0}], [{3: 1.0}]],
    )
    psi = np.array([0, 0, 1, 0], bool)
    res = nm.until_probabilities(
        m,
        np.ones(4, bool),
        psi,
        opt="max",
        options=SolveOptions(method="interval_iteration"),
    )
    np.testing.assert_allclose(res.values, [0.5, 0.5, 1, 0], atol=1e-6)
    assert res.values[0] <= 0.5 + 1e-6


def test_gamblers_ruin():
    # fair-ish gambler: p up, 1-p down, absorbing at 0 and N
    N, p = 10, 0.45
    ch = [[{0: 1.0}]] + [[{i + 1: p, i - 1: 1 - p}] for i in range(1, N)] + [[{N: 1.0}]]
    m = make_model("dtmc", ch)
    psi = np.zeros(N + 1, bool)
    psi[N] = True
    r = (1 - p) / p
    ref = (1 - r ** np.arange(N + 1)) / (1 - r**N)
    res = nm.until_probabilities(
        m, np.ones(N + 1, bool), psi, options=SolveOptions(epsilon=1e-12)
    )
    np.testing.assert_allclose(res.values, ref, rtol=1e-9)


@pytest.mark.parametrize("kind,opt", [("dtmc", None), ("mdp", "min"), ("mdp", "max")])
def test_bounded_until(kind, opt):
    m, rng = random_model(kind, 7, 11, absorbing=1, max_succ=2)
    phi, psi = _masks(rng, 7)
    P = dense(m)
    k1, k2 = 2, 5

    def window(Pp, lo, hi):
        # dense finite-horizon recursion with PRISM's U[lo,hi] semantics
        x = psi.astype(float)
        for _ in range(hi - lo):
            x = np.where(psi, 1.0, np.where(phi, Pp @ x, 0.0))
        for _ in range(lo):
            x = np.where(phi, Pp @ x, 0.0)
        return x

    if opt is None:
        ref = window(P, 0, k2)
        ref2 = window(P, k1, k2)
    else:
        # finite horizon: step-wise opt over choices is optimal
        f = np.min if opt == "min" else np.max

        def step(x, active, const):
            v = P @ x
            y = np.array(
                [f(v[m.choice_ptr[s] : m.choice_ptr[s + 1]]) for s in range(7)]
            )
            return np.where(active, y, const)

        x = psi.astype(float)
        for _ in range(k2):
            x = step(x, phi & ~psi, psi.astype(float))
        ref = x
        x = psi.astype(float)
        for _ in range(k2 - k1):
            x = step(x, phi & ~psi, psi.astype(float))
        for _ in range(k1):
            x = step(x, phi, 0.0)
        ref2 = x
    np.testing.assert_allclose(
        nm.bounded_until(m, phi, psi, k2, opt=opt).values, ref, atol=1e-12
    )
    np.testing.assert_allclose(
        nm.bounded_until(m, phi, psi, k2, lower=k1, opt=opt).values, ref2, atol=1e-12
    )


def test_until_lower_bound_dtmc():
    m, rng = random_model("dtmc", 10, 5, absorbing=2)
    phi, psi = _masks(rng, 10)
    P = dense(m)
    x = dtmc_until(P, phi, psi)
    for _ in range(3):
        x = np.where(phi, P @ x, 0.0)
    res = nm.bounded_until(
        m, phi, psi, None, lower=3, options=SolveOptions(epsilon=1e-10)
    )
    np.testing.assert_allclose(res.values, x, rtol=1e-7)


def test_next():
    m, rng = random_model("mdp", 6, 2)
    psi = rng.random(6) < 0.5
    P = dense(m)
    v = P @ psi
    ref = [v[m.choice_ptr[s] : m.choice_ptr[s + 1]].max() for s in range(6)]
    np.testing.assert_allclose(nm.next_probabilities(m, psi, opt="max").values, ref)
