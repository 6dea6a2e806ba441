"""The differentiable path's one failure model (`jaxmc.diff._status`): a
solve that does not converge is a `ConvergenceError` naming the method,
iterations and residual when called eagerly (`jaxmc.solve(params=...)`,
`jaxmc.sweep`); under `jax.jit`/`jax.vmap`/`jax.grad` the value is NaN and
`Problem.solve_report` says why. Values and gradients through the moved
solvers (`jaxmc.solvers.sor`/`adjoint`) against the closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmc
from jaxmc.solvers import Status


RUIN = """dtmc
const double p;
module m
  x : [0..20] init 10;
  [] x>0 & x<20 -> p : (x'=x+1) + 1-p : (x'=x-1);
endmodule
label "win" = x=20;
"""
WIN = 'P=? [ F "win" ]'

TWO = """mdp
const double p;
module m
  x : [0..20] init 10;
  [a] x>0 & x<20 -> p : (x'=x+1) + 1-p : (x'=x-1);
  [b] x>0 & x<20 -> p/2 : (x'=x+1) + 1-p/2 : (x'=x-1);
endmodule
label "win" = x=20;
"""


def ruin(p, i=10, n=20):
    """The gambler's ruin: P(reach n before 0 from i)."""
    r = (1 - p) / p
    return (1 - r**i) / (1 - r**n)


def ruin_dp(p, i=10, n=20):
    """Its derivative in `p`, in closed form."""
    r = (1 - p) / p
    dr = -1 / p**2
    num, den = 1 - r**i, 1 - r**n
    return (-i * r ** (i - 1) * den + n * r ** (n - 1) * num) * dr / den**2


@pytest.fixture(scope="module")
def model():
    return jaxmc.load_model_string(RUIN, parameters=("p",), params={"p": 0.45})


@pytest.mark.parametrize("omega", [None, 1.0])
def test_value_and_gradient_against_the_closed_form(model, omega):
    for p in (0.45, 0.55):
        v, g = jax.value_and_grad(
            lambda q: jaxmc.solve(model, WIN, params={"p": q}, omega=omega)
        )(p)
        np.testing.assert_allclose(v, ruin(p), rtol=1e-10)
        np.testing.assert_allclose(g, ruin_dp(p), rtol=1e-8)


@pytest.mark.parametrize("omega, name", [(None, "SOR"), (1.0, "Gauss–Seidel")])
def test_eager_failure_is_a_convergence_error_naming_the_method(model, omega, name):
    with pytest.raises(jaxmc.ConvergenceError) as e:
        jaxmc.solve(model, WIN, params={"p": 0.45}, max_iters=10, omega=omega)
    msg = str(e.value)
    assert f"{name} did not converge within 10 iterations" in msg
    assert "last difference" in msg
    # throw=False: the NaN value, no error
    out = jaxmc.solve(model, WIN, params={"p": 0.45}, max_iters=10, throw=False)
    assert np.isnan(out)


def test_mdp_value_iteration_failure_names_value_iteration():
    mdp = jaxmc.load_model_string(TWO, parameters=("p",), params={"p": 0.45})
    with pytest.raises(jaxmc.ConvergenceError, match="Value iteration did not"):
        jaxmc.solve(mdp, 'Pmax=? [ F "win" ]', params={"p": 0.45}, max_iters=10)
    v = jaxmc.solve(mdp, 'Pmax=? [ F "win" ]', params={"p": 0.45})
    np.testing.assert_allclose(v, ruin(0.45), rtol=1e-9)


def test_under_jit_vmap_and_grad_nan_and_a_status_to_ask_for(model):
    prob = jaxmc.parametric(model, WIN, params={"p": 0.45}, max_iters=10)
    # under the caller's jit: NaN, and the report says why
    v = jax.jit(lambda q: prob({"p": q}))(0.45)
    assert np.isnan(v)
    v, rep = jax.jit(prob.solve_report)({"p": 0.45})
    assert np.isnan(v) and rep.methods == ("sor",)
    assert rep.status.tolist() == [Status.MAX_ITERS] and not bool(rep.ok)
    assert rep.iterations.tolist() == [10] and float(rep.residual[0]) > 1e-6
    # under grad: a NaN derivative (nothing can raise there)
    assert np.isnan(jax.grad(lambda q: prob({"p": q}))(0.45))
    assert np.isnan(jax.grad(lambda q: jaxmc.solve(model, WIN, params={"p": q},
                                                   max_iters=10))(0.45))  # fmt: skip
    # under vmap: a status per point
    ps = np.array([0.1, 0.3, 0.45, 0.49])
    its = [int(prob.solve_report({"p": p})[1].iterations[0]) for p in ps[:2]]
    assert its == [10, 10]
    good = jaxmc.parametric(model, WIN, params={"p": 0.45}, max_iters=150)
    single = [good.solve_report({"p": p})[1] for p in ps]
    vs, reps = jax.vmap(good.solve_report)({"p": jnp.asarray(ps)})
    assert reps.status.shape == (4, 1)
    ok = np.asarray(reps.ok)
    assert ok.tolist() == [True, True, False, False]  # slow near p = 1/2
    # each point's sweeps and status are those of its own solve
    assert reps.iterations[:, 0].tolist() == [int(r.iterations[0]) for r in single]
    assert reps.status[:, 0].tolist() == [int(r.status[0]) for r in single]
    np.testing.assert_allclose(vs[ok], ruin(ps[ok]), rtol=1e-9)
    assert np.isnan(vs[~ok]).all()


def test_sweep_failure_is_a_convergence_error_with_the_points(model):
    ps = np.linspace(0.3, 0.6, 8)
    with pytest.raises(jaxmc.ConvergenceError, match=r"at 8 of 8 points.*SOR"):
        jaxmc.sweep(model, WIN, params={"p": ps}, max_iters=10)
    with pytest.raises(jaxmc.ConvergenceError, match=r"at 8 of 8 points"):
        jaxmc.sweep(model, WIN, params={"p": ps}, max_iters=10, chunk=1)
    out = jaxmc.sweep(model, WIN, params={"p": ps}, max_iters=10, throw=False)
    assert np.isnan(out).all()
    np.testing.assert_allclose(
        jaxmc.sweep(model, WIN, params={"p": ps}), ruin(ps), rtol=1e-9
    )
