"""One plan, two executors: every property is checked eagerly (`jaxmc.check`
through `jaxmc.solve` with the parameter as a constant) and traced
(`jaxmc.solve(params=...)`), and the values must agree within the solvers'
tolerance. A property the traced executor does not support must raise
`UnsupportedError` with a hint there, and an error of the property itself
(an MDP `P=?` without min/max) must be the same error on both paths."""

import jax
import numpy as np
import pytest

import jaxmc
from jaxmc.errors import ModelCheckingError, UnsupportedError


DTMC = """dtmc
const double p;
module m
  s : [0..4] init 0;
  [a] s=0 -> p : (s'=1) + (1-p) : (s'=2);
  [b] s=1 -> 0.5 : (s'=3) + 0.5 : (s'=0);
  [c] s=2 -> 0.3 : (s'=4) + 0.7 : (s'=1);
  [d] s=3 -> 0.5 : (s'=4) + 0.5 : (s'=3);
  [e] s=4 -> p : (s'=3) + (1-p) : (s'=4);
endmodule
label "low" = s<2;
rewards "r"
  s<3 : p + 1;
  s=4 : 2;
  [a] true : 2;
endrewards
rewards "t"
  [b] true : 1;
  [c] true : 3;
endrewards
"""

CTMC = """ctmc
const double p;
module m
  s : [0..4] init 0;
  [a] s=0 -> 3*p : (s'=1) + 2 : (s'=2);
  [b] s=1 -> 1.5 : (s'=3) + 1 : (s'=0);
  [c] s=2 -> 0.7 : (s'=4) + 2 : (s'=1);
  [d] s=3 -> 4 : (s'=4);
  [e] s=4 -> p : (s'=3);
endmodule
rewards "r"
  s<3 : p + 1;
  s=4 : 2;
endrewards
rewards "t"
  s<3 : p;
  [a] true : 2;
  [c] true : 0.5;
endrewards
"""

MDP = """mdp
const double p;
module m
  s : [0..3] init 0;
  [a] s=0 -> p : (s'=1) + (1-p) : (s'=2);
  [b] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=0);
  [c] s=1 -> 0.6 : (s'=3) + 0.3 : (s'=0) + 0.1 : (s'=2);
  [d] s=1 -> 0.5 : (s'=2) + 0.5 : (s'=3);
  [e] s=2 -> (s'=2);
  [f] s=3 -> (s'=3);
endmodule
rewards "r"
  s=0 : p;
  [a] true : 1;
  [b] true : 2;
  [c] true : 1;
  [d] true : 3;
endrewards
"""

SOURCES = {"dtmc": DTMC, "ctmc": CTMC, "mdp": MDP}
POINT = 0.35

# (model, property, whether the traced executor supports it)
CASES = [
    ("dtmc", "P=? [ F s=4 ]", True),
    ("dtmc", "P=? [ s<2 U s=3 ]", True),
    ("dtmc", 'P=? [ "low" U s=3 ]', True),
    ("dtmc", "P=? [ X s=1 ]", True),
    ("dtmc", "P=? [ F<=5 s=3 ]", True),
    ("dtmc", "P=? [ F<6 s=3 ]", True),
    ("dtmc", "P=? [ F[2,5] s=3 ]", True),
    ("dtmc", "P=? [ F>=2 s=4 ]", True),
    ("dtmc", "P=? [ s!=2 U>3 s=4 ]", True),
    ("dtmc", "P=? [ G s!=4 ]", True),
    ("dtmc", "P=? [ G<=4 s!=4 ]", True),
    ("dtmc", "P=? [ s!=2 W s=3 ]", True),
    ("dtmc", "P=? [ s=3 R s!=2 ]", True),
    ("dtmc", "Pmax=? [ F s=4 ]", True),  # Pmax on a DTMC is P
    ("dtmc", "P>0.5 [ F<=5 s=3 ]", True),
    ("dtmc", 'R{"r"}=? [ F s>=3 ]', True),
    ("dtmc", 'R{"t"}=? [ F s=3 ]', True),
    ("dtmc", 'R{"r"}=? [ C<=4 ]', True),
    ("dtmc", 'R{"r"}=? [ I=3 ]', True),
    ("dtmc", 'R{"r"}=? [ S ]', True),
    ("dtmc", 'R{"t"}=? [ S ]', True),
    ("dtmc", "R<3 [ F s>=3 ]", True),
    ("dtmc", "S=? [ s=4 ]", True),
    ("dtmc", "S>0.3 [ s=4 ]", True),
    ("dtmc", "filter(max, P=? [ F s=4 ], s<3)", True),
    ("dtmc", 'filter(avg, R{"r"}=? [ F s>=3 ], s!=4)', True),
    ("dtmc", "filter(state, P=? [ F<=5 s=3 ], s=2)", True),
    ("dtmc", "filter(forall, P>0.2 [ F s=4 ], s<3)", True),
    ("dtmc", "filter(count, P>0.6 [ F<=3 s=3 ])", True),
    ("dtmc", 'R{"r"}=? [ C ]', True),  # infinite: a BSCC with reward
    ("dtmc", 'R{"t"}=? [ C ]', True),
    ("dtmc", "P=? [ F P>0.5 [ X s=1 ] ]", True),
    ("dtmc", "P=? [ s<4 U P<=0.5 [ F<=2 s=3 ] ]", True),
    ("dtmc", 'R{"r"}=? [ F P>=0.9 [ F<=3 s>=3 ] ]', True),
    ("dtmc", "filter(max, P=? [ X P>0.5 [ X s=1 ] ], P>0.2 [ F<=1 s=1 ])", True),
    ("dtmc", "E [ F s=4 ]", True),
    ("dtmc", "A [ F s=4 ]", True),
    ("dtmc", "A [ G s!=4 ]", True),
    ("dtmc", "E [ s<2 U s=3 ]", True),
    ("dtmc", "filter(forall, E [ X s=3 ], s>=3)", True),
    ("dtmc", "P=? [ F s=4 ] + 1", False),
    ("ctmc", "P=? [ F s=4 ]", True),
    ("ctmc", "P=? [ s<2 U s=3 ]", True),
    ("ctmc", "P=? [ F<=1.5 s=3 ]", True),
    ("ctmc", "P=? [ F<1.5 s=3 ]", True),
    ("ctmc", "P=? [ G<=0.8 s!=3 ]", True),
    ("ctmc", "P=? [ F[0,1.2] s=4 ]", True),
    ("ctmc", "S=? [ s=4 ]", True),
    ("ctmc", "R=? [ F s=3 ]", True),
    ("ctmc", "R=? [ S ]", True),
    ("ctmc", "P=? [ F[0.5,1.5] s=3 ]", True),
    ("ctmc", "P=? [ s<3 U[0.5,1.5] s=3 ]", True),
    ("ctmc", "P=? [ F[1,1] s=3 ]", True),
    ("ctmc", "P=? [ F>=0.5 s=3 ]", True),
    ("ctmc", "P=? [ s!=4 U>=0.4 s=3 ]", True),
    ("ctmc", "P=? [ G>=0.5 s!=4 ]", True),
    ("ctmc", "R=? [ C<=1 ]", True),
    ("ctmc", 'R{"t"}=? [ C<=1.5 ]', True),
    ("ctmc", "R=? [ C<=0 ]", True),
    ("ctmc", "R=? [ I=1 ]", True),
    ("ctmc", 'R{"t"}=? [ I=0.7 ]', True),
    ("ctmc", "R=? [ C<=p*3 ]", True),  # a time that depends on the parameter
    ("ctmc", 'R{"t"}=? [ I=p*2 ]', True),
    ("ctmc", "R=? [ C ]", True),  # infinite
    ("ctmc", 'R{"t"}=? [ C ]', True),
    ("ctmc", "P=? [ F<=1 P>0.5 [ F<=0.5 s=4 ] ]", True),
    ("ctmc", "E [ s<3 U s=3 ]", True),
    ("mdp", "Pmax=? [ F s=3 ]", True),
    ("mdp", "Pmin=? [ F s=3 ]", True),
    ("mdp", "Pmax=? [ X s=1 ]", True),
    ("mdp", "Pmin=? [ X s=1 ]", True),
    ("mdp", "Pmax=? [ F<=3 s=3 ]", True),
    ("mdp", "Pmin=? [ F[1,3] s=1 ]", True),
    ("mdp", "Pmin=? [ G s!=3 ]", True),
    ("mdp", "Pmax=? [ G<=2 s!=3 ]", True),
    ("mdp", "Pmax=? [ s!=2 W s=3 ]", True),
    ("mdp", "P>=0.3 [ F s=3 ]", True),  # no min/max: the minimum decides
    ("mdp", "P>=0.5 [ F s=3 ]", True),
    ("mdp", "P<0.9 [ F s=3 ]", True),  # no min/max: the maximum decides
    ("mdp", "P<0.3 [ F s=3 ]", True),
    ("mdp", "R<=3 [ F s>=2 ]", True),
    ("mdp", "Rmin=? [ F s>=2 ]", True),
    ("mdp", "Rmax=? [ F s>=2 ]", True),
    ("mdp", "Rmax=? [ C<=3 ]", True),
    ("mdp", "Rmin=? [ C<=3 ]", True),
    ("mdp", "Rmax=? [ I=2 ]", True),
    ("mdp", "filter(min, Pmax=? [ F s=3 ], s<2)", True),
    ("mdp", "filter(exists, P>=0.5 [ F s=3 ], s<2)", True),
    ("mdp", "Rmax=? [ C ]", True),
    ("mdp", "Rmin=? [ C ]", True),
    ("mdp", "R<=5 [ C ]", True),  # no min/max: the maximum decides
    ("mdp", "Pmax=? [ F Pmin>0.5 [ X s=3 ] ]", True),
    ("mdp", "Pmin=? [ X Pmax>=0.5 [ F<=1 s=3 ] ]", True),
    ("mdp", "E [ F s=2 ]", True),
    ("mdp", "A [ F s>=2 ]", True),
    ("mdp", "A [ G s<3 ]", True),
    ("mdp", "filter(exists, A [ X s=3 ])", True),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("engines")
    out = {}
    for kind, text in SOURCES.items():
        path = d / f"{kind}.prism"
        path.write_text(text)
        model = jaxmc.load_model(str(path), f"p={POINT}")
        out[kind] = (model, model)  # params= makes `p` a parameter
    return out


@pytest.mark.parametrize(("kind", "prop", "traced"), CASES)
def test_eager_and_traced_agree(models, kind, prop, traced):
    fixed, parametric = models[kind]
    eager = np.asarray(jaxmc.solve(fixed, prop, epsilon=1e-10))
    if not traced:
        with pytest.raises(UnsupportedError) as err:
            jaxmc.solve(parametric, prop, params={"p": POINT})
        assert err.value.hint
        return
    value = np.asarray(jaxmc.solve(parametric, prop, params={"p": POINT}))
    assert value.shape == eager.shape
    if eager.dtype == np.bool_:
        assert value.dtype == np.bool_
        assert value == eager
    else:
        np.testing.assert_allclose(value, eager, rtol=1e-7, atol=1e-9)


def test_thresholds_decide_the_direction(models):
    """On the MDP, P(F s=3) lies in [0.175, 0.857] over the schedulers; the
    thresholds without min/max must use the minimum for `>=` and the maximum
    for `<`, on both paths."""
    fixed, parametric = models["mdp"]
    lo = float(jaxmc.solve(fixed, "Pmin=? [ F s=3 ]", epsilon=1e-10))
    hi = float(jaxmc.solve(fixed, "Pmax=? [ F s=3 ]", epsilon=1e-10))
    assert lo < hi
    mid = (lo + hi) / 2
    for prop, expected in [
        (f"P>={mid} [ F s=3 ]", False),  # true only for the best scheduler
        (f"P<{mid} [ F s=3 ]", False),  # false for the best scheduler
        (f"P>={lo / 2} [ F s=3 ]", True),
        (f"P<{(hi + 1) / 2} [ F s=3 ]", True),
    ]:
        assert bool(jaxmc.solve(fixed, prop)) is expected, prop
        assert bool(jaxmc.solve(parametric, prop, params={"p": POINT})) is expected


@pytest.mark.parametrize("prop", ["P=? [ F s=3 ]", "R=? [ F s>=2 ]"])
def test_mdp_without_direction_is_the_same_error(models, prop):
    fixed, parametric = models["mdp"]
    with pytest.raises(ModelCheckingError, match="Pmin=\\?/Pmax=\\?") as eager:
        jaxmc.check(fixed, prop)
    with pytest.raises(ModelCheckingError, match="Pmin=\\?/Pmax=\\?") as traced:
        jaxmc.solve(parametric, prop, params={"p": POINT})
    assert str(eager.value.hint) == str(traced.value.hint)


@pytest.mark.parametrize(
    ("kind", "prop"),
    [
        ("dtmc", "P=? [ F[2,5] s=3 ]"),
        ("dtmc", "P=? [ s!=2 W s=3 ]"),
        ("dtmc", 'R{"r"}=? [ I=3 ]'),
        ("dtmc", "filter(avg, P=? [ F s=4 ], s<3)"),
        ("mdp", "Pmin=? [ F[1,3] s=1 ]"),
        ("dtmc", 'R{"t"}=? [ C ]'),
        ("ctmc", 'R{"t"}=? [ C ]'),
        ("mdp", "Rmax=? [ C ]"),
        ("mdp", "Rmin=? [ C ]"),
        ("ctmc", "R=? [ C<=1 ]"),
        ("ctmc", 'R{"t"}=? [ C<=1.5 ]'),
        ("ctmc", "R=? [ I=1 ]"),
        ("ctmc", "R=? [ C<=p*3 ]"),
        ("ctmc", 'R{"t"}=? [ I=p*2 ]'),
        ("ctmc", "P=? [ F[0.5,1.5] s=3 ]"),
        ("ctmc", "P=? [ s!=4 U>=0.4 s=3 ]"),
        ("ctmc", "P=? [ G>=0.5 s!=4 ]"),
        ("dtmc", "P=? [ F P>0.5 [ X s=1 ] ]"),
        ("dtmc", 'R{"r"}=? [ F P>=0.9 [ F<=3 s>=3 ] ]'),
        ("ctmc", "P=? [ F<=1 P>0.5 [ F<=0.5 s=4 ] ]"),
        ("mdp", "Pmax=? [ F Pmin>0.5 [ X s=3 ] ]"),
    ],
)
def test_gradients_of_planned_properties(models, tmp_path, kind, prop):
    """The derivative in `p` of properties that reach the traced executor
    through the plan (lower step and time bounds, W, I=k, filters, total
    rewards, CSL rewards, nested operators) against central differences of
    the eager checker's values (the nested operators' regions do not
    change within the difference step here)."""
    fixed, parametric = models[kind]
    g = float(jax.grad(lambda p: jaxmc.solve(parametric, prop, params={"p": p}))(POINT))
    h = 1e-5
    path = tmp_path / "m.prism"
    path.write_text(SOURCES[kind])

    def eager(p):
        m = jaxmc.load_model(str(path), f"p={p!r}")
        return float(jaxmc.solve(m, prop, epsilon=1e-12))

    fd = (eager(POINT + h) - eager(POINT - h)) / (2 * h)
    assert g == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_sweep_of_a_threshold_and_a_filter(models, tmp_path):
    """A sweep executes the same plan: a threshold's truth (bool) and a
    filter's value at each point equal the eager checker's there."""
    _, parametric = models["dtmc"]
    path = tmp_path / "m.prism"
    path.write_text(DTMC)
    ps = np.array([0.1, 0.3, 0.6, 0.9])
    for prop in ["P>0.45 [ F<=4 s=3 ]", "filter(max, P=? [ F<=4 s=3 ], s<3)"]:
        swept = jaxmc.sweep(parametric, prop, params={"p": ps})
        eager = [
            np.asarray(
                jaxmc.solve(
                    jaxmc.load_model(str(path), f"p={float(p)!r}"), prop, epsilon=1e-12
                )
            )
            for p in ps
        ]
        assert swept.dtype == np.asarray(eager[0]).dtype
        np.testing.assert_allclose(swept, eager, rtol=1e-9)
    assert swept.shape == ps.shape


@pytest.mark.parametrize(
    ("kind", "prop"), [("dtmc", "E [ F s=4 ]"), ("mdp", "A [ F s>=2 ]")]
)
def test_ctl_has_zero_gradient(models, kind, prop):
    """A top-level E/A formula is 0/1 on the graph: its derivative is 0."""
    _, parametric = models[kind]
    g = jax.grad(lambda p: jaxmc.solve(parametric, prop, params={"p": p}))(POINT)
    assert float(g) == 0.0


def test_nested_region_is_fixed_at_the_build_point(tmp_path):
    """`P>0.5 [ X s=1 ]` holds in {s=2} at p=0.35 and in {s=0, s=2} at p=0.6
    (P(X s=1) is p in s=0). A problem built at 0.35 keeps {s=2} at 0.6: its
    value there is `P=? [ F s=2 ]`'s; a concrete solve at 0.6 (built there)
    is the eager checker's, 1 from s=0."""
    path = tmp_path / "m.prism"
    path.write_text(DTMC)
    model = jaxmc.load_model(str(path), parameters=("p",))
    prop = "P=? [ F P>0.5 [ X s=1 ] ]"

    def eager(p, prop):
        m = jaxmc.load_model(str(path), f"p={p}")
        return float(jaxmc.solve(m, prop, epsilon=1e-12))

    at_035 = float(jaxmc.solve(model, prop, params={"p": 0.35}))
    assert at_035 == pytest.approx(eager(0.35, prop), rel=1e-7)
    at_06 = float(jaxmc.solve(model, prop, params={"p": 0.6}))
    assert at_06 == pytest.approx(eager(0.6, prop), rel=1e-7)
    assert at_06 == pytest.approx(1.0)
    fixed = jaxmc.parametric(model, prop, build_params={"p": 0.35})
    assert fixed.fixed_regions
    assert float(fixed({"p": 0.6})) == pytest.approx(
        eager(0.6, "P=? [ F s=2 ]"), rel=1e-7
    )
    assert float(fixed({"p": 0.6})) < 0.99


def test_sweep_grows_the_uniformisation_terms(models, tmp_path):
    """The number of uniformisation terms is decided at the build point
    (p=0.35, exit rates up to 3p+2) and raised for a sweep whose points have
    larger rates (p up to 6): every point equals the eager checker's."""
    _, parametric = models["ctmc"]
    path = tmp_path / "m.prism"
    path.write_text(CTMC)
    ps = np.array([0.2, 1.5, 6.0])
    for prop in ['R{"t"}=? [ C<=2 ]', "P=? [ F[0.5,2] s=3 ]", "R=? [ I=2 ]"]:
        swept = jaxmc.sweep(parametric, prop, params={"p": ps})
        eager = [
            float(
                jaxmc.solve(
                    jaxmc.load_model(str(path), f"p={float(p)!r}"), prop, epsilon=1e-12
                )
            )
            for p in ps
        ]
        np.testing.assert_allclose(swept, eager, rtol=1e-9)
