"""CTMC numerics (Fox–Glynn, uniformisation, time-bounded properties,
transient, rewards) and steady state, against scipy/closed forms."""

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.stats
from test_numerics_helpers import dense, expm_transient, make_model, random_model

from jaxmc import numerics as nm
from jaxmc.options import SolveOptions


@pytest.mark.parametrize("lam", [0.05, 1.0, 7.5, 24.99, 25.0, 150.0, 2500.0, 40000.0])
@pytest.mark.parametrize("eps", [1e-6, 1e-12])
def test_fox_glynn_against_scipy(lam, eps):
    left, right, w, total = nm.fox_glynn(lam, eps)
    assert len(w) == right - left + 1 and left <= lam <= right
    ks = np.arange(left, right + 1)
    ref = scipy.stats.poisson.pmf(ks, lam)
    # normalised on the window: each weight is off by the factor 1/(1 - tail)
    np.testing.assert_allclose(
        w / total, ref, rtol=eps + 1e-9, atol=1e-300
    )  # + recurrence rounding
    outside = scipy.stats.poisson.cdf(left - 1, lam) + scipy.stats.poisson.sf(
        right, lam
    )
    assert outside <= eps


def test_fox_glynn_rejects_zero():
    with pytest.raises(Exception, match="positive"):
        nm.fox_glynn(0.0)


def test_two_state_transient_closed_form():
    a, b, t = 2.0, 3.0, 0.7
    m = make_model("ctmc", [[{1: a}], [{0: b}]])
    pi = nm.transient_probabilities(m, t, options=SolveOptions(epsilon=1e-12))
    p01 = a / (a + b) * (1 - np.exp(-(a + b) * t))
    np.testing.assert_allclose(pi, [1 - p01, p01], atol=1e-10)


def _random_ctmc(seed, n=12):
    m, rng = random_model("ctmc", n, seed, absorbing=2)
    phi = rng.random(n) < 0.8
    psi = rng.random(n) < 0.25
    return m, phi, psi


@pytest.mark.parametrize("seed", range(3))
def test_ctmc_bounded_until_against_expm(seed):
    m, phi, psi = _random_ctmc(seed)
    Q = dense(m)
    n = len(Q)
    t1, t2 = 0.4, 1.1
    absorb = psi | ~phi
    Q1 = np.where(absorb[:, None], 0.0, Q)
    ref = expm_transient(Q1, t2) @ psi.astype(float)
    res = nm.ctmc_bounded_until(m, phi, psi, t2, options=SolveOptions(epsilon=1e-10))
    np.testing.assert_allclose(res.values, ref, atol=1e-9)
    # U[t1,t2]: t2-t1 with absorb, then t1 with ~phi absorbing and phi-masked start
    v = expm_transient(Q1, t2 - t1) @ psi.astype(float)
    Q2 = np.where(~phi[:, None], 0.0, Q)
    ref2 = expm_transient(Q2, t1) @ np.where(phi, v, 0.0)
    res2 = nm.ctmc_bounded_until(
        m, phi, psi, t2, lower=t1, options=SolveOptions(epsilon=1e-10)
    )
    np.testing.assert_allclose(res2.values, ref2, atol=1e-9)
    del n


def test_ctmc_transient_instantaneous_cumulative():
    m, _, _ = _random_ctmc(7)
    Q = dense(m)
    t = 0.9
    init = np.zeros(len(Q))
    init[0] = 1
    np.testing.assert_allclose(
        nm.transient_probabilities(m, t, options=SolveOptions(epsilon=1e-12)),
        init @ expm_transient(Q, t),
        atol=1e-10,
    )
    st = m.rewards[0].state
    np.testing.assert_allclose(
        nm.ctmc_instantaneous_rewards(
            m, m.rewards[0], t, options=SolveOptions(epsilon=1e-12)
        ).values,
        expm_transient(Q, t) @ st,
        atol=1e-9,
    )
    R = np.zeros_like(Q)
    np.add.at(R, (m.row_of_entry(), m.col), m.rewards[0].transition)
    r = st + (Q * R).sum(1)
    ref = scipy.integrate.quad_vec(
        lambda u: expm_transient(Q, u) @ r, 0, t, epsabs=1e-12
    )[0]
    res = nm.ctmc_cumulative_rewards(
        m, m.rewards[0], t, options=SolveOptions(epsilon=1e-12)
    )
    np.testing.assert_allclose(res.values, ref, atol=1e-8)


def _dense_stationary(P):
    """Stationary distribution of an irreducible stochastic matrix."""
    n = len(P)
    A = np.vstack([P.T - np.eye(n), np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1
    return np.linalg.lstsq(A, b, rcond=None)[0]


def test_steady_state_periodic_dtmc():
    # states 0 -> {1: .5, 3: .5}; BSCC {1,2} periodic; BSCC {3} absorbing.
    m = make_model("dtmc", [[{1: 0.5, 3: 0.5}], [{2: 1.0}], [{1: 1.0}], [{3: 1.0}]])
    dist = nm.steady_state(m, options=SolveOptions(epsilon=1e-12))
    np.testing.assert_allclose(dist, [0, 0.25, 0.25, 0.5], atol=1e-9)
    phi = np.array([0, 1, 0, 0], bool)
    np.testing.assert_allclose(
        nm.steady_state_values(m, phi, options=SolveOptions(epsilon=1e-12)).values,
        [0.25, 0.5, 0.5, 0],
        atol=1e-9,
    )


@pytest.mark.parametrize("kind", ["dtmc", "ctmc"])
@pytest.mark.parametrize("seed", range(3))
def test_steady_state_random(kind, seed):
    m, rng = random_model(kind, 15, seed, absorbing=1)
    labels, count = nm.bsccs(m)
    Q = dense(m)
    if kind == "ctmc":
        q = Q.sum(1).max() * 1.5
        P = np.eye(len(Q)) + (Q - np.diag(Q.sum(1))) / q
        Pemb = np.where(
            Q.sum(1)[:, None] > 0,
            Q / np.maximum(Q.sum(1), 1e-300)[:, None],
            np.eye(len(Q)),
        )
    else:
        P = Pemb = Q
    # reference: BSCC stationary distributions and absorption probabilities
    ref_pi = np.zeros(len(P))
    for b in range(count):
        idx = np.nonzero(labels == b)[0]
        ref_pi[idx] = _dense_stationary(P[np.ix_(idx, idx)])
    pi, lab2, count2, _ = nm.stationary_distributions(
        m, options=SolveOptions(epsilon=1e-13)
    )
    assert count2 == count
    np.testing.assert_allclose(pi, ref_pi, atol=1e-9)
    # long-run limit of the (aperiodic) chain from state 0 equals steady_state
    lim = np.linalg.matrix_power(0.5 * (np.eye(len(P)) + P), 20000)
    np.testing.assert_allclose(
        nm.steady_state(m, options=SolveOptions(epsilon=1e-12)), lim[0], atol=1e-8
    )
    phi = rng.random(len(P)) < 0.5
    np.testing.assert_allclose(
        nm.steady_state_values(m, phi, options=SolveOptions(epsilon=1e-12)).values,
        lim @ phi,
        atol=1e-8,
    )
    r = m.rewards[0].state + (dense(m) * _trans(m)).sum(1)
    np.testing.assert_allclose(
        nm.long_run_rewards(
            m, m.rewards[0], options=SolveOptions(epsilon=1e-12)
        ).values,
        lim @ r,
        atol=1e-7,
    )
    del Pemb


def _trans(m):
    R = np.zeros((m.num_choices, m.num_states))
    np.add.at(R, (m.row_of_entry(), m.col), m.rewards[0].transition)
    return R


def test_bsccs_brute_force():
    m, _ = random_model("dtmc", 20, 9, absorbing=2, max_succ=2)
    P = dense(m) > 0
    reach = np.eye(20, dtype=bool) | P
    for _ in range(6):
        reach = reach | (reach.astype(int) @ reach.astype(int) > 0)
    labels, count = nm.bsccs(m)
    for s in range(20):
        # s is in a BSCC iff everything reachable from s reaches back to s
        in_b = all(reach[t, s] for t in np.nonzero(reach[s])[0])
        assert in_b == (labels[s] >= 0)
        if in_b:
            assert set(np.nonzero(labels == labels[s])[0]) == set(
                np.nonzero(reach[s])[0]
            )


def test_embedded_and_uniformised():
    m, _, _ = _random_ctmc(2)
    emb = nm.embedded_dtmc(m)
    P = dense(emb)
    np.testing.assert_allclose(P.sum(1), 1.0)
    u = nm.uniformise(m)
    U = dense(u)
    np.testing.assert_allclose(U.sum(1), 1.0)
    Q = dense(m)
    q = 1.02 * Q.sum(1).max()
    np.testing.assert_allclose(
        U, np.eye(len(Q)) + (Q - np.diag(Q.sum(1))) / q, atol=1e-15
    )
