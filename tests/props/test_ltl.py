"""LTL inside `P [...]`, `E [...]`, `A [...]` and co-safe LTL inside
`R [...]`, checked against values worked out by hand; plain PCTL keeps its
parse."""

from __future__ import annotations

import math

import pytest

import jaxmc
from jaxmc.errors import UnsupportedError
from jaxmc.lang import ast, format_expr, parse_expression


MODEL = """dtmc
module m
  s : [0..2] init 0;
  t : [0..1] init 0;
  [] s<2 -> 0.5 : (s'=s+1) & (t'=1) + 0.5 : (s'=s);
  [] s=2 -> true;
endmodule
label "a" = s=1;
label "b" = s=2;
rewards true : 1; endrewards
"""

B, Op, T, TOp = ast.Binary, ast.BinaryOp, ast.Temporal, ast.TemporalOp


def lit(n):
    return ast.IntLit(n)


def N(x):
    return ast.Ident(x)


def eq(x, n):
    return B(Op.EQ, N(x), lit(n))


def F(x):
    return T(TOp.EVENTUALLY, None, x)


def G(x):
    return T(TOp.GLOBALLY, None, x)


@pytest.fixture(scope="module")
def model():
    return jaxmc.load_model_string(MODEL)


# The chain: s goes 0 → 1 → 2 with probability 1/2 per step (else stays),
# s=2 absorbs; t=1 once s moved. Values by hand: the first time T at s=1 is
# geometric(1/2) (T >= 1), the stay at s=1 too.
LTL = [
    ('P=? [ G F "a" ]', 0.0),
    ('P=? [ F G "b" ]', 1.0),
    ("Pmax=? [ F (t=1 & X t=1) ]", 1.0),
    ("P=? [ X X s=1 ]", 0.5),  # s1=1,s2=1 or s1=0,s2=1
    ("P=? [ !(F s=1) ]", 0.0),
    ("P=? [ (F s=1) | (G t=0) ]", 1.0),
    ("P=? [ G (s=1 => X s=2) ]", 0.5),  # leave s=1 at once
    ("P=? [ s=0 U (X s=1) ]", 1.0),
    ("P=? [ F X s=1 ]", 1.0),
    ("P=? [ X (s=0 & X s=0) ]", 0.25),
    ("P=? [ s=0 ]", 1.0),  # a state formula: holds at time 0
    ('P=? [ (F "a") U "b" ]', 1.0),
    ('P=? [ "a" R !"b" ]', 1.0),  # b needs a first
    ('P=? [ !"b" U "a" & X "a" ]', 0.5),  # stay at s=1 on the step after
    ('P=? [ (X "b") W "b" ]', 0.0),
    ('filter(max, P=? [ (F "a") & X "b" ], s<=1)', 0.5),  # from s=1
]


@pytest.mark.parametrize(("prop", "want"), LTL)
def test_ltl_probabilities(model, prop, want):
    assert jaxmc.check(model, prop).value == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize(
    ("prop", "want"),
    [
        ('E [ G F "a" ]', True),  # stay at s=1 forever
        ('A [ G F "a" ]', False),
        ('A [ F G "b" | F G "a" | G s=0 ]', True),
        ('E [ X "b" ]', False),
        ('A [ !"b" U "a" ]', False),  # s=0 forever
        ('E [ !"b" U "a" ]', True),
    ],
)
def test_ltl_under_e_and_a(model, prop, want):
    assert bool(jaxmc.check(model, prop).value) is want


@pytest.mark.parametrize(
    ("prop", "want"),
    [
        # one reward a step; s=2 is first reached after 2 + 2 steps on average
        ("R=? [ F (s=1 & X s=2) ]", 4.0),
        ('R=? [ "a" U "b" ]', math.inf),  # fails at once from s=0
        ("R=? [ X X s=1 ]", math.inf),  # fails with probability 1/2
        ("R=? [ X true ]", 1.0),
        ("R=? [ F s=1 & F s=2 ]", 4.0),
    ],
)
def test_co_safe_ltl_rewards(model, prop, want):
    assert jaxmc.check(model, prop).value == pytest.approx(want)


@pytest.mark.parametrize("prop", ["P=? [ F<=3 X s=1 ]", "P=? [ X G<=1 s=0 ]"])
def test_time_bounds_inside_ltl_are_refused_as_in_prism(model, prop):
    with pytest.raises(UnsupportedError, match="time-bounded operators inside LTL"):
        jaxmc.check(model, prop)


def test_rewards_of_formulas_that_are_not_co_safe_are_refused(model):
    with pytest.raises(UnsupportedError, match="not co-safe") as e:
        jaxmc.check(model, 'R=? [ G "a" ]')
    assert e.value.span is not None


MDP = """mdp
module m
  s : [0..3] init 0;
  [a] s=0 -> 0.5 : (s'=1) + 0.5 : (s'=2);
  [b] s=0 -> (s'=3);
  [] s=1 -> (s'=2);
  [] s=2 -> 0.5 : (s'=1) + 0.5 : (s'=3);
  [c] s=3 -> (s'=3);
  [d] s=3 -> (s'=0);
endmodule
"""


@pytest.mark.parametrize(
    ("prop", "want"),
    [
        # b then d forever visits s=0 and s=3 infinitely often
        ("Pmax=? [ G F s=0 & G F s=3 ]", 1.0),
        # from s=3 c forever: s=0 only finitely often
        ("Pmin=? [ G F s=0 ]", 0.0),
        ("Pmax=? [ F G s=3 ]", 1.0),
        # a: s=1 is visited before s=3 with probability 1/2 + 1/2 * 1/2
        ("Pmax=? [ !(s=3) U s=1 ]", 0.75),
        ("Pmin=? [ !(s=3) U s=1 ]", 0.0),
        ("Pmax=? [ G !(s=3) ]", 0.0),
        ("Pmin=? [ F s=3 ]", 1.0),
        # X X from s=0: a then s=1 → 2, or s=2 → 1 (1/2): 1/2 * 1/2
        ("Pmax=? [ X X s=1 ]", 0.25),
        # s=3 may go back to s=0 (d) and try again
        ("Pmax=? [ G (s=1 => X s=2) & F s=1 ]", 1.0),
    ],
)
def test_ltl_on_an_mdp(prop, want):
    m = jaxmc.load_model_string(MDP)
    assert jaxmc.check(m, prop).value == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # PRISM's parses are kept: a temporal operator takes the longest operand
        ("P=? [ F s=1 & t=0 ]", F(B(Op.AND, eq("s", 1), eq("t", 0)))),
        ("P=? [ F s=1 U t=0 ]", T(TOp.UNTIL, F(eq("s", 1)), eq("t", 0))),
        ("P=? [ G F s=1|s=2 ]", G(F(B(Op.OR, eq("s", 1), eq("s", 2))))),
        # ... and now also as the operand of a Boolean connective
        (
            "P=? [ s=1 & X t=0 & s=2 ]",
            B(Op.AND, eq("s", 1), T(TOp.NEXT, None, B(Op.AND, eq("t", 0), eq("s", 2)))),
        ),
        ("P=? [ !G s=1 ]", ast.Unary(ast.UnaryOp.NOT, G(eq("s", 1)))),
    ],
)
def test_temporal_operator_operands(text, expected):
    e = parse_expression(text)
    assert e.path == expected
    assert parse_expression(format_expr(e)) == e  # printing round-trips


@pytest.mark.parametrize(
    "prop",
    [
        'P=? [ F "b" ]',
        "P=? [ G<=2 s<2 ]",
        "P=? [ X s=1 ]",
        "P=? [ s=0 U<=2 s=2 ]",
        "P=? [ s<2 W s=2 ]",
        "P=? [ s=2 R s<2 ]",
        "P>=0.5 [ F P>0.1 [ X s=2 ] ]",
        "P=? [ !(P>0.5 [ F s=2 ]) U s=2 ]",
        "R=? [ F s=2 ]",
        "R=? [ C<=3 ]",
        "R=? [ I=2 ]",
    ],
)
def test_pctl_keeps_working(model, prop):
    assert jaxmc.check(model, prop).value is not None


CTMC = """ctmc
module m
  s : [0..2] init 0;
  [] s=0 -> 1 : (s'=1) + 3 : (s'=2);
  [] s=1 -> 2 : (s'=0);
endmodule
rewards s=0 : 1; endrewards
"""


@pytest.mark.parametrize(
    ("prop", "want"),
    [
        # the embedded DTMC: from s=0, to s=1 with probability 1/4
        ("P=? [ X X s=0 ]", 0.25),
        ("P=? [ F (s=1 & X s=0) ]", 0.25),  # s=1 is always left for s=0
        ("P=? [ G F s=0 ]", 0.0),
        # F ((s=1 & X s=0) | F s=2): done after the first stay in s=0 (mean
        # time 1/4, reward rate 1), at s=2 or at the s=0 after s=1
        ("R=? [ F (s=1 & X s=0) | F s=2 ]", 0.25),
        ("R=? [ X X s=0 ]", math.inf),
    ],
)
def test_ltl_on_a_ctmc(prop, want):
    m = jaxmc.load_model_string(CTMC)
    assert jaxmc.check(m, prop).value == pytest.approx(want, abs=1e-6)
