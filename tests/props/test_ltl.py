"""LTL inside `P [...]` and `R [...]`: parsed, then rejected by the checker
with a located `UnsupportedError` that names the formula; plain PCTL keeps
its parse."""

from __future__ import annotations

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


LTL = [
    # (property, column of the error, the formula quoted in the message)
    ("Pmax=? [ F (t=1 & X t=1) ]", 10, "F t = 1 & (X t = 1)"),
    ('P=? [ G F "a" ]', 7, 'G F "a"'),
    ("P=? [ F G s=1 ]", 7, "F G s = 1"),
    ('P>0.5 [ (F "a") U "b" ]', 9, 'F "a" U "b"'),
    ("P=? [ X X s=1 ]", 7, "X X s = 1"),
    ("P=? [ !(F s=1) ]", 7, "!(F s = 1)"),
    ("P=? [ !F s=1 ]", 7, "!(F s = 1)"),
    ("P=? [ F s=1 & F s=2 ]", 7, "F s = 1 & (F s = 2)"),
    ("P=? [ (F s=1) | (G t=0) ]", 7, "(F s = 1) | (G t = 0)"),
    ("P=? [ s=0 U (X s=1) ]", 7, "s = 0 U X s = 1"),
    ("P=? [ G (s=1 => X s=2) ]", 7, "G s = 1 => (X s = 2)"),
    ("P=? [ F<=3 X s=1 ]", 7, "F<=3 X s = 1"),
    ("P>=0.5 [ s=1 ]", 10, "s = 1"),
    ('E [ G F "a" ]', 5, 'G F "a"'),
    ('filter(max, P=? [ F "a" & X "b" ], s=0)', 19, 'F "a" & (X "b")'),
]


@pytest.mark.parametrize(("prop", "col", "shown"), LTL)
def test_ltl_in_p_is_a_named_located_unsupported_error(model, prop, col, shown):
    with pytest.raises(UnsupportedError) as e:
        jaxmc.parse_properties(f"\n{prop};", model, file="ltl.props")
    err = e.value
    assert "LTL" in err.message and "not supported yet" in err.message
    assert f"`{shown}`" in err.message
    assert (err.span.file, err.span.line, err.span.column) == ("ltl.props", 2, col)
    assert str(err).startswith(f"ltl.props:2:{col}: unsupported: LTL path formula")


@pytest.mark.parametrize(
    ("prop", "shown"),
    [
        ("R=? [ F (s=1 & X s=2) ]", "F s = 1 & (X s = 2)"),
        ('R=? [ (F "a") U "b" ]', 'F "a" U "b"'),
        ("R=? [ X X s=1 ]", "X X s = 1"),
        ('Rmax=? [ G "a" ]', 'G "a"'),
        ('R=? [ "a" ]', '"a"'),
    ],
)
def test_co_safe_ltl_rewards_are_unsupported(model, prop, shown):
    with pytest.raises(UnsupportedError) as e:
        jaxmc.parse_properties(prop, model)
    assert "co-safe LTL reward formula" in e.value.message
    assert f"`{shown}`" in e.value.message and "not supported yet" in e.value.message
    assert e.value.span.column == prop.index("[") + 3


def test_long_ltl_formulas_are_shortened_in_the_message(model):
    prop = "P=? [ G F (" + " | ".join(f"s={i % 3}" for i in range(40)) + ") ]"
    with pytest.raises(UnsupportedError) as e:
        jaxmc.parse_properties(prop, model)
    quoted = e.value.message.split("`")[1]
    assert quoted.startswith("G F ") and quoted.endswith("...") and len(quoted) <= 60


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
