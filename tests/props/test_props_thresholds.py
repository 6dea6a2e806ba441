"""Thresholds (`P>=p`, `R<r`, ...) under interval iteration: a comparison the
certified interval [lower, upper] does not decide, in a state whose answer is
needed, is an error (PRISM: "Accuracy of value ... is not enough to compare
to bound ..."); a decided one is answered; plain iteration compares the
approximate value as PRISM's `-valiter` does."""

import math

import pytest

import jaxmc
from jaxmc.errors import ModelCheckingError
from jaxmc.props import UndecidedError


II = dict(method="interval_iteration")

# From s=0 the goal is reached with probability exactly (1/12) / (1/2) = 1/6,
# through a self-loop, so interval iteration never closes the interval on it;
# from the initial state s=3 with probability 1/12.
SIXTH = """
dtmc
module m
  s : [0..3] init 3;
  [] s=3 -> 1/2 : (s'=0) + 1/2 : (s'=2);
  [] s=0 -> 1/12 : (s'=1) + 5/12 : (s'=2) + 1/2 : (s'=0);
  [] s=1 | s=2 -> true;
endmodule
label "goal" = s=1;
rewards "steps"
  s=0 : 1;
endrewards
"""


@pytest.fixture(scope="module")
def sixth(tmp_path_factory):
    path = tmp_path_factory.mktemp("thr") / "sixth.pm"
    path.write_text(SIXTH)
    return jaxmc.load_model(str(path))


def _at_s0(prop: str) -> str:
    return f"filter(forall, {prop}, s=0)"


@pytest.mark.parametrize("cmp", [">=", ">", "<=", "<"])
def test_bound_equal_to_the_value_is_undecided(sixth, cmp):
    with pytest.raises(UndecidedError) as info:
        jaxmc.check(sixth, _at_s0(f'P{cmp}1/6 [ F "goal" ]'), **II)
    err = info.value
    assert isinstance(err, ModelCheckingError)
    assert err.lower < 1 / 6 < err.upper  # strictly: the loop never closes it
    assert err.bound == pytest.approx(1 / 6)
    assert err.count == 1
    assert jaxmc.build(sixth).state(err.state) == {"s": 0}
    text = str(err)
    assert "accuracy" in text and "(s=0)" in text
    assert repr(err.lower) in text and repr(err.upper) in text
    assert "epsilon" in err.hint


@pytest.mark.parametrize(
    "prop,expected",
    [
        ('P>=1/7 [ F "goal" ]', True),
        ('P>=1/5 [ F "goal" ]', False),
        ('P<1/7 [ F "goal" ]', False),
        ('P<1/5 [ F "goal" ]', True),
    ],
)
def test_bounds_away_from_the_value_are_decided(sixth, prop, expected):
    assert jaxmc.check(sixth, _at_s0(prop), **II).value is expected


def test_plain_iteration_compares_the_approximate_value(sixth):
    # No certified interval: no refusal (PRISM -valiter / -jacobi).
    value = jaxmc.check(sixth, _at_s0('P>=1/6 [ F "goal" ]')).value
    assert isinstance(value, bool)


def test_only_needed_states_count(sixth):
    # At the top level only the initial state (value 1/12) matters.
    assert jaxmc.check(sixth, 'P>=1/6 [ F "goal" ]', **II).value is False
    with pytest.raises(UndecidedError, match=r"\(s=3\)"):
        jaxmc.check(sixth, 'P>=1/12 [ F "goal" ]', **II)
    # A filter needs its operand in its own states only.
    outside = 'filter(forall, P>=1/6 [ F "goal" ], s>=1)'
    assert jaxmc.check(sixth, outside, **II).value is False
    with pytest.raises(UndecidedError):
        jaxmc.check(sixth, 'filter(exists, P>=1/6 [ F "goal" ], s<=2)', **II)


def test_nested_threshold_needs_every_state(sixth):
    # The outer value at s=3 depends on the inner answer at s=0.
    with pytest.raises(UndecidedError, match=r"\(s=0\)"):
        jaxmc.check(sixth, 'P>0 [ X P>=1/6 [ F "goal" ] ]', **II)
    assert jaxmc.check(sixth, 'P>0 [ X P>=1/7 [ F "goal" ] ]', **II).value is True


def test_named_property_reused_where_more_states_are_needed(sixth, tmp_path):
    props = tmp_path / "p.props"
    props.write_text('"q": P>=1/6 [ F "goal" ];\n"q";\nP>0 [ X "q" ];\n')
    loaded = jaxmc.load_properties(str(props), sixth)
    assert jaxmc.check(sixth, 1, properties=loaded, **II).value is False
    with pytest.raises(UndecidedError):
        jaxmc.check(sixth, 2, properties=loaded, **II)


def test_reward_threshold(sixth):
    # R[F s>0] from s=0: 1 + 1/2 R  ->  2.
    with pytest.raises(UndecidedError) as info:
        jaxmc.check(sixth, _at_s0("R>=2 [ F s=1|s=2 ]"), **II)
    assert info.value.lower <= 2 <= info.value.upper
    assert jaxmc.check(sixth, _at_s0("R>=3 [ F s=1|s=2 ]"), **II).value is False


def test_infinite_rewards_have_infinite_bounds(tmp_path):
    # s=3 reaches the goal s=1 almost surely (2 steps expected); s=0 never
    # does, and s=4 only with probability 1/2: their rewards are infinite.
    path = tmp_path / "inf.pm"
    path.write_text(
        "dtmc\nmodule m\n  s : [0..4] init 4;\n"
        "  [] s=4 -> 1/2 : (s'=3) + 1/2 : (s'=0);\n"
        "  [] s=3 -> 1/2 : (s'=3) + 1/2 : (s'=1);\n"
        "  [] s<3 -> true;\nendmodule\n"
        "rewards\n  true : 1;\nendrewards\n"
    )
    model = jaxmc.load_model(str(path))
    res = jaxmc.check(model, "R=? [ F s=1 ]", **II)
    states = jaxmc.build(model)
    by_s = {states.state(i)["s"]: i for i in range(states.num_states)}
    for s in (0, 4):
        assert math.isinf(res.values[by_s[s]])
        assert math.isinf(res.lower[by_s[s]]) and math.isinf(res.upper[by_s[s]])
    assert res.lower[by_s[3]] <= 2.0 <= res.upper[by_s[3]]
    assert res.bound_gap is not None and math.isfinite(res.bound_gap)
    assert jaxmc.check(model, "R>5 [ F s=1 ]", **II).value is True


# Pmax from s=0 is 1/6 again; choice [a] loops through s=4, an end component
# that interval iteration collapses before iterating from above.
MDP = """
mdp
module m
  s : [0..4] init 0;
  [a] s=0 -> (s'=4);
  [b] s=0 -> 1/12 : (s'=1) + 5/12 : (s'=2) + 1/2 : (s'=0);
  [] s=4 -> (s'=0);
  [] s=1 | s=2 -> true;
endmodule
label "goal" = s=1;
rewards "r"
  [b] true : 1;
endrewards
"""


@pytest.fixture(scope="module")
def mdp(tmp_path_factory):
    path = tmp_path_factory.mktemp("thr") / "ec.nm"
    path.write_text(MDP)
    return jaxmc.load_model(str(path))


def test_mdp_bounds_survive_end_component_collapse(mdp):
    res = jaxmc.check(mdp, 'Pmax=? [ F "goal" ]', **II)
    assert res.lower is not None
    assert res.lower[0] <= 1 / 6 <= res.upper[0]
    if res.lower[0] < res.upper[0]:
        with pytest.raises(UndecidedError):
            jaxmc.check(mdp, 'Pmax>=1/6 [ F "goal" ]', **II)
    else:  # (solved exactly: the topological solve's closed forms)
        assert jaxmc.check(mdp, 'Pmax>=1/6 [ F "goal" ]', **II).value is True
    assert jaxmc.check(mdp, 'Pmax>=1/7 [ F "goal" ]', **II).value is True
    # Rmin collapses the zero-reward end component {0, 4} (looping there
    # never reaches the target, so [b] is taken: 2 expected times).
    res = jaxmc.check(mdp, "Rmin=? [ F s=1|s=2 ]", **II)
    assert res.lower is not None and res.lower[0] <= 2.0 <= res.upper[0]
    if res.lower[0] < res.upper[0]:
        with pytest.raises(UndecidedError):
            jaxmc.check(mdp, "Rmin>=2 [ F s=1|s=2 ]", **II)
    else:
        assert jaxmc.check(mdp, "Rmin>=2 [ F s=1|s=2 ]", **II).value is True
    assert jaxmc.check(mdp, "Rmin>=3 [ F s=1|s=2 ]", **II).value is False
