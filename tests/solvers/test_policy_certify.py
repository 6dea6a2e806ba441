"""Policy iteration's certificates on one level (`solvers._policy`, issue
20): choices whose values differ below an absolute tolerance but far above
the relative margin the certificate needs (small values), and policy
systems whose Krylov solve breaks down, against dense solves."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

from jaxmc.solvers import Solution, Status, _policy, _topological, topological_iteration


def _ring(n=50, p=1e-7, gain=1e-13):
    """A min level: a ring where every state goes on with probability 0.99
    (and leaves with 0.01) and pays `p`; state 0 has a second choice that
    pays more now and leaves a little more, worth about `gain` less in
    total (on values of about `100 p`: a relative difference of ~1e-8).
    Returns `(A, e, starts, exact)`, `exact` the optimum by dense solves of
    both policies (they differ at state 0 only)."""
    nxt = (np.arange(n) + 1) % n
    Aa = sp.csr_matrix((np.full(n, 0.99), (np.arange(n), nxt)), shape=(n, n))
    Va = spsolve((sp.identity(n) - Aa).tocsc(), np.full(n, p))
    u = 1e-6
    rows = np.arange(n + 1)
    cols = np.concatenate([[1], nxt])
    vals = np.concatenate([[0.99 * (1 - u)], np.full(n, 0.99)])
    e = np.concatenate([[p + 0.99 * u * Va[1] - gain], np.full(n, p)])
    # choice 0 is state 0's second choice: put it after its first
    order = np.concatenate([[1, 0], np.arange(2, n + 1)])
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n + 1, n))[order]
    e = e[order]
    starts = np.concatenate([[0], np.arange(2, n + 1)])
    exact = None
    for first in (0, 1):
        sigma = np.concatenate([[first], np.arange(2, n + 1)])
        V = spsolve((sp.identity(n) - A[sigma]).tocsc(), e[sigma])
        exact = V if exact is None else np.minimum(exact, V)
    return A, e, starts, exact


def test_certify_small_values_with_a_near_tie():
    """The second choice is better by ~2.5e-13 (more than the certificate's
    margin `target * value / (2 h)` ~ 5e-14, less than an absolute 1e-12):
    policy iteration must take it, and the certified bounds contain the
    exact optimum with a relative gap of at most the target."""
    A, e, starts, exact = _ring()
    n = len(exact)
    first = np.r_[0, 2 : n + 1]  # state 0's first choice
    worse = spsolve((sp.identity(n) - A[first]).tocsc(), e[first])
    assert exact[0] < worse[0] - 1e-13  # (the second choice is strictly better)
    Y = np.stack([np.zeros(n), np.ones(n)], 1)
    C = _policy.certify(A, e, e, starts, "min", Y, 1e-6, True, _topological.gaps)
    assert C is not None
    assert np.all(C[:, 0] <= exact) and np.all(exact <= C[:, 1])
    assert _topological.gaps(C[:, 0], C[:, 1], True).max() <= 1e-6


def test_topological_level_with_a_near_tie_is_certified():
    """The same level inside a system (exits to a state of value 0), with an
    iteration budget far below what interval iteration needs (~1,400
    sweeps): policy iteration takes over and certifies it."""
    A, e, starts, exact = _ring()
    k, n = A.shape
    # the whole system: the level's states, then the exit state n (value 0)
    leave = 1.0 - np.asarray(A.sum(axis=1)).ravel()
    rows = np.concatenate([A.tocoo().row, np.arange(k), [k]])
    cols = np.concatenate([A.tocoo().col, np.full(k, n), [n]])
    vals = np.concatenate([A.tocoo().data, leave, [1.0]])
    P = sp.csr_matrix((vals, (rows, cols)), shape=(k + 1, n + 1))
    soc = np.concatenate([np.repeat(np.arange(n), np.diff(np.append(starts, k))), [n]])
    maybe = np.arange(n + 1) < n
    sol, lo, up, info = topological_iteration(
        soc, P.indptr, P.indices, P.data, np.append(e, 0.0), maybe,
        np.zeros(n + 1), "min", upper=np.append(np.ones(n), 0.0),
        epsilon=1e-6, relative=True, max_iters=50, throw=False,
    )  # fmt: skip
    assert Status(int(sol.status)) == Status.CONVERGED
    assert info["policy_levels"] == 1
    assert np.all(lo[:n] <= exact) and np.all(exact <= up[:n])
    np.testing.assert_allclose(np.asarray(sol.value)[:n], exact, rtol=1e-6)


def _random_policy_system(n=300, seed=5):
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), 3)
    cols = rng.integers(0, n, rows.size)
    vals = rng.uniform(0.2, 1.0, rows.size)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    A = sp.diags(0.999 / np.asarray(A.sum(axis=1)).ravel()) @ A  # leaves w.p. 1e-3
    S = (sp.identity(n) - A).tocsr()
    return S, rng.uniform(0.0, 1.0, n)


def test_krylov_policy_solve_survives_breakdowns(monkeypatch):
    """Policy systems beyond `LU_MAX_STATES` are solved by BiCGStab and
    refined; where the first solve and the first correction break down (a
    non-finite iterate at once, as a zero inner product gives), the next
    corrections restart from other shadow residuals and still reach the
    dense solution at the rounding level."""
    monkeypatch.setattr(_policy, "LU_MAX_STATES", 0)
    S, rhs = _random_policy_system()
    want = spsolve(S.tocsc(), rhs)
    real = _policy._krylov
    calls = []

    def krylov(A, diag, b, *args):
        calls.append(1)
        if len(calls) <= 2:  # the first solve and the first correction
            nan = np.full(b.shape, np.nan)
            return Solution(
                value=nan, status=np.int32(Status.NONFINITE),
                iterations=np.int32(1), residual=np.nan,
            )  # fmt: skip
        return real(A, diag, b, *args)

    monkeypatch.setattr(_policy, "_krylov", krylov)
    x = _policy.solve_policy(S, rhs)
    assert x is not None
    np.testing.assert_allclose(x, want, rtol=1e-12)
    floor = _policy.ROUNDING * (np.abs(rhs) + abs(S) @ np.abs(x))
    assert np.all(np.abs(rhs - S @ x) <= floor)
    assert len(calls) >= 3


def test_krylov_policy_solve_reaches_the_rounding_level(monkeypatch):
    """Without breakdowns, BiCGStab plus refinement agrees with the dense
    solve to the rounding level and stops refining there."""
    monkeypatch.setattr(_policy, "LU_MAX_STATES", 0)
    S, rhs = _random_policy_system(seed=6)
    x = _policy.solve_policy(S, rhs)
    np.testing.assert_allclose(x, spsolve(S.tocsc(), rhs), rtol=1e-12)
    floor = _policy.ROUNDING * (np.abs(rhs) + abs(S) @ np.abs(x))
    assert np.all(np.abs(rhs - S @ x) <= floor)


def _orders_ring(n=14, seed=1):
    """A level whose values span ~n*1.7 orders of magnitude: a ring where each
    state goes on to the next two states with probability ~0.02 in all (two
    choices each, the rest leaves to value 0), and the last state also pays
    ~0.9 (a target reached). Returns `(A, e, starts)`."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(2 * n), 2)
    state = rows // 2
    cols = (state + 1 + np.tile([0, 1], 2 * n)) % n
    vals = rng.uniform(0.005, 0.015, rows.size)
    e = np.where(np.arange(2 * n) // 2 == n - 1, rng.uniform(0.85, 0.9, 2 * n), 0.0)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(2 * n, n))
    return A, e, np.arange(0, 2 * n, 2)


@pytest.mark.parametrize("opt", ["min", "max"])
def test_certify_values_spanning_orders_of_magnitude(monkeypatch, opt):
    """Values from ~1e-14 to ~0.9: a uniform shift set by the smallest
    values is below the rounding of the largest (it would prove nothing
    there), so per-state shifts (`_policy._shifted`) certify bounds that
    contain the optimum over every memoryless scheduler's dense solve, with
    a relative gap of at most the target and a margin at every state."""
    A, e, starts = _orders_ring()
    k, n = A.shape
    real, calls = _policy._shifted, []

    def shifted(*args):
        calls.append(args[-2])
        return real(*args)

    monkeypatch.setattr(_policy, "_shifted", shifted)
    best = None
    fn = np.minimum if opt == "min" else np.maximum
    dense = A.toarray()
    for choice in itertools.product(range(2), repeat=n):
        sigma = starts + np.array(choice)
        V = np.linalg.solve(np.eye(n) - dense[sigma], e[sigma])
        best = V if best is None else fn(best, V)
    assert best.max() / best.min() > 1e12
    Y = np.stack([np.zeros(n), np.ones(n)], 1)
    C = _policy.certify(A, e, e, starts, opt, Y, 1e-6, True, _topological.gaps)
    assert C is not None
    assert np.all(C[:, 0] <= best) and np.all(best <= C[:, 1])
    gap = _topological.gaps(C[:, 0], C[:, 1], True)
    assert gap.max() <= 1e-6
    assert gap.min() > 1e-12  # (far above the rounding, at every state)
    assert set(calls) == {False, True}  # (both sides shifted per state)
