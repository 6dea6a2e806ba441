"""Gradients through `jaxmc.solve(..., params=...)`: against PRISM's exact
rational functions (differentiated with sympy), against central finite
differences, forward vs reverse mode, and the no-retrace guarantee."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmc
from jaxmc.errors import UnsupportedError


MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "models"
PARAM = MODELS / "prism-tests" / "functionality" / "verify" / "param"
EXAMPLES = MODELS / "prism-examples"

pytestmark = pytest.mark.skipif(
    not PARAM.exists(), reason="shared models not available"
)


def results(props_file: Path) -> dict[str, str]:
    """`property text -> RESULT string` of a PRISM regression props file."""
    out, pending = {}, None
    for line in props_file.read_text().splitlines():
        s = line.strip()
        if s.startswith("// RESULT:"):
            pending = s.split(":", 1)[1].strip()
        elif s and not s.startswith("//") and pending is not None:
            out[s.rstrip(";").strip()] = pending
            pending = None
    return out


# (file, constants, parameter point, property)
RATIONAL = [
    ("dtmcs/dtmc_pctl.prism", None, {"p": 0.3}, "P=? [ F s=2 ]"),
    ("dtmcs/dtmc_pctl.prism", None, {"p": 0.3}, "P=? [ F s=2|s=4 ]"),
    ("dtmcs/dtmc_pctl.prism", None, {"p": 0.3}, "P=? [ s!=1 U s=3 ]"),
    pytest.param(
        "dtmcs/dtmc_pctl.prism",
        None,
        {"p": 0.3},
        'R{"r"}=? [ S ]',
        marks=pytest.mark.slow,
    ),
    pytest.param(
        "dtmcs/dtmc_pctl.prism",
        None,
        {"p": 0.3},
        'R{"r2"}=? [ S ]',
        marks=pytest.mark.slow,
    ),
    ("dtmcs/dtmc_pctl.prism", None, {"p": 0.3}, 'R{"time"}=? [ F s>1 ]'),
    (
        "dtmcs/dtmc_mult_param.prism",
        None,
        {"p": 0.5, "q": 0.2, "r": 0.05},
        "P=?[F d>2]",
    ),
    ("dtmcs/dtmc_steady_1.prism", None, {"p": 0.3}, "S=?[ s=1 & t=0 ]"),
    pytest.param(
        "dtmcs/dtmc_steady_1.prism",
        None,
        {"p": 0.3},
        "S=?[ s=2 & t=2 ]",
        marks=pytest.mark.slow,
    ),
    ("dtmcs/dtmc_steady_2.prism", None, {"p": 0.3}, "S=?[ s=2 ]"),
    ("ctmcs/ctmc_rewards.prism", None, {"x": 5.0}, 'R{"a"}=? [ F s=2 ]'),
    ("ctmcs/ctmc_rewards.prism", None, {"x": 5.0}, 'R{"a_state"}=? [ F s>2 ]'),
    ("ctmcs/poll2.prism", None, {"gamma": 2.0}, "S=? [ s1=1 & !(s=1 & a=1) ]"),
    pytest.param(
        "ctmcs/poll2.prism",
        None,
        {"gamma": 2.0},
        "S=? [ s1=0 ]",
        marks=pytest.mark.slow,
    ),
    ("ctmcs/poll2.prism", None, {"gamma": 2.0}, "P=? [ !(s=2 & a=1) U (s=1 & a=1) ]"),
    pytest.param(
        "ctmcs/poll2.prism",
        None,
        {"gamma": 2.0},
        'R{"waiting"}=?[ S ]',
        marks=pytest.mark.slow,
    ),
    ("ctmcs/poll2.prism", None, {"gamma": 2.0}, 'R{"waiting"}=?[ F (s=1 & a=1) ]'),
    ("mdps/mdp_simple.prism", None, {"p": 0.05}, "Pmin=? [ F t=1 ]"),
    ("mdps/mdp_simple.prism", None, {"p": 0.05}, "Rmin=? [ F t=1 ]"),
    ("mdps/safety-fig9.prism", None, {"p": 0.05}, '1- Pmax=? [ F "A_A_err_acc" ]'),
    ("param-complex-1.prism", {"z": 0.5}, {"p": 0.3}, "R=?[ F s=10 ]"),
    ("param-simple.prism", None, {"p": 0.3}, "P=? [ F s=1 ]"),
    ("param-consts.prism", None, {"p": 0.3}, "P=? [ F s=2 ]"),
]


@pytest.mark.parametrize(
    "file,consts,point,prop",
    RATIONAL,
    ids=[
        f"{c.values[0] if hasattr(c, 'values') else c[0]}:"
        f"{c.values[3] if hasattr(c, 'values') else c[3]}"
        for c in RATIONAL
    ],
)
def test_gradient_matches_prism_rational_function(file, consts, point, prop):
    sympy = pytest.importorskip("sympy")
    path = PARAM / file
    expected = results(Path(str(path) + ".props"))[prop]
    symbols = {k: sympy.Symbol(k) for k in point}
    expr = sympy.sympify(expected.replace("^", "**"), locals=symbols)
    subs = {symbols[k]: v for k, v in point.items()}
    model = jaxmc.load_model(path, consts, parameters=tuple(point))
    sign, offset = 1.0, 0.0
    if prop.startswith("1-"):  # `1- Pmax=? [...]`: solve the operator
        prop, sign, offset = prop[2:].strip(), -1.0, 1.0

    def f(theta):
        return offset + sign * jaxmc.solve(model, prop, params=theta)

    value = f(point)
    grad = jax.grad(f)(point)
    np.testing.assert_allclose(
        float(value), float(expr.evalf(subs=subs)), rtol=1e-8, atol=1e-10
    )
    for k in point:
        d = float(sympy.diff(expr, symbols[k]).evalf(subs=subs))
        np.testing.assert_allclose(float(grad[k]), d, rtol=1e-6, atol=1e-9)


def central_difference(f, point, k, h):
    a, b = dict(point), dict(point)
    a[k] += h
    b[k] -= h
    return (float(f(a)) - float(f(b))) / (2 * h)


# Finite-difference checks on models where no exact result is given:
# bounded properties (scans), CTMC transient (uniformisation, w.r.t. rates and
# the time bound), MDP max/min, and PRISM example models.
FD = [
    (PARAM / "dtmcs/dtmc_pctl.prism", None, {"p": 0.3}, "P=? [ F<=5 s=2 ]"),
    (
        PARAM / "dtmcs/dtmc_mult_param.prism",
        None,
        {"p": 0.5, "q": 0.2, "r": 0.05},
        'R{"coin_flips"}=? [ F s=7 ]',
    ),
    (
        PARAM / "dtmcs/dtmc_mult_param.prism",
        None,
        {"p": 0.5, "q": 0.2, "r": 0.05},
        'R{"coin_flips"}=? [ C<=4 ]',
    ),
    (PARAM / "ctmcs/poll2.prism", None, {"gamma": 2.0}, "P=? [ F<=1.5 (s=1 & a=1) ]"),
    (PARAM / "ctmcs/ctmc_rewards.prism", None, {"x": 5.0}, "P=? [ F<=0.3 s=2 ]"),
    (PARAM / "mdps/mdp_simple.prism", None, {"p": 0.05}, "Pmax=? [ F<=3 t=1 ]"),
    (PARAM / "mdps/mdp_simple.prism", None, {"p": 0.05}, "Rmin=? [ F t=1 ]"),
    (
        EXAMPLES / "ctmcs/tandem/tandem.sm",
        {"c": 3},
        {"mu1a": 0.2, "mu1b": 1.8, "mu2": 2.0, "kappa": 4.0},
        "P=? [ F<=1 sc=c ]",
    ),
    pytest.param(
        EXAMPLES / "ctmcs/tandem/tandem.sm",
        {"c": 3},
        {"mu1a": 0.2, "mu2": 2.0, "kappa": 4.0},
        "S=? [ sc=c ]",
        marks=pytest.mark.slow,
    ),
    (
        EXAMPLES / "ctmcs/tandem/tandem.sm",
        {"c": 3},
        {"mu1b": 1.8, "kappa": 4.0},
        "P=? [ sm<c U sc=c ]",
    ),
    (
        EXAMPLES / "mdps/firewire/abst/firewire.nm",
        {"delay": 3},
        {"fast": 0.4},
        'R{"rounds"}max=? [ F s=9 ]',
    ),
]


@pytest.mark.parametrize(
    "path,consts,point,prop",
    FD,
    ids=[
        f"{(c.values if hasattr(c, 'values') else c)[0].name}:"
        f"{(c.values if hasattr(c, 'values') else c)[3]}"
        for c in FD
    ],
)
def test_gradient_matches_finite_differences(path, consts, point, prop):
    if not path.exists():
        pytest.skip(f"{path} not available")
    model = jaxmc.load_model(path, consts, parameters=tuple(point))

    def f(theta):
        return jaxmc.solve(model, prop, params=theta)

    grad = jax.grad(f)(point)
    for k in point:
        h = 1e-5 * max(1.0, abs(point[k]))
        fd = central_difference(f, point, k, h)
        np.testing.assert_allclose(float(grad[k]), fd, rtol=1e-5, atol=1e-8)


def test_time_bound_gradient():
    """d/dt P(F<=t φ) through uniformisation, with t a parameter."""
    path = PARAM / "ctmcs/ctmc_rewards.prism"
    text = path.read_text().replace(
        "const double x;", "const double x;\nconst double T;"
    )
    model = jaxmc.load_model_string(text, parameters=("x", "T"))
    point = {"x": 5.0, "T": 0.3}

    def f(theta):
        return jaxmc.solve(model, "P=? [ F<=T s=2 ]", params=theta)

    grad = jax.grad(f)(point)
    # Hypoexponential(x, 7): P(reach s=2 by T).
    x, t = point["x"], point["T"]
    cdf = 1 - (7 * np.exp(-x * t) - x * np.exp(-7 * t)) / (7 - x)
    np.testing.assert_allclose(float(f(point)), cdf, rtol=1e-9)
    density = x * 7 / (7 - x) * (np.exp(-x * t) - np.exp(-7 * t))
    np.testing.assert_allclose(float(grad["T"]), density, rtol=1e-8)
    np.testing.assert_allclose(
        float(grad["x"]), central_difference(f, point, "x", 1e-5), rtol=1e-5
    )


def test_jvp_and_jacrev_agree_with_grad():
    model = jaxmc.load_model(
        PARAM / "dtmcs/dtmc_mult_param.prism", parameters=("p", "q", "r")
    )
    prop = "P=?[F d>2]"

    def f(v):
        return jaxmc.solve(model, prop, params={"p": v[0], "q": v[1], "r": v[2]})

    x = jnp.array([0.5, 0.2, 0.05])
    g = jax.grad(f)(x)
    J = jax.jacrev(lambda v: jnp.stack([f(v), 2 * f(v)]))(x)
    np.testing.assert_allclose(J[0], g, rtol=1e-10)
    np.testing.assert_allclose(J[1], 2 * g, rtol=1e-10)
    for i in range(3):
        e = jnp.zeros(3).at[i].set(1.0)
        _, t = jax.jvp(f, (x,), (e,))
        np.testing.assert_allclose(float(t), float(g[i]), rtol=1e-9)


def test_vmap_matches_loop_and_sweep():
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_pctl.prism", parameters=("p",))
    prop = "P=? [ F s=2 ]"
    ps = np.linspace(0.1, 0.9, 7)
    loop = np.array([float(jaxmc.solve(model, prop, params={"p": p})) for p in ps])
    vm = jax.vmap(lambda p: jaxmc.solve(model, prop, params={"p": p}))(jnp.asarray(ps))
    np.testing.assert_allclose(np.asarray(vm), loop, rtol=1e-10)
    sw = jaxmc.sweep(model, prop, params={"p": ps}, chunk=3)
    np.testing.assert_allclose(sw, loop, rtol=1e-10)
    np.testing.assert_allclose(loop, -ps / (2 * ps - 4), rtol=1e-9)
    # vmapped gradients
    dg = jax.vmap(jax.grad(lambda p: jaxmc.solve(model, prop, params={"p": p})))(
        jnp.asarray(ps)
    )
    np.testing.assert_allclose(np.asarray(dg), 4 / (2 * ps - 4) ** 2, rtol=1e-8)


def test_sweep_2d_and_mdp():
    model = jaxmc.load_model(
        PARAM / "dtmcs/dtmc_mult_param.prism", parameters=("p", "q", "r")
    )
    P, Q = np.meshgrid(np.linspace(0.2, 0.8, 4), np.linspace(0.1, 0.9, 3))
    out = jaxmc.sweep(model, "P=?[F d>2]", params={"p": P, "q": Q, "r": 0.05})
    r = 0.05
    exact = (P * Q**2 - 4 * P * Q**2 * r + 4 * P * r + Q**2 - 2) / (Q**2 - 2)
    assert out.shape == P.shape
    np.testing.assert_allclose(out, exact, rtol=1e-9)
    mdp = jaxmc.load_model(PARAM / "mdps/mdp_simple.prism", parameters=("p",))
    ps = np.linspace(0.01, 0.2, 5)
    np.testing.assert_allclose(
        jaxmc.sweep(mdp, "Rmin=? [ F t=1 ]", params={"p": ps}),
        (3 * ps + 10) / ps,
        rtol=1e-8,
    )


def test_no_retrace_for_new_values():
    model = jaxmc.load_model(PARAM / "dtmcs/dtmc_pctl.prism", parameters=("p",))
    prop = 'R{"time"}=? [ F s>1 ]'
    problem = jaxmc.parametric(model, prop, params={"p": 0.3})
    problem({"p": 0.3})
    before = problem.traces
    for p in (0.1, 0.2, 0.35, 0.7):
        jaxmc.solve(model, prop, params={"p": p})
        problem({"p": jnp.asarray(p)})
    assert problem.traces == before
    g = jax.grad(lambda p: problem({"p": p}))
    g(0.3)
    after_grad = problem.traces
    g(0.4)
    g(0.6)
    assert problem.traces == after_grad


def test_matches_plain_check_at_build_point():
    model = jaxmc.load_model(EXAMPLES / "ctmcs/tandem/tandem.sm", {"c": 4})
    for prop in ("P=? [ F<=2 sc=c ]", "S=? [ sm=c ]", "P=? [ sm<c U sc=c ]"):
        a = float(jaxmc.solve(model, prop, params={"kappa": 4.0}))
        b = jaxmc.check(model, prop, epsilon=1e-10).value
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_parameter_in_guard_is_rejected():
    path = PARAM / "param-unsupported-guard.prism"
    model = jaxmc.load_model(path, parameters=("p",))
    with pytest.raises(UnsupportedError, match="appears in the guard"):
        jaxmc.solve(model, "P=? [ F s=1 ]", params={"p": 0.3})


def test_vanishing_transition_is_rejected_and_rebuild_works():
    model = jaxmc.load_model(PARAM / "param-simple.prism", parameters=("p",))
    # a build point asked for explicitly, where a transition vanishes
    with pytest.raises(UnsupportedError, match="is 0 at the build point"):
        jaxmc.solve(model, "P=? [ F s=1 ]", params={"p": 0.0}, build_params={"p": 0.0})
    # else the structure is built at a generic point, and the value at p = 0
    # is the one of the model built there
    fresh = jaxmc.load_model(PARAM / "param-simple.prism", parameters=("p",))
    assert float(jaxmc.solve(fresh, "P=? [ F s=1 ]", params={"p": 0.0})) == 0.0
    v = jaxmc.solve(model, "P=? [ F s=1 ]", params={"p": 0.0}, rebuild=True)
    assert float(v) == 0.0
    # Built at a generic point, the structure is kept at p = 0 (Storm's semantics).
    assert float(
        jaxmc.solve(model, "P=? [ F s=1 ]", params={"p": 0.4})
    ) == pytest.approx(0.4)
    assert float(
        jaxmc.solve(model, "P=? [ F s=1 ]", params={"p": 0.0})
    ) == pytest.approx(0.0)


def test_existing_solve_unchanged():
    model = jaxmc.load_model(PARAM / "param-simple.prism", {"p": 0.25})
    assert float(jaxmc.solve(model, "P=? [ F s=1 ]")) == pytest.approx(0.25)
