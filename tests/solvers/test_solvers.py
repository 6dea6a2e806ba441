"""Solvers and layouts: statuses, errors, no retracing, layouts agree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from test_numerics_helpers import dense, random_model

from jaxmc import numerics as nm, solvers
from jaxmc.errors import ConvergenceError
from jaxmc.kernels import spmv
from jaxmc.layout import CSR, from_model
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status


jax.config.update("jax_enable_x64", True)


def _system(n=40, seed=0):
    """A substochastic sparse A: (I - A) x = b is nonsingular."""
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=0.1, random_state=seed, format="csr")
    A = sp.diags(0.9 / np.maximum(np.asarray(A.sum(1)).ravel(), 1e-9)) @ A
    A = A.tocsr()
    A.sort_indices()
    return CSR.from_arrays(A.indptr, A.indices, A.data, A.shape), A, rng.random(n)


@pytest.mark.parametrize("kind", ["csr", "ell", "sell"])
def test_layouts_agree(kind):
    m, _ = random_model("mdp", 70, 1, max_succ=5)
    M = from_model(m, kind)
    x = np.random.default_rng(0).random(70)
    np.testing.assert_allclose(np.asarray(spmv(M.matrix, x)), dense(m) @ x, rtol=1e-13)
    v = dense(m) @ x
    ref = [v[m.choice_ptr[s] : m.choice_ptr[s + 1]].max() for s in range(70)]
    np.testing.assert_allclose(np.asarray(M.group_reduce(jnp.asarray(v), "max")), ref)
    # new values, same structure
    M2 = M.with_values(jnp.asarray(m.val * 2))
    np.testing.assert_allclose(
        np.asarray(spmv(M2.matrix, x)), 2 * dense(m) @ x, rtol=1e-13
    )
    T = M.csr.transpose()
    np.testing.assert_allclose(
        np.asarray(spmv(T, np.ones(m.num_choices))), dense(m).sum(0)
    )


@pytest.mark.parametrize("solver", ["jacobi", "power", "bicgstab"])
def test_linear_solvers_match_scipy(solver):
    A, As, b = _system()
    ref = spla.spsolve(sp.eye(40, format="csr") - As, b)
    x0 = jnp.zeros(40)
    kw = dict(epsilon=1e-12, relative=False)
    if solver == "jacobi":
        d = As.diagonal()
        off = (As - sp.diags(d)).tocsr()
        off.sort_indices()
        sol = solvers.jacobi(
            CSR.from_arrays(off.indptr, off.indices, off.data, off.shape),
            jnp.asarray(1 - d),
            b,
            x0,
            **kw,
        )
    elif solver == "power":
        sol = solvers.power(A, b, x0, **kw)
    else:
        sol = solvers.bicgstab(A, jnp.ones(40), b, x0, **kw)
    assert sol.status == Status.CONVERGED
    np.testing.assert_allclose(np.asarray(sol.value), ref, atol=1e-9)
    assert 0 < int(sol.iterations) < 10000


def test_bicgstab_first_steps_match_scipy():
    # Catch drift: same iterate as scipy after 1 and 2 iterations.
    A, As, b = _system(seed=3)
    op = sp.eye(40, format="csr") - As
    for k in (1, 2):
        sol = solvers.bicgstab(
            A, jnp.ones(40), b, jnp.zeros(40), max_iters=k, epsilon=1e-30, throw=False
        )
        ref, _ = spla.bicgstab(op, b, x0=np.zeros(40), maxiter=k, rtol=1e-30, atol=0)
        np.testing.assert_allclose(np.asarray(sol.value), ref, rtol=1e-10, atol=1e-12)


def test_max_iters_status_and_error():
    A, _, b = _system()
    sol = solvers.power(A, b, jnp.zeros(40), max_iters=4, epsilon=1e-15, throw=False)
    assert int(sol.status) == Status.MAX_ITERS and int(sol.iterations) == 4
    with pytest.raises(ConvergenceError, match="increase max_iters") as e:
        solvers.power(A, b, jnp.zeros(40), max_iters=4, epsilon=1e-15)
    assert "4 iterations" in str(e.value)


def test_nonfinite_status():
    A, _, b = _system()
    b = np.array(b)
    b[0] = np.nan
    sol = solvers.power(A, b, jnp.zeros(40), throw=False)
    assert int(sol.status) == Status.NONFINITE


def test_until_throw_and_status():
    m, rng = random_model("dtmc", 30, 0, absorbing=3)
    psi = np.zeros(30, bool)
    psi[-1] = True
    with pytest.raises(ConvergenceError):
        nm.until_probabilities(
            m,
            np.ones(30, bool),
            psi,
            options=SolveOptions(max_iters=2, epsilon=1e-14, criterion="change"),
        )
    res = nm.until_probabilities(
        m,
        np.ones(30, bool),
        psi,
        options=SolveOptions(
            max_iters=2, epsilon=1e-14, throw=False, criterion="change"
        ),
    )
    assert res.status == Status.MAX_ITERS


def test_relative_criterion_matches_prism():
    # coordinate 0 -> 0 counts 0, change to 0 counts inf, relative to the new value
    x_old = jnp.array([0.0, 1.0, 2.0, 0.5])
    x_new = jnp.array([0.0, 1.0, 1.0, 0.5])
    assert float(solvers.sup_norm(x_new, x_old, True)) == 1.0
    assert (
        float(solvers.sup_norm(jnp.array([0.0, 1.0]), jnp.array([1e-3, 1.0]), True))
        == np.inf
    )
    assert float(solvers.sup_norm(x_new, x_old, False)) == 1.0


def test_no_retrace_on_new_values():
    A, As, b = _system()
    d = jnp.ones(40)
    traces = []

    @jax.jit
    def run(data, b, eps):
        traces.append(1)
        return solvers.jacobi(
            A.with_values(data), d, b, jnp.zeros(40), epsilon=eps, throw=False
        ).value

    run(A.data, b, 1e-6)
    run(A.data * 0.5, b * 2, 1e-8)
    assert len(traces) == 1


def test_numerics_do_not_recompile_across_properties(monkeypatch):
    # Same model, different masks and epsilon: the jitted solver traces once.
    import jaxmc.solvers._linear as lin

    traces = []
    orig = lin.fixed_point

    def counting(*a, **k):
        traces.append(1)
        return orig(*a, **k)

    monkeypatch.setattr(lin, "fixed_point", counting)
    m, rng = random_model("dtmc", 27, 2, absorbing=2)  # a size no other test uses
    for seed in range(3):
        psi = np.random.default_rng(seed).random(27) < 0.3
        psi[-1] = True
        nm.until_probabilities(
            m,
            np.ones(27, bool),
            psi,
            options=SolveOptions(epsilon=10.0 ** (-(6 + seed)), criterion="change"),
        )
    assert len(traces) == 1


def test_interval_iteration_brackets_value():
    m, rng = random_model("mdp", 30, 5, absorbing=2)
    psi = np.zeros(30, bool)
    psi[-1] = True
    res = nm.until_probabilities(
        m,
        np.ones(30, bool),
        psi,
        opt="min",
        options=SolveOptions(
            method="interval_iteration", epsilon=1e-08, relative=False
        ),
    )
    ref = nm.until_probabilities(
        m,
        np.ones(30, bool),
        psi,
        opt="min",
        options=SolveOptions(epsilon=1e-14, relative=False, max_iters=10**6),
    )
    assert (res.lower <= ref.values + 1e-12).all()
    assert (res.upper >= ref.values - 1e-12).all()
    assert np.abs(res.values - ref.values).max() <= 1e-8


def test_ell_layout_in_numerics():
    m, rng = random_model("dtmc", 40, 8, absorbing=3)
    psi = rng.random(40) < 0.2
    a = nm.until_probabilities(
        m, np.ones(40, bool), psi, options=SolveOptions(epsilon=1e-12)
    ).values
    b = nm.until_probabilities(
        m, np.ones(40, bool), psi, options=SolveOptions(epsilon=1e-12, layout="sell")
    ).values
    np.testing.assert_allclose(a, b, rtol=1e-12)


def _prism_value_iteration(m, b, maybe, opt, eps):
    """PRISM's value iteration (sparse/explicit engines): start from 0,
    one Bellman step per iteration, stop at the first step whose relative
    change `|x' - x| / |x'|` is below `eps` everywhere."""
    P = sp.csr_matrix(
        (m.val, (m.row_of_entry(), m.col)), shape=(m.num_choices, m.num_states)
    )
    red = np.maximum.reduceat if opt == "max" else np.minimum.reduceat
    x = np.zeros(m.num_states)
    for it in range(1, 100000):
        x2 = np.where(maybe, red(b + P @ x, m.choice_ptr[:-1]), 0.0)
        d = np.abs(x2 - x)
        rel = np.where(d == 0, 0.0, d / np.where(x2 == 0, 1.0, np.abs(x2)))
        x = x2
        if rel.max() < eps:
            return x, it
    raise AssertionError("no convergence")


@pytest.mark.parametrize("opt", ["min", "max"])
@pytest.mark.parametrize("seed", range(3))
def test_value_iteration_is_prisms(opt, seed):
    # Same start vector, same step, same criterion as PRISM: the result is
    # PRISM's iterate up to rounding (ours may take one more step, as it
    # tests two steps per loop trip), not merely close to the fixed point.
    m, rng = random_model("mdp", 40, seed, absorbing=2)
    target = np.zeros(40, bool)
    target[-2:] = True
    b = (
        rng.random(m.num_choices)
        * np.asarray(m.choice_ptr[1:] - m.choice_ptr[:-1] > 0)[m.state_of_choice()]
    )
    finite = (nm.prob1A if opt == "max" else nm.prob1E)(m, np.ones(40, bool), target)
    maybe = finite & ~target
    ref, its = _prism_value_iteration(
        m, np.where(maybe[m.state_of_choice()], b, 0.0), maybe, opt, 1e-6
    )
    M = from_model(m, "csr")
    data = np.where(maybe[m.state_of_choice()[m.row_of_entry()]], m.val, 0.0)
    sol = solvers.value_iteration(
        M.with_values(jnp.asarray(data)),
        jnp.asarray(np.where(maybe[m.state_of_choice()], b, 0.0)),
        jnp.zeros(40),
        opt,
        epsilon=1e-6,
    )
    assert int(sol.iterations) in (its, its + 1)
    if int(sol.iterations) == its:
        # equal up to the summation order of the SpMV
        np.testing.assert_allclose(np.asarray(sol.value), ref, rtol=1e-13)
    else:
        np.testing.assert_allclose(np.asarray(sol.value), ref, rtol=1e-6)


def test_gauss_seidel_matches_dense_solve_and_beats_jacobi():
    import scipy.sparse as sp

    from jaxmc.solvers import Status, gauss_seidel

    rng = np.random.default_rng(7)
    n = 60
    A = rng.random((n, n)) * (rng.random((n, n)) < 0.1)
    A *= 0.9 / np.maximum(A.sum(axis=1, keepdims=True), 1e-12)  # substochastic
    b = rng.random(n) * 0.1
    exact = np.linalg.solve(np.eye(n) - A, b)
    gs = gauss_seidel(sp.csr_matrix(A), b, np.zeros(n), epsilon=1e-12)
    assert int(gs.status) == Status.CONVERGED
    np.testing.assert_allclose(gs.value, exact, rtol=1e-9)
    # Jacobi with the same criterion, in numpy, needs more sweeps.
    x, sweeps, d = np.zeros(n), 0, np.diag(A)
    while True:
        new = (b + (A - np.diag(d)) @ x) / (1 - d)
        sweeps += 1
        if np.max(np.abs(new - x) / np.abs(new)) < 1e-12:
            break
        x = new
    assert int(gs.iterations) < sweeps


def test_gauss_seidel_reports_non_convergence():
    import scipy.sparse as sp

    from jaxmc.errors import ConvergenceError
    from jaxmc.solvers import Status, gauss_seidel

    A = sp.csr_matrix(np.array([[0.0, 0.99], [0.99, 0.0]]))
    sol = gauss_seidel(A, np.ones(2), np.zeros(2), max_iters=3, throw=False)
    assert int(sol.status) == Status.MAX_ITERS and int(sol.iterations) == 3
    with pytest.raises(ConvergenceError, match="within 3 iterations"):
        gauss_seidel(A, np.ones(2), np.zeros(2), max_iters=3)
