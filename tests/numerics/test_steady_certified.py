"""Certified long-run values (`jaxmc.numerics.steady_values`,
`steady_longrun`): the bracket `[min D, max D]`, `D = r + Q h`, holds the
exact gain whatever method produced `h`; every method of the chain against
sparse direct references (a scaled-down tandem through `jaxmc.check`, on CSR
and the diagonal layout), a slowly mixing chain where PRISM's criterion stops
early, fallbacks recorded as attempts, and the failure listing the chain."""

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from test_numerics_ctmc import random_model
from test_numerics_helpers import make_model

import jaxmc
from jaxmc import numerics as nm
from jaxmc.numerics import steady_krylov, steady_longrun, steady_solve
from jaxmc.options import SolveOptions
from jaxmc.solvers import Solution, Status


def _no_gmres(A, b, max_iters):
    """Host GMRES that fails (the Jacobi fallback takes over)."""
    return Solution(
        value=np.zeros(len(b)), status=Status.MAX_ITERS, iterations=0, residual=1.0
    )


TANDEM = (
    Path(__file__).resolve().parents[2].parent
    / "shared/models/prism-examples/ctmcs/tandem/tandem.sm"
)
needs_tandem = pytest.mark.skipif(not TANDEM.exists(), reason="no ../shared/models")


def _stationary_lu(em):
    """pi of an irreducible CTMC by sparse LU on `Q^T` with one equation
    replaced by the normalisation."""
    n = em.num_states
    Q = sp.csr_matrix((em.val, (em.row_of_entry(), em.col)), shape=(n, n))
    Q = (Q - sp.diags(np.asarray(Q.sum(1)).ravel())).T.tolil()
    Q[0, :] = np.ones(n)
    b = np.zeros(n)
    b[0] = 1.0
    return spla.spsolve(Q.tocsc(), b)


@needs_tandem
@pytest.mark.parametrize("layout", ["auto", "dia"])
def test_tandem_against_sparse_lu(layout):
    m = jaxmc.load_model(str(TANDEM), "c=31")
    em = jaxmc.build(m)
    pi = _stationary_lu(em)
    cust = np.asarray(em.reward_structure("customers").state, float)
    names = [v.name for v in em.variables]
    full = em.states[:, names.index("sc")] == 31
    refs = {'R{"customers"}=? [ S ]': pi @ cust, "S=? [ sc=c ]": pi[full].sum()}
    for prop, ref in refs.items():
        got = jaxmc.check(m, prop, layout=layout)
        assert got.value == pytest.approx(ref, rel=1e-6), prop
        if layout == "dia":
            assert got.layout == "dia"
    res = nm.long_run_rewards(
        em, em.reward_structure("customers"), options=SolveOptions(layout=layout)
    )
    ref = pi @ cust
    assert res.bound is not None and res.bound <= 1e-6 * ref
    assert abs(res.values[0] - ref) <= res.bound + 1e-12 * ref


@needs_tandem
@pytest.mark.parametrize("method", ["jacobi", "power", "bicgstab"])
@pytest.mark.parametrize("eps", [1e-4, 1e-9])
def test_methods_and_epsilon_honoured(method, eps):
    em = jaxmc.build(jaxmc.load_model(str(TANDEM), "c=15"))
    ref = _stationary_lu(em) @ np.asarray(em.reward_structure("customers").state, float)
    opts = SolveOptions(method=method, epsilon=eps, max_iters=200000)
    res = nm.long_run_rewards(em, em.reward_structure("customers"), options=opts)
    assert res.method == method and res.attempts == ()
    assert res.bound <= eps * ref
    assert abs(res.values[0] - ref) <= res.bound + 1e-12 * ref


def _slow_chain(n=60, p=0.5005):
    """A birth-death CTMC on 0..n-1 drifting slowly (up p, down 1-p): its
    relaxation time is of the order n^2, so a step-criterion stops early."""
    rows = [{1: p}]
    rows += [[{i + 1: p, i - 1: 1 - p}][0] for i in range(1, n - 1)]
    rows += [{n - 2: 1 - p}]
    x = np.arange(n, dtype=float)
    return make_model("ctmc", [[r] for r in rows], rewards=[(x, None)]), x


def test_slowly_mixing_change_criterion_stops_early(monkeypatch):
    m, x = _slow_chain()
    n = len(x)
    Q = np.zeros((n, n))
    np.add.at(Q, (m.row_of_entry(), m.col), m.val)
    Q -= np.diag(Q.sum(1))
    A = np.vstack([Q.T, np.ones(n)])
    pi = np.linalg.lstsq(A, np.eye(n + 1)[-1], rcond=None)[0]
    exact = pi @ x
    # PRISM's criterion: the stationary Jacobi stopped on the relative change
    monkeypatch.setattr(steady_solve, "DIRECT_MAX_STATES", 0)
    monkeypatch.setattr(steady_solve, "host_gmres", _no_gmres)
    jac, *_ = nm.stationary_distributions(
        m, options=SolveOptions(epsilon=1e-6, max_iters=10**6)
    )
    assert abs(jac @ x - exact) >= 1e-4 * exact
    # the certified default, and Jacobi/power through the certified path
    for method in (None, "jacobi", "power"):
        res = nm.long_run_rewards(
            m, m.rewards[0], options=SolveOptions(method=method, max_iters=10**6)
        )
        assert abs(res.values[0] - exact) <= 1e-6 * exact, method
        assert abs(res.values[0] - exact) <= res.bound + 1e-12


@pytest.mark.parametrize("kind", ["dtmc", "ctmc"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("method", [None, "jacobi", "power", "bicgstab"])
def test_bound_contains_dense_value_with_transient_states(kind, seed, method):
    m, rng = random_model(kind, 15, seed, absorbing=1)
    P = np.zeros((m.num_states, m.num_states))
    np.add.at(P, (m.row_of_entry(), m.col), m.val)
    if kind == "ctmc":
        q = P.sum(1).max() * 1.5
        P = np.eye(len(P)) + (P - np.diag(P.sum(1))) / q
    lim = np.linalg.matrix_power(0.5 * (np.eye(len(P)) + P), 20000)
    phi = rng.random(len(P)) < 0.5
    res = nm.steady_state_values(
        m, phi, options=SolveOptions(method=method, max_iters=10**6)
    )
    assert res.bound is not None and res.bound < 1e-5
    assert np.all(np.abs(res.values - lim @ phi) <= res.bound + 1e-9)


@pytest.mark.slow
def test_krylov_breakdown_hands_over(monkeypatch):
    """A directed ring (uniform rates): its bordered system is a shifted
    permutation, on which BiCGStab's iterate overflows within 100
    iterations; the next method of the chain takes over and is recorded
    (slow: the ring mixes slowly, Jacobi takes ~25 s here)."""
    n = 600
    m = make_model(
        "ctmc", [[{(i + 1) % n: 1.0}] for i in range(n)],
        rewards=[(np.arange(n, dtype=float), None)],
    )  # fmt: skip
    monkeypatch.setattr(steady_longrun, "DIRECT_FALLBACK_MAX_STATES", 0)
    res = nm.long_run_rewards(
        m, m.rewards[0], options=SolveOptions(method="bicgstab", max_iters=10**6)
    )
    assert res.values[0] == pytest.approx((n - 1) / 2, rel=1e-6)
    assert abs(res.values[0] - (n - 1) / 2) <= res.bound
    assert res.attempts[0].method == "bicgstab"
    assert res.attempts[0].status in (Status.BREAKDOWN, Status.NONFINITE)
    assert res.method != "bicgstab"


def test_forced_breakdown_falls_back(monkeypatch):
    """A Krylov solve that breaks down (forced) hands over; the attempt says so."""
    n = 1100
    rng = np.random.default_rng(0)
    rows = [
        [{int(t): float(rng.uniform(0.5, 2.0)) for t in rng.choice(n, 4) if t != s}]
        for s in range(n)
    ]
    rows[0][0][1] = 1.0  # (a successor for state 0 however the draw went)
    x = rng.random(n)
    m = make_model("ctmc", rows, rewards=[(x, None)])
    Q = np.zeros((n, n))
    np.add.at(Q, (m.row_of_entry(), m.col), m.val)
    Q -= np.diag(Q.sum(1))
    pi = np.linalg.lstsq(np.vstack([Q.T, np.ones(n)]), np.eye(n + 1)[-1], rcond=None)[0]

    def broken(run, *a, **kw):
        run.total = 7
        return Status.BREAKDOWN

    monkeypatch.setattr(steady_krylov.KrylovRun, "run", broken)
    res = nm.long_run_rewards(m, m.rewards[0], options=SolveOptions(max_iters=10**6))
    assert [a.method for a in res.attempts] == ["bicgstab"]
    assert res.attempts[0].status in (Status.BREAKDOWN, Status.NONFINITE)
    assert res.attempts[0].iterations == 7
    assert res.method.startswith("jacobi")
    assert res.values[0] == pytest.approx(pi @ x, rel=1e-6)
    assert abs(res.values[0] - pi @ x) <= res.bound + 1e-12


@needs_tandem
def test_exhausted_chain_lists_every_method(monkeypatch):
    monkeypatch.setattr(steady_longrun, "DIRECT_FALLBACK_MAX_STATES", 0)
    m = jaxmc.load_model(str(TANDEM), "c=31")
    with pytest.raises(jaxmc.ConvergenceError) as e:
        jaxmc.check(m, 'R{"customers"}=? [ S ]', max_iters=3)
    msg = str(e.value).lower()
    for name in ("bicgstab", "jacobi", "gmres", "power"):
        assert name in msg
    assert "every method failed" in msg
    # without throw: the best bracket, still certified, with the attempts
    em = jaxmc.build(m)
    res = nm.long_run_rewards(
        em,
        em.reward_structure("customers"),
        options=SolveOptions(max_iters=3, throw=False),
    )
    ref = _stationary_lu(em) @ np.asarray(em.reward_structure("customers").state)
    assert res.status != Status.CONVERGED and len(res.attempts) == 3
    assert abs(res.values[0] - ref) <= res.bound


@pytest.mark.gpu
@needs_tandem
def test_gpu_large_tandem():
    """Tandem c=1023 (2.1M states) on the GPU: the default chain and Jacobi
    alone give overlapping certified brackets within epsilon."""
    em = jaxmc.build(jaxmc.load_model(str(TANDEM), "c=1023"))
    rs = em.reward_structure("customers")
    a = nm.long_run_rewards(em, rs, options=SolveOptions(max_iters=60000))
    b = nm.long_run_rewards(
        em, rs, options=SolveOptions(method="jacobi", max_iters=60000)
    )
    for res in (a, b):
        assert res.bound <= 1e-6 * res.values[0]
    assert abs(a.values[0] - b.values[0]) <= a.bound + b.bound
