"""The parametric path's inputs and its zero probabilities: errors that speak
the API, and values equal to `jaxmc.check` at the same point."""

import re
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxmc
from jaxmc.errors import JaxmcError, ModelCheckingError, SemanticError
from jaxmc.props.resolve import parse_properties


QUEUE = """ctmc
const int K = 4;
const double lambda;
const double mu;
module queue
  q : [0..K] init 0;
  [arrive] q < K -> lambda : (q'=q+1);
  [serve]  q > 0 -> mu : (q'=q-1);
endmodule
label "empty" = q=0;
label "full" = q=K;
"""

# `p` leads either to a goal (1) or to a trap (2); with p = 0 the only path
# to the goal is gone and state 0 loops for ever.
CHAIN = """dtmc
const double p;
const double q;
module m
  s : [0..2] init 0;
  [] s=0 -> p : (s'=1) + q : (s'=2) + 1-p-q : (s'=0);
  [] s>0 -> (s'=s);
endmodule
"""

EMPTY = 'S=? [ "empty" ]'


@pytest.fixture
def queue(tmp_path):
    path = tmp_path / "queue.sm"
    path.write_text(QUEUE)
    return path


def _checked(path, prop, **consts):
    return float(jaxmc.check(jaxmc.load_model(path, consts), prop, epsilon=1e-10).value)


@pytest.mark.parametrize("first", [(0.0, 3.0), (1.0, 3.0)])
def test_zero_rate_equals_check(queue, first):
    """`lambda = 0`, first or after another point: the value of the model
    built at that point (only the empty queue is reachable)."""
    model = jaxmc.load_model(queue, parameters=("lambda", "mu"))
    lam, mu = first
    v = float(jaxmc.solve(model, EMPTY, params={"lambda": lam, "mu": mu}))
    assert v == pytest.approx(
        _checked(queue, EMPTY, **{"lambda": lam, "mu": mu}), rel=1e-6
    )
    v0 = float(jaxmc.solve(model, EMPTY, params={"lambda": 0.0, "mu": 3.0}))
    assert (
        v0 == pytest.approx(_checked(queue, EMPTY, **{"lambda": 0.0, "mu": 3.0})) == 1.0
    )
    # a positive point after the zero one still uses the parametric structure
    v1 = float(jaxmc.solve(model, EMPTY, params={"lambda": 1.5, "mu": 3.0}))
    assert v1 == pytest.approx(
        _checked(queue, EMPTY, **{"lambda": 1.5, "mu": 3.0}), rel=1e-6
    )


def test_zero_rate_in_sweep(queue):
    model = jaxmc.load_model(queue, parameters=("lambda", "mu"))
    lams = np.array([0.0, 0.5, 1.0])
    got = jaxmc.sweep(model, EMPTY, params={"lambda": lams, "mu": np.full(3, 3.0)})
    want = [_checked(queue, EMPTY, **{"lambda": float(lam), "mu": 3.0}) for lam in lams]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_zero_rate_gradient_is_refused_elsewhere_fine(queue):
    model = jaxmc.load_model(queue, parameters=("lambda", "mu"))

    def f(lam):
        return jaxmc.solve(model, EMPTY, params={"lambda": lam, "mu": 3.0})

    with pytest.raises(
        ModelCheckingError, match=r"changes the graph .* built at .*not differentiable"
    ):
        jax.grad(f)(0.0)
    # d/dlambda of (1 - rho)/(1 - rho^5), rho = lambda/3, by central differences
    h = 1e-5
    fd = (
        _checked(queue, EMPTY, **{"lambda": 1 + h, "mu": 3.0})
        - _checked(queue, EMPTY, **{"lambda": 1 - h, "mu": 3.0})
    ) / (2 * h)
    assert float(jax.grad(f)(1.0)) == pytest.approx(fd, rel=1e-4)


@pytest.mark.parametrize("prop", ["P=? [ F s=1 ]", "P=? [ F<=3 s=1 ]", "P=? [ G s=0 ]"])
@pytest.mark.parametrize("p, q", [(0.0, 0.2), (0.3, 0.0), (0.0, 0.0), (0.3, 0.2)])
def test_zero_probabilities_equal_check(tmp_path, prop, p, q):
    """Each zero removes edges: where that changes prob0/prob1 (`p = q = 0`:
    state 0 never leaves), the value is the one of the model built there."""
    path = tmp_path / "chain.pm"
    path.write_text(CHAIN)
    model = jaxmc.load_model(path, parameters=("p", "q"))
    want = _checked(path, prop, p=p, q=q)
    assert float(jaxmc.solve(model, prop, params={"p": p, "q": q})) == pytest.approx(
        want, abs=1e-8
    )
    got = jaxmc.sweep(model, prop, params={"p": [0.25, p], "q": [0.25, q]})
    assert got[1] == pytest.approx(want, abs=1e-8)


def test_pinned_build_point_with_zero_keeps_its_error(tmp_path):
    path = tmp_path / "chain.pm"
    path.write_text(CHAIN)
    model = jaxmc.load_model(path, parameters=("p", "q"))
    with pytest.raises(JaxmcError, match="is 0 at the build point"):
        jaxmc.solve(
            model,
            "P=? [ F s=1 ]",
            params={"p": 0.3, "q": 0.2},
            build_params={"p": 0.0, "q": 0.2},
        )


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"lambda": "abc", "mu": 3.0},
            "parameter `lambda`: expected a number, got 'abc'",
        ),
        (
            {"lambda": True, "mu": 3.0},
            "parameter `lambda`: expected a number, got True",
        ),
        (
            {"lambda": [1.0, 2.0], "mu": 3.0},
            "parameter `lambda`: expected a number, got [1.0, 2.0]",
        ),
        ({"lambda": 1.0, "mu": 3.0, "nu": 1.0}, "`nu` is not a constant of the model"),
        ({"lambda": 1.0}, "`params` lacks a value for parameter `mu`"),
        ([("lambda", 1.0)], "`params` should be a mapping"),
    ],
)
def test_bad_params_in_solve(queue, params, message):
    model = jaxmc.load_model(queue, parameters=("lambda", "mu"))
    with pytest.raises(SemanticError, match=re.escape(message)) as e:
        jaxmc.solve(model, EMPTY, params=params)
    if "not a constant" in message or "lacks" in message:
        assert "lambda, mu" in str(e.value)
    assert "jax.grad" not in str(e.value)


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"lambda": np.ones(3), "mu": np.ones(2)},
            "shapes that do not broadcast together: `lambda` (3,), `mu` (2,)",
        ),
        (
            {"lambda": np.ones(3), "mu": "x"},
            "parameter `mu`: expected a number or an array of numbers",
        ),
        ({"lambda": np.ones(3)}, "`params` lacks a value for parameter `mu`"),
    ],
)
def test_bad_params_in_sweep(queue, params, message):
    model = jaxmc.load_model(queue, parameters=("lambda", "mu"))
    with pytest.raises(SemanticError, match=re.escape(message)):
        jaxmc.sweep(model, EMPTY, params=params)


def test_rebuild_takes_a_defined_constant(tmp_path):
    """`rebuild=True` with a constant the file defines (which `params` may
    name) uses the value given, not the file's."""
    path = tmp_path / "q.sm"
    path.write_text(QUEUE.replace("const double lambda;", "const double lambda = 2.0;"))
    model = jaxmc.load_model(path, {"mu": 3.0})
    v = float(jaxmc.solve(model, EMPTY, params={"lambda": 1.0}, rebuild=True))
    rho = 1 / 3
    assert v == pytest.approx((1 - rho) / (1 - rho**5), rel=1e-6)


def test_cli_sweep_through_zero(queue):
    r = subprocess.run(
        [sys.executable, "-m", "jaxmc", "sweep", str(queue), "--prop", EMPTY,
         "--param", "lambda=0:0.5:1", "--param", "mu=3", "-q"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()[2:]]
    assert [float(x[0]) for x in rows] == [0.0, 0.5, 1.0]
    for lam, _, v in rows:
        assert float(v) == pytest.approx(
            _checked(queue, EMPTY, **{"lambda": float(lam), "mu": 3.0}), rel=1e-6
        )


def test_text_property_on_an_explicit_model():
    """A property as text on an already built model: a TypeError that names
    what to pass, not an AttributeError; checked properties still work."""
    model = jaxmc.load_model_string(CHAIN, constants="p=0.5,q=0.25")
    em = jaxmc.build(model)
    with pytest.raises(TypeError, match="jaxmc.load_model"):
        jaxmc.check(em, "P=? [ F s=1 ]")
    prop = parse_properties("P=? [ F s=1 ]", model)[0]
    assert abs(float(jaxmc.check(em, prop).value) - 2 / 3) < 1e-6
