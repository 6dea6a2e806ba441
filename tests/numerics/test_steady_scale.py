"""Long-run values at scale (issue 20): BiCGStab(2), which takes over where
plain BiCGStab breaks down, and the iteration budget of a default
`max_iters` (a steadily converging method goes on past it; a given one is a
hard cap), on systems small enough for the CPU, against dense or sparse
direct solves."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from test_steady_certified import TANDEM, _stationary_lu, needs_tandem

import jaxmc
import jaxmc.numerics.krylov as kr
from jaxmc import numerics as nm, options as opts
from jaxmc.numerics import steady_longrun
from jaxmc.options import SolveOptions
from jaxmc.solvers import Status


class _Dense(eqx.Module):
    """`x -> M x` for a dense matrix, as a Krylov operator."""

    M: object

    def __call__(self, x):
        return jnp.asarray(self.M) @ x


def _skew(n, seed=0):
    """A nonsingular skew-symmetric matrix of small integers: `s . A s = 0`
    for every `s` (exactly, for integer `s`), so plain BiCGStab's
    minimal-residual step is `omega = 0` (a breakdown), while BiCGStab(2)'s
    degree-2 step (`A^2` is negative definite) is not."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-3, 4, (n, n)).astype(float)
    return X - X.T


def test_plain_bicgstab_breaks_down_bicgstab2_converges():
    n = 40  # even: a skew-symmetric matrix of odd order is singular
    A = _skew(n)
    rng = np.random.default_rng(1)
    b, shadow = rng.standard_normal(n), rng.standard_normal(n)
    exact = np.linalg.solve(A, b)
    plain = kr.bicgstab(_Dense(A), b, rtol=1e-12, max_iters=2000, shadow=shadow)
    assert Status(int(plain.status)) == Status.BREAKDOWN
    sol, _ = kr.bicgstab_l(
        _Dense(A), b, ell=2, rtol=1e-12, max_spmv=4000, shadow=shadow
    )
    assert Status(int(sol.status)) == Status.CONVERGED
    assert float(sol.residual) < 1e-8  # the true residual
    np.testing.assert_allclose(np.asarray(sol.value), exact, rtol=1e-6, atol=1e-8)


def test_bicgstab_l_stops_at_a_lanczos_breakdown():
    """With the initial residual as shadow, `rhat . A r0 = 0` (exactly, in
    integers) on a skew matrix: BREAKDOWN with the start iterate."""
    n = 40
    A = _skew(n)
    b = np.random.default_rng(1).integers(-3, 4, n).astype(float)
    sol, _ = kr.bicgstab_l(_Dense(A), b, ell=2, rtol=1e-12, max_spmv=4000)
    assert Status(int(sol.status)) == Status.BREAKDOWN
    assert np.all(np.asarray(sol.value) == 0)


def test_bicgstab_l_goes_on_from_its_state():
    """Two calls carrying the state take the same steps as one call."""
    rng = np.random.default_rng(2)
    n = 60
    A = np.eye(n) * 4 + rng.standard_normal((n, n)) * 0.3
    b = rng.standard_normal(n)
    one, _ = kr.bicgstab_l(_Dense(A), b, rtol=1e-30, max_spmv=16)
    half, state = kr.bicgstab_l(_Dense(A), b, rtol=1e-30, max_spmv=8)
    two, _ = kr.bicgstab_l(_Dense(A), b, state, rtol=1e-30, max_spmv=8)
    assert int(half.iterations) == int(two.iterations) == 8
    np.testing.assert_allclose(np.asarray(two.value), np.asarray(one.value), rtol=1e-9)


def test_bicgstab_l_keeps_last_finite_iterate():
    """An operator that overflows: the loop stops with NONFINITE and a
    finite iterate (the chain restarts from it)."""
    n = 8
    A = np.diag(np.full(n, 1e300))
    sol, _ = kr.bicgstab_l(_Dense(A), np.full(n, 1e300), rtol=1e-14, max_spmv=50)
    assert np.all(np.isfinite(np.asarray(sol.value)))
    assert Status(int(sol.status)) in (Status.NONFINITE, Status.CONVERGED)


def test_resolved_records_defaults():
    with pytest.raises(TypeError):
        SolveOptions.of(defaulted=("max_iters",))
    o = SolveOptions().resolved()
    assert o.max_iters == 10_000 and not o.max_iters_given
    assert SolveOptions(max_iters=10_000).resolved().max_iters_given
    assert o == SolveOptions(epsilon=1e-6, max_iters=10_000)  # not compared
    assert steady_longrun.budget_for(100, True) == 100
    assert steady_longrun.budget_for(100, False) > 100


def _tandem(c):
    em = jaxmc.build(jaxmc.load_model(str(TANDEM), f"c={c}"))
    x = np.asarray(em.reward_structure("customers").state, float)
    return em, float(_stationary_lu(em) @ x)


@needs_tandem
def test_scaled_tandem_certified_with_default_options():
    em, exact = _tandem(127)
    res = nm.long_run_rewards(em, em.reward_structure("customers"))
    v = res.values[em.initial_states[0]]
    assert res.status == Status.CONVERGED
    assert abs(v - exact) <= res.bound + 1e-9 * exact
    assert res.bound <= 1e-6 * exact
    assert res.extra["stationary_attempt"].method == "bicgstab"


@needs_tandem
def test_default_max_iters_is_a_budget(monkeypatch):
    """A chain that needs more steps than `max_iters`: with the default (here
    lowered to 300) Jacobi's steady rate carries it on to a certified value;
    the same number given is a hard cap, and the failure lists the chain."""
    monkeypatch.setattr(steady_longrun, "DIRECT_FALLBACK_MAX_STATES", 0)
    monkeypatch.setitem(opts.DEFAULTS["check"], "max_iters", 300)
    em, exact = _tandem(63)
    rew = em.reward_structure("customers")
    res = nm.long_run_rewards(em, rew, options=SolveOptions(throw=False))
    v = res.values[em.initial_states[0]]
    assert res.status == Status.CONVERGED
    assert abs(v - exact) <= res.bound and res.bound <= 1e-6 * exact
    last = res.extra["stationary_attempt"]
    assert last.iterations > 300
    assert [a.method for a in res.attempts] == ["bicgstab"]  # cut at 300
    assert res.attempts[0].iterations == 300
    # the same through the API (which resolves the options and hands them on)
    m = jaxmc.load_model(str(TANDEM), "c=63")
    got = jaxmc.check(m, 'R{"customers"}=? [ S ]')
    assert abs(got.value - exact) <= got.bound
    with pytest.raises(jaxmc.ConvergenceError):
        jaxmc.check(m, 'R{"customers"}=? [ S ]', max_iters=300)
    with pytest.raises(jaxmc.ConvergenceError) as e:
        nm.long_run_rewards(em, rew, options=SolveOptions(max_iters=300))
    msg = str(e.value)
    assert "every method failed" in msg
    for name in ("bicgstab", "jacobi", "gmres", "power"):
        assert name in msg
