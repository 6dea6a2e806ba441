"""The loops of `jaxmc.solvers.sor` return a `Solution` with a `Status`
(CONVERGED / MAX_ITERS / NONFINITE) instead of NaN; `solvers.linear_solve`
(`solvers.adjoint`) carries the forward solve's status next to values that
`jax.grad` differentiates implicitly, checked against dense solves."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmc.layout.sweep import Pattern
from jaxmc.options import SolveOptions
from jaxmc.solvers import (
    Status,
    fixed_point_columns,
    fixed_point_loop,
    implicit_gmres,
    linear_solve,
)


def test_fixed_point_loop_statuses():
    a = jnp.asarray([0.5, 0.25, 0.9])
    b = jnp.asarray([1.0, 2.0, 0.1])
    ok = fixed_point_loop(lambda x: a * x + b, jnp.zeros(3), 1e-12, 10_000)
    assert int(ok.status) == Status.CONVERGED
    np.testing.assert_allclose(ok.value, b / (1 - a), rtol=1e-10)
    assert float(ok.residual) <= 1e-12 and 0 < int(ok.iterations) < 10_000
    short = fixed_point_loop(lambda x: a * x + b, jnp.zeros(3), 1e-12, 8)
    assert int(short.status) == Status.MAX_ITERS and int(short.iterations) == 8
    # the values as they stand (no NaN), and how far they were
    assert np.all(np.isfinite(short.value)) and float(short.residual) > 1e-3
    grow = fixed_point_loop(lambda x: 1e200 * x + 1.0, jnp.zeros(3), 1e-12, 100)
    assert int(grow.status) == Status.NONFINITE


def test_fixed_point_columns_status_per_column():
    a = jnp.asarray([[0.5, 0.999999], [0.25, 0.999999]])
    sol = fixed_point_columns(lambda x: a * x + 1.0, jnp.zeros((2, 2)), 1e-12, 200)
    assert sol.status.tolist() == [Status.CONVERGED, Status.MAX_ITERS]
    np.testing.assert_allclose(sol.value[:, 0], 1 / (1 - a[:, 0]), rtol=1e-10)


def _system(n=30, seed=3):
    """A random substochastic `A` (rows sum to at most 0.9) with self-loops,
    in `Pattern` order, and a right-hand side."""
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for i in range(n):
        succ = np.unique(np.r_[i, rng.choice(n, 3, replace=False)])
        rows += [i] * succ.size
        cols += succ.tolist()
    rows, cols = np.asarray(rows), np.asarray(cols)
    vals = rng.random(rows.size)
    vals *= 0.9 / np.bincount(rows, weights=vals, minlength=n)[rows]
    return rows, cols, vals, rng.random(n)


@pytest.mark.parametrize("omega", [None, 1.0])
def test_linear_solve_value_gradient_and_status_against_dense(omega):
    rows, cols, vals, b = _system()
    n = b.size
    pat = Pattern(rows, cols, (n, n))
    arrays = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    opts = SolveOptions(epsilon=1e-13, max_iters=100_000, omega=omega).resolved(
        "params"
    )
    c = np.linspace(1.0, 2.0, n)

    def f(data, rhs):
        sol = linear_solve(data, pat, arrays, rhs, opts)
        return jnp.dot(jnp.asarray(c), sol.value), sol

    (val, sol), (g_data, g_b) = jax.value_and_grad(f, argnums=(0, 1), has_aux=True)(
        jnp.asarray(vals), jnp.asarray(b)
    )
    M = np.eye(n)
    np.add.at(M, (rows, cols), -vals)
    x = np.linalg.solve(M, b)
    lam = np.linalg.solve(M.T, c)  # the adjoint
    assert int(sol.status) == Status.CONVERGED
    np.testing.assert_allclose(sol.value, x, rtol=1e-11)
    np.testing.assert_allclose(val, c @ x, rtol=1e-12)
    np.testing.assert_allclose(g_b, lam, rtol=1e-10)
    np.testing.assert_allclose(g_data, lam[rows] * x[cols], rtol=1e-10)
    # too few sweeps: the status says so, the values are NaN (and so is a
    # gradient through them: nothing can raise inside jax.grad)
    few = SolveOptions(epsilon=1e-13, max_iters=4, omega=omega).resolved("params")
    bad = linear_solve(jnp.asarray(vals), pat, arrays, jnp.asarray(b), few)
    assert int(bad.status) == Status.MAX_ITERS and int(bad.iterations) == 4
    assert np.isnan(bad.value).all() and float(bad.residual) > 1e-6


def test_linear_solve_status_per_point_under_vmap():
    rows, cols, vals, b = _system(seed=5)
    n = b.size
    pat = Pattern(rows, cols, (n, n))
    arrays = jax.tree_util.tree_map(jnp.asarray, pat.arrays)
    opts = SolveOptions(epsilon=1e-12, max_iters=2000).resolved("params")
    scale = jnp.asarray([0.5, 1.0, 1.12])  # the last: spectral radius above 1

    def one(s):
        sol = linear_solve(s * jnp.asarray(vals), pat, arrays, jnp.asarray(b), opts)
        return sol.value, sol.status

    xs, status = jax.vmap(one)(scale)
    assert status[:2].tolist() == [Status.CONVERGED] * 2
    assert int(status[2]) in (Status.MAX_ITERS, Status.NONFINITE)
    assert np.isnan(xs[2]).all() and np.isfinite(xs[:2]).all()
    M = np.eye(n)
    np.add.at(M, (rows, cols), -0.5 * vals)
    np.testing.assert_allclose(xs[0], np.linalg.solve(M, b), rtol=1e-10)


def test_implicit_gmres_value_derivative_and_status():
    rng = np.random.default_rng(0)
    n = 12
    A = np.eye(n) * 3 + rng.random((n, n)) * 0.2
    rhs = rng.random(n)

    def f(s):
        sol = implicit_gmres(
            lambda v: s * (jnp.asarray(A) @ v), jnp.asarray(rhs), 1e-12
        )
        return jnp.sum(sol.value), sol

    (val, sol), g = jax.value_and_grad(f, has_aux=True)(2.0)
    x = np.linalg.solve(2.0 * A, rhs)
    assert int(sol.status) == Status.CONVERGED
    np.testing.assert_allclose(val, x.sum(), rtol=1e-10)
    np.testing.assert_allclose(g, -x.sum() / 2.0, rtol=1e-9)  # d/ds (sA)^-1 b
